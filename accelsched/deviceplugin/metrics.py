"""Prometheus metrics and the /healthz endpoint of the device plugin, on one small HTTP server.

Each plugin process owns a registry (not prometheus_client's global one), so several plugins in one test process
keep separate counts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest


class PluginMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.devices = Gauge(
            "accelsched_device_plugin_devices",
            "Devices advertised to the kubelet, by resource name and health.",
            ["resource", "health"],
            registry=self.registry,
        )
        self.allocations = Counter(
            "accelsched_device_plugin_allocations",
            "Containers given devices by Allocate.",
            ["resource"],
            registry=self.registry,
        )
        self.allocation_errors = Counter(
            "accelsched_device_plugin_allocation_errors",
            "Allocate and GetPreferredAllocation calls refused, by gRPC status code.",
            ["resource", "code"],
            registry=self.registry,
        )
        self.registrations = Counter(
            "accelsched_device_plugin_registrations",
            "Successful registrations with the kubelet (one more after every kubelet restart).",
            ["resource"],
            registry=self.registry,
        )

    def set_devices(self, resource: str, healthy: int, unhealthy: int) -> None:
        self.devices.labels(resource, "Healthy").set(healthy)
        self.devices.labels(resource, "Unhealthy").set(unhealthy)


class _Handler(BaseHTTPRequestHandler):
    metrics: PluginMetrics
    healthy: Callable[[], tuple[bool, str]]

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._send(200, generate_latest(self.metrics.registry), CONTENT_TYPE_LATEST)
        elif self.path == "/healthz":
            ok, why = self.healthy()
            self._send(200 if ok else 503, (why + "\n").encode(), "text/plain; charset=utf-8")
        else:
            self._send(404, b"not found: try /healthz or /metrics\n", "text/plain; charset=utf-8")

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # probes every few seconds: not worth a log line
        pass


def serve(
    address: str, port: int, metrics: PluginMetrics, healthy: Callable[[], tuple[bool, str]]
) -> ThreadingHTTPServer:
    """Start /healthz and /metrics on ``address:port`` (0: a free port, see ``server_port``) in a daemon thread."""
    handler = type("Handler", (_Handler,), {"metrics": metrics, "healthy": staticmethod(healthy)})
    server = ThreadingHTTPServer((address, port), handler)
    server.daemon_threads = True
    # A short poll keeps shutdown() quick (the default waits up to half a second).
    threading.Thread(target=server.serve_forever, args=(0.05,), name="device-plugin-http", daemon=True).start()
    return server
