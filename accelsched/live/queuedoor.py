"""The live scheduler's queue doors: pods queued for Kueue's quota (no Kueue installed) admitted before placement,
and Workload objects given the status Kueue's scheduler writes (live/workloadstatus.py).

A pod of ours that belongs to a queued workload (the ``kueue.x-k8s.io/queue-name`` label, a Kueue pod group, or a
Job carrying the label: live/kueue.is_queued) is tried only from a session rebuilt with it in: admission
(accelsched/queues, run by ``Session.start`` over every pod of the cache) decides over the whole cluster at once,
so a queued pod that arrived since, or one whose quota may have been freed, waits for the next rebuild. Then:

- a pod of an admitted workload goes to the engine with its flavor's node labels and tolerations, as offline;
  admitted means placeable (queues/room.py): one the engine cannot place gives its workload's quota back (the
  session is rebuilt without it in its queue, so the next workload may take the quota) and is held as below with
  ``waiting for room: ...`` and the engine's reason, until a cluster event puts it back in its queue. Workload
  objects (the first door) are never held so: they are admitted as Kueue admits them;
- a pod of a workload not admitted is not tried: it gets ``PodScheduled=False`` with reason ``SchedulingGated``
  (never ``Unschedulable``: the cluster autoscaler adds nodes for pods whose PodScheduled reason is
  Unschedulable, and a quota wait is no reason to) and the message ``waiting for quota in ClusterQueue team-a:
  <Kueue's QuotaReserved message>``, and waits in the unschedulable pool: any cluster event (a pod deleted or
  finished frees quota; a queue edited) wakes it, and its next try comes from a rebuilt session;
- a running workload admission preempts (or a HoldAndDrain queue drains) is stopped as Kueue's pod integration
  stops it: ``TerminationTarget=True`` (reason ``WorkloadEvictedDueTo<reason>``, the Evicted message), then a
  delete with the pod's uid as precondition. Until the pods are gone their room is still taken: the session
  accounts them, and the pods of the workloads admitted in that session wait (``Pending the preemption of N
  workload(s)``).

Admission fair sharing's usage (queues/admissionfairsharing.py) is kept for the life of the process, as Kueue's
queue manager keeps its ledger: each rebuilt session's admission goes on from the last one's, and each round the
clock moves to now (``afs_clock``, wall time), so each LocalQueue's consumed resources decay toward what it has
admitted every ``usageSamplingInterval``; the LocalQueues holding a workload of ours get the sample in their status,
as Kueue's LocalQueue controller writes it (live/localqueuestatus.py). The cohort history of accelsched's fairness
over time (queues/cohortusage.py) is kept the same way, on the same clock: a rebuild does not forget which
ClusterQueue used the cohort, and the history decays on wall time between rounds.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from accelsched.api import objects
from accelsched.api.loader import Inputs
from accelsched.api.objects import SCHEDULING_GATED_REASON
from accelsched.framework.scheduler import ScheduleResult
from accelsched.live import clusterqueuestatus, localqueuestatus, workloaddeltas, workloadstatus
from accelsched.live import convert as live_convert
from accelsched.live import kube as k
from accelsched.live import kueue as live_kueue
from accelsched.live.events import MERGE_PATCH
from accelsched.live.informer import object_key
from accelsched.live.kube import JSON, ApiError
from accelsched.live.podjson import labels, write_key
from accelsched.live.workloadevents import EventSink
from accelsched.queues import admissionfairsharing, cohortusage
from accelsched.queues import api as queue_api
from accelsched.queues.admission import Outcome
from accelsched.queues.incremental import OpenAdmission
from accelsched.queues.room import RoomWaits, room_message

log = logging.getLogger("accelsched.live")

JOB_GRACE_SECONDS = 10.0  # how long a pod waits for its Job to show in the cache before it is taken as unqueued
# How long a Workload status write counts as in flight at most (its event normally ends it sooner): a write the API
# server takes as no change brings no event, and must not hold that workload's next decision back for good.
IN_FLIGHT_SECONDS = 10.0
BIND, REPORT, STATUS = "bind", "report", "status"  # the write lanes of _submit_latest
# How long a Workload's Pending condition waits before it is written (_submit_latest): most are made moot by the
# Workload's admission within that time, and each one written is an API server write its admission then follows.
PENDING_CONDITION_DELAY = 2.0
# Then, for up to this long, it goes out only on a spare token of the Workload client's throttle (Kube.request's
# spare): admissions and evictions first. Under Kueue's own client throttle (QPS 50 per kind) the Workload bucket
# binds, and each Pending condition written is an admission's token; one still waiting when its Workload is admitted
# is dropped. Kept under IN_FLIGHT_SECONDS, with the delay, so a round does not decide it again meanwhile.
PENDING_SPARE_SECONDS = 6.0
# Kueue's ClusterQueue and LocalQueue controllers reconcile a queue UpdatesBatchPeriod after a Workload event
# (pkg/constants: one second; AddAfter, so the events of that second make one status update). A queue's usage
# written once a round instead was a third of the door's API writes at large-scale (6,400 ClusterQueue patches in
# 190 s), each one API server CPU that the runner's Workload finishes waited on.
UPDATES_BATCH_PERIOD = 1.0
# How often a Pending condition held back by the admission lane's backlog (_write_pending) looks for a spare token.
BACKLOG_RECHECK_SECONDS = 0.5
# An eviction's place on the admission lane: before every admission (PriorityGate), since the admissions of its cohort
# tree wait for the preempted to let go. Above any WorkloadPriorityClass value (an int32).
EVICTION_PRIORITY = 2**31


class QueueDoor:
    """LiveScheduler's admission of queued pods (see the module docstring)."""

    queue_held: dict[str, str]  # pending pods of workloads not admitted in the current session -> their message
    queue_admitted: dict[str, Outcome]  # pending pods of workloads this door admitted in the current session
    room_waits: RoomWaits[str]  # workloads this door admitted and the engine could not place: waiting for room
    # Workload status writes in flight: namespace/name -> (the resourceVersion decided from, what it writes, when)
    _status_in_flight: dict[str, tuple[str, tuple, float]]
    _stale_workloads: set[str]  # decided from a version that has moved on: their next event rebuilds the session
    own_writes_seen: int  # Workload events that were our own status write coming back (no rebuild for them)
    _assumed_admissions: dict[str, tuple[str, JSON]]  # admission writes in flight: the version, the status written
    _job_unknown: dict[str, float]  # pod uid -> when it was first found owned by a Job not in the cache
    _latest: dict[str, tuple[Any, ...]]  # status write key -> the newest write not started yet (_submit_latest)
    _latest_lock: Any  # guards _latest alone (not the cache's lock: a write must not wait for a rebuild)
    _cq_written: dict[str, JSON]  # ClusterQueue -> the status last sent (live/clusterqueuestatus.py's ``written``)
    _cq_counts: clusterqueuestatus.Counts  # the session's ClusterQueue counts, kept round to round
    _cq_witnesses: dict[str, str]  # ClusterQueue -> a Workload of ours in it (clusterqueuestatus._queues_of_ours)
    # The last rebuild's admission, kept open for Workloads arriving and finishing (live/workloaddeltas.py), and the
    # Workload events waiting for the next round to be taken into it.
    _open: OpenAdmission | None
    _workload_changes: dict[str, JSON | None]
    _additions: dict[tuple[str, str], JSON]  # Namespaces and LocalQueues added, taken in place (_take_additions)
    workload_rounds: int  # rounds that followed Workload events in place (no rebuild)
    workload_outcomes_read: int  # outcomes the rounds worked the status writes out from, all rounds together
    stale_writes_skipped: int  # Workload status writes not sent: the cache showed the Workload moved on (a 409)
    # Workloads whose writes a round followed in place reads again though nothing changed them: preempted ones still
    # holding their reservation, and the admissions held back until they let go (workloadstatus.held_back)
    _carried: set[str]
    # Admission fair sharing's ledger, kept across sessions (queues.admissionfairsharing.carried), the cohort history
    # likewise (queues.cohortusage.carried), and their clock: seconds since the epoch (time.time; tests put a fake
    # one in its place)
    _afs_ledger: admissionfairsharing.Ledger | None
    _cohort_history: cohortusage.History | None
    afs_clock: Callable[[], float]
    workload_events: EventSink  # Kueue's events on the Workloads written (live.workloadevents)

    def _admit_queues(
        self, session: Any, outcomes: list[Outcome] | None = None, cluster_queues: Collection[str] | None = None
    ) -> None:
        """After a rebuild: the pods admission holds back, and the running ones it stopped sent to be stopped
        (and accounted until they are gone). ``outcomes``: after a round followed in place, the only workloads
        whose status writes can have changed (workloaddeltas.round_outcomes); else every one is read.
        ``cluster_queues``: likewise, the ClusterQueues whose status it can have changed (Counts.update)."""
        self.queue_held, self.queue_admitted = {}, {}
        if outcomes is None:
            with self.lock:
                self._open = workloaddeltas.open_admission(session.queues)
        if session.queues is None:
            return
        if outcomes is None:  # counted once here; a round followed in place recounts what it changed
            self._cq_counts = clusterqueuestatus.Counts(session.queues.outcomes)
        view = session.queues if outcomes is None else dataclasses.replace(session.queues, outcomes=outcomes)
        self.workload_outcomes_read += len(view.outcomes)
        # The pods' part (stops, held and admitted pods) reads every outcome; a round followed in place has none to
        # find: its outcomes have no pods (workloaddeltas.open_admission follows sessions of Workload objects alone)
        pods = outcomes is None
        with self.lock:
            stops = live_kueue.stops(session.queues, self._bound_node) if pods else []
        for stop in stops:
            stop.pod.node_name = stop.node  # admission took it off; it runs until the delete is through
            session.scheduler.admit_bound(stop.pod)
            self.writes.submit(write_key(stop.pod.raw), self._stop_pod, stop)
        with self.lock:  # the first door: Workload objects' status, as Kueue's scheduler writes it
            store = self.kueue["Workload"].store
            evictions, holding = workloadstatus.preemptions(view, store, self.scheduler_names)
            letting_go = {s.workload for s in stops} | holding
            preempting = len(letting_go)
            # Workload objects wait for the preempted to let go in their cohort tree only (Workload objects are
            # admitted by quota alone: another tree's room is not theirs); pods wait for any (held_pods below).
            blocked = workloadstatus.trees_of(view, letting_go)
            # what fits beside them is admitted still, as Kueue's cache admits beside a preempted workload
            allowed = (
                workloadstatus.fitting_beside(view, store, holding, self._assumed_admissions)
                if holding and not stops
                else set()
            )
            writes = evictions + workloadstatus.status_writes(
                view, store, self.scheduler_names, blocked=blocked, allowed=allowed
            )
            self._forget_unsent_admissions(workloadstatus.unshown_preemptions(view, store))
            # the order the admission lane takes them in when they wait for it: evictions first (an admission in
            # their tree waits for them to let go), then by the Workload's priority
            evicting = {(w.namespace, w.name) for w in evictions}
            priorities = {(o.info.namespace, o.info.name): o.info.priority for o in view.outcomes} if writes else {}
            # read again next round, changed or not: the preempted still holding, the admissions waiting for them
            self._carried = holding | workloadstatus.held_back(view, blocked, allowed)
            cq_patches = clusterqueuestatus.status_patches(
                session.queues,
                self.kueue["ClusterQueue"].store,
                store,
                self.scheduler_names,
                written=self._cq_written,
                counts=self._cq_counts,
                witnesses=self._cq_witnesses,
                only=cluster_queues if outcomes is not None else None,
            )
            self._cq_written.update((name, patch["status"]) for name, patch in cq_patches.items())
        self.queue_held = live_kueue.held_pods(session.queues, preempting) if pods else {}
        if not preempting and pods:  # the second door's admitted workloads: placed whole, or they wait for room
            workloads = session.queues.objects.workloads
            self.queue_admitted = {
                p.key: o
                for o in session.queues.outcomes
                if o.admitted and o.info.admitted is None and o.info.key not in workloads
                for p in o.info.pods
                if not p.node_name
            }
        for write in self._status_writes_due(writes):
            key = f"{write.namespace}/{write.name}"
            if workloadstatus.urgent(write):
                self._drop_unsent(f"pending:{key}")  # a Pending condition still waiting for its turn says less
                names = (write.namespace, write.name)
                priority = EVICTION_PRIORITY if names in evicting else priorities.get(names, 0)
                self._submit_latest(f"workload:{key}", self._write_workload_status, write, priority=priority)
            else:
                spare_until = time.monotonic() + self.pending_condition_delay + PENDING_SPARE_SECONDS
                self._submit_latest(f"pending:{key}", self._write_pending, write, spare_until, lane=REPORT)
        cluster_queues = self.kueue["ClusterQueue"].store
        for name, patch in cq_patches.items():  # the ClusterQueue controller's part (live/clusterqueuestatus.py)
            # its usage and counts batched as Kueue batches a Workload's; a condition changed (a new or edited
            # ClusterQueue, which Kueue reconciles on its own event) goes at once
            batched = clusterqueuestatus.same_conditions(cluster_queues.get(name), patch)
            write = (self._write_queue_status, "ClusterQueue", name, patch)
            self._submit_latest(f"clusterqueue:{name}", *write, lane=STATUS, batched=batched)

    def _follow_workloads(self) -> bool:
        """The round's Workload events taken into the open admission in place, and its decisions written as a
        rebuild's are (live/workloaddeltas.py). False when they cannot be: the session is to be rebuilt."""
        with self.lock:
            changes, self._workload_changes = self._workload_changes, {}
            admission = self._open
        if not changes:
            return True
        if (
            admission is None
            or self.session is None
            or not workloaddeltas.apply(admission, changes, self.scheduler_names)
        ):
            with self.lock:
                self._open = None
                self._invalidate("workloads not followed in place")
            return False
        self.workload_rounds += 1
        with self.lock:  # a decision kept back by a write in flight is read again until its event comes
            carried = self._carried | self._stale_workloads
        outcomes = workloaddeltas.round_outcomes(admission, changes, carried)
        touched = self._cq_counts.update(outcomes, changes, admission.by_key)  # what else the round did not change
        self._admit_queues(self.session, outcomes, touched)
        return True

    def _submit_latest(
        self, key: str, fn: Any, *args: Any, lane: str = BIND, batched: bool = False, priority: int = 0
    ) -> None:
        """A status write that supersedes the one of an earlier round still waiting for its turn under ``key``:
        rounds come faster than the writes, and each decides from a cache that does not show the previous round's
        writes yet, so without this the same objects' writes queued up, each behind the ones before, most of them
        refused as stale (409) by the time they ran (Kueue's performance runner: 1,200 refused to 46 done).
        ``lane``: admissions and evictions go on a lane of their own (BIND, ``workload_writes``: those waiting for
        it go highest ``priority`` first, live.writer.PriorityGate); the Pending conditions on the report pool
        (REPORT, live/writer.py): at 5% of Kueue's harness they were more than half of the door's writes, and on the
        bind pool the admissions and evictions waited behind them (up to 9 s, no admission going out for 25 s while
        the first rounds' Pending conditions were written); the ClusterQueue and LocalQueue status on threads of
        their own (STATUS): behind the Pending conditions they lagged seconds, and Kueue's performance runner reads
        the queues' usage and the end of its run from them. A ``batched`` queue status waits
        ``queue_status_batch_period`` seconds first (UPDATES_BATCH_PERIOD, as Kueue's controllers), later rounds'
        replacing it meanwhile. A Pending condition and an admission of one Workload
        never run at once: a write from the version an earlier one was decided from is not sent
        (_status_writes_due).

        A Pending condition first waits ``pending_condition_delay`` seconds (PENDING_CONDITION_DELAY), then takes
        its turn on the report pool: a deliberate difference from Kueue, which writes it as soon as the workload is
        tried and does not fit. In a queue that drains, the head of a class is tried and refused, then admitted
        when the next workload finishes, usually within the second: at 20% of Kueue's performance harness 69% of
        the Pending conditions were followed by their Workload's admission within 1 s (86% within 2 s), 2,100
        writes in a run, each one more write for the API server, which the job controller's finishes wait on. An
        admission (or another Pending message) decided meanwhile replaces the waiting one, which keeps its time;
        what a workload still waiting shows is unchanged, only later."""
        with self._latest_lock:
            waiting = key in self._latest
            self._latest[key] = (fn, *args)
        if waiting:
            return
        if lane == REPORT and self.pending_condition_delay > 0:
            self.deferred_reports.call_later(
                self.pending_condition_delay, self.writes.report, key, self._write_latest, key
            )
        elif lane == REPORT:
            self.writes.report(key, self._write_latest, key)
        elif lane == STATUS and batched and self.queue_status_batch_period > 0:
            self.deferred_status.call_later(
                self.queue_status_batch_period, self.queue_status_writes.submit, key, self._write_latest, key
            )
        elif lane == STATUS:
            self.queue_status_writes.submit(key, self._write_latest, key)
        else:
            self.workload_writes.submit(key, self._write_latest, key, priority=priority)

    def _write_latest(self, key: str) -> None:
        with self._latest_lock:
            latest = self._latest.pop(key, None)
        if latest is not None:  # else dropped for a write that says more (_admit_queues)
            fn, *args = latest
            fn(*args)

    def _with_door_state(self, inputs: Inputs) -> None:
        """Before a rebuild's admission: the workloads waiting for room stay out of their queues, and admission fair
        sharing's ledger and the cohort history go on from the last session's."""
        if inputs.queues:
            with self.lock:
                inputs.queues.room_waits = self.room_waits.messages()
            now = self.afs_clock()
            ledger = admissionfairsharing.carried(inputs.queues, self._afs_ledger, now)
            self._afs_ledger = inputs.queues.afs_ledger = ledger
            history = cohortusage.carried(inputs.queues, self._cohort_history, now)
            self._cohort_history = inputs.queues.cohort_history = history

    def _sample_usage(self) -> None:
        """At the start of a round, before the session is synced: admission fair sharing's clock moves to now, and
        the LocalQueue controller's samples due since the last round decay each LocalQueue's consumed resources
        toward what it has admitted (as the last round left the session: Kueue's controller reads its cache); the
        cohort history's clock too, each ClusterQueue's decayed usage moving toward what it used since."""
        queues = self.session.queues if self.session is not None else None
        admission = queues.admission if queues is not None else None
        if not isinstance(admission, OpenAdmission):
            return
        if admission.afs is not None and admission.afs is self._afs_ledger:
            admission.advance(self.afs_clock())  # the cohort history's with it
        elif admission.cohort_history is not None and admission.cohort_history is self._cohort_history:
            admission.cohort_history.advance(self.afs_clock())

    def _write_usage(self) -> None:
        """At the end of a round: the LocalQueues sampled since the last one (first seen, or due) get the sample in
        their status, those holding a workload of ours (live/localqueuestatus.py)."""
        ledger = self._afs_ledger
        if ledger is None or not ledger.sampled or self.session is None or self.session.queues is None:
            return
        samples = ledger.take_sampled()
        with self.lock:
            workloads = self.kueue["Workload"].store
            mine = localqueuestatus.local_queues_of_ours(self.session.queues, workloads, self.scheduler_names)
            patches = localqueuestatus.status_patches(samples, self.kueue["LocalQueue"].store, mine)
        for key, patch in patches.items():
            self._submit_latest(
                f"localqueue:{key}", self._write_queue_status, "LocalQueue", key, patch, lane=STATUS, batched=True
            )

    def _wait_for_room(self, result: ScheduleResult) -> bool:
        """A pod the engine could not place, of a workload this door admitted in this session: admitted means
        placeable (queues/room.py), so its workload gives its quota back (the rebuild this asks for admits without
        it, and the next workload in line may take the quota) and waits for room, its pods held SchedulingGated
        with the engine's reason, never Unschedulable. True when so (the pod's condition is written here)."""
        outcome = self.queue_admitted.get(result.pod.key)
        if outcome is None:
            return False
        message = room_message(outcome.cluster_queue, result.message)
        with self.lock:
            self.room_waits.park(outcome.info.key, outcome.info.key, message)
            self.queue_held.update({p.key: message for p in outcome.info.pods if not p.node_name})
            obj = self.pods.store.get(result.pod.key)
            if obj is not None and (obj.get("metadata") or {}).get("uid") == result.pod.uid:
                self.unschedulable[result.pod.key] = obj  # woken by a cluster event, as a quota wait is
                self.rejected_by.pop(result.pod.key, None)
            self._invalidate("workload not placeable: quota given back")
            self.wake.set()
        if obj is not None:
            self.writes.submit(write_key(obj), self.recorder.unschedulable, obj, message, SCHEDULING_GATED_REASON)
        log.info("workload waits for room", extra={"workload": outcome.info.key, "reason": result.message})
        return True

    def _room_freed(self) -> None:
        """A cluster event (a pod gone, a node joined or changed: called under the lock as the unschedulable pods
        are woken): the workloads waiting for room go back to their queues, admitted again by the next rebuild."""
        if self.room_waits.freed():
            self._invalidate("room freed for workloads waiting for it")

    def _status_writes_due(self, writes: list[workloadstatus.StatusWrite]) -> list[workloadstatus.StatusWrite]:
        """The writes to send, less those a write in flight makes moot. A round decides from the cache, which shows
        a write of ours only once its event is back: a round in between decides the same workloads again, from the
        same resourceVersion. Sending the same write twice would be answered 409 (the first moved the version on),
        so it is not sent; a different one from that version would be answered 409 too, so it is not sent either,
        and the workload is marked stale: its next event rebuilds the session, even a Pending message's that
        _on_workload leaves out otherwise (else the decision waits for an unrelated event: the deep queue's
        stalls, benchmarks/deepqueue.py).

        The exception: a Pending condition decided from that version and still waiting for its turn on the report
        pool (not sent: the API server has not moved the version on) is dropped, and the new write goes out in its
        place. Pending conditions queue behind the round's other reports (a backlog of seconds in Kueue's
        performance harness), and an admission decided meanwhile waited for the superseded message to be written
        and come back before it was sent at all."""
        out = []
        now = time.monotonic()
        with self.lock:
            for write in writes:
                key = f"{write.namespace}/{write.name}"
                version, what = workloadstatus.written(write)
                flight = self._status_in_flight.get(key)
                if flight is not None and flight[0] == version and now - flight[2] < IN_FLIGHT_SECONDS:
                    if flight[1] == what:
                        continue
                    if not self._drop_unsent(f"pending:{key}"):
                        self._stale_workloads.add(key)
                        continue
                self._status_in_flight[key] = (version, what, now)
                if what[1]:  # it admits: assumed admitted until the cache shows it (_assumed_workloads)
                    self._assumed_admissions[key] = (version, write.patch["status"])
                else:
                    self._assumed_admissions.pop(key, None)
                out.append(write)
        return out

    def _forget_unsent_admissions(self, keys: list[str]) -> None:
        """The admissions of ``keys`` (preempted before they were written: workloadstatus.unshown_preemptions) that
        still wait for their turn are dropped, and no longer count as in flight or assumed. One already on its way
        lands, and its echo shows a reservation: that eviction is then written as any other (preemptions). Called
        under the lock."""
        for key in keys:
            with self._latest_lock:
                latest = self._latest.get(f"workload:{key}")
                unsent = latest is not None and "admission" in (latest[1].patch.get("status") or {})
                if unsent:
                    del self._latest[f"workload:{key}"]
            flight = self._status_in_flight.get(key)
            if unsent and flight is not None and flight[1][1]:  # the in-flight write is that admission
                del self._status_in_flight[key]
                self._assumed_admissions.pop(key, None)

    def _drop_unsent(self, key: str) -> bool:
        """Drop the write waiting under ``key`` (_submit_latest) if it has not started; True when there was one."""
        with self._latest_lock:
            return self._latest.pop(key, None) is not None

    def _assumed_workloads(self) -> list[JSON]:
        """The cache's Workloads for a round, less the finished ones (Kueue's workload controller takes them out of
        its cache and queues: they hold and wait for nothing, and a long run's history of them made every round
        read them all), those whose admission write is in flight taken as admitted (Kueue's
        scheduler assumes a workload in its cache when it admits it, before the API server has the write). Without
        this a round between the write and its event counted that quota free: a workload of higher priority
        arriving then was admitted in its place, and the first write still landed, both holding the quota. Each
        assumed copy gets its own resourceVersion mark (``+assumed``), so the parsed-Workload cache
        (live/workloadcache.py) does not take it for the pending one. Called under the cache's lock."""
        store = self.kueue["Workload"].store
        self._workload_changes.clear()  # the snapshot has them
        if not self._assumed_admissions:
            return [obj for obj in store.values() if not workloadstatus.finished(obj)]
        now = time.monotonic()
        out = []
        for key, obj in store.items():
            if workloadstatus.finished(obj):
                self._assumed_admissions.pop(key, None)
                continue
            assumed = self._assumed_admissions.get(key)
            flight = self._status_in_flight.get(key)
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if assumed is None or flight is None or flight[0] != assumed[0] or now - flight[2] >= IN_FLIGHT_SECONDS:
                if assumed is not None:
                    del self._assumed_admissions[key]  # written and seen, refused, or given up on
                out.append(obj)
            elif version != assumed[0]:
                del self._assumed_admissions[key]  # the cache has moved on: it shows what happened
                out.append(obj)
            else:
                meta = {**(obj.get("metadata") or {}), "resourceVersion": f"{version}+assumed"}
                out.append({**obj, "metadata": meta, "status": {**(obj.get("status") or {}), **assumed[1]}})
        for key in set(self._assumed_admissions) - set(store):
            del self._assumed_admissions[key]
        return out

    def _bound_node(self, key: str) -> str:
        obj = self.pods.store.get(key) or {}
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        decision = self.assumed.get(key)
        return node or (decision.node if decision is not None else "")

    def _held_by_queue(self, key: str, obj: JSON, rebuilt: bool) -> bool:
        """For a due pod: True when the queues keep it from the engine this round (held, with its condition
        written, or sent to the next rebuild to be admitted)."""
        if self.session is None or self.session.queues is None:
            return False
        queued = live_kueue.is_queued(obj, self.kueue[live_kueue.JOB].store)
        if queued is None and self._job_not_seen_yet(obj):
            return True
        self._job_unknown.pop(str((obj.get("metadata") or {}).get("uid")), None)
        if not queued:
            return False
        if not rebuilt or key not in self.pending_by_key:
            with self.lock:  # admission decides over the whole cluster: from a session rebuilt with this pod in
                self._invalidate("queued pod to admit")
                self.new_pending[key] = obj
                self.wake.set()
            return True
        message = self.queue_held.get(key)
        if message is None:
            return False
        self.writes.submit(write_key(obj), self.recorder.unschedulable, obj, message, SCHEDULING_GATED_REASON)
        with self.lock:
            self.unschedulable[key] = obj
        return True

    def _job_not_seen_yet(self, obj: JSON) -> bool:
        """A pod owned by a Job the cache does not have: the Job's event may trail its pod's (two informers), and
        whether the pod is queued is the Job's label. It backs off (retried after kube-scheduler's backoff) for
        JOB_GRACE_SECONDS; after that it is taken as not queued (its Job is gone: an orphan)."""
        uid = str((obj.get("metadata") or {}).get("uid"))
        now = time.monotonic()
        with self.lock:
            since = self._job_unknown.setdefault(uid, now)
            if now - since >= JOB_GRACE_SECONDS:
                del self._job_unknown[uid]
                return False
            self.backoff.failed(uid, now)
            key = f"{(obj.get('metadata') or {}).get('namespace')}/{(obj.get('metadata') or {}).get('name')}"
            self.backing_off[key] = obj
            self.wake.set()
        return True

    def _on_job(self, kind: str, obj: JSON, old: JSON | None) -> None:
        """A Job changed: only a queued one (the label now or before) added, removed or relabelled changes what the
        queues admit; its pods waiting for it to be seen are woken (its status updates change nothing)."""
        if not queue_api.queue_name(obj) and not (old is not None and queue_api.queue_name(old)):
            return
        if kind == "MODIFIED" and old is not None and labels(old) == labels(obj):
            return
        self._on_other(kind, obj, old)

    def _on_workload(self, kind: str, obj: JSON, old: JSON | None) -> None:
        """A Workload changed: the session is rebuilt and the loop woken at once (a Workload is no pod: no pool
        wakes for it), but not for a pending one whose QuotaReserved=False message alone changed (what this door
        writes on every workload still waiting, each round: admission decides the same from it)."""
        key = object_key(obj)
        stale = key in self._stale_workloads
        self._stale_workloads.discard(key)
        flight = self._status_in_flight.get(key)
        if flight is not None and flight[0] != (obj.get("metadata") or {}).get("resourceVersion"):
            del self._status_in_flight[key]  # the cache has moved past the version it was decided from
        echo = False
        if kind == "MODIFIED" and old is not None:
            if not stale and workloadstatus.pending_message_only(old, obj):
                return
            echo = flight is not None and workloadstatus.own_write_seen(old, obj, flight[0], flight[1])
            if echo and not stale:
                # the echo of our own admission or eviction: the session decided with it already (a rebuild for
                # each was a third of the rounds of Kueue's performance harness: benchmarks/kueueperf.py)
                self.own_writes_seen += 1
                return
        why = "no open admission" if self._open is None else ""
        if not self.dirty and self._open is not None and not echo:
            why = workloaddeltas.unfollowed(kind, obj, old, self._open, self.scheduler_names)
        if not self.dirty and not why:
            # taken in by the next round; a stale decision's echo changes nothing there, but that round writes what
            # the open admission decides now, which the write in flight kept back
            self._workload_changes[key] = None if kind == "DELETED" else obj
            self.wake.set()
            return
        self._on_other(kind, obj, old, why)
        if stale:
            self._invalidate("workload decided from a stale version")
        self.wake.set()

    def _on_namespace(self, kind: str, obj: JSON, old: JSON | None) -> None:
        """A Namespace changed: the session is rebuilt, but for one added while the Workload door follows its
        admission in place and the cache holds no pod (Workload objects alone, as under Kueue's performance runner,
        which makes a namespace per ClusterQueue: at 1,000 ClusterQueues those rebuilds took seconds of its setup).
        A new namespace holds nothing yet; only what arrives in it later reads its labels (a ClusterQueue's
        namespaceSelector, a pod's affinity), so it is taken in by the next round (_take_additions)."""
        if kind == "ADDED" and not self.dirty and self._open is not None and not self.pods.store:
            self._additions[("Namespace", object_key(obj))] = obj
            return
        self._on_other(kind, obj, old)

    def _on_cluster_queue(self, kind: str, obj: JSON, old: JSON | None) -> None:
        """A ClusterQueue or LocalQueue changed: the session is rebuilt, but not for a change of its status alone
        (the door's own writes: admission does not read a ClusterQueue's, and reads a LocalQueue's admission fair
        sharing status only to seed the ledger it keeps for the process), nor for a LocalQueue added while the
        Workload door follows its admission in place without admission fair sharing: the next round takes it in
        (_take_additions; Kueue's runner makes one per ClusterQueue)."""
        if kind == "MODIFIED" and old is not None and clusterqueuestatus.status_only(old, obj):
            return
        # (with admission fair sharing a LocalQueue's status seeds the ledger a rebuild carries: rebuilt)
        admission = self._open
        in_place = kind == "ADDED" and not self.dirty and admission is not None and admission.afs is None
        if in_place and obj.get("kind") == "LocalQueue":
            self._additions[("LocalQueue", object_key(obj))] = obj
            return
        self._on_other(kind, obj, old)

    def _take_additions(self) -> bool:
        """The Namespaces and LocalQueues added since the last round, into the session's cluster and the open
        admission, as a rebuild reads them. False when one does not read, or a LocalQueue has workloads waiting
        for it already (they are tried from a rebuild): the session is rebuilt."""
        with self.lock:
            added, self._additions = self._additions, {}
            admission = self._open
        if not added:
            return True
        if admission is None or self.session is None:
            return False
        for (kind, _), doc in added.items():
            try:
                if kind == "Namespace":
                    self._add_namespace(admission, objects.parse_namespace(doc, live_convert.SOURCE))
                elif not self._add_local_queue(admission, queue_api.parse_local_queue(doc, live_convert.SOURCE)):
                    return False
            except live_convert.UNUSABLE:
                return False
        return True

    def _add_namespace(self, admission: OpenAdmission, namespace: objects.Namespace) -> None:
        label_map = namespace.label_map()
        self.session.cluster.namespaces[namespace.name] = label_map
        self.session.inputs.namespaces.append(namespace)
        admission.namespace_labels[namespace.name] = dict(label_map)

    def _add_local_queue(self, admission: OpenAdmission, local: queue_api.LocalQueue) -> bool:
        """A LocalQueue no workload names yet (one refused for its absence would have to be tried again)."""
        if local.key in admission.objects.local_queues:
            return False
        for o in admission.outcomes:
            if not o.cluster_queue and o.info.namespace == local.namespace and o.info.queue_name == local.name:
                return False
        admission.objects.local_queues[local.key] = local
        return True

    def _write_queue_status(self, kind: str, key: str, patch: JSON) -> None:
        """A ClusterQueue's or LocalQueue's (``key``: name, or namespace/name) status, merge patched."""
        namespace, _, name = key.rpartition("/")
        try:
            path = live_kueue.RESOURCES[kind].path(namespace or None, name, "status")
            self.kube.request("PATCH", path, body=patch, content_type=MERGE_PATCH, parse=_ignore)
        except ApiError as exc:
            if exc.status != 404:
                log.warning("cannot write queue status", extra={"kind": kind, "object": key, "error": exc.message})

    def _write_pending(self, write: workloadstatus.StatusWrite, spare_until: float) -> None:
        """A Pending condition, on a spare token of the Workload client's throttle until ``spare_until``
        (PENDING_SPARE_SECONDS), and after that for as long as admissions or evictions wait for the admission lane:
        none free, it waits its turn again (``_again``), unless the round that decided it has been superseded
        meanwhile. Under Kueue's own client throttle (50 a second) at large-scale, the door decides thousands of
        admissions ahead of the bucket, and each Pending condition sent once its window was over took an
        admission's token."""
        backlog = self.workload_writes.waiting > 0
        try:
            self._write_workload_status(write, spare=backlog or time.monotonic() < spare_until)
        except k.Busy as busy:
            delay = max(busy.seconds, BACKLOG_RECHECK_SECONDS) if backlog else busy.seconds
            self._again(f"pending:{write.namespace}/{write.name}", delay, write, spare_until)

    def _again(self, key: str, delay: float, write: workloadstatus.StatusWrite, spare_until: float) -> None:
        """The Pending condition back on the report pool after ``delay``, if it is still the write in flight for its
        Workload and no newer one waits under ``key``."""
        workload = f"{write.namespace}/{write.name}"
        with self.lock:
            flight = self._status_in_flight.get(workload)
            if flight is None or flight[:2] != workloadstatus.written(write):
                return
        with self._latest_lock:
            if key in self._latest:
                return
            self._latest[key] = (self._write_pending, write, spare_until)
        self.deferred_reports.call_later(delay, self.writes.report, key, self._write_latest, key)

    def _write_workload_status(self, write: workloadstatus.StatusWrite, spare: bool = False) -> None:
        """The write, as a merge patch carrying the resourceVersion it was decided from. One the cache already shows
        moved on (a finish, an eviction's reset, an earlier write of ours) is not sent: the API server would refuse
        it with 409 (its version is the cache's or newer), so it is taken as refused, with no request and no token
        of the client's throttle spent on it."""
        resource = live_kueue.RESOURCES["Workload"]
        key = f"{write.namespace}/{write.name}"
        version = workloadstatus.written(write)[0]
        cached = self.kueue["Workload"].store.get(key)
        if cached is not None and (cached.get("metadata") or {}).get("resourceVersion") != version:
            self.stale_writes_skipped += 1
            self._conflicted(key, version)
            return
        try:
            path = resource.path(write.namespace, write.name, "status")
            self.kube.request("PATCH", path, body=write.patch, content_type=MERGE_PATCH, parse=_ignore, spare=spare)
        except ApiError as exc:
            if exc.status not in (404, 409):
                log.warning("cannot write workload status", extra={"workload": key, "error": exc.message})
            self._conflicted(key, version)
            return
        self.workload_events.record(write.events)  # Kueue records them once its patch is through
        # Written: it stays in flight until the cache shows the new version (_on_workload), so that a round before
        # then does not send it again.

    def _conflicted(self, key: str, version: str) -> None:
        """A status write not made (409: the Workload changed since the round that decided it; or another error):
        it is written again once the cache has the change, now if its event is in already, else on that event
        (even one _on_workload would leave out). Where the Workload door follows its admission in place, the event
        was taken in already (or needed nothing), so that Workload's write alone is worked out again from the cache
        by the next round; else the session is rebuilt. (Kueue's scheduler, answered a conflict, requeues that one
        workload; a rebuild per 409 was most of the rebuilds left at 5% of Kueue's performance harness.)"""
        with self.lock:
            if self._status_in_flight.get(key, (None,))[0] == version:
                del self._status_in_flight[key]
                if self._assumed_admissions.get(key, (None,))[0] == version:
                    del self._assumed_admissions[key]  # not written: not held
            doc = self.kueue["Workload"].store.get(key)
            if ((doc or {}).get("metadata") or {}).get("resourceVersion") == version:
                self._stale_workloads.add(key)
                return
            if doc is not None and workloadstatus.finished(doc):
                return  # it finished meanwhile (the 409 often was its job controller's finish): nothing to decide
            if not self.dirty and self._open is not None and key in self._open.by_key:
                self._workload_changes[key] = doc
                self.wake.set()
                return
            why = (
                "not in the cache"
                if doc is None
                else "no open admission"
                if self._open is None
                else "not held by the open admission"
            )
            self._invalidate(f"workload status conflict: {why}")
            self.wake.set()

    def _stop_pod(self, stop: live_kueue.Stop) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        pod = stop.pod
        try:
            self.kube.patch(k.PODS, pod.name, live_kueue.termination_target(stop, now), pod.namespace, "status")
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.uid}}
            self.kube.request("DELETE", k.PODS.path(pod.namespace, pod.name), body=body)
        except ApiError as exc:
            if exc.status not in (404, 409):
                log.warning("cannot stop a preempted workload's pod", extra={"pod": pod.key, "error": exc.message})
            return
        log.info("workload stopped by admission", extra={"pod": pod.key, "workload": stop.workload})


def _ignore(_body: str) -> None:
    """A status write's answer (the whole object, which the watch brings too) is not decoded: the door reads the
    cache, and decoding each answer took the GIL from the loop."""
