"""The six placement policies of the FGD paper as vectorized scores over candidate nodes, plus their GPU choice.

Each policy scores the nodes of a ``NodeView`` (columns over the candidate nodes) for one pod shape and, for a
GPU-sharing pod, picks which GPU of the chosen node it lands on. The framework's score plugins
(``accelsched.plugins.gpushare``) and the simulator's fast path both call these functions, so a policy means the
same thing in a KubeSchedulerConfiguration, in live mode and in a trace replay.

Scores follow the paper's simulator (hkust-adsl/kubernetes-scheduler-simulator): integers, higher is better,
the node with the highest score wins. GPU choice for a sharing pod, as the paper's runs configure it: FGD keeps
the GPU whose use adds the least fragmentation, Random takes a random GPU that fits, the others the tightest GPU
that fits (lowest index among equals); whole-GPU pods take the lowest-indexed fully free GPUs.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

from accelsched.sim.fragmentation import TypicalPods, fragmentation
from accelsched.sim.trace import MILLI

MAX_NODE_SCORE = 100
# The largest node of the openb trace (128 cores, 8 GPUs): BestFit's and GpuClustering's normalization.
MAX_SPEC_CPU = 128_000
MAX_SPEC_GPU = 8 * MILLI


@dataclass(frozen=True)
class PodShape:
    """What a policy needs of a pod: cpu (milli), memory (MiB), GPU count and per-GPU milli (1000: whole)."""

    cpu: int
    memory: int
    num_gpu: int
    milli: int  # 0 for a CPU-only pod

    @property
    def sharing(self) -> bool:
        return self.num_gpu == 1 and 0 < self.milli < MILLI

    @property
    def whole(self) -> int:
        """Whole GPUs taken (0 for a sharing or CPU-only pod)."""
        return 0 if self.sharing else self.num_gpu

    @property
    def gpu_request(self) -> int:
        return self.milli if self.sharing else self.num_gpu * MILLI

    @property
    def score_key(self) -> tuple[int, int, int]:
        """What a policy's score depends on (memory only filters)."""
        return (self.cpu, self.num_gpu, self.milli)

    @property
    def tag(self) -> tuple[int, int]:
        """GpuClustering's affinity: pods asking for the same GPU amount belong together."""
        return (self.num_gpu, self.milli)


@dataclass
class NodeView:
    """Candidate nodes as columns. ``gpu_free`` is (nodes, 8) free milli, 0 for GPUs a node lacks. ``fits``,
    ``usable`` and ``frag`` are the fragmentation terms (FGD only); ``same_tag`` and ``tag_kinds`` count bound GPU
    pods with the incoming pod's tag and distinct tags (GpuClustering only)."""

    cpu_free: np.ndarray
    cpu_cap: np.ndarray
    gpu_free: np.ndarray
    gpus: np.ndarray
    model: np.ndarray
    fits: np.ndarray | None = None
    usable: np.ndarray | None = None
    frag: np.ndarray | None = None
    same_tag: np.ndarray | None = None
    tag_kinds: np.ndarray | None = None

    @property
    def free(self) -> np.ndarray:
        return self.gpu_free.sum(axis=1)


def binpack_gpu(gpu_free: np.ndarray, milli: int) -> int:
    """The tightest GPU with ``milli`` free, lowest index among equals (open-gpu-share's default choice)."""
    fit = np.flatnonzero(gpu_free >= milli)
    return int(fit[np.argmin(gpu_free[fit])])


def tightest_fit(gpu_free: np.ndarray, milli: int) -> np.ndarray:
    """Per node, the least free milli among its GPUs with ``milli`` free (a huge number where none has)."""
    return np.where(gpu_free >= milli, gpu_free, np.iinfo(np.int64).max).min(axis=1)


class Policy(abc.ABC):
    """A placement policy: integer scores over a NodeView, and the GPU a sharing pod takes on the chosen node."""

    name = ""  # the score plugin's name
    key = ""  # the simulate --policy name
    needs_fragmentation = False
    needs_tags = False
    node_local = True  # a node's score depends only on that node's state and the pod's shape

    @abc.abstractmethod
    def scores(self, view: NodeView, pod: PodShape) -> np.ndarray:
        """Each node's score for ``pod`` (integers, higher is better)."""

    def choose_gpu(self, view: NodeView, pod: PodShape) -> int:
        """The GPU of the single node in ``view`` a sharing pod takes."""
        return binpack_gpu(view.gpu_free[0], pod.milli)


class FGD(Policy):
    """Fragmentation Gradient Descent: the node (and GPU) where the placement grows expected fragmentation least,
    scored as sigmoid(fragmentation decrease / 1000) x 100, as the paper's simulator does."""

    name, key, needs_fragmentation = "FGDScore", "fgd", True

    def __init__(self, typical: TypicalPods) -> None:
        self.typical = typical

    def _score(self, delta: np.ndarray) -> np.ndarray:
        if not self.typical.covered:  # no typical pods known yet: nothing can be told apart
            return np.full(np.shape(delta), MAX_NODE_SCORE // 2, dtype=np.int64)
        x = delta / self.typical.covered / MILLI
        return (MAX_NODE_SCORE / (1.0 + np.exp(-x))).astype(np.int64)

    def _after_share(self, view: NodeView, rows: np.ndarray, g: np.ndarray, pod: PodShape) -> np.ndarray:
        """Fragmentation after taking pod.milli from a GPU with ``g`` free on node ``rows``: only the shapes whose
        threshold that GPU crosses change."""
        assert view.fits is not None and view.usable is not None
        need = np.maximum(self.typical.milli, 1)
        rest = g - pod.milli
        before = g[:, None] >= need
        after = rest[:, None] >= need
        fits = view.fits[rows] - before + after
        usable = view.usable[rows] - before * g[:, None] + after * rest[:, None]
        free = view.free[rows] - pod.milli
        return fragmentation(free, view.cpu_free[rows] - pod.cpu, view.model[rows], fits, usable, self.typical)

    def scores(self, view: NodeView, pod: PodShape) -> np.ndarray:
        assert view.frag is not None and view.fits is not None and view.usable is not None
        if not pod.sharing:
            k = pod.whole
            after = fragmentation(
                view.free - k * MILLI,
                view.cpu_free - pod.cpu,
                view.model,
                view.fits - k,
                view.usable - k * MILLI,
                self.typical,
            )
            return self._score(view.frag - after)
        gpu = view.gpu_free
        # GPUs of a node with the same free milli give the same result: try each distinct value once.
        repeat = ((gpu[:, :, None] == gpu[:, None, :]) & np.tri(gpu.shape[1], k=-1, dtype=bool).T[None]).any(axis=1)
        rows, cols = np.nonzero((gpu >= pod.milli) & ~repeat)
        g = gpu[rows, cols]
        score = self._score(view.frag[rows] - self._after_share(view, rows, g, pod))
        out = np.zeros(len(gpu), dtype=np.int64)
        if rows.size:
            starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
            out[rows[starts]] = np.maximum.reduceat(score, starts)
        return out

    def choose_gpu(self, view: NodeView, pod: PodShape) -> int:
        assert view.frag is not None
        cols = np.flatnonzero(view.gpu_free[0] >= pod.milli)
        rows = np.zeros(cols.size, dtype=np.int64)
        score = self._score(view.frag[rows] - self._after_share(view, rows, view.gpu_free[0, cols], pod))
        return int(cols[np.argmax(score)])  # the first GPU with the best score


class BestFit(Policy):
    """The node left with the least free CPU and GPU (half weight each, normalized by the largest node)."""

    name, key = "BestFitScore", "bestfit"

    def scores(self, view: NodeView, pod: PodShape) -> np.ndarray:
        left = 0.5 * (view.cpu_free - pod.cpu) / MAX_SPEC_CPU + 0.5 * (view.free - pod.gpu_request) / MAX_SPEC_GPU
        return ((1.0 - left) * MAX_NODE_SCORE).astype(np.int64)


class DotProd(Policy):
    """Tetris's alignment as the paper runs it (GPU dimensions merged, normalized by the largest node): the smaller
    the dot product of the pod's (cpu, gpu) request and the node's free (cpu, gpu), the higher the score."""

    name, key = "DotProductScore", "dotprod"

    def scores(self, view: NodeView, pod: PodShape) -> np.ndarray:
        cpu = (view.cpu_free / MAX_SPEC_CPU) * (pod.cpu / MAX_SPEC_CPU)
        gpu = (view.free / MAX_SPEC_GPU) * (pod.gpu_request / MAX_SPEC_GPU)
        return ((1.0 - (cpu + gpu) / 2) * MAX_NODE_SCORE).astype(np.int64)


class GpuPacking(Policy):
    """Prefer, in order: GPUs already shared (the fuller the better), then free GPUs on a node already in use (the
    fewer the better), then an idle node (the fewer GPUs it has the better). CPU-only pods score 0 everywhere."""

    name, key = "GpuPackingScore", "packing"

    def scores(self, view: NodeView, pod: PodShape) -> np.ndarray:
        if pod.gpu_request == 0:
            return np.zeros(len(view.gpus), dtype=np.int64)
        full = (view.gpu_free == MILLI).sum(axis=1)
        idle = np.maximum(MAX_NODE_SCORE // 3 - full, full)
        if pod.sharing:
            tight = tightest_fit(view.gpu_free, pod.milli)
            shared = np.maximum(MAX_NODE_SCORE - (tight * 100 // MILLI) // 10, MAX_NODE_SCORE // 2)
            used = np.where(tight == MILLI, max(MAX_NODE_SCORE // 2 - 1, MAX_NODE_SCORE // 3), shared)
        else:
            used = np.full(len(full), max(MAX_NODE_SCORE // 2 - pod.whole, MAX_NODE_SCORE // 3), dtype=np.int64)
        return np.where(full == view.gpus, idle, used)


class GpuClustering(Policy):
    """Keep pods that ask for the same GPU amount together: a node holding only that kind scores 75..100, a node
    holding it among others 50..75, an idle node 25..50, a node holding only other kinds 0..25; within each band
    the fuller node wins. CPU-only pods score 0 everywhere."""

    name, key, needs_tags = "GpuClusteringScore", "clustering", True

    def scores(self, view: NodeView, pod: PodShape) -> np.ndarray:
        if pod.gpu_request == 0:
            return np.zeros(len(view.gpus), dtype=np.int64)
        assert view.same_tag is not None and view.tag_kinds is not None
        quarter = MAX_NODE_SCORE // 4
        within = quarter * (MAX_SPEC_GPU - view.free) // MAX_SPEC_GPU
        has = view.same_tag > 0
        band = np.where(has, np.where(view.tag_kinds == 1, 3, 2), np.where(view.tag_kinds == 0, 1, 0))
        return within + band * quarter


class RandomScore(Policy):
    """The baseline every policy must beat: one feasible node drawn at random scores 100, the rest 0, and a
    sharing pod takes a random GPU that fits (seeded)."""

    name, key, node_local = "RandomScore", "random", False

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def scores(self, view: NodeView, pod: PodShape) -> np.ndarray:
        out = np.zeros(len(view.gpus), dtype=np.int64)
        out[self.rng.integers(len(out))] = MAX_NODE_SCORE
        return out

    def choose_gpu(self, view: NodeView, pod: PodShape) -> int:
        fit = np.flatnonzero(view.gpu_free[0] >= pod.milli)
        return int(fit[self.rng.integers(fit.size)])


POLICIES: dict[str, type[Policy]] = {p.key: p for p in (FGD, BestFit, DotProd, GpuPacking, GpuClustering, RandomScore)}
PLUGIN_KEYS = {p.name: p.key for p in POLICIES.values()}


def make(key: str, typical: TypicalPods | None = None, seed: int = 0) -> Policy:
    cls = POLICIES[key]
    if cls is FGD:
        assert typical is not None
        return FGD(typical)
    if cls is RandomScore:
        return RandomScore(seed)
    return cls()
