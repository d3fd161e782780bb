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
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from accelsched.api.objects import Pod
from accelsched.cluster.devices import is_device_resource
from accelsched.cluster.state import ClusterState
from accelsched.topology.alignment import CPU, Links, TopologyIndex, aligned_requests, evaluate_one, mask_zones

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


def best_set(
    candidates: list[int],
    count: int,
    links: Links,
    used: list[int],
    want_nic: bool,
    required: Sequence[int] = (),
) -> tuple[list[int], int | None]:
    """The ``count`` candidates with the best pair-score sum (plus the link to the best NIC when ``want_nic``),
    ties broken towards packing next to the ``used`` devices; returns (device indices, NIC index or None).

    ``required`` devices are always in the set and count in its score (the kubelet's must_include_deviceIDs: the
    rest is chosen to sit well with them); the device plugin's GetPreferredAllocation uses this same choice."""
    required = list(dict.fromkeys(required))
    candidates = [c for c in candidates if c not in required]
    count -= len(required)
    score, pix = links.score, links.pix
    nics = range(len(links.nic_score)) if want_nic else range(0)

    def key(subset: tuple[int, ...]) -> tuple[int, int, int | None]:
        total = sum(score[a][b] for a, b in itertools.combinations(subset, 2))
        nic, nic_total = None, 0
        for k in nics:
            s = sum(links.nic_score[k][d] for d in subset)
            if nic is None or s > nic_total:
                nic, nic_total = k, s
        packing = sum(1 for d in subset for u in used if pix[d][u])
        return total + nic_total, packing, nic

    if math.comb(len(candidates), count) <= EXHAUSTIVE_LIMIT:
        best: tuple[int, ...] = ()
        best_key: tuple[int, int] = (-1, -1)
        best_nic = None
        for rest_subset in itertools.combinations(candidates, count):
            subset = (*required, *rest_subset)
            total, packing, nic = key(subset)
            if (total, packing) > best_key:
                best, best_key, best_nic = subset, (total, packing), nic
        return list(best), best_nic
    chosen: list[int] = list(required)
    rest = list(candidates)
    while len(chosen) < count + len(required):
        pick = max(rest, key=lambda i: key((*chosen, i))[:2])
        chosen.append(pick)
        rest.remove(pick)
    return chosen, key(tuple(chosen))[2]


def place(pod: Pod, cluster: ClusterState, node: int) -> Placement:
    """Choose zones, devices and exclusive CPUs for ``pod`` on ``node`` (nothing is taken yet)."""
    index = TopologyIndex.of(cluster)
    aligned = aligned_requests(pod, pod.requests, index)
    _, best, _ = evaluate_one(index, cluster, aligned, node)
    zones = mask_zones(index, best)
    numa_of_zone = index.zone_ids[node]
    placement = Placement(numa_nodes=[numa_of_zone[z] for z in zones if z < len(numa_of_zone)])
    want = wants_topology(pod)
    split = cluster.devices[node].partitioned(pod.requests)  # the partition ledger places those
    for res, count in sorted(pod.requests.items()):
        if not is_device_resource(res) or count == 0 or res in split:
            continue
        pool = cluster.devices[node].pools.get(res)
        if pool is None or pool.free_count < count:
            raise ValueError(f"not enough free {res}")
        device_zone = index.device_zone[node].get(res)
        free = [int(i) for i in np.flatnonzero(pool.free)]
        inside = [i for i in free if device_zone is not None and device_zone[i] in zones]
        candidates = inside if len(inside) >= count else free
        used = [int(i) for i in np.flatnonzero(~pool.free)]
        picked, nic = best_set(candidates, count, index.links(node, res), used, want)
        placement.devices[res] = [pool.ids[i] for i in picked]
        if nic is not None and placement.nic is None:
            chosen_nic = index.nics[node][nic]
            placement.nic = chosen_nic.name or chosen_nic.address
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
