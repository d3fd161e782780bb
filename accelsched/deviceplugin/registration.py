"""Registering with the kubelet, noticing when we must do it again, and how soon to retry when it fails.

The kubelet serves Registration on ``kubelet.sock`` in the device-plugins folder. When it restarts it deletes every
socket in that folder (ours too) and creates a new kubelet.sock; it then knows no plugin until each registers again.
Real plugins watch the folder with inotify; here a cheap stat every watch interval sees the same two facts: the
kubelet socket is a new file (inode and ctime changed), or our own socket is gone.

Register is answered only after the kubelet has dialled our socket back and called GetDevicePluginOptions (its
``connectClient``), so a refusal can mean "bad request" or "cannot reach you". Either way the plugin retries with
a capped exponential backoff, reset when a new kubelet appears.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable

import grpc

from accelsched.deviceplugin.proto import api_pb2 as pb
from accelsched.deviceplugin.proto import api_pb2_grpc as pb_grpc
from accelsched.deviceplugin.server import KUBELET_SOCKET, VERSION

# Longer than the kubelet's own 10 s dial-back timeout, so its reason for refusing reaches us rather than ours.
REGISTER_TIMEOUT_SECONDS = 15.0
CANCEL_POLL_SECONDS = 0.05  # how soon an in-flight Register notices the plugin is stopping
BACKOFF_CAP_SECONDS = 30.0


def endpoint_for(resource: str) -> str:
    """The socket file name for a resource, unique per resource in the shared folder."""
    return "accelsched-" + resource.replace("/", "_") + ".sock"


def kubelet_identity(socket_dir: str) -> tuple[int, int] | None:
    """Which kubelet.sock is there now (inode, ctime): a different value means the kubelet restarted."""
    try:
        st = os.stat(os.path.join(socket_dir, KUBELET_SOCKET))
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_ctime_ns


class RegisterCancelled(Exception):
    """The plugin began stopping while a Register call was in flight; the call was cancelled."""


def register(
    socket_dir: str,
    endpoint: str,
    resource: str,
    cancel: threading.Event | None = None,
    timeout: float = REGISTER_TIMEOUT_SECONDS,
) -> None:
    """Call Registration/Register on the kubelet; raises grpc.RpcError when it is not there or refuses.

    No wait_for_ready: a kubelet.sock left by a dead kubelet refuses the connection at once (UNAVAILABLE) instead
    of holding the caller until the deadline. ``cancel`` set while the call is in flight cancels it
    (RegisterCancelled), so stopping the plugin never waits on a kubelet that accepted but does not answer."""
    target = f"unix://{os.path.join(socket_dir, KUBELET_SOCKET)}"
    request = pb.RegisterRequest(
        version=VERSION,
        endpoint=endpoint,
        resource_name=resource,
        options=pb.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True),
    )
    with grpc.insecure_channel(target) as channel:
        call = pb_grpc.RegistrationStub(channel).Register.future(request, timeout=timeout)
        while cancel is not None and not call.done():
            if cancel.wait(CANCEL_POLL_SECONDS):
                call.cancel()
                raise RegisterCancelled(resource)
        call.result()  # raises the RpcError of a failed call


class Backoff:
    """Per-key retry delays: after each failure the next attempt waits ``base``, then twice that, up to ``cap``.

    ``clock`` is injectable so tests step through the delays instead of sleeping."""

    def __init__(self, base: float, cap: float = BACKOFF_CAP_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.base = base
        self.cap = max(cap, base)
        self.clock = clock
        self._delay: dict[str, float] = {}
        self._next: dict[str, float] = {}

    def due(self, key: str) -> bool:
        return self.clock() >= self._next.get(key, -math.inf)

    def failed(self, key: str) -> float:
        """Record a failure; returns the delay before the next attempt."""
        delay = min(self.cap, self._delay[key] * 2) if key in self._delay else self.base
        self._delay[key] = delay
        self._next[key] = self.clock() + delay
        return delay

    def reset(self, key: str | None = None) -> None:
        """Forget the failures of ``key`` (all keys: None), e.g. after success or when a new kubelet appears."""
        for table in (self._delay, self._next):
            if key is None:
                table.clear()
            else:
                table.pop(key, None)
