"""A kubelet-side peer for DRA driver tests, written from the kubelet's source (kubernetes v1.36.3): it plays the
plugin manager (pkg/kubelet/pluginmanager) and the DRA manager (pkg/kubelet/cm/dra).

Plugin manager: it watches the registry folder (the kubelet uses inotify; a poll every 20 ms sees the same create
and remove events), ignores names starting with "." and files that are not sockets, and registers each socket as
operation_generator.go's GenerateRegisterPluginFunc does: dial (blocking, 10 s), GetInfo (1 s), pick the handler
by ``type`` (only "DRAPlugin" here), take ``endpoint`` (the socket itself when empty), validate the supported
versions as dra_plugin_manager.go's validateSupportedServices, register, and report the outcome with
NotifyRegistrationStatus, with upstream's error strings. A socket that is replaced (a new file: the kubelet sees
a new create event and a new timestamp) is unregistered and registered again; a removed one is unregistered.

DRA manager: ``prepare``/``unprepare`` call the chosen plugin as manager.go does (one batch per driver, 45 s
timeout) and apply its checks on the response: a result for an unknown claim UID, a claim's ``error``, and claims
left out are errors with manager.go's messages (DRAError).
"""

from __future__ import annotations

import os
import queue
import stat
import threading
import time
from dataclasses import dataclass, field

import grpc

from accelsched.dra.driver.proto import api_pb2 as pb
from accelsched.dra.driver.proto import api_pb2_grpc as pb_grpc
from accelsched.dra.driver.proto import pluginregistration_pb2 as reg
from accelsched.dra.driver.proto import pluginregistration_pb2_grpc as reg_grpc

WAIT = 10.0  # upper bound on any wait in tests
DIAL_TIMEOUT = 10.0  # operationexecutor dialTimeoutDuration
GET_INFO_TIMEOUT = 1.0  # context.WithTimeout(ctx, time.Second) around GetInfo
NOTIFY_TIMEOUT = 10.0  # notifyTimeoutDuration
CALL_TIMEOUT = 45.0  # dra_plugin.go defaultClientCallTimeout
SERVICES_SUPPORTED_BY_KUBELET = ("v1.DRAPlugin", "v1beta1.DRAPlugin")  # dra_plugin.go servicesSupportedByKubelet
POLL = 0.02


class DRAError(Exception):
    """What the kubelet's DRA manager would return (and put in the pod's events) for a failed call."""


@dataclass
class Plugin:
    driver: str
    endpoint: str
    service: str
    socket: str
    channel: grpc.Channel
    stub: pb_grpc.DRAPluginStub


@dataclass
class Registration:
    """One registration attempt: the GetInfo answer and the error it ended with ("" when registered)."""

    socket: str
    info: reg.PluginInfo | None
    error: str
    notified: bool = False  # NotifyRegistrationStatus was answered OK


@dataclass
class DRAKubeletPeer:
    registry_dir: str
    handlers: tuple[str, ...] = ("DRAPlugin",)
    plugins: dict[str, list[Plugin]] = field(default_factory=dict)  # driver -> registered plugins (newest last)
    attempts: queue.Queue = field(default_factory=queue.Queue)  # every Registration, in order

    def __post_init__(self) -> None:
        self._seen: dict[str, tuple[int, int]] = {}  # socket path -> (inode, ctime) registered
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------ plugin manager

    def start(self) -> DRAKubeletPeer:
        os.makedirs(self.registry_dir, exist_ok=True)
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            for plugins in self.plugins.values():
                for p in plugins:
                    p.channel.close()
            self.plugins.clear()
            self._seen.clear()

    def restart(self) -> None:
        """A kubelet restart: every registration is forgotten; the new kubelet registers the sockets it finds."""
        self.stop()
        self._stop = threading.Event()
        self.start()

    def _sockets(self) -> dict[str, tuple[int, int]]:
        """The sockets there now, by identity: a socket made anew differs in ctime even when its inode is reused."""
        out = {}
        for name in os.listdir(self.registry_dir):
            if name.startswith("."):
                continue  # "Ignoring file (starts with '.')"
            path = os.path.join(self.registry_dir, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if stat.S_ISSOCK(st.st_mode):
                out[path] = (st.st_ino, st.st_ctime_ns)
        return out

    def _watch(self) -> None:
        while not self._stop.is_set():
            now = self._sockets()
            for path, inode in now.items():
                if self._seen.get(path) != inode:
                    if path in self._seen:
                        self._deregister(path)
                    self._seen[path] = inode
                    self._register(path)
            for path in [p for p in self._seen if p not in now]:
                del self._seen[path]
                self._deregister(path)
            self._stop.wait(POLL)

    def _register(self, socket: str) -> None:
        channel = grpc.insecure_channel(f"unix://{socket}")
        try:
            try:
                grpc.channel_ready_future(channel).result(timeout=DIAL_TIMEOUT)
            except grpc.FutureTimeoutError:
                self.attempts.put(Registration(socket, None, f"RegisterPlugin error -- dial failed at socket {socket}"))
                return
            client = reg_grpc.RegistrationStub(channel)
            try:
                info = client.GetInfo(reg.InfoRequest(), timeout=GET_INFO_TIMEOUT)
            except grpc.RpcError as exc:
                error = f"RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket {socket}"
                self.attempts.put(Registration(socket, None, f"{error}, err: {exc.details()}"))
                return
            if info.type not in self.handlers:
                error = f"RegisterPlugin error -- no handler registered for plugin type: {info.type} at socket {socket}"
                self._notify(client, Registration(socket, info, error))
                return
            endpoint = info.endpoint or socket
            try:
                service = self._validate(info.name, endpoint, list(info.supported_versions))
            except DRAError as exc:
                error = f"RegisterPlugin error -- plugin validation failed with err: {exc}"
                self._notify(client, Registration(socket, info, error))
                return
            error = self._add(info.name, endpoint, service, socket)
            if error:
                self._notify(
                    client,
                    Registration(socket, info, f"RegisterPlugin error -- plugin registration failed with err: {error}"),
                )
                return
            if not self._notify(client, Registration(socket, info, "")):
                self._deregister(socket)
        finally:
            channel.close()

    def _notify(self, client: reg_grpc.RegistrationStub, attempt: Registration) -> bool:
        status = reg.RegistrationStatus(plugin_registered=not attempt.error, error=attempt.error)
        try:
            client.NotifyRegistrationStatus(status, timeout=NOTIFY_TIMEOUT)
            attempt.notified = True
        except grpc.RpcError:
            attempt.notified = False
        self.attempts.put(attempt)
        return attempt.notified and not attempt.error

    @staticmethod
    def _validate(driver: str, endpoint: str, services: list[str]) -> str:
        prefix = f"invalid supported gRPC versions of DRA driver plugin {driver} at endpoint {endpoint}: "
        if not services:
            raise DRAError(prefix + "empty list of supported gRPC services (aka supported versions)")
        for s in services:
            if s in SERVICES_SUPPORTED_BY_KUBELET:
                return s
        theirs = "[" + " ".join(f'"{s}"' for s in services) + "]"
        ours = "[" + " ".join(f'"{s}"' for s in SERVICES_SUPPORTED_BY_KUBELET) + "]"
        raise DRAError(
            prefix + f"none of services supported by the plugin ({theirs}) are supported by the kubelet ({ours})"
        )

    def _add(self, driver: str, endpoint: str, service: str, socket: str) -> str:
        with self._lock:
            if any(p.endpoint == endpoint for p in self.plugins.get(driver, [])):
                return f"endpoint {endpoint} already registered for DRA driver plugin {driver}"
            channel = grpc.insecure_channel(f"unix:{endpoint}")
            self.plugins.setdefault(driver, []).append(
                Plugin(driver, endpoint, service, socket, channel, pb_grpc.DRAPluginStub(channel))
            )
        return ""

    def _deregister(self, socket: str) -> None:
        with self._lock:
            for driver, plugins in list(self.plugins.items()):
                for p in [p for p in plugins if p.socket == socket]:
                    plugins.remove(p)
                    p.channel.close()
                if not plugins:
                    del self.plugins[driver]

    def next_attempt(self, timeout: float = WAIT) -> Registration:
        return self.attempts.get(timeout=timeout)

    def wait_registered(self, driver: str, timeout: float = WAIT) -> Plugin:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            plugin = self.get(driver)
            if plugin is not None:
                return plugin
            time.sleep(POLL)
        raise TimeoutError(f"DRA driver {driver} did not register within {timeout}s")

    def get(self, driver: str) -> Plugin | None:
        with self._lock:
            plugins = self.plugins.get(driver) or []
            return plugins[-1] if plugins else None

    # ------------------------------------------------------------------------------------ DRA manager

    def _plugin(self, driver: str) -> Plugin:
        plugin = self.get(driver)
        if plugin is None:
            raise DRAError(f"DRA driver {driver} is not registered")
        return plugin

    def prepare(self, driver: str, claims: list[tuple[str, str, str]]) -> dict[str, list[pb.Device]]:
        """NodePrepareResources for (namespace, uid, name) claims; claim UID -> devices, or DRAError as manager.go."""
        request = pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace=n, uid=u, name=m) for n, u, m in claims])
        try:
            response = self._plugin(driver).stub.NodePrepareResources(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as exc:
            raise DRAError(f"NodePrepareResources: rpc error: code = {_code(exc)} desc = {exc.details()}") from None
        names = {u: m for _, u, m in claims}
        out = {}
        for uid, result in response.claims.items():
            if uid not in names:
                raise DRAError(f"NodePrepareResources returned result for unknown claim UID {uid}")
            if result.error:
                raise DRAError(f"NodePrepareResources failed for ResourceClaim {names[uid]}: {result.error}")
            out[uid] = list(result.devices)
        if len(claims) != len(response.claims):
            raise DRAError(f"NodePrepareResources skipped {len(claims) - len(response.claims)} ResourceClaims")
        return out

    def unprepare(self, driver: str, claims: list[tuple[str, str, str]]) -> None:
        request = pb.NodeUnprepareResourcesRequest(claims=[pb.Claim(namespace=n, uid=u, name=m) for n, u, m in claims])
        try:
            response = self._plugin(driver).stub.NodeUnprepareResources(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as exc:
            raise DRAError(f"NodeUnprepareResources: rpc error: code = {_code(exc)} desc = {exc.details()}") from None
        names = {u: m for _, u, m in claims}
        for uid, result in response.claims.items():
            if uid not in names:
                raise DRAError(f"NodeUnprepareResources returned result for unknown claim UID {uid}")
            if result.error:
                raise DRAError(f"NodeUnprepareResources failed for ResourceClaim {names[uid]}: {result.error}")
        if len(claims) != len(response.claims):
            raise DRAError(f"NodeUnprepareResources skipped {len(claims) - len(response.claims)} ResourceClaims")


def _code(exc: grpc.RpcError) -> str:
    """Go's codes.Code String(): InvalidArgument, Internal, ... from Python's INVALID_ARGUMENT."""
    return "".join(part.title() for part in exc.code().name.split("_"))
