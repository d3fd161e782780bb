"""A real etcd + kube-apiserver on loopback for the live-mode integration tests, and the helpers tests use on it.

The binaries come from ``hack/build-controlplane.sh`` (upstream kube-apiserver and etcd built from Go modules,
and on request kube-controller-manager with chosen controllers only: the DRA tests run its resourceclaim
controller); nothing here imitates the API server. What a real cluster would have and these tests need is set up
the way the missing components would do it: a kubelet's Node status (``make_node``), the serviceaccount
controller's ``default`` ServiceAccount (``ensure_namespace``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "build-controlplane.sh"
CRD_DIR = REPO / "deploy" / "crds"

# The admin identity in the static token file; group system:masters bypasses RBAC, as kubeadm's admin.conf does.
ADMIN_USER = "accelsched-admin"
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"

ACCELERATOR = "qualcomm.com/ai-accelerator"
WORKLOAD_RUNTIME_CONFIG = "scheduling.k8s.io/v1alpha2=true"
WORKLOAD_FEATURE_GATES = "GenericWorkload=true,GangScheduling=true"
DEFAULT_NODE_CAPACITY: Mapping[str, str] = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti"}


class ControlPlaneError(RuntimeError):
    """The control plane could not be built or started; the message carries the log tail that says why."""


def build_controlplane(log_path: Path | None = None, component: str | None = None) -> Path:
    """Run the idempotent build script and return the bin dir holding ``etcd`` and ``kube-apiserver`` (or, with
    ``component="kube-controller-manager"``, the bin dir of that one, cached under a key of its own).

    A first build takes minutes (docs/live-testing.md); later calls return at once from the cache.
    """
    log = log_path.open("wb") if log_path else subprocess.DEVNULL
    try:
        args = ["bash", str(BUILD_SCRIPT), *([component] if component else [])]
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=log, check=False)
    finally:
        if log_path:
            log.close()
    if proc.returncode != 0:
        tail = _tail(log_path) if log_path else "(no log kept)"
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed with exit code {proc.returncode}:\n{tail}")
    return Path(proc.stdout.decode().strip().splitlines()[-1])


def find_binaries() -> Path | None:
    """The cached bin dir if both binaries are already built, without building (asks the script's --check mode)."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), "--check"], capture_output=True, check=False)
    return Path(proc.stdout.decode().strip()) if proc.returncode == 0 else None


def _free_ports(count: int) -> list[int]:
    """Distinct loopback ports free right now; all are held open until all are picked, so none repeats."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _tail(path: Path | None, lines: int = 40) -> str:
    if path is None or not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class ControlPlane:
    """etcd and kube-apiserver as child processes, with all state (data, certs, logs, kubeconfigs) under ``workdir``.

    ``watch_cache_sizes`` is passed to ``--watch-cache-sizes`` (``resource#size``; size 0 turns the watch cache off
    for that resource, so its watches are served by etcd and expire with etcd compaction, which runs every
    ``compaction_interval``). The default turns it off for configmaps only, which the 410 Gone tests use.

    ``address`` is where the API server binds and what it advertises (the ``kubernetes`` Service's endpoint):
    loopback by default; the real node's pods (tests/node/test_chart_node.py) need an address their network
    reaches, the host's own.
    """

    def __init__(
        self,
        workdir: Path | str,
        bin_dir: Path | str | None = None,
        *,
        compaction_interval: str = "5s",
        watch_cache_sizes: Sequence[str] = ("configmaps#0",),
        extra_apiserver_args: Sequence[str] = (),
        address: str = "127.0.0.1",
    ) -> None:
        self.workdir = Path(workdir)
        self.address = address
        self.bin_dir = Path(bin_dir) if bin_dir else None
        self.compaction_interval = compaction_interval
        self.watch_cache_sizes = tuple(watch_cache_sizes)
        self.extra_apiserver_args = tuple(extra_apiserver_args)
        self.admin_token = os.urandom(16).hex()
        self.etcd_port = 0
        self.etcd_peer_port = 0
        self.apiserver_port = 0
        self._etcd: subprocess.Popen[bytes] | None = None
        self._apiserver: subprocess.Popen[bytes] | None = None
        self._controller_manager: subprocess.Popen[bytes] | None = None

    # -- paths -------------------------------------------------------------------------------------------------

    @property
    def server(self) -> str:
        return f"https://{self.address}:{self.apiserver_port}"

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (system:masters); load with ``kubernetes.config.new_client_from_config``."""
        return self.workdir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        # kube-apiserver writes its self-signed serving certificate followed by the CA that signed it.
        return self.workdir / "apiserver-certs" / "apiserver.crt"

    @property
    def etcd_log(self) -> Path:
        return self.workdir / "etcd.log"

    @property
    def apiserver_log(self) -> Path:
        return self.workdir / "kube-apiserver.log"

    @property
    def controller_manager_log(self) -> Path:
        return self.workdir / "kube-controller-manager.log"

    @property
    def etcd_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def apiserver_pid(self) -> int | None:
        return self._apiserver.pid if self._apiserver and self._apiserver.poll() is None else None

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> ControlPlane:
        """Start etcd, then the API server; return when ``/readyz`` says ok and the kubeconfig is written."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.bin_dir is None:
            self.bin_dir = build_controlplane(self.workdir / "build.log")
        self._write_credentials()
        self.etcd_port, self.etcd_peer_port, self.apiserver_port = _free_ports(3)
        # The children run in sessions of their own (Ctrl-C must not kill them before stop()), so a caller that
        # exits without stop() would leave them running on a shared machine: stop at interpreter exit too.
        atexit.register(self.stop)
        try:
            self._start_etcd(timeout)
            self.start_apiserver(timeout)
        except BaseException:
            self.stop()
            raise
        self._write_kubeconfig(self.kubeconfig, self.admin_token, "admin")
        return self

    def start_apiserver(self, timeout: float = 120.0) -> None:
        """(Re)start the API server on the same port against the same etcd; return once ``/readyz`` is ok."""
        if self.apiserver_pid is not None:
            raise ControlPlaneError("kube-apiserver is already running")
        assert self.bin_dir is not None, "start() first"
        args = [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_endpoint}",
            f"--bind-address={self.address}",
            f"--advertise-address={self.address}",
            f"--secure-port={self.apiserver_port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            "--anonymous-auth=false",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={self.workdir / 'sa.key'}",
            f"--service-account-signing-key-file={self.workdir / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            f"--etcd-compaction-interval={self.compaction_interval}",
            # The device-plugin DaemonSet in deploy/ is privileged; a real cluster allows it, so do we.
            "--allow-privileged=true",
            "--profiling=false",
            # The upstream gang API of 1.36 (scheduling.k8s.io/v1alpha2 Workload and PodGroup, pod
            # spec.schedulingGroup): alpha, so served only when asked. kube-scheduler as an oracle needs the same gates.
            f"--runtime-config={WORKLOAD_RUNTIME_CONFIG}",
            f"--feature-gates={WORKLOAD_FEATURE_GATES}",
            "--v=1",
        ]
        if self.watch_cache_sizes:
            args.append(f"--watch-cache-sizes={','.join(self.watch_cache_sizes)}")
        args.extend(self.extra_apiserver_args)
        self._apiserver = self._spawn(args, self.apiserver_log)
        self._wait_ready(self._apiserver, self.apiserver_log, self._apiserver_ready, timeout, "kube-apiserver")

    def stop_apiserver(self) -> None:
        """SIGKILL the API server alone (no graceful shutdown, as when a machine dies); etcd keeps the data."""
        _kill(self._apiserver, signal.SIGKILL)
        self._apiserver = None

    def start_controller_manager(
        self, controllers: Sequence[str], timeout: float = 120.0, extra_args: Sequence[str] = ()
    ) -> None:
        """Run the real kube-controller-manager with only ``controllers`` (e.g. ``resourceclaim-controller``), as
        the admin, without leader election or a serving port; return once its controllers are started (its log
        says so). The binary is built on first use (``build-controlplane.sh kube-controller-manager``)."""
        if self._controller_manager is not None and self._controller_manager.poll() is None:
            raise ControlPlaneError("kube-controller-manager is already running")
        bin_dir = build_controlplane(self.workdir / "build-controller-manager.log", "kube-controller-manager")
        args = [
            str(bin_dir / "kube-controller-manager"),
            f"--kubeconfig={self.kubeconfig}",
            f"--controllers={','.join(controllers)}",
            "--leader-elect=false",
            "--secure-port=0",
            "--use-service-account-credentials=false",
            f"--feature-gates={WORKLOAD_FEATURE_GATES}",
            "--v=2",
            *extra_args,
        ]
        start = self.controller_manager_log.stat().st_size if self.controller_manager_log.exists() else 0
        self._controller_manager = self._spawn(args, self.controller_manager_log)

        def started() -> bool:  # each controller logs "Caches are synced" once its informers have listed
            with self.controller_manager_log.open("rb") as log:
                log.seek(start)
                return log.read().count(b"Caches are synced") >= len(controllers)

        proc, log = self._controller_manager, self.controller_manager_log
        self._wait_ready(proc, log, started, timeout, "kube-controller-manager")

    def stop_controller_manager(self) -> None:
        _kill(self._controller_manager, signal.SIGTERM)
        self._controller_manager = None

    def stop(self) -> None:
        """Stop everything; safe to call twice and after a failed start."""
        self.stop_controller_manager()
        # A client's watch still open holds a SIGTERMed kube-apiserver in its graceful shutdown until the kill after
        # 30 s; it keeps no state of its own (etcd does, stopped after it), so it gets 5 s.
        _kill(self._apiserver, signal.SIGTERM, grace=5.0)
        self._apiserver = None
        _kill(self._etcd, signal.SIGTERM)
        self._etcd = None

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- credentials -------------------------------------------------------------------------------------------

    def token_kubeconfig(self, token: str, name: str = "token") -> Path:
        """A kubeconfig that authenticates with ``token`` (e.g. a ServiceAccount's, from the TokenRequest API),
        so least-privilege RBAC is tested as the scheduler would run, not as an admin."""
        path = self.workdir / f"kubeconfig-{name}"
        self._write_kubeconfig(path, token, name)
        return path

    def _write_credentials(self) -> None:
        tokens = self.workdir / "tokens.csv"
        # token,user,uid,"group,..."; the static token file format kube-apiserver reads.
        tokens.write_text(f'{self.admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        tokens.chmod(0o600)
        key = self.workdir / "sa.key"
        if not key.exists():
            openssl = shutil.which("openssl")
            if openssl is None:
                raise ControlPlaneError("openssl not found: it generates the service-account signing key")
            subprocess.run([openssl, "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)

    def _write_kubeconfig(self, path: Path, token: str, user: str) -> None:
        cluster = {"server": self.server, "certificate-authority": str(self.ca_file)}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "accelsched-test", "cluster": cluster}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": {"cluster": "accelsched-test", "user": user}}],
            "current-context": user,
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)

    # -- processes ---------------------------------------------------------------------------------------------

    def _start_etcd(self, timeout: float) -> None:
        assert self.bin_dir is not None
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        args = [
            str(self.bin_dir / "etcd"),
            "--name=accelsched-test",
            f"--data-dir={self.workdir / 'etcd-data'}",
            f"--listen-client-urls={self.etcd_endpoint}",
            f"--advertise-client-urls={self.etcd_endpoint}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=accelsched-test={peer}",
            # Data still goes to disk (it survives an API server restart); only the fsync per write is skipped,
            # which on a shared CI disk is the difference between a load run of minutes and of tens of minutes.
            "--unsafe-no-fsync",
            # etcd's 2 GiB default backend quota is reached by the 15,000-node benchmark's 100,000 pods and their
            # status writes before compaction frees pages; past it every write fails with "database space exceeded".
            "--quota-backend-bytes=8589934592",
            "--log-level=warn",
        ]
        self._etcd = self._spawn(args, self.etcd_log)
        self._wait_ready(self._etcd, self.etcd_log, self._etcd_ready, timeout, "etcd")

    def _spawn(self, args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
        with log_path.open("ab") as log:
            log.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(args)}\n".encode())
            log.flush()
            # A session of its own, so a Ctrl-C of pytest does not reach the children before stop() runs.
            return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _wait_ready(self, proc: subprocess.Popen[bytes], log: Path, probe: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ControlPlaneError(f"{what} exited with code {proc.returncode}; {log}:\n{_tail(log)}")
            if probe():
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"{what} not ready after {timeout:.0f}s; {log}:\n{_tail(log)}")

    def _etcd_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.etcd_endpoint}/health", timeout=2) as r:
                return b'"health":"true"' in r.read()
        except (urllib.error.URLError, OSError):
            return False

    def _apiserver_ready(self) -> bool:
        if not self.ca_file.exists():
            return False
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        req = urllib.request.Request(f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.admin_token}"})
        try:
            with urllib.request.urlopen(req, timeout=2, context=ctx) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False


def _kill(proc: subprocess.Popen[bytes] | None, sig: signal.Signals, grace: float = 30.0) -> None:
    """Send ``sig``; SIGKILL after ``grace`` seconds if it has not exited by then."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


# ---------------------------------------------------------------------------------------------------------------
# What the components a test cluster lacks would have done.


def _core(api: Any) -> Any:
    from kubernetes import client

    return api if isinstance(api, client.CoreV1Api) else client.CoreV1Api(api)


def make_node(
    api: Any,
    name: str,
    labels: Mapping[str, str] | None = None,
    capacity: Mapping[str, str | int] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    allocatable: Mapping[str, str | int] | None = None,
    unschedulable: bool = False,
) -> Any:
    """Create a Node and give it the status a kubelet reports once its device plugin has registered.

    ``capacity`` is merged over ``DEFAULT_NODE_CAPACITY`` (e.g. ``{ACCELERATOR: 8}``); ``allocatable`` defaults to
    the capacity. Like a kubelet, this first creates the Node (spec and labels, no status: the API server ignores a
    status on create) and then patches ``status`` through the status subresource with capacity, allocatable and a
    Ready condition. ``api`` is an ApiClient or CoreV1Api. Returns the Node as read back after the status patch.
    """
    core = _core(api)
    cap = {**DEFAULT_NODE_CAPACITY, **{k: str(v) for k, v in (capacity or {}).items()}}
    alloc = {k: str(v) for k, v in (allocatable or cap).items()}
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": [dict(t) for t in taints], "unschedulable": unschedulable},
    }
    core.create_node(body)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {
        "status": {
            "capacity": cap,
            "allocatable": alloc,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "addresses": [{"type": "Hostname", "address": name}],
        }
    }
    core.patch_node_status(name, status)
    # The node lifecycle controller's part (TaintNodesByCondition): admission gave the new Node the
    # node.kubernetes.io/not-ready:NoSchedule taint; once the node reports Ready the controller removes it.
    # Without this every test node would repel every pod that does not tolerate not-ready.
    node = core.read_node(name)
    kept = [
        core.api_client.sanitize_for_serialization(t)
        for t in node.spec.taints or []
        if t.key != "node.kubernetes.io/not-ready"
    ]
    core.patch_node(name, {"spec": {"taints": kept}})
    return core.read_node(name)


def ensure_namespace(api: Any, name: str) -> None:
    """Create a namespace and its ``default`` ServiceAccount, which ServiceAccount admission requires before it
    admits a pod and which the (absent) kube-controller-manager would otherwise create."""
    from kubernetes.client.exceptions import ApiException

    core = _core(api)
    try:
        core.create_namespace({"metadata": {"name": name}})
    except ApiException as e:
        if e.status != 409:
            raise
    try:
        core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    except ApiException as e:
        if e.status != 409:
            raise


def apply_crds(api: Any, directory: Path = CRD_DIR, timeout: float = 30.0) -> list[str]:
    """Create (or replace) every CustomResourceDefinition in ``directory`` and wait until each is Established."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    ext = client.ApiextensionsV1Api(api)
    names = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            name = doc["metadata"]["name"]
            try:
                ext.create_custom_resource_definition(doc)
            except ApiException as e:
                if e.status != 409:
                    raise ControlPlaneError(f"{path}: CustomResourceDefinition {name} rejected: {e.body}") from e
                current = ext.read_custom_resource_definition(name)
                doc["metadata"]["resourceVersion"] = current.metadata.resource_version
                ext.replace_custom_resource_definition(name, doc)
            names.append(name)
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            conds = ext.read_custom_resource_definition(name).status.conditions or []
            if any(c.type == "Established" and c.status == "True" for c in conds):
                break
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"CustomResourceDefinition {name} not Established after {timeout:.0f}s")
            time.sleep(0.1)
    return names
