"""Registering with the kubelet, and noticing when we must do it again.

The kubelet serves Registration on ``kubelet.sock`` in the device-plugins folder. When it restarts it deletes every
socket in that folder (ours too) and creates a new kubelet.sock; it then knows no plugin until each registers again.
Real plugins watch the folder with inotify; here a cheap stat every watch interval sees the same two facts: the
kubelet socket is a new file (inode and ctime changed), or our own socket is gone.
"""

from __future__ import annotations

import os

import grpc

from accelsched.deviceplugin.proto import api_pb2 as pb
from accelsched.deviceplugin.proto import api_pb2_grpc as pb_grpc
from accelsched.deviceplugin.server import KUBELET_SOCKET, VERSION

REGISTER_TIMEOUT_SECONDS = 5.0


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


def register(socket_dir: str, endpoint: str, resource: str, timeout: float = REGISTER_TIMEOUT_SECONDS) -> None:
    """Call Registration/Register on the kubelet; raises grpc.RpcError when it is not there or refuses."""
    target = f"unix://{os.path.join(socket_dir, KUBELET_SOCKET)}"
    request = pb.RegisterRequest(
        version=VERSION,
        endpoint=endpoint,
        resource_name=resource,
        options=pb.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True),
    )
    with grpc.insecure_channel(target) as channel:
        pb_grpc.RegistrationStub(channel).Register(request, timeout=timeout, wait_for_ready=True)
