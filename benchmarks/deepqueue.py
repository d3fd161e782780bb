"""``python -m benchmarks.deepqueue``: one deep ClusterQueue drained by the real Kueue and by ``accelsched run``.

    python -m benchmarks.deepqueue                          # 1,000 Workloads, 50 nodes of 8 GPUs
    python -m benchmarks.deepqueue --workloads 100 --nodes 10
    python -m benchmarks.deepqueue --only accelsched        # one side (kueue or accelsched)

kueue#14477: one ClusterQueue with hundreds of queued workloads drained at 9.6 admissions per minute. Here one
test control plane (tests/live/controlplane.py, Kueue v0.19.2's CRDs) holds ``--nodes`` Nodes of 8 GPUs (Node
objects, no kubelet) and, for each system in turn, its own ResourceFlavor, ClusterQueue (GPU quota
``--quota`` GPUs, a fraction of the queue) and LocalQueue in a namespace of its own. ``--workloads`` Workload
objects of one pod asking for 1 GPU (every fifth 2) are created into the LocalQueue from a thread pool; each one
seen with ``QuotaReserved=True`` (through a watch) is deleted ``--run-time`` seconds later, as Kueue's job
reconciler would finish it, so quota is freed and the queue drains. Both systems get the same harness:

- Kueue: the controller manager (conformance/kueue/process.py) with Kueue's default 1 s requeue batch;
- accelsched: ``accelsched run`` as its own process, admitting Workload objects whose pod templates ask for its
  schedulerName (issue 23's first door, live/workloadstatus.py: the like-for-like one; Kueue is stopped first).

Reported per system: workloads admitted, admissions per second (admitted / first create -> last admission), and
the p50/p99/max wait, a Workload's create request -> its QuotaReserved seen. The drain cannot beat ``quota /
run time`` admissions per second (printed as the ceiling). Goal (issue 23): accelsched at least 10 per second.
Needs the control plane and the Kueue binary (hack/build-controlplane.sh); exits 2 with why when absent.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import heapq
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import Unavailable, kueue_binary, kueue_control_plane
from benchmarks.live import _percentiles, start_scheduler, stop_scheduler

GPU = "nvidia.com/gpu"
GPUS = 8
KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
SYSTEMS = ("kueue", "accelsched")


def workload(name: str, gpus: int, scheduler: str) -> dict[str, Any]:
    container = {"name": "main", "image": "registry.example.com/train:1", "resources": {"requests": {GPU: str(gpus)}}}
    spec = {"schedulerName": scheduler, "restartPolicy": "Never", "containers": [container]}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": spec}}]},
    }


def gpus_of(i: int) -> int:
    return 2 if i % 5 == 4 else 1


class Drain:
    """Watches one namespace's Workloads: the first time each is seen with QuotaReserved=True, and its deletion
    ``run_time`` seconds later (the finisher)."""

    def __init__(self, kube: Any, resource: Any, namespace: str, run_time: float) -> None:
        self.kube, self.resource, self.namespace, self.run_time = kube, resource, namespace, run_time
        self.reserved: dict[str, float] = {}
        self._due: list[tuple[float, str]] = []
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self.version = kube.list(resource, namespace)["metadata"]["resourceVersion"]
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._watch, self._finish)]
        for t in self._threads:
            t.start()

    def _watch(self) -> None:
        from accelsched.live.kube import ApiError

        while not self._stop.is_set():
            try:
                for event in self.kube.watch(self.resource, self.version, 30, namespace=self.namespace):
                    obj = event.get("object") or {}
                    self.version = (obj.get("metadata") or {}).get("resourceVersion", self.version)
                    if event.get("type") in ("ADDED", "MODIFIED") and _reserved(obj):
                        self._seen(obj["metadata"]["name"], time.monotonic())
                    if self._stop.is_set():
                        return
            except ApiError:
                time.sleep(0.1)

    def _seen(self, name: str, at: float) -> None:
        with self._lock:
            if name in self.reserved:
                return
            self.reserved[name] = at
            heapq.heappush(self._due, (at + self.run_time, name))
            self._lock.notify()

    def _finish(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                wait = self._due[0][0] - time.monotonic() if self._due else 0.5
                if wait > 0:
                    self._lock.wait(min(wait, 0.5))
                    continue
                _, name = heapq.heappop(self._due)
            self.kube.delete(self.resource, name, self.namespace)

    def wait(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.reserved) < count and time.monotonic() < deadline:
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()


def _reserved(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "QuotaReserved" and c.get("status") == "True" for c in conditions)


class Cluster:
    """The test control plane with Kueue's CRDs and the Nodes; ``drain`` runs one system over its own queue."""

    def __init__(self, workdir: Path, nodes: int) -> None:
        self.process, self.cp = kueue_control_plane(workdir)
        self.workdir, self.nodes = workdir, nodes

    def __enter__(self) -> Cluster:
        from controlplane import apply_crds, make_node

        from accelsched.live import kube as k

        self.cp.start()
        self.api = k.api_client(str(self.cp.kubeconfig), pool_size=32)
        self.kube = k.Kube(self.api)
        self.workloads = k.Resource(KUEUE_API, "workloads", namespaced=True)
        apply_crds(self.api, self.process.write_crds(self.workdir / "crds"))
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: make_node(self.api, f"gpu-{i:04d}", capacity={GPU: GPUS}), range(self.nodes)))
        return self

    def __exit__(self, *exc: object) -> None:
        self.cp.stop()

    def _queue(self, tag: str, quota: int) -> str:
        from controlplane import ensure_namespace

        from accelsched.live import kube as k

        ns = f"deepq-{tag}"
        ensure_namespace(self.api, ns)
        spec = {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [{"name": tag, "resources": [{"name": GPU, "nominalQuota": str(quota)}]}],
                }
            ],
        }
        for plural, kind, namespace, body in (
            ("resourceflavors", "ResourceFlavor", None, {"metadata": {"name": tag}, "spec": {}}),
            ("clusterqueues", "ClusterQueue", None, {"metadata": {"name": tag}, "spec": spec}),
            ("localqueues", "LocalQueue", ns, {"metadata": {"name": "lq"}, "spec": {"clusterQueue": tag}}),
        ):
            resource = k.Resource(KUEUE_API, plural, namespaced=namespace is not None)
            self.kube.create(resource, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, **body}, namespace)
        return ns

    def drain(self, system: str, workloads: int, quota: int, run_time: float, timeout: float) -> dict[str, Any]:
        ns = self._queue(system, quota)
        scheduler = "accelsched" if system == "accelsched" else "default-scheduler"
        log = self.workdir / f"{system}.log"
        stop = self._start(system, log)
        try:
            drain = Drain(self.kube, self.workloads, ns, run_time)
            created: dict[str, float] = {}

            def create(i: int) -> None:
                name = f"w{i:05d}"
                created[name] = time.monotonic()
                self.kube.create(self.workloads, workload(name, gpus_of(i), scheduler), ns)

            first = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                list(pool.map(create, range(workloads)))
            drain.wait(workloads, timeout)
            drain.stop()
        finally:
            stop()
        reserved = dict(drain.reserved)
        span = max(reserved.values(), default=first) - first
        waits = sorted(reserved[n] - created[n] for n in reserved)
        # What is left goes, so the next system starts on an empty API server (its queue is its own anyway).
        from accelsched.live import kube as k

        self.kube.request("DELETE", k.Resource(KUEUE_API, "workloads", namespaced=True).path(ns), {})
        return {
            "system": system,
            "workloads": workloads,
            "admitted": len(reserved),
            "admissions_per_s": round(len(reserved) / span, 2) if span > 0 else 0.0,
            "drain_s": round(span, 2),
            # Each admitted Workload holds its GPUs for run_time: the queue cannot drain faster than this.
            "ceiling_per_s": round(quota * workloads / sum(map(gpus_of, range(workloads))) / run_time, 1),
            **{f"wait_{q}_s": v for q, v in _percentiles(waits).items()},
        }

    def _start(self, system: str, log: Path) -> Any:
        if system == "kueue":
            kueue = self.process.KueueProcess(
                kueue_binary(self.process), self.cp.kubeconfig, self.kube, self.workdir / "kueue", long_requeue=False
            ).start()
            return kueue.stop
        proc, _ = start_scheduler(str(self.cp.kubeconfig), log)
        return lambda: stop_scheduler(proc)


def run(
    workloads: int,
    nodes: int,
    quota: int,
    run_time: float,
    systems: tuple[str, ...],
    workdir: Path,
    timeout: float = 600.0,
) -> list[dict[str, Any]]:
    with Cluster(workdir, nodes) as cluster:
        return [cluster.drain(s, workloads, quota, run_time, timeout) for s in systems]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.deepqueue", description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument(
        "--quota", type=int, default=0, help="GPUs in the ClusterQueue (default: a tenth of the queue's)"
    )
    parser.add_argument("--run-time", type=float, default=2.0, help="seconds an admitted Workload runs")
    parser.add_argument("--only", choices=SYSTEMS)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds each system may take to drain")
    args = parser.parse_args(argv)
    asked = sum(gpus_of(i) for i in range(args.workloads))
    quota = args.quota or max(2, asked // 10)
    if quota > args.nodes * GPUS:
        parser.error(f"--quota {quota} is more than the {args.nodes} nodes' {args.nodes * GPUS} GPUs")
    systems = (args.only,) if args.only else SYSTEMS
    try:
        with tempfile.TemporaryDirectory(prefix="deepqueue-") as tmp:
            rows = run(args.workloads, args.nodes, quota, args.run_time, systems, Path(tmp), args.timeout)
    except Unavailable as exc:
        print(f"benchmarks.deepqueue: {exc}", file=sys.stderr)
        return 2
    print(
        f"{args.workloads} Workloads ({asked} GPUs), quota {quota} GPUs, {args.nodes} nodes, run time {args.run_time} s"
    )
    keys = [k for k in rows[0] if k not in ("system", "workloads")]
    print(f"{'system':<11}" + "".join(f"{k:>17}" for k in keys))
    for row in rows:
        print(f"{row['system']:<11}" + "".join(f"{row[k]:>17}" for k in keys))
    return 0 if all(r["admitted"] == r["workloads"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
