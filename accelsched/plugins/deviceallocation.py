"""DeviceAllocation (accelsched): at Reserve, picks the concrete device IDs of every extended resource.

kube-scheduler only counts extended resources; the kubelet's device manager picks IDs later. accelsched picks
them in the scheduling cycle so the result names the devices. On a node whose topology is known the choice is
topology-aware (topology.allocator: the Topology Manager's NUMA zones, then the best-linked set, beside the NIC
for pods that want it) and exclusive CPUs of Guaranteed pods are taken from the same zones; elsewhere the lowest
free IDs. Unreserve gives everything back, so a cycle that fails after Reserve leaves nothing held.
"""

from __future__ import annotations

import dataclasses
import json

from accelsched.api.objects import DEVICES_ANNOTATION, Pod
from accelsched.cluster.devices import first_free
from accelsched.cluster.state import ClusterState
from accelsched.devices.partition import DEVICE_CHOICE
from accelsched.dra import extended
from accelsched.errors import InputError
from accelsched.framework.interface import SUCCESS, CycleState, Status, unschedulable
from accelsched.topology import allocator

NAME = "DeviceAllocation"


class DeviceAllocation:
    name = NAME

    def __init__(self, topology_aware: bool = True, partition_policy: str = "binpack") -> None:
        self.topology_aware = topology_aware
        self.partition_policy = partition_policy

    def reserve(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> Status:
        # What a pending pod's annotation claims is not held: only what this Reserve takes is, and Unreserve
        # gives back only that (never another pod's devices named in a stale annotation).
        pod.devices = {}
        annotations = pod.raw.setdefault("metadata", {}).setdefault("annotations", {})
        requests = _device_plugin_requests(pod, cluster, node)
        try:
            devices = cluster.devices[node]
            if self.topology_aware and cluster.nodes[node].layout is not None:
                placing = pod if requests is pod.requests else dataclasses.replace(pod, requests=requests)
                placement = allocator.place(placing, cluster, node)
                split = devices.partitioned(requests)
                allocated = devices.allocate(split, owner=pod.key, policy=self.partition_policy) if split else {}
                allocator.take(cluster, node, placement)
                state[NAME] = placement
                pod.exclusive_cpus = dict(placement.cpus)
                pod.devices = {**placement.devices, **allocated}
                if placement.devices or placement.cpus:
                    annotations[allocator.NUMA_ANNOTATION] = ",".join(map(str, placement.numa_nodes))
                if placement.nic:
                    annotations[allocator.NIC_ANNOTATION] = placement.nic
            else:
                chooser = state.get(DEVICE_CHOICE)
                choice = chooser(node) if chooser is not None else None
                policy = self.partition_policy if choice is None else choice
                pod.devices = devices.allocate(requests, first_free, owner=pod.key, policy=policy)
                cluster.touch(node)
        except ValueError as exc:
            return unschedulable(NAME, str(exc))
        if pod.devices:
            annotations[DEVICES_ANNOTATION] = json.dumps(pod.devices, sort_keys=True)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> None:
        placement = state.pop(NAME, None)
        if placement is not None:
            cluster.devices[node].release({r: ids for r, ids in pod.devices.items() if r not in placement.devices})
            allocator.give_back(cluster, node, placement)
        else:
            cluster.devices[node].release(pod.devices)
            cluster.touch(node)
        pod.devices = {}
        pod.exclusive_cpus = {}
        annotations = pod.raw.get("metadata", {}).get("annotations") or {}
        for key in (DEVICES_ANNOTATION, allocator.NUMA_ANNOTATION, allocator.NIC_ANNOTATION):
            annotations.pop(key, None)


def _device_plugin_requests(pod: Pod, cluster: ClusterState, node: int) -> dict[str, int]:
    """The pod's requests the node's device plugins serve: an extended resource a DeviceClass backs comes from DRA
    devices on a node that advertises none of it (DynamicResources allocates those)."""
    dra = cluster.dra
    mapped = extended.mapped_resources(pod, dra.extended) if dra is not None else ()
    if not mapped:
        return pod.requests
    drop = {r for r in mapped if (row := cluster.column(r)) is None or cluster.allocatable[row, node] <= 0}
    return {r: v for r, v in pod.requests.items() if r not in drop} if drop else pod.requests


def new(args: dict, handle: object) -> DeviceAllocation:
    unknown = set(args) - {"topologyAware", "partitionPolicy"}
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}", obj=f"pluginConfig {NAME}", field="args")
    aware = args.get("topologyAware", True)
    if not isinstance(aware, bool):
        raise InputError("must be true or false", obj=f"pluginConfig {NAME}", field="args.topologyAware")
    policy = args.get("partitionPolicy", "binpack")
    if policy not in ("binpack", "spread"):
        raise InputError(
            f"unknown policy {policy!r} (binpack, spread)", obj=f"pluginConfig {NAME}", field="args.partitionPolicy"
        )
    return DeviceAllocation(aware, policy)
