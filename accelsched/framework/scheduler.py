"""The scheduling cycle: PreFilter -> Filter -> PostFilter -> PreScore -> Score -> Reserve -> Permit -> PreBind -> Bind.

One engine behind every mode: the caller hands pods to ``run`` (or one pod to ``schedule_one``); only the
binder differs between offline modes and live mode. Filters see all nodes at once and return masks; the
first filter that rejects a node gives that node's reason(s), exactly as kube-scheduler's FitError.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState, pod_matches_term
from accelsched.framework import gang
from accelsched.framework.coscheduling import Coscheduler
from accelsched.framework.interface import Code, CycleState, FilterResult, NodeScore, Status
from accelsched.framework.profile import Profile, SchedulerConfig
from accelsched.framework.queue import QueueingHint, SchedulingQueue
from accelsched.plugins.podtopologyspread import DEFAULTED_OWNERS

NO_NODES_AVAILABLE = "no nodes available to schedule pods"
GANG_DOMAIN_REASON = "node(s) were outside the gang's topology domain"
TIE_BREAKS = ("random", "name")


FilterLog = list[tuple[str, FilterResult, np.ndarray]]  # (plugin, its result, the nodes it was first to reject)


@dataclass
class Diagnosis:
    """Why a pod fits nowhere: the filters' masks, kept as arrays. The message needs only counts per reason
    (one count_nonzero each); per-node reasons are built only when someone asks for them (explain, JSON)."""

    log: FilterLog = field(default_factory=list)
    plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""

    def histogram(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for _, result, newly in self.log:
            for rejection in result.rejections:
                hit = int(np.count_nonzero(rejection.nodes & newly))
                if hit:
                    counts[rejection.reason] += hit
        return counts

    @functools.cached_property
    def node_reasons(self) -> dict[int, list[str]]:
        """Each rejected node's reasons, from the first filter that rejected it."""
        out: dict[int, list[str]] = {}
        for _, result, newly in self.log:
            for rejection in result.rejections:
                for i in np.flatnonzero(rejection.nodes & newly):
                    out.setdefault(int(i), []).append(rejection.reason)
        return dict(sorted(out.items()))


def fit_error_message(num_nodes: int, diagnosis: Diagnosis) -> str:
    """FitError.Error(): ``0/N nodes are available: <PreFilterMsg>. <sorted "count reason" list>. <PostFilterMsg>.``

    The PostFilter part is DefaultPreemption's ``preemption: `` + its own FitError message, which ends with a
    period already: kube-scheduler prints ``..`` at the end, and so does this."""
    if num_nodes == 0:
        return NO_NODES_AVAILABLE
    msg = f"0/{num_nodes} nodes are available:"
    if diagnosis.pre_filter_msg:
        msg += f" {diagnosis.pre_filter_msg}."
    else:
        msg += _histogram(diagnosis.histogram())
    if diagnosis.post_filter_msg:
        msg += f" {diagnosis.post_filter_msg}."
    return msg


def _histogram(counts: Counter[str]) -> str:
    """`` 3 Insufficient cpu, 10 node(s) were unschedulable.``: sorted as plain strings, as kube-scheduler does."""
    entries = sorted(f"{count} {reason}" for reason, count in counts.items() if count)
    return f" {', '.join(entries)}." if entries else ""


@dataclass
class Held:
    """A decision taken up to Permit, waiting for its gang: bound with it or rolled back with it."""

    pod: Pod
    profile: Profile
    state: CycleState
    node: int
    feasible: int


@dataclass
class ScheduleResult:
    pod: Pod
    node: str | None = None
    devices: dict[str, list[str]] = field(default_factory=dict)
    message: str = ""
    explicit_reasons: dict[str, list[str]] | None = None  # set directly when not from filters (kubelet admission)
    diagnosis: Diagnosis | None = None
    feasible: int = 0
    node_names: list[str] | None = field(default=None, repr=False)
    preempted: list[Pod] = field(default_factory=list)  # the pods evicted to make room for this one
    preempted_by: str = ""  # set on an evicted pod: the preemptor's namespace/name
    nominated: int | None = field(default=None, repr=False)  # the node DefaultPreemption made room on

    @property
    def scheduled(self) -> bool:
        return self.node is not None

    @property
    def reasons(self) -> dict[str, list[str]]:
        """Per rejected node its reasons (the contract's ``reasons``), built from the diagnosis on demand."""
        if self.explicit_reasons is not None:
            return self.explicit_reasons
        if self.diagnosis is None or self.node_names is None:
            return {}
        return {self.node_names[i]: r for i, r in self.diagnosis.node_reasons.items()}


class Scheduler:
    """Schedules pods onto a ClusterState with the profiles of a SchedulerConfig."""

    def __init__(
        self, cluster: ClusterState, config: SchedulerConfig, seed: int = 0, tie_break: str = "random"
    ) -> None:
        self.cluster = cluster
        self.config = config
        # Ties among the best nodes are broken by this seeded generator (Python's: far cheaper per call than numpy's).
        self.rng = random.Random(seed)
        # "random": kube-scheduler's choice among the best nodes. "name": the smallest node name, as the FGD paper's
        # simulator patches selectHost for reproducible experiments (accelsched simulate replays either).
        if tie_break not in TIE_BREAKS:
            raise ValueError(f"unknown tie break {tie_break!r} ({', '.join(TIE_BREAKS)})")
        self.tie_break = tie_break
        self.groups: dict[str, gang.PodGroup] = {}  # gangs by namespace/name (framework.gang)
        self.node_names = [node.name for node in cluster.nodes]
        self.all_nodes = np.arange(cluster.n)
        self.every_node = np.ones(cluster.n, dtype=bool)
        self.every_node.flags.writeable = False  # shared by every cycle in which no filter rejects a node
        first = next(iter(config.profiles.values()))
        self.hints: dict[str, QueueingHint] = {
            "InterPodAffinity": _affinity_hint,
            "PodTopologySpread": _spread_hint,
        }
        self.queue = SchedulingQueue(first.at("queueSort")[0].sort_key, self.hints)
        # Called with each pod right before its scheduling attempt (explanations hook in here).
        self.observer: Callable[[Pod], None] | None = None
        self.preempted: list[ScheduleResult] = []  # victims evicted since the queue last collected them

    # ------------------------------------------------------------------------------------ bound pods

    def admit_bound(self, pod: Pod) -> ScheduleResult | None:
        """Account a pod already bound to a node (spec.nodeName), as the kubelet admits it.

        Returns a result only when the kubelet would reject it (not enough room): that pod holds nothing.
        """
        node = self.cluster.index[pod.node_name]
        for row, amount in self.cluster.request_vector(pod):
            used = int(self.cluster.requested[row, node])
            alloc = int(self.cluster.allocatable[row, node])
            if used + amount > alloc:
                res = self.cluster.resources[row]
                message = (
                    f"Pod was rejected: Node didn't have enough resource: {res}, "
                    f"requested: {amount}, used: {used}, capacity: {alloc}"
                )
                return ScheduleResult(pod, None, {}, message, {pod.node_name: [f"OutOf{res}"]})
        devices = self.cluster.devices[node]
        try:
            if pod.devices:
                devices.claim(pod.devices, owner=pod.key)
            else:
                pod.devices = devices.allocate(pod.requests, owner=pod.key)
        except ValueError as exc:
            return ScheduleResult(
                pod, None, {}, f"Pod was rejected: {exc}", {pod.node_name: ["UnexpectedAdmissionError"]}
            )
        self.cluster.assume(pod, node)
        return None

    # ------------------------------------------------------------------------------------ the queue

    def run(self, pods: list[Pod]) -> list[ScheduleResult]:
        """Schedule pending pods in queue order until the queue is empty; unschedulable pods are retried
        when a bind could make them fit. Returns one result per pod, in the order of its last attempt."""
        for pod in pods:
            self.queue.add(pod)
        results: dict[str, ScheduleResult] = {}
        while (pod := self.queue.pop()) is not None:
            key = gang.group_key(pod)
            if key is not None and key in self.groups:
                # The whole gang leaves the queue together and is decided in one go (see framework.gang).
                members = [pod, *self.queue.take(lambda p, key=key: gang.group_key(p) == key)]
                outcome = self.schedule_gang(self.groups[key], members)
            else:
                if self.observer is not None:
                    self.observer(pod)
                outcome = [self.schedule_one(pod)]
            for victim in self.preempted:  # evicted by this outcome: listed before the pod that took their room
                results.pop(victim.pod.key, None)
                results[victim.pod.key] = victim
            self.preempted.clear()
            for result in outcome:
                results.pop(result.pod.key, None)
                results[result.pod.key] = result
                if result.scheduled:
                    self.queue.assigned_pod_added(result.pod)
                else:
                    plugins = frozenset(result.diagnosis.plugins) if result.diagnosis else frozenset()
                    self.queue.add_unschedulable(result.pod, plugins)
        return list(results.values())

    def schedule_gang(self, group: gang.PodGroup, members: list[Pod]) -> list[ScheduleResult]:
        """All or nothing, in one decision (framework.coscheduling)."""
        return Coscheduler(self).schedule(group, members)

    # ------------------------------------------------------------------------------------ one cycle

    def profile_for(self, pod: Pod) -> Profile | None:
        return self.config.profiles.get(pod.scheduler_name)

    def schedule_one(
        self, pod: Pod, hold: list[Held] | None = None, allowed: np.ndarray | None = None, post_filter: bool = True
    ) -> ScheduleResult:
        """One scheduling cycle. With ``hold``, stop after Reserve and Permit and append the decision there,
        so a gang is bound together (``complete``) or rolled back together (``release``)."""
        profile = self.profile_for(pod)
        if profile is None:
            return ScheduleResult(pod, message=f"no profile serves schedulerName {pod.scheduler_name!r}")
        cluster = self.cluster
        state = CycleState()
        state.allowed = allowed
        if cluster.n == 0:
            return ScheduleResult(pod, message=NO_NODES_AVAILABLE, diagnosis=Diagnosis())

        rejected = self._pre_filter(profile, state, pod)
        if rejected is not None:
            diagnosis = Diagnosis(pre_filter_msg=rejected.message, plugins={rejected.plugin})
            return self._unschedulable(pod, profile, state, diagnosis, post_filter=post_filter and hold is None)

        feasible, log = self.find_feasible(profile, state, pod)
        chosen = np.flatnonzero(feasible) if log else self.all_nodes
        if chosen.size == 0:
            result = self._unschedulable(
                pod, profile, state, self.diagnose(log), post_filter=post_filter and hold is None
            )
            if result.nominated is None:
                return result
            # Victims evicted: the next cycle (offline: now) tries the nominated node first, then every node.
            retry = self.schedule_one(pod, allowed=self.only(result.nominated), post_filter=False)
            if not retry.scheduled:
                retry = self.schedule_one(pod)
            retry.preempted = result.preempted + retry.preempted
            return retry

        node = int(chosen[0]) if chosen.size == 1 else self.select_host(profile, state, pod, chosen)
        failed = self._reserve(pod, profile, state, node)
        if failed is not None:
            return failed
        if hold is not None:  # a gang member: bound later with the rest of its gang, or rolled back
            hold.append(Held(pod, profile, state, node, int(chosen.size)))
            return ScheduleResult(pod, self.cluster.nodes[node].name, dict(pod.devices), feasible=int(chosen.size))
        return self._complete(pod, profile, state, node, int(chosen.size))

    def _pre_filter(self, profile: Profile, state: CycleState, pod: Pod) -> Status | None:
        """Run PreFilter; the first rejecting status, or None. Plugins that skip are left out of Filter."""
        for plugin in profile.at("preFilter"):
            status = plugin.pre_filter(state, pod, self.cluster)
            if status.code == Code.SKIP:
                state.skip_filter.add(plugin.name)
            elif not status.ok:
                return Status(status.code, status.reasons, plugin.name)
        return None

    def only(self, node: int) -> np.ndarray:
        mask = np.zeros(self.cluster.n, dtype=bool)
        mask[node] = True
        return mask

    # ------------------------------------------------------------------------------------ preemption

    def dry_run(self, pod: Pod, node: int, allowed: np.ndarray | None = None) -> list[str] | None:
        """Would ``pod`` pass PreFilter and every Filter on ``node`` as the cluster is now? None if so, else the
        reasons of the first filter that rejects it there (DefaultPreemption's per-node status)."""
        profile = self.profile_for(pod)
        if profile is None:
            return [f"no profile serves schedulerName {pod.scheduler_name!r}"]
        state = CycleState()
        state.allowed = self.only(node) if allowed is None else self.only(node) & allowed
        rejected = self._pre_filter(profile, state, pod)
        if rejected is not None:
            return list(rejected.reasons)
        feasible, log = self.find_feasible(profile, state, pod)
        if feasible[node]:
            return None
        return [
            r.reason
            for name, result, newly in log
            if name != gang.GANG and newly[node]
            for r in result.rejections
            if r.nodes[node]
        ]

    def evict(self, pod: Pod) -> int:
        """Take a bound pod off its node (devices and exclusive CPUs included); returns the node, for ``restore``."""
        cluster = self.cluster
        node = cluster.pod_node[pod.key]
        cluster.devices[node].release(pod.devices)
        self._exclusive_cpus(pod, node, +1)
        cluster.forget(pod, evicted=True)
        return node

    def restore(self, pod: Pod, node: int) -> None:
        """Put an evicted pod back where it was, on the same devices and CPUs."""
        self.cluster.devices[node].claim(pod.devices, owner=pod.key)
        self._exclusive_cpus(pod, node, -1)
        self.cluster.assume(pod, node)

    def _exclusive_cpus(self, pod: Pod, node: int, sign: int) -> None:
        index = self.cluster.topology_index
        if pod.exclusive_cpus and index is not None:
            for zone, count in pod.exclusive_cpus.items():
                index.cpu_free[node, zone] += sign * count  # type: ignore[attr-defined]

    def preempt(self, victims: list[Pod], by: Pod, node: int) -> None:
        """Evict ``victims`` for good (those not evicted yet), record each one's result, and give every waiting
        pod another try: a deleted pod frees room that any of them may use (kube-scheduler's AssignedPodDelete)."""
        where = self.node_names[node]
        for victim in victims:
            if victim.key in self.cluster.pod_node:
                self.evict(victim)
            victim.node_name = ""
            message = f"Preempted by {by.key} on node {where}"
            self.preempted.append(ScheduleResult(victim, message=message, preempted_by=by.key))
        self.queue.requeue_unschedulable()

    def histogram_message(self, counts: Counter[str]) -> str:
        """``0/N nodes are available: 2 Insufficient cpu, 3 <reason>.``: a FitError over per-node statuses."""
        return f"0/{self.cluster.n} nodes are available:{_histogram(counts)}"

    def find_feasible(
        self, profile: Profile, state: CycleState, pod: Pod
    ) -> tuple[np.ndarray, list[tuple[str, FilterResult, np.ndarray]]]:
        """Run the filters in order over all nodes; a node leaves at its first rejecting filter."""
        feasible = None  # every node, until a filter rejects one (most pods: no array at all)
        log = []
        if state.allowed is not None:  # a gang tried within one topology domain
            outside = FilterResult()
            outside.reject(GANG_DOMAIN_REASON, ~state.allowed, resolvable=False)
            log.append((gang.GANG, outside, ~state.allowed))
            feasible = state.allowed.copy()
        for plugin in profile.at("filter"):
            if plugin.name in state.skip_filter:
                continue
            result = plugin.filter(state, pod, self.cluster)
            if not result.rejections:
                continue
            rejected = result.rejected(self.cluster.n)
            newly = rejected.copy() if feasible is None else rejected & feasible
            if newly.any():
                log.append((plugin.name, result, newly))
                feasible = ~rejected if feasible is None else feasible & ~rejected
        return (self.every_node if feasible is None else feasible), log

    @staticmethod
    def diagnose(log: FilterLog) -> Diagnosis:
        return Diagnosis(log=log, plugins={name for name, _, _ in log})

    def score(
        self, profile: Profile, state: CycleState, pod: Pod, feasible: np.ndarray, breakdown: bool = False
    ) -> tuple[np.ndarray, dict[str, np.ndarray | int]]:
        """Weighted total per feasible node, and (with ``breakdown``) each plugin's normalized scores."""
        for plugin in profile.at("preScore"):
            status = plugin.pre_score(state, pod, self.cluster, feasible)
            if status.code == Code.SKIP:
                state.skip_score.add(plugin.name)
        if not breakdown:
            cached = self._node_local_total(profile, state, pod)
            if cached is not None:
                if feasible is self.all_nodes and state.total_key is not None:
                    state.best_nodes = self.cluster.best_nodes(state.total_key)
                return (cached if feasible.size == self.cluster.n else cached[feasible]), {}
        total = np.zeros(feasible.size, dtype=np.int64)
        parts: dict[str, np.ndarray | int] = {}
        for plugin in profile.at("score"):
            if plugin.name in state.skip_score:
                continue
            scores = plugin.score(state, pod, self.cluster, feasible)
            parts[plugin.name] = scores
            total += scores * profile.weights[plugin.name]  # a constant shifts every node alike
        return total, parts

    def _node_local_total(self, profile: Profile, state: CycleState, pod: Pod) -> np.ndarray | None:
        """The weighted total over all nodes when every active score is node-local (NodeScore), else None."""
        parts = []
        for plugin in profile.at("score"):
            if plugin.name in state.skip_score:
                continue
            node_score = getattr(plugin, "node_score", None)
            spec = node_score(state, pod, self.cluster) if node_score is not None else None
            if spec is None:
                return None
            if isinstance(spec, NodeScore):
                parts.append((profile.weights[plugin.name], spec))
        if not parts:
            return np.zeros(self.cluster.n, dtype=np.int64)
        if len(parts) == 1 and parts[0][0] == 1:
            state.total_key = parts[0][1].key
            return parts[0][1].values(self.cluster)
        # Specs are memoized per request shape by their plugins, so their identities name this total.
        key = ("weighted-total", tuple((weight, id(spec)) for weight, spec in parts))

        def compute(nodes: np.ndarray) -> np.ndarray:
            total = np.zeros(len(nodes), dtype=np.int64)
            for weight, spec in parts:
                total += weight * spec.compute(nodes)
            return total

        def compute_one(node: int) -> int:
            return sum(weight * spec.compute_one(node) for weight, spec in parts)

        state.total_key = key
        return self.cluster.node_values(key, compute, compute_one)

    def select_host(self, profile: Profile, state: CycleState, pod: Pod, feasible: np.ndarray) -> int:
        """The highest total; ties broken by the seeded generator, as kube-scheduler picks among the best."""
        total, _ = self.score(profile, state, pod, feasible)
        if state.best_nodes is not None:  # every node feasible: the cached total knows its best nodes
            if self.tie_break == "name":
                return min(state.best_nodes, key=self.node_names.__getitem__)
            return state.best_nodes[self.rng.randrange(len(state.best_nodes))]
        best = np.flatnonzero(total == total.max())
        if best.size > 1 and self.tie_break == "name":
            return min(feasible[best].tolist(), key=self.node_names.__getitem__)
        pick = best[0] if best.size == 1 else best[self.rng.randrange(best.size)]
        return int(feasible[pick])

    def _reserve(self, pod: Pod, profile: Profile, state: CycleState, node: int) -> ScheduleResult | None:
        """Assume, Reserve and Permit; a failure result (with everything undone), or None when held."""
        cluster = self.cluster
        cluster.assume(pod, node)
        reserve = profile.at("reserve")
        for i, plugin in enumerate(reserve):
            status = plugin.reserve(state, pod, cluster, node)
            if not status.ok:
                return self._rollback(pod, reserve[: i + 1], state, node, status)
        for plugin in profile.at("permit"):
            status, _timeout = plugin.permit(state, pod, cluster, node)
            if status.code == Code.WAIT:
                # One-shot modes have no clock to wait on: a pod that would wait is rejected at once.
                status = Status(
                    Code.UNSCHEDULABLE, (f"rejected while waiting at permit plugin {plugin.name}",), plugin.name
                )
            if not status.ok:
                return self._rollback(pod, reserve, state, node, status)
        return None

    def complete(self, held: Held) -> ScheduleResult:
        return self._complete(held.pod, held.profile, held.state, held.node, held.feasible)

    def release(self, held: Held) -> None:
        """Undo a held decision: Unreserve in reverse, forget the assumed pod."""
        for plugin in reversed(held.profile.at("reserve")):
            plugin.unreserve(held.state, held.pod, self.cluster, held.node)
        self.cluster.forget(held.pod)
        held.pod.node_name = ""

    def _complete(self, pod: Pod, profile: Profile, state: CycleState, node: int, feasible: int) -> ScheduleResult:
        """PreBind and Bind a reserved pod."""
        cluster = self.cluster
        reserve = profile.at("reserve")
        for plugin in profile.at("preBind"):
            status = plugin.pre_bind(state, pod, cluster, node)
            if not status.ok:
                return self._rollback(pod, reserve, state, node, status)
        for plugin in profile.at("bind"):
            status = plugin.bind(state, pod, cluster, node)
            if status.code == Code.SKIP:
                continue
            if not status.ok:
                return self._rollback(pod, reserve, state, node, status)
            break
        return ScheduleResult(pod, cluster.nodes[node].name, dict(pod.devices), feasible=feasible)

    def _rollback(self, pod: Pod, reserved: list, state: CycleState, node: int, status: Status) -> ScheduleResult:
        """Undo Reserve (in reverse) and the assumed capacity: a failed cycle leaves nothing behind."""
        for plugin in reversed(reserved):
            plugin.unreserve(state, pod, self.cluster, node)
        self.cluster.forget(pod)
        pod.node_name = ""
        message = f"running {status.plugin} on node {self.cluster.nodes[node].name}: {status.message}"
        return ScheduleResult(pod, message=message, diagnosis=Diagnosis(plugins={status.plugin}))

    def _unschedulable(
        self, pod: Pod, profile: Profile, state: CycleState, diagnosis: Diagnosis, post_filter: bool = True
    ) -> ScheduleResult:
        """The FitError result, after PostFilter (preemption) had its say. A gang member's PostFilter is left to
        its gang, which preempts only for the whole gang."""
        nominated = None
        for plugin in profile.at("postFilter") if post_filter else ():
            nominated, status = plugin.post_filter(state, pod, self, diagnosis)
            if status.message:
                diagnosis.post_filter_msg = status.message
            if nominated is not None:
                break
        message = fit_error_message(self.cluster.n, diagnosis)
        result = ScheduleResult(pod, None, {}, message, diagnosis=diagnosis, node_names=self.node_names)
        if nominated is not None:
            result.nominated, result.preempted = nominated.node, list(nominated.victims)
        return result


def _affinity_hint(waiting: Pod, bound: Pod) -> bool:
    """InterPodAffinity: a newly bound pod can only help a pod whose required affinity it matches."""
    return any(
        pod_matches_term(
            bound,
            t.label_selector,
            frozenset(t.namespaces or (waiting.namespace,)) if t.namespace_selector is None else None,
        )
        for t in waiting.required_affinity
    )


def _spread_hint(waiting: Pod, bound: Pod) -> bool:
    """PodTopologySpread: a bound pod in the same namespace matching a constraint can raise the minimum. A pod
    spread only by the profile's default constraints (selector from its owner) is woken by any such bind."""
    if bound.namespace != waiting.namespace:
        return False
    if not waiting.topology_spread_constraints:
        return waiting.owner_kind in DEFAULTED_OWNERS
    return any(
        c.label_selector is not None and c.label_selector.matches(bound.labels)
        for c in waiting.topology_spread_constraints
    )
