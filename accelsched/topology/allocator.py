"""Topology-aware device choice on the chosen node: the devices a pod gets are chosen, not counted.

First the NUMA zones: the merged Topology Manager hint (the narrowest preferred mask that fits), so the kubelet
will admit what we bind. Then, among the free devices there, the set with the highest sum of go-gpuallocator
pair scores (NVLink, then one PCIe switch, then host bridge, NUMA node, socket), checked exhaustively when the
choice is small and greedily otherwise. A pod that wants topology (annotation ``accelsched.io/want-topology``)
also counts the link of each device to the best NIC, so its accelerators sit beside the NIC it talks through.
Ties go to the set that packs next to devices already in use, keeping whole switches free for larger jobs.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from accelsched.api.objects import Pod
from accelsched.cluster.devices import is_device_resource
from accelsched.cluster.state import ClusterState
from accelsched.topology.alignment import CPU, TopologyIndex, aligned_requests, evaluate, mask_zones
from accelsched.topology.model import PciDevice, pair_score, pcie_link

WANT_TOPOLOGY_ANNOTATION = "accelsched.io/want-topology"
NUMA_ANNOTATION = "accelsched.io/numa-nodes"
NIC_ANNOTATION = "accelsched.io/nic"
EXHAUSTIVE_LIMIT = 5000  # device subsets scored exhaustively; beyond this the greedy choice is used


def wants_topology(pod: Pod) -> bool:
    return pod.annotations.get(WANT_TOPOLOGY_ANNOTATION, "").lower() in ("true", "nic", "1", "yes")


@dataclass
class Placement:
    devices: dict[str, list[str]] = field(default_factory=dict)
    cpus: dict[int, int] = field(default_factory=dict)  # zone index -> exclusive CPUs taken
    numa_nodes: list[int] = field(default_factory=list)
    nic: str | None = None


def set_score(chosen: list[PciDevice], nic: PciDevice | None) -> int:
    total = sum(pair_score(a, b) for a, b in itertools.combinations(chosen, 2))
    if nic is not None:
        total += sum(pair_score(d, nic) for d in chosen)
    return total


def best_set(
    candidates: list[int], count: int, attrs: list[PciDevice], nics: list[PciDevice], used: list[PciDevice]
) -> tuple[list[int], PciDevice | None]:
    """The ``count`` candidates with the best pair-score sum (and NIC link), packing next to ``used``."""
    nic_options: list[PciDevice | None] = list(nics) or [None]

    def key(subset: tuple[int, ...]) -> tuple[int, int, PciDevice | None]:
        devs = [attrs[i] for i in subset]
        score, nic = max(((set_score(devs, n), n) for n in nic_options), key=lambda sn: sn[0])
        packing = sum(1 for d in devs for u in used if pcie_link(d, u) == "PIX")
        return score, packing, nic

    if math.comb(len(candidates), count) <= EXHAUSTIVE_LIMIT:
        best: tuple[int, ...] | None = None
        best_key: tuple[int, int] = (-1, -1)
        best_nic = None
        for subset in itertools.combinations(candidates, count):
            score, packing, nic = key(subset)
            if (score, packing) > best_key:
                best, best_key, best_nic = subset, (score, packing), nic
        return list(best or ()), best_nic
    chosen: list[int] = []
    rest = list(candidates)
    while len(chosen) < count:
        pick = max(rest, key=lambda i: key((*chosen, i))[:2])
        chosen.append(pick)
        rest.remove(pick)
    return chosen, key(tuple(chosen))[2]


def place(pod: Pod, cluster: ClusterState, node: int) -> Placement:
    """Choose zones, devices and exclusive CPUs for ``pod`` on ``node`` (nothing is taken yet)."""
    index = TopologyIndex.of(cluster)
    aligned = aligned_requests(pod, pod.requests, index)
    _, best, _ = evaluate(index, cluster, aligned, np.array([node]))
    zones = mask_zones(index, int(best[0]))
    numa_of_zone = index.zone_ids[node]
    placement = Placement(numa_nodes=[numa_of_zone[z] for z in zones if z < len(numa_of_zone)])
    want = wants_topology(pod)
    for res, count in sorted(pod.requests.items()):
        if not is_device_resource(res) or count == 0:
            continue
        pool = cluster.devices[node].pools.get(res)
        if pool is None or pool.free_count < count:
            raise ValueError(f"not enough free {res}")
        device_zone = index.device_zone[node].get(res)
        free = [int(i) for i in np.flatnonzero(pool.free)]
        inside = [i for i in free if device_zone is not None and device_zone[i] in zones]
        candidates = inside if len(inside) >= count else free
        attrs = index.attrs[node][res]
        used = [attrs[i] for i in np.flatnonzero(~pool.free)]
        picked, nic = best_set(candidates, count, attrs, index.nics[node] if want else [], used)
        placement.devices[res] = [pool.ids[i] for i in picked]
        if nic is not None and placement.nic is None:
            placement.nic = nic.name or nic.address
    need = aligned.get(CPU, 0)
    for z in zones:
        take = min(need, int(index.cpu_free[node, z]))
        if take:
            placement.cpus[z] = take
            need -= take
    return placement


def take(cluster: ClusterState, node: int, placement: Placement) -> None:
    index = TopologyIndex.of(cluster)
    cluster.devices[node].claim(placement.devices)
    for z, n in placement.cpus.items():
        index.cpu_free[node, z] -= n
    cluster.touch(node)


def give_back(cluster: ClusterState, node: int, placement: Placement) -> None:
    index = TopologyIndex.of(cluster)
    cluster.devices[node].release(placement.devices)
    for z, n in placement.cpus.items():
        index.cpu_free[node, z] += n
    cluster.touch(node)
