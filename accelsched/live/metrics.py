"""Prometheus metrics in kube-scheduler's vocabulary, and the /healthz, /readyz and /metrics endpoints."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# kube-scheduler's scheduling_attempt_duration buckets: exponential from 1 ms, factor 2, 15 buckets.
ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))


class Metrics:
    """One registry per scheduler (several can run in one process, as in tests)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result.",
            ["result", "profile"],
            registry=self.registry,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"],
            buckets=ATTEMPT_BUCKETS,
            registry=self.registry,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type.",
            ["queue"],
            registry=self.registry,
        )
        self.binds = Counter(
            "accelsched_binds", "Bindings written to the API server, by outcome.", ["outcome"], registry=self.registry
        )
        self.relists = Counter(
            "accelsched_cache_resyncs", "Times the cache was rebuilt from a full list.", registry=self.registry
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


class HealthServer:
    """``/healthz`` (``healthy()`` says so: the process serves and its loop turns), ``/readyz`` (``ready()`` says
    so) and ``/metrics`` on one port."""

    def __init__(
        self,
        metrics: Metrics,
        ready: Callable[[], tuple[bool, str]],
        port: int = 0,
        host: str = "",
        healthy: Callable[[], tuple[bool, str]] | None = None,
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/healthz"):
                    ok, why = healthy() if healthy else (True, "ok")
                    outer._reply(self, 200 if ok else 500, (why or "ok").encode(), "text/plain")
                elif self.path.startswith("/readyz"):
                    ok, why = ready()
                    outer._reply(self, 200 if ok else 503, (why or "ok").encode(), "text/plain")
                elif self.path.startswith("/metrics"):
                    outer._reply(self, 200, metrics.render(), CONTENT_TYPE_LATEST)
                else:
                    outer._reply(self, 404, b"not found", "text/plain")

            def log_message(self, format: str, *args: object) -> None:  # probes every few seconds: not logged
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="health", daemon=True)

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
