"""The Events Kueue writes on Workload objects, written by the queue door for the Workloads it admits.

``kubectl describe workload`` shows them, and tools that follow Kueue read them. Kueue v0.19.2 records them on
events.k8s.io/v1 (controller-runtime's GetEventRecorder), each once the status write it goes with has gone through:

- admission (pkg/scheduler/scheduler.go, reporting controller ``kueue-admission``): ``QuotaReserved`` (Normal,
  ``Quota reserved in ClusterQueue cq, wait time since queued was 3s``, and ``; Flavors considered: ...`` when the
  scan tried a flavor that did not fit, or fit by borrowing: queues.flavorassigner.Assignment.considered), then
  ``Admitted`` (Normal, ``Admitted by ClusterQueue cq, wait time since reservation was 0s``); a workload that does
  not fit: a Warning with its QuotaReserved condition's reason (``Pending``) and message (requeueAndUpdate);
- preemption (pkg/scheduler/preemption/preemption.go and pkg/workload/evict): on the victim
  ``EvictedDueToPreempted`` with the eviction message, then ``Preempted`` with the message and both workloads'
  priorities; on the preemptor ``PreemptedWorkload``;
- a stopped queue draining its workloads (``kueue-workload-controller``): ``EvictedDueTo<reason>``.

Kueue's recorder hands its events to one goroutine that writes them one after another and drops what comes while
1,000 wait (client-go's events broadcaster, DropIfChannelFull); so does ``EventSink``, on its own client throttle
as the recorder's clientset has. Where accelsched writes less often than Kueue, its events follow its writes: a
Pending event goes with each Pending condition written, and the door does not rewrite a waiting workload's
condition for a new message alone (live.workloadstatus), where Kueue records the event on every retry (a new Event
each time the Workload's resourceVersion has moved on, since client-go's series key holds the object's version;
events.Recorder joins a repeat of one note on one Workload into the first one's series)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from accelsched.live.events import Recorder
from accelsched.live.kube import JSON
from accelsched.live.writer import Deferred

log = logging.getLogger("accelsched.live.workloadevents")

WORKLOAD = ("kueue.x-k8s.io/v1beta2", "Workload")
ADMISSION = "kueue-admission"  # constants.AdmissionName
WORKLOAD_CONTROLLER = "kueue-workload-controller"  # constants.WorkloadControllerName
NORMAL, WARNING = "Normal", "Warning"
MAX_QUEUED = 1000  # client-go's events broadcaster: maxQueuedEvents
EVENT_LIMIT = 1024  # Kueue's api.TruncateEventMessage
# The events' own client throttle, at most (below it when the door's clientConnection is lower): minimalkueue's 50 a
# second, burst 100 (Kueue's default clientConnection is 300 and 500). Kueue's events clientset is throttled like its
# other clients; the door's writes at Kueue's performance runner's 1,000 a second, and events that fast took 30 s of
# a 190 s large-scale run (20% scale, 20,000 events; EventSink).
EVENT_QPS, EVENT_BURST = 50.0, 100
BUSY_RECHECK_SECONDS = 0.5  # how often a held-back event looks again whether the admission lane is free (EventSink)


@dataclass(frozen=True)
class WorkloadEvent:
    """One event to record once its status write is through. ``waited``: for QuotaReserved, when the workload was
    queued (epoch seconds; None: not known, no wait counted): the wait is counted up to the write, as Kueue counts
    it after its patch, and ``considered`` follows it."""

    regarding: JSON  # the Workload as the write was decided from
    type: str
    reason: str
    note: str
    controller: str = ADMISSION
    waited: bool = False
    queued: float | None = None
    considered: str = ""

    def text(self, now: float) -> str:
        note = self.note
        if self.waited:
            wait = max(0.0, now - self.queued) if self.queued is not None else 0.0
            note += f", wait time since queued was {wait:.0f}s"
            if self.considered:
                note += f"; Flavors considered: {self.considered}"
        return truncate(note)


def truncate(message: str) -> str:
    """api.TruncateEventMessage: at most 1,024 bytes, cut with `` ...``."""
    if len(message.encode()) <= EVENT_LIMIT:
        return message
    return message.encode()[: EVENT_LIMIT - 4].decode(errors="ignore") + " ..."


def admitted(doc: JSON, cluster_queue: str, considered: str) -> tuple[WorkloadEvent, ...]:
    """recordQuotaReservationMetrics and recordWorkloadAdmissionEvents (no admission checks: Admitted at once)."""
    return (
        WorkloadEvent(doc, NORMAL, "QuotaReserved", f"Quota reserved in ClusterQueue {cluster_queue}",
                      waited=True, queued=queued_since(doc), considered=considered),
        WorkloadEvent(doc, NORMAL, "Admitted",
                      f"Admitted by ClusterQueue {cluster_queue}, wait time since reservation was 0s"),
    )  # fmt: skip


def pending(doc: JSON, reason: str, message: str) -> tuple[WorkloadEvent, ...]:
    """requeueAndUpdate: the QuotaReserved condition's reason and message, as a Warning."""
    return (WorkloadEvent(doc, WARNING, reason, message),)


def preempted(
    victim: JSON,
    message: str,
    victim_priority: int,
    victim_cluster_queue: str,
    preemptor: JSON | None,
    preemptor_priority: int,
) -> tuple[WorkloadEvent, ...]:
    """IssuePreemptions, per target: Evict's event, then Preempted on the target and PreemptedWorkload on the
    preemptor. Priorities are base priorities (the PriorityBoost feature gate, off by default, adds none)."""
    priorities = (
        f"preemptor effective priority: {preemptor_priority} (base: {preemptor_priority}, boost: 0); "
        f"preemptee effective priority: {victim_priority} (base: {victim_priority}, boost: 0)"
    )
    out = [
        WorkloadEvent(victim, NORMAL, "EvictedDueToPreempted", message),
        WorkloadEvent(victim, NORMAL, "Preempted", f"{message}; {priorities}"),
    ]
    if preemptor is not None:
        meta = victim.get("metadata") or {}
        note = (
            f"Preempted workload {meta.get('namespace')}/{meta.get('name')} (UID: {meta.get('uid')}) in ClusterQueue "
            f"{victim_cluster_queue}; {priorities}"
        )
        out.append(WorkloadEvent(preemptor, NORMAL, "PreemptedWorkload", note))
    return tuple(out)


def drained(doc: JSON, reason: str, message: str) -> tuple[WorkloadEvent, ...]:
    """The workload controller's eviction by a stopped queue (HoldAndDrain): ``EvictedDueTo<reason>``."""
    return (WorkloadEvent(doc, NORMAL, f"EvictedDueTo{reason}", message, controller=WORKLOAD_CONTROLLER),)


def queued_since(doc: JSON) -> float | None:
    """QueuedWaitTime's start: the Requeued condition's lastTransitionTime, else the creationTimestamp."""
    status = doc.get("status") or {}
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == "Requeued" and c.get("lastTransitionTime"):
            return _epoch(c["lastTransitionTime"])
    return _epoch((doc.get("metadata") or {}).get("creationTimestamp"))


def _epoch(stamp: Any) -> float | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class EventSink:
    """Kueue's events broadcaster in small: ``record`` words each event now (its wait counted to this moment) and
    hands it to one thread that writes them in order through ``recorder`` (its series as client-go's); while
    ``MAX_QUEUED`` wait, more are dropped and counted, never queued without bound.

    ``busy``: while it says so (the admission lane has writes waiting), the thread holds its next event back,
    looking again every ``BUSY_RECHECK_SECONDS``: an event is a report, and on the API server it costs what a status
    write costs, so it yields to admissions as the door's Pending conditions do. Its recorder has a throttle of its
    own (EVENT_QPS). At 20% of Kueue's `large-scale` harness (10,000 admissions, two events each, `--only
    accelsched`): no events 190.6 s (waits 60.2 / 30.8 / 14.8 s); events at 50 a second 199.4 s (59.5 / 36.7 /
    15.2 s). Written as fast as the runner's throttle let them (1,000 a second), beside minimalkueue: 222.5 s and
    218.1 s (the second held while busy), its large wait then behind minimalkueue's."""

    def __init__(
        self, recorder: Recorder, max_queued: int = MAX_QUEUED, busy: Callable[[], bool] | None = None
    ) -> None:
        self.recorder = recorder
        self.max_queued = max_queued
        self.busy = busy or (lambda: False)
        self.dropped = 0
        self._calls = Deferred("workload-events")
        self._stopped = threading.Event()

    def record(self, events: Iterable[WorkloadEvent], now: float | None = None) -> None:
        now = time.time() if now is None else now
        for e in events:
            if len(self._calls) >= self.max_queued:
                self.dropped += 1
                log.debug("workload event dropped", extra={"reason": e.reason})
                continue
            self._calls.call_later(0.0, self._write, e, e.text(now))

    def _write(self, event: WorkloadEvent, note: str) -> None:
        while self.busy() and not self._stopped.wait(BUSY_RECHECK_SECONDS):
            pass
        if self._stopped.is_set():
            return
        self.recorder.event(
            event.regarding, event.reason, note, controller=event.controller, event_type=event.type,
            action=event.reason, kind=WORKLOAD,
        )  # fmt: skip

    def run_all(self) -> None:
        """Write every event waiting, now, on the caller's thread (the tests)."""
        self._calls.run_all()

    def stop(self) -> None:
        self._stopped.set()
        self._calls.stop()
