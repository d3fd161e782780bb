"""What kube-scheduler writes besides the binding: events.k8s.io/v1 Events and the PodScheduled condition."""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from accelsched.live.kube import EVENTS, JSON, PODS, ApiError, Kube
from accelsched.live.leaderelection import micro_time

log = logging.getLogger("accelsched.live.events")

SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
PREEMPTED = "Preempted"
UNSCHEDULABLE = "Unschedulable"
ACTIONS = {SCHEDULED: "Binding", PREEMPTED: "Preempting"}  # the Normal events; any other reason is a Warning
NOTE_LIMIT = 1024  # events.k8s.io/v1 rejects a longer note
MERGE_PATCH = "application/merge-patch+json"
SERIES_WINDOW = 360.0  # client-go's events recorder: an isomorphic event within 6 minutes joins a series
SERIES_REFRESH = 1800.0  # client-go's refreshTime: a running series' count is written every 30 minutes


def scheduled_message(namespace: str, name: str, node: str) -> str:
    """kube-scheduler's Scheduled event: ``Successfully assigned ns/pod to node``."""
    return f"Successfully assigned {namespace}/{name} to {node}"


def preempted_message(preemptor_uid: str, node: str) -> str:
    """kube-scheduler's Preempted event on a victim (preemption.prepareCandidate)."""
    return f"Preempted by pod {preemptor_uid} on node {node}"


def reporting_instance(controller: str, hostname: str | None = None) -> str:
    """client-go's events recorder: ``<reportingController>-<hostname>``."""
    return f"{controller}-{hostname or socket.gethostname()}"[:128]


POD = ("v1", "Pod")  # the kind of object an event is about: (apiVersion, kind)


def object_reference(obj: JSON, kind: tuple[str, str] = POD) -> JSON:
    """reference.GetReference: what an event's ``regarding`` (or ``related``) holds of the object."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": kind[0],
        "kind": kind[1],
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }


def truncate(note: str) -> str:
    data = note.encode()
    return note if len(data) <= NOTE_LIMIT else data[: NOTE_LIMIT - 3].decode(errors="ignore") + "..."


def event_body(
    pod: JSON,
    reason: str,
    note: str,
    controller: str,
    now: float | None = None,
    related: JSON | None = None,
    hostname: str | None = None,
    event_type: str = "",
    action: str = "",
    kind: tuple[str, str] = POD,
) -> JSON:
    """The Event kube-scheduler's recorder writes for ``pod`` (Normal Scheduled, Warning FailedScheduling).
    kube-scheduler has one recorder per profile: the reporting controller is the profile's schedulerName.
    ``event_type``, ``action`` and ``kind`` for another component's events on another kind of object (Kueue's on
    Workloads, live.workloadevents); by default kube-scheduler's, on a pod."""
    now = time.time() if now is None else now
    meta = pod.get("metadata") or {}
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{meta.get('name')}.{time.time_ns():x}", "namespace": meta.get("namespace")},
        "eventTime": micro_time(now),
        "reportingController": controller,
        "reportingInstance": reporting_instance(controller, hostname),
        "action": action or ACTIONS.get(reason, "Scheduling"),
        "reason": reason,
        "note": truncate(note),
        "type": event_type or ("Normal" if reason in ACTIONS else "Warning"),
        "regarding": object_reference(pod, kind),
    }
    if related is not None:
        body["related"] = object_reference(related)
    return body


def pod_scheduled_condition(pod: JSON) -> JSON | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return condition
    return None


def unschedulable_patch(message: str, now: float | None = None, reason: str = "") -> JSON:
    """The status patch kube-scheduler's handleSchedulingFailure makes: PodScheduled False, Unschedulable (or
    SchedulerError when the attempt failed with an error)."""
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason or UNSCHEDULABLE,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": micro_time(time.time() if now is None else now)[:19] + "Z",
    }
    return {"status": {"conditions": [condition]}}


def disruption_patch(scheduler_name: str, now: float | None = None) -> JSON:
    """The condition kube-scheduler sets on a victim before deleting it (``scheduler_name``: the preemptor's)."""
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": micro_time(time.time() if now is None else now)[:19] + "Z",
    }
    return {"status": {"conditions": [condition]}}


def series_patch(count: int, now: float) -> JSON:
    """The merge patch that records the occurrences of an event already written."""
    return {"series": {"count": count, "lastObservedTime": micro_time(now)}}


@dataclass
class Series:
    namespace: str
    name: str  # the Event's name
    count: int
    last: float  # monotonic time of the last occurrence
    written: int = 1  # the count the API server has
    written_at: float = 0.0  # monotonic time it was written
    wall: float = 0.0  # wall-clock time of the last occurrence (the series' lastObservedTime)


class Recorder:
    """Writes events and conditions; a failure is logged, never raised (the scheduling decision stands).

    A pod retried again and again with the same outcome would otherwise write one Event per attempt. As client-go's
    events recorder does, an event like one written in the last 6 minutes (same pod uid, reason, note and reporting
    controller) is not written again: it joins the first one's ``series``, whose count (2) is patched on the first
    repeat only; later repeats are counted in memory, and the count is written every 30 minutes while the series
    runs (refreshExistingEventSeries) and once more when it ends (finishSeries). A backlog of Pending pods retried
    on every cluster event thus costs no API write per retry, as in kube-scheduler."""

    def __init__(self, kube: Kube, window: float = SERIES_WINDOW) -> None:
        self.kube = kube
        self.window = window
        self._series: dict[tuple[str, str, str, str], Series] = {}
        self._lock = threading.Lock()
        self._pruned = time.monotonic()

    def event(
        self,
        pod: JSON,
        reason: str,
        note: str,
        related: JSON | None = None,
        controller: str | None = None,
        event_type: str = "",
        action: str = "",
        kind: tuple[str, str] = POD,
    ) -> None:
        """``controller``: the profile reporting it, by default the pod's own schedulerName; ``event_type``,
        ``action`` and ``kind`` as event_body has them."""
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        controller = controller or str((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")
        note = truncate(note)
        key = (str(meta.get("uid")), reason, note, controller)
        now = time.monotonic()
        finished: list[Series] = []
        with self._lock:
            series = self._series.get(key)
            if series is not None and now - series.last > self.window:
                finished.append(series)  # the series has ended (client-go's finishSeries)
                series = None
            write = series is not None
            if series is not None:
                series.count += 1
                series.last, series.wall = now, time.time()
                write = series.count == 2 or now - series.written_at >= SERIES_REFRESH
            if series is None and now - self._pruned > 60.0:  # ended series dropped now and then, not every event
                finished += [s for s in self._series.values() if now - s.last > self.window]
                self._series = {k: s for k, s in self._series.items() if now - s.last <= self.window}
                self._pruned = now
        for ended in finished:
            if ended.count > ended.written:
                self._write_series(ended)
        if series is not None:
            if write:
                self._write_series(series)
            return
        try:
            body = event_body(
                pod, reason, note, controller, related=related, event_type=event_type, action=action, kind=kind
            )
            created = self.kube.create(EVENTS, body, namespace)
        except ApiError as exc:
            log.warning("cannot record event", extra={"pod": _key(pod), "reason": reason, "error": exc.message})
            return
        name = str(((created or {}).get("metadata") or {}).get("name") or "")
        if name:
            with self._lock:
                self._series[key] = Series(namespace, name, 1, now, written_at=now)

    def _write_series(self, series: Series) -> None:
        """The series' count as it is now, to its Event."""
        with self._lock:
            count, wall = series.count, series.wall
        try:
            self.kube.patch(EVENTS, series.name, series_patch(count, wall), series.namespace, content_type=MERGE_PATCH)
        except ApiError as exc:
            log.warning("cannot record event", extra={"event": series.name, "error": exc.message})
            return
        with self._lock:
            series.written, series.written_at = max(series.written, count), time.monotonic()

    def unschedulable(self, pod: JSON, message: str, reason: str = "") -> None:
        """Set PodScheduled=False with the message, unless the pod already says exactly that."""
        current = pod_scheduled_condition(pod)
        if (
            current
            and current.get("status") == "False"
            and current.get("message") == message
            and current.get("reason") == (reason or UNSCHEDULABLE)
        ):
            return
        meta = pod.get("metadata") or {}
        patch = unschedulable_patch(message, reason=reason)
        try:
            self.kube.patch(PODS, meta["name"], patch, meta.get("namespace"), sub="status")
        except ApiError as exc:
            if exc.status != 404:
                log.warning("cannot update pod condition", extra={"pod": _key(pod), "error": exc.message})


def _key(pod: Any) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"
