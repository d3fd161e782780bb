"""Plugin registration: the kubelet's plugin watcher finds ``<driver>-reg.sock`` and asks us who we are.

The kubelet (pkg/kubelet/pluginmanager) watches plugins_registry with inotify; for each new socket (names starting
with "." are ignored) it dials it, calls GetInfo, hands the answer to the handler for its ``type`` ("DRAPlugin":
the DRA plugin manager, which accepts it when one of ``supported_versions`` is a service it speaks, "v1.DRAPlugin"
or "v1beta1.DRAPlugin" in 1.36) and reports the outcome with NotifyRegistrationStatus. ``endpoint`` is the DRA
service socket it then dials for NodePrepareResources. A kubelet restart registers every socket it finds again,
so nothing needs to be redone on our side; a socket that is removed is served again by the driver's watch loop.
"""

from __future__ import annotations

import logging
import queue
import threading

import grpc

from accelsched.dra.driver.proto import pluginregistration_pb2 as reg
from accelsched.dra.driver.proto import pluginregistration_pb2_grpc as reg_grpc
from accelsched.dra.driver.server import SERVICE

log = logging.getLogger(__name__)

PLUGIN_TYPE = "DRAPlugin"  # k8s.io/kubelet/pkg/apis/pluginregistration/v1 DRAPlugin
DEFAULT_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"
DEFAULT_PLUGINS_DIR = "/var/lib/kubelet/plugins"


def registration_socket(registry_dir: str, driver: str) -> str:
    return f"{registry_dir}/{driver}-reg.sock"


def service_socket(plugins_dir: str, driver: str) -> str:
    return f"{plugins_dir}/{driver}/dra.sock"


class RegistrationService(reg_grpc.RegistrationServicer):
    def __init__(self, driver: str, endpoint: str, versions: tuple[str, ...] = (SERVICE,)) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.versions = versions
        self.registered = threading.Event()
        self.statuses: queue.Queue[reg.RegistrationStatus] = queue.Queue()  # every status the kubelet sent
        self.last_error = ""

    def GetInfo(self, request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:
        return reg.PluginInfo(
            type=PLUGIN_TYPE, name=self.driver, endpoint=self.endpoint, supported_versions=list(self.versions)
        )

    def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        self.statuses.put(request)
        if request.plugin_registered:
            self.registered.set()
            self.last_error = ""
            log.info("registered with the kubelet as %s (%s)", self.driver, self.endpoint)
            return reg.RegistrationStatusResponse()
        self.registered.clear()
        self.last_error = request.error
        log.error("the kubelet refused the registration: %s", request.error)
        # As the kubelet's own plugin helper (kubeletplugin/registrationserver.go) answers a refusal.
        context.abort(grpc.StatusCode.UNKNOWN, f"failed registration process: {request.error}")
