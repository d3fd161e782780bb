"""One real node, up and torn down as a unit: control plane, containerd with the test images, the kubelet.

Used by the tests' session fixture (conftest.py) and by `make lab-node` (lab.py), so both run the very same node.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nodekit as nk
from dpkit import accel_device_nodes

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "live"))  # controlplane.py: the test API server

from controlplane import ControlPlane, apply_crds, build_controlplane


class NodeContext:
    """The session's real node and what tests need to talk to it."""

    def __init__(self, cp: ControlPlane, containerd: nk.Containerd, kubelet: nk.Kubelet, api: Any) -> None:
        self.control_plane = cp
        self.containerd = containerd
        self.kubelet = kubelet
        self.api = api
        self.name = kubelet.node_name

    @property
    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def read_node(self) -> Any:
        return self.core.read_node(self.name)

    def allocatable(self, resource: str) -> int:
        return int((self.read_node().status.allocatable or {}).get(resource, "0"))

    def capacity(self, resource: str) -> int:
        return int((self.read_node().status.capacity or {}).get(resource, "0"))

    def ready(self) -> bool:
        conds = self.read_node().status.conditions or []
        return any(c.type == "Ready" and c.status == "True" for c in conds)

    def untaint_not_ready(self) -> None:
        """The node lifecycle controller's part (there is no kube-controller-manager here): once the kubelet reports
        Ready, drop the ``node.kubernetes.io/not-ready`` taint that admission put on the new Node."""
        node = self.read_node()
        kept = [
            self.api.sanitize_for_serialization(t)
            for t in node.spec.taints or []
            if t.key not in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        ]
        self.core.patch_node(self.name, {"spec": {"taints": kept}})

    def restart_kubelet(self, timeout: float = 120.0) -> None:
        self.kubelet.stop()
        self.kubelet.start(timeout)
        nk.wait_for("the restarted kubelet's Node to be Ready", self.ready, timeout)

    def reconfigure_kubelet(self, **config: Any) -> None:
        """Restart the kubelet with ``config`` merged into its KubeletConfiguration (None removes a key)."""
        for key, value in config.items():
            if value is None:
                self.kubelet.extra_config.pop(key, None)
            else:
                self.kubelet.extra_config[key] = value
        self.restart_kubelet()


@contextlib.contextmanager
def real_node(workdir: Path) -> Iterator[NodeContext]:
    """Build what is missing (cached), start everything, yield once the Node is Ready and untainted, and remove
    everything afterwards. Raises ControlPlaneError or NodeError with the log tail that says why."""
    cp_bin = build_controlplane(workdir / "build-controlplane.log")
    bin_dir = nk.build_node(workdir / "build-node.log")
    # The kubelet's Node has an InternalIP and a Hostname address; the test hostname does not resolve. The API server
    # serves on the host's address, not loopback, because it is the `kubernetes` Service's endpoint: a pod reaches
    # it there (through kube-proxy's DNAT of the Service's ClusterIP in `make chart-e2e`), where loopback would be
    # the pod's own.
    cp = ControlPlane(
        workdir / "cp",
        cp_bin,
        extra_apiserver_args=["--kubelet-preferred-address-types=InternalIP"],
        address=nk.host_ip(),
    )
    containerd = nk.Containerd(workdir / "containerd")
    kubelet = nk.Kubelet(workdir / "kubelet", bin_dir, containerd, cp.kubeconfig, f"accel-node-{uuid.uuid4().hex[:6]}")
    with contextlib.ExitStack() as stack:
        cp.start()
        stack.callback(cp.stop)
        containerd.start()
        stack.callback(containerd.stop)
        for ref, entrypoint in ((nk.PAUSE_IMAGE, ["/probe", "pause"]), (nk.PROBE_IMAGE, ["/probe"])):
            tarball = workdir / f"{ref.rsplit('/', 1)[-1].replace(':', '_')}.tar"
            containerd.import_image(nk.oci_image(tarball, ref, bin_dir / "probe", entrypoint))
        stack.enter_context(nk.device_plugin_dir())
        stack.enter_context(accel_device_nodes(4))
        stack.callback(kubelet.remove)
        stack.callback(kubelet.stop)
        kubelet.start()
        from kubernetes import config

        api = config.new_client_from_config(config_file=str(cp.kubeconfig))
        stack.callback(api.close)
        apply_crds(api)  # PodGroup, NodeResourceTopology: what accelsched reads besides core objects
        ctx = NodeContext(cp, containerd, kubelet, api)
        nk.wait_for(f"Node {ctx.name} to be Ready", ctx.ready, 120)
        ctx.untaint_not_ready()
        yield ctx
