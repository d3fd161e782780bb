"""DefaultPreemption: when a pod fits nowhere, evict the fewest, lowest-priority pods that make room on one node.

kube-scheduler's evaluator (pkg/scheduler/framework/preemption), step by step:

1. Eligibility: a pod with ``preemptionPolicy: Never`` never preempts.
2. Nodes where preemption might help: those whose first failing filter rejected them *resolvably*, Unschedulable
   rather than UnschedulableAndUnresolvable (too little free capacity, anti-affinity, spreading skew); taints,
   node affinity, cordons, node names and a node too small for the request even when empty cannot be fixed by
   evicting pods. Every other node counts as "Preemption is not helpful for scheduling"; a helpful node without
   a lower-priority pod as "No preemption victims found for incoming pod" (SelectVictimsOnNode).
3. A dry run per node (SelectVictimsOnNode): remove every pod of lower priority; if the pod still does not fit,
   the node keeps its filter reasons. Otherwise add the removed pods back, most important first, keeping each one
   with which the pod still fits: the rest are the victims. When every filter of the profile reads only the node at
   hand, this runs on a copy of the node (its free amounts and device ledger), as kube-scheduler's runs on a
   NodeInfo clone; otherwise on the live state, restored after.
4. The candidate: lowest highest-victim priority, then lowest priority sum, then fewest victims, then first.
5. The victims are evicted and the pod is nominated to that node.

As kube-scheduler, the dry run visits the potential nodes from a random offset and stops once it holds
``max(minCandidateNodesPercentage% of nodes, minCandidateNodesAbsolute)`` candidates. PodDisruptionBudgets and
the victims' start times come from status.startTime (a pod without one counts as started now); PodDisruptionBudgets
(criterion 1) are not modelled.

Gang-aware: a bound pod of a gang (label ``scheduling.x-k8s.io/pod-group``) is evicted only together with every
bound member of its gang, and only when all of them have lower priority; evicting part of a running gang would
leave the rest holding accelerators for a job that cannot run. The evaluator is also the gang's own: a pending
gang asks it per member (``find_candidate`` with the gang's members excluded), and keeps the evictions only if
the whole gang then fits (framework.scheduler.schedule_gang).
"""

from __future__ import annotations

import functools
import math
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from accelsched.api.objects import Pod
from accelsched.errors import InputError
from accelsched.framework import gang
from accelsched.framework.interface import SUCCESS, CycleState, Status, unschedulable

if TYPE_CHECKING:
    from accelsched.framework.scheduler import Diagnosis, Scheduler

NAME = "DefaultPreemption"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
PREEMPT_NEVER = "Never"
# pickOneNodeForPreemption adds MaxInt32 + 1 to every priority before summing, so negative priorities count too.
_PRIORITY_OFFSET = 2**31
MEMO_SHAPES = 32  # per-node victim memos kept, by (profile, request shape, priority), least recently used out


class _Memo:
    """Per node: the node version a result holds for (-2: none yet, -1: depends on other nodes), whether it is a
    candidate, its rank (Candidate.rank) and the candidate or the reasons."""

    def __init__(self, n: int) -> None:
        self.version = np.full(n, -2, dtype=np.int64)
        self.ok = np.zeros(n, dtype=bool)
        self.highest = np.zeros(n, dtype=np.int64)
        self.total = np.zeros(n, dtype=np.int64)
        self.count = np.zeros(n, dtype=np.int64)
        self.latest = np.zeros(n, dtype=np.float64)  # minus the earliest start among the highest-priority victims
        # By node, only for the nodes evaluated: a preemptor visits a few of them, and a list per node built for
        # every PostFilter was most of its cost at 5,000 nodes.
        self.candidates: dict[int, Candidate | None] = {}
        self.reasons: dict[int, list[str]] = {}

    def store(self, node: int, version: int, candidate: Candidate | None, reasons: list[str]) -> None:
        self.version[node] = version
        self.candidates[node] = candidate
        self.reasons[node] = reasons
        self.ok[node] = candidate is not None
        if candidate is not None:
            self.highest[node], self.total[node], self.count[node], self.latest[node], _ = candidate.rank


Gangs = Callable[[], dict[str, list[Pod]]]  # the running gangs' bound members, computed once when first asked


@dataclass
class Candidate:
    """A node and the pods to evict there (a gang's members on other nodes included)."""

    node: int
    victims: list[Pod]

    @functools.cached_property
    def rank(self) -> tuple[int, int, int, float, int]:
        """pickOneNodeForPreemption's criteria after PDBs, smallest first: the highest victim priority, the priority
        sum, the victim count, then the latest earliest start among the highest-priority victims."""
        highest = max(v.priority for v in self.victims)
        total = sum(v.priority + _PRIORITY_OFFSET for v in self.victims)
        earliest = min(_started(v) for v in self.victims if v.priority == highest)
        return (highest, total, len(self.victims), -earliest, self.node)


class DefaultPreemption:
    name = NAME

    def __init__(self, min_percentage: int = 10, min_absolute: int = 100) -> None:
        self.min_percentage = min_percentage
        self.min_absolute = min_absolute

    def post_filter(
        self, state: CycleState, pod: Pod, handle: Scheduler, diagnosis: Diagnosis
    ) -> tuple[Candidate | None, Status]:
        """Nominate a node after evicting its victims, or say why preemption cannot help (the FitError's
        ``preemption: ...`` part)."""
        if pod.preemption_policy == PREEMPT_NEVER:
            return None, unschedulable(NAME, f"preemption: {NOT_ELIGIBLE_NEVER}")
        candidate, statuses = self.find_candidate(pod, handle, diagnosis)
        if candidate is None:
            return None, unschedulable(NAME, f"preemption: {handle.histogram_message(statuses)}")
        handle.preempt(candidate.victims, pod, candidate.node)
        return candidate, SUCCESS

    def find_candidate(
        self,
        pod: Pod,
        handle: Scheduler,
        diagnosis: Diagnosis,
        exclude: frozenset[str] = frozenset(),
        allowed: np.ndarray | None = None,
    ) -> tuple[Candidate | None, Counter[str]]:
        """The best candidate (state unchanged), and per reason the number of nodes that gave it."""
        cluster = handle.cluster
        statuses: Counter[str] = Counter()
        helpful = _helpful_nodes(diagnosis, cluster.n)
        if allowed is not None:
            helpful &= allowed
        statuses[NOT_HELPFUL] += int(cluster.n - np.count_nonzero(helpful))
        has_lower = helpful & (cluster.min_priority < pod.priority)
        statuses[NO_VICTIMS] += int(np.count_nonzero(helpful & ~has_lower))
        potential = has_lower & ~self._still_short(pod, handle, has_lower, statuses)
        # GetOffsetAndNumCandidates over the nodes where preemption might help: a random offset into them, and
        # max(minCandidateNodesPercentage% of them, minCandidateNodesAbsolute) candidates at most. Nodes already
        # known to hold no candidate keep their place in that order but are not visited.
        helpful_nodes = np.flatnonzero(helpful)
        wanted = min(max(helpful_nodes.size * self.min_percentage // 100, self.min_absolute), helpful_nodes.size)
        by_fit = _fit_decides(pod, handle)
        local = None if by_fit is not None else _node_local_filters(pod, handle)
        # Which bound pods form each running gang: the same at every node's dry run (each restores the state).
        gangs = functools.cache(functools.partial(bound_gangs, handle))
        # By Fit, a node's victims depend on its own pods only (unless a gang spans nodes): kept per node and
        # request shape, valid while the node's version is unchanged, so a stream of preemptors re-evaluates only
        # the nodes the previous ones changed.
        if (by_fit is not None or local is not None) and not exclude:
            key = (pod.scheduler_name, pod.shape, pod.priority, cluster.epoch)
            memos = cluster.memoized((NAME, "memos"), OrderedDict)
            memo = memos.get(key)
            if memo is None:
                memo = memos[key] = _Memo(cluster.n)
                if len(memos) > MEMO_SHAPES:
                    memos.popitem(last=False)
            memos.move_to_end(key)
        else:
            memo = _Memo(cluster.n)
        chosen: list[np.ndarray] = []
        found = 0
        if potential.any():
            order = np.roll(helpful_nodes, -handle.rng.randrange(helpful_nodes.size))
            order = order[potential[order]]
            start = 0
            while found < wanted and start < order.size:  # kube-scheduler stops once it holds ``wanted``
                chunk = order[start : start + wanted - found]
                start += chunk.size
                for node in chunk[memo.version[chunk] != cluster.node_version[chunk]].tolist():
                    memo.store(node, *self._evaluate(pod, node, handle, exclude, allowed, by_fit, gangs, local))
                ok = memo.ok[chunk]
                for node in chunk[~ok].tolist():
                    statuses.update(memo.reasons[node])
                chosen.append(chunk[ok])
                found += int(np.count_nonzero(ok))
        statuses = Counter({reason: count for reason, count in statuses.items() if count})
        if not found:
            return None, statuses
        nodes = np.concatenate(chosen)
        # Ties after the three criteria go to the first candidate in visiting order (random offset), as
        # pickOneNodeForPreemption returns the first of the candidates left.
        ranks = (memo.latest[nodes], memo.count[nodes], memo.total[nodes], memo.highest[nodes])
        best = np.lexsort((np.arange(nodes.size), *ranks))[0]
        return memo.candidates[int(nodes[best])], statuses

    def _evaluate(
        self,
        pod: Pod,
        node: int,
        handle: Scheduler,
        exclude: frozenset[str],
        allowed: np.ndarray | None,
        by_fit: list[tuple[int, int, str]] | None,
        gangs: Gangs,
        local: list[Any] | None = None,
    ) -> tuple[int, Candidate | None, list[str]]:
        """(the node's version it holds for, or -1 when it depends on other nodes; the candidate; the reasons)."""
        if by_fit is not None:
            local = [by_fit]
        if local is not None:
            victims, reasons = self.select_victims_here(pod, node, handle, exclude, local, gangs)
        else:
            victims, reasons = self.select_victims(pod, node, handle, exclude, allowed, gangs)
        spans = any(gang.group_key(v) is not None for v in handle.cluster.pods_on[node].values())
        version = -1 if spans else int(handle.cluster.node_version[node])
        return version, (Candidate(node, victims) if victims is not None else None), reasons

    @staticmethod
    def _still_short(pod: Pod, handle: Scheduler, nodes: np.ndarray, statuses: Counter[str]) -> np.ndarray:
        """Nodes where even evicting every lower-priority pod leaves too little room (NodeResourcesFit with what
        they hold counted as free), counted under Fit's reasons as their dry runs would be, without running them.
        Filters before Fit do not depend on pods, so on such a node Fit is the dry run's first failure."""
        profile = handle.profile_for(pod)
        fit = next((p for p in profile.at("filter") if hasattr(p, "rejected_after_freeing")), None) if profile else None
        short = np.zeros(handle.cluster.n, dtype=bool)
        if fit is None or not nodes.any():
            return short
        # A filter before Fit whose verdict depends on the pods (NodePorts, for a pod with host ports) may be the
        # dry run's first failure on such a node (a port held by a pod that stays): only the dry run can tell.
        filters = profile.at("filter")
        if not all(
            getattr(p, "pod_independent", None) and p.pod_independent(pod, handle.cluster)
            for p in filters[: filters.index(fit)]
        ):
            return short
        freed = handle.cluster.requested_below(pod.priority)
        for rejection in fit.rejected_after_freeing(pod, handle.cluster, freed).rejections:
            hit = rejection.nodes & nodes
            statuses[rejection.reason] += int(np.count_nonzero(hit))
            short |= hit
        return short

    def select_victims(
        self,
        pod: Pod,
        node: int,
        handle: Scheduler,
        exclude: frozenset[str],
        allowed: np.ndarray | None,
        gangs: Gangs | None = None,
        local: list[Any] | None = None,
    ) -> tuple[list[Pod] | None, list[str]]:
        """SelectVictimsOnNode. With ``local`` (``_node_local_filters``) on a copy of this node alone
        (``select_victims_here``), as kube-scheduler's dry run on a NodeInfo clone; otherwise every filter runs
        on the live state, which is restored before returning."""
        if local is not None:
            return self.select_victims_here(pod, node, handle, exclude, local, gangs)
        units = eviction_units(pod, node, handle, exclude, gangs)
        if not units:
            return None, [NO_VICTIMS]
        home = {v.key: handle.evict(v) for unit in units for v in unit}
        try:
            reasons = handle.dry_run(pod, node, allowed)
            if reasons is not None:
                return None, reasons
            victims: list[Pod] = []
            # Most important first (higher priority; stable, so the earlier bound first): each one the pod can
            # live beside is reprieved, the others stay evicted.
            for unit in sorted(units, key=functools.partial(_importance, handle.cluster)):
                for v in unit:
                    handle.restore(v, home[v.key])
                if handle.dry_run(pod, node, allowed) is not None:
                    for v in unit:
                        handle.evict(v)
                    victims.extend(unit)
            return victims, []
        finally:
            for unit in units:
                for v in unit:
                    if v.key not in handle.cluster.pod_node:
                        handle.restore(v, home[v.key])

    @staticmethod
    def select_victims_here(
        pod: Pod,
        node: int,
        handle: Scheduler,
        exclude: frozenset[str],
        local: list[Any],
        gangs: Gangs | None = None,
    ) -> tuple[list[Pod] | None, list[str]]:
        """SelectVictimsOnNode for the filters ``_node_local_filters`` allows, on a copy of the node: its free
        amounts for NodeResourcesFit's checks and a copy of its device ledger for the others (``node_reasons``).
        The same removal and reprieve as ``select_victims``, with nothing of the cluster's state touched: evicting
        and restoring every victim there (accounting, label indexes, caches) was most of a preemption's time."""
        cluster = handle.cluster
        units = eviction_units(pod, node, handle, exclude, gangs)
        if not units:
            return None, [NO_VICTIMS]
        rows = {row for check in local if isinstance(check, list) for row, _, _ in check}
        free = {row: int(cluster.free[row, node]) for row in rows}
        devices = cluster.devices[node].copy() if any(not isinstance(c, list) for c in local) else None
        # A gang's members on other nodes are evicted with it, but these filters read this node alone.
        here = [[v for v in unit if cluster.pod_node.get(v.key) == node] for unit in units]
        held = [_held(cluster, unit, rows) for unit in here]

        def move(k: int, sign: int) -> None:
            """Evict unit ``k`` from the copy (sign 1) or put it back (-1)."""
            for row, amount in held[k].items():
                free[row] += sign * amount
            if devices is not None:
                for v in here[k]:
                    if sign > 0:
                        devices.release(v.devices)
                    else:
                        devices.claim(v.devices, owner=v.key)

        def dry_run() -> list[str] | None:
            for check in local:
                if isinstance(check, list):  # NodeResourcesFit's (row, amount, reason)
                    reasons = [reason for row, amount, reason in check if free[row] < amount]
                else:
                    reasons = check.node_reasons(pod, cluster, node, devices)
                if reasons:
                    return reasons
            return None

        for k in range(len(units)):
            move(k, 1)
        reasons = dry_run()
        if reasons is not None:
            return None, reasons
        victims: list[Pod] = []
        # Most important first, as select_victims: each one the pod can live beside is reprieved.
        for k in sorted(range(len(units)), key=lambda k: _importance(cluster, units[k])):
            move(k, -1)
            if dry_run() is not None:
                move(k, 1)
                victims.extend(units[k])
        return victims, []

    @classmethod
    def select_victims_by_fit(
        cls,
        pod: Pod,
        node: int,
        handle: Scheduler,
        exclude: frozenset[str],
        checks: list[tuple[int, int, str]],
        gangs: Gangs | None = None,
    ) -> tuple[list[Pod] | None, list[str]]:
        """SelectVictimsOnNode for a pod only NodeResourcesFit can reject once static filters passed
        (``_fit_decides``): arithmetic on the node's free amounts, no dry run."""
        return cls.select_victims_here(pod, node, handle, exclude, [checks], gangs)


def _held(cluster: Any, pods: list[Pod], rows: set[int]) -> dict[int, int]:
    """What ``pods`` hold of the capacity ``rows``, together."""
    out: dict[int, int] = {}
    for v in pods:
        for row, amount in cluster.request_vector(v):
            if row in rows:
                out[row] = out.get(row, 0) + amount
    return out


def _started(pod: Pod) -> float:
    """GetPodStartTime: status.startTime, or now for a pod that has none (later than any recorded start)."""
    return math.inf if pod.start_time is None else pod.start_time


def _importance(cluster: Any, unit: list[Pod]) -> tuple[int, float, int]:
    """MoreImportantPod, most important first: higher priority, then started earlier; among pods without a start
    time, the one bound first."""
    return (
        -max(v.priority for v in unit),
        min(_started(v) for v in unit),
        min(cluster.bound_seq.get(v.key, 0) for v in unit),
    )


def _fit_decides(pod: Pod, handle: Scheduler) -> list[tuple[int, int, str]] | None:
    """NodeResourcesFit's checks when they alone decide whether ``pod`` fits a node after evictions: every other
    filter of the profile says its verdict does not depend on the pods there (``pod_independent``). Otherwise
    None: use full dry runs."""
    cluster = handle.cluster
    profile = handle.profile_for(pod)
    if profile is None:
        return None
    fit = None
    for plugin in profile.at("filter"):
        if hasattr(plugin, "rejected_after_freeing"):
            fit = plugin
        elif not (hasattr(plugin, "pod_independent") and plugin.pod_independent(pod, cluster)):
            return None
    return fit.checks(pod, cluster) if fit is not None else None


def _node_local_filters(pod: Pod, handle: Scheduler) -> list[Any] | None:
    """The filters a dry run must evaluate, in order, when each reads only the node at hand: NodeResourcesFit
    (its checks, on the node's free amounts) and plugins with ``node_reasons`` (DevicePartition: the node's own
    device ledger); every other filter says its verdict does not depend on the pods (``pod_independent``), as
    ``_fit_decides`` asks. None otherwise: full dry runs."""
    cluster = handle.cluster
    profile = handle.profile_for(pod)
    if profile is None:
        return None
    out: list[Any] = []
    for plugin in profile.at("filter"):
        if hasattr(plugin, "rejected_after_freeing"):
            out.append(plugin.checks(pod, cluster))
        elif hasattr(plugin, "node_reasons"):
            out.append(plugin)
        elif not (hasattr(plugin, "pod_independent") and plugin.pod_independent(pod, cluster)):
            return None
    return out


def eviction_units(
    pod: Pod, node: int, handle: Scheduler, exclude: frozenset[str], gangs: Gangs | None = None
) -> list[list[Pod]]:
    """The pods on ``node`` that ``pod`` may evict, grouped: a gang member comes with every bound member of its
    gang (``gangs``: the running gangs, asked for only when a gang member is met). A unit with any pod of equal
    or higher priority, or any excluded pod, is not a victim at all."""
    cluster = handle.cluster
    if gangs is None:
        gangs = functools.cache(functools.partial(bound_gangs, handle))
    units: list[list[Pod]] = []
    seen: set[str] = set()
    for victim in list(cluster.pods_on[node].values()):
        if victim.priority >= pod.priority or victim.key in exclude or victim.key in seen:
            continue
        key = gang.group_key(victim)
        unit = [victim] if key is None else gangs()[key]
        seen.update(v.key for v in unit)
        if all(v.priority < pod.priority and v.key not in exclude for v in unit):
            units.append(unit)
    return units


def bound_gangs(handle: Scheduler) -> dict[str, list[Pod]]:
    """Every bound pod that belongs to a gang, by gang (``namespace/name``)."""
    out: dict[str, list[Pod]] = {}
    for pods in handle.cluster.pods_on:
        for pod in pods.values():
            key = gang.group_key(pod)
            if key is not None:
                out.setdefault(key, []).append(pod)
    return out


def _helpful_nodes(diagnosis: Diagnosis, n: int) -> np.ndarray:
    """nodesWherePreemptionMightHelp: nodes whose first failing filter rejected them resolvably."""
    if diagnosis.pre_filter_msg:  # a PreFilter status stands for every node (SetAbsentNodesStatus)
        return np.full(n, diagnosis.pre_filter_resolvable, dtype=bool)
    helpful = np.zeros(n, dtype=bool)
    unresolvable = np.zeros(n, dtype=bool)
    for _, result, newly in diagnosis.log:
        helpful |= newly
        for rejection in result.rejections:
            if not rejection.resolvable:
                unresolvable |= rejection.nodes & newly
    return helpful & ~unresolvable


def new(args: dict[str, Any], handle: object) -> DefaultPreemption:
    """DefaultPreemptionArgs: minCandidateNodesPercentage (0..100, default 10) and minCandidateNodesAbsolute
    (>= 0, default 100), not both zero."""
    where = f"pluginConfig {NAME}"
    unknown = set(args) - {"minCandidateNodesPercentage", "minCandidateNodesAbsolute"}
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}", obj=where, field="args")
    pct = args.get("minCandidateNodesPercentage", 10)
    absolute = args.get("minCandidateNodesAbsolute", 100)
    for name, value, top in (("minCandidateNodesPercentage", pct, 100), ("minCandidateNodesAbsolute", absolute, None)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0 or (top is not None and value > top):
            bound = f"a whole number between 0 and {top}" if top is not None else "a whole number >= 0"
            raise InputError(f"must be {bound}, got {value!r}", obj=where, field=f"args.{name}")
    if pct == 0 and absolute == 0:
        raise InputError(
            "minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be 0", obj=where, field="args"
        )
    return DefaultPreemption(pct, absolute)
