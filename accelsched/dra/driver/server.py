"""The DRAPlugin gRPC service (k8s.io/kubelet/pkg/apis/dra/v1) and the unix-socket servers it and registration use.

A request as a whole is refused with a gRPC status when it is malformed: a claim without its UID, namespace or name
(all REQUIRED in api.proto), or one UID listed twice (the response is a map keyed by UID, so the two could not be
answered apart): INVALID_ARGUMENT. Everything that can go wrong with one well-formed claim is answered in that
claim's entry of the response map (``error``), which the kubelet reports as "NodePrepareResources failed for
ResourceClaim <name>: <error>" and retries. Every claim of the request gets an entry, as the API requires. An
unexpected failure is INTERNAL with its message, never a traceback on the wire, and the server keeps serving.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc

from accelsched.dra.driver.prepare import ClaimError, Preparer
from accelsched.dra.driver.proto import api_pb2 as pb
from accelsched.dra.driver.proto import api_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

SERVICE = "v1.DRAPlugin"  # what GetInfo lists: k8s.io/kubelet/pkg/apis/dra/v1 DRAPluginService
TEMP_SOCKET_PREFIX = ".accelsched-"  # the kubelet's plugin watcher ignores names starting with "."


class RequestError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _statuses(method: Callable[..., Any]) -> Callable[..., Any]:
    """RequestError -> its status; anything else -> INTERNAL with the exception's message (logged with its trace)."""

    @functools.wraps(method)
    def rpc(self: DRAPluginService, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except RequestError as exc:
            context.abort(exc.code, str(exc))
        except Exception as exc:
            log.exception("%s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")

    return rpc


def _claims(request: Any) -> list[Any]:
    seen: set[str] = set()
    for i, claim in enumerate(request.claims):
        for name in ("uid", "namespace", "name"):
            if not getattr(claim, name):
                raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, f"claims[{i}].{name} is required")
        if claim.uid in seen:
            raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, f"claims[{i}].uid {claim.uid} is listed twice")
        seen.add(claim.uid)
    return list(request.claims)


class DRAPluginService(pb_grpc.DRAPluginServicer):
    def __init__(self, preparer: Preparer) -> None:
        self.preparer = preparer

    @_statuses
    def NodePrepareResources(
        self, request: pb.NodePrepareResourcesRequest, context: grpc.ServicerContext
    ) -> pb.NodePrepareResourcesResponse:
        response = pb.NodePrepareResourcesResponse()
        for claim in _claims(request):
            entry = response.claims[claim.uid]
            try:
                prepared = self.preparer.prepare(claim.namespace, claim.uid, claim.name)
            except ClaimError as exc:
                entry.error = str(exc)
                log.warning("prepare %s/%s (%s): %s", claim.namespace, claim.name, claim.uid, exc)
                continue
            for d in prepared.devices:
                device = entry.devices.add(
                    request_names=list(d.requests),
                    pool_name=d.pool,
                    device_name=d.device,
                    cdi_device_ids=d.cdi_device_ids,
                )
                if d.share_id is not None:
                    device.share_id = d.share_id
            log.info(
                "prepared %s/%s (%s): %s",
                claim.namespace,
                claim.name,
                claim.uid,
                ", ".join(d.device for d in prepared.devices),
            )
        return response

    @_statuses
    def NodeUnprepareResources(
        self, request: pb.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> pb.NodeUnprepareResourcesResponse:
        response = pb.NodeUnprepareResourcesResponse()
        for claim in _claims(request):
            entry = response.claims[claim.uid]  # present even when empty: "all claims ... must have an entry"
            try:
                self.preparer.unprepare(claim.namespace, claim.uid, claim.name)
                log.info("unprepared %s/%s (%s)", claim.namespace, claim.name, claim.uid)
            except ClaimError as exc:
                entry.error = str(exc)
        return response


class SocketServer:
    """A gRPC server on a unix socket ``path``, restartable; ``add`` puts the services on it.

    As the device plugin's ResourceServer does, it binds a private ``.``-prefixed name in the same folder and renames
    it onto ``path``: the socket appears whole (the kubelet's watcher sees one create event, for a socket that
    already answers), a stale file is replaced in one step, and since gRPC unlinks the path it bound when it stops,
    stopping never removes a socket a newer instance has put at ``path``.
    """

    def __init__(self, path: str, add: Callable[[grpc.Server], None], max_workers: int = 8) -> None:
        self.path = path
        self.add = add
        self.max_workers = max_workers
        self._server: grpc.Server | None = None
        self._inode: int | None = None

    def start(self) -> None:
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        private = os.path.join(folder, f"{TEMP_SOCKET_PREFIX}{secrets.token_hex(4)}.sock")
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="dra-grpc"))
        self.add(server)
        server.add_insecure_port(f"unix://{private}")
        server.start()
        try:
            inode = os.stat(private).st_ino
            os.replace(private, self.path)
        except OSError:
            server.stop(0).wait()
            raise
        self._server, self._inode = server, inode
        log.info("serving on %s", self.path)

    def intact(self) -> bool:
        """Our socket is still at ``path`` (not removed, not replaced)."""
        try:
            return self._inode is not None and os.stat(self.path).st_ino == self._inode
        except FileNotFoundError:
            return False

    def stop(self, grace: float | None = 1.0) -> None:
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None
        if self.intact():
            os.unlink(self.path)
        self._inode = None

    def restart(self) -> None:
        self.stop(grace=0)
        self.start()
