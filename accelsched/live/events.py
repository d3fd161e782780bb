"""What kube-scheduler writes besides the binding: events.k8s.io/v1 Events and the PodScheduled condition."""

from __future__ import annotations

import logging
import time
from typing import Any

from accelsched.live.kube import EVENTS, JSON, PODS, ApiError, Kube
from accelsched.live.leaderelection import micro_time

log = logging.getLogger("accelsched.live.events")

REPORTING_CONTROLLER = "accelsched"
SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
PREEMPTED = "Preempted"
UNSCHEDULABLE = "Unschedulable"
ACTIONS = {SCHEDULED: "Binding", PREEMPTED: "Preempting"}  # the Normal events; any other reason is a Warning
NOTE_LIMIT = 1024  # events.k8s.io/v1 rejects a longer note


def scheduled_message(namespace: str, name: str, node: str) -> str:
    """kube-scheduler's Scheduled event: ``Successfully assigned ns/pod to node``."""
    return f"Successfully assigned {namespace}/{name} to {node}"


def truncate(note: str) -> str:
    data = note.encode()
    return note if len(data) <= NOTE_LIMIT else data[: NOTE_LIMIT - 3].decode(errors="ignore") + "..."


def event_body(pod: JSON, reason: str, note: str, instance: str, now: float | None = None) -> JSON:
    """The Event kube-scheduler's recorder writes for ``pod`` (Normal Scheduled, Warning FailedScheduling)."""
    now = time.time() if now is None else now
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{meta.get('name')}.{time.time_ns():x}", "namespace": meta.get("namespace")},
        "eventTime": micro_time(now),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance[:128],
        "action": ACTIONS.get(reason, "Scheduling"),
        "reason": reason,
        "note": truncate(note),
        "type": "Normal" if reason in ACTIONS else "Warning",
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
    }


def pod_scheduled_condition(pod: JSON) -> JSON | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return condition
    return None


def unschedulable_patch(message: str, now: float | None = None) -> JSON:
    """The status patch kube-scheduler's handleSchedulingFailure makes: PodScheduled False, Unschedulable."""
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": UNSCHEDULABLE,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": micro_time(time.time() if now is None else now)[:19] + "Z",
    }
    return {"status": {"conditions": [condition]}}


def disruption_patch(scheduler_name: str, message: str, now: float | None = None) -> JSON:
    """The condition kube-scheduler sets on a victim before deleting it."""
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": f"{scheduler_name}: {message}",
        "lastTransitionTime": micro_time(time.time() if now is None else now)[:19] + "Z",
    }
    return {"status": {"conditions": [condition]}}


class Recorder:
    """Writes events and conditions; a failure is logged, never raised (the scheduling decision stands)."""

    def __init__(self, kube: Kube, instance: str) -> None:
        self.kube = kube
        self.instance = instance

    def event(self, pod: JSON, reason: str, note: str) -> None:
        namespace = (pod.get("metadata") or {}).get("namespace")
        try:
            self.kube.create(EVENTS, event_body(pod, reason, note, self.instance), namespace)
        except ApiError as exc:
            log.warning("cannot record event", extra={"pod": _key(pod), "reason": reason, "error": exc.message})

    def unschedulable(self, pod: JSON, message: str) -> None:
        """Set PodScheduled=False with the message, unless the pod already says exactly that."""
        current = pod_scheduled_condition(pod)
        if current and current.get("status") == "False" and current.get("message") == message:
            return
        meta = pod.get("metadata") or {}
        try:
            self.kube.patch(PODS, meta["name"], unschedulable_patch(message), meta.get("namespace"), sub="status")
        except ApiError as exc:
            if exc.status != 404:
                log.warning("cannot update pod condition", extra={"pod": _key(pod), "error": exc.message})


def _key(pod: Any) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"
