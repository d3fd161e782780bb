"""NodeVolumeLimits: at most CSINode.spec.drivers[].allocatable.count volumes of each CSI driver per node.

As kube-scheduler 1.36's CSILimits: the pod's new volumes are its claims (bound: the PV's CSI driver and handle;
not yet bound: the StorageClass's provisioner, one volume per claim) and its in-tree disks that migrate to CSI
(counted only on nodes with a CSINode). A volume already used by a pod on the node is not new. A node rejects the
pod (Unschedulable) when, for some driver, the unique volumes of its pods plus the new ones pass the limit.
VolumeAttachment objects, which kube-scheduler also counts, are not read: accelsched counts the pods' volumes.
"""

from __future__ import annotations

import numpy as np

from accelsched.api.objects import Pod
from accelsched.api.volumes import INLINE_MIGRATABLE
from accelsched.cluster.state import ClusterState
from accelsched.cluster.volumes import volume_state
from accelsched.framework.interface import SKIP, SUCCESS, CycleState, FilterResult, NodeExplanation, Status

NAME = "NodeVolumeLimits"
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"


def _counted(pod: Pod) -> bool:
    return any(v.kind in ("persistentVolumeClaim", "ephemeral") or v.kind in INLINE_MIGRATABLE for v in pod.volumes)


class NodeVolumeLimits:
    name = NAME

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        return SUCCESS if _counted(pod) else SKIP

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        return not _counted(pod)

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        result = FilterResult()
        volumes = volume_state(cluster)
        limits, has_csi = volumes.volume_limits()
        # The new volumes differ only between nodes with and without a CSINode (in-tree migration needs one).
        with_csi = volumes.attachable(pod, True)
        if isinstance(with_csi, str):  # a claim that does not exist (VolumeRestrictions' PreFilter says so first)
            result.reject(with_csi, np.ones(cluster.n, dtype=bool), resolvable=False)
            return result
        if not limits or not with_csi:
            return result
        volumes.sync()
        rejected = np.zeros(cluster.n, dtype=bool)
        by_driver: dict[str, list[str]] = {}
        for unique, driver in with_csi.items():
            by_driver.setdefault(driver, []).append(unique)
        for driver, uniques in by_driver.items():
            limit = limits.get(driver)
            if limit is None:
                continue
            new = np.zeros(cluster.n, dtype=np.int64)
            for unique in uniques:
                new += 1
                for node in volumes.attached_nodes.get(unique, ()):
                    new[node] -= 1
            attached = volumes.attached_count.get(driver)
            total = new if attached is None else attached + new
            rejected |= (limit >= 0) & has_csi & (new > 0) & (total > limit)
        result.reject(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, rejected)
        return result

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        volumes = volume_state(cluster)
        limits, _ = volumes.volume_limits()
        details = []
        for driver, limit in limits.items():
            attached = volumes.attached_count.get(driver)
            used = int(attached[node]) if attached is not None else 0
            if limit[node] >= 0:
                details.append(f"{driver}: {used} of {int(limit[node])} volumes attached")
        return NodeExplanation(details, ["free a volume slot on the node, or raise the driver's limit"])


def new(args: dict, handle: object) -> NodeVolumeLimits:
    return NodeVolumeLimits()
