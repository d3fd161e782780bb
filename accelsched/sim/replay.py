"""The FGD paper's experiment: shuffle the pods by seed, inflate the workload to a share of GPU capacity, schedule
in order with nothing leaving, and record allocation and fragmentation as the arrived demand grows.

``run_experiment`` is one policy and one seed on the fast path (``SimCluster``); ``run_matrix`` spreads policies
x seeds over processes. Ties between the best nodes go to the smallest node name (the paper's simulator patches
selectHost so), but by default (``tie_break="paper"``) on the names that simulator gives the nodes: it sorts them,
draws ``rand.Perm`` from Go's global generator, which the experiment seed seeded, and prefixes each name with its
``%04d-`` draw (hkust-adsl/kubernetes-scheduler-simulator, ``syncClusterResourceList``). The tie order is therefore
a random node order fixed for one experiment and different per seed; ``paper_names`` draws one the same way from
the seed (not Go's generator, so not the same order bit for bit). ``"name"`` keeps the trace's own names
(openb-node-XXXX order); ``"random"`` is stock kube-scheduler's seeded random choice per pod. Whichever, the fast
path breaks ties exactly as the framework's Scheduler does on the same names.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from accelsched.errors import InputError
from accelsched.sim.cluster import SimCluster
from accelsched.sim.fragmentation import TypicalPods, trace_typical_pods
from accelsched.sim.policies import PodShape, make
from accelsched.sim.trace import Nodes, Pods, load_nodes, load_pods


@dataclass
class Experiment:
    """One replay: per pod in arrival order, the GPU milli arrived so far, allocated, and fragmented."""

    policy: str
    seed: int
    capacity: int
    arrived: np.ndarray
    allocated: np.ndarray
    frag: np.ndarray
    failed: np.ndarray  # bool per pod
    gpu_failed: int
    seconds: float  # wall clock
    cpu_seconds: float = 0.0  # this process's CPU time (what the wall clock would be on an idle core)

    def at(self, share: float) -> int:
        """Index of the last pod that arrived within ``share`` of GPU capacity (-1: none yet)."""
        return int(np.searchsorted(self.arrived, share * self.capacity, side="right")) - 1

    def alloc_ratio(self, share: float) -> float:
        i = self.at(share)
        return 0.0 if i < 0 else float(self.allocated[i]) / self.capacity

    def frag_at(self, share: float) -> tuple[float, float]:
        """(fragmented milli, fragmented share of the free milli) when ``share`` of capacity has arrived."""
        i = self.at(share)
        if i < 0:
            return 0.0, 0.0
        free = self.capacity - float(self.allocated[i])
        return float(self.frag[i]), (float(self.frag[i]) / free if free else 0.0)

    @property
    def arrived_share(self) -> float:
        return float(self.arrived[-1]) / self.capacity if len(self.arrived) else 0.0

    @property
    def unallocated_gpus(self) -> float:
        return (self.capacity - float(self.allocated[-1])) / 1000


TIE_BREAKS = ("paper", "name", "random")
NODE_ORDER_STREAM = 0x6E6F6465  # keeps the node order's draws apart from the shuffle's for the same seed


def paper_names(names: Sequence[str], seed: int) -> list[str]:
    """Node names as the paper's simulator renames them: sorted, then each prefixed with a zero-padded draw of a
    seeded permutation, so "the smallest name" is a random node order fixed by the seed."""
    width = max(4, len(str(len(names) - 1)))
    perm = np.random.default_rng([NODE_ORDER_STREAM, seed]).permutation(len(names))
    rank = np.empty(len(names), dtype=np.int64)
    rank[np.argsort(np.array(names), kind="stable")] = perm
    return [f"{int(r):0{width}d}-{name}" for r, name in zip(rank.tolist(), names, strict=True)]


def sim_node_names(names: Sequence[str], tie_break: str, seed: int) -> list[str]:
    """The node names a replay schedules on: the paper's renamed ones for ``tie_break="paper"``, else the trace's."""
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"unknown tie break {tie_break!r} ({', '.join(TIE_BREAKS)})")
    return paper_names(names, seed) if tie_break == "paper" else list(names)


def check_inflatable(pods: Pods) -> None:
    """The inflation protocol needs GPU requests: copies of pods that ask for none would never reach the target."""
    if int(pods.gpu_request.sum()) <= 0:
        raise InputError(
            "no pod of this list requests a GPU; the inflation protocol tunes the GPU request to a share of GPU "
            "capacity (choose another pod list, or --mode timeline)",
            source=pods.source,
            field="--pods",
        )


def inflate(pods: Pods, capacity: int, ratio: float, seed: int) -> np.ndarray:
    """Pod indices in scheduling order: the pods shuffled by ``seed``, then random copies (same generator) added
    while the total GPU request stays within ``ratio`` x capacity (the total requested, not what gets allocated).
    A list already above that is only shuffled."""
    check_inflatable(pods)
    request = pods.gpu_request
    total = int(request.sum())
    rng = np.random.default_rng(seed)
    order = rng.permutation(pods.n)
    target = ratio * capacity
    extra = []
    # Draw in blocks (one generator call each) and stop at the first copy that would cross the target.
    while total <= target:
        for j in rng.integers(0, pods.n, size=1024):
            if total + request[j] > target:
                total = target + 1
                break
            extra.append(j)
            total += int(request[j])
    return np.concatenate([order, np.array(extra, dtype=np.int64)])


def shapes_of(pods: Pods) -> list[PodShape]:
    cache: dict[tuple[int, int, int, int], PodShape] = {}
    out = []
    for key in zip(
        pods.cpu.tolist(), pods.memory.tolist(), pods.num_gpu.tolist(), pods.gpu_milli.tolist(), strict=True
    ):
        shape = cache.get(key)
        if shape is None:
            shape = cache[key] = PodShape(*key)
        out.append(shape)
    return out


class FastEngine:
    """The Scheduler's decision on the fast path: the same filters, the policy's score, and (when more than one
    node fits) the highest score with ties broken as Scheduler.select_host breaks them: the smallest node name
    (``paper``: the names the paper's simulator gives the nodes, ``name``: the trace's) or ``random.Random(seed)``
    (``random``, kube-scheduler); one node fitting is taken without scoring, as there."""

    def __init__(
        self,
        nodes: Nodes,
        typical: TypicalPods,
        specs: list[frozenset[str]],
        policy: str,
        seed: int,
        tie_break: str = "paper",
    ) -> None:
        self.cluster = SimCluster(nodes, typical, specs)
        self.policy = make(policy, typical, seed)
        self.rng = random.Random(seed)
        self.tie_break = tie_break
        names = np.array(sim_node_names(nodes.names, tie_break, seed))
        self.name_rank = np.argsort(np.argsort(names))  # the smallest node name wins a tie
        self.cache: dict[tuple[int, int, int], list] = {}

    def choose_node(self, pod: PodShape, spec: int) -> int | None:
        cluster, policy = self.cluster, self.policy
        idx = cluster.feasible(pod, spec)
        if idx.size <= 1:
            return int(idx[0]) if idx.size else None
        scores = self.scores(pod)[idx] if policy.node_local else policy.scores(cluster.view(idx, pod, policy), pod)
        best = np.flatnonzero(scores == scores.max())
        if best.size > 1 and self.tie_break != "random":
            pick = best[np.argmin(self.name_rank[idx[best]])]
        else:
            pick = best[0] if best.size == 1 else best[self.rng.randrange(best.size)]
        return int(idx[pick])

    def scores(self, pod: PodShape) -> np.ndarray:
        """The policy's scores over all nodes for this pod shape, kept per shape and recomputed only at the nodes
        that changed since (a node's score depends on that node alone): most pods cost a lookup."""
        cluster = self.cluster
        cached = self.cache.get(pod.score_key)
        if cached is None:
            everything = np.arange(cluster.nodes.n)
            cached = self.cache[pod.score_key] = [
                self.policy.scores(cluster.view(everything, pod, self.policy), pod),
                0,
            ]
        values, seen = cached
        if seen < len(cluster.changes):
            dirty = np.unique(np.array(cluster.changes[seen:], dtype=np.int64))
            values[dirty] = self.policy.scores(cluster.view(dirty, pod, self.policy), pod)
            cached[1] = len(cluster.changes)
        return values

    def schedule(self, pod: PodShape, spec: int) -> tuple[int, tuple[int, ...]] | None:
        """(node, GPU indices taken) where the pod was bound, or None when it fits nowhere."""
        node = self.choose_node(pod, spec)
        if node is None:
            return None
        gpu = None
        if pod.sharing:
            gpu = self.policy.choose_gpu(self.cluster.view(np.array([node]), pod, self.policy), pod)
        return node, self.cluster.place(node, pod, gpu)


def run_experiment(
    nodes: Nodes,
    pods: Pods,
    policy_key: str,
    seed: int,
    inflation: float = 1.3,
    typical: TypicalPods | None = None,
    tie_break: str = "paper",
) -> Experiment:
    start, cpu_start = time.perf_counter(), time.process_time()
    typical = typical or trace_typical_pods(pods, nodes.models)
    order = inflate(pods, nodes.gpu_milli_capacity, inflation, seed)
    workload = pods.take(order)
    shapes = shapes_of(workload)
    engine = FastEngine(nodes, typical, pods.specs, policy_key, seed, tie_break)
    cluster = engine.cluster
    n = workload.n
    arrived = np.cumsum(workload.gpu_request)
    allocated = np.zeros(n, dtype=np.int64)
    frag = np.zeros(n, dtype=np.float64)
    failed = np.zeros(n, dtype=bool)
    specs = workload.spec.tolist()
    for i, pod in enumerate(shapes):
        failed[i] = engine.schedule(pod, specs[i]) is None
        allocated[i] = cluster.allocated
        frag[i] = cluster.frag_total
    frag /= typical.covered
    gpu_failed = int((failed & (workload.gpu_request > 0)).sum())
    return Experiment(
        policy_key,
        seed,
        nodes.gpu_milli_capacity,
        arrived,
        allocated,
        frag,
        failed,
        gpu_failed,
        time.perf_counter() - start,
        time.process_time() - cpu_start,
    )


# ---------------------------------------------------------------------------------------- the matrix

_WORKER: dict[str, object] = {}


def _init(node_path: str, pod_path: str) -> None:
    nodes, pods = load_nodes(node_path), load_pods(pod_path)
    _WORKER.update(nodes=nodes, pods=pods, typical=trace_typical_pods(pods, nodes.models))


def _one(task: tuple[str, int, float, str]) -> Experiment:
    policy, seed, inflation, tie_break = task
    return run_experiment(
        _WORKER["nodes"],
        _WORKER["pods"],
        policy,
        seed,
        inflation,
        _WORKER["typical"],
        tie_break,  # type: ignore[arg-type]
    )


def run_matrix(
    node_path: str,
    pod_path: str,
    policies: Sequence[str],
    seeds: Sequence[int],
    inflation: float = 1.3,
    processes: int | None = None,
    progress: Callable[[Experiment], None] | None = None,
    tie_break: str = "paper",
) -> list[Experiment]:
    """Every policy x seed, over ``processes`` worker processes (default: one per CPU); results in task order."""
    tasks = [(p, s, inflation, tie_break) for p in policies for s in seeds]
    processes = processes or min(len(tasks), multiprocessing.cpu_count())
    results: dict[tuple[str, int], Experiment] = {}

    def collect(done: Iterator[Experiment]) -> None:
        for exp in done:
            results[(exp.policy, exp.seed)] = exp
            if progress is not None:
                progress(exp)

    if processes <= 1:
        _init(node_path, pod_path)
        collect(_one(t) for t in tasks)
    else:
        with multiprocessing.get_context("fork").Pool(processes, _init, (node_path, pod_path)) as pool:
            collect(pool.imap_unordered(_one, tasks))
    return [results[(p, s)] for p, s, _, _ in tasks]
