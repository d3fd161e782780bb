"""NodeName: a pod that names its node (spec.nodeName) fits only there."""

from __future__ import annotations

import numpy as np

from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.framework.interface import PASS, CycleState, FilterResult, NodeExplanation

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    name = NAME
    # Registers no Pod/Delete event (kube-scheduler's EventsToRegister): its verdict reads the node object alone.
    queues_on_pod_delete = False

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        """Evicting pods never changes this filter's verdict on a node (DefaultPreemption's shortcut)."""
        return True

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        if not pod.node_name:
            return PASS
        result = FilterResult()
        rejected = np.ones(cluster.n, dtype=bool)
        if pod.node_name in cluster.index:
            rejected[cluster.index[pod.node_name]] = False
        result.reject(ERR_REASON, rejected, resolvable=False)
        return result

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        return NodeExplanation([f"the pod asks for node {pod.node_name} (spec.nodeName)"], [])


def new(args: dict, handle: object) -> NodeName:
    return NodeName()
