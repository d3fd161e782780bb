"""The resource pools a node sees (structured/internal/incubating/pools_incubating.go, GatherPools).

A pool is one driver's ``spec.pool.name``; only its newest generation counts. For a node the relevant slices are
those naming the node (``nodeName``), those whose ``nodeSelector`` matches it, ``allNodes`` slices, slices with
``perDeviceNodeSelection`` where some device is available on the node, and every slice with ``sharedCounters`` (a
pool's counter sets are needed whatever the node). A pool with fewer slices than ``resourceSliceCount`` is
incomplete (nothing is allocated from it, and "All" requests fail with an error); one with duplicate device names,
duplicate counter set names or counter consumption naming a missing counter set or counter is invalid (nothing is
allocated from it either; the allocation fails with "invalid resource pools were encountered" when nothing else
fits). Pools are ordered by driver then pool name, pools with binding conditions last, and a pool's slices by name:
the allocator's first-fit search takes devices in exactly this order.

Everything here is computed once per Allocator: device entries per slice, and the pools per set of slices, so 500
nodes sharing a network-attached pool share one ``Pool`` and one CEL verdict cache per device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from accelsched.api.selectors import terms_match
from accelsched.dra.allocated import device_key
from accelsched.dra.model import Device, DeviceID, ResourceSlice

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
# Bound on distinct request signatures remembered per device (selectors verdicts); far above what a cluster uses.
MAX_VERDICTS_PER_DEVICE = 256


def selects(
    on_node: str | None, all_nodes: bool | None, selector: Any, node_name: str, labels: Mapping[str, str]
) -> bool | None:
    """NodeMatches for one set of a slice's (or a device's) node fields: nodeName, allNodes or nodeSelector, in that
    order; None when none of them is set."""
    if on_node:
        return on_node == node_name
    if all_nodes:
        return True
    if selector is not None:
        return terms_match(selector, node_name, labels)
    return None


def _num(value: Fraction) -> int | Fraction:
    """Integral amounts as int: the same value, compared and summed several times faster than a Fraction."""
    return int(value) if value.denominator == 1 else value


class Entry:
    """One device of one slice, as the allocator's hot loop reads it (built once per Allocator).

    ``verdicts`` caches, per request signature (class and request selectors), whether the device is selectable,
    or where a CEL runtime error occurred (``("class"|"claim", selector index, message)``). Device attributes never
    change for a slice object and entries live as long as the Allocator (one cluster snapshot), so the cache needs
    no invalidation; it is bounded by MAX_VERDICTS_PER_DEVICE.
    """

    __slots__ = (
        "binding",
        "consumes",
        "device",
        "id",
        "key",
        "multi",
        "per_device",
        "plain_fits",
        "slice",
        "taints",
        "verdicts",
    )

    def __init__(self, slice_: ResourceSlice, device: Device) -> None:
        self.slice = slice_
        self.device = device
        self.id = DeviceID(slice_.driver, slice_.pool.name, device.name)
        self.key = device_key(self.id)
        self.per_device = slice_.per_device_node_selection
        self.multi = device.allow_multiple_allocations
        self.binding = bool(device.binding_conditions)
        # Only NoSchedule and NoExecute prevent allocation; other effects (None) are ignored.
        self.taints = tuple(t for t in device.taints if t.effect in (NO_SCHEDULE, NO_EXECUTE))
        # consumesCounters as (counter set, ((counter, amount), ...)).
        self.consumes = tuple(
            (c.counter_set, tuple((name, _num(amount)) for name, amount in c.counters.items()))
            for c in device.consumes_counters
        )
        self.verdicts: dict = {}
        # The capacity check for a request without capacity requests on an unshared device (None: not known yet).
        self.plain_fits: bool | None = None if device.capacity else True

    def node_matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """Per-device node selection (NodeMatches with the device's fields)."""
        device = self.device
        return bool(selects(device.node_name, device.all_nodes, device.node_selector, node_name, labels))


class Pool:
    """One pool as a node sees it (incubating.Pool): its device entries in search order and its counter sets."""

    __slots__ = (
        "_binding",
        "counter_sets",
        "entries",
        "id",
        "incomplete",
        "invalid",
        "invalid_reason",
        "not_targeting",
    )

    def __init__(self, pool_id: tuple[str, str]) -> None:
        self.id = pool_id  # (driver, pool name)
        self.incomplete = False
        self.invalid = False
        self.invalid_reason = ""
        self.entries: list[Entry] = []  # devices of the slices targeting the node, slices sorted by name
        self.not_targeting: list[Entry] = []  # devices of the pool's other slices (they may consume counters)
        self.counter_sets: dict[str, dict[str, int | Fraction]] = {}
        self._binding: bool | None = None

    def __str__(self) -> str:
        return f"{self.id[0]}/{self.id[1]}"

    @property
    def has_binding_conditions(self) -> bool:
        """Whether a device has binding conditions (once: a pool's entries are fixed when gather hands it out)."""
        if self._binding is None:
            self._binding = any(e.device.binding_conditions for e in self.entries)
        return self._binding


class PoolIndex:
    """Slices indexed once per Allocator: per node name, shared ones, per pool; device entries per slice."""

    def __init__(self, slices: Sequence[ResourceSlice], partitionable: bool) -> None:
        self.partitionable = partitionable
        self.all_slices = list(slices)
        self.on_node: dict[str, list[ResourceSlice]] = {}
        self.shared: list[ResourceSlice] = []
        self.by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
        self._entries: dict[int, list[Entry]] = {}
        self._pools: dict[tuple, Pool] = {}
        # Whole answers of gather for nodes without slices of their own, per verdict of each distinct node selector
        # of the shared slices (the parser interns equal selectors): 100 nodes matching one selector of 2,000
        # network-attached slices gather once. Not used when a shared slice selects per device.
        self._gathered: dict[tuple[bool, ...], list[Pool]] = {}
        for s in self.all_slices:
            if not s.node_name or s.shared_counters:
                self.shared.append(s)
            else:
                self.on_node.setdefault(s.node_name, []).append(s)
            self.by_pool.setdefault((s.driver, s.pool.name), []).append(s)
            self._entries[id(s)] = [Entry(s, d) for d in s.devices]
        # Pool names under which more than one driver publishes counter sets: upstream's counter bookkeeping keys
        # by pool name alone, so these share state (allocator.py).
        drivers_by_name: dict[str, set[str]] = {}
        for s in self.all_slices:
            if s.shared_counters:
                drivers_by_name.setdefault(s.pool.name, set()).add(s.driver)
        self.shared_counter_pool_names = frozenset(n for n, d in drivers_by_name.items() if len(d) > 1)
        selectors: dict[int, tuple] = {}
        for s in self.shared:
            if s.node_selector is not None and not s.shared_counters and not s.all_nodes and not s.node_name:
                selectors.setdefault(id(s.node_selector), s.node_selector)
        self._selectors = list(selectors.values())
        self._per_device = any(s.per_device_node_selection and not s.shared_counters for s in self.shared)

    def entries_of(self, slice_: ResourceSlice) -> list[Entry]:
        return self._entries[id(slice_)]

    def relevant(self, slice_: ResourceSlice, node_name: str, labels: Mapping[str, str]) -> bool | None:
        """Whether a slice belongs to the node's view; None for a slice using no known node selection."""
        if slice_.shared_counters:
            return True  # counter sets are needed to use a pool, whatever their node selection
        chosen = selects(slice_.node_name, slice_.all_nodes, slice_.node_selector, node_name, labels)
        if chosen is not None:
            return chosen
        if slice_.per_device_node_selection:
            return any(e.node_matches(node_name, labels) for e in self.entries_of(slice_))
        return None  # some future node selection: skip the slice, other pools may still do

    def gather(self, node_name: str, labels: Mapping[str, str]) -> list[Pool]:
        """GatherPools for one node: the pools in allocation order (the list is shared: read it, never change it)."""
        local = self.on_node.get(node_name, ())
        answer_key = None
        if not local and not self._per_device:
            answer_key = tuple(terms_match(sel, node_name, labels) for sel in self._selectors)
            cached = self._gathered.get(answer_key)
            if cached is not None:
                return cached
        result = self._gather(node_name, labels, local)
        if answer_key is not None:
            self._gathered[answer_key] = result
        return result

    def _gather(self, node_name: str, labels: Mapping[str, str], local: Sequence[ResourceSlice]) -> list[Pool]:
        pools: dict[tuple[str, str], list[ResourceSlice]] = {}
        matched: dict[int, bool] = {}  # id(node selector) -> whether it matches this node
        for s in (*local, *self.shared):
            if not self.partitionable and (s.per_device_node_selection or s.shared_counters):
                continue
            selector = s.node_selector
            if selector is not None and not s.shared_counters and not s.node_name and not s.all_nodes:
                hit = matched.get(id(selector))
                if hit is None:
                    hit = matched[id(selector)] = terms_match(selector, node_name, labels)
                if not hit:
                    continue
            elif not self.relevant(s, node_name, labels):
                continue
            key = (s.driver, s.pool.name)
            have = pools.get(key)
            if have is None or s.pool.generation > have[0].pool.generation:
                pools[key] = [s]
            elif s.pool.generation == have[0].pool.generation:
                have.append(s)
        result: list[Pool] = []
        with_binding: list[Pool] = []
        for key, slices in pools.items():
            generation, count = slices[0].pool.generation, slices[0].pool.resource_slice_count
            all_for_pool: list[ResourceSlice] | None = None
            if len(slices) != count:
                # Slices for other nodes were not looked at: check the whole pool (checkSlicesInPool).
                everything = self.by_pool[key]
                if any(s.pool.generation > generation for s in everything):
                    continue  # the driver is replacing this generation: ignore the pool
                all_for_pool = [s for s in everything if s.pool.generation == generation]
                if len(all_for_pool) != count:
                    pool = Pool(key)
                    pool.incomplete = True
                    result.append(pool)
                    continue
            pool = self._build(key, slices, all_for_pool)
            (with_binding if pool.has_binding_conditions else result).append(pool)
        result.sort(key=lambda p: p.id)
        with_binding.sort(key=lambda p: p.id)
        return result + with_binding

    def _build(
        self, key: tuple[str, str], slices: list[ResourceSlice], all_for_pool: list[ResourceSlice] | None
    ) -> Pool:
        cache_key = (key, tuple(id(s) for s in slices), all_for_pool is not None and len(all_for_pool) != len(slices))
        pool = self._pools.get(cache_key)
        if pool is None:
            pool = self._pools[cache_key] = build_pool(key, slices, all_for_pool, self)
        return pool


def build_pool(
    key: tuple[str, str], slices: list[ResourceSlice], all_for_pool: list[ResourceSlice] | None, index: PoolIndex
) -> Pool:
    """buildPool: validate and order one pool's slices."""
    pool = Pool(key)
    slices = sorted(slices, key=lambda s: s.name)
    if index.partitionable:
        device_slices = [s for s in slices if not s.shared_counters]
        counter_slices = [s for s in slices if s.shared_counters]
    else:
        device_slices, counter_slices = slices, []
    names: set[str] = set()
    for s in device_slices:
        for d in s.devices:
            if d.name in names:
                return _invalid(pool, f"duplicate device name {d.name}")
            names.add(d.name)
    for s in device_slices:
        pool.entries.extend(index.entries_of(s))
    if not index.partitionable:
        return pool
    for s in counter_slices:
        for counter_set in s.shared_counters:
            if counter_set.name in pool.counter_sets:
                return _invalid(pool, f"duplicate counter set name {counter_set.name}")
            pool.counter_sets[counter_set.name] = {n: _num(v) for n, v in counter_set.counters.items()}
    reason = _counter_consumption_error(pool, slices, index)
    if reason:
        return _invalid(pool, reason)
    if all_for_pool is not None and len(all_for_pool) != len(slices):
        seen = {s.name for s in slices}
        others = [s for s in all_for_pool if s.name not in seen]
        reason = _counter_consumption_error(pool, others, index)
        if reason:
            return _invalid(pool, reason)
        for s in others:
            pool.not_targeting.extend(index.entries_of(s))
    return pool


def _invalid(pool: Pool, reason: str) -> Pool:
    invalid = Pool(pool.id)
    invalid.invalid, invalid.invalid_reason = True, reason
    return invalid


def _counter_consumption_error(pool: Pool, slices: Sequence[ResourceSlice], index: PoolIndex) -> str:
    for s in slices:
        for d in s.devices:
            for consumption in d.consumes_counters:
                counters = pool.counter_sets.get(consumption.counter_set)
                if counters is None:
                    return f"counter set {consumption.counter_set} not found"
                for name in consumption.counters:
                    if name not in counters:
                        return f"counter {name} not found in counter set {consumption.counter_set}"
    return ""
