"""What the chart's real-node test adds to the node fixture: the accelsched image, kube-proxy, and the controllers.

`make node-e2e` runs pods the tests create themselves; the chart makes Deployments and DaemonSets whose pods talk to
the API server. So `make chart-e2e` (tests/node/test_chart_node.py) runs, beside the node of realnode.py:
- the image from the root Dockerfile (hack/build-image.sh, buildah), as an OCI archive cached by the content of
  what the Dockerfile copies (:func:`image_archive`), imported into the node's containerd like the probe images;
- kube-controller-manager v1.36.3 with the controllers a cluster runs for these objects (:data:`CONTROLLERS`): the
  Deployment, ReplicaSet and DaemonSet controllers make the pods, the serviceaccount controller and the
  root-ca-certificate publisher give them what their service-account token volume mounts (``kube-root-ca.crt``),
  the garbage collector removes what `helm uninstall` leaves to it (ReplicaSets, pods), the namespace controller
  empties a deleted namespace, the resourceclaim controller makes a pod's claims from its templates;
- kube-scheduler v1.36.3 (:func:`default_scheduler`): the chart's own pods ask for the default scheduler (the
  DaemonSet controller, too, leaves its pods to it), so accelsched runs beside it, as on a real cluster;
- kube-proxy v1.36.3 in iptables mode (:class:`KubeProxy`), so a pod's in-cluster config
  (``KUBERNETES_SERVICE_HOST`` = the ``kubernetes`` Service's ClusterIP) reaches the API server as in a cluster.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import nodekit as nk
import yaml
from controlplane import ControlPlane

IMAGE_REPOSITORY = "localhost/accelsched/accelsched"
BUILD_IMAGE = nk.REPO / "hack" / "build-image.sh"
# What decides the image: the Dockerfile, what it copies, and the script that builds it.
IMAGE_INPUTS = (
    "Dockerfile",
    "pyproject.toml",
    "README.md",
    "accelsched",
    "examples/lab",
    "deploy",
    "hack/build-image.sh",
)
CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "daemonset-controller",
    "serviceaccount-controller",
    "root-ca-certificate-publisher-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "resourceclaim-controller",
)


def _image_key() -> str:
    digest = hashlib.sha256()
    for top in IMAGE_INPUTS:
        path = nk.REPO / top
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            if "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            digest.update(str(f.relative_to(nk.REPO)).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def image_archive(log_path: Path) -> tuple[str, Path]:
    """(the image's reference, its OCI archive): built by hack/build-image.sh the first time for this content (about
    8 minutes on 2 cores, 4-5 with the base already in buildah's storage), from the cache after."""
    version = next(
        line.split('"')[1]
        for line in (nk.REPO / "pyproject.toml").read_text().splitlines()
        if line.startswith("version")
    )
    key = _image_key()
    ref = f"{IMAGE_REPOSITORY}:{version}-{key}"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "accelsched" / "image"
    archive = cache / f"accelsched-{version}-{key}.tar"
    if archive.exists():
        return ref, archive
    cache.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(".tar.partial")
    with log_path.open("wb") as log:
        proc = subprocess.run(
            ["bash", str(BUILD_IMAGE), "--oci", str(partial)],
            env={**os.environ, "IMAGE": ref},
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if proc.returncode != 0:
        raise nk.NodeError(f"{BUILD_IMAGE} failed with exit code {proc.returncode}:\n{nk.tail(log_path)}")
    # Only a complete archive is "cached"; older ones (another content) go, so the cache holds one image.
    for old in cache.glob("accelsched-*.tar"):
        old.unlink()
    partial.rename(archive)
    return ref, archive


class KubeProxy:
    """kube-proxy in iptables mode on the host, for the node's pods: the ``kubernetes`` Service's ClusterIP (and any
    other Service's) is DNATed to its endpoints, here the API server on the host's address."""

    def __init__(self, workdir: Path, binary: Path, kubeconfig: Path, node_name: str, cluster_cidr: str) -> None:
        self.workdir = workdir
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.node_name = node_name
        self.cluster_cidr = cluster_cidr
        self.log = workdir / "kube-proxy.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def write_config(self) -> Path:
        healthz, metrics = nk.free_ports(2)
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig)},
            "hostnameOverride": self.node_name,
            "mode": "iptables",
            # The pods' network: their traffic to a ClusterIP is local, DNATed without masquerade.
            "clusterCIDR": self.cluster_cidr,
            "detectLocalMode": "ClusterCIDR",
            "healthzBindAddress": f"127.0.0.1:{healthz}",
            "metricsBindAddress": f"127.0.0.1:{metrics}",
            # This VM's root cannot lower its oom_score_adj (docs/node.md): ask for none rather than be refused.
            "oomScoreAdj": 0,
            # Leave the machine's sysctls as they are: no conntrack table sizing or timeouts, and no
            # route_localnet (which NodePorts on 127.0.0.1 need; nothing here uses a NodePort).
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            "iptables": {"localhostNodePorts": False, "syncPeriod": "30s", "minSyncPeriod": "1s"},
        }
        path = self.workdir / "kube-proxy-config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def start(self, timeout: float = 60.0) -> KubeProxy:
        if _nat_chain_exists("KUBE-SERVICES"):
            # Its --cleanup at the end would remove another kube-proxy's rules too.
            raise nk.NodeError("iptables already has kube-proxy's KUBE-SERVICES chain: another kube-proxy runs here")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._proc = nk.spawn([str(self.binary), f"--config={self.write_config()}", "--v=2"], self.log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise nk.NodeError(
                    f"kube-proxy exited with code {self._proc.returncode}; {self.log}:\n{nk.tail(self.log)}"
                )
            if "default/kubernetes:https" in _iptables("-t", "nat", "-S", "KUBE-SERVICES"):
                return self
            time.sleep(0.5)
        raise nk.NodeError(
            f"kube-proxy wrote no rule for the kubernetes Service in {timeout:.0f}s:\n{nk.tail(self.log)}"
        )

    def stop(self) -> None:
        """Stop it and remove every rule and chain it made (``kube-proxy --cleanup``)."""
        nk.stop_process(self._proc, signal.SIGTERM)
        self._proc = None
        with self.log.open("ab") as log:
            subprocess.run([str(self.binary), "--cleanup", "--v=2"], stdout=log, stderr=subprocess.STDOUT, check=False)


def _iptables(*args: str) -> str:
    iptables = shutil.which("iptables", path=f"{os.environ.get('PATH', '')}{os.pathsep}/usr/sbin") or "iptables"
    return subprocess.run([iptables, "-w", *args], capture_output=True, text=True, check=False).stdout


def _nat_chain_exists(chain: str) -> bool:
    return bool(_iptables("-t", "nat", "-S", chain).strip())


@contextlib.contextmanager
def controller_manager(cp: ControlPlane) -> Iterator[None]:
    """kube-controller-manager with :data:`CONTROLLERS`; the root CA it publishes as ``kube-root-ca.crt`` (the pods'
    ``ca.crt``) is the bundle the API server's self-signed serving certificate came with."""
    cp.start_controller_manager(CONTROLLERS, extra_args=[f"--root-ca-file={cp.ca_file}"])
    try:
        yield
    finally:
        cp.stop_controller_manager()


@contextlib.contextmanager
def default_scheduler(cp: ControlPlane, workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The real kube-scheduler with its default profile (schedulerName default-scheduler), from the control plane's
    bin dir, without leader election or a serving port."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "kube-scheduler.yaml"
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(cp.kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": "default-scheduler"}],
    }
    config.write_text(yaml.safe_dump(doc))
    assert cp.bin_dir is not None, "the control plane is started"
    args = [str(cp.bin_dir / "kube-scheduler"), f"--config={config}", "--secure-port=0", "--v=2"]
    proc = nk.spawn(args, workdir / "kube-scheduler.log")
    try:
        yield proc
    finally:
        nk.stop_process(proc)
