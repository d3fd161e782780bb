"""A kubelet-side peer for device plugin tests, written from the proto: it plays the kubelet's device manager.

It serves Registration on ``<dir>/kubelet.sock``; on every Register it dials the plugin's endpoint in the same
folder, asks for its options and opens ListAndWatch, recording every device list streamed. ``restart`` does what a
restarting kubelet does to the folder: stop, delete every socket in it, serve a new kubelet.sock.
"""

from __future__ import annotations

import os
import queue
import stat
import threading
from concurrent import futures
from dataclasses import dataclass, field

import grpc

from accelsched.deviceplugin.proto import api_pb2 as pb
from accelsched.deviceplugin.proto import api_pb2_grpc as pb_grpc

WAIT = 10.0  # upper bound on any wait: tests wait for events, never sleep


@dataclass
class Endpoint:
    """One registered plugin as the kubelet sees it."""

    request: pb.RegisterRequest
    channel: grpc.Channel
    stub: pb_grpc.DevicePluginStub
    options: pb.DevicePluginOptions
    lists: queue.Queue = field(default_factory=queue.Queue)  # every ListAndWatchResponse, in order
    stream: object = None

    def next_list(self, timeout: float = WAIT) -> dict[str, str]:
        """The next device list streamed: ID -> health."""
        response = self.lists.get(timeout=timeout)
        return {d.ID: d.health for d in response.devices}


class KubeletPeer(pb_grpc.RegistrationServicer):
    def __init__(self, socket_dir: str) -> None:
        self.socket_dir = socket_dir
        self.registrations: queue.Queue[pb.RegisterRequest] = queue.Queue()
        self.endpoints: dict[str, Endpoint] = {}  # resource -> the latest registration's endpoint
        self._connected: queue.Queue[Endpoint] = queue.Queue()
        self._server: grpc.Server | None = None
        self._lock = threading.Lock()

    @property
    def path(self) -> str:
        return os.path.join(self.socket_dir, "kubelet.sock")

    def start(self) -> KubeletPeer:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_RegistrationServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.path}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        with self._lock:
            for ep in self.endpoints.values():
                ep.channel.close()
            self.endpoints.clear()
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

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        self.registrations.put(request)
        # Like the kubelet, dial back after answering, so the plugin's Register call is not held up.
        threading.Thread(target=self._connect, args=(request,), daemon=True).start()
        return pb.Empty()

    def _connect(self, request: pb.RegisterRequest) -> None:
        channel = grpc.insecure_channel(f"unix://{os.path.join(self.socket_dir, request.endpoint)}")
        stub = pb_grpc.DevicePluginStub(channel)
        options = stub.GetDevicePluginOptions(pb.Empty(), timeout=WAIT, wait_for_ready=True)
        ep = Endpoint(request, channel, stub, options)
        ep.stream = stub.ListAndWatch(pb.Empty())

        def pump() -> None:
            try:
                for response in ep.stream:  # type: ignore[attr-defined]
                    ep.lists.put(response)
            except grpc.RpcError:
                pass  # the plugin went away or we closed the channel

        threading.Thread(target=pump, daemon=True).start()
        with self._lock:
            old = self.endpoints.get(request.resource_name)
            self.endpoints[request.resource_name] = ep
        if old is not None:
            old.channel.close()
        self._connected.put(ep)

    def next_registration(self, timeout: float = WAIT) -> pb.RegisterRequest:
        return self.registrations.get(timeout=timeout)

    def next_endpoint(self, timeout: float = WAIT) -> Endpoint:
        """The next plugin connection made after a Register (options fetched, ListAndWatch open)."""
        return self._connected.get(timeout=timeout)
