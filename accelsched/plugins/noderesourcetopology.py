"""NodeResourceTopologyMatch: filter out nodes whose kubelet Topology Manager would reject the pod at admission
(TopologyAffinityError), and score nodes where a pod that wants topology gets accelerators beside a NIC.

The name is the scheduler-plugins plugin that reads NodeResourceTopology objects; the prediction follows the
kubelet's own merge of NUMA hints (topology.alignment), per the node's policy and scope.
"""

from __future__ import annotations

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

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        result = FilterResult()
        result.reject(ERR_REASON_TOPOLOGY, ~pod_admitted(pod, TopologyIndex.of(cluster), cluster), resolvable=False)
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

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray | int:
        """100: the accelerators fit under a NIC's PCIe switch; 50: on a NIC's NUMA node; 0: neither."""
        index = TopologyIndex.of(cluster)
        level = np.full(cluster.n, 2, dtype=np.int64)
        for res, amount in pod.requests.items():
            if not is_device_resource(res) or res not in index.capacity:
                continue
            numa_ok = ((index.free(cluster, res) * index.nic_zone).max(axis=1)) >= amount
            switch_ok = self._switch_free(index, cluster, res) >= amount
            level = np.minimum(level, np.where(switch_ok, 2, np.where(numa_ok, 1, 0)))
        return (level[feasible] * (MAX_NODE_SCORE // 2)).astype(np.int64)

    @staticmethod
    def _switch_free(index: TopologyIndex, cluster: ClusterState, res: str) -> np.ndarray:
        """Per node: the most free devices of ``res`` on one PCIe switch with a NIC (PIX to it)."""

        def compute(nodes: np.ndarray) -> np.ndarray:
            out = np.zeros(len(nodes), dtype=np.int64)
            for k, i in enumerate(nodes):
                i = int(i)
                if not index.attrs[i].get(res) or not index.nics[i]:
                    continue
                free = cluster.devices[i].pools[res].free.tolist()
                beside = index.links(i, res).nic_pix
                out[k] = max(sum(1 for f, p in zip(free, row, strict=True) if f and p) for row in beside)
            return out

        return cluster.node_values(("nic-switch-free", res), compute)


def new(args: dict, handle: object) -> NodeResourceTopologyMatch:
    if args:
        raise InputError(f"unknown field(s) {', '.join(sorted(args))}", obj=f"pluginConfig {NAME}", field="args")
    return NodeResourceTopologyMatch()
