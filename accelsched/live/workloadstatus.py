"""Live mode's first queue door: the status Kueue's scheduler writes on Workload objects, written by accelsched.

Workload objects (made by Kueue's job controllers, or by hand) are admitted with everything else in the session
(accelsched/queues); for each one whose pods ask for accelsched (``ours``) that the cache shows without a quota
reservation, the outcome is written as Kueue's scheduler writes it (pkg/scheduler admit -> prepareWorkload:
workload.SetQuotaReservation and SyncAdmittedCondition; requeueAndUpdate: UnsetQuotaReservationWithCondition):

- admitted: ``status.admission`` (``clusterQueue``; per pod set ``name``, ``flavors`` per resource,
  ``resourceUsage`` for the pod set's count, ``count``: flavorassigner's toAPI) with ``QuotaReserved=True``
  (``QuotaReserved``, ``Quota reserved in ClusterQueue x``) and ``Admitted=True`` (``Admitted``, ``The workload is
  admitted``); an Evicted or Preempted condition that was True turns False, ``Previously: ...``;
- not admitted: ``QuotaReserved=False``, reason ``Pending`` (or ``Inadmissible`` for a missing or stopped queue),
  Kueue's message.

Conditions follow apimeta.SetStatusCondition: ``lastTransitionTime`` moves only when the status changes, and each
carries the object's generation as ``observedGeneration``; conditions admission does not manage (PodsReady,
Finished, ...) are kept. A status already saying the same is not written again. The write is a merge patch of the
status subresource carrying the object's resourceVersion (Kueue's strict apply): a Workload changed meanwhile is
answered 409 and decided again from the cache.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelsched.live import workloadevents
from accelsched.live.kube import JSON
from accelsched.queues import preemptiongates
from accelsched.queues.admission import EVICTED, PENDING, PREEMPTED, QUOTA_RESERVED, Outcome, QueueResult
from accelsched.queues.resources import format_amount
from accelsched.queues.workloads import FINISHED

CONDITION_FIELDS = ("type", "status", "reason", "message")


@dataclass(frozen=True)
class StatusWrite:
    namespace: str
    name: str
    patch: JSON
    # Kueue's events for this write, recorded once it has gone through (live.workloadevents)
    events: tuple[workloadevents.WorkloadEvent, ...] = field(default=(), compare=False)


def written(write: StatusWrite) -> tuple[str, tuple]:
    """A status write as the write pipeline tells writes apart (live/queuedoor.py): the resourceVersion it was
    decided from, and what it says (each condition's type, status and reason, and whether it admits)."""
    status = write.patch.get("status") or {}
    said = tuple(sorted((c["type"], c["status"], c.get("reason", "")) for c in status.get("conditions") or []))
    return str((write.patch.get("metadata") or {}).get("resourceVersion")), (said, "admission" in status)


def urgent(write: StatusWrite) -> bool:
    """A write that admits or evicts (what frees or takes quota), beside one that only says why a Workload waits."""
    status = write.patch.get("status") or {}
    if "admission" in status:
        return True
    return any(
        c.get("type") in (EVICTED, PREEMPTED) and c.get("status") == "True" for c in status.get("conditions") or []
    )


def admission(outcome: Outcome) -> JSON:
    """status.admission of an admitted workload (Assignment.ToAPI)."""
    assignments = []
    for ps in outcome.info.pod_sets:
        flavors = dict(sorted((outcome.flavors.get(ps.name) or {}).items()))
        usage = {r: format_amount(r, ps.requests.get(r, 0) * ps.count) for r in flavors}
        assignments.append({"name": ps.name, "flavors": flavors, "resourceUsage": usage, "count": ps.count})
    return {"clusterQueue": outcome.cluster_queue, "podSetAssignments": assignments}


def _conditions(current: list[Mapping[str, Any]], wanted: list[dict[str, str]], generation: Any, now: str) -> list:
    """``current`` with each of ``wanted`` set as apimeta.SetStatusCondition sets it."""
    out = [dict(c) for c in current if isinstance(c, Mapping)]
    for w in wanted:
        new = {**w, "lastTransitionTime": now}
        if isinstance(generation, int):
            new["observedGeneration"] = generation
        at = next((i for i, c in enumerate(out) if c.get("type") == w["type"]), None)
        if at is None:
            out.append(new)
            continue
        if out[at].get("status") == w["status"] and out[at].get("lastTransitionTime"):
            new["lastTransitionTime"] = out[at]["lastTransitionTime"]
        out[at] = new
    return out


def _same(current: list[Mapping[str, Any]], wanted: list[dict[str, str]]) -> bool:
    by_type = {c.get("type"): c for c in current if isinstance(c, Mapping)}
    return all(
        w["type"] in by_type and all(by_type[w["type"]].get(f) == w[f] for f in CONDITION_FIELDS) for w in wanted
    )


def ours(doc: JSON, scheduler_names: Collection[str]) -> bool:
    """A Workload whose pods ask for one of our schedulerNames (its pod set templates): queued for accelsched, as
    a pod is scheduled by the scheduler it names. Kueue's own scheduler admits the others (each holds its quota
    once admitted, whoever admitted it)."""
    pod_sets = (doc.get("spec") or {}).get("podSets") or []
    return any(
        (((ps.get("template") or {}).get("spec") or {}).get("schedulerName") or "default-scheduler") in scheduler_names
        for ps in pod_sets
        if isinstance(ps, Mapping)
    )


def reserved(doc: JSON) -> bool:
    """The Workload holds a quota reservation (Kueue's HasQuotaReservation)."""
    status = doc.get("status") or {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    reserved = {c.get("status") for c in conditions if c.get("type") == QUOTA_RESERVED}
    # An admission left beside QuotaReserved=False was unset (Kueue reads the condition: HasQuotaReservation).
    return "True" in reserved or (bool(status.get("admission")) and "False" not in reserved)


def finished(doc: JSON) -> bool:
    """Finished=True (workload.IsFinished), read from the object as the cache holds it (queues.workloads.finished
    reads the parsed one)."""
    conditions = (doc.get("status") or {}).get("conditions") or ()
    return any(
        isinstance(c, Mapping) and c.get("type") == FINISHED and c.get("status") == "True" for c in conditions
    )


def pending_message_only(old: JSON, new: JSON) -> bool:
    """``new`` differs from ``old`` at most in a QuotaReserved=False condition (a pending workload's message), both
    holding no reservation: nothing admission reads changed."""
    return not reserved(old) and not reserved(new) and _without_pending(old) == _without_pending(new)


def own_write_seen(old: JSON, new: JSON, version: str, what: tuple) -> bool:
    """``new`` is ``old`` (the version a status write of ours was decided from, ``version``) with that write, as
    ``written`` describes it (``what``), applied and nothing else changed: the event of our own write coming back.
    Admission read the same from the cache before it (an admission is assumed while its write is in flight, an
    eviction's workload holds its reservation either way), so it decides nothing new from it (Kueue's scheduler,
    too, is not woken by the echo of its own status update: the workload is in its cache already)."""
    if (old.get("metadata") or {}).get("resourceVersion") != version:
        return False
    status, before = new.get("status") or {}, old.get("status") or {}
    said = tuple(
        sorted(
            (c.get("type"), c.get("status"), c.get("reason", ""))
            for c in status.get("conditions") or []
            if isinstance(c, Mapping)
        )
    )
    if said != what[0] or (what[1] and not status.get("admission")):
        return False
    if not what[1] and status.get("admission") != before.get("admission"):
        return False
    rest = ("conditions", "admission")
    return (
        {k: v for k, v in status.items() if k not in rest} == {k: v for k, v in before.items() if k not in rest}
        and _meta_and_spec(old) == _meta_and_spec(new)
    )


def spec_changed(old: JSON, new: JSON) -> bool:
    """Something besides the status changed: the spec, labels, annotations, deletion or finalizers."""
    return _meta_and_spec(old) != _meta_and_spec(new)


def _meta_and_spec(doc: JSON) -> tuple[Any, ...]:
    meta = doc.get("metadata") or {}
    rest = {k: v for k, v in doc.items() if k not in ("metadata", "status")}
    return rest, meta.get("labels"), meta.get("annotations"), meta.get("deletionTimestamp"), meta.get("finalizers")


def _without_pending(doc: JSON) -> tuple[Any, ...]:
    meta, status = doc.get("metadata") or {}, dict(doc.get("status") or {})
    status["conditions"] = [
        c for c in status.get("conditions") or [] if not isinstance(c, Mapping) or c.get("type") != QUOTA_RESERVED
    ]
    rest = {k: v for k, v in doc.items() if k not in ("metadata", "status")}
    return rest, meta.get("labels"), meta.get("annotations"), status


def _message_only(current: list[Mapping[str, Any]], wanted: list[dict[str, str]]) -> bool:
    """Every wanted condition is there with the same status and reason (its message alone may differ)."""
    by_type = {c.get("type"): c for c in current if isinstance(c, Mapping)}
    return all(
        w["type"] in by_type and all(by_type[w["type"]].get(f) == w[f] for f in ("status", "reason")) for w in wanted
    )


def preemptions(
    result: QueueResult, workloads: Mapping[str, JSON], scheduler_names: Collection[str], now: str | None = None
) -> tuple[list[StatusWrite], set[str]]:
    """Workload objects admission preempted (or a HoldAndDrain queue drained) that still hold their reservation:
    Kueue's scheduler's part written on ours (IssuePreemptions: ``Preempted=True`` with its reason, ``Evicted=True``,
    reason ``Preempted``, each with Kueue's message, and every preemption gate Closed; the admission stays until the
    job's reconciler releases it),
    and which hold a reservation still (namespace/name: their quota is not free yet, whoever's they are)."""
    now = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out: list[StatusWrite] = []
    holding: set[str] = set()
    for o in result.outcomes:
        doc = workloads.get(o.info.key)
        evicted = [c for c in o.conditions if c["type"] in (PREEMPTED, EVICTED) and c["status"] == "True"]
        if doc is None or not evicted or not reserved(doc):
            continue
        holding.add(o.info.key)
        current = (doc.get("status") or {}).get("conditions") or []
        if not ours(doc, scheduler_names) or _same(current, evicted):
            continue
        meta = doc.get("metadata") or {}
        body: JSON = {"conditions": _conditions(current, evicted, meta.get("generation"), now)}
        gates = (doc.get("status") or {}).get("preemptionGates")
        if gates:  # evict.closeAllPreemptionGates, in the same patch
            closed = {"position": preemptiongates.CLOSED, "lastTransitionTime": now}
            body["preemptionGates"] = [{**g, **closed} for g in gates]
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": body}
        events = _eviction_events(o, doc, evicted, workloads)
        out.append(StatusWrite(o.info.namespace, o.info.name, patch, events))
    return out, holding


def _eviction_events(
    o: Outcome, doc: JSON, evicted: list[dict[str, str]], workloads: Mapping[str, JSON]
) -> tuple[workloadevents.WorkloadEvent, ...]:
    """Kueue's events for an eviction: by preemption (``Outcome.preempted_by``), or by a stopped queue."""
    conditions = {c["type"]: c for c in evicted}
    if PREEMPTED not in conditions:
        ev = conditions[EVICTED]
        return workloadevents.drained(doc, ev["reason"], ev["message"])
    preemptor = o.preempted_by
    preemptor_doc = workloads.get(preemptor.key) if preemptor is not None else None
    return workloadevents.preempted(
        doc, conditions[PREEMPTED]["message"], o.info.priority, o.cluster_queue, preemptor_doc,
        preemptor.priority if preemptor is not None else 0,
    )  # fmt: skip


def trees_of(result: QueueResult, keys: Collection[str]) -> set[str]:
    """The cohort trees (their roots' names; a ClusterQueue without a cohort is its own) of the workloads
    ``keys`` (namespace/name), for status_writes' ``blocked``."""
    out = set()
    for o in result.outcomes:
        node = result.tree.cluster_queues.get(o.cluster_queue)
        if o.info.key in keys and node is not None:
            out.add(node.root().name)
    return out


def status_writes(
    result: QueueResult,
    workloads: Mapping[str, JSON],
    scheduler_names: Collection[str],
    now: str | None = None,
    preempting: int = 0,
    blocked: Collection[str] = (),
    allowed: Collection[str] = (),
) -> list[StatusWrite]:
    """The status writes for our Workload objects (``workloads``: the cache's, by namespace/name) that hold no
    quota reservation yet and whose status does not already say what admission decided. ``preempting``: how many
    preempted workloads still hold their reservation; until they let go, nothing is admitted (the room is taken).
    ``blocked``: the same, for the cohort trees (trees_of) where such workloads are: nothing is admitted there until
    they let go, and elsewhere admission goes on (their room is not what a workload of another tree was given),
    but for ``allowed``: those that fit beside them (fitting_beside). An admission held back while the victims of
    its own preemptions still hold the room gets what Kueue's scheduler writes on a preemptor meanwhile
    (``QuotaReserved=False``, ``... Pending the preemption of N workload(s)``).

    A pending workload whose Pending condition is written already is not rewritten for a new message alone: a deep
    queue draining changes every waiting workload's message ("N more needed") each round, and rewriting them all
    put each admission behind hundreds of writes (benchmarks/deepqueue.py). The message is the one of when the
    workload started waiting (or its reason last changed); Kueue's scheduler rewrites it when it retries it."""
    now = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out = []
    for o in result.outcomes:
        admits, wanted = o.admitted, o.conditions
        held_back = preempting or (blocked and _tree(result, o.cluster_queue) in blocked)
        if admits and held_back and o.info.key not in allowed:
            if not o.preempting_message:
                continue
            # its own preemptions' victims hold the room still: it is told what Kueue tells a preemptor meanwhile
            admits, wanted = False, [_pending_condition(o.preempting_message)]
        doc = workloads.get(o.info.key)
        if doc is None or o.info.key not in result.objects.workloads or not wanted:
            continue
        meta, status = doc.get("metadata") or {}, doc.get("status") or {}
        current = status.get("conditions") or []
        if reserved(doc):
            continue  # it holds a reservation already (ours, or Kueue's): admission counts it as running
        if not admits and o.preempted and not _shows_eviction(current):
            continue  # preempted before its admission was written (unshown_preemptions)
        if not admits and _same(current, wanted):
            continue
        if not admits and _message_only(current, wanted):
            continue  # see above: a new message alone is not written
        if not ours(doc, scheduler_names):
            continue  # last: the checks above leave out most of a deep queue at less cost
        body: JSON = {"conditions": _conditions(current, wanted, meta.get("generation"), now)}
        if admits:
            body["admission"] = admission(o)
            events = workloadevents.admitted(doc, o.cluster_queue, o.considered)
        else:
            # requeueAndUpdate's warning: a refusal by the scheduler (Pending); the Inadmissible ones (a queue
            # missing or stopped) are the workload controller's, which records no event for them
            refused = next((c for c in wanted if c["type"] == QUOTA_RESERVED and c["status"] == "False"), None)
            by_scheduler = refused is not None and refused["reason"] == PENDING
            events = workloadevents.pending(doc, refused["reason"], refused["message"]) if by_scheduler else ()
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": body}
        out.append(StatusWrite(o.info.namespace, o.info.name, patch, events))
    return out


def _pending_condition(message: str) -> dict[str, str]:
    """UnsetQuotaReservationWithCondition's QuotaReserved=False, reason Pending (a workload never admitted)."""
    return {"type": QUOTA_RESERVED, "status": "False", "reason": PENDING, "message": message}


def _shows_eviction(current: list[Mapping[str, Any]]) -> bool:
    return any(isinstance(c, Mapping) and c.get("type") == EVICTED and c.get("status") == "True" for c in current)


def unshown_preemptions(result: QueueResult, workloads: Mapping[str, JSON]) -> list[str]:
    """The workloads (namespace/name) admission preempted whose admission the API server never showed: decided,
    its write still waiting for its turn (the API server takes the door's writes slower than admission decides them
    while Kueue's performance runner creates its Workloads), then preempted by a later round. The admission not
    sent is dropped and nothing is written in its place (status_writes): Kueue's scheduler, when it cannot apply
    an admission, forgets it and requeues the workload (ForgetWorkload), with no eviction of a workload that never
    held its quota. Written, such an eviction showed ``Preempted=True`` on a Workload that never ran (463 of the 483
    evictions of a large-scale run), and the runner counted each as one."""
    out = []
    for o in result.outcomes:
        if o.admitted or not o.preempted:
            continue
        doc = workloads.get(o.info.key)
        if doc is None or reserved(doc):
            continue
        if not _shows_eviction((doc.get("status") or {}).get("conditions") or []):
            out.append(o.info.key)
    return out


def held_back(result: QueueResult, blocked: Collection[str], allowed: Collection[str]) -> set[str]:
    """The admissions status_writes keeps back (namespace/name): in a ``blocked`` tree, and not ``allowed``."""
    if not blocked:
        return set()
    return {
        o.info.key
        for o in result.outcomes
        if o.admitted and o.info.key not in allowed and _tree(result, o.cluster_queue) in blocked
    }


def fitting_beside(
    result: QueueResult, workloads: Mapping[str, JSON], holding: Collection[str], written: Collection[str]
) -> set[str]:
    """Of the workloads admission admitted in the cohort trees where preempted workloads (``holding``) still hold
    their reservation, those whose admission can be written now: they fit the quota with the preempted counted
    (Kueue's cache keeps a preempted workload's usage until its job lets go, and admits beside it what fits). Taken
    in queue order (priority, then creation), each kept out when it would take a ClusterQueue or cohort of its
    tree past its quota; the preemptor itself waits so. ``written``: admissions in flight, counted as held."""
    trees = trees_of(result, holding)
    by_key = {o.info.key: o for o in result.outcomes}
    # what admission counts that the cache does not hold yet: admitted here, not reserved there, not in flight
    waiting = [
        o
        for o in result.outcomes
        if o.admitted
        and _tree(result, o.cluster_queue) in trees
        and o.info.key not in written
        and (doc := workloads.get(o.info.key)) is not None
        and not reserved(doc)
    ]
    applied: list[tuple[Any, dict[tuple[str, str], int]]] = []  # undone at the end, last first

    def apply(node: Any, usage: dict[tuple[str, str], int]) -> None:
        _add(node, usage)
        applied.append((node, usage))

    for key in holding:  # the preempted, their usage back in the tree as the cache still has it
        o, doc = by_key.get(key), workloads.get(key)
        node = result.tree.cluster_queues.get(o.cluster_queue) if o is not None else None
        if o is None or node is None or doc is None or o.admitted:
            continue  # (one admitted again here counts already)
        flavors = {
            str(psa.get("name")): dict(psa.get("flavors") or {})
            for psa in ((doc.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
        }
        apply(node, _usage(o, flavors))
    for o in waiting:  # and the admissions not written yet, out of it
        apply(result.tree.cluster_queues[o.cluster_queue], {fr: -a for fr, a in _usage(o).items()})
    allowed = set()
    for o in sorted(waiting, key=lambda o: (-o.info.priority, o.info.created, o.info.order)):
        node, usage = result.tree.cluster_queues[o.cluster_queue], _usage(o)
        _add(node, usage)
        if all(n.available(fr) >= 0 for fr in usage for n in (node, *node.ancestors()) if fr in n.subtree):
            allowed.add(o.info.key)
            applied.append((node, usage))
        else:
            _add(node, {fr: -a for fr, a in usage.items()})
    for node, usage in reversed(applied):
        _add(node, {fr: -a for fr, a in usage.items()})
    return allowed


def _usage(o: Outcome, flavors: Mapping[str, Mapping[str, str]] | None = None) -> dict[tuple[str, str], int]:
    """A workload's usage per (flavor, resource), with its admission's flavors (or ``flavors``)."""
    flavors = o.flavors if flavors is None else flavors
    usage: dict[tuple[str, str], int] = {}
    for ps in o.info.pod_sets:
        for res, amount in ps.requests.items():
            flavor = (flavors.get(ps.name) or {}).get(res)
            if flavor is not None:
                usage[(flavor, res)] = usage.get((flavor, res), 0) + amount * ps.count
    return usage


def _add(node: Any, usage: Mapping[tuple[str, str], int]) -> None:
    for fr, amount in usage.items():
        if amount >= 0:
            node.add_usage(fr, amount)
        else:
            node.remove_usage(fr, -amount)


def _tree(result: QueueResult, cluster_queue: str) -> str:
    node = result.tree.cluster_queues.get(cluster_queue)
    return node.root().name if node is not None else cluster_queue
