"""VolumeRestrictions: in-tree disks that cannot be shared (GCE PD, EBS, iSCSI, RBD) and ReadWriteOncePod claims.

As kube-scheduler 1.36: PreFilter looks up every persistentVolumeClaim of the pod (a missing one rejects the pod on
all nodes, UnschedulableAndUnresolvable) and counts its ReadWriteOncePod claims already used by a bound pod; it
skips when the pod has no such claim in use and no in-tree disk. Filter rejects nodes with a conflicting disk,
then, while any of the pod's ReadWriteOncePod claims is in use anywhere, every node (Unschedulable: evicting the
pod that uses it helps, which preemption's dry run sees by counting again).
"""

from __future__ import annotations

import numpy as np

from accelsched.api.objects import Pod
from accelsched.api.volumes import DISK_CONFLICT_KINDS, conflicts
from accelsched.cluster.state import ClusterState
from accelsched.cluster.volumes import volume_state
from accelsched.framework.interface import (
    SKIP,
    SUCCESS,
    CycleState,
    FilterResult,
    NodeExplanation,
    Status,
    unschedulable,
)

NAME = "VolumeRestrictions"
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)
_STATE = "PreFilter" + NAME


def _needs_check(pod: Pod) -> bool:
    return any(v.kind in DISK_CONFLICT_KINDS for v in pod.volumes)


class VolumeRestrictions:
    name = NAME

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        if not pod.volumes:
            return SKIP
        volumes = volume_state(cluster)
        rwop: set[str] = set()
        for volume in pod.volumes:
            if volume.kind != "persistentVolumeClaim":
                continue
            claim = volumes.claim(pod.namespace, volume.claim_name)
            if claim is None:
                return unschedulable(NAME, f'persistentvolumeclaim "{volume.claim_name}" not found', resolvable=False)
            if claim.read_write_once_pod:
                rwop.add(claim.name)
        conflicting = 0
        if rwop:
            volumes.sync()
            conflicting = sum(1 for name in rwop if volumes.claims_in_use[f"{pod.namespace}/{name}"] > 0)
        if not _needs_check(pod) and conflicting == 0:
            return SKIP
        state[_STATE] = conflicting
        return SUCCESS

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        return not any(v.kind == "persistentVolumeClaim" or v.kind in DISK_CONFLICT_KINDS for v in pod.volumes)

    def _disk_conflicts(self, pod: Pod, cluster: ClusterState) -> np.ndarray:
        volumes = volume_state(cluster)
        volumes.sync()
        mask = np.zeros(cluster.n, dtype=bool)
        for volume in pod.volumes:
            if volume.kind not in DISK_CONFLICT_KINDS:
                continue
            for node in volumes.disk_nodes.get((volume.kind, volume.disk), ()):
                if not mask[node] and any(conflicts(volume, other) for other in volumes.node_disks(node)):
                    mask[node] = True
        return mask

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        result = FilterResult()
        disk = self._disk_conflicts(pod, cluster) if _needs_check(pod) else np.zeros(cluster.n, dtype=bool)
        result.reject(ERR_REASON_DISK_CONFLICT, disk)
        if state.get(_STATE, 0) > 0:
            result.reject(ERR_REASON_RWOP_CONFLICT, ~disk)
        return result

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        volumes = volume_state(cluster)
        details = []
        for volume in pod.volumes:
            for other in volumes.node_disks(node) if volume.kind in DISK_CONFLICT_KINDS else ():
                if conflicts(volume, other):
                    details.append(f"volume {volume.name} ({volume.kind} {volume.disk}) is in use on this node")
                    break
            if volume.kind == "persistentVolumeClaim":
                claim = volumes.claim(pod.namespace, volume.claim_name)
                if claim is not None and claim.read_write_once_pod and volumes.claims_in_use[claim.key] > 0:
                    details.append(f"claim {claim.name} is ReadWriteOncePod and another pod uses it")
        return NodeExplanation(details, ["delete or move the pod that holds the volume"] if details else [])


def new(args: dict, handle: object) -> VolumeRestrictions:
    return VolumeRestrictions()
