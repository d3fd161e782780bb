"""The cluster's DRA state: classes, slices and claims as kube-scheduler's DRA manager holds them (dra_manager.go),
with the allocated devices kept current as pods are reserved, bound and evicted.

Attached to a ClusterState as ``cluster.dra`` (engine.Session.start) only when the run has DRA objects: a cluster
without any keeps ``None`` and pods without claims never reach this module.

What it keeps, and why:
- ``claims`` by ``namespace/name``, the assume cache: PreBind writes the allocation and ``reservedFor`` here (the
  LIVE mode's ``writer`` also writes them through the API), an evicted pod's reservations are removed as the
  resourceclaim controller would (the claim is deallocated when nobody uses it any more, and a claim made from the
  pod's template is deleted with it).
- ``allocated``: the allocator's AllocatedState, every allocated claim plus the in-flight allocations of Reserve
  (``pending``, SignalClaimPendingAllocation), so the next pod in the same run sees those devices taken.
- ``version``: per node, a counter bumped whenever something that node's allocation can depend on changes (a device
  of a pool the node sees was allocated or released). The DynamicResources Filter caches its per-node verdicts per
  claim spec and recomputes a node only when its version moved: after a bind, one node. Nodes that see the same
  pools of network-attached devices share one answer (``view_key``): the allocator runs once per view.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from accelsched.api.objects import Pod
from accelsched.dra import extended as ext
from accelsched.dra.allocated import AllocatedState
from accelsched.dra.model import (
    FINALIZER,
    IMPLICIT_EXTENDED_RESOURCE_PREFIX,
    RESERVED_FOR_MAX,
    AllocationResult,
    DeviceClass,
    DeviceID,
    DRAInputs,
    PodResourceClaim,
    ResourceClaim,
    ResourceClaimConsumerReference,
)

if TYPE_CHECKING:
    from accelsched.cluster.state import ClusterState


# ---------------------------------------------------------------------------------------------- a pod's claims


def pod_resource_claims(pod: Pod) -> tuple[PodResourceClaim, ...]:
    """spec.resourceClaims, parsed by dra/claims.py (the API helper's), with a plain reading as fallback."""
    raw = (pod.raw.get("spec") or {}).get("resourceClaims")
    if not raw:
        return ()
    try:
        from accelsched.dra import claims as claims_mod

        return tuple(claims_mod.pod_resource_claims(pod))
    except ImportError:  # pragma: no cover - until dra/claims.py exists
        return tuple(
            PodResourceClaim(c.get("name", ""), c.get("resourceClaimName"), c.get("resourceClaimTemplateName"))
            for c in raw
            if isinstance(c, dict)
        )


def claim_name(pod: Pod, pod_claim: PodResourceClaim, claims: dict[str, ResourceClaim]) -> tuple[str | None, bool]:
    """resourceclaim.Name: (the claim's name or None when none was made yet, whether the pod must own it)."""
    if pod_claim.resource_claim_name:
        return pod_claim.resource_claim_name, False
    try:
        from accelsched.dra import claims as claims_mod

        return claims_mod.resolved_claim_name(pod, pod_claim, claims), True
    except ImportError:  # pragma: no cover - until dra/claims.py exists
        for status in (pod.raw.get("status") or {}).get("resourceClaimStatuses") or []:
            if status.get("name") == pod_claim.name:
                return status.get("resourceClaimName"), True
        return None, True


def fingerprint(claim: ResourceClaim) -> str:
    """What an allocation depends on in a claim: its spec (claims made from one template share it)."""
    return _spec_fingerprint(claim.spec)


_FINGERPRINTS: dict[int, tuple[Any, str]] = {}  # id(spec) -> (spec, kept alive so the id stays its own; repr)


def _spec_fingerprint(spec: Any) -> str:
    hit = _FINGERPRINTS.get(id(spec))
    if hit is None or hit[0] is not spec:
        if len(_FINGERPRINTS) > 65536:
            _FINGERPRINTS.clear()
        hit = _FINGERPRINTS[id(spec)] = (spec, repr(spec))
    return hit[1]


def _with_classes(spec: Any, aliases: dict[str, str]) -> Any:
    """``spec`` with each request's device class replaced by its alias (DRAState.allocation_key)."""

    def sub(r: Any) -> Any:
        name = aliases.get(r.device_class_name)
        return r if name is None else dataclasses.replace(r, device_class_name=name)

    requests = tuple(
        dataclasses.replace(
            r,
            exactly=sub(r.exactly) if r.exactly is not None else None,
            first_available=tuple(sub(f) for f in r.first_available),
        )
        for r in spec.requests
    )
    return dataclasses.replace(spec, requests=requests)


# ---------------------------------------------------------------------------------------------- API form


_SERIALS = itertools.count(1)


def _quantity(amount: Fraction) -> str:
    if amount.denominator == 1:
        return str(amount.numerator)
    # Exact where the API's decimal suffixes can say it; finer than a nano rounds up, as resource.Quantity does.
    for suffix, scale in (("m", 1000), ("u", 10**6), ("n", 10**9)):
        scaled = amount * scale
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{-(-amount.numerator * 10**9 // amount.denominator)}n"


def node_selector_dict(terms: Iterable[Any]) -> dict[str, Any]:
    out = []
    for term in terms:
        entry: dict[str, Any] = {}
        for field, reqs in (("matchExpressions", term.match_expressions), ("matchFields", term.match_fields)):
            if reqs:
                entry[field] = [
                    {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
                    for r in reqs
                ]
        out.append(entry)
    return {"nodeSelectorTerms": out}


def allocation_dict(allocation: AllocationResult) -> dict[str, Any]:
    """status.allocation as the API holds it."""
    results = []
    for r in allocation.results:
        item: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
        if r.admin_access is not None:
            item["adminAccess"] = r.admin_access
        if r.tolerations:
            item["tolerations"] = [
                {k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value), ("effect", t.effect),
                                   ("tolerationSeconds", t.toleration_seconds)) if v not in ("", None)}
                for t in r.tolerations
            ]  # fmt: skip
        if r.binding_conditions:
            item["bindingConditions"] = list(r.binding_conditions)
        if r.binding_failure_conditions:
            item["bindingFailureConditions"] = list(r.binding_failure_conditions)
        if r.share_id is not None:
            item["shareID"] = r.share_id
        if r.consumed_capacity:
            item["consumedCapacity"] = {k: _quantity(v) for k, v in r.consumed_capacity.items()}
        results.append(item)
    devices: dict[str, Any] = {"results": results}
    if allocation.config:
        devices["config"] = [
            {
                "source": c.source,
                **({"requests": list(c.config.requests)} if c.config.requests else {}),
                "opaque": {"driver": c.config.driver, "parameters": c.config.parameters},
            }
            for c in allocation.config
        ]
    out: dict[str, Any] = {"devices": devices}
    if allocation.node_selector is not None:
        out["nodeSelector"] = node_selector_dict(allocation.node_selector)
    if allocation.allocation_timestamp:
        out["allocationTimestamp"] = allocation.allocation_timestamp
    return out


def consumer_dict(ref: ResourceClaimConsumerReference) -> dict[str, str]:
    out = {"resource": ref.resource, "name": ref.name, "uid": ref.uid}
    if ref.api_group:
        out = {"apiGroup": ref.api_group, **out}
    return out


# ---------------------------------------------------------------------------------------------- the state


@dataclass
class Pending:
    """An allocation made in Reserve and not yet written by PreBind (kube-scheduler's in-flight allocation)."""

    allocation: AllocationResult
    pods: set[str]  # the pods sharing it (a gang's members may reuse one pending allocation)
    group: str | None = None  # the gang of the pod that made it: only its members share it


class DRAState:
    def __init__(self, inputs: DRAInputs, cluster: ClusterState) -> None:
        self.inputs = inputs
        self.cluster = cluster
        # Distinct for every DRAState of the process (never reused like id()): the plugin keys cached verdicts by it.
        self.serial = next(_SERIALS)
        self.classes: dict[str, DeviceClass] = inputs.classes
        self.slices = inputs.slices
        self.claims: dict[str, ResourceClaim] = inputs.claims
        self.allocated = AllocatedState.from_claims(self.claims.values())
        self.pending: dict[str, Pending] = {}
        self.version = np.zeros(cluster.n, dtype=np.int64)
        self.deallocated = False  # a claim was deallocated (PostFilter, eviction): every waiting pod may retry
        # LIVE mode sets this: called at PreBind with (pod, node name, claim, allocation or None, consumer) and
        # returns an error text or None. Offline it stays None and PreBind records the result here only.
        self.writer: Any = None
        self._allocator: Any = None
        self._pool_nodes: dict[tuple[str, str], np.ndarray] | None = None
        self._sees_devices: np.ndarray | None = None
        self._view_keys: dict[tuple, tuple[Any, int]] = {}  # (node, signatures) -> (its pools list, view_key)
        self._views: dict[tuple[int, ...], tuple[int, Any]] = {}  # ids of a shared view's pools -> (key, pools)
        self._pool_local: dict[int, tuple[bool, Any]] = {}  # id(Pool) -> (whether node-dependent, the pool)
        self._class_aliases: dict[str, str] | None = None
        self._serves: dict[tuple[int, frozenset], bool] = {}  # (id(Pool), request signatures) -> serves none
        self._allocation_keys: dict[int, tuple[Any, str]] = {}  # id(spec) -> (spec, kept alive; allocation_key)
        self.extended = self._extended_classes()
        # Per pod (key) the claims it uses, resolved once: (pod's claim name, claim key or None, must own).
        self._pod_claims: dict[str, list[tuple[str, str | None, bool]]] = {}
        # The claims kube-scheduler created for pods' extended resources (extended.py), by (namespace, owner pod
        # name): findExtendedResourceClaim's answer without a scan of every claim. Built on first use.
        self._extended_claims: dict[tuple[str, str], list[str]] | None = None
        # Per pod (key) its status.extendedResourceClaimStatus once PreBind created its claim.
        self.extended_status: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------------------------ lookups

    @property
    def allocator(self) -> Any:
        if self._allocator is None:
            from accelsched.dra import allocator as alloc_mod

            features = alloc_mod.Features() if hasattr(alloc_mod, "Features") else None
            self._allocator = alloc_mod.Allocator(self.classes, list(self.slices.values()), features)
        return self._allocator

    def _extended_classes(self) -> dict[str, DeviceClass]:
        """ExtendedResourceCache: resource name -> class. A clash on an explicit name goes to the newer class, the
        lower name on a tie; the implicit deviceclass.resource.kubernetes.io/<class> is always the class's own."""
        out: dict[str, DeviceClass] = {}
        for cls in self.classes.values():
            out[IMPLICIT_EXTENDED_RESOURCE_PREFIX + cls.name] = cls
        explicit: dict[str, DeviceClass] = {}
        for cls in self.classes.values():
            name = cls.extended_resource_name
            if not name:
                continue
            other = explicit.get(name)
            if other is not None:
                a, b = _created(cls), _created(other)
                if a < b or (a == b and cls.name >= other.name):
                    continue
            explicit[name] = cls
        out.update(explicit)
        return out

    @property
    def class_aliases(self) -> dict[str, str]:
        """Per DeviceClass that allocates exactly as an earlier one (by name) does, that one: the allocator reads a
        class's selectors and config only (its name appears in error messages alone), so claims that differ in
        such classes alone get the same devices (25 classes over one driver, backing 25 extended resources)."""
        if self._class_aliases is None:
            first: dict[str, str] = {}
            aliases: dict[str, str] = {}
            for name in sorted(self.classes):
                cls = self.classes[name]
                content = repr((cls.selectors, cls.config))
                chosen = first.setdefault(content, name)
                if chosen != name:
                    aliases[name] = chosen
            self._class_aliases = aliases
        return self._class_aliases

    def allocation_key(self, claim: ResourceClaim) -> str:
        """What the allocator's results for ``claim`` depend on in the claim: its spec, with each device class
        standing for all classes that allocate alike (class_aliases). Errors name the class: verdicts that are
        errors are kept with the claims' own fingerprints too (the DynamicResources plugin)."""
        aliases = self.class_aliases
        if not aliases:
            return fingerprint(claim)
        spec = claim.spec
        hit = self._allocation_keys.get(id(spec))
        if hit is None or hit[0] is not spec:
            uses = any(
                sub.device_class_name in aliases
                for r in spec.requests
                for sub in ((r.exactly,) if r.exactly is not None else r.first_available)
            )
            if len(self._allocation_keys) > 65536:
                self._allocation_keys.clear()
            key = repr(_with_classes(spec, aliases)) if uses else _spec_fingerprint(spec)
            hit = self._allocation_keys[id(spec)] = (spec, key)
        return hit[1]

    def pod_claims(self, pod: Pod) -> list[tuple[str, str | None, bool]]:
        """(pod's claim name, ``namespace/claim`` or None when not created yet, whether the pod must own it)."""
        cached = self._pod_claims.get(pod.key)
        if cached is None:
            cached = []
            for pc in pod_resource_claims(pod):
                name, must_own = claim_name(pod, pc, self.claims)
                cached.append((pc.name, f"{pod.namespace}/{name}" if name else None, must_own))
            self._pod_claims[pod.key] = cached
        return cached

    def pool_nodes(self) -> dict[tuple[str, str], np.ndarray]:
        """Per (driver, pool) the node indices that can see it: whose allocations may change with its devices."""
        if self._pool_nodes is None:
            cluster = self.cluster
            masks: dict[tuple[str, str], np.ndarray] = {}
            for s in self.slices.values():
                key = (s.driver, s.pool.name)
                mask = masks.setdefault(key, np.zeros(cluster.n, dtype=bool))
                if s.node_name is not None:
                    if s.node_name in cluster.index:
                        mask[cluster.index[s.node_name]] = True
                elif s.all_nodes:
                    mask[:] = True
                elif s.node_selector is not None:
                    for term in s.node_selector:
                        mask |= cluster.term_mask(term)
                else:  # per-device node selection
                    for d in s.devices:
                        if d.all_nodes:
                            mask[:] = True
                        elif d.node_name is not None and d.node_name in cluster.index:
                            mask[cluster.index[d.node_name]] = True
                        elif d.node_selector is not None:
                            for term in d.node_selector:
                                mask |= cluster.term_mask(term)
            self._pool_nodes = {k: np.flatnonzero(m) for k, m in masks.items()}
            sees = np.zeros(cluster.n, dtype=bool)
            for idx in self._pool_nodes.values():
                sees[idx] = True
            self._sees_devices = sees
        return self._pool_nodes

    @property
    def sees_devices(self) -> np.ndarray:
        """Nodes that can see at least one pool: on the others no claim with a request can be allocated."""
        self.pool_nodes()
        assert self._sees_devices is not None
        return self._sees_devices

    def _bump(self, allocation: AllocationResult) -> None:
        pools = self.pool_nodes()
        seen: set[tuple[str, str]] = set()
        for r in allocation.results:
            key = (r.driver, r.pool)
            if key not in seen:
                seen.add(key)
                idx = pools.get(key)
                if idx is not None:
                    self.version[idx] += 1

    def view_key(self, node: int, signatures: frozenset | None = None) -> int:
        """What the allocator's answer on ``node`` depends on besides the claims and what is in use: the pools it sees.
        Nodes seeing the very same pools (Pool objects, built once per set of slices) of network-attached devices
        get the same allocation, node selector included, so the Filter allocates once per view, not once per node.
        A pool with a node-local device (a slice or device naming a node, per-device node selection, bindsToNode:
        the result or the choice names the node) makes the view the node's own, unless no device of it can serve
        any request (``signatures``: the requests' (class selectors, request selectors), see request_signatures),
        which leaves the search unchanged: then it is left out. Views are small ints: shared ones count up from 0,
        a node's own is ``-1 - node``."""
        n = self.cluster.nodes[node]
        pools = self.allocator.pools_for_node(n.name, n.labels)
        cached = self._view_keys.get((node, signatures))
        if cached is not None and cached[0] is pools:
            return cached[1]
        local = self._pool_local
        ids = []
        key = None
        for p in pools:
            if id(p) not in local:
                local[id(p)] = (_node_dependent(p), p)  # the pool kept: its id stays its own
            if not local[id(p)][0]:
                ids.append(id(p))
            elif signatures is None or not self._serves_none(p, signatures):
                key = -1 - node
                break
        if key is None:
            # The pools are kept with their ids, so no id is reused by another object while the key lives.
            key = self._views.setdefault(tuple(ids), (len(self._views), pools))[0]
        if len(self._view_keys) > 65536:
            self._view_keys.clear()
        self._view_keys[(node, signatures)] = (pools, key)
        return key

    def request_signatures(self, claims: Iterable[ResourceClaim]) -> frozenset | None:
        """The (class selectors, request selectors) of every request and subrequest of ``claims``; None when a
        class is missing (then no pool is left out of a view)."""
        out = set()
        for claim in claims:
            for r in claim.spec.requests:
                for sub in (r.exactly,) if r.exactly is not None else r.first_available:
                    cls = self.classes.get(sub.device_class_name)
                    if cls is None:
                        return None
                    out.add((tuple(cls.selectors), tuple(sub.selectors)))
        return frozenset(out)

    def _serves_none(self, pool: Any, signatures: frozenset) -> bool:
        """Whether no device of ``pool`` is selected by any of the requests: every selector list evaluates to false
        for every device (a CEL error counts as serving: it must surface). Complete, valid pools only."""
        key = (id(pool), signatures)
        hit = self._serves.get(key)
        if hit is None:
            hit = self._serves[key] = (
                not pool.incomplete
                and not pool.invalid
                and not any(
                    _selected(e.device, e.slice.driver, selectors) for e in pool.entries for selectors in signatures
                )
            )
        return hit

    def devices_for_node(self, node: str) -> Any:
        i = self.cluster.index[node]
        return self.allocator.devices_for_node(node, self.cluster.nodes[i].labels)

    # ------------------------------------------------------------------------------------ allocation

    def allocate(
        self, node: int, claims: list[ResourceClaim], deadline: float | None = None
    ) -> list[AllocationResult] | None:
        """The allocator on one node against what is in use now (raises the allocator's AllocationError)."""
        n = self.cluster.nodes[node]
        return self.allocator.allocate(n.name, n.labels, claims, self.allocated, deadline)

    def reserve(
        self, pod: Pod, claims: list[ResourceClaim], allocations: list[AllocationResult], group: str | None = None
    ) -> None:
        """Reserve: the allocations become in flight, their devices taken for everyone else."""
        for claim, allocation in zip(claims, allocations, strict=True):
            self.pending[pending_key(claim)] = Pending(allocation, {pod.key}, group)
            self.allocated.add(allocation)
            self._bump(allocation)

    def share_pending(self, pod: Pod, key: str) -> AllocationResult:
        pending = self.pending[key]
        pending.pods.add(pod.key)
        return pending.allocation

    def unreserve(self, pod: Pod, keys: Iterable[str]) -> None:
        """Unreserve: the pod no longer needs these in-flight allocations; the last one to let go frees them."""
        for key in keys:
            pending = self.pending.get(key)
            if pending is None:
                continue
            pending.pods.discard(pod.key)
            if not pending.pods:
                del self.pending[key]
                self.allocated.remove(pending.allocation)
                self._bump(pending.allocation)

    def bind(self, pod: Pod, key: str, node: str) -> str | None:
        """PreBind for one claim: the pending allocation (if any) written, finalizer added, the pod reserved.
        Returns the API server's refusal, or None."""
        claim = self.claims[key]
        pending = self.pending.get(key)
        allocation = pending.allocation if pending is not None and claim.allocation is None else None
        if len(claim.reserved_for) >= RESERVED_FOR_MAX:
            verb = "add allocation and reservation to" if allocation is not None else "add reservation to"
            return (
                f'{verb} claim {key}: ResourceClaim.resource.k8s.io "{claim.name}" is invalid: status.reservedFor: '
                f"Too many: {len(claim.reserved_for) + 1}: must have at most {RESERVED_FOR_MAX} items"
            )
        consumer = ResourceClaimConsumerReference("pods", pod.name, ext.pod_uid(pod))
        if self.writer is not None:
            error = self.writer(pod, node, claim, allocation, consumer)
            if error:
                return error
        if allocation is not None:
            if FINALIZER not in claim.finalizers:
                claim.finalizers = (*claim.finalizers, FINALIZER)
            claim.allocation = allocation
        if pending is not None:
            pending.pods.discard(pod.key)
            if not pending.pods:
                del self.pending[key]  # now allocated for real: the devices stay taken
        claim.reserved_for.append(consumer)
        return None

    def admit(self, pod: Pod, node: int) -> None:
        """A pod already bound: its allocated claims are reserved for it (as the API would show); a claim the input
        left unallocated is allocated on the pod's node when possible, as it must have been."""
        for _, key, _ in self.pod_claims(pod):
            claim = self.claims.get(key) if key else None
            if claim is None:
                continue
            if claim.allocation is None:
                try:
                    result = self.allocate(node, [claim])
                except Exception:
                    result = None
                if not result:
                    continue
                claim.allocation = result[0]
                if FINALIZER not in claim.finalizers:
                    claim.finalizers = (*claim.finalizers, FINALIZER)
                self.allocated.add(result[0])
                self._bump(result[0])
            if not any(is_consumer(r, pod) for r in claim.reserved_for):
                claim.reserved_for.append(ResourceClaimConsumerReference("pods", pod.name, ext.pod_uid(pod)))

    def deallocate(self, key: str) -> None:
        """PostFilter's (and the resourceclaim controller's) deallocation: allocation and reservations cleared."""
        claim = self.claims[key]
        if claim.allocation is not None:
            self.allocated.remove(claim.allocation)
            self._bump(claim.allocation)
        claim.allocation = None
        claim.reserved_for = []
        if FINALIZER in claim.finalizers:
            claim.finalizers = tuple(f for f in claim.finalizers if f != FINALIZER)
        self.deallocated = True

    def update_claim(self, key: str, claim: ResourceClaim | None) -> None:
        """A claim as the API now shows it (LIVE mode's informer, live/dra.py; None: deleted), taken in place of
        the one held: the devices its old allocation held are released and its new ones taken."""
        old = self.claims.pop(key, None)
        if old is not None and old.allocation is not None:
            self.allocated.remove(old.allocation)
            self._bump(old.allocation)
        if claim is not None:
            self.claims[key] = claim
            if claim.allocation is not None:
                self.allocated.add(claim.allocation)
                self._bump(claim.allocation)
        if old is not None and old.allocation is not None and (claim is None or claim.allocation is None):
            self.deallocated = True
        self._pod_claims.clear()  # a pod's claim may have been created or deleted
        if any(c is not None and ext.is_extended_claim(c) for c in (old, claim)):
            self._extended_claims = None  # the index holds extended resource claims only: rebuilt when one changes

    def forget_pod(self, key: str) -> None:
        """The pod's claims are resolved again next time (LIVE mode: its resourceClaimStatuses were written)."""
        self._pod_claims.pop(key, None)

    # ------------------------------------------------------------------------------------ extended resources

    def extended_claim_key(self, pod: Pod) -> str | None:
        """findExtendedResourceClaim: the claim kube-scheduler created for the pod's extended resources (the
        annotation set, the pod its controller), or None."""
        if self._extended_claims is None:
            index: dict[tuple[str, str], list[str]] = {}
            for key, claim in self.claims.items():
                if ext.is_extended_claim(claim) and claim.owner_pod_name:
                    index.setdefault((claim.namespace, claim.owner_pod_name), []).append(key)
            self._extended_claims = index
        for key in self._extended_claims.get((pod.namespace, pod.name), ()):
            claim = self.claims.get(key)
            if claim is not None and ext.owned_by(pod, claim):
                return key
        return None

    def bind_extended(
        self, pod: Pod, pending_key: str, claim: ResourceClaim, node: str, mappings: list[dict[str, str]]
    ) -> tuple[str | None, str | None]:
        """PreBind for the in-memory ``<extended-resources>`` claim: the API server creates it (named from
        generateName), its allocation and the pod's reservation are written as for any claim, then the pod's
        status.extendedResourceClaimStatus. Returns (the created claim's key or None, the error or None); a claim
        created before the error is left for Unreserve to delete, as upstream. A ``writer`` (live mode) is told of
        the creation first (``create_claim``, with the mappings for the pod's status): it does the API calls."""
        if self.writer is not None and getattr(self.writer, "create_claim", None) is None:
            return None, f"create claim for extended resources {pod.namespace}/{claim.name}: not supported here"
        created = ext.created_claim(claim, self.claims)
        if self.writer is not None:
            error = self.writer.create_claim(pod, node, created, mappings)
            if error:
                return None, error
        self.claims[created.key] = created
        if self._extended_claims is not None:
            self._extended_claims.setdefault((created.namespace, pod.name), []).append(created.key)
        pending = self.pending.pop(pending_key, None)
        if pending is not None:
            self.pending[created.key] = pending
        error = self.bind(pod, created.key, node)
        if error:
            return created.key, error
        if not mappings:
            return created.key, ext.empty_mappings_error(pod)
        status = ext.claim_status(created.name, mappings)
        self.extended_status[pod.key] = status
        raw_status = pod.raw.get("status")
        raw_status = dict(raw_status) if isinstance(raw_status, dict) else {}
        pod.raw["status"] = {**raw_status, "extendedResourceClaimStatus": status}
        return created.key, None

    def delete_claim(self, key: str, retry: bool = True) -> None:
        """The claim is deleted (an extended resource claim: by PostFilter when left from an earlier cycle, by
        Unreserve when PreBind created it): its devices are free again. ``retry``: waiting pods may try again (not
        after Unreserve, whose devices were only its own pod's in-flight ones)."""
        claim = self.claims.pop(key, None)
        if claim is None:
            return
        self._extended_claims = None
        self.deallocated = self.deallocated or retry
        if claim.allocation is not None:
            self.allocated.remove(claim.allocation)
            self._bump(claim.allocation)
        pending = self.pending.pop(key, None)
        if pending is not None:
            self.allocated.remove(pending.allocation)
            self._bump(pending.allocation)

    # ------------------------------------------------------------------------------------ eviction

    def release_pod(self, pod: Pod) -> list[tuple[str, ResourceClaim, ResourceClaim | None]]:
        """The pod is deleted (preempted): as the resourceclaim controller does, it leaves each claim's reservedFor;
        a claim nobody uses any more is deallocated, and one made from the pod's template is deleted. Returns what
        ``restore_pod`` needs to undo it (a gang's preemption that does not stand)."""
        undo = []
        keys = [key for _, key, _ in self.pod_claims(pod)]
        extended_key = self.extended_claim_key(pod)
        for key in [*keys, extended_key] if extended_key else keys:
            claim = self.claims.get(key) if key else None
            if claim is None or not any(is_consumer(r, pod) for r in claim.reserved_for):
                continue
            before = copy.copy(claim)
            before.reserved_for = list(claim.reserved_for)
            owned = key == extended_key or (
                claim.owner_pod_uid == pod.uid and (bool(pod.uid) or claim.owner_pod_name == pod.name)
            )
            claim.reserved_for = [r for r in claim.reserved_for if not is_consumer(r, pod)]
            if owned:
                del self.claims[key]
                if key == extended_key:
                    self._extended_claims = None
                if claim.allocation is not None:
                    self.allocated.remove(claim.allocation)
                    self._bump(claim.allocation)
                undo.append((key, before, None))
                continue
            if not claim.reserved_for and FINALIZER in claim.finalizers:
                self.deallocate(key)
            undo.append((key, before, claim))
        if undo:
            self.deallocated = True
        return undo

    def restore_pod(self, undo: list[tuple[str, ResourceClaim, ResourceClaim | None]]) -> None:
        for key, before, now in reversed(undo):
            current = self.claims.get(key)
            if current is not None and current.allocation is not None:
                self.allocated.remove(current.allocation)
                self._bump(current.allocation)
            if now is None:
                self.claims[key] = before
                self._extended_claims = None
            else:
                self.claims[key] = now
                now.allocation, now.reserved_for = before.allocation, before.reserved_for
                now.finalizers = before.finalizers
            if before.allocation is not None:
                self.allocated.add(before.allocation)
                self._bump(before.allocation)

    # ------------------------------------------------------------------------------------ for explain and output

    def pod_claim_results(self, pod: Pod) -> list[dict[str, Any]]:
        """``-o json``'s ``claims`` of a pod: per pod claim the claim it resolved to and the devices allocated."""
        out = []
        for name, key, _ in self.pod_claims(pod):
            claim = self.claims.get(key) if key else None
            allocation = None
            if claim is not None:
                allocation = claim.allocation or (self.pending[key].allocation if key in self.pending else None)
            results = [
                {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
                for r in (allocation.results if allocation is not None else ())
            ]
            out.append({"name": name, "resourceClaimName": key.split("/", 1)[1] if key else None, "results": results})
        key = self.extended_claim_key(pod)
        claim = self.claims.get(key) if key else None
        if claim is not None and claim.allocation is not None:
            # The claim kube-scheduler created for the pod's extended resources: it has no entry in the pod's
            # spec.resourceClaims, so it goes by its in-memory name (specialClaimInMemName).
            results = [
                {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
                for r in claim.allocation.results
            ]
            out.append({"name": ext.SPECIAL_CLAIM_NAME, "resourceClaimName": claim.name, "results": results})
        return out

    def claims_out(self) -> list[dict[str, Any]]:
        """Every ResourceClaim as the API would hold it after kube-scheduler's PreBind (``-o yaml``)."""
        out = []
        for claim in self.claims.values():
            obj = copy.deepcopy(claim.raw) if claim.raw else {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"namespace": claim.namespace, "name": claim.name},
            }  # fmt: skip
            meta = obj.setdefault("metadata", {})
            if claim.finalizers:
                meta["finalizers"] = list(claim.finalizers)
            status: dict[str, Any] = dict(obj.get("status") or {})
            status.pop("allocation", None)
            status.pop("reservedFor", None)
            if claim.allocation is not None:
                status["allocation"] = allocation_dict(claim.allocation)
            if claim.reserved_for:
                status["reservedFor"] = [consumer_dict(r) for r in claim.reserved_for]
            if status:
                obj["status"] = status
            else:
                obj.pop("status", None)
            out.append(obj)
        return out

    def allocated_by(self, device: DeviceID) -> list[tuple[str, list[str]]]:
        """The claims holding ``device`` (allocated or in flight) and, per claim, the pods it is reserved for."""
        out = []
        for key, claim in self.claims.items():
            allocation = claim.allocation or (self.pending[key].allocation if key in self.pending else None)
            if allocation is None or not any(r.device_id == device for r in allocation.results):
                continue
            pods = [f"{claim.namespace}/{r.name}" for r in claim.reserved_for if r.resource == "pods"]
            if key in self.pending:
                pods += sorted(p for p in self.pending[key].pods if p not in pods)
            out.append((key, pods))
        return out


def _selected(device: Any, driver: str, signature: tuple[tuple[str, ...], tuple[str, ...]]) -> bool:
    """The class selectors, then the request's, as the allocator evaluates them; True on a CEL error."""
    from accelsched.dra.cel import CELError, compile_selector

    try:
        return all(compile_selector(e).matches(device, driver) for selectors in signature for e in selectors)
    except CELError:
        return True


def _node_dependent(pool: Any) -> bool:
    """Whether allocating from ``pool`` can depend on which node asks (see DRAState.view_key)."""
    return any(e.per_device or e.slice.node_name or e.device.binds_to_node for e in pool.entries)


def pending_key(claim: ResourceClaim) -> str:
    """Where an in-flight allocation is kept: the claim's key; the in-memory extended resource claims of several
    pods share one name, so theirs goes by its temporary uid too (upstream keys all of them by uid)."""
    if claim.name == ext.SPECIAL_CLAIM_NAME:
        return f"{claim.key}#{claim.uid}"
    return claim.key


def is_consumer(ref: ResourceClaimConsumerReference, pod: Pod) -> bool:
    """IsReservedForPod for one entry: by uid; a pod without one (offline) by name, with the uid DRA gave it or
    none (a hand-written input)."""
    if ref.resource != "pods":
        return False
    if pod.uid:
        return ref.uid == pod.uid
    return ref.name == pod.name and ref.uid in ("", ext.pod_uid(pod))


def _created(cls: DeviceClass) -> str:
    return str(((cls.raw or {}).get("metadata") or {}).get("creationTimestamp") or "")


def dra_state(cluster: Any) -> DRAState | None:
    state = getattr(cluster, "dra", None)
    return state if isinstance(state, DRAState) else None
