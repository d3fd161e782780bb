"""The device plugin's Prometheus metrics. They are served with /healthz and /readyz by the scheduler's HealthServer.

Each plugin owns a registry (not prometheus_client's global one), so several plugins in one test process keep
separate counts.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest


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

    def render(self) -> bytes:
        return generate_latest(self.registry)
