"""``python -m benchmarks.live``: accelsched run against a real API server, end to end, in pods/s.

    python -m benchmarks.live                          # 1,000 nodes, 5,000 pods; starts its own etcd + kube-apiserver
    python -m benchmarks.live --nodes 100 --pods 500   # the integration suite's size
    python -m benchmarks.live --kubeconfig ~/.kube/config --json out/live.json

Nodes are real Node objects advertising 8 ``qualcomm.com/ai-accelerator`` each (created, then their status
patched as a kubelet does). ``accelsched run`` runs as its own process, as deployed. Two figures:

- end to end: the first pod created -> the last pod bound (seen through a watch), pods created from a pool of
  client threads while the scheduler runs: what a user of the cluster sees;
- preloaded: all pods created first, then the scheduler started; its first bind -> its last bind: the
  scheduler's own rate (list, decide, annotate devices, bind, record the event), like scheduler_perf, which
  also measures against a real API server (reference/kube-scheduler.md).

Speed never fails the command; pods that are not bound do (exit 1).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "live"))  # the control plane helper lives with the live tests

from accelsched.live import kube as k  # noqa: E402
from accelsched.live.kube import ApiError, Kube, api_client  # noqa: E402

ACCEL = "qualcomm.com/ai-accelerator"
# kube-scheduler's scheduler_perf thresholds (pods/s), measured against a real API server.
SCHEDULER_PERF = {
    "SchedulingBasic 5000Nodes_10000Pods": 680,
    "SchedulingWithExtendedResource 5000 nodes / 5000 pods": 180,
}


def create_nodes(kube: Kube, count: int, workers: int = 16) -> None:
    def one(i: int) -> None:
        name = f"bench-node-{i:05d}"
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"bench": "live"}}}
        kube.create(k.NODES, body)
        capacity = {"cpu": "64", "memory": "256Gi", "pods": "110", ACCEL: "8"}
        status = {"status": {"capacity": capacity, "allocatable": capacity}}
        kube.patch(k.NODES, name, status, sub="status")
        # The node lifecycle controller's part: a Ready node loses the not-ready taint admission gave it.
        kube.patch(k.NODES, name, {"spec": {"taints": []}})

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(count)))


def pod_body(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "accelsched",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/infer:1",
                    "resources": {"requests": {"cpu": "100m", ACCEL: "1"}, "limits": {ACCEL: "1"}},
                }
            ],
        },
    }


def create_pods(kube: Kube, namespace: str, prefix: str, count: int, workers: int = 32) -> float:
    """Create the pods from a thread pool; returns when the first create was sent."""
    first = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda i: kube.create(k.PODS, pod_body(f"{prefix}-{i:05d}", namespace), namespace), range(count)))
    return first


class BindWatch:
    """Times each pod of a namespace becoming bound, from a watch (what the API server says, not the scheduler)."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.bound: dict[str, float] = {}
        self.lock = threading.Lock()
        self._stop = False
        listing = kube.list(k.PODS, namespace)
        self.version = listing["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                for event in self.kube.watch(k.PODS, self.version, 30, namespace=self.namespace):
                    obj = event.get("object") or {}
                    self.version = (obj.get("metadata") or {}).get("resourceVersion", self.version)
                    if event.get("type") in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get("nodeName"):
                        with self.lock:
                            self.bound.setdefault(obj["metadata"]["name"], time.monotonic())
            except ApiError:
                time.sleep(0.2)

    def wait(self, names: set[str], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if names <= set(self.bound):
                    return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self._stop = True


def start_scheduler(kubeconfig: str, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    args = [sys.executable, "-m", "accelsched.cli", "run", f"--kubeconfig={kubeconfig}", "--metrics-port=0"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("wb"), cwd=REPO)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("msg") == "started":
                port = int(entry["metricsPort"])
                while time.monotonic() < deadline:
                    try:
                        if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz").status == 200:
                            return proc, port
                    except OSError:
                        pass
                    time.sleep(0.1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"accelsched run did not become ready; log:\n{log.read_text()[-3000:]}")


def stop_scheduler(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def ensure_namespace(kube: Kube, name: str) -> None:
    kube.create(k.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    kube.create(k.Resource("/api/v1", "serviceaccounts"), sa, name)


def run(kubeconfig: str, nodes: int, pods: int, workdir: Path, timeout: float = 900.0) -> dict[str, Any]:
    """Both measurements on the cluster behind ``kubeconfig``; the figures as a dict."""
    kube = Kube(api_client(kubeconfig, pool_size=64))
    t = time.monotonic()
    create_nodes(kube, nodes)
    node_setup = time.monotonic() - t
    out: dict[str, Any] = {"nodes": nodes, "pods": pods, "node_setup_s": round(node_setup, 2)}

    namespaces: list[str] = []
    try:
        for phase, preload in (("e2e", False), ("preloaded", True)):
            out[phase] = _phase(kube, kubeconfig, phase, pods, preload, workdir, timeout, namespaces)
            if out[phase]["bound"] < pods:
                out["failed"] = f"{phase}: {pods - out[phase]['bound']} pods not bound"
                break
            # Room again for the next phase: the pods go (nodes stay).
            kube.request("DELETE", k.PODS.path(namespaces[-1]), {"gracePeriodSeconds": 0})
            deadline = time.monotonic() + 120
            while kube.list(k.PODS, namespaces[-1], limit=1)["items"] and time.monotonic() < deadline:
                time.sleep(0.5)
    finally:
        for ns in namespaces:  # leave the cluster's pods as they were, also after a failure
            kube.request("DELETE", k.PODS.path(ns), {"gracePeriodSeconds": 0})
    return out


def _phase(
    kube: Kube,
    kubeconfig: str,
    phase: str,
    pods: int,
    preload: bool,
    workdir: Path,
    timeout: float,
    namespaces: list[str],
) -> dict[str, Any]:
    """One measurement in a fresh namespace. End to end: the scheduler runs while the pods are created, first
    create -> last bind. Preloaded: the pods exist before the scheduler starts, first bind -> last bind."""
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    namespaces.append(namespace)
    ensure_namespace(kube, namespace)
    watch = BindWatch(kube, namespace)
    names = {f"{phase}-{i:05d}" for i in range(pods)}
    if preload:
        create_pods(kube, namespace, phase, pods)
    proc, _ = start_scheduler(kubeconfig, workdir / f"scheduler-{phase}.log")
    try:
        if not preload:
            first = create_pods(kube, namespace, phase, pods)
            created = time.monotonic()
        watch.wait(names, timeout)
    finally:
        stop_scheduler(proc)
        watch.stop()
    times = sorted(watch.bound.values())
    figures: dict[str, Any] = {"bound": len(names & set(watch.bound))}
    if preload:
        span = times[-1] - times[0] if len(times) > 1 else 0.0
        figures |= {"seconds": round(span, 2), "pods_per_s": round((len(times) - 1) / span, 1) if span else 0.0}
    else:
        span = (times[-1] if times else time.monotonic()) - first
        figures |= {
            "seconds": round(span, 2),
            "pods_per_s": round(len(times) / span, 1) if span > 0 else 0.0,
            "create_pods_per_s": round(pods / (created - first), 1),
        }
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.live", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--kubeconfig", help="an existing cluster (default: start etcd + kube-apiserver here)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="accelsched-live-bench-") as tmp:
        workdir = Path(tmp)
        cp = None
        kubeconfig = args.kubeconfig
        if kubeconfig is None:
            from controlplane import ControlPlane

            cp = ControlPlane(workdir / "cp").start()
            kubeconfig = str(cp.kubeconfig)
        try:
            figures = run(kubeconfig, args.nodes, args.pods, workdir)
        finally:
            if cp is not None:
                cp.stop()
    figures["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    print(f"accelsched run against a real kube-apiserver: {args.nodes} nodes, {args.pods} pods")
    for name in ("e2e", "preloaded"):
        if name in figures:
            f = figures[name]
            print(f"  {name:9}  {f['bound']}/{args.pods} bound in {f['seconds']} s: {f['pods_per_s']} pods/s")
    if "e2e" in figures:
        print(f"  (pods created at {figures['e2e']['create_pods_per_s']} pods/s by the client)")
    print("kube-scheduler scheduler_perf (real API server, thresholds):")
    for name, rate in SCHEDULER_PERF.items():
        print(f"  {name}: {rate} pods/s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2))
    if "failed" in figures:
        print(f"FAILED: {figures['failed']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
