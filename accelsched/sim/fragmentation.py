"""The FGD paper's fragmentation measure: how much free GPU milli the typical pods could not use.

For one node and one typical pod shape (cpu, GPU count, GPU milli, allowed GPU models): when the shape cannot
run on the node at all (too little CPU, too few GPUs with enough free milli, a GPU model it does not accept, or
it asks for no GPU) every free milli of the node is fragment for it; when it can run, the free milli on GPUs that
are each too small for its gpu_milli is. A node's fragmentation is the frequency-weighted sum over the shapes.

Computed in columns: per node and shape, ``fits`` (GPUs with at least the shape's milli free) and ``usable``
(their free milli), so that fragmentation = free - sum_t f_t * ok_t * usable_t, where ok_t says the shape can
run. After a bind only that node's row changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from accelsched.sim.trace import MILLI, Pods

POPULARITY = 0.95  # the most popular shapes covering 95% of pods, as the paper's typical pods


@dataclass(frozen=True)
class TypicalPods:
    """Typical pod shapes (columns over shapes) and their frequencies (summing to 1)."""

    cpu: np.ndarray
    num_gpu: np.ndarray
    milli: np.ndarray  # per GPU: the share for num_gpu == 1, 1000 for whole GPUs, 0 for CPU-only shapes
    access: np.ndarray  # (model code, shape) -> the shape accepts that GPU model
    weight: np.ndarray  # pods of each shape: integer weights keep the sums exact, whatever their order
    # Each shape's gpu_spec as given (empty: any model). ``access`` only knows this cluster's models, so a shape that
    # accepts none of them would read back as "any model" without these (generic.typical_args writes them out).
    specs: tuple[frozenset[str], ...] = ()

    @property
    def covered(self) -> int:
        return int(self.weight.sum())

    @property
    def freq(self) -> np.ndarray:
        return self.weight / self.covered

    @property
    def size(self) -> int:
        return len(self.freq)


def typical_pods(
    shapes: Sequence[tuple[int, int, int, frozenset[str]]], models: Sequence[str], popularity: float = POPULARITY
) -> TypicalPods:
    """The most popular (cpu, num_gpu, gpu_milli, allowed models) shapes covering ``popularity`` of ``shapes``,
    frequencies renormalized over the kept ones. CPU-only pods count: they can use no free GPU at all."""
    return typical_from_counts(Counter(shapes), models, popularity)


def typical_from_counts(
    counts: Mapping[tuple[int, int, int, frozenset[str]], int], models: Sequence[str], popularity: float = POPULARITY
) -> TypicalPods:
    """``typical_pods`` from pods already counted per shape."""
    total = sum(counts.values())
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1], kv[0][2], sorted(kv[0][3])))
    kept, covered = [], 0
    for shape, count in ranked:
        if covered >= popularity * total:
            break
        kept.append((shape, count))
        covered += count
    return from_shapes([s for s, _ in kept], [c for _, c in kept], models)


def from_shapes(
    shapes: Sequence[tuple[int, int, int, frozenset[str]]], weight: Sequence[int], models: Sequence[str]
) -> TypicalPods:
    access = np.array([[not spec or model in spec for (_, _, _, spec) in shapes] for model in models], dtype=bool)
    return TypicalPods(
        np.array([s[0] for s in shapes], np.int64),
        np.array([s[1] for s in shapes], np.int64),
        np.array([s[2] if s[1] == 1 else (MILLI if s[1] else 0) for s in shapes], np.int64),
        access.reshape(len(models), len(shapes)),
        np.array(weight, np.int64),
        tuple(s[3] for s in shapes),
    )


def trace_typical_pods(pods: Pods, models: Sequence[str], popularity: float = POPULARITY) -> TypicalPods:
    shapes = [
        (int(c), int(k), int(m), pods.specs[s])
        for c, k, m, s in zip(pods.cpu, pods.num_gpu, pods.gpu_milli, pods.spec, strict=True)
    ]
    return typical_pods(shapes, models, popularity)


def gpu_terms(gpu_free: np.ndarray, typical: TypicalPods) -> tuple[np.ndarray, np.ndarray]:
    """Per node and shape: how many GPUs have the shape's milli free, and the free milli on those GPUs.
    ``gpu_free`` is (nodes, GPUs) free milli (0 for GPUs a node does not have)."""
    enough = gpu_free[:, :, None] >= np.maximum(typical.milli, 1)[None, None, :]
    return enough.sum(axis=1), (gpu_free[:, :, None] * enough).sum(axis=1)


def fragmentation(
    free: np.ndarray,
    cpu_free: np.ndarray,
    model: np.ndarray,
    fits: np.ndarray,
    usable: np.ndarray,
    typical: TypicalPods,
) -> np.ndarray:
    """Expected fragmentation of each node from its free GPU milli, free CPU, GPU model and the ``gpu_terms`` of
    its GPUs, in milli x ``typical.covered`` (an exact whole number; divide by ``covered`` for milli)."""
    ok = typical.access[model] & (fits >= typical.num_gpu) & (cpu_free[:, None] >= typical.cpu) & (typical.num_gpu > 0)
    # In float64 every product and partial sum here is an integer below 2**53, so BLAS's sum is exact in any order.
    return typical.covered * free - np.where(ok, usable, 0).astype(np.float64) @ typical.weight.astype(np.float64)


def node_fragmentation(
    gpu_free: np.ndarray, cpu_free: np.ndarray, model: np.ndarray, typical: TypicalPods
) -> np.ndarray:
    """Fragmentation of each node in milli, from scratch."""
    fits, usable = gpu_terms(gpu_free, typical)
    return fragmentation(gpu_free.sum(axis=1), cpu_free, model, fits, usable, typical) / typical.covered
