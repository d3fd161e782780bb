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

    python -m benchmarks.live --compare                # the same two figures for the real kube-scheduler too
    python -m benchmarks.live --churn                  # churn, accelsched run beside the real kube-scheduler
    python -m benchmarks.live --churn --nodes 5000 --bound 30000 --rate 50 --duration 180
    python -m benchmarks.live --churn --node-churn 50   # and 50 nodes joining, 50 leaving per minute
    python -m benchmarks.live --churn --nodes 15000 --bound 67000 --pending 33000 --node-churn 50  # 100,000 pods

Churn (``--churn``): ``--nodes`` nodes carrying ``--bound`` pods bound at creation (spec.nodeName, as another
scheduler or a kubelet's static pods leave them), then, for each scheduler in turn on the same API server, bound
pods deleted and new pending pods created at ``--rate`` per second each for ``--duration`` seconds: what a busy
training cluster does to a scheduler whose every deletion by others used to rebuild its state. Each pod's
latency is its create request to its bind (seen through a watch); reported with p50/p99/max, the bind
throughput, the scheduler process's CPU seconds and peak RSS, and for accelsched the session rebuilds its log
shows after the start (none in the steady state). The real kube-scheduler is the binary next to the API server
(hack/build-controlplane.sh), run with the default profile and client QPS/burst 5000 (as scheduler_perf).

A backlog (``--pending``): that many Pending pods no node can take (pending_shapes: openb's pod shapes, kept out
by too many accelerators, a nodeSelector on a GPU model absent from the cluster, or a dedicated pool's taint they
do not tolerate; a tenth of the nodes form that pool) are created for each scheduler before it starts, and the
churn begins once it has tried each of them (PodScheduled False on all): how long that first pass took, and then
what the backlog costs under churn, whose node joins and pod deletions requeue them in both schedulers.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import random
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Sequence
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


# A dedicated pool (--pending): every DEDICATED_EVERY-th node carries this label and taint, as a team's reserved
# nodes do; Pending pods that select the pool without tolerating its taint fit nowhere.
DEDICATED_EVERY = 10
DEDICATED_LABEL = ("pool", "training")
DEDICATED_TAINT = {"key": "pool", "value": "training", "effect": "NoSchedule"}


def create_node(kube: Kube, name: str, dedicated: bool = False) -> None:
    """A node as a kubelet registers it: created, its status (allocatable) patched, then made Ready (and, for a
    ``dedicated`` node, labelled and tainted for its pool)."""
    labels = {"bench": "live"} | (dict([DEDICATED_LABEL]) if dedicated else {})
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    kube.create(k.NODES, body)
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "110", ACCEL: "8"}
    status = {"status": {"capacity": capacity, "allocatable": capacity}}
    kube.patch(k.NODES, name, status, sub="status")
    # The node lifecycle controller's part: a Ready node loses the not-ready taint admission gave it.
    kube.patch(k.NODES, name, {"spec": {"taints": [DEDICATED_TAINT] if dedicated else []}})


def create_nodes(kube: Kube, count: int, workers: int = 16, dedicated: bool = False) -> None:
    """``count`` nodes; with ``dedicated``, every DEDICATED_EVERY-th one in the dedicated pool."""
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(
            pool.map(
                lambda i: create_node(kube, f"bench-node-{i:05d}", dedicated and i % DEDICATED_EVERY == 0),
                range(count),
            )
        )


KUBE_SCHEDULER = "default-scheduler"  # the schedulerName the real kube-scheduler serves (its default profile)


def pod_body(name: str, namespace: str, scheduler: str = "accelsched", node: str = "") -> dict[str, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/infer:1",
                    "resources": {"requests": {"cpu": "100m", ACCEL: "1"}, "limits": {ACCEL: "1"}},
                }
            ],
        },
    }
    if node:
        body["spec"]["nodeName"] = node  # type: ignore[index]
    return body


def create_pod(kube: Kube, body: dict[str, Any], namespace: str, tries: int = 5) -> None:
    """One pod created, sent again when a busy API server times out or sheds load (a pod that was created
    meanwhile answers 409 to the next try: it is there)."""
    for attempt in range(tries):
        try:
            kube.create(k.PODS, body, namespace)
            return
        except ApiError as exc:
            if exc.status == 409 and attempt:
                return
            if exc.status not in (0, 429, 500, 503, 504) or attempt == tries - 1:
                raise
            time.sleep(1.0 + attempt)


def create_pods(
    kube: Kube, namespace: str, prefix: str, count: int, workers: int = 32, scheduler: str = "accelsched"
) -> float:
    """Create the pods from a thread pool; returns when the first create was sent."""
    first = time.monotonic()

    def one(i: int) -> None:
        kube.create(k.PODS, pod_body(f"{prefix}-{i:05d}", namespace, scheduler), namespace)

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(count)))
    return first


class BindWatch:
    """Times each pod of a namespace becoming bound, from a watch (what the API server says, not the scheduler),
    and each pod first marked unschedulable (PodScheduled False, as both schedulers write after a failed try)."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.bound: dict[str, float] = {}
        self.unschedulable: dict[str, float] = {}
        self.lock = threading.Lock()
        self._stop = False
        listing = kube.list(k.PODS, namespace, limit=1)  # its resourceVersion only
        self.version = listing["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                for event in self.kube.watch(k.PODS, self.version, 30, namespace=self.namespace):
                    obj = event.get("object") or {}
                    self.version = (obj.get("metadata") or {}).get("resourceVersion", self.version)
                    if event.get("type") not in ("ADDED", "MODIFIED"):
                        continue
                    if (obj.get("spec") or {}).get("nodeName"):
                        with self.lock:
                            self.bound.setdefault(obj["metadata"]["name"], time.monotonic())
                    elif _marked_unschedulable(obj):
                        with self.lock:
                            self.unschedulable.setdefault(obj["metadata"]["name"], time.monotonic())
            except ApiError:
                time.sleep(0.2)

    def wait(self, names: set[str], timeout: float, unschedulable: bool = False) -> bool:
        """Until every one of ``names`` is bound (or, ``unschedulable``, marked so) or ``timeout`` passes."""
        seen = self.unschedulable if unschedulable else self.bound
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if names <= seen.keys():
                    return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self._stop = True


def _marked_unschedulable(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


# The client throttle both schedulers run with here (clientConnection qps and burst), as scheduler_perf runs
# kube-scheduler: the benchmarks measure the schedulers, not kube-scheduler's default 50 requests a second.
CLIENT_CONNECTION = {"qps": 5000, "burst": 5000}


def start_scheduler(
    kubeconfig: str, log: Path, timeout: float = 60.0, extra: Sequence[str] = ()
) -> tuple[subprocess.Popen[bytes], int]:
    """``accelsched run`` in its own process (``extra``: more of its options), once /readyz answers (every
    informer listed) within ``timeout``. Without a ``--config`` in ``extra``: its default profile, with
    CLIENT_CONNECTION's throttle."""
    if not any(a.startswith("--config") for a in extra):
        import yaml

        config = log.with_name(log.stem + "-config.yaml")
        doc = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": dict(CLIENT_CONNECTION),
            "profiles": [{"schedulerName": "accelsched"}],
        }
        config.write_text(yaml.safe_dump(doc))
        extra = [f"--config={config}", *extra]
    args = [sys.executable, "-m", "accelsched.cli", "run", f"--kubeconfig={kubeconfig}", "--metrics-port=0", *extra]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("wb"), cwd=REPO)
    deadline = time.monotonic() + timeout
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


def start_kube_scheduler(kubeconfig: str, workdir: Path, tag: str) -> subprocess.Popen[bytes]:
    """The real kube-scheduler v1.36.3 (the binary hack/build-controlplane.sh caches next to the API server):
    default profile, no leader election, client QPS/burst 5000 as scheduler_perf runs it; ready when /readyz
    answers on its secure port."""
    import yaml
    from controlplane import build_controlplane

    binary = build_controlplane(workdir / "build.log") / "kube-scheduler"
    config = workdir / f"kube-scheduler-{tag}.yaml"
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig, **CLIENT_CONNECTION},
        "leaderElection": {"leaderElect": False},
    }
    config.write_text(yaml.safe_dump(doc))
    port = _free_port()
    args = [str(binary), f"--config={config}", f"--secure-port={port}", "--bind-address=127.0.0.1", "--v=1"]
    log = (workdir / f"kube-scheduler-{tag}.log").open("wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=2).status == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.1)
    stop_scheduler(proc)
    raise RuntimeError(f"kube-scheduler did not become ready; see {workdir / f'kube-scheduler-{tag}.log'}")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_usage(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) and peak RSS (VmHWM) of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    hwm = next(
        (
            int(line.split()[1])
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("VmHWM:")
        ),
        0,
    )
    return {"cpu_s": round(cpu, 2), "peak_rss_mib": round(hwm / 1024, 1)}


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


def run(
    kubeconfig: str,
    nodes: int,
    pods: int,
    workdir: Path,
    timeout: float = 900.0,
    schedulers: tuple[str, ...] = ("accelsched",),
) -> dict[str, Any]:
    """Both measurements on the cluster behind ``kubeconfig``, for each scheduler; the figures as a dict (the
    first scheduler's at the top level, as before, and every scheduler's under ``by_scheduler``)."""
    kube = Kube(api_client(kubeconfig, pool_size=64))
    t = time.monotonic()
    create_nodes(kube, nodes)
    node_setup = time.monotonic() - t
    out: dict[str, Any] = {"nodes": nodes, "pods": pods, "node_setup_s": round(node_setup, 2)}

    namespaces: list[str] = []
    out["by_scheduler"] = {}
    try:
        for scheduler, phase, preload in [
            (s, p, pre) for s in schedulers for p, pre in (("e2e", False), ("preloaded", True))
        ]:
            figures = _phase(kube, kubeconfig, phase, pods, preload, workdir, timeout, namespaces, scheduler)
            out["by_scheduler"].setdefault(scheduler, {})[phase] = figures
            if scheduler == schedulers[0]:
                out[phase] = figures
            if figures["bound"] < pods:
                out["failed"] = f"{scheduler} {phase}: {pods - figures['bound']} pods not bound"
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
    scheduler: str = "accelsched",
) -> dict[str, Any]:
    """One measurement in a fresh namespace. End to end: the scheduler runs while the pods are created, first
    create -> last bind. Preloaded: the pods exist before the scheduler starts, first bind -> last bind."""
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    namespaces.append(namespace)
    ensure_namespace(kube, namespace)
    watch = BindWatch(kube, namespace)
    names = {f"{phase}-{i:05d}" for i in range(pods)}
    name = KUBE_SCHEDULER if scheduler == "kube-scheduler" else "accelsched"
    if preload:
        create_pods(kube, namespace, phase, pods, scheduler=name)
    if scheduler == "kube-scheduler":
        proc = start_kube_scheduler(kubeconfig, workdir, phase)
    else:
        proc, _ = start_scheduler(kubeconfig, workdir / f"scheduler-{phase}.log")
    try:
        if not preload:
            first = create_pods(kube, namespace, phase, pods, scheduler=name)
            created = time.monotonic()
        watch.wait(names, timeout)
        usage = process_usage(proc.pid)
    finally:
        stop_scheduler(proc)
        watch.stop()
    times = sorted(watch.bound.values())
    figures: dict[str, Any] = {"bound": len(names & set(watch.bound)), **usage}
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


# ---------------------------------------------------------------------------------------------- churn


PENDING_KINDS = ("more accelerators than a node has", "a GPU model no node has", "the dedicated pool, untolerated")


def pending_shapes(count: int, seed: int = 0) -> list[tuple[dict[str, str], dict[str, str]]]:
    """(requests, nodeSelector) of ``count`` Pending pods no node can take, as a backlog has them: CPU, memory and
    accelerator counts drawn from openb's default pod list (benchmarks.scale's trace), each pod kept out by one of
    PENDING_KINDS in turn: more accelerators than any node's 8 (a multi-node job asked as one pod), a
    nodeSelector on an openb GPU model the nodes are not labelled with, or the dedicated pool's nodeSelector
    without a toleration of the pool's taint. No node that joins later fits them either (it is plain)."""
    from accelsched.sim.trace import load_nodes, load_pods, trace_paths

    node_path, pod_path = trace_paths("openb", "default")
    trace = load_pods(pod_path)
    models = load_nodes(node_path).models
    rng = random.Random(seed)
    shapes = []
    for j in range(count):
        t = rng.randrange(trace.n)
        gpus = max(1, int(trace.num_gpu[t]))
        requests = {"cpu": f"{int(trace.cpu[t])}m", "memory": f"{int(trace.memory[t])}Mi", ACCEL: str(gpus)}
        selector: dict[str, str] = {}
        kind = j % len(PENDING_KINDS)
        if kind == 0:
            requests[ACCEL] = str(8 + gpus)
        elif kind == 1:
            selector = {"accelerator": rng.choice(models)}
        else:
            selector = dict([DEDICATED_LABEL])
        shapes.append((requests, selector))
    return shapes


def pending_pod_body(
    name: str, namespace: str, scheduler: str, shape: tuple[dict[str, str], dict[str, str]]
) -> dict[str, Any]:
    body = pod_body(name, namespace, scheduler)
    requests, selector = shape
    container = body["spec"]["containers"][0]
    container["resources"] = {"requests": requests, "limits": {ACCEL: requests[ACCEL]}}
    if selector:
        body["spec"]["nodeSelector"] = selector
    return body


def create_pending(
    kube: Kube, namespace: str, scheduler: str, shapes: list[tuple[dict[str, str], dict[str, str]]]
) -> set[str]:
    """The Pending backlog in ``namespace`` for ``scheduler`` (its schedulerName); their names."""
    ensure_namespace(kube, namespace)
    names = [f"p-{i:06d}" for i in range(len(shapes))]

    def one(i: int) -> None:
        create_pod(kube, pending_pod_body(names[i], namespace, scheduler, shapes[i]), namespace)

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        list(pool.map(one, range(len(shapes))))
    return set(names)


def delete_all_pods(kube: Kube, namespace: str, timeout: float = 600.0) -> None:
    """Every pod of ``namespace`` deleted (a collection delete, sent again when a busy API server's answer times
    out before it has deleted them all), and gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kube.request("DELETE", k.PODS.path(namespace), {"gracePeriodSeconds": 0})
            if not kube.list(k.PODS, namespace, limit=1)["items"]:
                return
        except ApiError as exc:
            if exc.status not in (0, 429, 500, 503, 504):  # a timeout or an overloaded server: try again
                raise
        time.sleep(1.0)


def churn(
    kubeconfig: str,
    nodes: int,
    bound: int,
    rate: float,
    duration: float,
    workdir: Path,
    schedulers: tuple[str, ...] = ("accelsched", "kube-scheduler"),
    seed: int = 0,
    node_churn: float = 0.0,
    pending: int = 0,
    settle: float = 0.0,
    first_pass_timeout: float = 3600.0,
) -> dict[str, Any]:
    """The churn measurement (module docstring) for each scheduler in turn on the same cluster; ``node_churn``
    nodes per minute join and as many leave meanwhile (an autoscaler's); ``pending`` Pending pods no node can
    take (pending_shapes) are there for each scheduler, tried once before its churn starts; ``settle``: seconds
    to wait for the churn's pods after the churn (0: max(120, duration)); ``first_pass_timeout``: how long the churn
    waits for a scheduler's first pass over the backlog before it begins anyway (the figures say whether it ended)."""
    kube = Kube(api_client(kubeconfig, pool_size=64))
    t = time.monotonic()
    create_nodes(kube, nodes, dedicated=pending > 0)
    out: dict[str, Any] = {"nodes": nodes, "bound": bound, "rate_per_s": rate, "duration_s": duration}
    out["node_churn_per_min"] = node_churn
    out["pending"] = pending
    out["node_setup_s"] = round(time.monotonic() - t, 2)
    t = time.monotonic()
    ensure_namespace(kube, "churn-bound")
    names = [f"b-{i:06d}" for i in range(bound)]
    node_names = [f"bench-node-{i:05d}" for i in range(nodes)]

    def place(i: int) -> None:
        body = pod_body(names[i], "churn-bound", KUBE_SCHEDULER, node=node_names[i % nodes])
        create_pod(kube, body, "churn-bound")

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        list(pool.map(place, range(bound)))
    out["bound_setup_s"] = round(time.monotonic() - t, 2)
    victims = [("churn-bound", n) for n in names]
    random.Random(seed).shuffle(victims)
    out["by_scheduler"] = {}
    leaving = node_names[::-1]  # each phase's departures: the last nodes first, carrying their bound pods
    shapes = pending_shapes(pending, seed)
    for scheduler in schedulers:
        autoscaler = Autoscaler(kube, scheduler, node_churn, leaving)
        out["by_scheduler"][scheduler] = _churn_phase(
            kube,
            kubeconfig,
            scheduler,
            rate,
            duration,
            workdir,
            victims,
            autoscaler,
            shapes,
            settle,
            first_pass_timeout,
        )
        print(f"{scheduler}: {json.dumps(out['by_scheduler'][scheduler])}", file=sys.stderr, flush=True)
    return out


class Autoscaler:
    """Nodes joining and leaving at ``per_minute`` each while a churn phase runs, as a cluster autoscaler's scale
    up and scale down do: a node registered as a kubelet registers it (create, status, Ready), and another node
    deleted (its pods stay bound to it, as they do until the pod garbage collector runs)."""

    def __init__(self, kube: Kube, tag: str, per_minute: float, leaving: list[str]) -> None:
        self.kube, self.tag, self.per_minute, self.leaving = kube, tag, per_minute, leaving
        self.joined = self.left = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        if self.per_minute > 0:
            self._thread.start()

    def _run(self) -> None:
        period, begin = 60.0 / self.per_minute, time.monotonic()
        i = 0
        while not self._stop.wait(max(0.0, begin + i * period - time.monotonic())):
            create_node(self.kube, f"scaled-{self.tag}-{i:05d}")
            self.joined += 1
            if self.leaving:
                try:
                    self.kube.request("DELETE", k.NODES.path(name=self.leaving.pop()))
                    self.left += 1
                except ApiError as exc:
                    if exc.status != 404:
                        raise
            i += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def _churn_phase(
    kube: Kube,
    kubeconfig: str,
    scheduler: str,
    rate: float,
    duration: float,
    workdir: Path,
    victims: list[tuple[str, str]],
    autoscaler: Autoscaler | None = None,
    pending: list[tuple[dict[str, str], dict[str, str]]] | None = None,
    settle: float = 0.0,
    first_pass_timeout: float = 3600.0,
) -> dict[str, Any]:
    """One scheduler under churn: deletions of bound pods and creations of pending ones at ``rate`` each (and
    nodes joining and leaving, ``autoscaler``), with the ``pending`` backlog (shapes) created before it starts,
    each of them tried once (marked unschedulable) before the churn begins, and deleted after."""
    namespace = f"churn-{scheduler}"
    ensure_namespace(kube, namespace)
    watch = BindWatch(kube, namespace)
    log = workdir / f"churn-{scheduler}.log"
    name = KUBE_SCHEDULER if scheduler == "kube-scheduler" else "accelsched"
    backlog_ns = f"pending-{scheduler}"
    backlog: set[str] = set()
    backlog_watch = None
    if pending:
        t = time.monotonic()
        backlog = create_pending(kube, backlog_ns, name, pending)
        backlog_setup = time.monotonic() - t
        backlog_watch = BindWatch(kube, backlog_ns)
    started = time.monotonic()
    if scheduler == "kube-scheduler":
        proc = start_kube_scheduler(kubeconfig, workdir, "churn")
    else:
        # Listing 15,000 nodes and 100,000 pods on a busy 2-CPU machine takes minutes: as long as the first
        # session may take.
        proc, _ = start_scheduler(kubeconfig, log, timeout=900)
        _wait_for_line(log, "session rebuilt", 900)  # its first session built: ready to decide
    backlog_figures: dict[str, Any] = {}
    if backlog_watch is not None:
        # Every Pending pod tried once (both schedulers write PodScheduled False after a failed cycle): the churn
        # then measures what the backlog costs afterwards, its retries on the cluster's events.
        tried = backlog_watch.wait(backlog, timeout=first_pass_timeout, unschedulable=True)
        at = process_usage(proc.pid)
        backlog_figures = {
            "pending_setup_s": round(backlog_setup, 1),
            "backlog_first_pass_s": round(time.monotonic() - started, 1),
            "backlog_tried": len(backlog & backlog_watch.unschedulable.keys()) if not tried else len(backlog),
            "backlog_first_pass_done": tried,
            "backlog_cpu_s": at["cpu_s"],
            "backlog_peak_rss_mib": at["peak_rss_mib"],
        }
    created: dict[str, float] = {}
    count = int(rate * duration)
    start_usage = process_usage(proc.pid)

    def create(i: int) -> None:
        pod = f"c-{i:06d}"
        created[pod] = time.monotonic()
        kube.create(k.PODS, pod_body(pod, namespace, name), namespace)

    def delete(victim: tuple[str, str]) -> None:
        try:
            kube.request("DELETE", k.PODS.path(*victim), {"gracePeriodSeconds": 0})
        except ApiError as exc:
            if exc.status != 404:
                raise

    try:
        if autoscaler is not None:
            autoscaler.start()
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            begin = time.monotonic()
            futures = []
            for i in range(count):
                delay = begin + i / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                futures.append(pool.submit(create, i))
                futures.append(pool.submit(delete, victims.pop()))
            for f in futures:
                f.result()
        sent = time.monotonic() - begin
        if autoscaler is not None:
            autoscaler.stop()
        watch.wait(set(created), timeout=settle or max(120.0, duration))
        usage = process_usage(proc.pid)
    finally:
        if autoscaler is not None:
            autoscaler.stop()
        stop_scheduler(proc)
        watch.stop()
        if backlog_watch is not None:
            backlog_watch.stop()
            backlog_figures["backlog_bound"] = len(backlog_watch.bound)  # 0: none of them fits anywhere
            delete_all_pods(kube, backlog_ns)  # the next scheduler gets its own, on the same cluster otherwise
    latencies = sorted(watch.bound[p] - created[p] for p in created if p in watch.bound)
    binds = sorted(watch.bound[p] for p in created if p in watch.bound)
    span = (binds[-1] - min(created.values())) if binds else 0.0
    figures: dict[str, Any] = {
        "created": count,
        "bound": len(latencies),
        "client_rate_per_s": round(count / sent, 1) if sent else 0.0,
        "throughput_pods_per_s": round(len(binds) / span, 1) if span else 0.0,
        "latency_s": _percentiles(latencies),
        "latency_by_10s": _windows(created, watch.bound),
        "cpu_s": round(usage["cpu_s"] - start_usage["cpu_s"], 2),
        "cpu_s_total": usage["cpu_s"],
        "peak_rss_mib": usage["peak_rss_mib"],
        **backlog_figures,
    }
    if autoscaler is not None and autoscaler.per_minute:
        figures["nodes_joined"], figures["nodes_left"] = autoscaler.joined, autoscaler.left
    if scheduler != "kube-scheduler":
        reasons = [e.get("reason", "") for e in _log_entries(log) if e.get("msg") == "session rebuilt"]
        figures["rebuilds_after_start"] = len(reasons) - 1
        figures["rebuild_reasons"] = reasons[1:]
        errors = [e for e in _log_entries(log) if e.get("level") in ("warning", "error", "critical")]
        figures["log_errors"] = errors[:5]  # where pods that were not bound went (the log goes with the run)
    return figures


def in_place_cost(nodes: int, bound: int, changes: int = 1000) -> dict[str, Any]:
    """Without an API server: a never-started LiveScheduler's caches filled as a list would fill them, then one
    full rebuild (what every deletion by others used to cost) against ``changes`` deletions and as many binds by
    others applied in place (what each costs now), a node edit (a cordon), and nodes joining and leaving (an
    autoscaler's), all in place."""
    from kubernetes import client as k8s

    from accelsched.live.scheduler import LiveScheduler

    live = LiveScheduler(Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))))
    for i in range(nodes):
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"bench-node-{i:05d}", "uid": f"n{i}", "labels": {"bench": "live"}},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", ACCEL: "8"}},
        }
        live.nodes.store[node["metadata"]["name"]] = node
    for i in range(bound):
        pod = pod_body(f"b-{i:06d}", "churn-bound", KUBE_SCHEDULER, node=f"bench-node-{i % nodes:05d}")
        pod["metadata"]["uid"] = f"u{i}"
        live.pods.store[f"churn-bound/b-{i:06d}"] = pod
    t = time.perf_counter()
    live.sync_session()
    rebuild = time.perf_counter() - t
    keys = list(live.pods.store)[:changes]
    t = time.perf_counter()
    for key in keys:
        obj = live.pods.store.pop(key)
        live._on_pod("DELETED", obj, obj)
        live.sync_session()
    deletions = (time.perf_counter() - t) / len(keys)
    t = time.perf_counter()
    for i in range(changes):
        pod = pod_body(f"o-{i:06d}", "churn-bound", KUBE_SCHEDULER, node=f"bench-node-{(7 * i) % nodes:05d}")
        pod["metadata"]["uid"] = f"o{i}"
        live.pods.store[f"churn-bound/o-{i:06d}"] = pod
        live._on_pod("ADDED", pod, None)
        live.sync_session()
    binds = (time.perf_counter() - t) / changes
    old = live.nodes.store["bench-node-00000"]
    new = {**old, "spec": {"unschedulable": True}}
    live.nodes.store["bench-node-00000"] = new
    t = time.perf_counter()
    live._on_node("MODIFIED", new, old)
    live.sync_session()
    cordon = time.perf_counter() - t
    joins = leaves = 0.0
    rounds = 20
    for i in range(rounds):  # an autoscaler: a node joins (empty), another leaves with its pods
        fresh = {**old, "metadata": {**old["metadata"], "name": f"scaled-{i:05d}", "uid": f"s{i}"}, "spec": {}}
        t = time.perf_counter()
        live.nodes.store[fresh["metadata"]["name"]] = fresh
        live._on_node("ADDED", fresh, None)
        live.sync_session()
        joins += time.perf_counter() - t
        gone = live.nodes.store.pop(f"bench-node-{nodes - 1 - i:05d}")
        t = time.perf_counter()
        live._on_node("DELETED", gone, gone)
        live.sync_session()
        leaves += time.perf_counter() - t
    return {
        "nodes": nodes,
        "bound": bound,
        "rebuild_s": round(rebuild, 3),
        "deletion_in_place_ms": round(deletions * 1000, 3),
        "foreign_bind_in_place_ms": round(binds * 1000, 3),
        "cordon_in_place_ms": round(cordon * 1000, 3),
        "node_join_in_place_ms": round(joins / rounds * 1000, 3),
        "node_leave_in_place_ms": round(leaves / rounds * 1000, 3),
        "rebuilds": live.rebuilds,
    }


def _windows(created: dict[str, float], bound: dict[str, float], width: float = 10.0) -> list[dict[str, float]]:
    """p50/p99/max of the pods created in each ``width``-second window of the run (where the tail comes from)."""
    if not created:
        return []
    start = min(created.values())
    groups: dict[int, list[float]] = {}
    for pod, at in created.items():
        if pod in bound:
            groups.setdefault(int((at - start) // width), []).append(bound[pod] - at)
    return [{"from_s": k * width, **_percentiles(sorted(v))} for k, v in sorted(groups.items())]


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}

    def at(q: float) -> float:
        return round(values[min(len(values) - 1, int(q * len(values)))], 3)

    return {"p50": at(0.50), "p99": at(0.99), "max": round(values[-1], 3)}


def _log_entries(log: Path) -> list[dict[str, Any]]:
    entries = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def _wait_for_line(log: Path, msg: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e.get("msg") == msg for e in _log_entries(log)):
            return
        time.sleep(0.2)
    raise RuntimeError(f"accelsched run logged no {msg!r} in {timeout:.0f}s; log:\n{log.read_text()[-3000:]}")


def print_churn(figures: dict[str, Any]) -> None:
    print(
        f"churn against a real kube-apiserver: {figures['nodes']} nodes, {figures['bound']} bound pods, "
        f"{figures['rate_per_s']:g} deletions/s and {figures['rate_per_s']:g} new pods/s "
        f"for {figures['duration_s']:g} s"
        + (
            f", {figures['node_churn_per_min']:g} nodes joining and leaving per minute"
            if figures.get("node_churn_per_min")
            else ""
        )
        + (f", {figures['pending']} Pending pods that fit nowhere" if figures.get("pending") else "")
    )
    head = f"  {'':16} {'bound':>11} {'pods/s':>7} {'p50 s':>7} {'p99 s':>7} {'max s':>7} {'CPU s':>7} {'RSS MiB':>8}"
    print(head)
    for name, f in figures["by_scheduler"].items():
        lat = f["latency_s"]
        print(
            f"  {name:16} {f['bound']:>5}/{f['created']:<5} {f['throughput_pods_per_s']:>7} {lat['p50']:>7} "
            f"{lat['p99']:>7} {lat['max']:>7} {f['cpu_s']:>7} {f['peak_rss_mib']:>8}"
        )
        if "backlog_first_pass_s" in f:
            print(
                f"  {'':16} backlog: {f['backlog_tried']} Pending pods tried once in {f['backlog_first_pass_s']} s "
                f"after the start (CPU {f['backlog_cpu_s']} s, RSS {f['backlog_peak_rss_mib']} MiB so far); "
                f"{f.get('backlog_bound', 0)} of them bound"
                + ("" if f.get("backlog_first_pass_done", True) else "; the first pass had not ended: churn began")
            )
        if "nodes_joined" in f:
            print(f"  {'':16} nodes joined {f['nodes_joined']}, left {f['nodes_left']}")
        if "rebuilds_after_start" in f:
            print(f"  {'':16} session rebuilds after the start: {f['rebuilds_after_start']} {f['rebuild_reasons'][:5]}")
    both = figures["by_scheduler"]
    if {"accelsched", "kube-scheduler"} <= set(both) and both["kube-scheduler"]["latency_s"]["p99"]:
        ratio = both["accelsched"]["latency_s"]["p99"] / both["kube-scheduler"]["latency_s"]["p99"]
        print(f"  p99 ratio accelsched / kube-scheduler: {ratio:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.live", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, help="nodes (default 1000; 5000 with --churn)")
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--compare", action="store_true", help="also measure the real kube-scheduler")
    parser.add_argument("--churn", action="store_true", help="the churn benchmark, beside the real kube-scheduler")
    parser.add_argument(
        "--in-place", action="store_true", help="no API server: a full rebuild vs changes applied in place (--bound)"
    )
    parser.add_argument("--bound", type=int, default=30000, help="--churn: pods bound before the churn")
    parser.add_argument("--rate", type=float, default=50.0, help="--churn: deletions and creations per second, each")
    parser.add_argument("--duration", type=float, default=30.0, help="--churn: seconds of churn per scheduler")
    parser.add_argument(
        "--pending", type=int, default=0, help="--churn: Pending pods no node can take, there for each scheduler"
    )
    parser.add_argument(
        "--settle", type=float, default=0.0, help="--churn: seconds to wait for its pods (default max(120, duration))"
    )
    parser.add_argument(
        "--first-pass-timeout",
        type=float,
        default=3600.0,
        help="--churn: seconds to wait for a scheduler's first pass over the backlog before the churn begins anyway",
    )
    parser.add_argument(
        "--node-churn", type=float, default=0.0, help="--churn: nodes joining and as many leaving per minute"
    )
    parser.add_argument(
        "--schedulers", default="accelsched,kube-scheduler", help="--churn: which, in order (comma-separated)"
    )
    parser.add_argument("--kubeconfig", help="an existing cluster (default: start etcd + kube-apiserver here)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.in_place:
        figures = in_place_cost(args.nodes or 5000, args.bound)
        print(json.dumps(figures))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(figures, indent=2))
        return 0
    with tempfile.TemporaryDirectory(prefix="accelsched-live-bench-") as tmp:
        workdir = Path(tmp)
        cp = None
        kubeconfig = args.kubeconfig
        if kubeconfig is None:
            from controlplane import ControlPlane

            cp = ControlPlane(workdir / "cp").start()
            kubeconfig = str(cp.kubeconfig)
        try:
            if args.churn:
                schedulers = tuple(s for s in args.schedulers.split(",") if s)
                nodes = args.nodes or 5000
                figures = churn(
                    kubeconfig,
                    nodes,
                    args.bound,
                    args.rate,
                    args.duration,
                    workdir,
                    schedulers,
                    node_churn=args.node_churn,
                    pending=args.pending,
                    settle=args.settle,
                    first_pass_timeout=args.first_pass_timeout,
                )
            else:
                schedulers = ("accelsched", "kube-scheduler") if args.compare else ("accelsched",)
                figures = run(kubeconfig, args.nodes or 1000, args.pods, workdir, schedulers=schedulers)
        finally:
            if cp is not None:
                cp.stop()
    if args.churn:
        figures["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        print_churn(figures)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(figures, indent=2))
        unbound = {
            n: f["created"] - f["bound"] for n, f in figures["by_scheduler"].items() if f["bound"] < f["created"]
        }
        if unbound:
            print(f"FAILED: pods not bound: {unbound}", file=sys.stderr)
            return 1
        return 0
    figures["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    print(f"against a real kube-apiserver: {figures['nodes']} nodes, {args.pods} pods")
    for scheduler, phases in figures["by_scheduler"].items():
        for name in ("e2e", "preloaded"):
            if name in phases:
                f = phases[name]
                print(
                    f"  {scheduler:14} {name:9}  {f['bound']}/{args.pods} bound in {f['seconds']} s: "
                    f"{f['pods_per_s']} pods/s (CPU {f['cpu_s']} s, peak RSS {f['peak_rss_mib']} MiB)"
                )
        if "e2e" in phases:
            print(f"  {'':14} (pods created at {phases['e2e']['create_pods_per_s']} pods/s by the client)")
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
