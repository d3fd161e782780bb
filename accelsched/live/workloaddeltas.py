"""Live mode's Workload door kept open between rounds: Workloads arriving and finishing are taken into the admission
of the last rebuild (queues.incremental.OpenAdmission) instead of admitting every Workload again.

Kueue's scheduler keeps its cache and queue manager across cycles, each event updating them: a new Workload is
pushed to its ClusterQueue, a finished one is dropped and its quota released (its cohort tree's inadmissible
workloads requeued), and each cycle looks at the queues' heads only. ``accelsched run`` rebuilt its session (and ran
admission over every Workload of the cache) for each burst of Workload events; in Kueue's own performance harness
(benchmarks/kueueperf.py: hundreds of Workloads arriving and finishing each second) the rounds took the loop whole.
Here these events are followed in place:

- a Workload of ours added, holding no reservation and not finished: submitted to its queue;
- a Workload finished (Finished=True) or deleted: released and forgotten;
- a Workload this admission preempted let go of its reservation (its job stopped): nothing changes in admission,
  which counted its quota free when it evicted it; the admissions of its cohort tree that waited for it are
  written (live/workloadstatus.preemptions: the preempted hold their quota until then, as in Kueue's cache);
- the echo of the door's own write that it no longer has on record: an admission it still holds, or a Workload
  waiting before and after that it has waiting too (an eviction that went out in place of an unsent admission);
- a reservation seen on a Workload it has waiting (an admission of its own that landed after a rebuild read the
  Workload pending): held as running, as that rebuild would hold it (queues.incremental.OpenAdmission.hold).

Namespaces (beside Workload objects alone) and LocalQueues added are taken in place too (live/queuedoor.py
_take_additions): Kueue's performance runner makes one of each per ClusterQueue.

Anything else (a spec or label change, a reservation released otherwise, another queue object, a pod) rebuilds the
session as before. Sessions with queued pods (the second door) are not followed in place: their pods' placement is
decided from a rebuilt session.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from accelsched.live import convert as live_convert
from accelsched.live import workloadstatus
from accelsched.live.kube import JSON
from accelsched.queues import api as queue_api
from accelsched.queues import workloads as queue_workloads
from accelsched.queues.admission import ADMITTED, EVICTED, PREEMPTED, QUOTA_RESERVED, REQUEUED, Outcome, QueueResult
from accelsched.queues.incremental import OpenAdmission

MANAGED = (QUOTA_RESERVED, ADMITTED, EVICTED, PREEMPTED, REQUEUED)  # the conditions admission carries (admission.py)


def open_admission(result: QueueResult | None) -> OpenAdmission | None:
    """The rebuild's admission, when it can be followed in place: kept open, and over Workload objects alone (no
    queued pods, Jobs or workloads waiting for room)."""
    if result is None or not isinstance(result.admission, OpenAdmission):
        return None
    objects = result.objects
    if objects.jobs or objects.room_waits:
        return None
    if any(o.info.key not in objects.workloads or o.info.pods for o in result.outcomes):
        return None
    return result.admission


def unfollowed(kind: str, obj: JSON, old: JSON | None, admission: OpenAdmission, names: Collection[str]) -> str:
    """Why a Workload event cannot be taken in place ("" when it can): the session's rebuild logs it, since at
    1,000 ClusterQueues a rebuild costs seconds."""
    key = _key(obj)
    outcome = admission.by_key.get(key)
    if kind == "ADDED":  # a new one: no conditions yet (one that has some carries them into admission: rebuild)
        if (obj.get("status") or {}).get("conditions"):
            return "added with conditions"
        if outcome is not None:
            return "added, held already"
        return "" if workloadstatus.ours(obj, names) and _pending(obj) else "added, not a pending one of ours"
    if kind == "DELETED":
        return ""
    if kind != "MODIFIED" or old is None:
        return f"{kind.lower()} without the object before"
    if outcome is None:
        return "modified, not held by the open admission"
    if workloadstatus.spec_changed(old, obj):
        return "spec changed"
    if workloadstatus.finished(obj):
        return "" if not workloadstatus.finished(old) else "modified after it finished"
    # A preempted Workload let go of its reservation (its job stopped): admission evicted it already and counts its
    # quota free (the event only lets the admissions that waited for it in its cohort tree be written), or, where
    # the rebuild that evicted it has been followed by another, holds it as running still (released here).
    if not (workloadstatus.reserved(old) and not workloadstatus.reserved(obj)):
        if _shows_admission(obj, outcome):
            return ""  # the cache now shows the admission this one holds: an echo not recognised as ours
        if _shows_evicted_admission(obj, outcome):
            # the echo of an admission the open admission has evicted since (and perhaps given again, the same):
            # the cache shows what it counted for the Workload before that eviction, which the round now writes
            # from this version (workloadstatus.preemptions), the eviction's write from the version before having
            # been kept back (a 409 else)
            return ""
        if not workloadstatus.reserved(old) and _pending(obj):
            # waiting before and after: nothing held quota on either side. The open admission has it waiting too
            # (its conditions changed: an eviction that went out in place of its unsent admission, a message
            # decided by an earlier session), or admitted by a decision of its own the cache never showed: not
            # evicted (an earlier Pending condition of ours landed first, and kept that admission's write back:
            # it goes out from this version), or evicted from a version the cache moved past (that admission's
            # write cannot land: released by apply, as the rebuild would read it, and tried again). The next
            # round writes what the open admission says of it now.
            return ""
        if _reserved_now(old, obj, outcome):
            # an admission landed that the open admission no longer counts (its write's record gone when it came
            # back, after a rebuild that read it pending): held as that rebuild would hold it
            return ""
        return f"modified, not a release ({_status_change(old, obj)}; held {_held(outcome)})"
    return "" if (outcome.preempted and not outcome.admitted) or _evicted(obj) else "released, not preempted"


def _shows_admission(doc: JSON, outcome: Outcome) -> bool:
    """``doc`` holds the reservation, in the ClusterQueue, that the open admission gave it and still holds for it.
    The echo of the door's own admission when its write in flight was no longer on record (a later decision from
    the same version replaced it, or the cache moved past that version first): at 1,000 ClusterQueues such an echo
    cost a rebuild of seconds. Nothing to take in: the open admission decided it."""
    admission = (doc.get("status") or {}).get("admission") or {}
    return (
        outcome.admitted
        and not outcome.preempted
        and workloadstatus.reserved(doc)
        and not _evicted(doc)
        and admission.get("clusterQueue") == outcome.cluster_queue
    )


def _shows_evicted_admission(doc: JSON, outcome: Outcome) -> bool:
    """``doc`` holds the reservation the open admission gave it last (ClusterQueue and flavors), and the open
    admission evicted it since: waiting now, or admitted again with the same flavors. The quota it counted is what
    the cache now shows held until the eviction, so nothing is rebuilt (at 1,000 ClusterQueues, 2 to 7 s each in
    Kueue's performance harness, a few a run in its first minute). A reservation it did not give (an eviction
    carried from an earlier session's conditions, other flavors) is not this: rebuilt."""
    if not (outcome.preempted and outcome.assigned is not None and workloadstatus.reserved(doc)) or _evicted(doc):
        return False
    if outcome.admitted and outcome.flavors != outcome.assigned:
        return False
    admission = (doc.get("status") or {}).get("admission") or {}
    shown = {a.get("name"): a.get("flavors") or {} for a in admission.get("podSetAssignments") or ()}
    given = {ps.name: dict(outcome.assigned.get(ps.name) or {}) for ps in outcome.info.pod_sets}
    return admission.get("clusterQueue") == outcome.cluster_queue and shown == given


def _reserved_now(old: JSON, doc: JSON, outcome: Outcome) -> bool:
    """``doc`` took a reservation ``old`` did not have, and the open admission holds it waiting (not preempted: one
    it evicted since is rebuilt, its eviction not yet decided again)."""
    return (
        not outcome.admitted
        and not outcome.preempted
        and not workloadstatus.reserved(old)
        and workloadstatus.reserved(doc)
        and bool((doc.get("status") or {}).get("admission"))
        and not _evicted(doc)
    )


def _held(outcome: Outcome) -> str:
    """How the open admission holds a workload, for a rebuild's reason."""
    state = "admitted" if outcome.admitted else "waiting"
    return f"{state}{', preempted' if outcome.preempted else ''} in {outcome.cluster_queue or 'no ClusterQueue'}"


def _status_change(old: JSON, new: JSON) -> str:
    """What changed in a Workload's status, in a few words: the conditions (type=status/reason) gone and come, and
    whether its admission was set, changed or removed."""
    def conditions(doc: JSON) -> set[str]:
        found = (doc.get("status") or {}).get("conditions") or ()
        return {f"{c.get('type')}={c.get('status')}/{c.get('reason', '')}" for c in found if isinstance(c, dict)}

    before, after = conditions(old), conditions(new)
    words = [f"-{c}" for c in sorted(before - after)] + [f"+{c}" for c in sorted(after - before)]
    was, now = (old.get("status") or {}).get("admission"), (new.get("status") or {}).get("admission")
    if was != now:
        words.append("admission " + ("set" if not was else "removed" if not now else "changed"))
    return " ".join(words) or "the rest of its status"


def apply(admission: OpenAdmission, changes: Mapping[str, JSON | None], names: Collection[str]) -> bool:
    """Take ``changes`` (namespace/name -> the Workload as the cache has it, None when deleted) into ``admission``
    and run its cycles (their preemptions are written as a rebuild's are: the preempted keep their quota, and
    their cohort tree admits nothing more, until their jobs let go). False when a Workload does not read: the
    caller rebuilds from the cache, and ``admission`` is not to be used again."""
    by_key = admission.by_key
    order = admission.next_order
    for key, doc in changes.items():
        outcome = by_key.get(key)
        if doc is None or workloadstatus.finished(doc):
            if outcome is not None:
                admission.forget(outcome)
            admission.objects.workloads.pop(key, None)
            continue
        if outcome is not None and outcome.admitted and _evicted(doc) and not workloadstatus.reserved(doc):
            _requeue_released(admission, outcome, doc)
            continue
        if outcome is not None and not outcome.admitted and not outcome.preempted and _running(doc):
            if not _hold_running(admission, outcome, key, doc):
                return False
            continue
        if outcome is not None or not workloadstatus.ours(doc, names) or not _pending(doc):
            continue  # taken in already (an event during the rebuild that had it), or no longer what it was
        try:
            obj = queue_api.parse_workload(doc, live_convert.SOURCE)
            (info,) = queue_workloads.find(queue_api.QueueObjects(workloads={key: obj}), [])
        except live_convert.UNUSABLE:
            return False  # the rebuild leaves it out with its error
        info.order, order = order, order + 1
        admission.objects.workloads[key] = obj
        admission.submit(info)
    admission.run_cycles()
    return True


def round_outcomes(admission: OpenAdmission, changes: Collection[str], carried: Collection[str]) -> list[Outcome]:
    """The outcomes whose status writes a round followed in place can have changed, in admission's order: those its
    cycles looked at (``admission.touched``: the heads tried, the victims), those its ``changes`` brought in
    (namespace/name: submitted, released, a stale write's echo), and the ``carried`` (read again each round until
    written). Every other outcome says what it said after the last round, whose writes were worked out then: the
    round's work is what changed, not every Workload the door knows (thousands in Kueue's performance harness)."""
    picked = dict(admission.touched)
    for key in (*changes, *carried):
        outcome = admission.by_key.get(key)
        if outcome is not None:
            picked[id(outcome)] = outcome
    return sorted(picked.values(), key=lambda o: o.info.order)  # the input's order, as a rebuild writes them


def _hold_running(admission: OpenAdmission, outcome: Outcome, key: str, doc: JSON) -> bool:
    """A Workload the open admission holds waiting is seen with a reservation: it holds its quota from now on, as
    the rebuild that reads it would hold it (queues.incremental.OpenAdmission.hold). False when it does not read."""
    try:
        obj = queue_api.parse_workload(doc, live_convert.SOURCE)
        (info,) = queue_workloads.find(queue_api.QueueObjects(workloads={key: obj}), [])
    except live_convert.UNUSABLE:
        return False
    if info.admitted is None:
        return False
    info.order = outcome.info.order
    admission.objects.workloads[key] = obj
    admission.hold(info, _managed_conditions(doc))
    return True


def _running(doc: JSON) -> bool:
    return workloadstatus.reserved(doc) and not _evicted(doc) and not workloadstatus.finished(doc)


def _managed_conditions(doc: JSON) -> list[dict[str, str]]:
    """The conditions admission carries, as the cache shows them."""
    return [
        {f: str(c.get(f, "")) for f in workloadstatus.CONDITION_FIELDS}
        for c in (doc.get("status") or {}).get("conditions") or []
        if isinstance(c, Mapping) and c.get("type") in MANAGED
    ]


def _requeue_released(admission: OpenAdmission, outcome: Outcome, doc: JSON) -> None:
    """A Workload the open admission holds as running let go of its reservation after an eviction (decided by an
    earlier session): its quota is released and it waits in its queue again, its conditions the cache's."""
    if id(outcome.info) in admission.records:
        admission.finish(outcome)
    outcome.admitted, outcome.assigned = False, None  # that admission's write cannot land: no echo of it to come
    outcome.info.admitted = None
    outcome.preempted, outcome.flavors, outcome.preempting_message = True, {}, ""
    outcome.conditions = _managed_conditions(doc)
    admission.requeue(outcome)


def _evicted(doc: JSON) -> bool:
    conditions = (doc.get("status") or {}).get("conditions") or []
    return any(isinstance(c, Mapping) and c.get("type") == EVICTED and c.get("status") == "True" for c in conditions)


def _pending(doc: JSON) -> bool:
    return not workloadstatus.reserved(doc) and not workloadstatus.finished(doc)


def _key(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"
