"""The FGD paper's placement policies as score plugins: FGDScore, BestFitScore, DotProductScore, GpuPackingScore,
GpuClusteringScore, RandomScore (the names of the paper's simulator).

They score nodes whose GPUs are shared in thousandths (the ``milli`` partition mode: ``accelsched.io/gpu-milli``
shares and whole ``nvidia.com/gpu``), reading each node's per-GPU free milli from its partition ledger, its free
CPU, and its GPU model from the ``accelsched.io/gpu-model`` label. Each also decides which GPU a sharing pod takes:
at PreFilter it leaves a chooser in the CycleState that DeviceAllocation asks at Reserve. The scoring itself is
``accelsched.sim.policies``, shared with the trace simulator's fast path.

Enable one like any score plugin, e.g. in a KubeSchedulerConfiguration profile::

    plugins:
      multiPoint: {enabled: [{name: FGDScore}]}
      score: {disabled: [{name: "*"}], enabled: [{name: FGDScore}]}
    pluginConfig:
      - name: FGDScore
        args:
          typicalPods:   # optional; without it, the shapes of the pods bound in the cluster now
            - {cpuMilli: 4000, numGpu: 1, gpuMilli: 500, weight: 30}
            - {cpuMilli: 12000, numGpu: 1, gpuMilli: 1000, gpuModels: [V100M32], weight: 10}

``gpuModels`` names the models a typical pod accepts (its gpu_spec; left out: any). It may name models no node has:
such a pod can run nowhere, so all free GPU milli is fragment for it, as in the paper. An empty list is refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.devices.partition import DEVICE_CHOICE, GPU_RESOURCE, MILLI_RESOURCE
from accelsched.errors import InputError
from accelsched.framework.interface import SUCCESS, CycleState, Status
from accelsched.sim import fragmentation as frag
from accelsched.sim import policies
from accelsched.sim.trace import MAX_GPUS_PER_NODE, MILLI

MODEL_LABEL = "accelsched.io/gpu-model"
MIB = 1024 * 1024


def pod_shape(pod: Pod) -> policies.PodShape:
    """A pod's request as the policies see it: cpu milli, memory MiB, GPU count and milli per GPU."""
    requests = pod.requests
    cpu, memory = requests.get(quantity.CPU, 0), requests.get(quantity.MEMORY, 0) // MIB
    if requests.get(MILLI_RESOURCE):
        return policies.PodShape(cpu, memory, 1, requests[MILLI_RESOURCE])
    if requests.get(GPU_RESOURCE):
        return policies.PodShape(cpu, memory, requests[GPU_RESOURCE], MILLI)
    return policies.PodShape(cpu, memory, 0, 0)


def gpu_free_row(cluster: ClusterState, node: int) -> tuple[np.ndarray, int]:
    """Free milli of each GPU of ``node`` (padded with zeros to 8) and its GPU count."""
    row = np.zeros(MAX_GPUS_PER_NODE, dtype=np.int64)
    devices = cluster.devices[node]
    part = devices.partition
    if part is not None and part.mode == "milli":
        free = [MILLI - used for used in part.milli]
    elif GPU_RESOURCE in devices.pools:
        free = [MILLI if f else 0 for f in devices.pools[GPU_RESOURCE].free.tolist()]
    else:
        free = []
    row[: len(free)] = free[:MAX_GPUS_PER_NODE]
    return row, min(len(free), MAX_GPUS_PER_NODE)


def pod_models(pod: Pod) -> frozenset[str]:
    """The GPU models a pod accepts (its gpu_spec), from a ``accelsched.io/gpu-model`` nodeSelector or a single
    required node-affinity term with an ``In`` on that label; empty: any model."""
    if MODEL_LABEL in pod.node_selector:
        return frozenset([pod.node_selector[MODEL_LABEL]])
    terms = pod.required_node_affinity or ()
    if len(terms) == 1:
        for req in terms[0].match_expressions:
            if req.key == MODEL_LABEL and req.operator == "In":
                return frozenset(req.values)
    return frozenset()


Shape = tuple[int, int, int, frozenset[str]]


def typical_shape(pod: Pod) -> Shape:
    """A pod as FGD's typical-pod distribution counts it: cpu milli, GPU count, milli per GPU, GPU models."""
    shape = pod_shape(pod)
    return (shape.cpu, shape.num_gpu, shape.milli, pod_models(pod))


class LearnedShapes:
    """FGD's typical pods when its args give none: the shapes of the pods bound in the cluster now, counted per
    shape. Kept current one node at a time from ``ClusterState.changes`` (a bind, a deletion or an eviction
    recounts that node's pods), so a pod counts once it is bound (never while it is being scored) and stops
    counting when it leaves. The distribution is built from the ``MAX_SHAPES`` most common shapes, and only when
    the counts changed."""

    MAX_SHAPES = 256

    def __init__(self) -> None:
        self.cluster: ClusterState | None = None
        self.epoch = -1
        self.seen = 0  # position in cluster.changes the counts are current to
        self.per_node: dict[int, Counter[Shape]] = {}
        self.counts: Counter[Shape] = Counter()
        self.version = 0
        self.built: tuple[tuple, frag.TypicalPods] | None = None  # (version and models it was built for, it)

    def update(self, cluster: ClusterState) -> None:
        if cluster is not self.cluster or cluster.epoch != self.epoch:
            self.cluster, self.epoch, self.per_node, self.counts = cluster, cluster.epoch, {}, Counter()
            self.version += 1
            dirty: Iterable[int] = range(cluster.n)
        elif self.seen < len(cluster.changes):
            dirty = set(cluster.changes[self.seen :])
        else:
            return
        self.seen = len(cluster.changes)
        for node in dirty:
            now = Counter(typical_shape(p) for p in cluster.pods_on[node].values())
            before = self.per_node.get(node)
            if now == before or (not now and before is None):
                continue
            self.counts.update(now)
            for key, count in (before or {}).items():
                self.counts[key] -= count
                if self.counts[key] <= 0:
                    del self.counts[key]
            self.per_node[node] = now
            self.version += 1

    def typical(self, cluster: ClusterState, models: list[str]) -> frag.TypicalPods:
        self.update(cluster)
        key = (self.version, tuple(models))
        if self.built is None or self.built[0] != key:
            kept = dict(self.counts.most_common(self.MAX_SHAPES))
            self.built = (key, frag.typical_from_counts(kept, models))
        return self.built[1]


class GpuShareScore:
    """One policy of ``accelsched.sim.policies`` as a PreFilter (the GPU chooser) and Score plugin."""

    def __init__(self, policy: policies.Policy, typical: list[tuple[Shape, int]]) -> None:
        self.policy = policy
        self.name = policy.name
        self.fixed_typical = typical  # from the plugin args; empty: learn from the pods bound
        self.learned = LearnedShapes()

    # ---------------------------------------------------------------------------------- state from the cluster

    def _models(self, cluster: ClusterState) -> tuple[np.ndarray, list[str]]:
        col = cluster.labels(MODEL_LABEL)
        models = [*col.values, ""]  # code -1 (no label) becomes the last entry: a node without a known model
        return np.where(col.codes < 0, len(col.values), col.codes), models

    def _typical(self, cluster: ClusterState) -> frag.TypicalPods:
        _, models = self._models(cluster)
        if self.fixed_typical:
            shapes = [s for s, _ in self.fixed_typical]
            return cluster.memoized(
                (self.name, "typical"), lambda: frag.from_shapes(shapes, [w for _, w in self.fixed_typical], models)
            )
        return self.learned.typical(cluster, models)

    def view(
        self,
        cluster: ClusterState,
        idx: np.ndarray,
        pod: policies.PodShape,
        assumed: bool = False,
        typical: frag.TypicalPods | None = None,
    ) -> policies.NodeView:
        """The policy's columns over nodes ``idx``. ``assumed``: the pod is already assumed on them (Reserve), so
        its CPU is given back: the GPU choice sees the node as it was scored, before the pod. ``typical``: the
        typical pods to measure fragmentation with (default: the current ones)."""
        cpu = cluster.column(quantity.CPU)
        rows = [gpu_free_row(cluster, int(i)) for i in idx]
        gpu_free = np.array([r for r, _ in rows], dtype=np.int64).reshape(len(idx), MAX_GPUS_PER_NODE)
        codes, _ = self._models(cluster)
        cpu_free = cluster.free[cpu, idx] if cpu is not None else np.zeros(len(idx), np.int64)
        view = policies.NodeView(
            cpu_free + pod.cpu if assumed else cpu_free,
            cluster.allocatable[cpu, idx] if cpu is not None else np.zeros(len(idx), np.int64),
            gpu_free,
            np.array([g for _, g in rows], dtype=np.int64),
            codes[idx],
        )
        if self.policy.needs_fragmentation:
            typical = typical or self._typical(cluster)
            view.fits, view.usable = frag.gpu_terms(gpu_free, typical)
            view.frag = frag.fragmentation(view.free, view.cpu_free, view.model, view.fits, view.usable, typical)
        if self.policy.needs_tags:
            same, kinds = [], []
            for i in idx:
                tags = Counter(pod_shape(p).tag for p in cluster.pods_on[int(i)].values() if pod_shape(p).gpu_request)
                same.append(tags.get(pod.tag, 0))
                kinds.append(len(tags))
            view.same_tag, view.tag_kinds = np.array(same, np.int64), np.array(kinds, np.int64)
        return view

    # ---------------------------------------------------------------------------------- extension points

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        shape = pod_shape(pod)
        if shape.sharing:
            state[DEVICE_CHOICE] = self._chooser(cluster, pod, shape)
        return SUCCESS

    def _with_typical(self, cluster: ClusterState) -> None:
        if isinstance(self.policy, policies.FGD):
            self.policy.typical = self._typical(cluster)

    def _chooser(self, cluster: ClusterState, pod: Pod, shape: policies.PodShape) -> Callable[[int], int | None]:
        """DeviceAllocation asks this at Reserve, after the pod was assumed on ``node``: the choice is made on the
        state the node was scored on (the pod's CPU given back, the typical pods as they were before it), as the
        paper's calculateGpuShareFragExtendScore picks the GPU while scoring."""
        typical = self._typical(cluster) if self.policy.needs_fragmentation else None

        def choose(node: int) -> int | None:
            if typical is not None:
                self.policy.typical = typical  # type: ignore[attr-defined]
            assumed = cluster.pod_node.get(pod.key) == node
            view = self.view(cluster, np.array([node]), shape, assumed, typical)
            if not (view.gpu_free[0] >= shape.milli).any():
                return None
            return self.policy.choose_gpu(view, shape)

        return choose

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray:
        self._with_typical(cluster)
        shape = pod_shape(pod)
        return self.policy.scores(self.view(cluster, feasible, shape), shape)


def _typical_args(name: str, args: dict) -> list[tuple[tuple[int, int, int, frozenset[str]], int]]:
    out = []
    for i, item in enumerate(args.get("typicalPods") or []):
        path = f"args.typicalPods[{i}]"
        if not isinstance(item, dict):
            raise InputError("must be a mapping", obj=f"pluginConfig {name}", field=path)
        unknown = set(item) - {"cpuMilli", "numGpu", "gpuMilli", "gpuModels", "weight"}
        if unknown:
            raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}", obj=f"pluginConfig {name}", field=path)
        values = []
        for key, low, high in (
            ("cpuMilli", 0, None),
            ("numGpu", 0, MAX_GPUS_PER_NODE),
            ("gpuMilli", 0, MILLI),
            ("weight", 1, None),
        ):
            value = item.get(key, 1 if key == "weight" else 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < low or (high and value > high):
                bound = f">= {low}" if high is None else f"in {low}..{high}"
                raise InputError(
                    f"must be a whole number {bound}, got {value!r}", obj=f"pluginConfig {name}", field=f"{path}.{key}"
                )
            values.append(value)
        cpu, num, milli, weight = values
        if num == 1 and not milli:
            raise InputError("a GPU pod needs gpuMilli 1..1000", obj=f"pluginConfig {name}", field=f"{path}.gpuMilli")
        # Left out (or null): any model. An empty list is refused, as a node selector's "In" with no values is: read
        # as "any" it would silently drop a restriction (a shape that accepts no model of the cluster).
        models = item.get("gpuModels")
        if models is None:
            models = []
        elif not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models):
            raise InputError(
                "must be a non-empty list of GPU model names (leave it out for any model)",
                obj=f"pluginConfig {name}",
                field=f"{path}.gpuModels",
            )
        out.append(((cpu, num, milli if num == 1 else (MILLI if num else 0), frozenset(models)), weight))
    return out


def _factory(key: str) -> Callable[[dict, Any], GpuShareScore]:
    cls = policies.POLICIES[key]

    def new(args: dict, handle: object) -> GpuShareScore:
        allowed = {"seed"} if cls is policies.RandomScore else ({"typicalPods"} if cls is policies.FGD else set())
        unknown = set(args) - allowed
        if unknown:
            raise InputError(
                f"unknown field(s) {', '.join(sorted(unknown))}", obj=f"pluginConfig {cls.name}", field="args"
            )
        seed = args.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:  # numpy's seeds are non-negative
            raise InputError(
                f"must be an integer >= 0, got {seed!r}", obj=f"pluginConfig {cls.name}", field="args.seed"
            )
        typical = _typical_args(cls.name, args) if cls is policies.FGD else []
        placeholder = frag.from_shapes([], [], [])
        return GpuShareScore(policies.make(key, placeholder, seed), typical)

    return new


FACTORIES: dict[str, Callable[[dict, Any], GpuShareScore]] = {
    cls.name: _factory(key) for key, cls in policies.POLICIES.items()
}
