"""The device plugin process: one gRPC server per advertised resource, registration, health and kubelet watching.

``DevicePluginManager.start`` serves every resource, registers each with the kubelet, and starts two loops: health
(read the source, stream changes) and watch (re-serve and re-register after a kubelet restart). Tests call
``refresh`` and ``check_kubelet`` directly to take one step of either loop deterministically.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

import grpc

from accelsched import listen
from accelsched.deviceplugin import sources
from accelsched.deviceplugin.config import PluginConfig
from accelsched.deviceplugin.inventory import Inventory, Unit, units_by_resource
from accelsched.deviceplugin.metrics import PluginMetrics
from accelsched.deviceplugin.publish import NodePublisher
from accelsched.deviceplugin.registration import Backoff, RegisterCancelled, endpoint_for, kubelet_identity, register
from accelsched.deviceplugin.server import (
    MISSING,
    REPLACED,
    TEMP_SOCKET_NAME_LENGTH,
    UNIX_PATH_MAX,
    DevicePluginService,
    ResourceServer,
)
from accelsched.errors import InputError
from accelsched.live.metrics import HealthServer

log = logging.getLogger(__name__)


class DevicePluginManager:
    def __init__(
        self,
        config: PluginConfig,
        source: sources.DeviceSource | None = None,
        clock: Callable[[], float] = time.monotonic,
        publisher: Callable[[dict[str, list[Unit]]], NodePublisher] | None = None,
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
        for s in self.servers:
            check_socket_path(config, s.service.resource, s.endpoint)
        # Which IDs are healthy, on the Node for the scheduler (publish.py); not for partitioned resources.
        self.publisher = (
            publisher({s.service.resource: s.service.units for s in self.servers})
            if publisher is not None and not config.partitioning
            else None
        )
        self.registered: dict[str, bool] = {s.service.resource: False for s in self.servers}
        self.register_errors: dict[str, str] = {}  # resource -> why its last Register failed
        # A refused Register is retried after watchIntervalSeconds, then twice as long each time, up to a cap.
        self.backoff = Backoff(config.watch_interval)
        # How long a registered resource may go without a ListAndWatch stream from the kubelet before we take it
        # that the kubelet dropped us and register again (see _still_watched).
        self.timer: Callable[[], float] = time.monotonic
        self.stream_grace = max(1.0, 5 * config.watch_interval)
        self._unwatched_since: dict[str, float] = {}
        self._kubelet: tuple[int, int] | None = None
        self._step = threading.Lock()  # one watch step at a time (the loop, start, tests)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.http: HealthServer | None = None

    @property
    def resources(self) -> list[str]:
        return [s.service.resource for s in self.servers]

    def start(self) -> None:
        for s in self.servers:
            s.start()
        if self.publisher is not None:
            self.publisher.publish(self.inventory.healthy)
        self.check_kubelet()
        if self._stop.is_set():  # stopped from another thread while the first Register was in flight
            return
        if self.config.metrics_port is not None:
            self.http = HealthServer(
                self.metrics,
                self.ready,
                self.config.metrics_port,
                self.config.metrics_address,
                where=listen.Where("metrics.address", "metrics.port", self.config.source_file, "DevicePluginConfig"),
            )
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
        if self.publisher is not None:  # a change, or a write that failed last time
            self.publisher.publish(self.inventory.healthy)
        return changed

    def check_kubelet(self) -> None:
        """One watch step: serve again where our socket was removed, stand down where another instance's socket
        replaced ours, and register where the kubelet does not know us (a new kubelet.sock, or never yet)."""
        with self._step:
            current = kubelet_identity(self.config.socket_dir)
            if current != self._kubelet:
                self._kubelet = current
                self.registered = dict.fromkeys(self.registered, False)
                self.register_errors.clear()
                self.backoff.reset()  # a new kubelet: no reason to wait on the old one's refusals
            for s in self.servers:
                if self._stop.is_set():
                    return
                if not self._keep_serving(s) or current is None:
                    continue
                resource = s.service.resource
                if self.registered[resource] and not self._still_watched(s):
                    self.registered[resource] = False
                if not self.registered[resource] and self.backoff.due(resource):
                    self._register(s)

    def _keep_serving(self, s: ResourceServer) -> bool:
        """True while ``s`` serves on its endpoint (serving it again if the file was removed)."""
        resource = s.service.resource
        if s.superseded:
            return False
        state = s.socket_state()
        if state == REPLACED:
            log.warning(
                "%s is now another process's socket: another instance serves %s; this one stops serving it",
                s.path,
                resource,
            )
            s.give_up()
            self.registered[resource] = False
            return False
        if state == MISSING:
            log.info("socket %s was removed (kubelet restart?); serving %s again", s.path, resource)
            s.stop(grace=0)
            self.registered[resource] = False
            return s.start()
        return True

    def _still_watched(self, s: ResourceServer) -> bool:
        """False once the kubelet has held no ListAndWatch stream on a registered resource for ``stream_grace``.

        The kubelet opens the stream right after a successful Register and keeps it while it counts the plugin. It
        can drop a plugin without a word: when an older instance's stream on the same resource ends, its
        ``runClient`` disconnects whichever client is current under that name, ours included; and a Register at a
        socket path it already has a client for is answered OK without connecting again. Either way we hold a
        registration nobody watches; registering again is the only way back."""
        resource = s.service.resource
        if s.service.streams > 0:
            self._unwatched_since.pop(resource, None)
            return True
        since = self._unwatched_since.setdefault(resource, self.timer())
        if self.timer() - since < self.stream_grace:
            return True
        log.warning(
            "the kubelet holds no ListAndWatch stream on %s (it dropped this plugin); registering again", resource
        )
        del self._unwatched_since[resource]
        return False

    def _register(self, s: ResourceServer) -> None:
        resource = s.service.resource
        try:
            register(self.config.socket_dir, s.endpoint, resource, cancel=self._stop)
        except RegisterCancelled:
            return
        except grpc.RpcError as exc:
            why = f"{exc.code().name}: {exc.details()}"
            self.register_errors[resource] = why
            delay = self.backoff.failed(resource)
            log.warning("registering %s with the kubelet failed (%s); next try in %.3gs", resource, why, delay)
            return
        self.registered[resource] = True
        self._unwatched_since[resource] = self.timer()  # the grace for the kubelet's ListAndWatch starts now
        self.register_errors.pop(resource, None)
        self.backoff.reset(resource)
        self.metrics.registrations.labels(resource).inc()
        log.info("registered %s with the kubelet (endpoint %s)", resource, s.endpoint)

    def ready(self) -> tuple[bool, str]:
        """/readyz: every resource is served on its socket and registered with the kubelet (else who is not)."""
        problems = []
        for s in self.servers:
            resource = s.service.resource
            if s.superseded:
                problems.append(f"{resource}: another instance took over its socket {s.path}")
            elif not s.serving:
                problems.append(f"{resource}: socket gone")
            elif not self.registered[resource]:
                why = self.register_errors.get(resource)
                problems.append(f"{resource}: not registered with the kubelet" + (f" ({why})" if why else ""))
        return (not problems, "; ".join(problems) or "ok")

    def stop(self) -> None:
        self._stop.set()  # ends the loops and cancels a Register in flight
        for t in self._threads:
            t.join()
        with self._step:  # a step another thread is taking (start, a test) has seen _stop and finished
            pass
        self.inventory.close()
        for s in self.servers:
            s.stop()
        if self.http is not None:
            self.http.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ``stop`` (True) or ``timeout`` (False)."""
        return self._stop.wait(timeout)


def check_socket_path(config: PluginConfig, resource: str, endpoint: str) -> None:
    """The socket paths must fit a unix socket address; else a config error rather than gRPC failing to bind."""
    # Where it is bound before the rename (a short name: if that does not fit, the folder is at fault), then the
    # endpoint (named after the resource).
    for name, at_fault in (("x" * TEMP_SOCKET_NAME_LENGTH, "socketDir"), (endpoint, "resourceName")):
        path = os.path.join(config.socket_dir, name)
        size = len(os.fsencode(path))
        if size > UNIX_PATH_MAX:
            what = f"socket path {path} for {resource}" if name == endpoint else f"a socket path in {config.socket_dir}"
            raise InputError(
                f"{what} is {size} bytes; a unix socket path holds at most {UNIX_PATH_MAX}: shorten {at_fault}",
                source=config.source_file,
                obj="DevicePluginConfig",
                field=at_fault,
            )
