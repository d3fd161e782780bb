"""NodeAffinity: nodeSelector and required node affinity filter; preferred terms add their weights."""

from __future__ import annotations

import numpy as np

from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.framework.interface import (
    SKIP,
    SUCCESS,
    CycleState,
    FilterResult,
    NodeExplanation,
    Status,
    default_normalize,
    unschedulable,
)

NAME = "NodeAffinity"
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_CONFLICT = "pod affinity terms conflict"  # every term names nodes, and none is named by all its parts


def required_mask(pod: Pod, cluster: ClusterState) -> np.ndarray:
    """Nodes matching the pod's nodeSelector and required node affinity (terms ORed)."""
    mask = cluster.node_selector_mask(pod.node_selector)
    if pod.required_node_affinity is not None:
        any_term = np.zeros(cluster.n, dtype=bool)
        for term in pod.required_node_affinity:
            any_term |= cluster.term_mask(term)
        mask &= any_term
    return mask


def named_nodes(pod: Pod) -> set[str] | None:
    """The node names the required terms allow, when every term names them (``matchFields metadata.name In``):
    the terms are ORed, a term's name requirements ANDed. None when some term allows any node by name."""
    if not pod.required_node_affinity:
        return None
    names: set[str] = set()
    for term in pod.required_node_affinity:
        term_names: set[str] | None = None
        for req in term.match_fields:
            if req.key == "metadata.name" and req.operator == "In":
                values = set(req.values)
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return names


class NodeAffinity:
    name = NAME
    # Registers no Pod/Delete event (kube-scheduler's EventsToRegister): its verdict reads the node object alone.
    queues_on_pod_delete = False

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        if not pod.node_selector and pod.required_node_affinity is None:
            return SKIP
        names = named_nodes(pod)
        if names is not None:
            if not names:
                return unschedulable(NAME, ERR_REASON_CONFLICT, resolvable=False)
            index = cluster.memoized(("node-index",), lambda: {n.name: i for i, n in enumerate(cluster.nodes)})
            nodes = np.zeros(cluster.n, dtype=bool)
            nodes[[index[name] for name in names if name in index]] = True
            state.narrow_nodes(NAME, nodes)
        return SUCCESS

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        """Evicting pods never changes this filter's verdict on a node (DefaultPreemption's shortcut)."""
        return True

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        result = FilterResult()
        result.reject(ERR_REASON_POD, ~required_mask(pod, cluster), resolvable=False)
        return result

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        n = cluster.nodes[node]
        details = []
        for key, value in pod.node_selector.items():
            if n.labels.get(key) != value:
                have = n.labels.get(key)
                details.append(
                    f"nodeSelector {key}={value}, but {n.name} has "
                    + (f"{key}={have}" if have is not None else f"no {key} label")
                )
        if pod.required_node_affinity is not None and not any(
            t.matches(n.name, n.labels) for t in pod.required_node_affinity
        ):
            failed = []
            for term in pod.required_node_affinity:
                failed.extend(
                    f"{r.key} {r.operator} {list(r.values)}" for r in term.match_expressions if not r.matches(n.labels)
                )
                failed.extend(
                    f"{r.key} {r.operator} {list(r.values)}"
                    for r in term.match_fields
                    if not r.matches({"metadata.name": n.name})
                )
            details.append(f"no required nodeAffinity term matches {n.name} (unmet: {'; '.join(failed)})")
        return NodeExplanation(details, [])

    def node_score(self, state: CycleState, pod: Pod, cluster: ClusterState) -> int | None:
        """Constant 0 without preferred terms; otherwise normalized over the feasible nodes."""
        return None if pod.preferred_node_affinity else 0

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray | int:
        if not pod.preferred_node_affinity:
            return 0
        total = np.zeros(len(feasible), dtype=np.int64)
        for pref in pod.preferred_node_affinity:
            total += pref.weight * cluster.term_mask(pref.term)[feasible]
        return default_normalize(total)


def new(args: dict, handle: object) -> NodeAffinity:
    return NodeAffinity()
