"""Why a workload is not admitted, beyond Kueue's one-line message: the quota that blocks it, the borrowing left in
its cohort, whose admitted workloads hold that quota (and whether its ClusterQueue's preemption policy could take
it back from them), the closed preemption gates that keep it from preempting, and the smallest change that admits
it.

Every change offered is checked, not guessed: admission (queues.admission) runs again on a copy of the input with
the change applied, and only a change after which the workload is admitted is offered. The copy is the input as
admission left it (running workloads hold their quota, the evicted wait again), and the unchanged copy must still
leave the workload waiting, else nothing is offered (it would be admitted by admission running again).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from accelsched.api.objects import Namespace, Node, Pod
from accelsched.queues import api, preemptiongates
from accelsched.queues.admission import Outcome, QueueResult, admit
from accelsched.queues.api import ClusterQueue, QueueObjects
from accelsched.queues.preemption import satisfies, within_nominal
from accelsched.queues.quota import FlavorResource
from accelsched.queues.resources import format_amount

MAX_WAIT_TRIALS = 12  # holders tried one by one for "wait for x to finish" (each trial is one admission run)


@dataclass
class Blocker:
    """One flavor and resource of the workload's ClusterQueue that cannot give what the workload asks."""

    cluster_queue: str
    flavor: str
    resource: str
    requested: int
    used: int
    nominal: int
    available: int  # what the ClusterQueue could take now without preempting (its own quota and borrowing)
    borrow_left: int  # of that, what is borrowed from the cohort (counting borrowingLimit and others' lendingLimit)
    borrowing_limit: int | None
    cohort: str

    def amount(self, value: int) -> str:
        return format_amount(self.resource, value)

    def text(self) -> str:
        limit = f", borrowingLimit {self.amount(self.borrowing_limit)}" if self.borrowing_limit is not None else ""
        where = f" in cohort {self.cohort}" if self.cohort else " (no cohort)"
        return (
            f"ClusterQueue {self.cluster_queue}, flavor {self.flavor}, {self.resource}: needs "
            f"{self.amount(self.requested)}, used {self.amount(self.used)} of nominal {self.amount(self.nominal)}, "
            f"{self.amount(self.available)} available; {self.amount(self.borrow_left)} left to borrow{where}{limit}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "clusterQueue": self.cluster_queue,
            "flavor": self.flavor,
            "resource": self.resource,
            "requested": self.amount(self.requested),
            "used": self.amount(self.used),
            "nominal": self.amount(self.nominal),
            "available": self.amount(self.available),
            "borrowLeft": self.amount(self.borrow_left),
            "borrowingLimit": None if self.borrowing_limit is None else self.amount(self.borrowing_limit),
            "cohort": self.cohort or None,
        }


@dataclass
class Holder:
    """An admitted workload using a blocking flavor and resource."""

    workload: str
    cluster_queue: str
    flavor: str
    resource: str
    amount: int
    borrowing: bool  # its ClusterQueue uses more than its nominal quota there
    preemptible: str  # the policy under which the waiting workload's ClusterQueue could preempt it, or ""

    def text(self) -> str:
        borrowing = ", its ClusterQueue borrowing" if self.borrowing else ""
        policy = f"; preemptible under {self.preemptible}" if self.preemptible else "; not preemptible by it"
        return (
            f"{self.workload} ({self.cluster_queue}) holds {format_amount(self.resource, self.amount)} "
            f"{self.resource} in flavor {self.flavor}{borrowing}{policy}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "clusterQueue": self.cluster_queue,
            "flavor": self.flavor,
            "resource": self.resource,
            "amount": format_amount(self.resource, self.amount),
            "borrowing": self.borrowing,
            "preemptibleUnder": self.preemptible or None,
        }


@dataclass
class Fix:
    """A change after which admission admits the workload (checked by running it)."""

    kind: str  # nominalQuota, borrowingLimit, preemptionPolicy, preemptionGate, wait
    text: str
    size: int  # the quota added, or the quota the workloads to finish or preempt hold: smaller is smaller
    preempted: list[str] = field(default_factory=list)  # what admission preempted to admit it, after the change

    def preempted_text(self) -> str:
        return "preempting " + ", ".join(self.preempted)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "change": self.text, "preempts": self.preempted}


@dataclass
class QueueExplanation:
    workload: str
    cluster_queue: str
    message: str
    blockers: list[Blocker] = field(default_factory=list)
    holders: list[Holder] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)  # smallest first
    note: str = ""  # e.g. why no change is offered
    gates: list[str] = field(default_factory=list)  # closed preemption gates that keep it from preempting

    def lines(self) -> list[str]:
        """For a person: ``accelsched explain``'s text and the demo."""
        out = [f"workload {self.workload} is not admitted in ClusterQueue {self.cluster_queue or '?'}: {self.message}"]
        out += [f"blocked by {b.text()}" for b in self.blockers]
        out += [f"held by {h.text()}" for h in self.holders]
        if self.gates:
            which = f"gate {self.gates[0]} is" if len(self.gates) == 1 else f"gates {', '.join(self.gates)} are"
            out.append(
                f"gated: it needs to preempt, and its preemption {which} closed "
                "(in spec.preemptionGates, not Open in status.preemptionGates)"
            )
        if self.fixes:
            first, *others = self.fixes
            tail = f" ({first.preempted_text()})" if first.preempted else ""
            out.append(f"smallest change that admits it: {first.text}{tail}")
            out += [f"also admits it: {f.text}" for f in others]
        if self.note:
            out.append(self.note)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "clusterQueue": self.cluster_queue or None,
            "message": self.message,
            "blockedBy": [b.to_json() for b in self.blockers],
            "heldBy": [h.to_json() for h in self.holders],
            "closedPreemptionGates": list(self.gates),
            "smallestChange": self.fixes[0].to_json() if self.fixes else None,
            "changes": [f.to_json() for f in self.fixes],
            "note": self.note or None,
        }


def requested(outcome: Outcome, cq: ClusterQueue) -> dict[FlavorResource, int]:
    """What the workload asks of each flavor its ClusterQueue offers for each resource it requests."""
    out: dict[FlavorResource, int] = {}
    for ps in outcome.info.pod_sets:
        for res, amount in ps.requests.items():
            if not amount:
                continue
            for rg in cq.resource_groups:
                if res in rg.covered:
                    for fq in rg.flavors:
                        out[(fq.name, res)] = out.get((fq.name, res), 0) + amount * ps.count
    return out


def blockers(result: QueueResult, outcome: Outcome) -> list[Blocker]:
    """Each flavor and resource of the workload's ClusterQueue whose available quota is less than it asks."""
    cq = result.objects.cluster_queues[outcome.cluster_queue]
    node = result.tree.cluster_queues[cq.name]
    out = []
    for fr, amount in requested(outcome, cq).items():
        available = node.available(fr)
        if amount <= available:
            continue
        q = node.quotas.get(fr)
        nominal = q.nominal if q is not None else 0
        used = node.usage.get(fr, 0)
        own = max(0, nominal - used)
        out.append(
            Blocker(
                cq.name,
                *fr,
                amount,
                used,
                nominal,
                max(0, available),
                max(0, available - own),
                q.borrowing_limit if q is not None else None,
                cq.cohort,
            )
        )
    return out


def holders(result: QueueResult, outcome: Outcome, blocking: list[Blocker]) -> list[Holder]:
    """The admitted workloads of the cohort tree using a blocking flavor and resource, biggest first."""
    cq = result.objects.cluster_queues[outcome.cluster_queue]
    root = result.tree.cluster_queues[cq.name].root()
    frs = {(b.flavor, b.resource) for b in blocking}
    out = []
    for other in result.outcomes:
        if not other.admitted or other is outcome or other.cluster_queue not in result.tree.cluster_queues:
            continue
        node = result.tree.cluster_queues[other.cluster_queue]
        if node.root() is not root:
            continue
        for fr, amount in _usage(other).items():
            if fr not in frs:
                continue
            borrowing = not within_nominal(node, [fr])
            out.append(
                Holder(
                    other.info.key, other.cluster_queue, *fr, amount, borrowing, _policy(cq, other, borrowing, outcome)
                )
            )
    out.sort(key=lambda h: (-h.amount, h.workload))
    return out


def _usage(outcome: Outcome) -> dict[FlavorResource, int]:
    out: dict[FlavorResource, int] = {}
    for ps in outcome.info.pod_sets:
        for res, amount in ps.requests.items():
            flavor = (outcome.flavors.get(ps.name) or {}).get(res)
            if flavor is not None and amount:
                out[(flavor, res)] = out.get((flavor, res), 0) + amount * ps.count
    return out


def _policy(cq: ClusterQueue, other: Outcome, borrowing: bool, waiting: Outcome) -> str:
    """Which of the ClusterQueue's policies would let the waiting workload preempt ``other`` (Kueue's candidates:
    its own queue under withinClusterQueue, another queue's only while that queue borrows)."""
    if other.cluster_queue == cq.name:
        policy = cq.preemption.within_cluster_queue
        ok = policy != api.NEVER and satisfies(policy, waiting.info, other.info)
        return f"withinClusterQueue: {policy}" if ok else ""
    policy = cq.preemption.reclaim_within_cohort
    ok = borrowing and policy != api.NEVER and satisfies(policy, waiting.info, other.info)
    return f"reclaimWithinCohort: {policy}" if ok else ""


# ------------------------------------------------------------------------------------------- checked changes


@dataclass
class _Trial:
    """Admission run again on a copy of the input as admission left it."""

    objects: QueueObjects
    pods: list[Pod]
    namespaces: list[Namespace]
    nodes: list[Node]
    key: str
    owners: dict[str, set[str]]  # workload key -> its pods' keys

    def run(self, objects: QueueObjects | None = None, without: str = "") -> tuple[bool, list[str]]:
        """Whether the workload is admitted (and whom admission preempted for it), with ``objects`` instead of
        the input's, and without the workload ``without``."""
        gone = self.owners.get(without, set())
        pods = copy.deepcopy([p for p in self.pods if p.key not in gone])
        result = admit(objects or self.objects, pods, self.namespaces, self.nodes)
        mine = next((o for o in result.outcomes if o.info.key == self.key), None)
        if mine is None or not mine.admitted:
            return False, []
        preempted = [o.info.key for o in result.outcomes if o.preempted and not o.admitted]
        return True, sorted(preempted)


def _with_cq(objects: QueueObjects, name: str, change: Callable[[ClusterQueue], ClusterQueue]) -> QueueObjects:
    out = copy.copy(objects)
    out.cluster_queues = {**objects.cluster_queues, name: change(objects.cluster_queues[name])}
    return out


def _with_quota(cq: ClusterQueue, fr: FlavorResource, **changes: int | None) -> ClusterQueue:
    """The ClusterQueue with one flavor's quota for one resource changed (nominal, borrowing_limit)."""

    def change(flavor: str, q: api.ResourceQuota) -> api.ResourceQuota:
        return dataclasses.replace(q, **changes) if (flavor, q.name) == fr else q

    return dataclasses.replace(cq, resource_groups=api.map_quotas(cq.resource_groups, change))


def fixes(
    result: QueueResult,
    outcome: Outcome,
    blocking: list[Blocker],
    holding: list[Holder],
    trial: _Trial,
) -> tuple[list[Fix], str]:
    """The changes after which admission admits the workload, smallest first, and a note when there is none."""
    if trial.run()[0]:
        return [], "admitted when admission runs again (it waited on the order of the queue): no change needed"
    cq = result.objects.cluster_queues[outcome.cluster_queue]
    out = []
    gate = _open_gates(trial, outcome, holding) if gated(result, outcome) else None
    if gate is not None:
        out.append(gate)
    # nominalQuota (and borrowingLimit) per flavor, the shortfall first, then up to the whole request
    for flavor in dict.fromkeys(b.flavor for b in blocking):
        mine = [b for b in blocking if b.flavor == flavor]
        for kind, field_name in (("nominalQuota", "nominal"), ("borrowingLimit", "borrowing_limit")):
            if kind == "borrowingLimit" and not all(b.borrowing_limit is not None for b in mine):
                continue
            fix = _raise(trial, cq, mine, kind, field_name)
            if fix is not None:
                out.append(fix)
    # the preemption policy, when holders it cannot touch today could be preempted under another
    for policy_field, label, current in (
        ("reclaim_within_cohort", "reclaimWithinCohort", cq.preemption.reclaim_within_cohort),
        ("within_cluster_queue", "withinClusterQueue", cq.preemption.within_cluster_queue),
    ):
        if current == api.ANY or (not cq.cohort and policy_field == "reclaim_within_cohort"):
            continue
        # withinClusterQueue: Any would let equal priorities preempt each other in turn: not offered
        for value in ("LowerPriority",) if policy_field == "within_cluster_queue" else (api.ANY,):
            if value == current:
                continue
            preemption = dataclasses.replace(cq.preemption, **{policy_field: value})
            changed = _with_cq(trial.objects, cq.name, lambda c, p=preemption: dataclasses.replace(c, preemption=p))
            admitted, preempted = trial.run(changed)
            if admitted:
                size = sum(h.amount for h in holding if h.workload in preempted)
                text = f"set spec.preemption.{label}: {value} on ClusterQueue {cq.name}"
                out.append(Fix("preemptionPolicy", text, size, preempted))
                break
    # waiting for one workload to finish: the smallest holder whose quota is enough
    by_size = sorted({h.workload: h for h in holding}.values(), key=lambda h: (h.amount, h.workload))
    for h in by_size[:MAX_WAIT_TRIALS]:
        admitted, preempted = trial.run(without=h.workload)
        if admitted:
            held = sum(x.amount for x in holding if x.workload == h.workload and x.resource == h.resource)
            text = f"wait for workload {h.workload} ({format_amount(h.resource, held)} {h.resource}) to finish"
            out.append(Fix("wait", text, held, preempted))
            break
    out.sort(key=lambda f: (f.size, f.kind != "wait"))
    note = (
        ""
        if out
        else "no single change tried (quota, borrowingLimit, preemption policy, one workload finishing) admits it"
    )
    return out, note


def gated(result: QueueResult, outcome: Outcome) -> list[str]:
    """The closed preemption gates of a workload Kueue keeps from preempting (BlockedOnPreemptionGates True, with
    the feature gates that honour them on), or none."""
    blocked = any(
        c["type"] == preemptiongates.BLOCKED_ON_PREEMPTION_GATES and c["status"] == "True" for c in outcome.conditions
    )
    return outcome.gates.closed() if blocked and result.objects.config.preemption_gates else []


def _open_gates(trial: _Trial, outcome: Outcome, holding: list[Holder]) -> Fix | None:
    """Its preemption gates opened (what the controller owning them does, in status.preemptionGates): offered if
    admission then admits it, with whom it preempts."""
    closed = outcome.gates.closed()
    written = trial.objects.workloads.get(outcome.info.key)
    if not closed or written is None:
        return None
    changed = copy.copy(trial.objects)
    opened = dataclasses.replace(written, preemption_gates=written.preemption_gates.open_all())
    changed.workloads = {**trial.objects.workloads, outcome.info.key: opened}
    admitted, preempted = trial.run(changed)
    if not admitted:
        return None
    size = sum(h.amount for h in holding if h.workload in preempted)
    which = "gate" if len(closed) == 1 else "gates"
    text = f"open preemption {which} {', '.join(closed)} of workload {outcome.info.key} (status.preemptionGates)"
    return Fix("preemptionGate", text, size, preempted)


def _raise(trial: _Trial, cq: ClusterQueue, mine: list[Blocker], kind: str, field_name: str) -> Fix | None:
    """The least raise of every blocking resource of one flavor: the shortfall, then twice and four times it (a
    workload ahead in the queue may take the first room), never past the whole request."""
    for factor in (1, 2, 4):
        by = {(b.flavor, b.resource): min((b.requested - b.available) * factor, b.requested) for b in mine}
        changed = cq
        for b in mine:
            base = b.nominal if field_name == "nominal" else (b.borrowing_limit or 0)
            changed = _with_quota(changed, (b.flavor, b.resource), **{field_name: base + by[(b.flavor, b.resource)]})
        admitted, preempted = trial.run(_with_cq(trial.objects, cq.name, lambda _c, new=changed: new))
        if admitted:
            parts = ", ".join(f"{b.resource} by {b.amount(by[(b.flavor, b.resource)])}" for b in mine)
            return Fix(kind, f"raise {kind} of {cq.name}/{mine[0].flavor} {parts}", sum(by.values()), preempted)
        if all(by[(b.flavor, b.resource)] >= b.requested for b in mine):
            break
    return None


def explain(
    result: QueueResult,
    outcome: Outcome,
    pods: Iterable[Pod],
    namespaces: Iterable[Namespace],
    nodes: Iterable[Node],
) -> QueueExplanation:
    """The explanation of a workload not admitted; ``pods`` etc. are the input as admission left it (the
    changes are checked against them)."""
    why = QueueExplanation(outcome.info.key, outcome.cluster_queue, outcome.held_message)
    if outcome.admitted or outcome.cluster_queue not in result.objects.cluster_queues:
        return why  # a queue problem (missing, stopped) is its message alone
    why.blockers = blockers(result, outcome)
    why.holders = holders(result, outcome, why.blockers)
    why.gates = gated(result, outcome)
    if not why.blockers:
        why.note = "no quota blocks it now (its message names the reason: taints, node affinity, the queue's order)"
        return why
    relevant = [p for p in pods if _queued(result.objects, p)]
    owners = {o.info.key: {p.key for p in o.info.pods} for o in result.outcomes}
    trial = _Trial(result.objects, relevant, list(namespaces), list(nodes), outcome.info.key, owners)
    why.fixes, why.note = fixes(result, outcome, why.blockers, why.holders, trial)
    return why


def _queued(objects: QueueObjects, pod: Pod) -> bool:
    """The pods admission reads (queue-labelled, or made by a queued Job); the others never change its answer."""
    if api.QUEUE_NAME_LABEL in pod.labels:
        return True
    return pod.owner_kind == "Job" and f"{pod.namespace}/{pod.owner_name}" in objects.jobs


def for_pod(
    result: QueueResult, pod: Pod, pods: Iterable[Pod], namespaces: Iterable[Namespace], nodes: Iterable[Node]
) -> QueueExplanation | None:
    """The explanation of the workload not admitted that holds ``pod`` back, or None."""
    outcome = next(
        (o for o in result.outcomes if not o.admitted and any(p is pod or p.key == pod.key for p in o.info.pods)), None
    )
    if outcome is None:
        return None
    return explain(result, outcome, pods, namespaces, nodes)
