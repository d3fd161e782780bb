"""A kubelet-side peer for device plugin tests, written from the proto: it plays the kubelet's device manager.

It serves Registration on ``<dir>/kubelet.sock`` and answers Register as the kubelet's v1beta1 server does
(pkg/kubelet/cm/devicemanager/plugin/v1beta1: ``Register`` -> ``connectClient`` -> ``client.Connect``): it checks
the version, dials the plugin's endpoint in the same folder (blocking, 10 s) and calls GetDevicePluginOptions
before Register returns, failing Register if it cannot; only then it opens ListAndWatch (``runClient``), recording
every device list streamed. Its client bookkeeping is upstream's too: a Register for a resource that already has a
client at the same socket path is answered OK without connecting again (at another path it is refused), and when
a client's stream ends, whichever client is current under that resource name is disconnected.

``restart`` does what a restarting kubelet does to the folder: stop, delete every socket in it, serve a new
kubelet.sock. ``replace_socket`` puts a new kubelet.sock in place in one step and leaves every other socket alone.
"""

from __future__ import annotations

import os
import queue
import secrets
import stat
import threading
from concurrent import futures
from dataclasses import dataclass, field

import grpc

from accelsched.deviceplugin.proto import api_pb2 as pb
from accelsched.deviceplugin.proto import api_pb2_grpc as pb_grpc

WAIT = 10.0  # upper bound on any wait: tests wait for events, never sleep
DIAL_TIMEOUT = 10.0  # the kubelet's dial of a registering plugin (connectionTimeout in its client.go)
SUPPORTED_VERSIONS = ("v1beta1",)


@dataclass
class Endpoint:
    """One registered plugin as the kubelet sees it."""

    request: pb.RegisterRequest
    channel: grpc.Channel
    stub: pb_grpc.DevicePluginStub
    options: pb.DevicePluginOptions
    lists: queue.Queue = field(default_factory=queue.Queue)  # every ListAndWatchResponse, in order
    stream: object = None
    ended: threading.Event = field(default_factory=threading.Event)  # ListAndWatch is over (every list is in lists)

    def next_list(self, timeout: float = WAIT) -> dict[str, str]:
        """The next device list streamed: ID -> health."""
        response = self.lists.get(timeout=timeout)
        return {d.ID: d.health for d in response.devices}


class KubeletPeer(pb_grpc.RegistrationServicer):
    def __init__(self, socket_dir: str, dial_timeout: float = DIAL_TIMEOUT) -> None:
        self.socket_dir = socket_dir
        self.dial_timeout = dial_timeout
        self.refuse: str | None = None  # set: every Register is refused with this message (after it is recorded)
        self.registrations: queue.Queue[pb.RegisterRequest] = queue.Queue()  # every Register, refused ones too
        self.endpoints: dict[str, Endpoint] = {}  # resource -> the latest registration's endpoint
        self._connected: queue.Queue[Endpoint] = queue.Queue()
        self._server: grpc.Server | None = None
        self._lock = threading.Lock()

    @property
    def path(self) -> str:
        return os.path.join(self.socket_dir, "kubelet.sock")

    def _serve(self) -> grpc.Server:
        """A Registration server whose socket is renamed onto kubelet.sock: it appears in one step, and stopping
        the server later (gRPC unlinks the path it bound) never removes a newer kubelet.sock."""
        private = os.path.join(self.socket_dir, f".kubelet-{secrets.token_hex(4)}.sock")
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_RegistrationServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{private}")
        server.start()
        os.replace(private, self.path)
        return server

    def start(self) -> KubeletPeer:
        self._server = self._serve()
        return self

    def _drop_endpoints(self) -> None:
        with self._lock:
            for ep in self.endpoints.values():
                ep.channel.close()
            self.endpoints.clear()

    def stop(self) -> None:
        """The kubelet dies: its connections close; its kubelet.sock stays behind, as a dead process leaves it."""
        self._drop_endpoints()
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None

    def restart(self) -> None:
        """What a kubelet restart does to the folder: every socket in it is removed, then kubelet.sock is new."""
        self.stop()
        for name in os.listdir(self.socket_dir):
            path = os.path.join(self.socket_dir, name)
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)
        self.start()

    def replace_socket(self) -> None:
        """A new kubelet whose start left the plugins' sockets alone: only kubelet.sock is new, and it never goes
        missing in between, so a plugin can tell only by kubelet.sock's identity."""
        old = self._server
        self._drop_endpoints()
        self._server = self._serve()
        if old is not None:
            old.stop(0).wait()

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        self.registrations.put(request)
        if self.refuse is not None:
            context.abort(grpc.StatusCode.UNKNOWN, self.refuse)
        if request.version not in SUPPORTED_VERSIONS:
            context.abort(
                grpc.StatusCode.UNKNOWN,
                f"requested API version {request.version!r} is not supported by kubelet."
                f" Supported versions are {list(SUPPORTED_VERSIONS)}",
            )
        path = os.path.join(self.socket_dir, request.endpoint)
        with self._lock:
            current = self.endpoints.get(request.resource_name)
        if current is not None:
            current_path = os.path.join(self.socket_dir, current.request.endpoint)
            if current_path != path:
                context.abort(
                    grpc.StatusCode.UNKNOWN,
                    f"the device plugin {request.resource_name} already registered with a different socket path"
                    f" {current_path}",
                )
            return pb.Empty()  # "Client already connected with the same socket path"
        ep = self._connect(request)
        if isinstance(ep, str):
            context.abort(grpc.StatusCode.UNKNOWN, ep)
        return pb.Empty()

    def drop(self, resource: str) -> None:
        """Disconnect the client for ``resource`` as the kubelet's runClient does: its channel closes."""
        with self._lock:
            ep = self.endpoints.pop(resource, None)
        if ep is not None:
            ep.channel.close()

    def _connect(self, request: pb.RegisterRequest) -> Endpoint | str:
        """The kubelet's connectClient: dial (blocking), GetDevicePluginOptions, then ListAndWatch in the
        background. Returns the endpoint, or why it failed (Register then fails with it)."""
        channel = grpc.insecure_channel(f"unix://{os.path.join(self.socket_dir, request.endpoint)}")
        stub = pb_grpc.DevicePluginStub(channel)
        try:
            grpc.channel_ready_future(channel).result(timeout=self.dial_timeout)
            options = stub.GetDevicePluginOptions(pb.Empty(), timeout=WAIT)
        except grpc.FutureTimeoutError:
            channel.close()
            return f"failed to dial device plugin: context deadline exceeded ({request.endpoint})"
        except grpc.RpcError as exc:
            channel.close()
            return f"failed to get device plugin options: {exc.code().name}: {exc.details()}"
        ep = Endpoint(request, channel, stub, options)
        ep.stream = stub.ListAndWatch(pb.Empty())

        def pump() -> None:
            try:
                for response in ep.stream:  # type: ignore[attr-defined]
                    ep.lists.put(response)
            except grpc.RpcError:
                pass  # the plugin went away or we closed the channel
            finally:
                self.drop(request.resource_name)  # runClient: whichever client is current now, not necessarily ep
                ep.ended.set()

        with self._lock:
            self.endpoints[request.resource_name] = ep
        threading.Thread(target=pump, daemon=True).start()
        self._connected.put(ep)
        return ep

    def next_registration(self, timeout: float = WAIT) -> pb.RegisterRequest:
        return self.registrations.get(timeout=timeout)

    def next_endpoint(self, timeout: float = WAIT) -> Endpoint:
        """The next plugin connection made after a Register (options fetched, ListAndWatch open)."""
        return self._connected.get(timeout=timeout)
