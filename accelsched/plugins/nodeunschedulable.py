"""NodeUnschedulable: a cordoned node (spec.unschedulable) takes only pods that tolerate the unschedulable taint."""

from __future__ import annotations

from accelsched.api.objects import Pod
from accelsched.api.selectors import NO_SCHEDULE, Taint, tolerates_all
from accelsched.cluster.state import ClusterState
from accelsched.framework.interface import PASS, CycleState, FilterResult, NodeExplanation

NAME = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)


class NodeUnschedulable:
    name = NAME
    # Registers no Pod/Delete event (kube-scheduler's EventsToRegister): its verdict reads the node object alone.
    queues_on_pod_delete = False

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        """Evicting pods never changes this filter's verdict on a node (DefaultPreemption's shortcut)."""
        return True

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        if not cluster.any_unschedulable or tolerates_all(pod.tolerations, UNSCHEDULABLE_TAINT):
            return PASS
        result = FilterResult()
        result.reject(ERR_REASON_UNSCHEDULABLE, cluster.unschedulable, resolvable=False)
        return result

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        name = cluster.nodes[node].name
        return NodeExplanation(
            [f"{name} is cordoned (spec.unschedulable: true)"],
            [f"`kubectl uncordon {name}` (or tolerate {UNSCHEDULABLE_TAINT})"],
        )


def new(args: dict, handle: object) -> NodeUnschedulable:
    return NodeUnschedulable()
