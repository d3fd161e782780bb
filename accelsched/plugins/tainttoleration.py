"""TaintToleration: NoSchedule/NoExecute taints filter, PreferNoSchedule taints lower the score."""

from __future__ import annotations

import numpy as np

from accelsched.api.objects import Pod
from accelsched.api.selectors import NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, untolerated_taint
from accelsched.cluster.state import ClusterState
from accelsched.framework.interface import PASS, CycleState, FilterResult, NodeExplanation, default_normalize

NAME = "TaintToleration"
ERR_REASON_NOT_MATCH = "node(s) had untolerated taint(s)"


class TaintToleration:
    name = NAME
    # Registers no Pod/Delete event (kube-scheduler's EventsToRegister): its verdict reads the node object alone.
    queues_on_pod_delete = False

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        """Evicting pods never changes this filter's verdict on a node (DefaultPreemption's shortcut)."""
        return True

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        if not cluster.has_hard_taints:
            return PASS
        result = FilterResult()
        result.reject(ERR_REASON_NOT_MATCH, cluster.untolerated_mask(pod.tolerations), resolvable=False)
        return result

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        n = cluster.nodes[node]
        taint = untolerated_taint(pod.tolerations, n.taints, (NO_SCHEDULE, NO_EXECUTE))
        if taint is None:
            return NodeExplanation()
        return NodeExplanation(
            [f"{n.name} has taint {taint} that the pod does not tolerate"],
            [f"tolerate {taint}"],
        )

    def node_score(self, state: CycleState, pod: Pod, cluster: ClusterState) -> int | None:
        """Constant (the maximum) when no node has a PreferNoSchedule taint; otherwise normalized over nodes."""
        return None if any(t.effect == PREFER_NO_SCHEDULE for t in cluster.taints) else 100

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray | int:
        if not any(t.effect == PREFER_NO_SCHEDULE for t in cluster.taints):
            return 100  # no PreferNoSchedule taint anywhere: every node scores the maximum
        # Only tolerations that can apply to PreferNoSchedule count (getAllTolerationPreferNoSchedule).
        tolerations = tuple(t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE))
        counts = cluster.untolerated_count(tolerations, PREFER_NO_SCHEDULE)[feasible]
        return default_normalize(counts, reverse=True)


def new(args: dict, handle: object) -> TaintToleration:
    return TaintToleration()
