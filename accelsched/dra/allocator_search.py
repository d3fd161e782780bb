"""The search of one Allocate call of the DRA allocator (dra/allocator.py), upstream's ``allocator`` in
structured/internal/incubating: claims, requests and subrequests in order, exhaustive backtracking over the node's
pools and devices, constraints, counters and consumable capacity, and the allocation results of the first solution.
"""

from __future__ import annotations

import bisect
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from accelsched.api.selectors import NodeSelectorTerm, Requirement
from accelsched.dra import allocated as capacity_math
from accelsched.dra.allocated import AllocatedState
from accelsched.dra.allocator_counters import (
    _counters_fit,
    _LivePools,
    _negative_amounts,
)
from accelsched.dra.allocator_requests import (
    _SHARE_NAMESPACE,
    AllocationError,
    _attribute_key,
    _Constraint,
    _DeadlineExceeded,
    _kobj,
    _MaxSizeExceeded,
    _Request,
    _taint_prevents,
    _verdict,
)
from accelsched.dra.model import (
    ALLOCATION_RESULTS_MAX,
    AllocatedConfig,
    AllocationResult,
    DeviceRequestAllocationResult,
    OpaqueConfig,
    ResourceClaim,
)
from accelsched.dra.pools import Entry, Pool

if TYPE_CHECKING:  # allocator.py imports this module
    from accelsched.dra.allocator import Allocator


class _Search:
    """The state of one Allocate call (upstream's ``allocator``): what is being allocated, results so far."""

    def __init__(
        self,
        a: Allocator,
        node_name: str,
        labels: Mapping[str, str],
        claims: Sequence[ResourceClaim],
        pools: list[Pool],
        allocated: AllocatedState,
    ) -> None:
        self.a = a
        self.f = a.features
        self.node_name = node_name
        self.labels = labels
        self.claims = claims
        self.pools = pools
        self.state = allocated
        self.allocating: dict[str, set[int]] = {}  # by Entry.key
        self.allocating_capacity: dict[str, dict[str, Fraction]] = {}
        self.consumed: dict[str, dict[str, dict]] = {}  # by pool name, as upstream's consumedCounters
        self.cycle: tuple = ()
        self.deadline: float | None = None  # time.monotonic() past which the search gives up
        self.results: list[list[tuple]] = [[] for _ in claims]
        # Per claim: per request, the _Request list (one, or one per subrequest), and node dependent data.
        self.requests: list[list[list[_Request]]] = []
        self.num_devices: dict[tuple[int, int, int], int] = {}
        self.all_devices: dict[tuple[int, int, int], list[tuple[Entry, Pool]]] = {}
        self.selected: dict[tuple[int, int], int] = {}
        self.constraints: list[list[_Constraint]] = []
        for ci, claim in enumerate(claims):
            per_request = a._claim_requests(claim)
            self.requests.append(per_request)  # type: ignore[arg-type]
            min_devices = 0
            for ri, reqs in enumerate(per_request):
                least = None
                for si, req in enumerate(reqs):
                    if isinstance(req, AllocationError):
                        raise req
                    n = self._num_devices(ci, ri, si, req)
                    least = n if least is None or n < least else least
                min_devices += least or 0
            if min_devices > ALLOCATION_RESULTS_MAX:
                raise AllocationError(
                    f"claim {_kobj(claim)}: number of requested devices {min_devices} exceeds the "
                    f"claim limit of {ALLOCATION_RESULTS_MAX}"
                )
            constraints = []
            for i, c in enumerate(claim.spec.constraints):
                if not c.match_attribute and not c.distinct_attribute:
                    raise AllocationError(
                        f"claim {_kobj(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
                    )
                constraints.append(
                    _Constraint(c.requests, c.match_attribute or c.distinct_attribute or "", not c.match_attribute)
                )
            self.constraints.append(constraints)
        # No request asks a negative capacity: what the search takes only ever takes more (see live_pools).
        self.monotone = not any(
            amount < 0
            for reqs in self.requests
            for rs in reqs
            for r in rs
            if isinstance(r, _Request)
            for amount in r.capacities.values()
        )

    # -------------------------------------------------------------------------------- request data

    def _num_devices(self, ci: int, ri: int, si: int, req: _Request) -> int:
        if not req.all_mode:
            self.num_devices[(ci, ri, si)] = req.count
            return req.count
        claim = self.claims[ci]
        devices: list[tuple[Entry, Pool]] = []
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"claim {_kobj(claim)}, request {req.name}: asks for all devices, but resource "
                    f"pool {pool} is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(
                    f"claim {_kobj(claim)}, request {req.name}: asks for all devices, but resource "
                    f"pool {pool} is currently invalid"
                )
            for e in pool.entries:
                if not self.selectable(ci, req, e):
                    continue
                if self.f.consumable_capacity and not self.capacity_fits(req, e):
                    continue
                devices.append((e, pool))
        self.all_devices[(ci, ri, si)] = devices
        self.num_devices[(ci, ri, si)] = len(devices)
        return len(devices)

    def selectable(self, ci: int, req: _Request, e: Entry) -> bool:
        """isSelectable: binding conditions supported, selectors match, reachable from the node."""
        if e.binding and not self.f.device_binding_and_status:
            return False
        verdict = _verdict(e, req)
        if verdict is not True:
            if verdict is False:
                return False
            kind, i, message = verdict  # type: ignore[misc]
            if kind == "class":
                raise AllocationError(f"class {req.sig[0]}: selector #{i}: {message}")
            raise AllocationError(f"claim {_kobj(self.claims[ci])}: selector #{i}: {message}")
        return not e.per_device or e.node_matches(self.node_name, self.labels)

    def capacity_fits(self, req: _Request, e: Entry) -> bool:
        """CmpRequestOverCapacity (an error, a request for a capacity the device lacks, skips the device)."""
        capacity = e.device.capacity
        if not req.capacities:
            if not capacity:
                return True
            allocated, allocating = self.state.capacity_by_key.get(e.key), self.allocating_capacity.get(e.key)
            if allocated is None and allocating is None:
                # Depends on the device alone (its capacities' defaults): computed once.
                if e.plain_fits is None:
                    e.plain_fits = bool(capacity_math.request_fits_capacity({}, capacity, None, None))
                return e.plain_fits
            return bool(capacity_math.request_fits_capacity({}, capacity, allocated, allocating))
        fits = capacity_math.request_fits_capacity(
            req.capacities, capacity, self.state.capacity_by_key.get(e.key), self.allocating_capacity.get(e.key)
        )
        return bool(fits)

    # -------------------------------------------------------------------------------- search

    def one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start_pool: int, start_entry: int) -> bool:
        """allocateOne: allocate device #di of request ri (subrequest si) of claim ci and everything after it."""
        self.a.num_allocate_one += 1
        if self.deadline is not None and not self.a.num_allocate_one & 1023 and time.monotonic() > self.deadline:
            raise _DeadlineExceeded
        if ci >= len(self.claims):
            return True
        per_request = self.requests[ci]
        if ri >= len(per_request):
            try:
                return self.one(ci + 1, 0, 0, 0, False, 0, 0)
            except _MaxSizeExceeded:
                return False
        reqs = per_request[ri]
        req = reqs[si]
        if not in_sub and req.parent is not None:
            all_exceeded = True
            for sub_index in range(len(reqs)):
                try:
                    success = self.one(ci, ri, sub_index, di, True, 0, 0)
                except _MaxSizeExceeded:
                    continue
                all_exceeded = False
                if success:
                    self.selected[(ci, ri)] = sub_index
                    return True
            if all_exceeded:
                raise _MaxSizeExceeded
            return False
        key = (ci, ri, si)
        all_devices = self.all_devices.get(key) if req.all_mode else None
        if req.all_mode and not all_devices:
            return False
        num = self.num_devices[key]
        if di >= num:
            return self.one(ci, ri + 1, 0, 0, False, 0, 0)
        if len(self.results[ci]) + num - di > ALLOCATION_RESULTS_MAX:
            raise _MaxSizeExceeded
        if all_devices is not None:
            entry, pool = all_devices[di]
            undo = self.take(ci, req, entry, pool, True)
            if undo is None:
                return False
            try:
                done = self.one(ci, ri, si, di + 1, in_sub, 0, 0)
            except BaseException:
                self.untake(ci, req, entry, pool, undo)
                raise
            if not done:
                self.untake(ci, req, entry, pool, undo)
            return done

        admin = req.admin
        allocating = self.allocating
        dedicated = self.state.dedicated
        check_capacity = self.f.consumable_capacity
        plain = not req.capacities
        allocated_caps, allocating_caps = self.state.capacity_by_key, self.allocating_capacity
        vkey = req.vkey
        no_binding = not self.f.device_binding_and_status
        pools = self.pools
        dead_key = req.dead_key
        # matchAttribute values fixed by devices taken before this one (they stay so throughout this loop).
        base, sub = (req.parent, req.name) if req.parent is not None else (req.name, None)
        needed = [
            (c.attribute, c.value)
            for c in self.constraints[ci]
            if not c.distinct and c.count > 0 and c.applies(base, sub)
        ]
        if dead_key is None or not self.monotone:
            order: Iterable[int] = range(start_pool, len(pools))
        else:
            live = self.live_pools(req)
            if needed:
                # Only pools with the value fixed (or where a selector fails, which must surface) can serve.
                with_value = self.pools_with(req, *needed[0])
                alive = live.members
                order = [pi for pi in with_value[bisect.bisect_left(with_value, start_pool) :] if pi in alive]
            else:
                order = live.indices[bisect.bisect_left(live.indices, start_pool) :]
        for pi in order:
            pool = pools[pi]
            if pool.incomplete or pool.invalid:
                continue
            if needed and self.pool_mismatches(req, pool, needed):
                continue
            entries = pool.entries
            for ei in range(start_entry if pi == start_pool else 0, len(entries)):
                e = entries[ei]
                key = e.key
                if admin:
                    holders = allocating.get(key)
                    if holders and ci in holders:
                        continue
                elif key in dedicated or allocating.get(key):
                    continue
                # The common case inline: a cached positive verdict, no per-device node selection, plain capacity.
                slow = e.verdicts.get(vkey) is not True or e.per_device or (e.binding and no_binding)
                if slow and not self.selectable(ci, req, e):
                    continue
                plain_fit = plain and e.plain_fits and key not in allocated_caps and key not in allocating_caps
                if check_capacity and not plain_fit and not self.capacity_fits(req, e):
                    continue
                undo = self.take(ci, req, e, pool, False)
                if undo is None:
                    continue
                try:
                    done = self.one(ci, ri, si, di + 1, in_sub, pi, ei + 1)
                except BaseException:
                    self.untake(ci, req, e, pool, undo)
                    raise
                if done:
                    return True
                self.untake(ci, req, e, pool, undo)
        return False

    def pools_with(self, req: _Request, attribute: str, value: object) -> list[int]:
        """The indices of the node's pools where some device has ``value`` for ``attribute``, or where some
        device's selectors fail for ``req`` (never skipped: the loop raises the error), in order."""
        a, pools = self.a, self.pools
        key = (id(pools), attribute, req.vkey)
        index = a._pools_with.get(key)
        if index is None or index[0] is not pools:
            if len(a._pools_with) > 4096:
                a._pools_with.clear()
            by_value: dict[object, list[int]] = {}
            unclean: list[int] = []
            for pi, pool in enumerate(pools):
                if not self.clean(req, pool):
                    unclean.append(pi)
                for v in {_attribute_key(e.device.attributes.get(attribute)) for e in pool.entries}:
                    by_value.setdefault(v, []).append(pi)
            index = a._pools_with[key] = (pools, by_value, unclean, {})
        _, by_value, unclean, merged = index
        found = merged.get(value)
        if found is None:
            found = merged[value] = sorted(set(by_value.get(value, ())) | set(unclean))
        return found

    def clean(self, req: _Request, pool: Pool) -> bool:
        """No device of ``pool`` has a selector error for ``req`` (verdicts are cached per device anyway)."""
        a = self.a
        clean = a._pool_clean.get((id(pool), req.vkey))
        if clean is None:
            clean = a._pool_clean[(id(pool), req.vkey)] = all(_verdict(e, req) in (True, False) for e in pool.entries)
        return clean

    def pool_mismatches(self, req: _Request, pool: Pool, needed: list[tuple[str, object]]) -> bool:
        """Whether no device of ``pool`` has a value a matchAttribute constraint already fixed (then take() fails
        for each of them) and none raises a CEL error for ``req`` (which the loop over them would raise first):
        skipping the pool is what that loop would do, without a take() per device."""
        a = self.a
        for attribute, value in needed:
            values = a._pool_values.get((id(pool), attribute))
            if values is None:
                values = a._pool_values[(id(pool), attribute)] = {
                    _attribute_key(e.device.attributes.get(attribute)) for e in pool.entries
                }
            if value not in values:
                return self.clean(req, pool)
        return False

    def live_pools(self, req: _Request) -> _LivePools:
        """The node's pools that may hold a device ``req`` can take (indices, in order): the others are dead,
        each device of them in use, not selected, without the capacity, beyond the pool's counters or tainted, by
        what the AllocatedState holds. Whatever this search takes elsewhere only takes more, so a dead pool is
        skipped exactly as the loop over its devices would skip them. Kept per pools list and request signature,
        and brought up to date from AllocatedState.changes: only pools whose devices were allocated or released
        are looked at again (most of 2,000 network-attached pools are full in a steady state). Pools with
        per-device node selection (the node decides) and pool names several drivers' counter sets share (the
        cycle decides) are never dead."""
        a, state, pools = self.a, self.state, self.pools
        key = (id(pools), req.dead_key)
        live = a._live.get(key)
        if live is None or live.pools is not pools or live.serial != state.serial:
            if len(a._live) > 4096:
                a._live.clear()
            live = a._live[key] = _LivePools(pools, state.serial, len(state.changes))
            for pi, pool in enumerate(pools):
                live.by_name.setdefault(pool.id[1], []).append(pi)
                if not self.dead(req, pool):
                    live.indices.append(pi)
            live.members.update(live.indices)
            return live
        new = len(state.changes) - live.seen
        if new:
            if new <= len(live.by_name):
                names: Iterable[str] = set(state.changes[live.seen :])
            else:  # a pools list not looked at for long (a node's own): its pools' latest changes instead
                changed = state.pool_changed
                names = [name for name in live.by_name if changed.get(name, 0) > live.seen]
            live.seen = len(state.changes)
            indices = live.indices
            for name in names:
                for pi in live.by_name.get(name, ()):
                    at = bisect.bisect_left(indices, pi)
                    present = at < len(indices) and indices[at] == pi
                    if self.dead(req, pools[pi]):
                        if present:
                            del indices[at]
                            live.members.discard(pi)
                    elif not present:
                        indices.insert(at, pi)
                        live.members.add(pi)
        return live

    def dead(self, req: _Request, pool: Pool) -> bool:
        """No device of ``pool`` can be taken for ``req`` given the AllocatedState alone (see live_pools)."""
        if pool.incomplete or pool.invalid:
            return True  # the loop skips them
        a, f, state = self.a, self.f, self.state
        memo = a._memo_pool.get(id(pool))
        if memo is None:
            memo = a._memo_pool[id(pool)] = pool.id[1] not in a.index.shared_counter_pool_names and not any(
                e.per_device or _negative_amounts(e) for e in pool.entries
            )
        if not memo:
            return False
        dedicated = state.dedicated
        available: Mapping[str, Mapping[str, object]] | None = None
        overdrawn = False
        for e in pool.entries:
            if e.key in dedicated or (e.binding and not f.device_binding_and_status):
                continue
            verdict = _verdict(e, req)
            if verdict is False:
                continue
            if verdict is not True:
                return False  # a CEL error: the loop raises it
            if f.consumable_capacity and not capacity_math.request_fits_capacity(
                req.capacities, e.device.capacity, state.capacity_by_key.get(e.key), None
            ):
                continue
            if e.consumes and not f.partitionable_devices:
                continue
            if f.device_taints and e.taints and _taint_prevents(e.taints, req.tolerations):
                continue
            if e.consumes and not (f.consumable_capacity and e.multi and e.key in state.capacity_by_key):
                if available is None:
                    available, overdrawn = a._available_counters(pool, state, ())
                if overdrawn or not _counters_fit(e, available):
                    continue  # reserve_counters fails for every device consuming counters of an overdrawn pool
            return False
        return True

    def take(self, ci: int, req: _Request, e: Entry, pool: Pool, must: bool) -> tuple | None:
        """allocateDevice: availability, counters, taints, constraints; records the result. None: not usable.
        Returns what ``untake`` needs to roll back."""
        f = self.f
        device_id, key = e.id, e.key
        multi = f.consumable_capacity and e.multi
        holders = self.allocating.get(key)
        if req.admin:
            if not multi and holders and ci in holders:
                return None
        elif key in self.state.dedicated or holders:
            return None
        if e.consumes and not f.partitionable_devices:
            return None
        skip_counters = multi and (key in self.state.capacity_by_key or key in self.allocating_capacity)
        counters_reserved = False
        if e.consumes and not skip_counters:
            if not self.reserve_counters(e, pool):
                return None
            counters_reserved = True
        base, sub = (req.parent, req.name) if req.parent is not None else (req.name, None)
        if f.device_taints and e.taints and _taint_prevents(e.taints, req.tolerations):
            if counters_reserved:
                self.release_counters(e, pool)
            return None
        constraints = self.constraints[ci]
        for n, c in enumerate(constraints):
            if not c.add(base, sub, e.device):
                for k in range(n - 1, -1, -1):
                    constraints[k].remove(base, sub)
                if counters_reserved:
                    self.release_counters(e, pool)
                if must:
                    raise AllocationError(
                        f"claim {_kobj(self.claims[ci])}, request {req.name}: cannot add device {device_id} because a "
                        "claim constraint would not be satisfied"
                    )
                return None
        marked = False
        if not multi:
            if holders is None:
                holders = self.allocating[key] = set()
            holders.add(ci)
            marked = True
        consumed: dict[str, Fraction] = {}
        share_id = None
        capacity_entry_existed = None  # None: no capacity inserted
        if f.consumable_capacity:
            if not self.capacity_fits(req, e):
                self.rollback(ci, e, pool, base, sub, counters_reserved, len(constraints), marked, None, {})
                return None
            if multi:
                consumed = capacity_math.consumed_capacity(req.capacities, e.device.capacity)
                share_id = str(
                    uuid.uuid5(_SHARE_NAMESPACE, f"{_kobj(self.claims[ci])}/{len(self.results[ci])}/{device_id}")
                )
                have = self.allocating_capacity.get(key)
                capacity_entry_existed = have is not None
                if have is None:
                    self.allocating_capacity[key] = dict(consumed)
                else:
                    for name, amount in consumed.items():
                        have[name] = have.get(name, 0) + amount
        self.results[ci].append((req, e, share_id, consumed))
        return (counters_reserved, len(constraints), marked, capacity_entry_existed, consumed, base, sub)

    def untake(self, ci: int, req: _Request, e: Entry, pool: Pool, undo: tuple) -> None:
        counters_reserved, n_constraints, marked, capacity_entry_existed, consumed, base, sub = undo
        self.results[ci].pop()
        self.rollback(
            ci, e, pool, base, sub, counters_reserved, n_constraints, marked, capacity_entry_existed, consumed
        )

    def rollback(
        self,
        ci: int,
        e: Entry,
        pool: Pool,
        base: str,
        sub: str | None,
        counters_reserved: bool,
        n_constraints: int,
        marked: bool,
        capacity_entry_existed: bool | None,
        consumed: Mapping[str, Fraction],
    ) -> None:
        """rollbackDevice: undo in reverse order."""
        key = e.key
        if capacity_entry_existed is not None:
            have = self.allocating_capacity.get(key)
            if have is not None:
                for name, amount in consumed.items():
                    if name in have:
                        have[name] -= amount
                if not any(have.values()):
                    del self.allocating_capacity[key]
            if capacity_entry_existed and key not in self.allocating_capacity:
                self.allocating_capacity[key] = {}
        if marked:
            self.allocating[key].discard(ci)
        constraints = self.constraints[ci]
        for k in range(n_constraints - 1, -1, -1):
            constraints[k].remove(base, sub)
        if counters_reserved:
            self.release_counters(e, pool)

    def reserve_counters(self, e: Entry, pool: Pool) -> bool:
        """checkAvailableCounters: add the device's consumption; False (and nothing added) when over."""
        available, overdrawn = self.a._available_counters(pool, self.state, self.cycle)
        if overdrawn:
            return False
        consumed = self.consumed.get(pool.id[1])
        if consumed is None:
            consumed = self.consumed[pool.id[1]] = {}
        if len(e.consumes) == 1:
            # One counter set (the common case): check before adding, nothing to undo on failure.
            set_name, counters = e.consumes[0]
            limit, used = available.get(set_name), consumed.get(set_name)
            if used is None:
                used = consumed[set_name] = {}
            if limit is not None:
                for name, amount in counters:
                    have = limit.get(name)
                    if have is not None and have < used.get(name, 0) + amount:
                        return False
            for name, amount in counters:
                used[name] = used.get(name, 0) + amount
            return True
        for set_name, counters in e.consumes:
            have = consumed.get(set_name)
            if have is None:
                have = consumed[set_name] = {}
            for name, amount in counters:
                have[name] = have.get(name, 0) + amount
        # Only this device's counters changed; every other one was within limits before, unless the pool is
        # overdrawn by allocated devices (then upstream's check over all counters fails for any device).
        ok = not overdrawn
        if ok:
            for set_name, counters in e.consumes:
                limit, used = available.get(set_name), consumed[set_name]
                if limit is None:
                    continue  # a set of a same-named pool of another driver: upstream never checks it
                for name, _ in counters:
                    have = limit.get(name)
                    if have is not None and have < used[name]:
                        ok = False
                        break
                if not ok:
                    break
        if not ok:
            self.release_counters(e, pool)
        return ok

    def release_counters(self, e: Entry, pool: Pool) -> None:
        consumed = self.consumed[pool.id[1]]
        for set_name, counters in e.consumes:
            have = consumed[set_name]
            for name, amount in counters:
                have[name] -= amount

    # -------------------------------------------------------------------------------- results

    def build(self, ci: int, claim: ResourceClaim) -> AllocationResult:
        f = self.f
        results = []
        for req, e, share_id, consumed in self.results[ci]:
            device = e.device
            results.append(
                DeviceRequestAllocationResult(
                    request=req.result_name,
                    driver=e.id.driver,
                    pool=e.id.pool,
                    device=e.id.device,
                    admin_access=True if req.admin else None,
                    tolerations=req.tolerations,
                    binding_conditions=device.binding_conditions if f.device_binding_and_status else (),
                    binding_failure_conditions=device.binding_failure_conditions if f.device_binding_and_status else (),
                    share_id=share_id,
                    consumed_capacity=consumed,
                )
            )
        node_selector = self.node_selector(ci, claim)
        node_name = None
        if node_selector is not None and len(node_selector) == 1 and not node_selector[0].match_expressions:
            fields = node_selector[0].match_fields
            if (
                len(fields) == 1
                and fields[0].key == "metadata.name"
                and fields[0].operator == "In"
                and len(fields[0].values) == 1
            ):
                node_name = fields[0].values[0]
        return AllocationResult(
            results=tuple(results), config=self.configs(ci, claim), node_selector=node_selector, node_name=node_name
        )

    def configs(self, ci: int, claim: ResourceClaim) -> tuple[AllocatedConfig, ...]:
        """Class configs once per class (listing the requests using it), then the claim's configs."""
        if not claim.spec.config and not any(
            r.class_ is not None and r.class_.config for reqs in self.requests[ci] for r in reqs
        ):
            return ()
        out: list[tuple[str, OpaqueConfig, list[str]]] = []
        class_ranges: dict[str, tuple[int, int]] = {}
        per_request = self.requests[ci]
        for ri, reqs in enumerate(per_request):
            req = reqs[self.selected.get((ci, ri), 0)] if reqs[0].parent is not None else reqs[0]
            class_ = req.class_
            if class_ is None:
                continue
            span = class_ranges.get(class_.name)
            if span is not None:
                for i in range(*span):
                    out[i][2].append(req.result_name)
                continue
            start = len(out)
            for config in class_.config:
                out.append(("FromClass", config, [req.result_name]))
            class_ranges[class_.name] = (start, len(out))
        for config in claim.spec.config:
            if not config.requests:
                out.append(("FromClaim", config, list(config.requests)))
                continue
            # As upstream: the config is added once per request (or chosen subrequest) it names.
            for ri, request in enumerate(claim.spec.requests):
                if request.name in config.requests:
                    out.append(("FromClaim", config, list(config.requests)))
                    continue
                reqs = per_request[ri]
                if reqs[0].parent is None:
                    continue
                chosen = reqs[self.selected.get((ci, ri), 0)]
                if chosen.result_name in config.requests:
                    out.append(("FromClaim", config, list(config.requests)))
        return tuple(
            AllocatedConfig(source, OpaqueConfig(config.driver, config.parameters, tuple(requests)))
            for source, config, requests in out
        )

    def node_selector(self, ci: int, claim: ResourceClaim) -> tuple[NodeSelectorTerm, ...] | None:
        """createNodeSelector: the node's name when any device is node-local or binds to the node, else the
        requirements of the slices' node selectors (one term), else None (available everywhere)."""
        fields: list[Requirement] = []
        expressions: list[Requirement] = []
        for _, e, _, _ in self.results[ci]:
            device, slice_ = e.device, e.slice
            if slice_.per_device_node_selection:
                node_name, selector = device.node_name, device.node_selector
            else:
                node_name, selector = slice_.node_name, slice_.node_selector
            if node_name or device.binds_to_node:
                return (NodeSelectorTerm((), (Requirement("metadata.name", "In", (self.node_name,)),)),)
            if selector is not None:
                if len(selector) == 1:
                    _merge(selector[0].match_fields, fields)
                    _merge(selector[0].match_expressions, expressions)
                elif len(selector) > 1:
                    raise AllocationError(
                        f"create NodeSelector for claim {claim.name}: unsupported "
                        f"ResourceSlice.NodeSelector with {len(selector)} terms"
                    )
        if fields or expressions:
            return (NodeSelectorTerm(tuple(expressions), tuple(fields)),)
        return None


def _merge(source: tuple[Requirement, ...], into: list[Requirement]) -> None:
    for r in source:
        if not any(x.key == r.key and x.operator == r.operator and set(x.values) == set(r.values) for x in into):
            into.append(r)
