"""The simulator's cluster: free CPU, memory and per-GPU milli as arrays over nodes, updated one node per bind.

This is the fast path of a trace replay. It filters with exactly the checks the framework's NodeResourcesFit,
NodeAffinity (GPU model) and DevicePartition (milli) filters make, and keeps the columns a policy reads
(fragmentation terms, GpuClustering's tags) current at the one node a bind or a departure changes.
``tests/test_sim_equivalence.py`` holds it equal to the generic Scheduler.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from accelsched.sim.fragmentation import TypicalPods, fragmentation, gpu_terms
from accelsched.sim.policies import NodeView, PodShape, Policy
from accelsched.sim.trace import MAX_GPUS_PER_NODE, MILLI, Nodes


class SimCluster:
    def __init__(self, nodes: Nodes, typical: TypicalPods, specs: list[frozenset[str]]) -> None:
        self.nodes = nodes
        self.typical = typical
        n = nodes.n
        self.cpu_free = nodes.cpu.copy()
        self.mem_free = nodes.memory.copy()
        self.gpu_free = np.zeros((n, MAX_GPUS_PER_NODE), dtype=np.int64)
        self.gpu_free[np.arange(MAX_GPUS_PER_NODE)[None, :] < nodes.gpus[:, None]] = MILLI
        self.fits, self.usable = gpu_terms(self.gpu_free, typical)
        self.frag = fragmentation(
            self.gpu_free.sum(axis=1), self.cpu_free, nodes.model, self.fits, self.usable, typical
        )
        self.frag_total = int(self.frag.sum())  # exact: milli x typical.covered
        self.widest = self.gpu_free.max(axis=1)  # the most free milli on one GPU
        self.full = (self.gpu_free == MILLI).sum(axis=1)  # fully free GPUs
        self.allocated = 0  # GPU milli in use
        # Nodes whose GPU model a pod's gpu_spec accepts, per spec index.
        self.spec_mask = [
            np.ones(n, dtype=bool)
            if not spec
            else np.isin(nodes.model, [i for i, m in enumerate(nodes.models) if m in spec])
            for spec in specs
        ]
        self.tags: dict[tuple[int, int], np.ndarray] = defaultdict(lambda: np.zeros(n, dtype=np.int64))
        self.tag_kinds = np.zeros(n, dtype=np.int64)
        self.changes: list[int] = []  # nodes in the order they changed: per-shape score caches catch up on these

    # ------------------------------------------------------------------------------------ filter and view

    def feasible(self, pod: PodShape, spec: int) -> np.ndarray:
        """Nodes where the pod fits: CPU, memory, GPU model, and one GPU with its share or enough whole free GPUs."""
        return np.flatnonzero(self._fit_mask(pod, spec, slice(None)))

    def fits_any(self, pod: PodShape, spec: int, idx: np.ndarray) -> bool:
        """Whether the pod fits one of the nodes ``idx`` (the filter of ``feasible``, on those nodes only)."""
        return bool(idx.size) and bool(self._fit_mask(pod, spec, idx).any())

    def _fit_mask(self, pod: PodShape, spec: int, idx: np.ndarray | slice) -> np.ndarray:
        mask = (self.cpu_free[idx] >= pod.cpu) & (self.mem_free[idx] >= pod.memory)
        if spec:
            mask &= self.spec_mask[spec][idx]
        if pod.sharing:
            mask &= self.widest[idx] >= pod.milli
        elif pod.whole:
            mask &= self.full[idx] >= pod.whole
        return mask

    def fits_empty(self, pod: PodShape, spec: int) -> bool:
        """Whether the pod fits some node of the empty cluster (capacity, GPU model, GPU count): a pod that does
        not can never run, whatever leaves."""
        nodes = self.nodes
        mask = (nodes.cpu >= pod.cpu) & (nodes.memory >= pod.memory) & (nodes.gpus >= pod.num_gpu)
        if spec:
            mask &= self.spec_mask[spec]
        return bool(mask.any())

    def view(self, idx: np.ndarray, pod: PodShape, policy: Policy) -> NodeView:
        view = NodeView(
            self.cpu_free[idx], self.nodes.cpu[idx], self.gpu_free[idx], self.nodes.gpus[idx], self.nodes.model[idx]
        )
        if policy.needs_fragmentation:
            view.fits, view.usable, view.frag = self.fits[idx], self.usable[idx], self.frag[idx]
        if policy.needs_tags:
            view.same_tag = self.tags[pod.tag][idx] if pod.tag in self.tags else np.zeros(len(idx), np.int64)
            view.tag_kinds = self.tag_kinds[idx]
        return view

    # ------------------------------------------------------------------------------------ bind / leave

    def place(self, node: int, pod: PodShape, gpu: int | None = None) -> tuple[int, ...]:
        """Bind: take CPU, memory and GPUs (``gpu`` for a sharing pod; the lowest fully free ones for whole GPUs).
        Returns the GPU indices taken."""
        row = self.gpu_free[node]
        if pod.sharing:
            assert gpu is not None and row[gpu] >= pod.milli, "a sharing pod needs a GPU with its share free"
            taken: tuple[int, ...] = (gpu,)
            row[gpu] -= pod.milli
        else:
            taken = tuple(int(d) for d in np.flatnonzero(row == MILLI)[: pod.whole])
            assert len(taken) == pod.whole
            row[list(taken)] = 0
        self.cpu_free[node] -= pod.cpu
        self.mem_free[node] -= pod.memory
        self.allocated += pod.gpu_request
        self._tag(node, pod, +1)
        self._changed(node)
        return taken

    def remove(self, node: int, pod: PodShape, taken: tuple[int, ...]) -> None:
        """A pod leaves: give back what ``place`` took."""
        row = self.gpu_free[node]
        if pod.sharing:
            row[taken[0]] += pod.milli
        else:
            row[list(taken)] = MILLI
        self.cpu_free[node] += pod.cpu
        self.mem_free[node] += pod.memory
        self.allocated -= pod.gpu_request
        self._tag(node, pod, -1)
        self._changed(node)

    def _tag(self, node: int, pod: PodShape, delta: int) -> None:
        if not pod.gpu_request:
            return
        counts = self.tags[pod.tag]
        before = counts[node] > 0
        counts[node] += delta
        self.tag_kinds[node] += int(counts[node] > 0) - int(before)

    def _changed(self, node: int) -> None:
        row = self.gpu_free[node : node + 1]
        fits, usable = gpu_terms(row, self.typical)
        self.fits[node], self.usable[node] = fits[0], usable[0]
        frag = int(
            fragmentation(
                row.sum(axis=1),
                self.cpu_free[node : node + 1],
                self.nodes.model[node : node + 1],
                fits,
                usable,
                self.typical,
            )[0]
        )
        self.changes.append(node)
        self.frag_total += frag - int(self.frag[node])
        self.frag[node] = frag
        self.widest[node] = row.max()
        self.full[node] = int((row == MILLI).sum())

    # ------------------------------------------------------------------------------------ measures

    @property
    def capacity(self) -> int:
        return self.nodes.gpu_milli_capacity

    @property
    def fragmentation_milli(self) -> float:
        return self.frag_total / self.typical.covered

    @property
    def free_milli(self) -> int:
        return self.capacity - self.allocated
