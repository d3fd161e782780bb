"""``python -m benchmarks.admitted``: admitted means placeable, counted for the real Kueue and for accelsched on one
segment of the openb trace.

    python -m benchmarks.admitted                       # 40 nodes of 8 GPUs, 300 workloads: all three systems
    python -m benchmarks.admitted --only accelsched     # the offline side alone (seconds)
    python -m benchmarks.admitted --nodes 10 --workloads 80 --arrive 10 --run-time 10 --timeout 120

Kueue admits by quota: a workload can be admitted (QuotaReserved) and its pods then stay Pending on fragmented
nodes, holding the quota. This counts how often that happens on the same input.

The segment: the first ``--nodes`` 8-GPU nodes of the openb node list (their CPU and memory), and ``--workloads``
GPU pods of the default pod list that ended in the trace and ask for no GPU model: every pod of 2, 4 or 8 GPUs,
then pods of one GPU or a share of one drawn at random (``--seed``) for the rest, in the trace's order of arrival.
Time is compressed: the pods arrive evenly in that order over ``--arrive`` seconds, and each runs for its trace
duration scaled so that the median is ``--run-time`` seconds (at least 5, at most 4 times the median). Each pod is
a one-pod workload in one ClusterQueue whose GPU quota is the nodes' GPUs: quota alone never holds the cluster
back, so what is admitted and not placed is what the nodes' shape refuses.

Three systems, one after the other, each on its own fresh control plane (tests/live/controlplane.py: etcd and
kube-apiserver; Nodes are Node objects, no kubelet; a pod that has run its time is deleted at once):

- ``kueue``: the real Kueue v0.19.2 and the real kube-scheduler v1.36.3; the harness plays Kueue's job
  integration. It creates each pod's Workload at its arrival; when Kueue reserves quota for it, it creates the pod
  for kube-scheduler; once the pod is bound it runs for its run time, then the pod and the Workload are deleted.
  kube-scheduler knows no GPU shares, so a node's GPUs are one extended resource counted in hundredths of a GPU
  (800 per node) and a pod asks for its GPUs in hundredths (2 GPUs: 200; a share of 0.46: 46): any free
  hundredths of one node fit, whichever GPU they are on, more than the real devices would take; Kueue's count here
  is a lower bound.
- ``accelsched-live``: ``accelsched run`` on the same objects (the same Nodes, queue objects and pods, the pods
  carrying ``kueue.x-k8s.io/queue-name``: issue 23's second door, no Kueue). A pod it holds for quota, or holds
  because quota admits it and no node can take it (queues/room.py: its quota given back, "waiting for room"), is
  ``SchedulingGated``; one it lets through and cannot place would be ``Unschedulable``: that is its admitted and not
  placed, the count. Those held waiting for room are counted apart ("waited for room").
- ``accelsched``: offline, the same nodes, pods, times and quota through ``simulate --queues``' replay
  (sim/queues.py) with FGD placement on the real GPUs (shares on one device): a workload is admitted only when it
  is placed; one that quota admits and no node can take gives its quota back and waits ("waited for room").

Counted: workloads admitted whose pod stays unbound for more than ``--stuck`` seconds, the most at one moment, and
those still so at the end; workloads run; when the last one finished (the makespan), and the mean GPU allocation
until then (live: the bound pods' GPUs, sampled each second). Goal (issue 23): accelsched 0.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import heapq
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accelsched.queues.room import ROOM
from accelsched.sim.trace import MILLI, Nodes, Pods, load_nodes, load_pods, trace_paths
from benchmarks.harness import Unavailable, kueue_binary, kueue_control_plane

# kube-scheduler knows no GPU shares: a node's GPUs are one extended resource counted in hundredths of a GPU (the
# trace's shares are all whole tens of milli); not accelsched.io/gpu-milli, which accelsched reads as its milli
# partitioning (shares placed on devices), so that both live systems read the very same objects
SHARE = "example.com/gpu-hundredths"
PER_UNIT = 10  # milli per hundredth
GPUS = 8
NAMESPACE = "admitted"
KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
SYSTEMS = ("kueue", "accelsched", "accelsched-live")


# ------------------------------------------------------------------------------------------------ the segment


@dataclass(frozen=True)
class Segment:
    """The input both systems get: nodes, pods with their arrival and run time (whole seconds)."""

    nodes: Nodes
    pods: Pods
    arrival: list[int]
    run: list[int]

    @property
    def gpu_milli(self) -> list[int]:
        return (self.pods.num_gpu * self.pods.gpu_milli).astype(int).tolist()


def segment(nodes: int, workloads: int, arrive: int, run_time: int, seed: int) -> Segment:
    node_path, pod_path = trace_paths("openb", "default")
    all_nodes, all_pods = load_nodes(node_path), load_pods(pod_path)
    eight = np.flatnonzero(all_nodes.gpus == GPUS)[:nodes]
    if len(eight) < nodes:
        raise ValueError(f"--nodes: the trace has {len(eight)} nodes of {GPUS} GPUs")
    picked_nodes = Nodes(
        [all_nodes.names[i] for i in eight],
        all_nodes.cpu[eight],
        all_nodes.memory[eight],
        all_nodes.gpus[eight],
        all_nodes.model[eight],
        all_nodes.models,
    )
    assert all_pods.creation is not None and all_pods.deletion is not None
    usable = (all_pods.num_gpu > 0) & (all_pods.spec == 0) & (all_pods.deletion > all_pods.creation)
    multi = np.flatnonzero(usable & (all_pods.num_gpu > 1))[:workloads]
    single = np.flatnonzero(usable & (all_pods.num_gpu == 1))
    rng = np.random.default_rng(seed)
    rest = rng.choice(single, size=max(0, workloads - len(multi)), replace=False)
    chosen = np.concatenate([multi, rest])
    chosen = chosen[np.argsort(all_pods.creation[chosen], kind="stable")]
    pods = all_pods.take(chosen)
    duration = (pods.deletion - pods.creation).astype(np.float64)  # type: ignore[operator]
    scaled = np.clip(np.rint(duration * run_time / np.median(duration)), 5, 4 * run_time).astype(int).tolist()
    arrival = [i * arrive // len(chosen) for i in range(len(chosen))]
    times = np.array(arrival, dtype=np.int64)
    pods = dataclasses.replace(pods, creation=times, deletion=times + np.array(scaled, dtype=np.int64))
    return Segment(picked_nodes, pods, arrival, scaled)


def queues_yaml(capacity_gpus: int, cpu_milli: int, memory_mib: int, milli: bool) -> str:
    """One ClusterQueue with the cluster's GPUs as quota (in GPUs for accelsched, which counts milli itself, or
    in thousandths for Kueue), CPU and memory covered (Kueue refuses a resource no group covers) far above what
    the nodes hold, so they never bind."""
    gpu = (
        f"{SHARE}\n        nominalQuota: {capacity_gpus * MILLI // PER_UNIT}"
        if milli
        else (f"nvidia.com/gpu\n        nominalQuota: {capacity_gpus}")
    )
    covered = f"[cpu, memory, {SHARE}]" if milli else "[nvidia.com/gpu]"
    extra = (
        f"      - name: cpu\n        nominalQuota: {10 * cpu_milli}m\n"
        f"      - name: memory\n        nominalQuota: {10 * memory_mib}Mi\n"
        if milli
        else ""
    )
    return f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: gpu}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: trace}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: {covered}
    flavors:
    - name: gpu
      resources:
{extra}      - name: {gpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: lq, namespace: {NAMESPACE}}}
spec: {{clusterQueue: trace}}
"""


@dataclass
class Figures:
    system: str
    workloads: int = 0
    ran: int = 0
    stuck: int = 0  # admitted, pod unbound past --stuck seconds
    stuck_peak: int = 0
    stuck_end: int = 0
    waited_for_room: int = 0  # accelsched: admitted by quota, not placeable, so not admitted (quota given back)
    allocation: float = 0.0  # mean GPU allocation until the last workload finished
    makespan_s: float = 0.0  # when the last workload finished (0: not all did)
    wall_s: float = 0.0
    series: list[tuple[float, int, float]] = field(default_factory=list)  # (t, stuck now, allocation)


# ------------------------------------------------------------------------------------------------ accelsched


def accelsched(seg: Segment, workdir: Path, policy: str = "fgd", seed: int = 0) -> Figures:
    from accelsched.sim import queues

    path = workdir / "queues.yaml"
    path.write_text(queues_yaml(int(seg.nodes.gpus.sum()), 0, 0, milli=False))
    start = time.perf_counter()
    timeline = queues.replay(
        seg.nodes, seg.pods, queues.load_queues(path), [f"{NAMESPACE}/lq"] * seg.pods.n, policy, seed
    )
    never = sum(t.never for t in timeline.tenants)
    times, allocated = timeline.times.astype(np.float64), timeline.allocated.astype(np.float64)
    return Figures(
        "accelsched",
        workloads=seg.pods.n,
        ran=seg.pods.n - never - timeline.unschedulable,
        waited_for_room=timeline.placement_waits,
        allocation=float(np.sum(allocated[:-1] * np.diff(times)) / (times[-1] * timeline.capacity)),
        makespan_s=float(times[-1]),
        wall_s=time.perf_counter() - start,
        series=[(float(t), 0, a / timeline.capacity) for t, a in zip(timeline.times, timeline.allocated, strict=True)],
    )


# ------------------------------------------------------------------------------------------------ Kueue


def _requests(seg: Segment, i: int) -> dict[str, str]:
    return {
        "cpu": f"{int(seg.pods.cpu[i])}m",
        "memory": f"{int(seg.pods.memory[i])}Mi",
        SHARE: str(seg.gpu_milli[i] // PER_UNIT),
    }


def _pod_spec(seg: Segment, i: int) -> dict[str, Any]:
    requests = _requests(seg, i)
    resources = {"requests": requests, "limits": {SHARE: requests[SHARE]}}  # an extended resource's limit
    container = {"name": "main", "image": "registry.example.com/train:1", "resources": resources}
    return {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [container]}


class LiveRun:
    """The control plane and one system on it: ``kueue`` (Kueue and kube-scheduler, the harness playing the job
    integration) or ``accelsched-live`` (``accelsched run`` admitting the queued pods itself, issue 23's second
    door); the harness deletes each pod once it has run its time."""

    def __init__(self, seg: Segment, workdir: Path, stuck: float, system: str = "kueue") -> None:
        self.system = system
        process, self.cp = kueue_control_plane(workdir)
        self.binary = kueue_binary(process)
        self.process, self.seg, self.workdir, self.stuck_after = process, seg, workdir, stuck
        self.lock = threading.Lock()
        self.admitted: dict[int, float] = {}
        self.bound: dict[int, float] = {}
        self.finished: set[int] = set()
        self.room: set[int] = set()  # accelsched-live: held waiting for room (admitted by quota, not placeable)
        self._due: list[tuple[float, int]] = []
        self._stop = threading.Event()

    def run(self, timeout: float) -> Figures:
        from controlplane import apply_crds, ensure_namespace

        from accelsched.live import kube as k
        from benchmarks.live import start_kube_scheduler, start_scheduler, stop_scheduler

        seg = self.seg
        self.cp.start()
        kueue = scheduler = None
        workdir = self.workdir / self.system
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            self.api = k.api_client(str(self.cp.kubeconfig), pool_size=32)
            self.kube = k.Kube(self.api)
            self.workloads = k.Resource(KUEUE_API, "workloads", namespaced=True)
            apply_crds(self.api, self.process.write_crds(self.workdir / "crds"))
            ensure_namespace(self.api, NAMESPACE)
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                list(pool.map(self._node, range(seg.nodes.n)))
            self._apply_queues()
            if self.system == "kueue":
                kueue = self.process.KueueProcess(
                    self.binary, self.cp.kubeconfig, self.kube, workdir, long_requeue=False
                ).start()
                scheduler = start_kube_scheduler(str(self.cp.kubeconfig), workdir, "admitted")
                self._wait_active()
            else:
                scheduler, _ = start_scheduler(str(self.cp.kubeconfig), workdir / "accelsched.log")
            return self._play(timeout)
        finally:
            self._stop.set()
            if scheduler is not None:
                stop_scheduler(scheduler)
            if kueue is not None:
                kueue.stop()
            self.cp.stop()

    def _node(self, i: int) -> None:
        from controlplane import make_node

        nodes = self.seg.nodes
        capacity = {
            "cpu": f"{int(nodes.cpu[i])}m",
            "memory": f"{int(nodes.memory[i])}Mi",
            "pods": "110",
            SHARE: str(int(nodes.gpus[i]) * MILLI // PER_UNIT),
        }
        make_node(self.api, nodes.names[i], capacity=capacity)

    def _apply_queues(self) -> None:
        import yaml

        from accelsched.live import kube as k

        nodes = self.seg.nodes
        text = queues_yaml(int(nodes.gpus.sum()), int(nodes.cpu.sum()), int(nodes.memory.sum()), milli=True)
        plurals = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}
        for doc in yaml.safe_load_all(text):
            namespace = doc["metadata"].get("namespace")
            resource = k.Resource(KUEUE_API, plurals[doc["kind"]], namespaced=namespace is not None)
            self.kube.create(resource, doc, namespace)

    def _wait_active(self) -> None:
        """Kueue's controller marks the ClusterQueue Active once it has seen its flavor."""
        from accelsched.live import kube as k

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = self.kube.get(k.Resource(KUEUE_API, "clusterqueues"), "trace").get("status") or {}
            if any(c["type"] == "Active" and c["status"] == "True" for c in status.get("conditions") or []):
                return
            time.sleep(0.2)
        raise RuntimeError("ClusterQueue trace not active after 30 s")

    def _pod(self, i: int, queued: bool = False) -> dict[str, Any]:
        spec = _pod_spec(self.seg, i)
        metadata: dict[str, Any] = {"name": f"w{i:05d}", "namespace": NAMESPACE}
        if queued:
            metadata["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
            spec["schedulerName"] = "accelsched"
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}

    def _play(self, timeout: float) -> Figures:
        from accelsched.live import kube as k

        seg = self.seg
        pool = _Pool(16)
        loops = [self._watch_pods, self._finish] + ([self._watch_workloads] if self.system == "kueue" else [])
        threads = [threading.Thread(target=f, daemon=True, args=(pool,)) for f in loops]
        for t in threads:
            t.start()
        start = time.monotonic()
        self.start = start
        figures = Figures(self.system, workloads=seg.pods.n)
        stuck: set[int] = set()
        arrivals = sorted(range(seg.pods.n), key=lambda i: seg.arrival[i])
        nxt = 0
        alloc_sum = alloc_n = 0.0
        capacity = int(seg.nodes.gpus.sum()) * MILLI
        while time.monotonic() - start < timeout:
            now = time.monotonic()
            while nxt < len(arrivals) and start + seg.arrival[arrivals[nxt]] <= now:
                i = arrivals[nxt]
                nxt += 1
                if self.system == "kueue":
                    body = {
                        "apiVersion": "kueue.x-k8s.io/v1beta2",
                        "kind": "Workload",
                        "metadata": {"name": f"w{i:05d}"},
                        "spec": {
                            "queueName": "lq",
                            "podSets": [{"name": "main", "count": 1, "template": {"spec": _pod_spec(seg, i)}}],
                        },
                    }
                    pool.submit(self.kube.create, self.workloads, body, NAMESPACE)
                else:  # the second door: a pod carrying the queue label, for accelsched to admit and place
                    pool.submit(self.kube.create, k.PODS, self._pod(i, queued=True), NAMESPACE)
            with self.lock:
                pending = [i for i, t in self.admitted.items() if i not in self.bound and now - t > self.stuck_after]
                running = [i for i in self.bound if i not in self.finished]
                done = len(self.finished)
            stuck.update(pending)
            allocation = sum(seg.gpu_milli[i] for i in running) / capacity
            figures.series.append((round(now - start, 1), len(pending), allocation))
            figures.stuck_peak = max(figures.stuck_peak, len(pending))
            alloc_sum, alloc_n = alloc_sum + allocation, alloc_n + 1
            if done == seg.pods.n:
                figures.makespan_s = now - start
                break
            time.sleep(1.0)
        figures.wall_s = time.monotonic() - start
        with self.lock:
            figures.ran = len(self.bound)
            figures.stuck_end = sum(1 for i in self.admitted if i not in self.bound)
            figures.waited_for_room = len(self.room)
        figures.stuck = len(stuck)
        figures.allocation = alloc_sum / alloc_n if alloc_n else 0.0
        self._stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        return figures

    def _watch(self, resource: Any, seen: Any) -> None:
        from accelsched.live.kube import ApiError

        version = self.kube.list(resource, NAMESPACE)["metadata"]["resourceVersion"]
        while not self._stop.is_set():
            try:
                for event in self.kube.watch(resource, version, 30, namespace=NAMESPACE):
                    obj = event.get("object") or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion", version)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        seen(obj)
                    if self._stop.is_set():
                        return
            except ApiError:
                time.sleep(0.1)

    def _watch_workloads(self, pool: concurrent.futures.Executor) -> None:
        from accelsched.live import kube as k

        def seen(obj: dict[str, Any]) -> None:
            conditions = (obj.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "QuotaReserved" and c.get("status") == "True" for c in conditions):
                return
            i = int(obj["metadata"]["name"][1:])
            with self.lock:
                if i in self.admitted:
                    return
                self.admitted[i] = time.monotonic()
            pool.submit(self.kube.create, k.PODS, self._pod(i), NAMESPACE)

        self._watch(self.workloads, seen)

    def _watch_pods(self, pool: concurrent.futures.Executor) -> None:
        from accelsched.live import kube as k

        def seen(obj: dict[str, Any]) -> None:
            i = int(obj["metadata"]["name"][1:])
            if not (obj.get("spec") or {}).get("nodeName"):
                # accelsched's door: a pod it holds for quota is SchedulingGated; one it let through and could
                # not place is Unschedulable: admitted and not placed, the count (Kueue's side counts from the
                # Workload's QuotaReserved)
                conditions = (obj.get("status") or {}).get("conditions") or []
                scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
                if self.system != "kueue" and scheduled.get("reason") == "Unschedulable":
                    with self.lock:
                        self.admitted.setdefault(i, time.monotonic())
                elif self.system != "kueue" and str(scheduled.get("message", "")).startswith(ROOM):
                    with self.lock:
                        self.room.add(i)
                return
            with self.lock:
                if i in self.bound:
                    return
                self.bound[i] = at = time.monotonic()
                heapq.heappush(self._due, (at + self.seg.run[i], i))

        self._watch(k.PODS, seen)

    def _finish(self, pool: concurrent.futures.Executor) -> None:
        """A pod that ran its time is deleted (no kubelet: at once) and its Workload with it, freeing the quota."""
        from accelsched.live import kube as k

        def end(i: int) -> None:
            name = f"w{i:05d}"
            self.kube.request("DELETE", k.PODS.path(NAMESPACE, name), {"gracePeriodSeconds": 0})
            if self.system == "kueue":
                self.kube.delete(self.workloads, name, NAMESPACE)
            with self.lock:
                self.finished.add(i)

        while not self._stop.is_set():
            with self.lock:
                ready = []
                while self._due and self._due[0][0] <= time.monotonic():
                    ready.append(heapq.heappop(self._due)[1])
            for i in ready:
                pool.submit(end, i)
            time.sleep(0.1)


class _Pool(concurrent.futures.ThreadPoolExecutor):
    """A thread pool whose failed calls are printed (a create refused would otherwise vanish)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:  # type: ignore[override]
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(_report)
        return future


def _report(future: concurrent.futures.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        print(f"benchmarks.admitted: {future.exception()}", file=sys.stderr)


# ------------------------------------------------------------------------------------------------ the command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.admitted", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=40)
    parser.add_argument("--workloads", type=int, default=300)
    parser.add_argument("--arrive", type=int, default=30, help="seconds over which the pods arrive")
    parser.add_argument("--run-time", type=int, default=30, help="median run time, seconds")
    parser.add_argument("--stuck", type=float, default=5.0, help="seconds unbound after admission that count")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=480.0, help="seconds the Kueue run may take")
    parser.add_argument("--only", choices=SYSTEMS)
    args = parser.parse_args(argv)
    try:
        seg = segment(args.nodes, args.workloads, args.arrive, args.run_time, args.seed)
    except ValueError as exc:
        parser.error(str(exc))
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="admitted-") as tmp:
            for system in (args.only,) if args.only else SYSTEMS:
                if system != "accelsched":
                    rows.append(LiveRun(seg, Path(tmp) / system, args.stuck, system).run(args.timeout))
                else:
                    rows.append(accelsched(seg, Path(tmp), seed=args.seed))
    except Unavailable as exc:
        print(f"benchmarks.admitted: {exc}", file=sys.stderr)
        return 2
    sizes = ", ".join(f"{n} x {g} GPUs" for g, n in zip(*np.unique(seg.pods.num_gpu, return_counts=True), strict=True))
    print(
        f"{seg.nodes.n} nodes of {GPUS} GPUs, {seg.pods.n} workloads ({sizes}; {sum(seg.gpu_milli) / MILLI:.0f} "
        f"GPUs asked), arriving over {args.arrive} s, median run {args.run_time} s, stuck after {args.stuck} s"
    )
    keys = ["workloads", "ran", "stuck", "stuck_peak", "stuck_end", "waited_for_room", "makespan_s", "allocation"]
    print(f"{'system':<11}" + "".join(f"{k:>16}" for k in keys))
    for row in rows:
        values = {k: getattr(row, k) for k in keys}
        values["allocation"] = f"{100 * row.allocation:.1f}%"
        values["makespan_s"] = f"{row.makespan_s:.0f}" if row.makespan_s else f"> {row.wall_s:.0f}"
        print(f"{row.system:<11}" + "".join(f"{values[k]!s:>16}" for k in keys))
    for row in rows:
        if row.system != "accelsched":
            # the count over time: every 10 s, admitted workloads unbound past --stuck, and the GPU allocation
            points = row.series[::10]
            print(
                f"{row.system} over time (s: stuck, allocation): "
                + ", ".join(f"{t:.0f}: {s}, {100 * a:.0f}%" for t, s, a in points)
            )
    return 0 if all(r.stuck == 0 for r in rows if r.system != "kueue") else 1


if __name__ == "__main__":
    raise SystemExit(main())
