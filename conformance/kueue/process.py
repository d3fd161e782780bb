"""The real Kueue v0.19.2 controller manager (``hack/build-controlplane.sh kueue``) against the test API server.

Kueue is run as its own Deployment would run it, less what a single process on loopback cannot have:

- its CRDs from the module (``config/components/crd``: the bases with the kustomization's conversion-webhook
  patches, naming the webhook Service as config/default does). Kueue's cert rotator injects its CA into them and
  waits for that; the API server would call the webhook only to convert between versions, and only v1beta2, the
  storage version, is ever read or written here;
- its configuration file: no leader election, no metrics server, the health probes and the webhook server on
  loopback ports, only the ``batch/job`` integration (the oracle writes Workload objects), and
  ``manageJobsWithoutQueueName: false`` (the default);
- the VisibilityOnDemand feature off (an aggregated API server needing in-cluster credentials; no scheduling);
- SchedulerLongRequeueInterval on: the requeuer's batch period is 10 s instead of 1 s (only a timing: see
  real.REQUEUE_PERIOD);
- internal certificate management on (Kueue refuses to start without certificates: the webhook server's, and with
  management off the metrics ones from a fixed path under /etc). Its cert rotator fills the webhook Secret; a
  kubelet would mount that Secret into the pod, and ``_mount_secret`` does the same: it copies the Secret's keys
  into the certificate directory. No webhook configuration is registered, so the API server never calls Kueue's
  webhooks (the oracle writes only objects they would accept: defaulted and valid).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import yaml

from accelsched.live import kube as k
from accelsched.live.kube import ApiError, Kube

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "build-controlplane.sh"
VERSION = "v0.19.2"
NAMESPACE = "kueue-system"
SECRET = "kueue-webhook-server-cert"
SERVICE = "kueue-webhook-service"
SECRETS = k.Resource("/api/v1", "secrets")


class KueueError(RuntimeError):
    """Kueue could not be built or started; the message carries its log tail."""


def kueue_binary(build: bool = True) -> Path | None:
    """The cached kueue binary; built first (minutes, once) when ``build``, else None when it is not cached."""
    args = ["bash", str(BUILD_SCRIPT), *([] if build else ["--check"]), "kueue"]
    proc = subprocess.run(args, capture_output=True, check=False)
    if proc.returncode != 0:
        if not build:
            return None
        raise KueueError(f"{BUILD_SCRIPT} kueue failed: {proc.stderr.decode(errors='replace')[-2000:]}")
    return Path(proc.stdout.decode().strip().splitlines()[-1]) / "kueue"


def write_crds(target: Path, storage_only: bool = False) -> Path:
    """Kueue's CRDs as its kustomization (config/components/crd) makes them, into ``target``: the bases, with each
    patch's conversion webhook pointing at the Service config/default names (``kueue-webhook-service``).

    ``storage_only``: only the storage version (v1beta2) served. The API server keeps a watch cache per served
    version; with no webhook Service to convert through, each v1beta1 cache's list fails and is retried (about 150
    times a minute over the kinds), each reading every object from etcd, which cost the oracle more CPU than Kueue.
    Nothing here reads or writes v1beta1 (Kueue's controllers use v1beta2).
    """
    cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, check=True).stdout.decode().strip()
    src = Path(cache) / f"sigs.k8s.io/kueue@{VERSION}" / "config" / "components" / "crd"
    if not src.is_dir():
        raise KueueError(f"Kueue's CRDs are not in the Go module cache: {src}")
    kustomization = yaml.safe_load((src / "kustomization.yaml").read_text())
    conversions = {}
    for patch in kustomization.get("patches") or []:
        doc = yaml.safe_load((src / patch["path"]).read_text())
        conversion = doc["spec"]["conversion"]
        conversion["webhook"]["clientConfig"]["service"].update(namespace=NAMESPACE, name=SERVICE)
        conversions[doc["metadata"]["name"]] = conversion
    target.mkdir(parents=True, exist_ok=True)
    for resource in kustomization["resources"]:
        crd = yaml.safe_load((src / resource).read_text())
        if crd["metadata"]["name"] in conversions:
            crd["spec"]["conversion"] = conversions[crd["metadata"]["name"]]
        if storage_only:
            for version in crd["spec"]["versions"]:
                version["served"] = bool(version.get("storage"))
        (target / Path(resource).name).write_text(yaml.safe_dump(crd))
    return target


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class KueueProcess:
    """One kueue process with its config, certificates and log under ``workdir``."""

    def __init__(self, binary: Path, kubeconfig: Path, kube: Kube, workdir: Path,
                 fair_sharing: list[str] | None = None, long_requeue: bool = True, log_level: str = "2",
                 feature_gates: dict[str, bool] | None = None) -> None:
        self.binary = binary
        # zap's level: 2 logs every reconcile and scheduling attempt (a hundred thousand lines for 100 oracle
        # scenarios); the oracle keeps "info": what it reads of the log is the tail when Kueue fails.
        self.log_level = log_level
        # False for timings (benchmarks/deepqueue.py): Kueue's default 1 s requeue batch, as it is deployed.
        self.long_requeue = long_requeue
        self.fair_sharing = fair_sharing  # preemptionStrategies: Kueue started with fair sharing on
        self.feature_gates = feature_gates or {}  # more of Kueue's feature gates (the preemptiongates class's)
        self.kubeconfig = kubeconfig
        self.kube = kube
        self.workdir = workdir
        self.cert_dir = workdir / "kueue-certs"
        self.log = workdir / "kueue.log"
        self.health_port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()

    def start(self, timeout: float = 90.0) -> KueueProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cert_dir.mkdir(exist_ok=True)
        self._prepare_namespace()
        self.health_port = _free_port()
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": _free_port(), "host": "127.0.0.1", "certDir": str(self.cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": True, "webhookServiceName": SERVICE, "webhookSecretName": SECRET},
            "clientConnection": {"qps": 500, "burst": 1000},
            "manageJobsWithoutQueueName": False,
            "integrations": {"frameworks": ["batch/job"]},
        }
        if self.fair_sharing:
            config["fairSharing"] = {"preemptionStrategies": self.fair_sharing}
        path = self.workdir / "kueue-config.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        with self.log.open("ab") as log:
            # VisibilityOnDemand serves an aggregated API with in-cluster delegated authentication: off, as nothing
            # here runs in a pod (the scheduler does not use it).
            # SchedulerLongRequeueInterval: inadmissible workloads are retried 10 s after the event that asks for
            # it, not 1 s (real.REQUEUE_PERIOD says why); what is retried, and when in the order of events, is the same.
            gates = {"VisibilityOnDemand": False, "SchedulerLongRequeueInterval": self.long_requeue}
            flag = ",".join(f"{name}={str(on).lower()}" for name, on in {**gates, **self.feature_gates}.items())
            args = [str(self.binary), f"--config={path}", f"--zap-log-level={self.log_level}",
                    f"--feature-gates={flag}"]
            self._proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        threading.Thread(target=self._mount_secret, name="kueue-secret-mount", daemon=True).start()
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self._proc.poll() is not None:
                raise KueueError(f"kueue exited with {self._proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise KueueError(f"kueue not ready after {timeout:.0f}s:\n{self.log_tail()}")
            time.sleep(0.2)
        return self

    def _prepare_namespace(self) -> None:
        """Kueue's namespace and the (empty) Secret its cert rotator fills, as its kustomization creates them."""
        for resource, body, ns in (
            (k.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, None),
            (SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET}}, NAMESPACE),
        ):
            try:
                self.kube.create(resource, body, ns)
            except ApiError as exc:
                if exc.status != 409:
                    raise

    def _mount_secret(self) -> None:
        """What the kubelet does with the Secret volume: its keys as files in the certificate directory."""
        while not self._stop.is_set():
            with contextlib.suppress(ApiError):
                data = self.kube.get(SECRETS, SECRET, NAMESPACE).get("data") or {}
                if "tls.crt" in data and "tls.key" in data:
                    import base64

                    for name in ("tls.crt", "tls.key", "ca.crt"):
                        if name in data:
                            tmp = self.cert_dir / f".{name}"
                            tmp.write_bytes(base64.b64decode(data[name]))
                            tmp.rename(self.cert_dir / name)
                    return
            time.sleep(0.1)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        if not self.log.exists():
            return "(no log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        self._stop.set()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
