"""Kueue's admission over the input: its scheduling cycles run until nothing more is admitted.

pkg/scheduler/scheduler.go with its queue manager (pkg/cache/queue), on a still input:

- running workloads (their pods bound, or a Workload with status.admission) hold their quota first;
- each cycle takes the head of every active ClusterQueue (priority, then creation time, then input order),
  assigns flavors against the tree (flavorassigner), orders the entries (no borrowing first, then priority,
  then creation time) and admits each that still fits, adding its usage up the cohort tree;
- a head that does not fit gets QuotaReserved=False with reason Pending and Kueue's message. In a
  BestEffortFIFO queue it steps aside for the next workload; in a StrictFIFO queue it stays the head and
  blocks the queue. A head that lost its room to another admitted in the same cycle is retried next cycle;
- a workload whose LocalQueue or ClusterQueue is missing or stopped is Inadmissible (the workload controller's
  words), one whose namespace the ClusterQueue's namespaceSelector does not match is refused as Kueue does.

Conditions carry Kueue's reasons and messages with its default feature gates (UnadmittedWorkloadsObservability
off: a waiting workload has QuotaReserved=False, reason Pending, and no Admitted condition).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from accelsched.api.objects import Namespace, Node, Pod
from accelsched.queues import api, quota
from accelsched.queues.api import ClusterQueue, QueueObjects
from accelsched.queues.flavorassigner import Assignment, AssignmentMode, FlavorAssigner
from accelsched.queues.quota import QuotaTree
from accelsched.queues.workloads import Info, find

QUOTA_RESERVED, ADMITTED = "QuotaReserved", "Admitted"
PENDING, INADMISSIBLE = "Pending", "Inadmissible"
NAMESPACE_MISMATCH = "workload namespace doesn't match ClusterQueue selector"  # workload.ErrNamespaceMismatch
NO_LONGER_FITS = "Workload no longer fits after processing another workload"


@dataclass
class Outcome:
    """What became of one workload."""

    info: Info
    cluster_queue: str = ""
    admitted: bool = False
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)
    conditions: list[dict[str, str]] = field(default_factory=list)
    held_message: str = ""  # for its pods while it is not admitted

    def refuse(self, reason: str, message: str) -> None:
        """UnsetQuotaReservationWithCondition (no Admitted condition added while it never had one)."""
        self.conditions = [_condition(QUOTA_RESERVED, "False", reason, message)]
        self.held_message = message

    def admit(self, cluster_queue: str, flavors: dict[str, dict[str, str]]) -> None:
        """SetQuotaReservation and SyncAdmittedCondition with no admission checks."""
        self.admitted, self.flavors = True, flavors
        self.conditions = [
            _condition(QUOTA_RESERVED, "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cluster_queue}"),
            _condition(ADMITTED, "True", "Admitted", "The workload is admitted"),
        ]
        self.held_message = ""


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


@dataclass
class QueueResult:
    """Every workload's outcome, and the quota tree as admission left it (usage per ClusterQueue)."""

    outcomes: list[Outcome]
    tree: QuotaTree
    objects: QueueObjects

    def held(self) -> dict[str, str]:
        """Pods (namespace/name) of workloads not admitted, with the message their pods show."""
        return {p.key: o.held_message for o in self.outcomes if not o.admitted for p in o.info.pods if not p.node_name}


def admit(
    objects: QueueObjects, pods: list[Pod], namespaces: Iterable[Namespace], nodes: Iterable[Node]
) -> QueueResult:
    """Admit the input's workloads as Kueue would; pods of admitted workloads get their flavors' node labels and
    tolerations (what Kueue injects when it lets them go)."""
    return _Admission(objects, pods, namespaces, nodes).run()


class _Admission:
    def __init__(self, objects: QueueObjects, pods: list[Pod], namespaces: Iterable[Namespace], nodes: Iterable[Node]):
        self.objects = objects
        self.tree = quota.build(objects)
        self.outcomes = [Outcome(info) for info in find(objects, pods)]
        self.namespace_labels = {ns.name: ns.label_map() for ns in namespaces}
        self.node_labels = {n.name: n.labels for n in nodes}
        self.reserved: list[tuple[quota.Node, tuple[str, str], int]] = []  # this cycle's reserveCapacity...
        self.inactive = {
            name
            for name, cq in objects.cluster_queues.items()
            if name in self.tree.in_cycle
            or any(fq.name not in objects.flavors for rg in cq.resource_groups for fq in rg.flavors)
        }

    def run(self) -> QueueResult:
        queues: dict[str, list[Outcome]] = {}
        for outcome in self.outcomes:
            cq = self._cluster_queue(outcome)
            if cq is None:
                continue
            outcome.cluster_queue = cq.name
            if outcome.info.admitted is not None:
                self._keep_running(outcome, cq)
            else:
                queues.setdefault(cq.name, []).append(outcome)
        for pending in queues.values():
            pending.sort(key=lambda o: (-o.info.priority, o.info.created, o.info.order))
        self._cycles(queues)
        for outcome in self.outcomes:
            if outcome.admitted:
                self._inject_flavors(outcome)
        return QueueResult(self.outcomes, self.tree, self.objects)

    def _cluster_queue(self, outcome: Outcome) -> ClusterQueue | None:
        """The workload's ClusterQueue through its LocalQueue, or None with the condition Kueue sets."""
        info = outcome.info
        if info.waiting:
            outcome.held_message = info.waiting  # Kueue makes no Workload until the group is complete
            return None
        local = self.objects.local_queues.get(f"{info.namespace}/{info.queue_name}")
        if local is None:
            outcome.refuse(INADMISSIBLE, f"LocalQueue {info.queue_name} is terminating or missing")
            return None
        if local.stop_policy != api.STOP_NONE:
            outcome.refuse(INADMISSIBLE, f"LocalQueue {info.queue_name} is stopped")
            return None
        cq = self.objects.cluster_queues.get(local.cluster_queue)
        if cq is None:
            outcome.refuse(INADMISSIBLE, f"ClusterQueue {local.cluster_queue} is terminating or missing")
            return None
        if cq.stop_policy != api.STOP_NONE and info.admitted is None:
            outcome.refuse(INADMISSIBLE, f"ClusterQueue {cq.name} is stopped")
            return None
        return cq

    def _keep_running(self, outcome: Outcome, cq: ClusterQueue) -> None:
        """A workload already running holds its quota whatever the quota says now: its flavors are those its
        admission names, or, for pods bound without one, the flavor whose node labels their node carries."""
        flavors = outcome.info.admitted or {}
        if not flavors:
            flavors = {ps.name: self._flavors_of_node(ps.pods, ps.requests, cq) for ps in outcome.info.pod_sets}
        node = self.tree.cluster_queues[cq.name]
        for ps in outcome.info.pod_sets:
            for res, amount in ps.requests.items():
                flavor = flavors.get(ps.name, {}).get(res)
                if flavor is not None and cq.name not in self.tree.in_cycle:
                    node.add_usage((flavor, res), amount * ps.count)
        outcome.admit(cq.name, flavors)

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

    def _cycles(self, queues: dict[str, list[Outcome]]) -> None:
        while True:
            heads = []
            for name, pending in queues.items():
                cq = self.objects.cluster_queues[name]
                if not pending:
                    continue
                head = pending[0]
                if name in self.inactive:
                    head.refuse(PENDING, f"ClusterQueue {name} is inactive")
                    pending.pop(0)  # an inactive queue yields no heads: each of its workloads waits
                    continue
                selector = cq.namespace_selector
                labels = self.namespace_labels.get(
                    head.info.namespace, {"kubernetes.io/metadata.name": head.info.namespace}
                )
                if selector is None or not selector.matches(labels):
                    head.refuse(PENDING, NAMESPACE_MISMATCH)
                    pending.pop(0)  # requeued as inadmissible in both strategies
                    continue
                heads.append((head, cq, self._assign(head, cq)))
            if not heads:
                if any(queues.values()):
                    continue  # queues whose heads stepped aside have new heads
                break
            progress = False
            self.reserved = []
            heads.sort(key=lambda h: (h[2].borrowing, -h[0].info.priority, h[0].info.created, h[0].info.order))
            for outcome, cq, assignment in heads:
                progress |= self._process(outcome, cq, assignment, queues[cq.name])
            for node, fr, amount in self.reserved:  # a cycle's reservations end with it (a fresh snapshot next)
                node.remove_usage(fr, amount)
            if not progress:
                self._mark_blocked(queues)
                break

    def _assign(self, outcome: Outcome, cq: ClusterQueue) -> Assignment:
        node = self.tree.cluster_queues[cq.name]
        return FlavorAssigner(outcome.info, cq, node, self.tree, self.objects.flavors).assign()

    def _process(self, outcome: Outcome, cq: ClusterQueue, assignment: Assignment, pending: list[Outcome]) -> bool:
        """processEntry: True when the queue moved (admitted, or a BestEffortFIFO head stepped aside)."""
        node = self.tree.cluster_queues[cq.name]
        mode = assignment.mode
        if mode != AssignmentMode.FIT:
            outcome.refuse(PENDING, assignment.message())
            if mode == AssignmentMode.PREEMPT and cq.preemption.reclaim_within_cohort != "Any":
                for fr, amount in _reservable(assignment, node).items():
                    node.add_usage(fr, amount)  # reserveCapacityForUnreclaimablePreempt, for this cycle
                    self.reserved.append((node, fr, amount))
            if cq.queueing_strategy == api.BEST_EFFORT_FIFO:
                pending.remove(outcome)
                return True
            return False
        if any(node.available(fr) < amount for fr, amount in assignment.usage.items()):
            outcome.refuse(PENDING, NO_LONGER_FITS)
            return False  # requeued at once: tried again next cycle
        for fr, amount in assignment.usage.items():
            node.add_usage(fr, amount)
        outcome.admit(cq.name, assignment.flavors())
        pending.remove(outcome)
        return True

    def _mark_blocked(self, queues: dict[str, list[Outcome]]) -> None:
        """StrictFIFO queues that stopped: the workloads behind the head were never tried (no condition), their
        pods say what they wait for."""
        for name, pending in queues.items():
            for behind in pending[1:]:
                if not behind.conditions:
                    head = pending[0].info
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
