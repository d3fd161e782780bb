"""The device plugin process: one gRPC server per advertised resource, registration, health and kubelet watching.

``DevicePluginManager.start`` serves every resource, registers each with the kubelet, and starts two loops: health
(read the source, stream changes) and watch (re-serve and re-register after a kubelet restart). Tests call
``refresh`` and ``check_kubelet`` directly to take one step of either loop deterministically.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import grpc

from accelsched.deviceplugin import sources
from accelsched.deviceplugin.config import PluginConfig
from accelsched.deviceplugin.inventory import Inventory, units_by_resource
from accelsched.deviceplugin.metrics import PluginMetrics
from accelsched.deviceplugin.registration import endpoint_for, kubelet_identity, register
from accelsched.deviceplugin.server import DevicePluginService, ResourceServer
from accelsched.live.metrics import HealthServer

log = logging.getLogger(__name__)


class DevicePluginManager:
    def __init__(
        self,
        config: PluginConfig,
        source: sources.DeviceSource | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.inventory = Inventory(source or sources.from_config(config, clock))
        self.metrics = PluginMetrics()
        self.servers = [
            ResourceServer(
                DevicePluginService(resource, units, self.inventory, config.allocate, self.metrics),
                config.socket_dir,
                endpoint_for(resource),
            )
            for resource, units in sorted(units_by_resource(config, self.inventory.devices).items())
        ]
        self.registered: dict[str, bool] = {s.service.resource: False for s in self.servers}
        self._kubelet: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.http: HealthServer | None = None

    @property
    def resources(self) -> list[str]:
        return [s.service.resource for s in self.servers]

    def start(self) -> None:
        for s in self.servers:
            s.start()
        self.check_kubelet()
        if self.config.metrics_port is not None:
            self.http = HealthServer(self.metrics, self.ready, self.config.metrics_port, self.config.metrics_address)
            self.http.start()
            log.info("/healthz, /readyz and /metrics on %s:%d", self.config.metrics_address, self.http.port)
        for name, step, interval in (
            ("health", self.refresh, self.config.health_interval),
            ("watch", self.check_kubelet, self.config.watch_interval),
        ):
            t = threading.Thread(target=self._loop, args=(step, interval), name=f"device-plugin-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def _loop(self, step: Callable[[], object], interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                step()
            except Exception:  # a loop that dies silently would leave the node advertising stale devices
                log.exception("device plugin loop step failed; retrying")

    def refresh(self) -> list[str]:
        """One health step: read the source; on a change every ListAndWatch stream sends the new list."""
        changed = self.inventory.refresh()
        if changed:
            healthy = self.inventory.healthy
            for s in self.servers:
                s.service.publish(healthy)
            log.info(
                "health changed: %s", ", ".join(f"{d}={'Healthy' if healthy[d] else 'Unhealthy'}" for d in changed)
            )
        return changed

    def check_kubelet(self) -> None:
        """One watch step: serve again where our socket was removed, register where the kubelet does not know us."""
        with self._lock:
            if self._stop.is_set():
                return
            current = kubelet_identity(self.config.socket_dir)
            restarted = current != self._kubelet
            self._kubelet = current
            for s in self.servers:
                resource = s.service.resource
                if not s.serving:
                    log.info("socket %s was removed (kubelet restart?); serving %s again", s.path, resource)
                    s.stop(grace=0)
                    s.start()
                    self.registered[resource] = False
                if restarted:
                    self.registered[resource] = False
                if current is None or self.registered[resource]:
                    continue
                try:
                    register(self.config.socket_dir, s.endpoint, resource)
                except grpc.RpcError as exc:
                    log.warning("registering %s with the kubelet failed: %s", resource, exc.details() or exc.code())
                    continue
                self.registered[resource] = True
                self.metrics.registrations.labels(resource).inc()
                log.info("registered %s with the kubelet (endpoint %s)", resource, s.endpoint)

    def ready(self) -> tuple[bool, str]:
        """/readyz: every resource is served on its socket and registered with the kubelet (else who is not)."""
        problems = [f"{s.service.resource}: socket gone" for s in self.servers if not s.serving]
        problems += [f"{r}: not registered with the kubelet" for r, ok in self.registered.items() if not ok]
        return (not problems, "; ".join(problems) or "ok")

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
        for t in self._threads:
            t.join()
        self.inventory.close()
        for s in self.servers:
            s.stop()
        if self.http is not None:
            self.http.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ``stop`` (True) or ``timeout`` (False)."""
        return self._stop.wait(timeout)
