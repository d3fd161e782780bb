"""PodTopologySpread: maxSkew across topology domains (DoNotSchedule filters, ScheduleAnyway scores), with
minDomains, nodeAffinityPolicy/nodeTaintsPolicy, matchLabelKeys and the System default constraints."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accelsched.api.objects import (
    DO_NOT_SCHEDULE,
    HOSTNAME_LABEL,
    SCHEDULE_ANYWAY,
    Pod,
    TopologySpreadConstraint,
    parse_spread_constraints,
)
from accelsched.api.selectors import LabelSelector
from accelsched.cluster.state import ClusterState
from accelsched.errors import InputError, Where
from accelsched.framework.interface import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    CycleState,
    FilterResult,
    NodeExplanation,
    Status,
)
from accelsched.plugins.nodeaffinity import required_mask

NAME = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
ZONE_LABEL = "topology.kubernetes.io/zone"
# The System defaulting of kube-scheduler: spread replicas softly over hosts and zones.
SYSTEM_DEFAULT_CONSTRAINTS = (
    TopologySpreadConstraint(3, HOSTNAME_LABEL, SCHEDULE_ANYWAY, None),
    TopologySpreadConstraint(5, ZONE_LABEL, SCHEDULE_ANYWAY, None),
)
# Labels that differ per replica, so they cannot be part of the owner's selector.
_PER_POD_LABELS = (
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
    "batch.kubernetes.io/job-completion-index",
)
DEFAULTED_OWNERS = ("ReplicaSet", "StatefulSet", "ReplicationController")


@dataclass
class _Constraint:
    spec: TopologySpreadConstraint
    selector: LabelSelector
    counts: np.ndarray  # bound matching pods per node
    self_match: int


class PodTopologySpread:
    name = NAME

    def __init__(
        self,
        default_constraints: tuple[TopologySpreadConstraint, ...] = SYSTEM_DEFAULT_CONSTRAINTS,
        system_defaulted: bool = True,
    ) -> None:
        self.default_constraints = default_constraints
        self.system_defaulted = system_defaulted

    def _constraints(self, pod: Pod, cluster: ClusterState, when: str) -> list[_Constraint]:
        specs = pod.topology_spread_constraints
        default_selector = None
        if not specs and self.default_constraints and pod.owner_kind in DEFAULTED_OWNERS:
            # DefaultSelector: the owner's selector, approximated by the labels all replicas share.
            default_selector = LabelSelector(
                tuple(sorted((k, v) for k, v in pod.labels.items() if k not in _PER_POD_LABELS))
            )
            specs = self.default_constraints
        out = []
        namespaces = frozenset({pod.namespace})
        for spec in specs:
            if spec.when_unsatisfiable != when:
                continue
            selector = spec.label_selector if spec.label_selector is not None else default_selector
            if selector is None:
                continue  # a nil selector matches no pod: the constraint cannot skew anything
            extra = {k: pod.labels[k] for k in spec.match_label_keys if k in pod.labels}
            if extra:
                selector = selector.with_labels(extra)
            counts = cluster.selector_counts(selector, namespaces)
            out.append(_Constraint(spec, selector, counts, int(selector.matches(pod.labels))))
        return out

    def _eligible(
        self, pod: Pod, cluster: ClusterState, constraints: list[_Constraint], require_all: bool = True
    ) -> list[np.ndarray]:
        """Per constraint, the nodes whose pods count: they carry every key (or, for System defaults, this
        constraint's key) and pass the inclusion policies."""
        all_keys = np.ones(cluster.n, dtype=bool)
        for c in constraints:
            all_keys &= cluster.labels(c.spec.topology_key).present
        out = []
        for c in constraints:
            mask = all_keys.copy() if require_all else cluster.labels(c.spec.topology_key).present.copy()
            if c.spec.node_affinity_policy == "Honor":
                mask &= required_mask(pod, cluster)
            if c.spec.node_taints_policy == "Honor":
                mask &= ~cluster.untolerated_mask(pod.tolerations)
            out.append(mask)
        return out

    # ---------------------------------------------------------------------------------- filter

    def queueing_hint(self, waiting: Pod, bound: Pod) -> bool:
        """A bound pod in the same namespace matching a constraint can raise the minimum. A pod spread only by the
        profile's default constraints (selector from its owner) is woken by any such bind."""
        if bound.namespace != waiting.namespace:
            return False
        if not waiting.topology_spread_constraints:
            return waiting.owner_kind in DEFAULTED_OWNERS
        return any(
            c.label_selector is not None and c.label_selector.matches(bound.labels)
            for c in waiting.topology_spread_constraints
        )

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        constraints = self._constraints(pod, cluster, DO_NOT_SCHEDULE)
        if not constraints:
            return SKIP
        state[NAME] = constraints
        return SUCCESS

    def _skew(
        self, pod: Pod, cluster: ClusterState, constraints: list[_Constraint]
    ) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """Per constraint: (matching pods in each node's domain, node has the key, the minimum over domains)."""
        out = []
        for c, eligible in zip(constraints, self._eligible(pod, cluster, constraints), strict=True):
            col = cluster.labels(c.spec.topology_key)
            size = max(len(col.values), 1)
            codes = col.codes[eligible]
            sums = np.bincount(codes, weights=c.counts[eligible], minlength=size).astype(np.int64)
            domains = np.bincount(codes, minlength=size) > 0
            n_domains = int(domains.sum())
            minimum = int(sums[domains].min()) if n_domains else 2**31 - 1
            if c.spec.min_domains is not None and n_domains < c.spec.min_domains:
                minimum = 0
            in_domain = np.where(col.present, sums[np.maximum(col.codes, 0)], 0)
            out.append((in_domain, col.present, minimum))
        return out

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        """Without a hard (DoNotSchedule) constraint, own or defaulted, this filter passes every node whatever
        pods run there (DefaultPreemption's shortcut)."""
        return not self._constraints(pod, cluster, "DoNotSchedule")

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        constraints: list[_Constraint] = state[NAME]
        result = FilterResult()
        rejected = np.zeros(cluster.n, dtype=bool)
        missing_all = np.zeros(cluster.n, dtype=bool)
        skewed_all = np.zeros(cluster.n, dtype=bool)
        for c, (in_domain, present, minimum) in zip(constraints, self._skew(pod, cluster, constraints), strict=True):
            missing = ~present & ~rejected
            rejected |= missing
            skewed = present & ~rejected & (in_domain + c.self_match - minimum > c.spec.max_skew)
            rejected |= skewed
            missing_all |= missing
            skewed_all |= skewed
        result.reject(ERR_REASON_NODE_LABEL_NOT_MATCH, missing_all, resolvable=False)
        result.reject(ERR_REASON_CONSTRAINTS_NOT_MATCH, skewed_all)
        return result

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        constraints: list[_Constraint] = state.get(NAME) or self._constraints(pod, cluster, DO_NOT_SCHEDULE)
        out = NodeExplanation()
        name = cluster.nodes[node].name
        for c, (in_domain, present, minimum) in zip(constraints, self._skew(pod, cluster, constraints), strict=True):
            key = c.spec.topology_key
            if not present[node]:
                out.details.append(f"{name} has no {key} label, which the spread constraint needs")
                out.remedies.append(f"label {name} with {key}")
                continue
            skew = int(in_domain[node]) + c.self_match - minimum
            if skew > c.spec.max_skew:
                domain = cluster.nodes[node].labels[key]
                out.details.append(
                    f"{key}={domain} would hold {int(in_domain[node]) + c.self_match} matching pods "
                    f"vs {minimum} in the emptiest domain: skew {skew} > maxSkew {c.spec.max_skew}"
                )
                out.remedies.append(f"maxSkew >= {skew} (or room in the emptiest {key} domain)")
        return out

    # ---------------------------------------------------------------------------------- score

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> Status:
        constraints = self._constraints(pod, cluster, SCHEDULE_ANYWAY)
        if not constraints:
            return SKIP
        state[NAME + "/score"] = constraints
        return SUCCESS

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray | int:
        constraints: list[_Constraint] = state[NAME + "/score"]
        # kube-scheduler ignores nodes lacking any key, except under System defaulting, so that nodes without a
        # zone label still get hostname spreading (requireAllTopologies in scoring.go).
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        scored = np.ones(len(feasible), dtype=bool)
        if require_all:
            for c in constraints:
                scored &= cluster.labels(c.spec.topology_key).present[feasible]
        raw = np.zeros(len(feasible), dtype=np.float64)
        for c, eligible in zip(constraints, self._eligible(pod, cluster, constraints, require_all), strict=True):
            col = cluster.labels(c.spec.topology_key)
            size = max(len(col.values), 1)
            sums = np.bincount(col.codes[eligible], weights=c.counts[eligible], minlength=size)
            codes = col.codes[feasible]
            has_key = scored & (codes >= 0)
            if c.spec.topology_key == HOSTNAME_LABEL:
                n_domains = int(has_key.sum())
            else:  # the distinct domains among them: a count per code, not a sort (np.unique)
                n_domains = int(np.count_nonzero(np.bincount(codes[has_key], minlength=size)))
            weight = math.log(n_domains + 2)
            # Only a node with the constraint's key gets its count and the maxSkew-1 offset (scoreForCount).
            raw += np.where(codes >= 0, sums[np.maximum(codes, 0)] * weight + (c.spec.max_skew - 1), 0)
        scores = np.round(raw).astype(np.int64)
        out = np.zeros(len(feasible), dtype=np.int64)
        if not scored.any():
            return out
        lo, hi = int(scores[scored].min()), int(scores[scored].max())
        if hi == 0:
            out[scored] = MAX_NODE_SCORE
        else:
            out[scored] = MAX_NODE_SCORE * (hi + lo - scores[scored]) // hi
        return out


def new(args: dict, handle: object) -> PodTopologySpread:
    where = f"pluginConfig {NAME}"
    unknown = set(args) - {"defaultConstraints", "defaultingType"}
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}", obj=where, field="args")
    kind = args.get("defaultingType", "System")
    if kind not in ("System", "List"):
        raise InputError(f"unknown value {kind!r} (System or List)", obj=where, field="args.defaultingType")
    if kind == "System":
        if args.get("defaultConstraints"):
            raise InputError("must be empty when defaultingType is System", obj=where, field="args.defaultConstraints")
        return PodTopologySpread(SYSTEM_DEFAULT_CONSTRAINTS)
    constraints = parse_spread_constraints(
        Where("", where), args.get("defaultConstraints") or [], "args.defaultConstraints"
    )
    return PodTopologySpread(tuple(constraints), system_defaulted=False)
