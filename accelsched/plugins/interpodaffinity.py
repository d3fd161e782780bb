"""InterPodAffinity: required and preferred pod affinity and anti-affinity over any topology key.

Counting follows kube-scheduler exactly: a domain satisfies the incoming pod's required affinity when it holds
a bound pod matching *all* of its terms; anti-affinity is counted term by term; and required anti-affinity is
symmetric, so a bound pod's anti-affinity also keeps matching newcomers out of its domain. Counts per node come
from ClusterState's incrementally maintained selector counts, then sum per domain with one bincount.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accelsched.api.objects import Pod, PodAffinityTerm
from accelsched.cluster.podmatch import NamespaceFilter, pod_matches_term
from accelsched.cluster.state import ClusterState, LabelColumn
from accelsched.errors import InputError
from accelsched.framework.interface import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    CycleState,
    FilterResult,
    NodeExplanation,
    Status,
)

NAME = "InterPodAffinity"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

Resolved = tuple[PodAffinityTerm, NamespaceFilter]


@dataclass
class _FilterState:
    affinity: list[Resolved] = field(default_factory=list)
    anti: list[Resolved] = field(default_factory=list)
    existing_anti: list[tuple[str, np.ndarray]] = field(default_factory=list)  # (topology key, per-node counts)


def _in_domain(sums: np.ndarray, col: LabelColumn) -> np.ndarray:
    """Per node: the domain total for the node's own domain, 0 where the node lacks the key."""
    if not len(col.values):
        return np.zeros(col.codes.shape, dtype=np.int64)
    return np.where(col.codes >= 0, sums[np.maximum(col.codes, 0)], 0)


def _domain_of(cluster: ClusterState, key: str, node: int) -> str | None:
    return cluster.nodes[node].labels.get(key)


class InterPodAffinity:
    name = NAME

    def __init__(self, hard_pod_affinity_weight: int = 1, ignore_existing_preferred: bool = False) -> None:
        self.hard_weight = hard_pod_affinity_weight
        self.ignore_existing_preferred = ignore_existing_preferred

    # ---------------------------------------------------------------------------------- filter

    def queueing_hint(self, waiting: Pod, bound: Pod) -> bool:
        """A newly bound pod can only help a pod whose required affinity it matches."""
        return any(
            pod_matches_term(
                bound,
                t.label_selector,
                frozenset(t.namespaces or (waiting.namespace,)) if t.namespace_selector is None else None,
            )
            for t in waiting.required_affinity
        )

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        if not (pod.required_affinity or pod.required_anti_affinity or cluster.term_groups["required_anti"]):
            return SKIP
        st = _FilterState(
            affinity=[(t, cluster.resolve_namespaces(t, pod.namespace)) for t in pod.required_affinity],
            anti=[(t, cluster.resolve_namespaces(t, pod.namespace)) for t in pod.required_anti_affinity],
            existing_anti=[
                (g.topology_key, counts)
                for g, counts in cluster.term_groups["required_anti"].items()
                if cluster.group_selects(g, pod)
            ],
        )
        if not (st.affinity or st.anti or st.existing_anti):
            return SKIP
        state[NAME] = st
        return SUCCESS

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        """Without required terms of its own or of any bound pod, this filter passes every node whatever pods
        run there (DefaultPreemption's shortcut)."""
        return not (pod.required_affinity or pod.required_anti_affinity or cluster.term_groups["required_anti"])

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        st: _FilterState = state[NAME]
        result = FilterResult()
        rejected = np.zeros(cluster.n, dtype=bool)
        if st.affinity:
            fail = ~self._affinity_ok(st, pod, cluster)
            result.reject(ERR_REASON_AFFINITY, fail, resolvable=False)
            rejected |= fail
        if st.anti:
            hit = np.zeros(cluster.n, dtype=bool)
            for term, ns in st.anti:
                sums, col = cluster.domain_counts(term.topology_key, cluster.selector_counts(term.label_selector, ns))
                hit |= _in_domain(sums, col) > 0
            result.reject(ERR_REASON_ANTI_AFFINITY, hit & ~rejected)
            rejected |= hit
        if st.existing_anti:
            hit = np.zeros(cluster.n, dtype=bool)
            for key, counts in st.existing_anti:
                sums, col = cluster.domain_counts(key, counts)
                hit |= _in_domain(sums, col) > 0
            result.reject(ERR_REASON_EXISTING_ANTI_AFFINITY, hit & ~rejected)
        return result

    def _affinity_ok(self, st: _FilterState, pod: Pod, cluster: ClusterState) -> np.ndarray:
        conditions = tuple((t.label_selector, ns) for t, ns in st.affinity if t.label_selector is not None)
        has_keys = np.ones(cluster.n, dtype=bool)
        any_key = np.zeros(cluster.n, dtype=bool)
        for term, _ in st.affinity:
            present = cluster.labels(term.topology_key).present
            has_keys &= present
            any_key |= present
        if len(conditions) < len(st.affinity):
            return np.zeros(cluster.n, dtype=bool)  # a nil selector matches no pod
        counts = cluster.match_counts(conditions)
        if not (counts[any_key] > 0).any():
            # No topology pair counts a matching pod (pods on nodes without any of the keys add no pair):
            # the first pod of a group that selects itself may go anywhere with the keys.
            if all(pod_matches_term(pod, t.label_selector, ns) for t, ns in st.affinity):
                return has_keys
            return np.zeros(cluster.n, dtype=bool)
        ok = has_keys.copy()
        for term, _ in st.affinity:
            sums, col = cluster.domain_counts(term.topology_key, counts)
            ok &= _in_domain(sums, col) > 0
        return ok

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        out = NodeExplanation()
        name = cluster.nodes[node].name
        named: set[str] = set()  # a pod named as a blocker is not named again for its own (symmetric) term

        def in_domain(key: str) -> list[tuple[int, Pod]]:
            domain = _domain_of(cluster, key, node)
            if domain is None:
                return []
            return [
                (i, p)
                for i in range(cluster.n)
                if cluster.nodes[i].labels.get(key) == domain
                for p in cluster.pods_on[i].values()
            ]

        for term in pod.required_anti_affinity:
            ns = cluster.resolve_namespaces(term, pod.namespace)
            blockers = [(i, p) for i, p in in_domain(term.topology_key) if pod_matches_term(p, term.label_selector, ns)]
            if blockers:
                domain = _domain_of(cluster, term.topology_key, node)
                named.update(p.key for _, p in blockers)
                listed = ", ".join(f"{p.key} on {cluster.nodes[i].name}" for i, p in blockers[:5])
                out.details.append(
                    f"anti-affinity on {term.topology_key}: {name} is in {domain}, which already runs {listed}"
                )
                out.remedies.append(f"moving the matching pods out of {term.topology_key}={domain}")
        for term in pod.required_affinity:
            domain = _domain_of(cluster, term.topology_key, node)
            if domain is None:
                out.details.append(f"affinity on {term.topology_key}: {name} has no {term.topology_key} label")
            else:
                out.details.append(f"affinity on {term.topology_key}: no pod matching the term runs in {domain}")
        for i in range(cluster.n):
            for p in cluster.pods_on[i].values():
                if p.key in named:
                    continue
                for term in p.required_anti_affinity:
                    ns = cluster.resolve_namespaces(term, p.namespace)
                    domain = _domain_of(cluster, term.topology_key, node)
                    if (
                        domain is not None
                        and cluster.nodes[i].labels.get(term.topology_key) == domain
                        and pod_matches_term(pod, term.label_selector, ns)
                    ):
                        out.details.append(
                            f"existing pod {p.key} on {cluster.nodes[i].name} keeps matching pods out of "
                            f"{term.topology_key}={domain} (its required anti-affinity)"
                        )
        return out

    # ---------------------------------------------------------------------------------- score

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> Status:
        groups = cluster.term_groups
        has_preferred = bool(pod.preferred_affinity or pod.preferred_anti_affinity)
        if self.ignore_existing_preferred and not has_preferred:
            return SKIP  # ignorePreferredTermsOfExistingPods: existing pods' terms count only for such pods
        if not (
            pod.preferred_affinity
            or pod.preferred_anti_affinity
            or groups["required_affinity"]
            or groups["preferred_affinity"]
            or groups["preferred_anti"]
        ):
            return SKIP
        terms: list[tuple[str, np.ndarray, int]] = []
        for weighted, sign in ((pod.preferred_affinity, 1), (pod.preferred_anti_affinity, -1)):
            for w in weighted:
                ns = cluster.resolve_namespaces(w.term, pod.namespace)
                terms.append((w.term.topology_key, cluster.selector_counts(w.term.label_selector, ns), sign * w.weight))
        for kind, sign in (("required_affinity", 1), ("preferred_affinity", 1), ("preferred_anti", -1)):
            for g, counts in cluster.term_groups[kind].items():
                if cluster.group_selects(g, pod):
                    weight = self.hard_weight if kind == "required_affinity" else g.weight
                    if weight:
                        terms.append((g.topology_key, counts, sign * weight))
        if not terms:
            return SKIP
        state[NAME + "/score"] = terms
        return SUCCESS

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray | int:
        total = np.zeros(cluster.n, dtype=np.int64)
        for key, counts, weight in state[NAME + "/score"]:
            sums, col = cluster.domain_counts(key, counts)
            total += weight * _in_domain(sums, col)
        scores = total[feasible]
        lo, hi = int(scores.min()), int(scores.max())
        if hi == lo:
            return np.zeros(len(feasible), dtype=np.int64)
        # As kube-scheduler: the fraction first, then times MaxNodeScore, truncated (29/100 -> 28.999... -> 28).
        return (MAX_NODE_SCORE * ((scores - lo) / (hi - lo))).astype(np.int64)


def new(args: dict, handle: object) -> InterPodAffinity:
    unknown = set(args) - {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"}
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}", obj=f"pluginConfig {NAME}", field="args")
    weight = args.get("hardPodAffinityWeight", 1)
    if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= 100:
        raise InputError(
            f"must be an integer in 0..100, got {weight!r}",
            obj=f"pluginConfig {NAME}",
            field="args.hardPodAffinityWeight",
        )
    ignore = args.get("ignorePreferredTermsOfExistingPods", False)
    if not isinstance(ignore, bool):
        raise InputError(
            "must be true or false", obj=f"pluginConfig {NAME}", field="args.ignorePreferredTermsOfExistingPods"
        )
    return InterPodAffinity(weight, ignore)
