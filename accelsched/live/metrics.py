"""Prometheus metrics in kube-scheduler's vocabulary, and the /healthz, /readyz, /metrics and /debug/state endpoints.

Names, help, labels and buckets are kube-scheduler v1.36.3's (pkg/scheduler/metrics/metrics.go), help prefixed with
the stability level as component-base prints it ("[STABLE] ..."), so a dashboard built for kube-scheduler reads
accelsched unchanged. ``QueueMetrics`` follows each pod of ours through the queues for
``scheduler_queue_incoming_pods_total`` and ``scheduler_pod_scheduling_sli_duration_seconds``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from accelsched import listen


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """client_golang's ExponentialBuckets (start, start*factor, ...: ``count`` upper bounds)."""
    return tuple(start * factor**i for i in range(count))


ATTEMPT_BUCKETS = exponential_buckets(0.001, 2, 15)  # scheduling_attempt_duration_seconds
SLI_BUCKETS = exponential_buckets(0.01, 2, 20)  # pod_scheduling_sli_duration_seconds: 10 ms to [~88 min, Inf)
MAX_ATTEMPTS_LABEL = 15  # getAttemptsLabel: attempts >= 15 are "15+"

# kube-scheduler's queue names (pending_pods, queue_incoming_pods_total) and the event labels it counts.
ACTIVE, BACKOFF, UNSCHEDULABLE, GATED = "active", "backoff", "unschedulable", "gated"
POD_ADD = "UnschedulablePodAdd"  # framework.EventUnscheduledPodAdd.Label()
POD_UPDATE = "UnschedulablePodUpdate"
GATES_ELIMINATED = "UnschedulablePodUpdatePodSchedulingGatesEliminated"
ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
ASSIGNED_POD_ADD, ASSIGNED_POD_UPDATE, ASSIGNED_POD_DELETE = "AssignedPodAdd", "AssignedPodUpdate", "AssignedPodDelete"


def attempts_label(attempts: int) -> str:
    return f"{MAX_ATTEMPTS_LABEL}+" if attempts >= MAX_ATTEMPTS_LABEL else str(attempts)


def node_event(kind: str, old: dict | None, new: dict) -> str:
    """The ClusterEvent label kube-scheduler moves pods with on a node event: NodeAdd, NodeDelete, or for an
    update the first change in NodeSchedulingPropertiesChange's order (unschedulable counts as a taint)."""
    if kind != "MODIFIED" or old is None:
        return "NodeAdd" if kind == "ADDED" else "NodeDelete"
    o_spec, n_spec = old.get("spec") or {}, new.get("spec") or {}
    o_meta, n_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if bool(o_spec.get("unschedulable")) != bool(n_spec.get("unschedulable")):
        return "NodeUpdateNodeTaint"
    if (old.get("status") or {}).get("allocatable") != (new.get("status") or {}).get("allocatable"):
        return "NodeUpdateNodeAllocatable"
    if (o_meta.get("labels") or {}) != (n_meta.get("labels") or {}):
        return "NodeUpdateNodeLabel"
    if o_spec.get("taints") != n_spec.get("taints"):
        return "NodeUpdateNodeTaint"
    if (o_meta.get("annotations") or {}) != (n_meta.get("annotations") or {}):
        return "NodeUpdateNodeAnnotation"
    return "NodeUpdate"


def resource_event(kind: str, obj: dict) -> str:
    """``<resource><action>`` as ClusterEvent.Label() prints it: core kinds bare (PersistentVolumeClaimAdd), others
    with their group (storage.k8s.io/StorageClassUpdate, scheduling.k8s.io/PodGroupAdd)."""
    group, kind_name = str(obj.get("apiVersion") or "").rpartition("/")[0], obj.get("kind")
    # A listed item carries neither (the API server leaves them off list items): the wildcard resource, "*".
    resource = (f"{group}/{kind_name}" if group else str(kind_name)) if kind_name else "*"
    return resource + {"ADDED": "Add", "MODIFIED": "Update", "DELETED": "Delete"}.get(kind, kind.title())


def pod_event(kind: str, obj: dict, old: dict | None) -> str:
    """The label of a pod event as kube-scheduler's handlers move the queue with it: a bound pod's add, update or
    delete (AssignedPod...); a pending pod deleted that held a nomination moves pods as AssignedPodDelete too
    (deletePodFromSchedulingQueue); a pending pod added or updated is UnschedulablePod...."""
    bound = bool((obj.get("spec") or {}).get("nodeName"))
    if kind == "DELETED":
        return (
            ASSIGNED_POD_DELETE
            if bound or (obj.get("status") or {}).get("nominatedNodeName")
            else "UnschedulablePodDelete"
        )
    if bound:
        return ASSIGNED_POD_ADD if old is None or not (old.get("spec") or {}).get("nodeName") else ASSIGNED_POD_UPDATE
    return POD_ADD if old is None else POD_UPDATE


class Metrics:
    """One registry per scheduler (several can run in one process, as in tests)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=self.registry,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=ATTEMPT_BUCKETS,
            registry=self.registry,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
            "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods "
            "that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that "
            "the scheduler never attempted to schedule because they are gated.",
            ["queue"],
            registry=self.registry,
        )
        self.incoming_pods = Counter(
            "scheduler_queue_incoming_pods",
            "[STABLE] Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=self.registry,
        )
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and "
            "might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=SLI_BUCKETS,
            registry=self.registry,
        )
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "[BETA] The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for "
            "all plugins that caused it to not schedule and so this metric have meaning only when broken down by "
            "plugin.",
            ["plugin", "profile"],
            registry=self.registry,
        )
        # client-go's (component-base registers it in kube-scheduler), by the Lease's name.
        self.leader = Gauge(
            "leader_election_master_status",
            "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates "
            "master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            ["name"],
            registry=self.registry,
        )
        self.binds = Counter(
            "accelsched_binds", "Bindings written to the API server, by outcome.", ["outcome"], registry=self.registry
        )
        self.relists = Counter(
            "accelsched_cache_resyncs", "Times the cache was rebuilt from a full list.", registry=self.registry
        )
        self.queue = QueueMetrics(self)

    def render(self) -> bytes:
        return generate_latest(self.registry)


@dataclass
class QueuedPod:
    """What kube-scheduler's QueuedPodInfo carries for the metrics: where the pod is, since when it is queued
    (InitialAttemptTimestamp: set when it first enters activeQ, so a gated pod's wait is not counted), its
    attempts, and its last failure (shown by /debug/state)."""

    queue: str
    initial: float | None = None
    attempts: int = 0
    last_failure: str = ""
    # The plugins that rejected its last attempt (UnschedulablePlugins), counted in scheduler_unschedulable_pods
    # under ``profile`` (its schedulerName) from the failure until it is popped again, bound or deleted.
    rejectors: frozenset[str] = frozenset()
    profile: str = ""


class QueueMetrics:
    """The queue moves of our pending pods, by uid, counted as kube-scheduler's queue counts them. Entries live
    while a pod is pending: dropped when it is bound (its SLI observed) or deleted, so memory follows the queue."""

    def __init__(self, metrics: Metrics, clock: Callable[[], float] = time.monotonic) -> None:
        self.metrics = metrics
        self.clock = clock
        self.pods: dict[str, QueuedPod] = {}
        self._lock = threading.Lock()

    def moved(self, uid: str, queue: str, event: str) -> None:
        """The pod entered ``queue`` because of ``event`` (queue_incoming_pods_total{queue, event})."""
        with self._lock:
            pod = self.pods.get(uid)
            if pod is None:
                pod = self.pods[uid] = QueuedPod(queue)
            pod.queue = queue
            if queue == ACTIVE and pod.initial is None:
                pod.initial = self.clock()
        self.metrics.incoming_pods.labels(queue, event).inc()

    def woken(self, uid: str, event: str, backoff_done: bool) -> None:
        """A cluster event moved an unschedulable pod: to backoffQ while its backoff runs, else to activeQ."""
        self.woken_all(event, [(uid, backoff_done)])

    def woken_all(self, event: str, pods: Iterable[tuple[str, bool]]) -> None:
        """``woken`` for many pods (uid, backoff over) in one go: an event can wake thousands."""
        counts = {ACTIVE: 0, BACKOFF: 0}
        now = self.clock()
        with self._lock:
            for uid, backoff_done in pods:
                queue = ACTIVE if backoff_done else BACKOFF
                pod = self.pods.get(uid)
                if pod is None:
                    pod = self.pods[uid] = QueuedPod(queue)
                pod.queue = queue
                if queue == ACTIVE and pod.initial is None:
                    pod.initial = now
                counts[queue] += 1
        for queue, count in counts.items():
            if count:
                self.metrics.incoming_pods.labels(queue, event).inc(count)

    def due(self, uid: str) -> None:
        """Taken for an attempt: a pod that waited in backoffQ moves to activeQ (BackoffComplete) first."""
        with self._lock:
            pod = self.pods.get(uid)
            queue = pod.queue if pod is not None else None
        if queue == BACKOFF:
            self.moved(uid, ACTIVE, BACKOFF_COMPLETE)
        elif pod is None:  # not seen entering (a pod listed before we started): it is in activeQ from now
            with self._lock:
                self.pods[uid] = QueuedPod(ACTIVE, self.clock())

    def attempted(self, uids: Iterable[str]) -> None:
        """One scheduling attempt each (QueuedPodInfo.Attempts++ at Pop). Pods not queued here (a bound victim
        listed in the results) are not counted."""
        with self._lock:
            for uid in uids:
                pod = self.pods.get(uid)
                if pod is not None:
                    pod.attempts += 1
                    if pod.initial is None:
                        pod.initial = self.clock()
                    self._unreject(pod)  # popped: activeQ's pop drops it from unschedulable_pods

    def failed(
        self, uid: str, queue: str, message: str, rejectors: frozenset[str] = frozenset(), profile: str = ""
    ) -> None:
        """The attempt failed (or its binding did): the pod goes to ``queue`` with ScheduleAttemptFailure, counted
        under each plugin that rejected it (kube-scheduler's addUnschedulablePodIfNotPresent)."""
        with self._lock:
            pod = self.pods.setdefault(uid, QueuedPod(queue))
            pod.last_failure = message
            self._unreject(pod)
            pod.rejectors, pod.profile = rejectors, profile
            for plugin in rejectors:
                self.metrics.unschedulable_pods.labels(plugin, profile).inc()
        self.moved(uid, queue, ATTEMPT_FAILURE)

    def _unreject(self, pod: QueuedPod) -> None:
        for plugin in pod.rejectors:
            self.metrics.unschedulable_pods.labels(plugin, pod.profile).dec()
        pod.rejectors = frozenset()

    def scheduled(self, uid: str) -> None:
        """Bound: observe the SLI duration (first queued to bound, labelled by attempts) and forget the pod."""
        with self._lock:
            pod = self.pods.pop(uid, None)
            if pod is not None:
                self._unreject(pod)
        if pod is not None and pod.initial is not None:
            elapsed = max(0.0, self.clock() - pod.initial)
            self.metrics.sli_duration.labels(attempts_label(max(1, pod.attempts))).observe(elapsed)

    def forget(self, uid: str) -> None:
        """Deleted, or bound by another scheduler: out of the queues (and of unschedulable_pods)."""
        with self._lock:
            pod = self.pods.pop(uid, None)
            if pod is not None:
                self._unreject(pod)

    def info(self, uid: str) -> QueuedPod | None:
        with self._lock:
            pod = self.pods.get(uid)
            return None if pod is None else dataclasses.replace(pod)


class DebugStateError(Exception):
    """A /debug/state request that cannot be answered: ``status`` (400 bad query, 404 unknown node, 503 no state
    yet) and a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


DebugState = Callable[[dict[str, list[str]]], Any]  # parsed query -> a JSON-able body, or DebugStateError


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


RUN_FLAGS = listen.Where("--metrics-address", "--metrics-port")  # accelsched run's flags for the endpoint


class HealthServer:
    """``/healthz`` (``healthy()`` says so: the process serves and its loop turns), ``/readyz`` (``ready()`` says
    so), ``/metrics`` and, given ``debug_state``, ``/debug/state`` on one port. /debug/state shows the cluster's
    labels and the pending pods' failures, so it answers loopback clients only unless ``debug_remote``: the
    port itself usually listens on every address for Prometheus."""

    def __init__(
        self,
        metrics: Metrics,
        ready: Callable[[], tuple[bool, str]],
        port: int = 0,
        host: str = "",
        healthy: Callable[[], tuple[bool, str]] | None = None,
        debug_state: DebugState | None = None,
        debug_remote: bool = False,
        where: listen.Where = RUN_FLAGS,
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if path == "/healthz" or path.startswith("/healthz/"):
                    ok, why = healthy() if healthy else (True, "ok")
                    outer._reply(self, 200 if ok else 500, (why or "ok").encode(), "text/plain")
                elif path == "/readyz" or path.startswith("/readyz/"):
                    ok, why = ready()
                    outer._reply(self, 200 if ok else 503, (why or "ok").encode(), "text/plain")
                elif path == "/metrics":
                    outer._reply(self, 200, metrics.render(), CONTENT_TYPE_LATEST)
                elif path == "/debug/state" and debug_state is not None:
                    outer._debug(self, debug_state, query, debug_remote)
                else:
                    outer._reply(self, 404, b"not found", "text/plain")

            def log_message(self, format: str, *args: object) -> None:  # probes every few seconds: not logged
                pass

        self.server = listen.http_server(host, port, Handler, where)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="health", daemon=True)

    @staticmethod
    def _debug(handler: BaseHTTPRequestHandler, state: DebugState, query: str, remote: bool) -> None:
        if not remote and not _loopback(handler.client_address[0]):
            HealthServer._reply(handler, 403, b"/debug/state is served to loopback clients only\n", "text/plain")
            return
        try:
            params = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query), max_num_fields=16)
        except ValueError as exc:  # a malformed query string
            HealthServer._reply(handler, 400, f"bad query: {exc}\n".encode(), "text/plain")
            return
        try:
            body = json.dumps(state(params), indent=1, sort_keys=True, default=str).encode() + b"\n"
        except DebugStateError as exc:
            line = (exc.message.splitlines() or [""])[0]
            HealthServer._reply(handler, exc.status, line.encode() + b"\n", "text/plain")
        else:
            HealthServer._reply(handler, 200, body, "application/json")

    @staticmethod
    def _reply(handler: BaseHTTPRequestHandler, code: int, body: bytes, content_type: str) -> None:
        handler.send_response(code)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
