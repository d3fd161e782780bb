"""NodeResourceTopologyMatch: filter out nodes whose kubelet Topology Manager would reject the pod at admission
(TopologyAffinityError), and score nodes where a pod that wants topology gets accelerators beside a NIC.

The name is the scheduler-plugins plugin that reads NodeResourceTopology objects; the prediction follows the
kubelet's own merge of NUMA hints (topology.alignment), per the node's policy and scope.
"""

from __future__ import annotations

import functools

import numpy as np

from accelsched.api.objects import Pod
from accelsched.cluster.devices import is_device_resource
from accelsched.cluster.state import ClusterState
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
from accelsched.topology.alignment import CPU, POLICY_CODES, TopologyIndex, aligned_requests, pod_admitted
from accelsched.topology.allocator import wants_topology

NAME = "NodeResourceTopologyMatch"
ERR_REASON_TOPOLOGY = "node(s) would reject the pod at admission (Topology Manager: TopologyAffinityError)"


class NodeResourceTopologyMatch:
    name = NAME

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        if not cluster.has_topology:
            return SKIP
        index = TopologyIndex.of(cluster)
        if not (index.policy >= POLICY_CODES["restricted"]).any() or not aligned_requests(pod, pod.requests, index):
            return SKIP
        return SUCCESS

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        """Without topology on any node this filter passes every node (DefaultPreemption's shortcut)."""
        return not cluster.has_topology

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        result = FilterResult()
        # scheduler-plugins answers Unschedulable (not Unresolvable): evicting pods can free a NUMA node.
        result.reject(ERR_REASON_TOPOLOGY, ~pod_admitted(pod, TopologyIndex.of(cluster), cluster))
        return result

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        index = TopologyIndex.of(cluster)
        layout = cluster.nodes[node].layout
        name = cluster.nodes[node].name
        out = NodeExplanation()
        for res, amount in aligned_requests(pod, pod.requests, index).items():
            free = index.free(cluster, res)[node]
            zones = index.zone_ids[node]
            per_zone = ", ".join(f"NUMA {numa}: {int(free[z])}" for z, numa in enumerate(zones))
            unit = "exclusive CPUs" if res == CPU else res
            out.details.append(f"{layout.policy} ({layout.scope} scope) needs {amount} {unit} aligned; free {per_zone}")
        if layout.policy == "single-numa-node":
            out.remedies.append(f"the pod's devices and CPUs free on one NUMA node of {name}")
        return out

    # ---------------------------------------------------------------------------------- score

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> Status:
        if not cluster.has_topology or not wants_topology(pod):
            return SKIP
        if not any(is_device_resource(r) for r in pod.requests):
            return SKIP
        return SUCCESS

    def node_score(self, state: CycleState, pod: Pod, cluster: ClusterState) -> NodeScore | int:
        """100: the accelerators fit under a NIC's PCIe switch; 50: on a NIC's NUMA node; 0: neither."""
        return cluster.memoized((NAME, "score", pod.shape), lambda: self._node_score(pod, cluster))

    def _node_score(self, pod: Pod, cluster: ClusterState) -> NodeScore | int:
        index = TopologyIndex.of(cluster)
        levels = [
            _nic_level(index, cluster, res, amount)
            for res, amount in sorted(pod.requests.items())
            if is_device_resource(res) and res in index.capacity
        ]
        if not levels:
            return 0
        half = MAX_NODE_SCORE // 2
        return NodeScore(
            ("nic-score", tuple(spec.key for spec in levels)),
            lambda nodes: half * np.min([spec.compute(nodes) for spec in levels], axis=0),
            lambda i: half * min(spec.compute_one(i) for spec in levels),
        )

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray | int:
        spec = self.node_score(state, pod, cluster)
        return spec if isinstance(spec, int) else spec.values(cluster)[feasible]


def _nic_level(index: TopologyIndex, cluster: ClusterState, res: str, amount: int) -> NodeScore:
    """Per node: 2 if ``amount`` free devices of ``res`` share a PCIe switch with a NIC, 1 if a NIC's NUMA node,
    else 0. Cached per (resource, amount) and recomputed only where devices changed."""

    def one(i: int) -> int:
        if not index.nics[i] or not index.attrs[i].get(res):
            return 0
        links = index.links(i, res)
        zones = tuple(index.device_zone[i][res].tolist())
        nic_zones = tuple(z for z, has in enumerate(index.nic_zone[i].tolist()) if has)
        return _level(links.nic_pix, zones, nic_zones, tuple(free_of(i)), amount)

    def free_of(i: int) -> list[bool]:
        return cluster.devices[i].pools[res].free.tolist()

    def compute(nodes: np.ndarray) -> np.ndarray:
        return np.array([one(int(i)) for i in nodes], dtype=np.int64)

    return NodeScore(("nic-level", res, amount), compute, one)


@functools.lru_cache(maxsize=65536)
def _level(
    nic_pix: tuple[tuple[bool, ...], ...],
    zones: tuple[int, ...],
    nic_zones: tuple[int, ...],
    free: tuple[bool, ...],
    amount: int,
) -> int:
    """2: ``amount`` free devices on one PCIe switch with a NIC; 1: on a NIC's NUMA node; 0: neither.
    Pure in the node's layout and free devices, so identical nodes in identical states share the answer."""
    if any(sum(1 for f, p in zip(free, row, strict=True) if f and p) >= amount for row in nic_pix):
        return 2
    per_zone = [sum(1 for f, z in zip(free, zones, strict=True) if f and z == nz) for nz in nic_zones]
    return 1 if per_zone and max(per_zone) >= amount else 0


def new(args: dict, handle: object) -> NodeResourceTopologyMatch:
    if args:
        raise InputError(f"unknown field(s) {', '.join(sorted(args))}", obj=f"pluginConfig {NAME}", field="args")
    return NodeResourceTopologyMatch()
