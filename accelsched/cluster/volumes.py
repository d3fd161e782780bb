"""The storage side of the cluster state: PVs and claims with kube-scheduler's assume cache, node masks per PV,
StorageClass topology and CSIStorageCapacity, and per-node indexes of the volumes bound pods use.

The volume plugins read everything through here. Masks over nodes are computed once per object and kept (a PV's
node affinity never changes while it exists). The per-node indexes (attached CSI volumes per driver, in-tree disks,
claims in use) follow ClusterState.changes: after a bind only that node is recomputed from its pods, and nothing at
all is built while no pod has volumes (design principle 3).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from accelsched.api.objects import Pod
from accelsched.api.selectors import NodeSelectorTerm, Requirement
from accelsched.api.storage import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    ClaimRef,
    PersistentVolume,
    PersistentVolumeClaim,
    Storage,
    StorageClass,
)
from accelsched.api.volumes import DISK_CONFLICT_KINDS, MIGRATED_INLINE, PodVolume

if TYPE_CHECKING:
    from accelsched.cluster.state import ClusterState

# In-tree provisioners csi-translation-lib migrates (a StorageClass naming one counts against the CSI driver).
MIGRATED_PROVISIONERS = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}
# NodeVolumeLimits names a not-yet-bound claim's volume "<random prefix>-<namespace>/<claim>" (one per process).
UNBOUND_PREFIX = "accelsched-unbound"


def volume_state(cluster: ClusterState) -> VolumeState:
    """The cluster's VolumeState; an empty one for a cluster built without storage objects (every claim then is
    not found, as in a cluster without it)."""
    state = cluster.volumes
    if state is None:
        state = cluster.volumes = VolumeState(Storage(), cluster)
    assert isinstance(state, VolumeState)
    return state


def claim_volumes(pod: Pod) -> Iterator[tuple[PodVolume, str]]:
    """(volume, claim name) for each persistentVolumeClaim and ephemeral volume, in spec order."""
    for volume in pod.volumes:
        name = volume.claim_for(pod.name)
        if name:
            yield volume, name


@dataclass
class Assumed:
    """What a Reserve changed in the assume cache: the objects as they were, to restore on Unreserve."""

    volumes: list[PersistentVolume] = field(default_factory=list)
    claims: list[PersistentVolumeClaim] = field(default_factory=list)


class VolumeState:
    def __init__(self, storage: Storage, cluster: ClusterState) -> None:
        self.storage = storage
        self.cluster = cluster
        self._pv_masks: dict[str, np.ndarray] = {}
        self._sparse: dict[tuple[str, str], np.ndarray | None] = {}
        self._value_codes: dict[str, dict[str, int]] = {}
        self._class_masks: dict[str, np.ndarray] = {}
        self._capacity_masks: dict[int, np.ndarray] = {}
        self._limits: dict[str, np.ndarray] | None = None
        self._has_csi_node: np.ndarray | None = None
        # Per-node indexes of the bound pods' volumes, caught up from cluster.changes (None: not built yet).
        self._seen: int | None = None
        self._node_attached: list[dict[str, str]] = []  # node -> unique volume name -> CSI driver
        self._node_disks: list[list[PodVolume]] = []  # node -> in-tree disks VolumeRestrictions checks
        self._node_claims: list[Counter[str]] = []  # node -> namespace/claim -> pods using it
        self.attached_count: dict[str, np.ndarray] = {}  # driver -> volumes attached per node
        self.attached_nodes: dict[str, Counter[int]] = {}  # unique name -> nodes it is attached to
        self.disk_nodes: dict[tuple[str, str], set[int]] = {}  # (kind, disk) -> nodes with it
        self.claims_in_use: Counter[str] = Counter()  # kube-scheduler's usedPVCSet, with counts
        self._tables: dict[str, ClassTable] = {}

    # ------------------------------------------------------------------------------------ lookups

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.storage.claims.get(f"{namespace}/{name}")

    def volume(self, name: str) -> PersistentVolume | None:
        return self.storage.volumes.get(name)

    def storage_class(self, name: str) -> StorageClass | None:
        return self.storage.classes.get(name)

    def delay_binding(self, claim: PersistentVolumeClaim) -> bool:
        """IsDelayBindingMode: the claim's class exists and is WaitForFirstConsumer."""
        sc = self.storage.classes.get(claim.class_name) if claim.class_name else None
        return sc is not None and sc.wait_for_first_consumer

    # ------------------------------------------------------------------------------------ node masks

    def _requirement_mask(self, req: Requirement) -> np.ndarray:
        """ClusterState.requirement_mask, except for In/NotIn on a label with a value per node (a local PV's
        ``kubernetes.io/hostname In [node]``): those are looked up by value code, not over every value, so that
        thousands of local PVs cost one pass each over the nodes instead of one per node."""
        if req.operator not in ("In", "NotIn"):
            return self.cluster.requirement_mask(req)
        col = self.cluster.labels(req.key)
        codes = self._value_codes.get(req.key)
        if codes is None:
            codes = self._value_codes[req.key] = {v: i for i, v in enumerate(col.values)}
        mask = np.zeros(self.cluster.n, dtype=bool)
        for value in req.values:
            code = codes.get(value)
            if code is not None:
                mask |= col.codes == code
        return mask if req.operator == "In" else ~mask

    def _terms_mask(self, terms: tuple[NodeSelectorTerm, ...], by_name: bool) -> np.ndarray:
        """Nodes matching any term. Without ``by_name`` a matchFields term sees a node with no name, as
        volume.CheckNodeAffinity builds one from the labels alone."""
        cluster = self.cluster
        mask = np.zeros(cluster.n, dtype=bool)
        for term in terms:
            if by_name:
                mask |= cluster.term_mask(term)
                continue
            if not term.match_expressions and not term.match_fields:
                continue
            m = np.ones(cluster.n, dtype=bool)
            for req in term.match_expressions:
                m &= self._requirement_mask(req)
            if not all(req.matches({"metadata.name": ""}) for req in term.match_fields):
                m[:] = False
            mask |= m
        return mask

    def class_table(self, class_name: str) -> ClassTable:
        """The PVs of a class (ListPVs(class), by GetPersistentVolumeClass) as arrays, rebuilt after a PV change."""
        table = self._tables.get(class_name)
        if table is None:
            pvs = sorted((v for v in self.storage.volumes.values() if v.class_name == class_name), key=lambda v: v.name)
            table = self._tables[class_name] = ClassTable(self, pvs)
        return table

    def pv_nodes(self, pv: PersistentVolume) -> np.ndarray | None:
        """The node indices a PV can be used from, or None for every node (no node affinity, or all match)."""
        mask = self.pv_mask(pv)
        key = ("nodes", pv.name)
        if key not in self._sparse:
            self._sparse[key] = None if mask.all() else np.flatnonzero(mask)
        return self._sparse[key]

    def pv_mask(self, pv: PersistentVolume) -> np.ndarray:
        """Nodes a PV can be used from (CheckNodeAffinity): all nodes without required node affinity."""
        mask = self._pv_masks.get(pv.name)
        if mask is None:
            if pv.node_affinity is None:
                mask = np.ones(self.cluster.n, dtype=bool)
            else:
                mask = self._terms_mask(pv.node_affinity, by_name=False)
            self._pv_masks[pv.name] = mask
        return mask

    def class_topology_mask(self, sc: StorageClass) -> np.ndarray:
        """MatchTopologySelectorTerms(allowedTopologies): every node when the class lists none."""
        mask = self._class_masks.get(sc.name)
        if mask is None:
            if not sc.allowed_topologies:
                mask = np.ones(self.cluster.n, dtype=bool)
            else:
                mask = self._terms_mask(sc.allowed_topologies, by_name=False)
            self._class_masks[sc.name] = mask
        return mask

    def capacity_mask(self, sc: StorageClass, claim: PersistentVolumeClaim) -> np.ndarray:
        """hasEnoughCapacity on every node: a CSIStorageCapacity of the class whose volume limit holds the request
        and whose nodeTopology selects the node. Every node when the check does not apply (no storage request,
        the provisioner has no CSIDriver or it does not publish capacity)."""
        n = self.cluster.n
        driver = self.storage.csi_drivers.get(sc.provisioner)
        if claim.request is None or driver is None or not driver.storage_capacity:
            return np.ones(n, dtype=bool)
        mask = np.zeros(n, dtype=bool)
        for i, cap in enumerate(self.storage.capacities):
            limit = cap.volume_limit
            if cap.storage_class_name != sc.name or limit is None or limit < claim.request:
                continue
            mask |= self._topology_mask(i)
        return mask

    def _topology_mask(self, index: int) -> np.ndarray:
        mask = self._capacity_masks.get(index)
        if mask is None:
            selector = self.storage.capacities[index].node_topology
            if selector is None:
                mask = np.zeros(self.cluster.n, dtype=bool)
            else:
                mask = np.array([selector.matches(node.labels) for node in self.cluster.nodes], dtype=bool)
            self._capacity_masks[index] = mask
        return mask

    def volume_limits(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Per CSI driver its attach limit per node (-1: none reported), and which nodes have a CSINode."""
        if self._limits is None:
            n = self.cluster.n
            self._limits = {}
            self._has_csi_node = np.zeros(n, dtype=bool)
            for i, node in enumerate(self.cluster.nodes):
                csi = self.storage.csi_nodes.get(node.name)
                if csi is None:
                    continue
                self._has_csi_node[i] = True
                for driver, count in csi.limits:
                    self._limits.setdefault(driver, np.full(n, -1, dtype=np.int64))[i] = count
        assert self._has_csi_node is not None
        return self._limits, self._has_csi_node

    # ------------------------------------------------------------------------------------ attachable volumes

    def attachable(self, pod: Pod, has_csi_node: bool) -> dict[str, str] | str:
        """NodeVolumeLimits' filterAttachableVolumes for a pod: unique volume name -> CSI driver, or for a claim
        that does not exist the error (an existing pod's missing claims are skipped by the caller)."""
        out: dict[str, str] = {}
        for volume in pod.volumes:
            name = volume.claim_for(pod.name)
            if not name:
                migrated = MIGRATED_INLINE.get(volume.kind)
                if migrated is not None and has_csi_node:
                    out[f"{migrated[0]}/{volume.disk}"] = migrated[0]
                continue
            claim = self.claim(pod.namespace, name)
            if claim is None:
                return f'looking up PVC {pod.namespace}/{name}: persistentvolumeclaim "{name}" not found'
            driver, handle = self._csi_driver_info(claim, has_csi_node)
            if driver and handle:
                out[f"{driver}/{handle}"] = driver
        return out

    def _csi_driver_info(self, claim: PersistentVolumeClaim, has_csi_node: bool) -> tuple[str, str]:
        pv = self.volume(claim.volume_name) if claim.volume_name else None
        if pv is not None:
            migrated = pv.raw.get("spec", {}).get("csi") is None
            if not pv.csi_driver or (migrated and not has_csi_node):
                return "", ""
            return pv.csi_driver, pv.csi_handle
        sc = self.storage_class(claim.class_name) if claim.class_name else None
        if sc is None:
            return "", ""
        handle = f"{UNBOUND_PREFIX}-{claim.namespace}/{claim.name}"
        if sc.provisioner in MIGRATED_PROVISIONERS:
            return (MIGRATED_PROVISIONERS[sc.provisioner], handle) if has_csi_node else ("", "")
        return sc.provisioner, handle

    # ------------------------------------------------------------------------------------ per-node indexes

    def sync(self) -> None:
        """Bring the per-node indexes up to date with the pods bound since the last call."""
        cluster = self.cluster
        if self._seen is None:
            n = cluster.n
            self._node_attached = [{} for _ in range(n)]
            self._node_disks = [[] for _ in range(n)]
            self._node_claims = [Counter() for _ in range(n)]
            dirty: list[int] | set[int] = range(n)  # type: ignore[assignment]
        else:
            dirty = set(cluster.changes[self._seen :])
        self._seen = len(cluster.changes)
        if dirty:
            _, has_csi = self.volume_limits()
            for node in dirty:
                self._index_node(node, bool(has_csi[node]))

    def _index_node(self, node: int, has_csi_node: bool) -> None:
        for unique, driver in self._node_attached[node].items():
            self.attached_count[driver][node] -= 1
            nodes = self.attached_nodes[unique]
            nodes[node] -= 1
            if nodes[node] <= 0:
                del nodes[node]
        for disk in self._node_disks[node]:
            self.disk_nodes.get((disk.kind, disk.disk), set()).discard(node)
        self.claims_in_use.subtract(self._node_claims[node])
        attached: dict[str, str] = {}
        disks: list[PodVolume] = []
        claims: Counter[str] = Counter()
        for pod in self.cluster.pods_on[node].values():
            if not pod.volumes:
                continue
            for volume in pod.volumes:
                if volume.kind == "persistentVolumeClaim":
                    claims[f"{pod.namespace}/{volume.claim_name}"] += 1
                elif volume.kind in DISK_CONFLICT_KINDS:
                    disks.append(volume)
            found = self.attachable(pod, has_csi_node)
            if isinstance(found, str):  # a claim gone: skipped for an existing pod, its other volumes still count
                found = self._attachable_skipping_missing(pod, has_csi_node)
            attached.update(found)
        for unique, driver in attached.items():
            counts = self.attached_count.get(driver)
            if counts is None:
                counts = self.attached_count[driver] = np.zeros(self.cluster.n, dtype=np.int64)
            counts[node] += 1
            self.attached_nodes.setdefault(unique, Counter())[node] += 1
        for disk in disks:
            self.disk_nodes.setdefault((disk.kind, disk.disk), set()).add(node)
        self.claims_in_use.update(claims)
        self.claims_in_use += Counter()  # drop zero and negative counts
        self._node_attached[node], self._node_disks[node], self._node_claims[node] = attached, disks, claims

    def _attachable_skipping_missing(self, pod: Pod, has_csi_node: bool) -> dict[str, str]:
        present = tuple(
            v for v in pod.volumes if not v.claim_for(pod.name) or self.claim(pod.namespace, v.claim_for(pod.name))
        )
        found = self.attachable(dataclasses.replace(pod, volumes=present), has_csi_node)
        return found if isinstance(found, dict) else {}

    def node_disks(self, node: int) -> list[PodVolume]:
        return self._node_disks[node]

    # ------------------------------------------------------------------------------------ assume cache

    def assume_binding(self, pv: PersistentVolume, claim: PersistentVolumeClaim, undo: Assumed) -> PersistentVolume:
        """GetBindVolumeToClaim into the assume cache: the PV's claimRef set to the claim (uid included) and,
        when the PV was not bound to it before, pv.kubernetes.io/bound-by-controller: yes."""
        annotations = dict(pv.annotations)
        if not pv.bound_to(claim):
            annotations.setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
        new = dataclasses.replace(pv, claim_ref=ClaimRef(claim.namespace, claim.name, claim.uid),
                                  annotations=annotations)  # fmt: skip
        undo.volumes.append(pv)
        self._put_volume(new)
        return new

    def assume_selected_node(self, claim: PersistentVolumeClaim, node: str, undo: Assumed) -> PersistentVolumeClaim:
        """A claim to provision, with volume.kubernetes.io/selected-node set: what PreBind writes."""
        new = dataclasses.replace(claim, annotations={**claim.annotations, ANN_SELECTED_NODE: node})
        undo.claims.append(claim)
        self.storage.claims[claim.key] = new
        return new

    def assume_claim_bound(self, claim: PersistentVolumeClaim, pv: PersistentVolume, undo: Assumed) -> None:
        """Offline, the PV controller's half of a static binding: the claim bound to the PV."""
        current = self.storage.claims.get(claim.key, claim)
        new = dataclasses.replace(current, volume_name=pv.name, phase="Bound",
                                  annotations={**current.annotations, ANN_BIND_COMPLETED: "yes"})  # fmt: skip
        undo.claims.append(current)
        self.storage.claims[claim.key] = new

    def restore(self, undo: Assumed) -> None:
        """Unreserve: the assume cache as it was, newest change undone first."""
        for claim in reversed(undo.claims):
            self.storage.claims[claim.key] = claim
        for pv in reversed(undo.volumes):
            self._put_volume(pv)
        undo.claims.clear()
        undo.volumes.clear()

    def _put_volume(self, pv: PersistentVolume) -> None:
        """A PV changed in the assume cache: stored, and its row of its class table updated in place."""
        self.storage.volumes[pv.name] = pv
        table = self._tables.get(pv.class_name)
        if table is not None:
            table.replace(pv)

    def provisionable(self, sc: StorageClass) -> bool:
        return bool(sc.provisioner) and sc.provisioner != NOT_SUPPORTED_PROVISIONER


class ClassTable:
    """FindMatchingVolume's node-independent facts about the PVs of one class, as arrays in name order, so that a
    claim's candidates are a few vector comparisons instead of a pass over every PV."""

    def __init__(self, state: VolumeState, pvs: list[PersistentVolume]) -> None:
        self.pvs = pvs
        self.position = {v.name: i for i, v in enumerate(pvs)}
        self.n = state.cluster.n
        self.capacity = np.array([v.capacity for v in pvs], dtype=np.int64)
        self.available = np.array([v.phase == "Available" and not v.deleting for v in pvs], dtype=bool)
        self.unclaimed = np.array([v.claim_ref is None for v in pvs], dtype=bool)
        self.deleting = np.array([v.deleting for v in pvs], dtype=bool)
        self.mode = np.array([v.volume_mode for v in pvs], dtype=object)
        self.vac = np.array([v.volume_attributes_class for v in pvs], dtype=object)
        self.refs: dict[tuple[str, str], list[int]] = {}  # claimRef namespace/name -> PVs naming it
        for i, v in enumerate(pvs):
            if v.claim_ref is not None:
                self.refs.setdefault((v.claim_ref.namespace, v.claim_ref.name), []).append(i)
        self._access: dict[frozenset[str], np.ndarray] = {}
        self.sparse = [state.pv_nodes(v) for v in pvs]
        # Every (node, PV) pair of the PVs with node affinity, and which PVs fit every node.
        self.dense = np.array([nodes is None for nodes in self.sparse], dtype=bool)
        parts = [(nodes, i) for i, nodes in enumerate(self.sparse) if nodes is not None]
        self.pair_node = np.concatenate([nodes for nodes, _ in parts]) if parts else np.zeros(0, dtype=np.int64)
        self.pair_pv = np.concatenate([np.full(len(nodes), i) for nodes, i in parts]) if parts else self.pair_node

    def replace(self, pv: PersistentVolume) -> None:
        """The assume cache changed a PV's claimRef (or restored it): its row follows."""
        i = self.position[pv.name]
        old = self.pvs[i]
        if old.claim_ref is not None:
            self.refs[(old.claim_ref.namespace, old.claim_ref.name)].remove(i)
        if pv.claim_ref is not None:
            self.refs.setdefault((pv.claim_ref.namespace, pv.claim_ref.name), []).append(i)
        self.pvs[i] = pv
        self.unclaimed[i] = pv.claim_ref is None

    def access(self, modes: tuple[str, ...]) -> np.ndarray:
        """CheckAccessModes: PVs offering every mode the claim asks for."""
        key = frozenset(modes)
        mask = self._access.get(key)
        if mask is None:
            mask = self._access[key] = np.array([key <= set(v.access_modes) for v in self.pvs], dtype=bool)
        return mask
