"""DynamicResources: kube-scheduler 1.36's DRA plugin (plugins/dynamicresources/dynamicresources.go).

Extension points, as upstream: PreEnqueue (every claim exists), PreFilter (classes exist, in-flight allocations,
allocated claims' node selectors), Filter (the structured allocator, per node), PostFilter (deallocate a claim that
kept the pod off a node), Score (firstAvailable: 8 - index of the subrequest chosen, normalized), Reserve /
Unreserve (the allocation is in flight: its devices are taken for the next pod) and PreBind (allocation, finalizer
and ``reservedFor`` written; in live mode through ``cluster.dra.writer``).

Every "unschedulable" status of this plugin is UnschedulableAndUnresolvable (statusUnschedulable), so preemption
never counts a node DRA rejected as helpful. A per-node allocator error wrapping ErrFailedAllocationOnNode is that
node's reason verbatim; any other allocator error (a CEL runtime error) is an Error that aborts the attempt.

Filter is columnar: per claim spec (the claims made from one template share it) a verdict per node is kept with the
node's DRA version (dra.state), and only nodes whose version moved since are allocated again, so after a bind one
node is recomputed, not all. A pod without claims is skipped at PreFilter and costs a dict lookup.

kube-scheduler runs it right before DefaultPreemption (applyDynamicResources), so its PostFilter speaks first in
every FailedScheduling message: a pod without claims gets ``no new claims to deallocate, preemption: ...``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.config.fields import Fields
from accelsched.dra import extended
from accelsched.dra.model import AllocationResult, ResourceClaim
from accelsched.dra.state import DRAState, fingerprint, is_consumer, pending_key, pod_resource_claims
from accelsched.framework import gang
from accelsched.framework.interface import (
    MAX_NODE_SCORE,
    PASS,
    SKIP,
    SUCCESS,
    Code,
    CycleState,
    FilterResult,
    NodeExplanation,
    PluginError,
    Status,
    default_normalize,
    unschedulable,
)

NAME = "DynamicResources"
NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"
STILL_NOT_SCHEDULABLE = "still not schedulable"
DEALLOCATED = "deallocation of ResourceClaim completed"
DELETED = "deletion of ResourceClaim completed"  # an extended resource claim from an earlier cycle
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
FIRST_AVAILABLE_MAX = 8  # resourceapi.FirstAvailableDeviceRequestMaxSize
# CycleState.Read's fwk.ErrNotFound: what PostFilter answers when PreFilter never ran (an earlier PreFilter plugin
# rejected the pod as unresolvable), as an Error that stops the PostFilter plugins after it.
STATE_NOT_FOUND = "not found"
ARGS = ("filterTimeout", "bindingTimeout")
FILTER_TIMEOUT_DEFAULT = 10.0  # DynamicResourcesFilterTimeoutDefault
BINDING_TIMEOUT_DEFAULT = 600.0  # DynamicResourcesBindingTimeoutDefault  # DynamicResourcesArgs

_OK, _CANNOT, _ON_NODE, _ERROR = 0, 1, 2, 3


def _unresolvable(reason: str) -> Status:
    """statusUnschedulable: always UnschedulableAndUnresolvable in 1.36."""
    return unschedulable(NAME, reason, resolvable=False)


def pod_claims(pod: Pod) -> list[Any]:
    """spec.resourceClaims as written (the cheap test for "has claims")."""
    return list((pod.raw.get("spec") or {}).get("resourceClaims") or [])


class _Verdicts:
    """Per node, for one list of claim specs: the allocator's answer and the node's DRA version it holds for."""

    def __init__(self, n: int) -> None:
        self.version = np.full(n, -1, dtype=np.int64)
        self.code = np.zeros(n, dtype=np.int8)
        self.results: list[list[AllocationResult] | None] = [None] * n
        self.messages: dict[int, tuple[str, tuple]] = {}  # node -> (error, the _Group.tag it was found for)
        self.score = np.full(n, -1, dtype=np.int64)  # Score's raw firstAvailable points of the results; -1: not yet


@dataclass
class _Cycle:
    """stateData: the pod's claims and what Filter found, for the later extension points of the same cycle."""

    claims: list[ResourceClaim] = field(default_factory=list)
    to_allocate: list[int] = field(default_factory=list)  # indices of claims the allocator must allocate
    reused: dict[int, AllocationResult] = field(default_factory=dict)  # in-flight allocations shared in a gang
    available_on: dict[int, np.ndarray] = field(default_factory=dict)  # allocated claims: where they are usable
    # Per group of nodes (the code of extended.node_groups; 0 for every node when the pod has no extended
    # resource a DeviceClass backs) what the allocator allocates there, in to_allocate order (the extended resource
    # claim replaced by the group's own variant), and its verdicts. No entry: nothing to allocate there.
    groups: dict[int, _Group] = field(default_factory=dict)
    extended: _Extended | None = None
    unavailable: set[int] = field(default_factory=set)
    reserved: list[str] = field(default_factory=list)  # claim keys whose allocation Reserve put in flight
    bound: list[str] = field(default_factory=list)  # claim keys PreBind reserved for the pod

    @property
    def empty(self) -> bool:
        return not self.claims

    def code(self, node: int) -> int:
        return int(self.extended.groups.code[node]) if self.extended is not None else 0

    def group(self, node: int) -> _Group | None:
        return self.groups.get(self.code(node))


@dataclass
class _Group:
    claims: list[ResourceClaim]
    verdicts: _Verdicts
    mappings: list[dict[str, str]] = field(default_factory=list)  # the extended resource claim's request mappings
    # Which claims an error verdict was found for (their keys and spec fingerprints): verdicts are shared by claims
    # that allocate alike (DRAState.allocation_key), but an error's text names the claim and the class.
    tag: tuple = ()
    signatures: frozenset | None = None  # DRAState.request_signatures of the claims, for the nodes' view keys


@dataclass
class _Extended:
    """The pod's claim for extended resources backed by DRA (extendeddynamicresources.go): in memory until PreBind
    creates it, or the one created in an earlier cycle."""

    index: int  # its place in _Cycle.claims: last, after the pod's own claims
    groups: extended.NodeGroups
    stale: bool  # created earlier with requests: Filter refuses every node, PostFilter deletes it
    created: str | None = None  # the key of the claim PreBind created (Unreserve deletes it)


def foreach_claim(pod: Pod, dra: DRAState | None) -> tuple[list[ResourceClaim], str | None]:
    """foreachPodResourceClaim: the pod's claims, or the first reason one is not usable yet."""
    out: list[ResourceClaim] = []
    entries = dra.pod_claims(pod) if dra is not None else []
    if dra is None:
        entries = [(pc.name, None if not pc.resource_claim_name else f"{pod.namespace}/{pc.resource_claim_name}",
                    not pc.resource_claim_name) for pc in pod_resource_claims(pod)]  # fmt: skip
    for _, key, must_own in entries:
        if key is None:
            # resourceclaim.Name: no claim made from the template yet (ErrClaimNotFound)
            return out, f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'
        claim = dra.claims.get(key) if dra is not None else None
        if claim is None:
            return out, f'could not find ResourceClaim "{key}"'  # the assume cache's NotFoundError
        if claim.deleting:
            return out, f'resourceclaim "{claim.name}" is being deleted'
        if must_own and not _owned(pod, claim):
            return out, (f"ResourceClaim {claim.namespace}/{claim.name} was not created for Pod "
                         f"{pod.namespace}/{pod.name} (Pod is not owner)")  # fmt: skip
        out.append(claim)
    return out, None


def _owned(pod: Pod, claim: ResourceClaim) -> bool:
    if pod.uid or claim.owner_pod_uid:
        return claim.owner_pod_uid == pod.uid
    return claim.owner_pod_name == pod.name


def _reserved_for(pod: Pod, claim: ResourceClaim) -> bool:
    """IsReservedForPod: by UID (offline pods without one: by name)."""
    return any(is_consumer(r, pod) for r in claim.reserved_for)


def _first_available_points(claim: ResourceClaim, allocation: AllocationResult) -> int:
    """computeScore for one claim: 8 - i for each firstAvailable request allocated from its i-th subrequest."""
    chosen = {r.request for r in allocation.results if "/" in r.request}
    if not chosen:
        return 0
    total = 0
    for request in claim.spec.requests:
        for i, sub in enumerate(request.first_available):
            if f"{request.name}/{sub.name}" in chosen:
                total += FIRST_AVAILABLE_MAX - i
    return total


def _needs_device(claims: list[ResourceClaim]) -> bool:
    """Whether the claims need at least one device (then a node that sees no pool cannot hold them)."""
    return any(claim.spec.requests for claim in claims)


class DynamicResources:
    name = NAME

    def __init__(self, filter_timeout: float = FILTER_TIMEOUT_DEFAULT) -> None:
        self._verdicts: dict[tuple[int, tuple[str, ...]], _Verdicts] = {}
        self.filter_timeout = filter_timeout  # seconds; 0: a node's allocation is not bounded

    # ------------------------------------------------------------------------------------ PreEnqueue

    def pre_enqueue(self, pod: Pod) -> Status:
        if not pod_claims(pod):
            return SUCCESS
        cluster = getattr(self, "_cluster", None)
        _, problem = foreach_claim(pod, cluster.dra if cluster is not None else None)
        return _unresolvable(problem) if problem else SUCCESS

    def bind_cluster(self, cluster: ClusterState) -> DRAState | None:
        """PreEnqueue and queueing hints see no cluster in this framework: the scheduler hands it over when it is
        built (Scheduler.__init__), and PreFilter refreshes it."""
        self._cluster = cluster
        return cluster.dra

    # ------------------------------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        mapped = extended.mapped_resources(pod, cluster.dra.extended) if cluster.dra is not None else ()
        if not mapped and not pod_claims(pod):
            state[NAME] = _Cycle()
            return SKIP
        dra = self.bind_cluster(cluster)
        data = _Cycle()
        state[NAME] = data
        claims, problem = foreach_claim(pod, dra)
        if problem:
            return _unresolvable(problem)
        extended_claim = None
        if mapped:  # preFilterExtendedResources
            assert dra is not None
            key = dra.extended_claim_key(pod)
            extended_claim = dra.claims[key] if key else extended.special_claim(pod)
        if not claims and extended_claim is None:
            return SKIP
        assert dra is not None
        group = gang.group_key(pod)
        for index, claim in enumerate(claims):
            # "resourceclaim in use" cannot happen in 1.36: CanBeReserved is always true (the 256-entry limit of
            # reservedFor is the API server's, met at PreBind).
            if claim.allocation is not None:
                self._available_on(data, index, claim, cluster)
                continue
            pending = dra.pending.get(claim.key)
            if pending is not None:
                if group is not None and pending.group == group:  # a gang's members share one pending allocation
                    data.reused[index] = pending.allocation
                    continue
                return _unresolvable(f"resource claim {claim.key} is in the process of being allocated")
            for request in claim.spec.requests:
                subs = [(request.name, request.exactly)] if request.exactly is not None else [
                    (f"{request.name}/{sub.name}", sub) for sub in request.first_available]  # fmt: skip
                for qualified, sub in subs:
                    if not sub.device_class_name:
                        return Status(Code.ERROR, (f"request {qualified}: unsupported request type",), NAME)
                    if sub.device_class_name not in dra.classes:
                        missing = sub.device_class_name
                        return _unresolvable(f"request {qualified}: device class {missing} does not exist")
            data.to_allocate.append(index)
        n_user = len(claims)
        if extended_claim is not None:
            # Not validated here: the in-memory claim has no requests yet, one from an earlier cycle is Filter's.
            claims = [*claims, extended_claim]
            groups = extended.node_groups(pod, cluster, dra.extended)
            data.extended = _Extended(n_user, groups, stale=bool(extended_claim.spec.requests))
            if extended_claim.allocation is not None:
                self._available_on(data, n_user, extended_claim, cluster)
            else:
                data.to_allocate.append(n_user)
        data.claims = claims
        if not data.to_allocate or (data.extended is not None and data.extended.stale):
            return SUCCESS
        if data.extended is None or data.to_allocate[-1] != n_user:
            self._add_group(dra, data, 0, [claims[i] for i in data.to_allocate], cluster.n)
            return SUCCESS
        ext = data.extended
        for code in np.unique(ext.groups.code).tolist():
            if code < 0 or (code == extended.NO_DRA and n_user == 0):
                continue  # cannot fit at all / every extended resource from the device plugin: nothing to allocate
            requests, mappings = extended.requests_and_mappings(pod, ext.groups.delegated(code), dra.extended)
            variant = extended.node_claim(extended_claim, requests)  # type: ignore[arg-type]
            to_allocate = [claims[i] if i != n_user else variant for i in data.to_allocate]
            self._add_group(dra, data, code, to_allocate, cluster.n, mappings)
        return SUCCESS

    @staticmethod
    def _available_on(data: _Cycle, index: int, claim: ResourceClaim, cluster: ClusterState) -> None:
        """An allocated claim is usable only where its allocation's node selector matches (availableOnNodes)."""
        assert claim.allocation is not None
        if claim.allocation.node_selector is not None:
            mask = np.zeros(cluster.n, dtype=bool)
            for term in claim.allocation.node_selector:
                mask |= cluster.term_mask(term)
            data.available_on[index] = mask

    def _add_group(
        self,
        dra: DRAState,
        data: _Cycle,
        code: int,
        claims: list[ResourceClaim],
        n: int,
        mappings: list[dict[str, str]] | None = None,
    ) -> None:
        key = (dra.serial, tuple(dra.allocation_key(c) for c in claims))
        verdicts = self._verdicts.get(key)
        if verdicts is None:
            if len(self._verdicts) > 256:
                self._verdicts.clear()
            verdicts = self._verdicts[key] = _Verdicts(n)
        tag = (tuple(c.key for c in claims), tuple(fingerprint(c) for c in claims))
        data.groups[code] = _Group(claims, verdicts, mappings or [], tag, dra.request_signatures(claims))

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        """Preemption's shortcut (verdicts from NodeResourcesFit alone) holds only for pods without claims (and
        without extended resources a DeviceClass backs)."""
        if pod_claims(pod):
            return False
        return cluster.dra is None or not extended.mapped_resources(pod, cluster.dra.extended)

    # ------------------------------------------------------------------------------------ Filter

    def _evaluate(self, dra: DRAState, group: _Group, nodes: np.ndarray) -> None:
        """Bring the verdicts of ``nodes`` up to date with the nodes' DRA versions."""
        v = group.verdicts
        tag = group.tag
        stale = nodes[v.version[nodes] != dra.version[nodes]]
        errors = [i for i in nodes[v.code[nodes] >= _ON_NODE].tolist() if v.messages[i][1] != tag]
        if errors:
            stale = np.union1d(stale, np.array(errors, dtype=np.int64))
        if not stale.size:
            return
        claims = group.claims
        needs = _needs_device(claims)
        sees = dra.sees_devices
        # Per view (DRAState.view_key: nodes seeing the same network-attached pools) the answer found this time.
        answers: dict[int, tuple[int, list[AllocationResult] | None, str | None]] = {}
        for node in stale.tolist():
            v.version[node] = dra.version[node]
            v.messages.pop(node, None)
            v.score[node] = -1
            if needs and not sees[node]:
                v.code[node], v.results[node] = _CANNOT, None
                continue
            view = dra.view_key(node, group.signatures)
            answer = answers.get(view)
            if answer is None:
                answer = answers[view] = self._allocate(dra, node, claims, self.filter_timeout)
            v.code[node], v.results[node], message = answer
            if message is not None:
                v.messages[node] = (message, tag)

    @staticmethod
    def _allocate(
        dra: DRAState, node: int, claims: list[ResourceClaim], timeout: float = 0.0
    ) -> tuple[int, list[AllocationResult] | None, str | None]:
        """The allocator's answer on one node: (verdict code, results when _OK, the error when there is one).
        ``timeout``: filterTimeout in seconds, each node's search bounded by it as upstream (0: unbounded)."""
        from accelsched.dra.allocator import AllocationError
        from accelsched.dra.cel import CELError

        deadline = time.monotonic() + timeout if timeout > 0 else None
        try:
            results = dra.allocate(node, claims, deadline)
        except AllocationError as exc:
            return (_ON_NODE if exc.on_node else _ERROR), None, str(exc)
        except CELError as exc:
            return _ERROR, None, str(exc)
        if results is None or len(results) != len(claims):
            return _CANNOT, None, None
        return _OK, results, None

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        data: _Cycle | None = state.get(NAME)
        if data is None or data.empty:
            return PASS
        dra = cluster.dra
        candidates = state.feasible_nodes
        if candidates is None:
            candidates = np.ones(cluster.n, dtype=bool)
        result = FilterResult()
        ext = data.extended
        codes = None
        if ext is not None:  # filterExtendedResources decides first
            if ext.stale:
                result.reject(extended.CANNOT_SCHEDULE, candidates, resolvable=False)
                return result
            codes = ext.groups.code
            unfit = candidates & (codes < 0)
            result.reject(extended.CANNOT_FIT, unfit, resolvable=False)
            candidates = candidates & ~unfit
        ok = candidates
        for code, group in data.groups.items():
            mask = candidates if codes is None else candidates & (codes == code)
            nodes = np.flatnonzero(mask)
            if not nodes.size:
                continue
            self._evaluate(dra, group, nodes)
            verdict = group.verdicts.code
            errors = nodes[verdict[nodes] == _ERROR]
            if errors.size:
                message = group.verdicts.messages[int(errors[0])][0]
                raise PluginError(Status(Code.ERROR, (message,), NAME))
            result.reject(CANNOT_ALLOCATE, mask & (verdict == _CANNOT), resolvable=False)
            by_message: dict[str, list[int]] = {}
            for node in nodes[verdict[nodes] == _ON_NODE].tolist():
                by_message.setdefault(group.verdicts.messages[node][0], []).append(node)
            for message, where in by_message.items():
                rejected = np.zeros(cluster.n, dtype=bool)
                rejected[where] = True
                result.reject(message, rejected, resolvable=False)
            ok = ok & ~(mask & (verdict != _OK))
        if data.available_on:
            missing = np.zeros(cluster.n, dtype=bool)
            for index, mask in data.available_on.items():
                miss = ok & ~mask
                if miss.any():
                    data.unavailable.add(index)
                    missing |= miss
            result.reject(NOT_AVAILABLE, missing, resolvable=False)
        return result

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        data: _Cycle | None = state.get(NAME)
        out = NodeExplanation()
        if data is None or data.empty:
            return out
        ext = data.extended
        if ext is not None and ext.stale:
            key = data.claims[ext.index].key
            out.details.append(f"claim {key} was created for this pod's extended resources in an earlier attempt")
            return out
        if ext is not None and data.code(node) < 0:
            out.details.append("the pod requests an extended resource this node does not list and no DeviceClass backs")
            return out
        for index, mask in data.available_on.items():
            if not mask[node]:
                out.details.append(f"claim {data.claims[index].key} is allocated on devices this node cannot reach")
        group = data.group(node)
        if group is not None:
            code = int(group.verdicts.code[node])
            names = ", ".join(c.key for c in group.claims)
            if code == _CANNOT:
                out.details.append(f"the allocator found no devices here for every request of {names}")
            elif code in (_ON_NODE, _ERROR):
                out.details.append(group.verdicts.messages[node][0])
        return out

    # ------------------------------------------------------------------------------------ PostFilter

    def post_filter(self, state: CycleState, pod: Pod, handle: Any, diagnosis: Any) -> tuple[None, Status]:
        if NAME not in state:
            return None, Status(Code.ERROR, (STATE_NOT_FOUND,), NAME)
        data: _Cycle = state[NAME]
        if data.empty:
            return None, unschedulable(NAME, NO_CLAIMS_TO_DEALLOCATE)
        dra = handle.cluster.dra
        ext = data.extended
        for index in sorted(data.unavailable):  # upstream picks one at random (map order)
            if ext is not None and index == ext.index:
                continue
            claim = data.claims[index]
            others = [r for r in claim.reserved_for if not is_consumer(r, pod)]
            if not others:
                dra.deallocate(claim.key)
                return None, unschedulable(NAME, DEALLOCATED)
        if ext is not None and data.claims[ext.index].name != extended.SPECIAL_CLAIM_NAME:
            # An extended resource claim left from an earlier cycle is deleted, so the next attempt starts anew.
            dra.delete_claim(data.claims[ext.index].key)
            return None, unschedulable(NAME, DELETED)
        return None, unschedulable(NAME, STILL_NOT_SCHEDULABLE)

    # ------------------------------------------------------------------------------------ Score

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> Status:
        """Only firstAvailable requests score (computeScore); for any other pod every node scores 0."""
        data: _Cycle | None = state.get(NAME)
        if data is None or not any(r.first_available for c in data.claims for r in c.spec.requests):
            return SKIP
        return SUCCESS

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray | int:
        """computeScore, columnar: claims allocated already (or shared in a gang) score the same on every node; the
        points of the allocator's results are kept with each cached verdict, so a node is scored once per verdict."""
        data: _Cycle | None = state.get(NAME)
        if data is None or data.empty:
            return 0
        base = 0
        for index, claim in enumerate(data.claims):
            allocation = claim.allocation or data.reused.get(index)
            if allocation is not None:
                base += _first_available_points(claim, allocation)
        raw = np.full(feasible.size, base, dtype=np.int64)
        codes = data.extended.groups.code[feasible] if data.extended is not None else None
        for code, group in data.groups.items():
            where = np.flatnonzero(codes == code) if codes is not None else np.arange(feasible.size)
            if not where.size:
                continue
            nodes = feasible[where]
            v = group.verdicts
            points = v.score[nodes]
            if (points < 0).any():
                done: dict[int, int] = {}  # id(results) -> points: nodes of one view share their results
                for node in nodes[points < 0].tolist():
                    results = v.results[node] or []
                    total = done.get(id(results))
                    if total is None:
                        total = done[id(results)] = sum(
                            _first_available_points(c, a) for c, a in zip(group.claims, results, strict=False)
                        )
                    v.score[node] = total
                points = v.score[nodes]
            raw[where] += points
        return default_normalize(raw) if raw.size else raw

    # ------------------------------------------------------------------------------------ Reserve / PreBind

    def reserve(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> Status:
        data: _Cycle | None = state.get(NAME)
        if data is None or data.empty or not (data.to_allocate or data.reused):
            return SUCCESS
        dra: DRAState = cluster.dra
        group = data.group(node)
        if data.to_allocate and group is not None:
            self._evaluate(dra, group, np.array([node], dtype=np.int64))
            results = group.verdicts.results[node]
            if group.verdicts.code[node] != _OK or results is None:
                return Status(Code.ERROR, ("claim allocation not found for node",), NAME)
            dra.reserve(pod, group.claims, results, gang.group_key(pod))
            data.reserved = [pending_key(c) for c in group.claims]
        elif data.to_allocate and data.extended is None:
            return Status(Code.ERROR, ("claim allocation not found for node",), NAME)
        # else: only the extended resource claim, which the device plugin serves here: nothing to allocate
        for index in data.reused:
            dra.share_pending(pod, data.claims[index].key)
            data.reserved.append(data.claims[index].key)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> None:
        data: _Cycle | None = state.get(NAME)
        if data is None or data.empty:
            return
        dra: DRAState = cluster.dra
        dra.unreserve(pod, data.reserved)
        data.reserved = []
        for key in data.bound:  # the strategic-merge patch that drops the pod from reservedFor
            claim = dra.claims.get(key)
            if claim is not None:
                claim.reserved_for = [r for r in claim.reserved_for if not is_consumer(r, pod)]
        data.bound = []
        ext = data.extended
        if ext is not None and ext.created is not None:  # unreserveExtendedResourceClaim: delete what PreBind made
            dra.delete_claim(ext.created, retry=False)
            dra.extended_status.pop(pod.key, None)
            ext.created = None

    def pre_bind(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> Status:
        data: _Cycle | None = state.get(NAME)
        if data is None or data.empty:
            return SUCCESS
        dra: DRAState = cluster.dra
        name = cluster.nodes[node].name
        ext = data.extended
        for index, claim in enumerate(data.claims):
            if _reserved_for(pod, claim):
                continue
            if ext is not None and index == ext.index:
                group = data.group(node)
                if group is None or index not in data.to_allocate:
                    continue  # the device plugin serves every extended resource here: no claim is needed
                if claim.name == extended.SPECIAL_CLAIM_NAME:
                    variant = group.claims[data.to_allocate.index(index)]
                    ext.created, error = dra.bind_extended(pod, pending_key(variant), variant, name, group.mappings)
                    if error:
                        return Status(Code.ERROR, (error,), NAME)
                    continue
            error = dra.bind(pod, claim.key, name)
            if error:
                return Status(Code.ERROR, (error,), NAME)
            data.bound.append(claim.key)
        return SUCCESS

    # ------------------------------------------------------------------------------------ queueing

    def queueing_hint(self, waiting: Pod, bound: Pod) -> bool:
        """isSchedulableAfterClaimChange, for the claim updates a bind makes: the waiting pod's own claim."""
        cluster = getattr(self, "_cluster", None)
        dra = cluster.dra if cluster is not None else None
        if dra is None or not pod_claims(waiting) or not pod_claims(bound):
            return False
        mine = {key for _, key, _ in dra.pod_claims(waiting) if key}
        return any(key in mine for _, key, _ in dra.pod_claims(bound))


def new(args: dict, handle: object) -> DynamicResources:
    """DynamicResourcesArgs as ValidateDynamicResourcesArgs checks them (DRASchedulerFilterTimeout and the binding
    conditions gates are on in 1.36). filterTimeout (default 10s, 0 turns it off) bounds each node's allocation;
    bindingTimeout is accepted: offline nothing waits on a driver's binding conditions."""
    fields = Fields("", args, f"profiles[].pluginConfig[{NAME}].args", set(ARGS))
    filter_timeout = fields.duration("filterTimeout", FILTER_TIMEOUT_DEFAULT)
    if filter_timeout < 0:
        raise fields.error("filterTimeout", f"Invalid value: {args['filterTimeout']!r}: must be zero or positive")
    if fields.duration("bindingTimeout", BINDING_TIMEOUT_DEFAULT) < 1:
        raise fields.error("bindingTimeout", f"Invalid value: {args['bindingTimeout']!r}: must be at least 1 second")
    return DynamicResources(filter_timeout)


__all__ = ["MAX_NODE_SCORE", "NAME", "DynamicResources", "new"]
