"""Kueue's admission over the input: its scheduling cycles run until nothing more is admitted.

pkg/scheduler/scheduler.go with its queue manager (pkg/cache/queue), on a still input:

- running workloads (their pods bound, or a Workload with status.admission) hold their quota first;
- each cycle takes the head of every active ClusterQueue (priority, then creation time, then input order),
  assigns flavors against the tree (flavorassigner), orders the entries (no borrowing first, then priority,
  then creation time) and admits each that still fits, adding its usage up the cohort tree;
- a head that does not fit gets QuotaReserved=False with reason Pending and Kueue's message. In a
  BestEffortFIFO queue it steps aside for the next workload; in a StrictFIFO queue it stays the head and
  blocks the queue. A head that lost its room to another admitted in the same cycle is retried next cycle;
- a head that fits only by evicting others (queues.preemption) evicts them at the end of the cycle, with
  Kueue's Preempted, Evicted and Requeued conditions, and is admitted in a later cycle; the evicted go back to
  their queues, their pods off their nodes;
- a workload whose LocalQueue or ClusterQueue is missing or stopped is Inadmissible (the workload controller's
  words), one whose namespace the ClusterQueue's namespaceSelector does not match is refused as Kueue does;
- with the feature gate ConcurrentAdmission or MultiKueueOrchestratedPreemption on, a head that would preempt while
  one of its preemption gates is closed preempts nothing and waits (queues.preemptiongates).

Conditions carry Kueue's reasons and messages with its default feature gates (UnadmittedWorkloadsObservability
off: a waiting workload has QuotaReserved=False, reason Pending, and no Admitted condition).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelsched.api.objects import Namespace, Node, Pod
from accelsched.queues import admissionfairsharing, api, cohortusage, fairsharing, preemption, preemptiongates, quota
from accelsched.queues.api import ClusterQueue, QueueObjects
from accelsched.queues.flavorassigner import Assignment, AssignmentMode, FlavorAssigner, pending_flavors
from accelsched.queues.pending import Classes, Pending
from accelsched.queues.preemption import Admitted, Oracle, Preemptor, Target
from accelsched.queues.preemptiongates import BLOCKED_ON_PREEMPTION_GATES as BLOCKED
from accelsched.queues.preemptiongates import GATED_MESSAGE, PREEMPTION_GATED, Gates
from accelsched.queues.quota import QuotaTree
from accelsched.queues.workloads import Info, find

QUOTA_RESERVED, ADMITTED = "QuotaReserved", "Admitted"
PREEMPTED, EVICTED, REQUEUED = "Preempted", "Evicted", "Requeued"
PENDING, INADMISSIBLE = "Pending", "Inadmissible"
NAMESPACE_MISMATCH = "workload namespace doesn't match ClusterQueue selector"  # workload.ErrNamespaceMismatch
NO_LONGER_FITS = "Workload no longer fits after processing another workload"
OVERLAPPING = "Workload has overlapping preemption targets with another workload"


@dataclass(eq=False)
class Outcome:
    """What became of one workload (one object per workload: compared by identity, as the queues' lists hold it)."""

    info: Info
    cluster_queue: str = ""
    admitted: bool = False
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)
    conditions: list[dict[str, str]] = field(default_factory=list)
    held_message: str = ""  # for its pods while it is not admitted
    preempted: bool = False
    # LastAssignment: where its last flavor scan stopped (per pod set and resource), in which cycle, against which
    # generation of its ClusterQueue's allocatable resources (Admission._advance says what advances it).
    last: dict[tuple[int, str], int] | None = None
    last_cycle: int = 0
    last_generation: int = 0
    gates: Gates = preemptiongates.NONE  # its Workload's preemption gates (an eviction closes them)
    # The flavors of its last admission, kept when it is evicted: live mode's Workload door tells the late echo of
    # that admission's write from a reservation it never gave (live/workloaddeltas.py _shows_evicted_admission).
    assigned: dict[str, dict[str, str]] | None = None
    # The flavors its admitting scan considered, as Kueue's QuotaReserved event lists them (Assignment.considered).
    considered: str = ""
    # While the workloads it preempted let go: what Kueue's scheduler tells it meanwhile (``... Pending the preemption
    # of N workload(s)``), kept when the session then admits it (live mode writes it while the admission waits).
    preempting_message: str = ""
    preempted_by: Info | None = None  # the workload that preempted it last (for Kueue's Preempted events)

    def _set(self, kind: str, status: str, reason: str, message: str) -> None:
        """apimeta.SetStatusCondition: replaced in place, or appended."""
        new = _condition(kind, status, reason, message)
        for i, c in enumerate(self.conditions):
            if c["type"] == kind:
                self.conditions[i] = new
                return
        self.conditions.append(new)

    def _reset(self, kind: str, reason: str) -> None:
        """resetActiveCondition: a True condition turned False, its message kept as "Previously: ..."."""
        for c in self.conditions:
            if c["type"] == kind and c["status"] == "True":
                self._set(kind, "False", reason, "Previously: " + c["message"])

    def refuse(self, reason: str, message: str) -> None:
        """UnsetQuotaReservationWithCondition (an Admitted condition only once it has been admitted)."""
        self._set(QUOTA_RESERVED, "False", reason, message)
        self.held_message = message
        self.preempting_message = ""

    def admit(self, cluster_queue: str, flavors: dict[str, dict[str, str]]) -> None:
        """SetQuotaReservation and SyncAdmittedCondition with no admission checks."""
        self.admitted, self.flavors, self.assigned, self.considered = True, flavors, flavors, ""
        self._set(QUOTA_RESERVED, "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cluster_queue}")
        self._reset(EVICTED, "QuotaReserved")
        self._reset(PREEMPTED, "QuotaReserved")
        self._reset(BLOCKED, "QuotaReserved")
        self._set(ADMITTED, "True", "Admitted", "The workload is admitted")
        self.held_message = ""

    def drain(self, reason: str, message: str) -> None:
        """Evicted by a stopped queue (HoldAndDrain): not requeued, its reservation released."""
        self.admitted, self.flavors, self.preempting_message = False, {}, ""
        self._set(EVICTED, "True", reason, message)
        self._ungate(reason, message)
        self._set(REQUEUED, "False", reason, message)
        self._set(QUOTA_RESERVED, "False", PENDING, message)
        self._set(ADMITTED, "False", "NoReservation", "The workload has no reservation")
        for pod in self.info.pods:
            pod.node_name = ""  # the job is stopped

    def evict(self, reason: str, message: str) -> None:
        """Preempted: the preemptor sets Preempted and Evicted; the job reconciler then stops the job, marks it
        Requeued and unsets its quota reservation, which turns Admitted False."""
        self.admitted, self.preempted, self.flavors = False, True, {}
        self.preempting_message = ""
        self._set(PREEMPTED, "True", reason, message)
        self._set(EVICTED, "True", "Preempted", message)
        self._ungate("Preempted", message)
        self._set(REQUEUED, "True", "Preempted", message)
        self._set(QUOTA_RESERVED, "False", PENDING, message)
        self._set(ADMITTED, "False", "NoReservation", "The workload has no reservation")
        self.held_message = message

    def _ungate(self, reason: str, message: str) -> None:
        """prepareForEviction: BlockedOnPreemptionGates, if True, turns False with the eviction's words, and every
        preemption gate closes (the controller that opened one decides again)."""
        for c in self.conditions:
            if c["type"] == BLOCKED and c["status"] == "True":
                self._set(BLOCKED, "False", reason, message)
        self.gates = self.gates.close_all()

    def gate(self) -> None:
        """markPreemptionGated, then requeueAndUpdate: QuotaReserved False (Pending) and BlockedOnPreemptionGates
        True (PreemptionGated), both with Kueue's message. Kueue's status patch goes out only if the last condition
        changed (``updated = SetBlockedOnPreemptionGatesCondition(...)`` overwrites the earlier answer): when that
        condition already says so, nothing is written, not even QuotaReserved."""
        if _condition(BLOCKED, "True", PREEMPTION_GATED, GATED_MESSAGE) in self.conditions:
            reserved = next((c for c in self.conditions if c["type"] == QUOTA_RESERVED), None)
            self.held_message = reserved["message"] if reserved is not None else GATED_MESSAGE
            return
        self.refuse(PENDING, GATED_MESSAGE)
        self._set(BLOCKED, "True", PREEMPTION_GATED, GATED_MESSAGE)


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


@dataclass
class QueueResult:
    """Every workload's outcome, and the quota tree as admission left it (usage per ClusterQueue)."""

    outcomes: Collection[Outcome]  # in the order admission took them (an open admission forgets some: its own kind)
    tree: QuotaTree
    objects: QueueObjects
    # The admission kept open (queues.incremental.OpenAdmission), when the caller asked to go on from it (live mode's
    # Workload door: workloads arriving and finishing between rounds are taken in without admitting everything again)
    admission: Any = None

    def held(self) -> dict[str, tuple[str, str]]:
        """Pods (namespace/name) of workloads not admitted: the message their pods show, and which workload holds
        them back."""
        out = {}
        for o in self.outcomes:
            if o.admitted:
                continue
            where = f" in ClusterQueue {o.cluster_queue}" if o.cluster_queue else ""
            why = f"workload {o.info.key} is not admitted{where}"
            out.update({p.key: (o.held_message, why) for p in o.info.pods if not p.node_name})
        return out


def admit(
    objects: QueueObjects, pods: list[Pod], namespaces: Iterable[Namespace], nodes: Iterable[Node]
) -> QueueResult:
    """Admit the input's workloads as Kueue would; pods of admitted workloads get their flavors' node labels and
    tolerations (what Kueue injects when it lets them go)."""
    return _Admission(objects, pods, namespaces, nodes).run()


class _Admission:
    # A ClusterQueue's queue (queues.pending): kept by equivalence class; tests put a plain sorted list in its place
    # to check that the order and the decisions are the list's.
    queue_type: type[Pending[Outcome]] = Pending

    def __init__(self, objects: QueueObjects, pods: list[Pod], namespaces: Iterable[Namespace], nodes: Iterable[Node]):
        self.objects = objects
        self.tree = quota.build(objects)
        self.outcomes = [Outcome(info) for info in find(objects, pods)]
        for outcome in self.outcomes:  # a Workload object's conditions carry on (a readmitted one's "Previously: ...")
            if outcome.info.admitted is None and outcome.info.key in objects.room_waits:
                outcome.info.waiting = objects.room_waits[outcome.info.key]  # out of its queue (queues/room.py)
            written = objects.workloads.get(outcome.info.key)
            outcome.conditions = [
                _condition(c["type"], str(c.get("status", "")), str(c.get("reason", "")), str(c.get("message", "")))
                for c in (written.conditions if written is not None else [])
                if c.get("type") in (QUOTA_RESERVED, ADMITTED, EVICTED, PREEMPTED, REQUEUED, BLOCKED)
            ]
            if written is not None:
                outcome.gates = written.preemption_gates
        self.namespace_labels = {ns.name: ns.label_map() for ns in namespaces}
        self.node_labels = {n.name: n.labels for n in nodes}
        self.reserved: list[tuple[quota.Node, tuple[str, str], int]] = []  # this cycle's reserveCapacity...
        self.admitted: dict[str, list[Admitted]] = {}  # per ClusterQueue, what holds its quota
        self.preemptor = Preemptor(self.tree, objects.cluster_queues, self.admitted)
        self.fair_sharing = objects.config.fair_sharing is not None
        if objects.config.fair_sharing:
            fair = fairsharing.FairPreemptor(self.preemptor, objects.config.fair_sharing, self._reservation)
            self.preemptor.fair_targets = fair.targets
        self.prioritize_preemptor = objects.config.prioritize_preemptor
        self.preemption_gates = objects.config.preemption_gates  # ConcurrentAdmission, MultiKueueOrchestrated...
        # admission fair sharing: the LocalQueues' decayed usage orders the queues that ask for it
        self.afs = admissionfairsharing.ledger(objects)
        self.lanes: Counter[str] | None = None  # per ClusterQueue, the LocalQueues pointing at it (_head)
        if self.afs is not None:
            self.preemptor.local_queue_usage = self.afs.preemption_usage(objects.config)
        # accelsched's fairness over time across a cohort's ClusterQueues (off unless a root Cohort asks for it)
        # (live mode carries it from the last session: objects.cohort_history)
        self.cohort_history = cohortusage.history(
            self.tree, {name: c.usage_half_life for name, c in objects.cohorts.items()}, objects.cohort_history
        )
        # per ClusterQueue, the workload waiting for its preemptions until it is admitted (Kueue's pw, IsPreemptor)
        self.preempting: dict[str, Outcome] = {}
        self.nominated: dict[int, list[Target]] = {}  # this cycle's preemption targets per head, found at nomination
        self.running = 0  # how many admitted records the input's running workloads made (the first ones)
        self.sequence = 0
        self.cycle = 0  # the scheduler's schedulingCycle
        self.resumed: list[Outcome] = []  # this cycle's heads whose flavor scan resumed where their last one stopped
        self.generation: dict[str, int] = {}  # per ClusterQueue, AllocatableResourceGeneration (_advance)
        self.tree_generation: dict[str, int] = {}  # per Cohort tree (its root cohort): what advances all its queues
        # per ClusterQueue, by equivalence class: out of its heap until quota frees (queues.pending)
        self.inadmissible: dict[str, Classes[Outcome]] = {}
        # Cohort trees (by id of the root: a cohort, or a ClusterQueue without one) whose inadmissible workloads
        # Kueue's requeuer puts back once the cycles in flight are over: it is a delaying workqueue (a second's
        # batch period), so every cycle the event's own admissions start runs before the retry.
        self.requeue_pending: set[int] = set()
        # per BestEffortFIFO ClusterQueue, the workload waiting for its preemptions: it stays the head (Kueue's
        # preemptorWorkload), so a requeued workload ahead of it in the order cannot take the room it freed
        self.preemptor_head: dict[str, Outcome] = {}
        self.by_info = {id(o.info): o for o in self.outcomes}
        # This cycle's preemption targets (by id of their record, with the workload that preempts them).
        self.victims: dict[int, tuple[Target, Info]] = {}
        self.classes: dict[int, tuple] = {}  # by id of the Info: its equivalence class (_equivalence)
        # per BestEffortFIFO ClusterQueue, the equivalence classes bulk-moved to inadmissible since its last
        # requeue, with the workload that did not fit (Kueue's hashToBulkMoveReason): a workload coming back into
        # the queue (an evicted one) of such a class goes to inadmissible untried (PushOrUpdate)
        self.bulk_moved: dict[str, dict[tuple, str]] = {}
        self.inactive = {
            name
            for name, cq in objects.cluster_queues.items()
            if name in self.tree.in_cycle
            or any(fq.name not in objects.flavors for rg in cq.resource_groups for fq in rg.flavors)
        }

    def run(self) -> QueueResult:
        self._cycles(self._initial_queues())
        return self._result()

    def _initial_queues(self) -> dict[str, Pending[Outcome]]:
        """The running workloads hold their quota; the others, in queue order per ClusterQueue."""
        queues: dict[str, Pending[Outcome]] = {}
        for outcome in self.outcomes:
            cq = self._cluster_queue(outcome)
            if cq is None:
                continue
            outcome.cluster_queue = cq.name
            if outcome.info.admitted is not None:
                self._keep_running(outcome, cq)
            else:
                self._queue(queues, cq.name).add(outcome)
        self.running = self.sequence
        return queues

    def _result(self) -> QueueResult:
        for outcome in self.outcomes:
            if outcome.admitted:
                self._inject_flavors(outcome)
        return QueueResult(self.outcomes, self.tree, self.objects)

    def _cluster_queue(self, outcome: Outcome) -> ClusterQueue | None:
        """The workload's ClusterQueue through its LocalQueue, or None with the condition Kueue's workload controller
        sets on a workload without a reservation (getQueueBlocker, UnadmittedWorkloadsObservability off)."""
        info = outcome.info
        if info.waiting:
            outcome.held_message = info.waiting  # Kueue makes no Workload until the group is complete
            return None
        local = self.objects.local_queues.get(f"{info.namespace}/{info.queue_name}")
        if local is None:
            outcome.refuse(INADMISSIBLE, f"LocalQueue {info.queue_name} doesn't exist")
            return None
        if self._stopped(outcome, "LocalQueue", info.queue_name, local.stop_policy, local.cluster_queue):
            return None
        cq = self.objects.cluster_queues.get(local.cluster_queue)
        if cq is None:
            outcome.refuse(INADMISSIBLE, f"ClusterQueue {local.cluster_queue} doesn't exist")
            return None
        if self._stopped(outcome, "ClusterQueue", cq.name, cq.stop_policy, cq.name):
            return None
        return cq

    def _stopped(self, outcome: Outcome, kind: str, name: str, policy: str, cluster_queue: str) -> bool:
        """stopPolicy: Hold admits nothing new and keeps what runs; HoldAndDrain evicts what runs too."""
        info = outcome.info
        if policy == api.STOP_NONE or (info.admitted is not None and policy == api.HOLD):
            return False
        outcome.cluster_queue = cluster_queue
        if info.admitted is not None:
            outcome.admit(cluster_queue, info.admitted)
            outcome.drain(f"{kind}Stopped", f"The {kind} is stopped")
        # A workload without a reservation gets the workload controller's getQueueBlocker words: a stopped queue is
        # an inactive one ("... is stopped" is for a workload still holding its reservation).
        outcome.refuse(INADMISSIBLE, f"{kind} {name} is inactive")
        return True

    def _keep_running(self, outcome: Outcome, cq: ClusterQueue) -> None:
        """A workload already running holds its quota whatever the quota says now: its flavors are those its
        admission names, or, for pods bound without one, the flavor whose node labels their node carries."""
        flavors = outcome.info.admitted or {}
        if not flavors:
            flavors = {ps.name: self._flavors_of_node(ps.pods, ps.requests, cq) for ps in outcome.info.pod_sets}
        usage: dict[tuple[str, str], int] = {}
        for ps in outcome.info.pod_sets:
            for res, amount in ps.requests.items():
                flavor = flavors.get(ps.name, {}).get(res)
                if flavor is not None:
                    usage[(flavor, res)] = usage.get((flavor, res), 0) + amount * ps.count
        if cq.name not in self.tree.in_cycle:
            self._hold(outcome, cq, usage)
        outcome.admit(cq.name, flavors)

    def _hold(self, outcome: Outcome, cq: ClusterQueue, usage: dict[tuple[str, str], int]) -> None:
        """The workload's usage into the tree and the cache's list of admitted workloads."""
        self.sequence += 1
        record = Admitted(outcome.info, cq.name, usage, self.sequence)
        self.admitted.setdefault(cq.name, []).append(record)
        self.preemptor.add(record)

    def _reservation(self, record: Admitted) -> fairsharing.Reservation:
        """quotaReservationTime: a workload running in the input since its QuotaReserved condition's time, one
        admitted here later, in the order admitted."""
        if record.sequence > self.running:
            return (1, "", record.sequence)
        written = self.objects.workloads.get(record.info.key)
        times = [
            str(c.get("lastTransitionTime") or "")
            for c in (written.conditions if written is not None else [])
            if c.get("type") == QUOTA_RESERVED and c.get("status") == "True"
        ]
        return (0, times[0] if times else "", 0)

    def _flavors_of_node(self, pods: list[Pod], requests: Mapping[str, int], cq: ClusterQueue) -> dict[str, str]:
        labels = next((self.node_labels.get(p.node_name, {}) for p in pods if p.node_name), {})
        out = {}
        for rg in cq.resource_groups:
            names = [fq.name for fq in rg.flavors]
            match = next(
                (
                    n
                    for n in names
                    if n in self.objects.flavors and _subset(self.objects.flavors[n].node_labels, labels)
                ),
                names[0],
            )
            out.update({res: match for res in rg.covered if res in requests})
        return out

    def _queue(self, queues: dict[str, Pending[Outcome]], name: str) -> Pending[Outcome]:
        """A ClusterQueue's queue, made empty the first time (queue order, by equivalence class)."""
        pending = queues.get(name)
        if pending is None:
            pending = queues[name] = self.queue_type(queue_order, self._class_of)
        return pending

    def _class_of(self, outcome: Outcome) -> tuple:
        return self._equivalence(outcome.info)

    def _cycles(self, queues: dict[str, Pending[Outcome]]) -> None:
        budget = 10 * (len(self.outcomes) + 1)  # every cycle admits, steps aside or evicts: this is never reached
        retried: set[int] = set()  # heads given a scan from the first flavor after a resumed one left them stuck
        while budget:
            budget -= 1
            self.cycle += 1
            self.resumed = []
            heads = []
            for name, pending in queues.items():
                cq = self.objects.cluster_queues[name]
                if not pending:
                    continue
                head = self._head(cq, pending)
                if name in self.inactive:
                    head.refuse(PENDING, f"ClusterQueue {name} is inactive")
                    pending.remove(head)  # an inactive queue yields no heads: each of its workloads waits
                    continue
                selector = cq.namespace_selector
                labels = self.namespace_labels.get(
                    head.info.namespace, {"kubernetes.io/metadata.name": head.info.namespace}
                )
                if selector is None or not selector.matches(labels):
                    head.refuse(PENDING, NAMESPACE_MISMATCH)
                    pending.remove(head)  # requeued as inadmissible in both strategies
                    continue
                assignment, oracle = self._assign(head, cq)
                heads.append((head, cq, assignment))
                self.nominated[id(head)] = self._nominate(head, cq, assignment, oracle)
            if not heads:
                if any(queues.values()) or self._requeue_pending(queues):
                    continue  # queues whose heads stepped aside have new heads, or the requeuer brought some back
                break
            progress = False
            self.reserved, self.victims = [], {}
            for outcome, cq, assignment in self._order(heads):
                progress |= self._process(outcome, cq, assignment, queues[cq.name])
            for node, fr, amount in self.reserved:  # a cycle's reservations end with it (a fresh snapshot next)
                node.remove_usage(fr, amount)
            for target, by in self.victims.values():
                self._evict(target, by, queues)
            if not progress and not self._requeue_pending(queues):
                # Kueue retries a StrictFIFO head that did not fit at once, every cycle (RequeueIfNotPresent), so
                # nothing changing does not end its tries: a try that resumed a flavor scan (LastAssignment) and
                # found nothing leaves no flavors pending, and the next one scans every flavor again, with its own
                # message. Once per head: that full scan is where Kueue's retries settle.
                again = [o for o in self.resumed if id(o) not in retried]
                if again:
                    retried.update(id(o) for o in again)
                    continue
                self._mark_blocked(queues)
                break

    def _head(self, cq: ClusterQueue, pending: Pending[Outcome]) -> Outcome:
        """ClusterQueue.Pop: the workload waiting for its preemptions, else the first in queue order; with admission
        fair sharing, the lowest LocalQueue usage first (queues.admissionfairsharing)."""
        sticky = self.preemptor_head.get(cq.name)
        if self.afs is not None and admissionfairsharing.enabled(self.objects.config, cq):
            if self.lanes is None:  # how many LocalQueues feed each ClusterQueue: a head reads their firsts alone
                self.lanes = Counter(lq.cluster_queue for lq in self.objects.local_queues.values())
            sticky = sticky if sticky is not None and sticky in pending else None
            return self.afs.head(pending, sticky, self.lanes[cq.name])
        return sticky if sticky is not None and sticky in pending else pending.first()

    def _order(
        self, heads: list[tuple[Outcome, ClusterQueue, Assignment]]
    ) -> Iterable[tuple[Outcome, ClusterQueue, Assignment]]:
        """makeIterator: with fair sharing, the tournament by share (picked one at a time, on the usage the heads
        processed before left); else no borrowing first, then priority, then creation time. With
        PrioritizePreemptorWorkloads a head waiting for its victims goes first in either."""
        first = self.prioritize_preemptor

        def waiting(h: tuple[Outcome, ClusterQueue, Assignment]) -> bool:
            return first and self.preempting.get(h[1].name) is h[0]

        if not self.fair_sharing:
            return sorted(
                heads,
                key=lambda h: (not waiting(h), h[2].borrowing, -h[0].info.priority, h[0].info.created, h[0].info.order),
            )
        return fairsharing.tournament(
            heads,
            lambda h: fairsharing.Entry(
                self.tree.cluster_queues[h[1].name],
                h[2].usage,
                (-h[0].info.priority, h[0].info.created, h[0].info.order),
                waiting(h),
            ),
            first,
            self.cohort_history.usage if self.cohort_history is not None else None,
        )

    def _nominate(self, outcome: Outcome, cq: ClusterQueue, assignment: Assignment, oracle: Oracle) -> list[Target]:
        """getInitialAssignments' preemption targets: found at nomination, on the cycle's fresh snapshot, not after
        the capacity earlier heads of the cycle reserve. Where the assignment asks for what the oracle searched for
        already (one flavor and resource), its answer: the tree has not changed since, and the search is the same."""
        if assignment.mode != AssignmentMode.PREEMPT:
            return []
        frs = assignment.needs_preemption()
        if len(assignment.usage) == 1 and frs == assignment.usage.keys():
            found = oracle.found.get(next(iter(assignment.usage.items())))
            if found is not None:
                return found
        return self.preemptor.targets(outcome.info, cq, assignment.usage, frs)

    def _assign(self, outcome: Outcome, cq: ClusterQueue) -> tuple[Assignment, Oracle]:
        """getAssignments: the scan resumes from the workload's LastAssignment unless that is outdated (older than
        the previous cycle, and a workload has left the ClusterQueue since: lastAssignmentOutdated). With the
        assignment, the oracle that answered its scan (with the targets it found)."""
        node = self.tree.cluster_queues[cq.name]
        oracle = Oracle(self.preemptor, outcome.info, cq)
        generation = self.generation.get(cq.name, 0)
        if self.tree_generation and (root := node.root()) is not node:
            generation += self.tree_generation.get(root.name, 0)
        if outcome.last is not None and self.cycle - outcome.last_cycle > 1 and generation > outcome.last_generation:
            outcome.last = None
        if pending_flavors(outcome.last):
            self.resumed.append(outcome)  # this scan starts past some group's first flavor
        assigner = FlavorAssigner(
            outcome.info, cq, node, self.tree, self.objects.flavors, oracle, outcome.last, self.fair_sharing
        )
        assignment = assigner.assign()
        outcome.last, outcome.last_cycle, outcome.last_generation = assignment.last_state(), self.cycle, generation
        return assignment, oracle

    def _process(
        self, outcome: Outcome, cq: ClusterQueue, assignment: Assignment, pending: Pending[Outcome]
    ) -> bool:
        """processEntry: True when the queue moved (admitted, or a BestEffortFIFO head stepped aside)."""
        node = self.tree.cluster_queues[cq.name]
        mode = assignment.mode
        if self.preemptor_head.get(cq.name) is outcome:
            del self.preemptor_head[cq.name]  # set again below if it still waits for preemptions
        if mode == AssignmentMode.PREEMPT:
            targets = self.nominated.get(id(outcome), [])
            if targets and self.preemption_gates and outcome.gates.closed():
                return self._gated(outcome, cq, pending)
            if targets:
                return self._preempt(outcome, cq, assignment, targets)
        if mode != AssignmentMode.FIT:
            outcome.refuse(PENDING, assignment.message())
            preemptor = self.prioritize_preemptor and self.preempting.get(cq.name) is outcome
            if mode == AssignmentMode.PREEMPT and (cq.preemption.reclaim_within_cohort != api.ANY or preemptor):
                for fr, amount in _reservable(assignment, node).items():
                    node.add_usage(fr, amount)  # reserveCapacityForUnreclaimablePreempt, for this cycle
                    self.reserved.append((node, fr, amount))
            if pending_flavors(outcome.last):
                return True  # back into the heap at once (requeueIfNotPresent): next cycle resumes its scan
            if cq.queueing_strategy == api.BEST_EFFORT_FIFO:
                pending.remove(outcome)
                self._bulk_move(outcome, cq.name, pending)
                return True
            return False
        if not self._fits(node, assignment, []):
            outcome.refuse(PENDING, NO_LONGER_FITS)
            return False  # requeued at once: tried again next cycle
        self._hold(outcome, cq, dict(assignment.usage))
        outcome.admit(cq.name, assignment.flavors())
        outcome.considered = assignment.considered()
        if self.afs is not None and admissionfairsharing.enabled(self.objects.config, cq):
            self.afs.push_penalty(outcome.info)  # shouldApplyEntryPenalty: counts in the order at once
        pending.remove(outcome)
        self._advance(cq.name)  # the echo of its reservation replaces the assumed workload in the cache
        self._status_changed(cq.name)
        if self.preempting.get(cq.name) is outcome:
            del self.preempting[cq.name]
        return True

    def _gated(self, outcome: Outcome, cq: ClusterQueue, pending: Pending[Outcome]) -> bool:
        """processEntry in Preempt mode with targets and a closed preemption gate: no preemption, no capacity kept
        for it (later heads of the cycle may take the room), its flavor scan cleared. Requeued with reason
        PreemptionGated: a StrictFIFO head stays the head (an immediate requeue), a BestEffortFIFO one goes to the
        inadmissible workloads alone (only NoFit and PreemptionNoCandidates bulk-move its class) until quota frees
        in its tree."""
        outcome.gate()
        outcome.last = None
        if cq.queueing_strategy != api.BEST_EFFORT_FIFO:
            return False
        pending.remove(outcome)
        self._inadmissible(cq.name).add(outcome)
        return True

    def _bulk_move(self, outcome: Outcome, name: str, pending: Pending[Outcome]) -> None:
        """SchedulingEquivalenceHashing (on by default): a BestEffortFIFO workload that does not fit (NoFit, or
        Preempt without candidates) takes the queued workloads of its equivalence class to inadmissible with it,
        untried (no condition)."""
        cls = self._equivalence(outcome.info)
        self.bulk_moved.setdefault(name, {})[cls] = outcome.info.key
        moved = pending.pop_class(cls)  # one step: the queue keeps each class apart (queues.pending)
        inadmissible = self._inadmissible(name)
        inadmissible.add(outcome)
        inadmissible.add_class(cls, moved)
        message = self._set_aside_message(name, outcome.info.key)
        for other in moved:
            other.held_message = message

    def _inadmissible(self, name: str) -> Classes[Outcome]:
        """The ClusterQueue's inadmissible workloads, kept by equivalence class as its queue is."""
        inadmissible = self.inadmissible.get(name)
        if inadmissible is None:
            inadmissible = self.inadmissible[name] = Classes(queue_order, self._class_of)
        return inadmissible

    @staticmethod
    def _set_aside_message(name: str, key: str) -> str:
        return f"waiting for quota in ClusterQueue {name}: an equivalent workload {key} does not fit"

    def _set_aside(self, outcome: Outcome, name: str, key: str) -> None:
        """Into the ClusterQueue's inadmissible workloads untried: an equivalent workload ``key`` did not fit."""
        self._inadmissible(name).add(outcome)
        outcome.held_message = self._set_aside_message(name, key)

    def _equivalence(self, info: Info) -> tuple:
        """The workload's equivalence class, worked out once per admission (a deep queue's bulk moves read every
        queued workload's)."""
        cls = self.classes.get(id(info))
        if cls is None:
            cls = self.classes[id(info)] = info.equivalence()
        return cls

    def _preempt(self, outcome: Outcome, cq: ClusterQueue, assignment: Assignment, targets: list[Target]) -> bool:
        """processEntry in Preempt mode with targets: skipped when another head of the cycle took one of them or
        the room; else the targets are evicted (at the end of the cycle) and the workload waits for them."""
        if any(id(t.workload) in self.victims for t in targets):
            outcome.refuse(PENDING, OVERLAPPING)
            return False
        node = self.tree.cluster_queues[cq.name]
        if not self._fits(node, assignment, targets):
            outcome.refuse(PENDING, NO_LONGER_FITS)
            return False
        for t in targets:
            self.victims[id(t.workload)] = (t, outcome.info)
        for fr, amount in assignment.usage.items():
            node.add_usage(fr, amount)  # the cycle's snapshot counts it, so later heads do not take the room
            self.reserved.append((node, fr, amount))
        outcome.refuse(PENDING, f"{assignment.message()}. Pending the preemption of {len(targets)} workload(s)")
        outcome.preempting_message = outcome.held_message
        outcome.last = None  # markPreemptionOutcome: the next cycle reconsiders every flavor
        if cq.queueing_strategy == api.BEST_EFFORT_FIFO:
            self.preemptor_head[cq.name] = outcome
        self.preempting[cq.name] = outcome
        return True

    def _fits(self, node: quota.Node, assignment: Assignment, targets: list[Target]) -> bool:
        """The scheduler's ``fits``: the usage fits with this cycle's preemption targets (and ``targets``) gone."""
        removed = [v.workload for v, _ in self.victims.values()] + [t.workload for t in targets]
        for w in removed:
            self.preemptor.remove(w)
        fits = all(node.available(fr) >= amount for fr, amount in assignment.usage.items())
        for w in removed:
            self.preemptor.add(w)
        return fits

    def _evict(self, target: Target, preemptor_info: Info, queues: dict[str, Pending[Outcome]]) -> None:
        """IssuePreemptions, then what the job reconciler does: quota released, pods stopped, back in the queue."""
        w = target.workload
        self.preemptor.remove(w)
        self.admitted[w.cluster_queue].remove(w)
        self._advance(w.cluster_queue)  # deleteWorkload
        victim = self.by_info[id(w.info)]
        message = preemption.message(
            preemptor_info,
            target.reason,
            preemption.path(self.tree, self.by_info[id(preemptor_info)].cluster_queue),
            preemption.path(self.tree, w.cluster_queue),
        )
        victim.evict(target.reason, message)
        victim.preempted_by = preemptor_info
        w.info.evicted = False  # released here at once (the job reconciler's part): no longer holding
        for pod in w.info.pods:
            pod.node_name = ""  # the job is stopped; its pods come back Pending when it is admitted again
        failed = self.bulk_moved.get(w.cluster_queue, {}).get(self._equivalence(w.info))
        if failed is not None:  # PushOrUpdate: its class was bulk-moved (a BestEffortFIFO queue's only)
            self._set_aside(victim, w.cluster_queue, failed)
        else:
            self._queue(queues, w.cluster_queue).add(victim)
        # QueueAssociatedInadmissibleWorkloadsAfter: quota freed in a ClusterQueue retries the inadmissible
        # workloads of its whole cohort tree (of itself, without a cohort), through the requeuer's delay
        self.requeue_pending.add(id(self.tree.cluster_queues[w.cluster_queue].root()))
        self._status_changed(w.cluster_queue)

    def _advance(self, cluster_queue: str) -> None:
        """The ClusterQueue's AllocatableResourceGeneration advances (a flavor scan recorded before it, and more
        than a cycle old, starts over: lastAssignmentOutdated). The cache's clusterQueue.deleteWorkload advances it:
        a workload leaving the queue's quota, and also one whose Workload changes while it holds the quota
        (addOrUpdateWorkload deletes the old entry first), as the echo of a reservation the scheduler assumed does.
        Every ClusterQueue of a tree advances when a Cohort object of it is reconciled (updateCohortTreeResources:
        updateClusterQueueResourceNode): one count per tree for them all (``tree_generation``, _status_changed)."""
        self.generation[cluster_queue] = self.generation.get(cluster_queue, 0) + 1

    def _status_changed(self, cluster_queue: str) -> None:
        """A ClusterQueue's usage changed, so its controller rewrites its status. The cohort controller watches
        ClusterQueues: it reconciles the queue's ancestor cohorts but the root (Cache.ClusterQueueAncestors leaves
        the root out), and a Cohort object's reconcile (AddOrUpdateCohort) asks the requeuer to retry the whole
        tree's inadmissible workloads. Cohorts named by ClusterQueues but not defined as objects are not found and
        requeue nothing."""
        node = self.tree.cluster_queues[cluster_queue]
        if any(a.name in self.objects.cohorts for a in list(node.ancestors())[:-1]):
            root = node.root()
            self.requeue_pending.add(id(root))
            # the reconcile's AddOrUpdateCohort advances every ClusterQueue of the tree: one count for them all
            self.tree_generation[root.name] = self.tree_generation.get(root.name, 0) + 1

    def _requeue_pending(self, queues: dict[str, Pending[Outcome]]) -> bool:
        """The requeuer's batch comes due once the cycles in flight are over: every inadmissible workload of the
        trees it was asked for goes back into its queue (queueInadmissibleWorkloads). True if any did."""
        moved = False
        for name, node in self.tree.cluster_queues.items():
            if id(node.root()) not in self.requeue_pending:
                continue
            self.bulk_moved.pop(name, None)  # queueInadmissibleWorkloads clears the bulk-moved classes
            back = self.inadmissible.pop(name, None)
            if back:
                moved = True
                pending = self._queue(queues, name)
                for cls, items in back.groups.items():  # class by class: a step per class, not per workload
                    pending.add_class(cls, items)
        self.requeue_pending.clear()
        return moved

    def _mark_blocked(self, queues: dict[str, Pending[Outcome]]) -> None:
        """StrictFIFO queues that stopped: the workloads behind the head were never tried (no condition), their
        pods say what they wait for."""
        for name, pending in queues.items():
            if not pending:
                continue
            first = pending.first()
            head = first.info
            for behind in pending.unordered():  # each gets the same words: no need to walk them in order
                if behind is not first and not behind.conditions:
                    behind.held_message = (
                        f"waiting for quota in ClusterQueue {name}: queued behind workload {head.namespace}/{head.name}"
                    )

    def _inject_flavors(self, outcome: Outcome) -> None:
        """What Kueue's job reconciler does when it admits: the flavors' node labels join each pod's nodeSelector
        and their tolerations its tolerations, so the pods land on the flavor's nodes."""
        for ps in outcome.info.pod_sets:
            names = dict.fromkeys((outcome.flavors.get(ps.name) or {}).values())
            for pod in ps.pods:
                if pod.node_name:
                    continue
                for name in names:
                    flavor = self.objects.flavors.get(name)
                    if flavor is None:
                        continue
                    pod.node_selector.update(flavor.node_labels)
                    pod.tolerations = pod.tolerations + tuple(t for t in flavor.tolerations if t not in pod.tolerations)


def queue_order(o: Outcome) -> tuple[int, str, int]:
    """The heap's order (queueOrderingFunc): priority, then creation time, then input order."""
    return (-o.info.priority, o.info.created, o.info.order)


def _reservable(assignment: Assignment, node: quota.Node) -> dict[tuple[str, str], int]:
    """quotaResourcesToReserve for a head that would need preemption: up to its nominal quota (or, borrowing, up
    to nominal plus borrowingLimit), so that lower entries of the cycle do not take the room it waits for."""
    out = {}
    for fr, amount in assignment.usage.items():
        q = node.quotas.get(fr)
        nominal = q.nominal if q is not None else 0
        used = node.usage.get(fr, 0)
        if assignment.borrowing > 0:
            out[fr] = (
                amount if q is None or q.borrowing_limit is None else min(amount, nominal + q.borrowing_limit - used)
            )
        else:
            out[fr] = max(0, min(amount, nominal - used))
    return {fr: a for fr, a in out.items() if a > 0}


def _subset(wanted: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())
