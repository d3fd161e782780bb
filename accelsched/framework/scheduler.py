"""The scheduling cycle: PreFilter -> Filter -> PostFilter -> PreScore -> Score -> Reserve -> Permit -> PreBind -> Bind.

One engine behind every mode: the caller hands pods to ``run`` (or one pod to ``schedule_one``); only the
binder differs between offline modes and live mode. Filters see all nodes at once and return masks; the
first filter that rejects a node gives that node's reason(s), exactly as kube-scheduler's FitError.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import SCHEDULING_GATED_MESSAGE, Pod
from accelsched.cluster.state import ClusterState
from accelsched.framework import gang
from accelsched.framework.coscheduling import Coscheduler
from accelsched.framework.equivalence import Failures
from accelsched.framework.interface import (
    Code,
    CycleState,
    FilterResult,
    NodeScore,
    PluginError,
    QueueingHintPlugin,
    Status,
)
from accelsched.framework.profile import Profile, SchedulerConfig
from accelsched.framework.queue import QueueingHint, SchedulingQueue
from accelsched.framework.types import (  # re-exported: the cycle's results are what callers of the scheduler use
    NO_NODES_AVAILABLE,
    SCHEDULER_ERROR,
    Diagnosis,
    FilterLog,
    Held,
    ScheduleResult,
    _histogram,
    fit_error_message,
)

# schedule_one.go: below this many nodes every node is evaluated; above, at least this many feasible ones are found.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone")
REGION_LABELS = ("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region")
GANG_DOMAIN_REASON = "node(s) were outside the gang's topology domain"
PRE_FILTER_RESULT = "PreFilterResult"  # the FilterLog entry for the nodes a PreFilter plugin left out
TIE_BREAKS = ("random", "name")


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """numFeasibleNodesToFind: how many feasible nodes a cycle looks for before it stops filtering. Every node below
    100; otherwise ``percentage`` of them (0: the adaptive 50 - nodes/125, at least 5), never fewer than 100."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def static_filters(profile: Profile) -> frozenset[str]:
    """The profile's leading filters that register no Pod/Delete event (``queues_on_pod_delete = False``)."""
    names = []
    for plugin in profile.at("filter"):
        if getattr(plugin, "queues_on_pod_delete", True):
            break
        names.append(plugin.name)
    return frozenset(names)


def zone_key(labels: dict[str, str]) -> str:
    """utilnode.GetZoneKey: region and zone (the beta labels first), empty for a node with neither."""
    zone = next((labels[k] for k in ZONE_LABELS if k in labels), "")
    region = next((labels[k] for k in REGION_LABELS if k in labels), "")
    return f"{region}:\x00:{zone}" if region or zone else ""


def snapshot_order(zones: list[str]) -> np.ndarray:
    """The snapshot's node order (backend/cache/node_tree.go list()): the first node of each zone, in the order
    the zones were first seen, then the second of each, and so on; nodes keep their input order within a zone."""
    first_seen: dict[str, int] = {}
    rank = np.empty(len(zones), dtype=np.int64)  # a node's position within its zone
    seen: Counter[str] = Counter()
    for i, zone in enumerate(zones):
        first_seen.setdefault(zone, len(first_seen))
        rank[i] = seen[zone]
        seen[zone] += 1
    zone_index = np.array([first_seen[z] for z in zones], dtype=np.int64)
    return np.lexsort((zone_index, rank)).astype(np.int64)


def _unchecked_resources(pod: Pod, reported: dict[str, int]) -> set[str]:
    """The extended resources the kubelet's admission leaves out of a pod (removeMissingExtendedResources): those
    the node does not report, and those a DRA claim serves (status.extendedResourceClaimStatus.requestMappings)."""
    status = (pod.raw.get("status") or {}).get("extendedResourceClaimStatus") or {}
    served = {str(m.get("resourceName")) for m in status.get("requestMappings") or [] if isinstance(m, dict)}
    return {r for r in pod.requests if quantity.is_extended(r) and (r not in reported or r in served)}


class Scheduler:
    """Schedules pods onto a ClusterState with the profiles of a SchedulerConfig."""

    def __init__(
        self,
        cluster: ClusterState,
        config: SchedulerConfig,
        seed: int = 0,
        tie_break: str = "random",
        score_all_nodes: bool = False,
    ) -> None:
        self.cluster = cluster
        self.config = config
        # percentageOfNodesToScore as kube-scheduler uses it; ``score_all_nodes`` filters and scores every node.
        self.score_all_nodes = score_all_nodes
        # A Pending pod's Diagnosis holds a mask per filter over every node: kept past its cycle only when someone
        # asked for per-node reasons (``schedule --reasons``); otherwise a Pending pod keeps its message alone, as
        # kube-scheduler keeps its FailedScheduling message, and memory grows with pods + nodes, not their product.
        self.keep_diagnosis = False
        self.next_start_node_index = 0  # nextStartNodeIndex: where the next cycle's search starts
        self._snapshot_order: np.ndarray | None = None
        self._order_twice = np.empty(0, dtype=np.int64)
        # Ties among the best nodes are broken by this seeded generator (Python's: far cheaper per call than numpy's).
        self.rng = random.Random(seed)
        # "random": kube-scheduler's choice among the best nodes. "name": the smallest node name, as the FGD paper's
        # simulator patches selectHost for reproducible experiments (accelsched simulate replays either).
        if tie_break not in TIE_BREAKS:
            raise ValueError(f"unknown tie break {tie_break!r} ({', '.join(TIE_BREAKS)})")
        self.tie_break = tie_break
        self.groups: dict[str, gang.PodGroup] = {}  # gangs by namespace/name (framework.gang)
        self.gang_gates: dict[str, str] = {}  # pod key -> GangScheduling's PreEnqueue status (gang.pre_enqueue)
        self.topologies: tuple = ()  # Kueue's Topology objects (fabric.levels): the levels gangs are placed within
        self.gang_bound: dict[str, int] = {}  # gang key -> bound pods (gang.bound_members): Coscheduling counts them
        self.node_names = [node.name for node in cluster.nodes]
        self.all_nodes = np.arange(cluster.n)
        self.every_node = np.ones(cluster.n, dtype=bool)
        self.every_node.flags.writeable = False  # shared by every cycle in which no filter rejects a node
        first = next(iter(config.profiles.values()))
        # kube-scheduler's QueueingHints: each plugin that can tell whether a bind may help a pod it rejected says
        # so through its queueing_hint method; a rejection by any other plugin is not woken by binds.
        self.hints: dict[str, QueueingHint] = {
            plugin.name: plugin.queueing_hint
            for profile in config.profiles.values()
            for point in profile.points.values()
            for plugin in point
            if isinstance(plugin, QueueingHintPlugin)
        }
        self.queue = SchedulingQueue(first.at("queueSort")[0].sort_key, self.hints)
        # Per profile, the filters a pod deletion cannot change the verdict of: the leading run of filters that
        # register no Pod/Delete event (``queues_on_pod_delete = False``: they read node objects alone). A pod
        # rejected by these alone fails the same way, node for node, after any deletion (pod_delete_may_help).
        self.static_filters = {name: static_filters(profile) for name, profile in config.profiles.items()}
        for profile in config.profiles.values():  # plugins that read cluster state outside a cycle (PreEnqueue)
            for point in profile.points.values():
                for plugin in point:
                    if hasattr(plugin, "bind_cluster"):
                        plugin.bind_cluster(cluster)
        # Called with each pod right before its scheduling attempt (explanations hook in here).
        self.observer: Callable[[Pod], None] | None = None
        self.preempted: list[ScheduleResult] = []  # victims evicted since the queue last collected them
        # A backlog's retries: a pod whose equivalent already failed against the same state fails the same way
        # without a cycle (framework.equivalence).
        self.failures = Failures()
        # DRA: what deleting an evicted pod did to its ResourceClaims (dra.state.release_pod), to undo on restore.
        self._dra_undo: dict[str, list] = {}

    # ------------------------------------------------------------------------------------ bound pods

    def admit_bound(self, pod: Pod) -> ScheduleResult | None:
        """Account a pod already bound to a node (spec.nodeName), as the kubelet admits it.

        Returns a result only when the kubelet would reject it (not enough room): that pod holds nothing. As the
        kubelet's admission (removeMissingExtendedResources), an extended resource the node does not report is not
        checked, nor one the pod's DRA claim serves (status.extendedResourceClaimStatus): the node's allocatable
        has none of it.
        """
        node = self.cluster.index[pod.node_name]
        unchecked = _unchecked_resources(pod, self.cluster.nodes[node].allocatable)
        for row, amount in self.cluster.request_vector(pod):
            used = int(self.cluster.requested[row, node])
            alloc = int(self.cluster.allocatable[row, node])
            if used + amount > alloc and self.cluster.resources[row] not in unchecked:
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
                requests = {r: v for r, v in pod.requests.items() if r not in unchecked} if unchecked else pod.requests
                pod.devices = devices.allocate(requests, owner=pod.key)
        except ValueError as exc:
            return ScheduleResult(
                pod, None, {}, f"Pod was rejected: {exc}", {pod.node_name: ["UnexpectedAdmissionError"]}
            )
        self.cluster.assume(pod, node)
        if self.cluster.dra is not None:
            self.cluster.dra.admit(pod, node)
        return None

    # ------------------------------------------------------------------------------------ the queue

    def run(self, pods: list[Pod]) -> list[ScheduleResult]:
        """Schedule pending pods in queue order until the queue is empty; unschedulable pods are retried
        when a bind could make them fit. Returns one result per pod, in the order of its last attempt."""
        results: dict[str, ScheduleResult] = {}
        self.failures.clear()  # what a run does not see change (PDBs, storage objects) may have changed since
        for pod in pods:
            gated = self.pre_enqueue(pod)
            if gated is None:
                self.queue.add(pod)
            else:
                results[pod.key] = gated
        while (pod := self.queue.pop()) is not None:
            # Between cycles: past SHAPE_CACHE_LIMIT request shapes the per-shape caches start over, so a backlog
            # of many shapes keeps memory to the shapes in use (ClusterState.trim_caches; decisions unchanged).
            self.cluster.trim_caches()
            key = gang.group_key(pod)
            if key is not None and key in self.groups:
                # The whole gang leaves the queue together and is decided in one go (see framework.gang).
                members = [pod, *self.queue.take(lambda p, key=key: gang.group_key(p) == key)]
                outcome = self.schedule_gang(self.groups[key], members)
            else:
                if self.observer is not None:
                    self.observer(pod)
                if self.keep_diagnosis:  # per-node reasons asked for: every cycle in full
                    outcome = [self.schedule_one(pod)]
                else:
                    outcome = [self.failures.schedule_one(self, pod, self.schedule_one)]
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
                    if not self.keep_diagnosis:
                        result.forget_nodes()
            dra = self.cluster.dra
            if dra is not None and dra.deallocated:  # a claim was deallocated: its devices may help anyone waiting
                dra.deallocated = False
                self.queue.requeue_unschedulable()
        return list(results.values())

    def pre_enqueue(self, pod: Pod) -> ScheduleResult | None:
        """PreEnqueue, as kube-scheduler runs it before a pod may enter the active queue (PORTS helper's part):
        the first plugin that rejects keeps the pod out, never tried, and None means it may be queued. A pod with
        scheduling gates reports the PodScheduled message the API server gave it (SchedulingGated)."""
        profile = self.profile_for(pod)
        for plugin in profile.at("preEnqueue") if profile is not None else ():
            status = plugin.pre_enqueue(pod)
            if not status.ok:
                status = Status(status.code, status.reasons, plugin.name)
                message = SCHEDULING_GATED_MESSAGE if pod.scheduling_gates else status.message
                return ScheduleResult(pod, message=message, explicit_reasons={}, gated=status)
        if (gate := self.gang_gates.get(pod.key)) is not None:  # the upstream gang API's PreEnqueue
            status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (gate,), gang.GANG_SCHEDULING)
            return ScheduleResult(pod, message=gate, explicit_reasons={}, gated=status)
        return None

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
            diagnosis = Diagnosis(
                pre_filter_msg=rejected.message,
                pre_filter_resolvable=rejected.code == Code.UNSCHEDULABLE,
                plugins={rejected.plugin},
            )
            return self._unschedulable(pod, profile, state, diagnosis, post_filter=post_filter and hold is None)

        try:
            feasible, log = self.find_feasible(profile, state, pod)
        except PluginError as exc:  # a Filter's Error: the attempt fails as a whole, no PostFilter
            message = f'running "{exc.status.plugin}" filter plugin: {exc.status.message}'
            return ScheduleResult(
                pod, message=message, diagnosis=Diagnosis(plugins={exc.status.plugin}), reason=SCHEDULER_ERROR
            )
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

        if state.allowed is None:  # not for a nominated node or a gang's domain (evaluateNominatedNode)
            chosen = self.first_feasible(profile, chosen)
        node = int(chosen[0]) if chosen.size == 1 else self.select_host(profile, state, pod, chosen)
        failed = self._reserve(pod, profile, state, node)
        if failed is not None:
            return failed
        if hold is not None:  # a gang member: bound later with the rest of its gang, or rolled back
            hold.append(Held(pod, profile, state, node, int(chosen.size)))
            return ScheduleResult(pod, self.cluster.nodes[node].name, dict(pod.devices), feasible=int(chosen.size))
        return self._complete(pod, profile, state, node, int(chosen.size))

    def nodes_to_find(self, profile: Profile) -> int:
        """How many feasible nodes this profile's cycle stops at: numFeasibleNodesToFind with the profile's
        percentageOfNodesToScore over the configuration's; one when nothing scores them."""
        n = self.cluster.n
        if self.score_all_nodes:
            return n
        if not profile.at("score"):
            return min(1, n)
        percentage = profile.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.config.percentage_of_nodes_to_score
        return num_feasible_nodes_to_find(percentage, n)

    def nodes_changed(self) -> None:
        """The cluster's node set changed in place (ClusterState.add_node / remove_node): what the scheduler
        derives from it follows. nextStartNodeIndex is kept, as kube-scheduler keeps it (taken modulo the new
        count)."""
        n = self.cluster.n
        self.node_names = [node.name for node in self.cluster.nodes]
        self.all_nodes = np.arange(n)
        self.every_node = np.ones(n, dtype=bool)
        self.every_node.flags.writeable = False
        self._snapshot_order = None
        self.next_start_node_index = self.next_start_node_index % n if n else 0

    @property
    def snapshot_order(self) -> np.ndarray:
        """Node indices in the snapshot's order (zones interleaved), computed once."""
        if self._snapshot_order is None or self._snapshot_order.size != self.cluster.n:
            self._snapshot_order = snapshot_order([zone_key(node.labels) for node in self.cluster.nodes])
            # Twice over, so the nodes from any start are one slice (a view), never a rotated copy.
            self._order_twice = np.concatenate([self._snapshot_order, self._snapshot_order])
        return self._snapshot_order

    def first_feasible(self, profile: Profile, feasible: np.ndarray) -> np.ndarray:
        """findNodesThatPassFilters' early stop, vectorized: the filters ran on every node, but kube-scheduler
        visits nodes in snapshot order from nextStartNodeIndex and stops at the K-th feasible one, so only those K
        are scored and the next cycle starts after the last node visited. When at most K are feasible every node
        was visited: all of them are kept and the start does not move. (kube-scheduler filters in parallel, so the
        nodes it visits past the K-th feasible one vary from run to run; here the search stops exactly there.)"""
        wanted = self.nodes_to_find(profile)
        if feasible.size <= wanted:
            return feasible
        n = self.cluster.n
        _ = self.snapshot_order
        start = self.next_start_node_index
        visit = self._order_twice[start : start + n]
        if feasible is self.all_nodes:  # every node feasible: the first K visited
            self.next_start_node_index = (start + wanted) % n
            return np.sort(visit[:wanted])
        mask = np.zeros(n, dtype=bool)
        mask[feasible] = True
        hits = np.flatnonzero(mask[visit])
        self.next_start_node_index = (start + int(hits[wanted - 1]) + 1) % n
        return np.sort(visit[hits[:wanted]])

    def _pre_filter(self, profile: Profile, state: CycleState, pod: Pod) -> Status | None:
        """Run PreFilter as RunPreFilterPlugins: an unresolvable (or Error) status stops at once; after an
        Unschedulable one the rest still run (preemption may need their state) and the last such status is the
        answer. None when every plugin passed. Plugins that skip are left out of Filter."""
        answer = None
        for plugin in profile.at("preFilter"):
            status = plugin.pre_filter(state, pod, self.cluster)
            if status.code == Code.SKIP:
                state.skip_filter.add(plugin.name)
            elif not status.ok:
                answer = Status(status.code, status.reasons, plugin.name)
                if status.code != Code.UNSCHEDULABLE:
                    return answer
        return answer

    def only(self, node: int) -> np.ndarray:
        mask = np.zeros(self.cluster.n, dtype=bool)
        mask[node] = True
        return mask

    def feasible(self, pod: Pod) -> np.ndarray:
        """The nodes that pass PreFilter and every Filter for ``pod`` as the cluster is now (a gang's capacities)."""
        profile = self.profile_for(pod)
        state = CycleState()
        if profile is None or self.cluster.n == 0 or self._pre_filter(profile, state, pod) is not None:
            return np.zeros(self.cluster.n, dtype=bool)
        try:
            return self.find_feasible(profile, state, pod)[0]
        except PluginError:
            return np.zeros(self.cluster.n, dtype=bool)

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
        try:
            feasible, log = self.find_feasible(profile, state, pod)
        except PluginError as exc:
            return [exc.status.message]
        if feasible[node]:
            return None
        return [
            r.reason
            for name, result, newly in log
            if name != gang.GANG and newly[node]
            for r in result.rejections
            if r.nodes[node]
        ]

    def evict(self, pod: Pod, delete: bool = False) -> int:
        """Take a bound pod off its node (devices and exclusive CPUs included); returns the node, for ``restore``.

        ``delete``: the pod is deleted for real, not just left out of a dry run, so its ResourceClaims let go of it
        as the resourceclaim controller makes them (kube-scheduler's dry runs do not free DRA devices either)."""
        cluster = self.cluster
        node = cluster.pod_node[pod.key]
        cluster.devices[node].release(pod.devices)
        self._exclusive_cpus(pod, node, +1)
        cluster.forget(pod, evicted=True)
        if delete and cluster.dra is not None:
            self._dra_undo[pod.key] = cluster.dra.release_pod(pod)
        return node

    def restore(self, pod: Pod, node: int) -> None:
        """Put an evicted pod back where it was, on the same devices and CPUs (and claims)."""
        undo = self._dra_undo.pop(pod.key, None)
        if undo and self.cluster.dra is not None:
            self.cluster.dra.restore_pod(undo)
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
                self.evict(victim, delete=True)
            self._dra_undo.pop(victim.key, None)  # for good
            victim.node_name = ""
            message = f"Preempted by {by.key} on node {where}"
            self.preempted.append(ScheduleResult(victim, message=message, preempted_by=by.key))
        self.queue.requeue_unschedulable(lambda pod, plugins: self.pod_delete_may_help(pod.scheduler_name, plugins))

    def pod_delete_may_help(self, scheduler_name: str, plugins: frozenset[str]) -> bool:
        """The queueing hint of an assigned pod's deletion (kube-scheduler's AssignedPodDelete) for a waiting pod
        of ``scheduler_name`` that ``plugins`` rejected: False when every one is among its profile's static
        filters, whose verdicts no pod changes; tried again, it would only fail the same way, with the same message
        (those filters' reasons are unresolvable, so its preemption attempt finds no node either)."""
        return not plugins or not plugins <= self.static_filters.get(scheduler_name, frozenset())

    def histogram_message(self, counts: Counter[str]) -> str:
        """``0/N nodes are available: 2 Insufficient cpu, 3 <reason>.``: a FitError over per-node statuses."""
        return f"0/{self.cluster.n} nodes are available:{_histogram(counts)}"

    def find_feasible(
        self, profile: Profile, state: CycleState, pod: Pod
    ) -> tuple[np.ndarray, list[tuple[str, FilterResult, np.ndarray]]]:
        """Run the filters in order over all nodes; a node leaves at its first rejecting filter. Before them, the
        nodes a cycle may not use at all leave with one unresolvable status each: outside a gang's topology domain,
        or left out by a PreFilter's node set (findNodesThatFitPod)."""
        feasible = None  # every node, until a filter rejects one (most pods: no array at all)
        log = []
        for name, result in self._restrictions(state) + [
            (p.name, p) for p in profile.at("filter") if p.name not in state.skip_filter
        ]:
            if not isinstance(result, FilterResult):
                state.feasible_nodes = feasible
                result = result.filter(state, pod, self.cluster)
            if not result.rejections:
                continue
            rejected = result.rejected(self.cluster.n)
            newly = rejected.copy() if feasible is None else rejected & feasible
            if newly.any():
                log.append((name, result, newly))
                feasible = ~rejected if feasible is None else feasible & ~rejected
        return (self.every_node if feasible is None else feasible), log

    @staticmethod
    def _restrictions(state: CycleState) -> list[tuple[str, FilterResult]]:
        """The node sets this cycle is confined to, as rejections of every node outside them."""
        out = []

        def outside(name: str, allowed: np.ndarray, reason: str) -> None:
            result = FilterResult()
            result.reject(reason, ~allowed, resolvable=False)
            out.append((name, result))

        if state.allowed is not None:
            outside(gang.GANG, state.allowed, GANG_DOMAIN_REASON)
        if state.pre_filter_nodes is not None:
            plugins = " ".join(sorted(state.pre_filter_plugins))
            outside(PRE_FILTER_RESULT, state.pre_filter_nodes, f"node(s) didn't satisfy plugin(s) [{plugins}]")
        return out

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
        return ScheduleResult(
            pod, message=message, diagnosis=Diagnosis(plugins={status.plugin}), reason=SCHEDULER_ERROR
        )

    def _unschedulable(
        self, pod: Pod, profile: Profile, state: CycleState, diagnosis: Diagnosis, post_filter: bool = True
    ) -> ScheduleResult:
        """The FitError result, after PostFilter (preemption) had its say. A gang member's PostFilter is left to
        its gang, which preempts only for the whole gang."""
        nominated = None
        if post_filter and profile.at("postFilter"):
            nominated, diagnosis.post_filter_msg = self._post_filter(profile, state, pod, diagnosis)
        message = fit_error_message(self.cluster.n, diagnosis)
        result = ScheduleResult(pod, None, {}, message, diagnosis=diagnosis, node_names=self.node_names)
        if nominated is not None:
            result.nominated, result.preempted = nominated.node, list(nominated.victims)
        return result

    def _post_filter(self, profile: Profile, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> tuple[Any, str]:
        """RunPostFilterPlugins: the first plugin that succeeds (a nomination) or answers other than Unschedulable
        ends the run with its own message (empty on success); otherwise every plugin's reasons, joined by ``, ``."""
        reasons: list[str] = []
        for plugin in profile.at("postFilter"):
            nominated, status = plugin.post_filter(state, pod, self, diagnosis)
            if status.ok:
                return nominated, ""
            if status.code != Code.UNSCHEDULABLE:
                return None, status.message
            reasons.extend(status.reasons)
        return None, ", ".join(reasons)
