"""What is in use cluster-wide, and consumable-capacity arithmetic (structured/schedulerapi, consumable_capacity.go).

``AllocatedState`` is the allocator's view of the claims already allocated (or in flight): dedicated devices,
shared devices (a device with ``allowMultipleAllocations`` allocated under a share ID) and the capacity those shares
consume. kube-scheduler builds it from every allocated ResourceClaim (dynamicresources/allocateddevices.go,
``foreachAllocatedDevice``); results with adminAccess do not count as in use. Reserve/Unreserve and preemption keep
it current with ``add``/``remove`` instead of rebuilding it.

The capacity functions follow consumable_capacity.go: a request's consumption of one capacity is the requested
amount rounded up by the capacity's requestPolicy (or the policy's default, or the whole capacity when nothing is
requested), and a share fits when everything consumed stays within the capacity's value.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from fractions import Fraction

from accelsched.dra.model import (
    AllocationResult,
    CapacityRequestPolicy,
    DeviceCapacity,
    DeviceID,
    ResourceClaim,
)

_serials = itertools.count(1)


def device_key(device_id: DeviceID) -> str:
    """A device's key in the allocator's sets: ``driver/pool/device`` (unambiguous: driver names and device names
    hold no "/"), a str, whose hash Python caches, so membership tests in the hot loop cost next to nothing."""
    return f"{device_id.driver}/{device_id.pool}/{device_id.device}"


class AllocatedState:
    """Devices in use cluster-wide (``schedulerapi.AllocatedState``).

    ``devices``: dedicated allocations; ``shared``: ``(DeviceID, share_id)`` pairs; ``capacity``: consumed capacity
    per device (qualified capacity name -> amount) summed over its shares. Internally keyed by ``device_key``.
    ``revision`` changes on every ``add`` or ``remove`` so an Allocator's caches derived from the state (available
    counters) know when to recompute; ``changes`` lists the pool name of every result added or removed, in order, and
    ``pool_changed`` where in it each pool name last appears, so caches of single pools (the allocator's pools of
    which no device can be taken) update only what changed.
    """

    __slots__ = (
        "_ids",
        "capacity_by_key",
        "changes",
        "consumable_capacity",
        "dedicated",
        "pool_changed",
        "revision",
        "serial",
        "shared_count",
        "shares",
    )

    def __init__(self, consumable_capacity: bool = True) -> None:
        self.dedicated: set[str] = set()
        self.shares: set[tuple[str, str]] = set()
        self.shared_count: dict[str, int] = {}
        self.capacity_by_key: dict[str, dict[str, Fraction]] = {}
        self._ids: dict[str, DeviceID] = {}
        # With DRAConsumableCapacity off, shared results count as dedicated (GatherAllocatedState).
        self.consumable_capacity = consumable_capacity
        self.serial = next(_serials)
        self.revision = 0
        self.changes: list[str] = []
        self.pool_changed: dict[str, int] = {}  # pool name -> len(changes) after its latest change

    @classmethod
    def from_claims(cls, claims: Iterable[ResourceClaim], consumable_capacity: bool = True) -> AllocatedState:
        state = cls(consumable_capacity)
        for claim in claims:
            if claim.allocation is not None:
                state.add(claim.allocation)
        return state

    # Views, for reading (tests, explanations); the allocator reads the keyed sets.
    @property
    def devices(self) -> frozenset[DeviceID]:
        return frozenset(self._ids[k] for k in self.dedicated)

    @property
    def shared(self) -> frozenset[tuple[DeviceID, str]]:
        return frozenset((self._ids[k], share) for k, share in self.shares)

    @property
    def capacity(self) -> dict[DeviceID, dict[str, Fraction]]:
        return {self._ids[k]: dict(v) for k, v in self.capacity_by_key.items()}

    def copy(self) -> AllocatedState:
        other = AllocatedState(self.consumable_capacity)
        other.dedicated = set(self.dedicated)
        other.shares = set(self.shares)
        other.shared_count = dict(self.shared_count)
        other.capacity_by_key = {k: dict(c) for k, c in self.capacity_by_key.items()}
        other._ids = dict(self._ids)
        return other

    def add(self, allocation: AllocationResult) -> None:
        """Count an allocation as in use (allocateddevices.go addDevices)."""
        self.revision += 1
        self._changed(allocation)
        for result in allocation.results:
            if result.admin_access:
                continue  # "Is not considered as allocated."
            key = self._key(result.device_id)
            if self.consumable_capacity and result.share_id is not None:
                share = (key, result.share_id)
                if share not in self.shares:
                    self.shares.add(share)
                    self.shared_count[key] = self.shared_count.get(key, 0) + 1
                if result.consumed_capacity:
                    consumed = self.capacity_by_key.setdefault(key, {})
                    for name, amount in result.consumed_capacity.items():
                        consumed[name] = consumed.get(name, 0) + amount
                continue
            self.dedicated.add(key)

    def remove(self, allocation: AllocationResult) -> None:
        """Release an allocation (allocateddevices.go removeDevices)."""
        self.revision += 1
        self._changed(allocation)
        for result in allocation.results:
            if result.admin_access:
                continue
            key = self._key(result.device_id)
            if self.consumable_capacity and result.share_id is not None:
                share = (key, result.share_id)
                if share in self.shares:
                    self.shares.discard(share)
                    left = self.shared_count[key] - 1
                    if left:
                        self.shared_count[key] = left
                    else:
                        del self.shared_count[key]
                consumed = self.capacity_by_key.get(key)
                if result.consumed_capacity and consumed is not None:
                    for name, amount in result.consumed_capacity.items():
                        if name in consumed:
                            consumed[name] -= amount
                    if not any(consumed.values()):  # ConsumedCapacityCollection.Remove drops an empty entry
                        del self.capacity_by_key[key]
                continue
            self.dedicated.discard(key)

    def _changed(self, allocation: AllocationResult) -> None:
        for result in allocation.results:
            self.changes.append(result.pool)
            self.pool_changed[result.pool] = len(self.changes)

    def _key(self, device_id: DeviceID) -> str:
        key = device_key(device_id)
        self._ids.setdefault(key, device_id)
        return key

    def is_allocated(self, device_id: DeviceID) -> bool:
        """internal.IsDeviceAllocated: dedicated, shared, or with consumed capacity (counts against counters)."""
        return self.key_allocated(device_key(device_id))

    def key_allocated(self, key: str) -> bool:
        return key in self.dedicated or key in self.shared_count or key in self.capacity_by_key


# ---------------------------------------------------------------------------------------------- capacity


def _value(amount: Fraction) -> int:
    """resource.Quantity.Value(): the amount rounded up to an integer."""
    return math.ceil(amount)


def _round_up_range(requested: Fraction, policy: CapacityRequestPolicy) -> Fraction:
    valid_range = policy.valid_range
    assert valid_range is not None
    if requested < valid_range.min:
        return valid_range.min
    if valid_range.step is None:
        return requested
    minimum, step = _value(valid_range.min), _value(valid_range.step)
    n, mod = divmod(_value(requested) - minimum, step)
    return Fraction(minimum + step * (n + (1 if mod else 0)))


def consumed_amount(requested: Fraction | None, capacity: DeviceCapacity) -> Fraction:
    """calculateConsumedCapacity: what a request for ``requested`` (None: nothing asked) takes of ``capacity``."""
    policy = capacity.request_policy
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else capacity.value
    if policy is None:
        return requested
    if policy.valid_range is not None:
        return _round_up_range(requested, policy)
    if policy.valid_values:
        for value in policy.valid_values:  # sorted ascending (API validation)
            if requested <= value:
                return value
    return requested


def violates_policy(amount: Fraction, policy: CapacityRequestPolicy | None) -> bool:
    if policy is None:
        return False
    if policy.default is not None and amount == policy.default:
        return False
    if policy.valid_range is not None:
        valid_range = policy.valid_range
        if valid_range.max is not None and amount > valid_range.max:
            return True
        if valid_range.step is not None:
            return (_value(amount) - _value(valid_range.min)) % _value(valid_range.step) != 0
        return False
    if policy.valid_values:
        return amount not in policy.valid_values
    return False


def consumed_capacity(requests: Mapping[str, Fraction], capacity: Mapping[str, DeviceCapacity]) -> dict[str, Fraction]:
    """GetConsumedCapacityFromRequest: one entry per capacity of the device."""
    return {name: consumed_amount(requests.get(name), cap) for name, cap in capacity.items()}


def request_fits_capacity(
    requests: Mapping[str, Fraction],
    capacity: Mapping[str, DeviceCapacity],
    allocated: Mapping[str, Fraction] | None,
    allocating: Mapping[str, Fraction] | None,
) -> bool | None:
    """CmpRequestOverCapacity: True when the request fits what is left; None when it names a capacity the device
    lacks (upstream's error, which makes the device be skipped)."""
    for name in requests:
        if name not in capacity:
            return None
    for name, cap in capacity.items():
        amount = consumed_amount(requests.get(name), cap)
        if violates_policy(amount, cap.request_policy):
            return False
        total = amount
        if allocated is not None and name in allocated:
            total += allocated[name]
        if allocating is not None and name in allocating:
            total += allocating[name]
        if total > cap.value:
            return False
    return True
