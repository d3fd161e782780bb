"""VolumeBinding: a pod's claims must be bound, bindable or provisionable where it lands (kube-scheduler 1.36).

PreFilter (UnschedulableAndUnresolvable on every node): a claim missing, lost, being deleted or (ephemeral) not
owned by the pod; a claim neither fully bound nor waiting for its first consumer (``pod has unbound immediate
PersistentVolumeClaims``). Filter is the binder's FindPodVolumes over all nodes at once, each reason
UnschedulableAndUnresolvable:
- bound claims: the PV's node affinity (``didn't match PersistentVolume's node affinity``), or a PV that does not
  exist;
- WaitForFirstConsumer claims: a claim already given a selected node fits that node only; the others are matched,
  smallest first, to an Available PV of their class (FindMatchingVolume: size, volumeMode, attributes class,
  access modes, selector, node affinity; a PV pre-bound to the claim wins), or else provisioned: the class's
  provisioner, allowedTopologies, and CSIStorageCapacity when the driver publishes it.
Reserve assumes the chosen PVs bound (claimRef) and the claims to provision annotated with the selected node, so the
next pod sees them taken; Unreserve restores them. PreBind offline completes a static binding as the PV controller
would; in live mode the handle's ``volume_prebind`` does the API writes (accelsched.live.volumes).
StorageCapacityScoring is alpha and off in 1.36, so the plugin has no score (its PreScore would skip).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelsched.api.objects import Pod
from accelsched.api.storage import ANN_SELECTED_NODE, PersistentVolume, PersistentVolumeClaim
from accelsched.cluster.state import ClusterState
from accelsched.cluster.volumes import Assumed, ClassTable, VolumeState, claim_volumes, volume_state
from accelsched.errors import InputError
from accelsched.framework.interface import (
    SKIP,
    SUCCESS,
    Code,
    CycleState,
    FilterResult,
    NodeExplanation,
    Status,
    unschedulable,
)

NAME = "VolumeBinding"
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
DEFAULT_BIND_TIMEOUT_SECONDS = 600


@dataclass
class PodVolumeClaims:
    bound: list[PersistentVolumeClaim] = field(default_factory=list)
    delay: list[PersistentVolumeClaim] = field(default_factory=list)


@dataclass
class PodVolumes:
    """The binder's plan for one node: PVs to bind to claims, claims to provision there."""

    static_bindings: list[tuple[PersistentVolume, PersistentVolumeClaim]] = field(default_factory=list)
    dynamic_provisions: list[PersistentVolumeClaim] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.static_bindings and not self.dynamic_provisions


@dataclass
class Found:
    """FindPodVolumes over nodes: a mask per reason, and per claim the PV index chosen per node (-1: none)."""

    reasons: dict[str, np.ndarray]
    matched: list[tuple[PersistentVolumeClaim, list[PersistentVolume], np.ndarray]]
    provisioned: list[tuple[PersistentVolumeClaim, np.ndarray]]

    def plan(self, i: int) -> PodVolumes:
        out = PodVolumes()
        for claim, pvs, chosen in self.matched:
            if chosen[i] >= 0:
                out.static_bindings.append((pvs[chosen[i]], claim))
        out.dynamic_provisions = [claim for claim, where in self.provisioned if where[i]]
        return out


@dataclass
class _State:
    claims: PodVolumeClaims
    plan: PodVolumes | None = None
    found: Found | None = None  # Filter's, over every node: Reserve takes the chosen node's plan from it
    assumed: Assumed = field(default_factory=Assumed)


def _bad(message: str) -> Status:
    return unschedulable(NAME, message, resolvable=False)


def pod_claims(pod: Pod, volumes: VolumeState) -> PodVolumeClaims | Status:
    """podHasPVCs and GetPodVolumeClaims: the pod's claims sorted into bound and delayed, or the rejecting status."""
    claims = PodVolumeClaims()
    for volume, name in claim_volumes(pod):
        claim = volumes.claim(pod.namespace, name)
        ephemeral = volume.kind == "ephemeral"
        if claim is None:
            if ephemeral:
                return _bad(f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"')
            return _bad(f'persistentvolumeclaim "{name}" not found')
        if claim.phase == "Lost":
            return _bad(f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{claim.volume_name}"')
        if claim.deleting:
            return _bad(f'persistentvolumeclaim "{name}" is being deleted')
        if ephemeral and (claim.controller_uid is None or claim.controller_uid != pod.uid):  # ephemeral.VolumeIsForPod
            pvc, owner = f"{claim.namespace}/{claim.name}", f"{pod.namespace}/{pod.name}"
            return _bad(f"PVC {pvc} was not created for pod {owner} (pod is not owner)")
    for _, name in claim_volumes(pod):
        claim = volumes.claim(pod.namespace, name)
        assert claim is not None
        if claim.fully_bound:
            claims.bound.append(claim)
        elif volumes.delay_binding(claim) and not claim.volume_name:
            claims.delay.append(claim)
        else:
            return _bad(ERR_UNBOUND_IMMEDIATE)
    return claims


def _candidates(volumes: VolumeState, claim: PersistentVolumeClaim) -> tuple[ClassTable, np.ndarray, list[int]]:
    """FindMatchingVolume's node-independent checks over the PVs of the claim's class (ListPVs): the PVs it may
    take, smallest first (by name among equals), and those pre-bound to the claim, which win wherever their node
    affinity allows."""
    table = volumes.class_table(claim.class_name)
    if not table.pvs:
        return table, np.zeros(0, dtype=np.int64), []
    base = (
        (table.capacity >= (claim.request or 0))
        & (table.mode == claim.volume_mode)
        & (table.vac == claim.volume_attributes_class)
        & ~table.deleting
    )
    refs = table.refs.get((claim.namespace, claim.name), [])
    prebound = sorted(i for i in refs if base[i] and table.pvs[i].bound_to(claim))
    ok = base & table.unclaimed & table.available & table.access(claim.access_modes)
    if claim.selector is not None and ok.any():
        selector = claim.selector
        ok[ok] = [selector.matches(table.pvs[i].labels) for i in np.flatnonzero(ok)]
    eligible = np.flatnonzero(ok)
    return table, eligible[np.argsort(table.capacity[eligible], kind="stable")], prebound


def find_pod_volumes(volumes: VolumeState, claims: PodVolumeClaims, nodes: np.ndarray) -> Found:
    """FindPodVolumes for the given node indices at once."""
    cluster = volumes.cluster
    m = len(nodes)
    reasons = {r: np.zeros(m, dtype=bool) for r in (ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT,
                                                     ERR_REASON_NOT_ENOUGH_SPACE, ERR_REASON_PV_NOT_EXIST)}  # fmt: skip
    # checkBoundClaims: the first claim whose PV is missing or does not fit the node decides.
    open_ = np.ones(m, dtype=bool)
    for claim in claims.bound:
        pv = volumes.volume(claim.volume_name)
        if pv is None:
            reasons[ERR_REASON_PV_NOT_EXIST] |= open_
            break
        fits = volumes.pv_mask(pv)[nodes]
        reasons[ERR_REASON_NODE_CONFLICT] |= open_ & ~fits
        open_ &= fits
    matched: list[tuple[PersistentVolumeClaim, list[PersistentVolume], np.ndarray]] = []
    provisioned: list[tuple[PersistentVolumeClaim, np.ndarray]] = []
    if claims.delay:
        active = np.ones(m, dtype=bool)
        to_provision: list[tuple[PersistentVolumeClaim, np.ndarray]] = []
        to_match = []
        for claim in claims.delay:
            selected = claim.annotations.get(ANN_SELECTED_NODE)
            if selected is None:
                to_match.append(claim)
                continue
            elsewhere = cluster.names[nodes] != selected
            reasons[ERR_REASON_BIND_CONFLICT] |= elsewhere
            active &= ~elsewhere
            to_provision.append((claim, active))
        to_provision = [(c, active) for c, _ in to_provision]
        # findMatchingVolumes: smallest claim first, each PV used once per pod.
        chosen_by: list[tuple[ClassTable, np.ndarray]] = []
        for claim in sorted(to_match, key=lambda c: c.request or 0):
            table, order, prebound = _candidates(volumes, claim)
            chosen = _match(volumes, table, order, prebound, nodes, chosen_by)
            chosen_by.append((table, chosen))
            matched.append((claim, table.pvs, chosen))
            to_provision.append((claim, active & (chosen < 0)))
        # checkVolumeProvisions: the first claim that cannot be provisioned on a node decides its reason.
        open_ = active.copy()
        for claim, need in to_provision:
            sc = volumes.storage_class(claim.class_name)
            if sc is None:  # unreachable through PreFilter (delayed claims have their class)
                raise InputError(f'failed to find storage class "{claim.class_name}"')
            asked = open_ & need
            if not asked.any():
                continue
            ok = volumes.class_topology_mask(sc)[nodes] if volumes.provisionable(sc) else np.zeros(m, dtype=bool)
            reasons[ERR_REASON_BIND_CONFLICT] |= asked & ~ok
            open_ &= ~(asked & ~ok)
            room = volumes.capacity_mask(sc, claim)[nodes]
            reasons[ERR_REASON_NOT_ENOUGH_SPACE] |= asked & ok & ~room
            open_ &= ~(asked & ok & ~room)
        provisioned = [(claim, need & open_) for claim, need in to_provision]
    return Found(reasons, matched, provisioned)


def _match(
    volumes: VolumeState,
    table: ClassTable,
    order: np.ndarray,
    prebound: list[int],
    nodes: np.ndarray,
    chosen_by: list[tuple[ClassTable, np.ndarray]],
) -> np.ndarray:
    """Per node the PV (index in ``table.pvs``) FindMatchingVolume returns, -1 for none, skipping PVs an earlier
    claim of the pod took on that node."""
    if not prebound and not chosen_by:
        return _smallest(table, order)[nodes]
    m = len(nodes)
    chosen = np.full(m, -1, dtype=np.int64)
    undecided = np.ones(m, dtype=bool)

    def taken(k: int) -> np.ndarray:
        name, mask = table.pvs[k].name, np.zeros(m, dtype=bool)
        for other, picks in chosen_by:
            if name in other.position:
                mask |= picks == other.position[name]
        return mask

    for k in prebound:  # a PV pre-bound to the claim decides: it, where its node affinity allows, else nothing
        here = undecided & ~taken(k)
        chosen[here & volumes.pv_mask(table.pvs[k])[nodes]] = k
        undecided &= ~here
    for k in order.tolist():  # the smallest PV that fits
        if not undecided.any():
            break
        here = undecided & volumes.pv_mask(table.pvs[k])[nodes] & ~taken(k)
        chosen[here] = k
        undecided &= ~here
    return chosen


def _smallest(table: ClassTable, order: np.ndarray) -> np.ndarray:
    """Over every node at once, the first PV of ``order`` usable there: the best rank among its (node, PV) pairs
    and the first PV without node affinity."""
    n = table.n
    none = len(order)
    rank = np.full(len(table.pvs), none, dtype=np.int64)
    rank[order] = np.arange(len(order))
    best = np.full(n, none, dtype=np.int64)
    pair_rank = rank[table.pair_pv]
    usable = pair_rank < none
    np.minimum.at(best, table.pair_node[usable], pair_rank[usable])
    dense = rank[table.dense]
    if dense.size:
        best = np.minimum(best, dense.min())
    ranked = np.append(order, -1)
    return ranked[best]


class VolumeBinding:
    name = NAME

    def __init__(self, handle: Any = None, bind_timeout: int = DEFAULT_BIND_TIMEOUT_SECONDS) -> None:
        self.handle = handle
        self.bind_timeout = bind_timeout

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        if not pod.volumes:
            return SKIP
        volumes = volume_state(cluster)
        if not any(True for _ in claim_volumes(pod)):
            return SKIP
        claims = pod_claims(pod, volumes)
        if isinstance(claims, Status):
            return claims
        state[NAME] = _State(claims)
        return SUCCESS

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        return True

    def _found(self, state: CycleState, cluster: ClusterState, nodes: np.ndarray) -> Found | None:
        data: _State | None = state.get(NAME)
        if data is None:
            return None
        return find_pod_volumes(volume_state(cluster), data.claims, nodes)

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        result = FilterResult()
        found = self._found(state, cluster, np.arange(cluster.n))
        if found is not None:
            state[NAME].found = found
            for reason, mask in found.reasons.items():
                result.reject(reason, mask, resolvable=False)
        return result

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        """Which claim fails on the node, and why (the facts behind the reason)."""
        data: _State | None = state.get(NAME)
        if data is None:
            return NodeExplanation([], [])
        volumes = volume_state(cluster)
        details, remedies = [], []
        for claim in data.claims.bound:
            pv = volumes.volume(claim.volume_name)
            if pv is None:
                details.append(f"claim {claim.name} is bound to PV {claim.volume_name}, which does not exist")
            elif not volumes.pv_mask(pv)[node]:
                details.append(f"claim {claim.name} is bound to PV {pv.name}, whose node affinity excludes this node")
        found = find_pod_volumes(volumes, data.claims, np.array([node]))
        plan = found.plan(0)
        placed = {c.key for _, c in plan.static_bindings} | {c.key for c in plan.dynamic_provisions}
        for claim in data.claims.delay:
            if claim.key in placed:
                continue
            selected = claim.annotations.get(ANN_SELECTED_NODE)
            sc = volumes.storage_class(claim.class_name)
            if selected is not None and selected != cluster.nodes[node].name:
                details.append(f"claim {claim.name} is being provisioned for node {selected}")
            elif sc is not None and not volumes.provisionable(sc):
                size = f"{claim.request} bytes" if claim.request is not None else "any size"
                details.append(f"claim {claim.name} ({size}, class {sc.name}): no Available PV of the class fits here,"
                               f" and the class does not provision ({sc.provisioner})")  # fmt: skip
                remedies.append(f"create a PV of class {sc.name} usable from this node")
            elif sc is not None:
                details.append(f"claim {claim.name}: class {sc.name} cannot provision here (allowedTopologies or "
                               "CSIStorageCapacity)")  # fmt: skip
        return NodeExplanation(details, remedies)

    def reserve(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> Status:
        """AssumePodVolumes: the plan for the chosen node into the assume cache."""
        data: _State | None = state.get(NAME)
        if data is None:
            return SUCCESS
        volumes = volume_state(cluster)
        if data.found is not None:
            plan = data.found.plan(node)
        else:
            plan = find_pod_volumes(volumes, data.claims, np.array([node])).plan(0)
        name = cluster.nodes[node].name
        assumed = PodVolumes()
        for pv, claim in plan.static_bindings:
            assumed.static_bindings.append((volumes.assume_binding(pv, claim, data.assumed), claim))
        for claim in plan.dynamic_provisions:
            assumed.dynamic_provisions.append(volumes.assume_selected_node(claim, name, data.assumed))
        data.plan = assumed
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> None:
        data: _State | None = state.get(NAME)
        if data is not None:
            volume_state(cluster).restore(data.assumed)
            data.plan = None

    def pre_bind(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> Status:
        """BindPodVolumes. Live: handed to the handle, which writes it through the API in the binding cycle.
        Offline: the static bindings completed in memory (the claims become bound to their PVs)."""
        data: _State | None = state.get(NAME)
        if data is None or data.plan is None or data.plan.empty:
            return SUCCESS
        live = getattr(self.handle, "volume_prebind", None)
        if live is not None:
            error = live(pod, cluster.nodes[node].name, data.plan, self.bind_timeout)
            return Status(Code.ERROR, (error,), NAME) if error else SUCCESS
        volumes = volume_state(cluster)
        for pv, claim in data.plan.static_bindings:
            volumes.assume_claim_bound(claim, pv, data.assumed)
        return SUCCESS


def new(args: dict, handle: object) -> VolumeBinding:
    """VolumeBindingArgs: bindTimeoutSeconds (>= 0, default 600); shape only with StorageCapacityScoring (off)."""
    where = f"pluginConfig {NAME}"
    unknown = set(args) - {"bindTimeoutSeconds", "shape"}
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}", obj=where, field="args")
    timeout = args.get("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT_SECONDS)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0:
        raise InputError(f"invalid field value: {timeout!r}: must be >= 0", obj=where, field="args.bindTimeoutSeconds")
    if args.get("shape"):
        raise InputError("shape is only allowed when StorageCapacityScoring is enabled (it is off in 1.36)",
                         obj=where, field="args.shape")  # fmt: skip
    return VolumeBinding(handle, timeout)
