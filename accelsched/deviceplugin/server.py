"""The DevicePlugin gRPC service for one resource name, and the gRPC server that serves it on a unix socket.

What the kubelet sees: GetDevicePluginOptions (GetPreferredAllocation available), ListAndWatch (the full list at
start and after every health change), GetPreferredAllocation (the scheduler's allocator, ``best_set``), Allocate
(the env var, /dev nodes, mounts and CDI names for the container). Bad requests end with a gRPC status naming the
problem, and the server keeps serving.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from typing import Any

import grpc

from accelsched.deviceplugin.config import NODE_PLACEHOLDERS, AllocateConfig, render_template
from accelsched.deviceplugin.inventory import Inventory, Unit
from accelsched.deviceplugin.metrics import PluginMetrics
from accelsched.deviceplugin.proto import api_pb2 as pb
from accelsched.deviceplugin.proto import api_pb2_grpc as pb_grpc
from accelsched.deviceplugin.sources import PhysicalDevice
from accelsched.topology.alignment import Links
from accelsched.topology.allocator import best_set

log = logging.getLogger(__name__)

VERSION = "v1beta1"
HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"
KUBELET_SOCKET = "kubelet.sock"
STREAM_POLL_SECONDS = 0.5  # how soon a ListAndWatch stream notices its client left
TEMP_SOCKET_PREFIX = ".accelsched-"  # + 8 hex digits + .sock: where a socket is bound before it is renamed
TEMP_SOCKET_NAME_LENGTH = len(TEMP_SOCKET_PREFIX) + 8 + len(".sock")
UNIX_PATH_MAX = 107  # bytes in a unix socket path (sun_path is 108, with the terminating NUL)
OURS, MISSING, REPLACED = "ours", "missing", "replaced"
MAX_IDS_IN_MESSAGE, MAX_ID_IN_MESSAGE = 5, 64  # unknown IDs named in a refusal, and characters of each


class RequestError(Exception):
    """A request the plugin refuses: becomes a gRPC status with this code and message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _refusals(method: Callable[[Any, Any, grpc.ServicerContext], Any]) -> Callable[..., Any]:
    """A RequestError raised by an RPC becomes its gRPC status (counted per code); the server keeps serving."""

    @functools.wraps(method)
    def rpc(self: DevicePluginService, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except RequestError as exc:
            self.metrics.allocation_errors.labels(self.resource, exc.code.name).inc()
            context.abort(exc.code, f"{self.resource}: {exc}")  # raises

    return rpc


class DevicePluginService(pb_grpc.DevicePluginServicer):
    """The v1beta1 DevicePlugin service for ``resource``: ``units`` are what it advertises."""

    def __init__(
        self,
        resource: str,
        units: list[Unit],
        inventory: Inventory,
        allocate: AllocateConfig,
        metrics: PluginMetrics,
    ) -> None:
        self.resource = resource
        self.units = units
        self.by_id = {u.id: i for i, u in enumerate(units)}
        self.inventory = inventory
        self.allocate_config = allocate
        self.metrics = metrics
        # Pair scores among the units, computed once: the same go-gpuallocator scores the scheduler uses.
        self.links = Links.among([u.device.pci for u in units], [])
        self.stopping = threading.Event()
        self.streams = 0  # ListAndWatch streams open now: the kubelet watches us only while it holds one
        self._streams_lock = threading.Lock()
        self.publish(inventory.healthy)

    # ------------------------------------------------------------------------------------ helpers

    def device_list(self, healthy: dict[str, bool]) -> pb.ListAndWatchResponse:
        devices = []
        for u in self.units:
            numa = u.device.numa_node
            topology = pb.TopologyInfo(nodes=[pb.NUMANode(ID=numa)]) if numa is not None else None
            devices.append(
                pb.Device(ID=u.id, health=HEALTHY if healthy.get(u.device.id) else UNHEALTHY, topology=topology)
            )
        return pb.ListAndWatchResponse(devices=devices)

    def publish(self, healthy: dict[str, bool]) -> None:
        ok = sum(1 for u in self.units if healthy.get(u.device.id))
        self.metrics.set_devices(self.resource, ok, len(self.units) - ok)

    def _known(self, ids: Sequence[str], field: str) -> list[int]:
        unknown = [i for i in ids if i not in self.by_id]
        if unknown:
            # A status message travels in HTTP/2 trailers (8 KiB by default): name a few, count the rest.
            named = ", ".join(repr(i[:MAX_ID_IN_MESSAGE]) for i in unknown[:MAX_IDS_IN_MESSAGE])
            more = f" and {len(unknown) - MAX_IDS_IN_MESSAGE} more" if len(unknown) > MAX_IDS_IN_MESSAGE else ""
            raise RequestError(grpc.StatusCode.NOT_FOUND, f"{field}: unknown device ID(s) {named}{more}")
        if len(set(ids)) != len(ids):
            raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, f"{field}: a device ID is listed twice")
        return [self.by_id[i] for i in ids]

    # ------------------------------------------------------------------------------------ RPCs

    def GetDevicePluginOptions(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)

    def ListAndWatch(self, request: pb.Empty, context: grpc.ServicerContext) -> Iterator[pb.ListAndWatchResponse]:
        healthy, updates = self.inventory.subscribe()
        with self._streams_lock:
            self.streams += 1
        try:
            yield self.device_list(healthy)
            while context.is_active() and not self.stopping.is_set():
                try:
                    healthy = updates.get(timeout=STREAM_POLL_SECONDS)  # type: ignore[assignment]
                except queue.Empty:
                    continue
                if healthy is None:
                    return
                yield self.device_list(healthy)
        finally:
            with self._streams_lock:
                self.streams -= 1
            self.inventory.unsubscribe(updates)

    @_refusals
    def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        if not request.container_requests:
            raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "no container_requests")
        return pb.PreferredAllocationResponse(
            container_responses=[
                pb.ContainerPreferredAllocationResponse(deviceIDs=self.preferred(r)) for r in request.container_requests
            ]
        )

    def preferred(self, r: pb.ContainerPreferredAllocationRequest) -> list[str]:
        """The scheduler's choice (``best_set``: NUMA and PCIe pair scores) among the available devices."""
        available = self._known(list(r.available_deviceIDs), "available_deviceIDs")
        required = self._known(list(r.must_include_deviceIDs), "must_include_deviceIDs")
        size = r.allocation_size
        if size <= 0:
            raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, f"allocation_size must be > 0, got {size}")
        if size > len(available):
            raise RequestError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"allocation_size {size} is more than the {len(available)} available device(s)",
            )
        outside = [self.units[i].id for i in required if i not in available]
        if outside:
            raise RequestError(
                grpc.StatusCode.INVALID_ARGUMENT, f"must_include_deviceIDs not available: {', '.join(outside)}"
            )
        if len(required) > size:
            raise RequestError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{len(required)} must_include_deviceIDs do not fit in allocation_size {size}",
            )
        # Packing: prefer the switch already busy. An unhealthy device is missing from available_deviceIDs too, but
        # the kubelet leaves it out for its health, not because a container uses it: it must not draw work beside it.
        healthy, free = self.inventory.healthy, set(available)
        in_use = [i for i, u in enumerate(self.units) if i not in free and healthy.get(u.device.id)]
        chosen, _ = best_set(sorted(available), size, self.links, in_use, False, required=required)
        ids = [self.units[i].id for i in sorted(chosen)]
        log.info(
            "%s: GetPreferredAllocation(size %d of %s) -> %s",
            self.resource,
            size,
            ",".join(r.available_deviceIDs),
            ",".join(ids),
        )
        return ids

    @_refusals
    def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        if not request.container_requests:
            raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "no container_requests")
        healthy = self.inventory.healthy  # one consistent view for the whole request
        responses = [self.container_response(list(r.devices_ids), healthy) for r in request.container_requests]
        for r in request.container_requests:  # what the kubelet gave, the one record of it on the node side
            log.info("%s: Allocate(%s)", self.resource, ",".join(r.devices_ids))
        self.metrics.allocations.labels(self.resource).inc(len(responses))
        return pb.AllocateResponse(container_responses=responses)

    def container_response(self, ids: list[str], healthy: dict[str, bool]) -> pb.ContainerAllocateResponse:
        if not ids:
            raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "a container request lists no devices_ids")
        units = [self.units[i] for i in self._known(ids, "devices_ids")]
        sick = [u.id for u in units if not healthy.get(u.device.id)]
        if sick:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, f"unhealthy device(s): {', '.join(sick)}")
        cfg = self.allocate_config
        visible = list(dict.fromkeys(u.visible for u in units))  # two replicas of one device: shown once
        physical = list(dict.fromkeys(u.device for u in units))
        specs = [
            pb.DeviceSpec(container_path=p, host_path=p, permissions=cfg.permissions)
            for p in dict.fromkeys(
                [p for d in physical for p in self.device_node_paths(d)] + list(cfg.shared_device_nodes)
            )
        ]
        return pb.ContainerAllocateResponse(
            envs={cfg.env_var: ",".join(visible)},
            devices=specs,
            mounts=[
                pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
                for m in cfg.mounts
            ],
            cdi_devices=[pb.CDIDevice(name=f"{cfg.cdi_kind}={v}") for v in visible] if cfg.cdi_kind else [],
        )

    def device_node_paths(self, device: PhysicalDevice) -> list[str]:
        """``allocate.deviceNodes`` filled in for one device. ``{accel}``, ``{render}`` and ``{card}`` are the node
        numbers the driver gave it, read from sysfs now (a rebound driver may number it anew); a device without
        the node asked for is refused rather than given some other device's node."""
        templates = self.allocate_config.device_nodes
        if not templates:
            return []
        fields: dict[str, object] = {"index": device.index, "id": device.id}
        if any(f"{{{name}}}" in t for t in templates for name in NODE_PLACEHOLDERS):
            fields.update(self.inventory.source.device_nodes(device))
        try:
            return [render_template(t, fields) for t in templates]
        except KeyError as exc:
            name = exc.args[0]
            raise RequestError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"device {device.id} has no {NODE_PLACEHOLDERS[name]}* device node in sysfs (is its driver bound?)",
            ) from None

    def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        return pb.PreStartContainerResponse()


class ResourceServer:
    """A gRPC server for one DevicePluginService on ``<socket_dir>/<endpoint>``; restartable on the same path.

    The socket is bound under a private temporary name and renamed onto the endpoint. Two reasons: the endpoint
    appears whole (a stale file or an older instance's socket is replaced in one step), and gRPC unlinks the path it
    bound when it stops, whatever file is there by then; bound privately, stopping never removes a socket that
    another instance has since put at the endpoint.
    """

    def __init__(self, service: DevicePluginService, socket_dir: str, endpoint: str, max_workers: int = 32) -> None:
        self.service = service
        self.socket_dir = socket_dir
        self.endpoint = endpoint
        self.max_workers = max_workers
        self.superseded = False  # another instance's socket replaced ours: it serves this resource now
        self._server: grpc.Server | None = None
        self._inode: int | None = None

    @property
    def path(self) -> str:
        return os.path.join(self.socket_dir, self.endpoint)

    def start(self) -> bool:
        """Serve on the endpoint (replacing whatever file is there); False when the folder lost our socket before
        it was in place (a kubelet restart emptying it): nothing is served and the next watch step tries again."""
        self.service.stopping.clear()
        self.superseded = False
        private = os.path.join(self.socket_dir, f"{TEMP_SOCKET_PREFIX}{secrets.token_hex(4)}.sock")
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="dp-grpc"))
        pb_grpc.add_DevicePluginServicer_to_server(self.service, server)
        server.add_insecure_port(f"unix://{private}")
        server.start()
        try:
            inode = os.stat(private).st_ino
            os.replace(private, self.path)
        except FileNotFoundError:
            server.stop(0).wait()
            log.warning("socket for %s vanished before it was in place (kubelet restart?)", self.service.resource)
            return False
        self._server, self._inode = server, inode
        log.info("serving %s on %s", self.service.resource, self.path)
        return True

    def socket_state(self) -> str:
        """OURS; MISSING (removed: a kubelet restart, we must serve and register again); REPLACED (another
        instance's socket is at our path: it took the resource over, and re-serving would take it back)."""
        if self._inode is None:
            return MISSING  # not serving at all
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            return MISSING
        return OURS if inode == self._inode else REPLACED

    def socket_intact(self) -> bool:
        return self.socket_state() == OURS

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving; the endpoint is removed only while it is still our socket."""
        self.service.stopping.set()
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None
        if self.socket_intact():
            os.unlink(self.path)
        self._inode = None

    def give_up(self) -> None:
        """Another instance took the endpoint: stop serving without touching its socket, and stay stopped."""
        self.stop(grace=0)
        self.superseded = True

    @property
    def serving(self) -> bool:
        return self._server is not None and self.socket_intact()
