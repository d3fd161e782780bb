"""DevicePartition (accelsched): placement-aware fit for fractional accelerators, and a node-level policy.

Counting is not enough for split devices: a 3g MIG instance needs four free *aligned* slices, a 500-milli share
needs 500 free on ONE device, three accel-slices must sit on one card. NodeResourcesFit's count check is an
upper bound on such nodes; this filter is the exact check, per node's partition ledger. Its score packs
(``binpack``: prefer the node whose split devices are fullest after placing) or spreads (``spread``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import Pod
from accelsched.cluster.devices import NodeDevices
from accelsched.cluster.state import ClusterState
from accelsched.devices.partition import GPU_RESOURCE, MILLI, MILLI_RESOURCE
from accelsched.errors import InputError
from accelsched.framework.interface import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    CycleState,
    FilterResult,
    NodeExplanation,
    NodeScore,
    Status,
)

NAME = "DevicePartition"
POLICIES = ("binpack", "spread")


def _requests(pod: Pod, cluster: ClusterState, i: int) -> dict[str, int]:
    return cluster.devices[i].partitioned(pod.requests)


def used_units(cluster: ClusterState) -> np.ndarray:
    """Per node the units its split devices have in use (0 without a partition), kept current at changed nodes."""

    def one(i: int) -> int:
        part = cluster.devices[i].partition
        return part.used_units() if part is not None else 0

    return cluster.node_values((NAME, "used-units"), _each(one), one)


def milli_nodes(cluster: ClusterState) -> np.ndarray:
    """The nodes whose devices are shared in thousandths (the ``milli`` partition mode)."""

    def build() -> np.ndarray:
        return np.array([d.partition is not None and d.partition.mode == "milli" for d in cluster.devices], dtype=bool)

    return cluster.memoized((NAME, "milli-nodes"), build)


def milli_room(cluster: ClusterState) -> np.ndarray:
    """Per GPU-milli node the most any one of its devices has free (-1 elsewhere), kept current at changed nodes."""

    def one(i: int) -> int:
        part = cluster.devices[i].partition
        if part is None or part.mode != "milli" or not part.milli:
            return -1
        return MILLI - min(part.milli)

    return cluster.node_values((NAME, "milli-room"), _each(one), one)


def whole_free(cluster: ClusterState) -> np.ndarray:
    """Per GPU-milli node its devices no share holds (0 elsewhere), kept current at changed nodes."""

    def one(i: int) -> int:
        part = cluster.devices[i].partition
        return part.milli.count(0) if part is not None and part.mode == "milli" else 0

    return cluster.node_values((NAME, "whole-free"), _each(one), one)


def _each(one: Callable[[int], int]) -> Callable[[np.ndarray], np.ndarray]:
    return lambda nodes: np.array([one(int(i)) for i in nodes], dtype=np.int64)


def split_shape(pod: Pod) -> tuple[tuple[str, int], ...]:
    """What this plugin's verdicts and scores depend on: the pod's extended requests (a partition serves only
    extended resources). Pods that differ in cpu or memory alone share one cached pass over the nodes, so the
    cache grows with the accelerator shapes asked for, not with every request shape."""
    return tuple((res, amount) for res, amount in pod.shape if quantity.is_extended(res))


class DevicePartition:
    name = NAME

    def __init__(self, policy: str = "binpack") -> None:
        self.policy = policy

    def _managed(self, pod: Pod, cluster: ClusterState) -> bool:
        return cluster.has_partitions and any(
            d.partition is not None and d.partitioned(pod.requests) for d in cluster.devices
        )

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        if not cluster.has_partitions:
            return SKIP
        managed = cluster.memoized((NAME, "managed", split_shape(pod)), lambda: self._managed(pod, cluster))
        return SUCCESS if managed else SKIP

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        """Without split devices on any node this filter passes every node (DefaultPreemption's shortcut)."""
        return not cluster.has_partitions

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        # Per node a reason code (-1: fits), kept per request shape and updated only where a pod was bound.
        reasons: list[str] = cluster.memoized((NAME, "reasons", split_shape(pod)), list)

        def one(i: int) -> int:
            split = _requests(pod, cluster, i)
            if not split or cluster.devices[i].partition.fits(split):
                return -1
            reason = self._reason(_requests(pod, cluster, i), cluster.devices[i])
            if reason not in reasons:
                reasons.append(reason)
            return reasons.index(reason)

        def code(reason: str) -> int:
            if reason not in reasons:
                reasons.append(reason)
            return reasons.index(reason)

        # On GPU-milli nodes a pod that asks for one of a share or whole GPUs fits by one comparison per node
        # (Partition.fits' plan in numpy); any other node or request goes through the node's own plan.
        sharing = {r: a for r, a in split_shape(pod) if r in (MILLI_RESOURCE, GPU_RESOURCE)}
        single = next(iter(sharing.items())) if len(sharing) == 1 else None

        def compute(nodes: np.ndarray) -> np.ndarray:
            on_milli = milli_nodes(cluster)[nodes] if single is not None else np.zeros(len(nodes), dtype=bool)
            out = np.empty(len(nodes), dtype=np.int64)
            if on_milli.any():
                resource, amount = single
                at = nodes[on_milli]
                if resource == MILLI_RESOURCE:
                    fits = (milli_room(cluster)[at] >= amount) & (amount <= MILLI)
                else:
                    fits = whole_free(cluster)[at] >= amount
                failed = -1 if fits.all() else code(f"node(s) had no device with {amount} free {resource}")
                out[on_milli] = np.where(fits, -1, failed)
            out[~on_milli] = [one(int(i)) for i in nodes[~on_milli]]
            return out

        codes = cluster.node_values((NAME, "fits", split_shape(pod)), compute, one)
        result = FilterResult()
        if (codes < 0).all():
            return result
        # The reasons name the resource, not the node, so nodes with the same one count together.
        for code in sorted(set(codes[codes >= 0].tolist()), key=lambda c: reasons[c]):
            result.reject(reasons[code], codes == code)
        return result

    def node_reasons(self, pod: Pod, cluster: ClusterState, node: int, devices: NodeDevices | None = None) -> list[str]:
        """This filter's reasons on one node (none: it passes): it reads that node's own ledger only (or
        ``devices``, a copy of it), so DefaultPreemption's dry runs ask this node alone, on a copy."""
        devices = devices or cluster.devices[node]
        split = devices.partitioned(pod.requests)
        if not split or devices.partition.fits(split):
            return []
        return [self._reason(split, devices)]

    @staticmethod
    def _reason(split: dict[str, int], devices: NodeDevices) -> str:
        part = devices.partition
        for resource, amount in sorted(split.items()):
            if part.mode == "mig" and part.resource_profile(resource):
                profile = part.resource_profile(resource)
                return f"node(s) had no free {profile} MIG placement"
            if not part.fits({resource: amount}):
                return f"node(s) had no device with {amount} free {resource}"
        return f"node(s) could not place the pod's {', '.join(sorted(split))} together"

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        part = cluster.devices[node].partition
        out = NodeExplanation()
        split = _requests(pod, cluster, node)
        try:
            part.plan(split, self.policy)
        except ValueError as exc:
            out.details.append(f"{cluster.nodes[node].name}: {exc}")
        if part.mode == "mig":
            out.details.append(f"instances: {part.describe_instances()} (* in use)")
            if not part.dynamic:
                out.remedies.append(f"create the instance on {cluster.nodes[node].name} (fixed partitions)")
        return out

    # ---------------------------------------------------------------------------------- score

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> Status:
        return self.pre_filter(state, pod, cluster)

    def node_score(self, state: CycleState, pod: Pod, cluster: ClusterState) -> NodeScore:
        """Utilization of the node's split devices after placing the pod (binpack), or what stays free (spread)."""
        key = (NAME, self.policy, split_shape(pod))
        return cluster.memoized(key, lambda: self._node_score(key, pod, cluster))

    def _node_score(self, key: tuple, pod: Pod, cluster: ClusterState) -> NodeScore:
        def one(i: int) -> int:
            part = cluster.devices[i].partition
            split = _requests(pod, cluster, i)
            if part is None or not split:
                return 0
            used = (part.used_units() + part.units_of(split)) * MAX_NODE_SCORE // max(part.total_units, 1)
            used = min(used, MAX_NODE_SCORE)
            return used if self.policy == "binpack" else MAX_NODE_SCORE - used

        # What does not change as pods come and go, once per shape: the nodes that split the request, the units it
        # takes there and their capacity. What does (the units in use) is one array for every shape, kept current
        # at changed nodes only, so a shape catches up on changed nodes in numpy rather than node by node.
        applies = np.zeros(cluster.n, dtype=bool)
        units = np.zeros(cluster.n, dtype=np.int64)
        total = np.ones(cluster.n, dtype=np.int64)
        for i, devices in enumerate(cluster.devices):
            split = _requests(pod, cluster, i)
            if devices.partition is not None and split:
                applies[i] = True
                units[i] = devices.partition.units_of(split)
                total[i] = max(devices.partition.total_units, 1)

        def compute(nodes: np.ndarray) -> np.ndarray:
            share = (used_units(cluster)[nodes] + units[nodes]) * MAX_NODE_SCORE // total[nodes]
            used = np.minimum(share, MAX_NODE_SCORE)
            return np.where(applies[nodes], used if self.policy == "binpack" else MAX_NODE_SCORE - used, 0)

        return NodeScore(key, compute, one)

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray | int:
        return self.node_score(state, pod, cluster).values(cluster)[feasible]


def new(args: dict, handle: object) -> DevicePartition:
    unknown = set(args) - {"policy"}
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}", obj=f"pluginConfig {NAME}", field="args")
    policy = args.get("policy", "binpack")
    if policy not in POLICIES:
        raise InputError(
            f"unknown policy {policy!r} (binpack, spread)", obj=f"pluginConfig {NAME}", field="args.policy"
        )
    return DevicePartition(policy)
