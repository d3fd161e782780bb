"""The structured-parameters allocator kube-scheduler 1.36 uses (dynamic-resource-allocation/structured, incubating).

With its default feature gates kube-scheduler 1.36.3 gets the "incubating" implementation (structured/allocator.go
picks the first implementation supporting every enabled feature); this is that algorithm, with the same search order,
so where upstream's choice is deterministic the same devices are picked:

* claims one after the other, each claim's requests in order, ``firstAvailable`` subrequests tried in order (the
  first one that leads to a full solution wins, its name is recorded as ``<request>/<subrequest>``);
* for each wanted device, the node's pools in order (pools.py), devices in slice order, never revisiting an earlier
  device for the same request (combinations, not permutations); exhaustive backtracking, first solution wins;
* a device is a candidate when not in use (adminAccess needs no free device), when the class selectors and then the
  request selectors match (CEL runtime errors abort: "class %s: selector #%d: CEL runtime error: %v"), when it is
  reachable from the node (perDeviceNodeSelection), and when the request's capacity fits (ConsumableCapacity);
  it is taken when its consumesCounters fit what its pool's counter sets have left, no untolerated NoSchedule or
  NoExecute taint is on it and every constraint (matchAttribute, distinctAttribute) still holds;
* ``All`` requests take every matching device on the node, which must all be free, from complete and valid pools.

Performance: an Allocator is built once per cluster snapshot. Pools are gathered once per node (cached per node
name and labels), device entries built once per slice, and each device remembers its selector verdict per request
signature, so CEL runs once per (selectors, device) for the whole run, never per pod. ``allocate`` for a one-device
claim on a node is then a short loop over the node's devices. Pools are pruned without changing any answer: a pool
of which no device can be taken by what is in use (``live_pools``, kept across allocations and updated from the
AllocatedState's changes) and, once a matchAttribute constraint has its value, a pool without a device of that
value (``pools_with``) are skipped, unless a selector fails on one of their devices (its error must surface);
tests/test_dra_allocator_pruning.py compares them with the plain loop step by step.

Counters, as upstream: available and consumed counters are keyed by pool *name* only, so two drivers using the
same pool name (for example both naming their pool after the node) share one entry: the first of them whose
counters are needed in a scheduling cycle defines the available counters for both, and their consumption adds up.
Upstream keeps that cache for one cycle (one Allocator per pod); here it lasts while the same claims are allocated
(node after node) for such colliding names, and for every other pool until the AllocatedState changes (then the
order cannot matter).

This module holds the Allocator and is the public face; the request and constraint model is in
dra/allocator_requests.py, the search of one Allocate call in dra/allocator_search.py and the counter bookkeeping in
dra/allocator_counters.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from accelsched.dra import allocated as capacity_math
from accelsched.dra.allocated import AllocatedState
from accelsched.dra.allocator_counters import (
    _LivePools,
)
from accelsched.dra.allocator_requests import (
    REASON_ALLOCATED,
    REASON_CAPACITY,
    REASON_COUNTERS,
    REASON_TAINTED,
    AllocationError,
    Features,
    _DeadlineExceeded,
    _kobj,
    _MaxSizeExceeded,
    _Request,
    _taint_prevents,
)
from accelsched.dra.allocator_search import (
    _Search,
)
from accelsched.dra.model import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    AllocationResult,
    Device,
    DeviceClass,
    DeviceID,
    DeviceSubRequest,
    DeviceToleration,
    ResourceClaim,
    ResourceSlice,
)
from accelsched.dra.pools import Pool, PoolIndex

__all__ = [
    "REASON_ALLOCATED",
    "REASON_CAPACITY",
    "REASON_COUNTERS",
    "REASON_TAINTED",
    "AllocatedState",
    "AllocationError",
    "Allocator",
    "Features",
]


# ---------------------------------------------------------------------------------------------- allocator


class Allocator:
    """Allocates claims on one node at a time from one snapshot of classes and slices (thread-unsafe)."""

    def __init__(
        self,
        classes: Mapping[str, DeviceClass],
        slices: Iterable[ResourceSlice],
        features: Features = Features(),  # noqa: B008 (a frozen dataclass)
    ) -> None:
        self.classes = classes
        self.features = features
        self.index = PoolIndex(list(slices), features.partitionable_devices)
        self._views: dict[str, tuple[Mapping[str, str], list[Pool]]] = {}
        self._requests: dict[int, tuple[object, list]] = {}
        self._verdict_keys: dict[tuple, int] = {}  # request signature -> small int, the per-device cache key
        self._avail_key: tuple = ()
        self._avail: dict[str, tuple[dict[str, dict], bool]] = {}  # by pool name (see the module docstring)
        self._cycle_key: tuple = ()
        self._cycle_avail: dict[str, tuple[dict[str, dict], bool]] = {}
        # Stats.NumAllocateOneInvocations: how much searching the allocator did (upstream's tests pin it).
        self.num_allocate_one = 0
        # (id(pools list), _Request.dead_key) -> its _LivePools (see _Search.live_pools).
        self._live: dict[tuple[int, tuple], _LivePools] = {}
        self._memo_pool: dict[int, bool] = {}  # id(Pool) -> whether a pool may be found dead (live_pools)
        self._pool_values: dict[tuple[int, str], set] = {}  # (id(Pool), attribute) -> its devices' values
        self._pool_clean: dict[tuple[int, int], bool] = {}  # (id(Pool), vkey) -> no device's selectors fail
        # (id(pools list), attribute, vkey) -> (the list, pool indices per value, unclean ones, merged per value)
        self._pools_with: dict[tuple, tuple] = {}

    # -------------------------------------------------------------------------------- node views

    def pools_for_node(self, node_name: str, node_labels: Mapping[str, str]) -> list[Pool]:
        """GatherPools for the node, cached per node name (and labels)."""
        view = self._views.get(node_name)
        if view is not None and (view[0] is node_labels or view[0] == node_labels):
            return view[1]
        pools = self.index.gather(node_name, node_labels)
        self._views[node_name] = (dict(node_labels), pools)
        return pools

    def devices_for_node(self, node_name: str, node_labels: Mapping[str, str]) -> list[tuple[ResourceSlice, Device]]:
        """The devices the node could get, in search order (complete, valid pools; per-device node selection)."""
        out = []
        for pool in self.pools_for_node(node_name, node_labels):
            if pool.incomplete or pool.invalid:
                continue
            for e in pool.entries:
                if e.per_device and not e.node_matches(node_name, node_labels):
                    continue
                out.append((e.slice, e.device))
        return out

    def why_unusable(
        self,
        node_name: str,
        node_labels: Mapping[str, str],
        device_id: DeviceID,
        allocated: AllocatedState,
        tolerations: tuple[DeviceToleration, ...] = (),
    ) -> str | None:
        """Why a device of the node cannot be taken by a request with ``tolerations`` regardless of selectors:
        REASON_ALLOCATED, REASON_TAINTED, REASON_COUNTERS, REASON_CAPACITY, or None (usable)."""
        for pool in self.pools_for_node(node_name, node_labels):
            for e in pool.entries:
                if e.id != device_id:
                    continue
                multi = self.features.consumable_capacity and e.multi
                if e.key in allocated.dedicated:
                    return REASON_ALLOCATED
                if self.features.device_taints and e.taints and _taint_prevents(e.taints, tolerations):
                    return REASON_TAINTED
                if e.consumes and not (multi and e.key in allocated.capacity_by_key):
                    available, overdrawn = self._available_counters(pool, allocated, ())
                    if overdrawn or any(
                        available.get(set_name, {}).get(name, amount) < amount
                        for set_name, counters in e.consumes
                        for name, amount in counters
                    ):
                        return REASON_COUNTERS
                if self.features.consumable_capacity and e.device.capacity:
                    fits = capacity_math.request_fits_capacity(
                        {}, e.device.capacity, allocated.capacity_by_key.get(e.key), None
                    )
                    if not fits:
                        return REASON_CAPACITY
                return None
        return None

    def _available_counters(self, pool: Pool, allocated: AllocatedState, cycle: tuple) -> tuple[dict[str, dict], bool]:
        """The pool's counters minus what allocated devices consume; True when some counter is overdrawn.

        ``cycle`` identifies the claims being allocated: for a pool name several drivers' counter pools share,
        which one is computed first decides, as in upstream's per-cycle cache."""
        pool_name = pool.id[1]
        key = (allocated.serial, allocated.revision)
        if pool_name in self.index.shared_counter_pool_names:
            key = (*key, cycle)
            if key != self._cycle_key:
                self._cycle_key, self._cycle_avail = key, {}
            cache = self._cycle_avail
        else:
            if key != self._avail_key:
                self._avail_key, self._avail = key, {}
            cache = self._avail
        cached = cache.get(pool_name)
        if cached is not None:
            return cached
        available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
        for entries in (pool.entries, pool.not_targeting):
            for e in entries:
                if not e.consumes or not allocated.key_allocated(e.key):
                    continue
                for set_name, counters in e.consumes:
                    have = available.get(set_name)
                    if have is None:
                        continue
                    for name, amount in counters:
                        if name in have:
                            have[name] -= amount
        overdrawn = any(v < 0 for counters in available.values() for v in counters.values())
        cached = cache[pool_name] = (available, overdrawn)
        return cached

    # -------------------------------------------------------------------------------- allocate

    def allocate(
        self,
        node_name: str,
        node_labels: Mapping[str, str],
        claims: Sequence[ResourceClaim],
        allocated: AllocatedState,
        deadline: float | None = None,
    ) -> list[AllocationResult] | None:
        """Allocate every claim on the node, or None when they do not all fit; AllocationError for errors.

        ``deadline`` (time.monotonic) bounds the search as the Filter's context does upstream (filterTimeout): past
        it the search stops with "node <name>: timed out trying to allocate devices", an error, as upstream."""
        pools = self.pools_for_node(node_name, node_labels)
        search = _Search(self, node_name, node_labels, claims, pools, allocated)
        search.cycle = tuple(map(id, claims))
        search.deadline = deadline
        try:
            done = search.one(0, 0, 0, 0, False, 0, 0)
        except _MaxSizeExceeded:
            done = False
        except _DeadlineExceeded:
            raise AllocationError(f"node {node_name}: timed out trying to allocate devices") from None
        if not done:
            if any(p.invalid for p in pools):
                raise AllocationError("invalid resource pools were encountered", on_node=True)
            return None
        return [search.build(i, claim) for i, claim in enumerate(claims)]

    def _claim_requests(self, claim: ResourceClaim) -> list[list[_Request | AllocationError]]:
        """Per request of the claim: its _Request, or one per subrequest (node independent, cached per claim).

        A validation error takes the place of the request (or subrequest) it is about and ends the list, so that
        the caller raises it in upstream's order (after the node dependent checks of the requests before it)."""
        cached = self._requests.get(id(claim))
        if cached is not None and cached[0] is claim.spec:
            return cached[1]  # type: ignore[return-value]
        out: list[list[_Request | AllocationError]] = []
        for request in claim.spec.requests:
            problem = self._feature_error(claim, request)
            if problem is not None:
                out.append([problem])
                break
            subs = request.first_available or ((request.exactly,) if request.exactly is not None else ())
            parent = request.name if request.first_available else None
            reqs: list[_Request | AllocationError] = []
            for sub in subs:
                try:
                    reqs.append(self._request(claim, sub, parent))
                except AllocationError as exc:
                    reqs.append(exc)
                    break
            out.append(reqs)
            if reqs and isinstance(reqs[-1], AllocationError):
                break
        if len(self._requests) > 4096:
            self._requests.clear()
        self._requests[id(claim)] = (claim.spec, out)
        return out

    def _feature_error(self, claim: ResourceClaim, request) -> AllocationError | None:
        f = self.features
        if request.first_available and not f.prioritized_list:
            return AllocationError(
                f"claim {_kobj(claim)}, request {request.name}: has subrequests, but the "
                "DRAPrioritizedList feature is disabled"
            )
        if not f.consumable_capacity:
            if request.exactly is not None and request.exactly.capacity_requests:
                return AllocationError(
                    f"claim {_kobj(claim)}, request {request.name}: has capacity requests, "
                    "but the DRAConsumableCapacity feature is disabled"
                )
            for sub in request.first_available:
                if sub.capacity_requests:
                    return AllocationError(
                        f"claim {_kobj(claim)}, subrequest {sub.name}: has capacity requests, "
                        "but the DRAConsumableCapacity feature is disabled"
                    )
        if not request.first_available and request.exactly is None:
            return AllocationError(
                f"claim {_kobj(claim)}, request {request.name}: missing device class name (unsupported request type?)"
            )
        return None

    def _request(self, claim: ResourceClaim, spec: DeviceSubRequest, parent: str | None) -> _Request:
        """validateDeviceRequest, the node independent part."""
        if not self.features.admin_access and parent is None and spec.admin_access is not None:
            raise AllocationError(
                f"claim {_kobj(claim)}, request {spec.name}: admin access is requested, but the feature is disabled"
            )
        if not spec.device_class_name:
            raise AllocationError(
                f"claim {_kobj(claim)}, request {spec.name}: missing device class name (unsupported request type?)"
            )
        class_ = self.classes.get(spec.device_class_name)
        if class_ is None:
            raise AllocationError(
                f"claim {_kobj(claim)}, request {spec.name}: could not retrieve device class "
                f"{spec.device_class_name}: deviceclass.resource.k8s.io "
                f'"{spec.device_class_name}" not found'
            )
        if spec.allocation_mode not in (ALLOCATION_MODE_EXACT_COUNT, ALLOCATION_MODE_ALL):
            raise AllocationError(
                f"claim {_kobj(claim)}, request {spec.name}: unsupported count mode {spec.allocation_mode}"
            )
        req = _Request(spec, parent, class_)
        # A device's verdict depends on the selector expressions only, not on the class's name: classes with the same
        # selectors (25 classes backing 25 extended resources) share it.
        req.vkey = self._verdict_keys.setdefault(req.sig[1:], len(self._verdict_keys))
        if not req.admin:
            req.dead_key = (req.vkey, req.tolerations, tuple(sorted(req.capacities.items())))
        return req
