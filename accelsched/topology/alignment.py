"""Predicting the kubelet's Topology Manager, over all nodes at once.

The kubelet asks each hint provider (device manager per resource, CPU manager for exclusive CPUs) for the NUMA
masks that can satisfy a request; a hint is *preferred* when its mask is as narrow as the request allows on
that node's hardware (capacity, not what is free). It merges them and admits or rejects the pod by policy:
``none`` and ``best-effort`` always admit, ``restricted`` needs a preferred merged hint, ``single-numa-node``
a preferred hint on one NUMA node; otherwise the pod fails with TopologyAffinityError after it was scheduled.

Here the same rule is a few array operations: per node and NUMA mask, free and capacity per resource are
``(nodes x zones) @ (zones x masks)``; a mask fits when every resource's free amount covers the request.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.topology.layout import NodeLayout
from accelsched.topology.model import PciDevice, pair_score, pcie_link

MAX_ZONES = 8
POLICY_CODES = {"none": 0, "best-effort": 1, "restricted": 2, "single-numa-node": 3}
CPU = quantity.CPU
_INFINITE = 1 << 30


@dataclass
class Links:
    """Among one node's devices of one resource (pool order): pair scores, PIX adjacency, and to each NIC."""

    score: list[list[int]]
    pix: list[list[bool]]
    nic_score: list[list[int]]  # [nic][device]
    nic_pix: tuple[tuple[bool, ...], ...]

    @classmethod
    def among(cls, devs: list[PciDevice], nics: list[PciDevice]) -> Links:
        """The links of ``devs`` (in this order) to each other and to ``nics``: what ``best_set`` scores."""
        return cls(
            [[pair_score(a, b) for b in devs] for a in devs],
            [[pcie_link(a, b) == "PIX" for b in devs] for a in devs],
            [[pair_score(d, nic) for d in devs] for nic in nics],
            tuple(tuple(pcie_link(d, nic) == "PIX" for d in devs) for nic in nics),
        )


@dataclass
class TopologyIndex:
    """Per-cluster arrays for alignment, built once and kept current through the cluster's change log."""

    zones: int
    zone_ids: list[list[int]]  # per node: the NUMA ids behind zone indices 0..k-1
    present: np.ndarray  # (N, Z) the node has this zone
    masks: np.ndarray  # (Z, M) 0/1: zone z is in mask m (m = 0 .. 2^Z - 1)
    popcount: np.ndarray  # (M,)
    rank: np.ndarray  # (M,) order of masks: narrower first, then lower zones
    policy: np.ndarray  # (N,) POLICY_CODES
    pod_scope: np.ndarray  # (N,) scope is pod
    device_zone: list[dict[str, np.ndarray]]  # per node, per resource: zone index per pool device (-1 unknown)
    attrs: list[dict[str, list[PciDevice]]]  # per node, per resource: the devices in pool order
    capacity: dict[str, np.ndarray]  # per resource (incl. cpu): (N, Z)
    cpu_free: np.ndarray  # (N, Z) exclusive CPUs still free per zone
    nic_zone: np.ndarray  # (N, Z) the zone has a NIC
    nics: list[list[PciDevice]]
    and_pairs: list[tuple[np.ndarray, np.ndarray]]  # per mask m: the (a, b) index pairs with a & b == m
    _links: dict[tuple[int, str], Links] = field(default_factory=dict)
    _links_by_shape: dict[tuple, Links] = field(default_factory=dict)

    @classmethod
    def of(cls, cluster: ClusterState) -> TopologyIndex:
        if cluster.topology_index is None:
            cluster.topology_index = cls.build(cluster)
        return cluster.topology_index  # type: ignore[no-any-return]

    @classmethod
    def build(cls, cluster: ClusterState) -> TopologyIndex:
        n = cluster.n
        layouts: list[NodeLayout | None] = [node.layout for node in cluster.nodes]
        zone_ids = [(lay.numa_ids[:MAX_ZONES] if lay else []) for lay in layouts]
        z = max([len(ids) for ids in zone_ids] + [1])
        present = np.zeros((n, z), dtype=bool)
        for i, ids in enumerate(zone_ids):
            present[i, : len(ids)] = True
        m = np.arange(2**z)  # mask index == mask value; 0 (no NUMA node) is never a valid hint
        masks = ((m[None, :] >> np.arange(z)[:, None]) & 1).astype(np.int64)
        popcount = masks.sum(axis=0)
        rank = np.argsort(np.argsort(popcount * (2**z) + m, kind="stable"))
        policy = np.array([POLICY_CODES[lay.policy] if lay else 0 for lay in layouts], dtype=np.int8)
        pod_scope = np.array([bool(lay) and lay.scope == "pod" for lay in layouts], dtype=bool)
        capacity: dict[str, np.ndarray] = {CPU: np.zeros((n, z), dtype=np.int64)}
        device_zone: list[dict[str, np.ndarray]] = []
        attrs: list[dict[str, list[PciDevice]]] = []
        nic_zone = np.zeros((n, z), dtype=bool)
        nics: list[list[PciDevice]] = []
        for i, lay in enumerate(layouts):
            where = {numa: k for k, numa in enumerate(zone_ids[i])}
            per_res: dict[str, np.ndarray] = {}
            per_attrs: dict[str, list[PciDevice]] = {}
            if lay is not None:
                for numa, cpus in lay.cpus.items():
                    if numa in where:
                        capacity[CPU][i, where[numa]] = cpus
                for res, pool in cluster.devices[i].pools.items():
                    by_id = {d.address: d for d in lay.devices.get(res, [])}
                    devs = [by_id.get(ident) for ident in pool.ids]
                    zones = np.array(
                        [where.get(d.numa_node, -1) if d is not None else -1 for d in devs], dtype=np.int64
                    )
                    per_res[res] = zones
                    per_attrs[res] = [d or _unknown(ident) for d, ident in zip(devs, pool.ids, strict=True)]
                    cap = capacity.setdefault(res, np.zeros((n, z), dtype=np.int64))
                    cap[i] = np.bincount(zones[zones >= 0], minlength=z)[:z]
                for nic in lay.nics:
                    if nic.numa_node in where:
                        nic_zone[i, where[nic.numa_node]] = True
            device_zone.append(per_res)
            attrs.append(per_attrs)
            nics.append(list(lay.nics) if lay else [])
        return cls(
            z,
            zone_ids,
            present,
            masks,
            popcount,
            rank,
            policy,
            pod_scope,
            device_zone,
            attrs,
            capacity,
            capacity[CPU].copy(),
            nic_zone,
            nics,
            [np.nonzero((m[:, None] & m[None, :]) == v) for v in m],
        )

    def links(self, node: int, resource: str) -> Links:
        """Pair scores and PIX links among the node's devices of ``resource`` and to its NICs, computed once."""
        key = (node, resource)
        links = self._links.get(key)
        if links is None:
            devs, nics = self.attrs[node][resource], self.nics[node]
            # Nodes of one model share a layout: compute each distinct layout's links once.
            shape = tuple(_place(d) for d in devs), tuple(_place(n) for n in nics)
            links = self._links_by_shape.get(shape)
            if links is None:
                links = Links.among(devs, nics)
                self._links_by_shape[shape] = links
            self._links[key] = links
        return links

    # -------------------------------------------------------------------------------- free capacity

    def free(self, cluster: ClusterState, resource: str) -> np.ndarray:
        """(N, Z) free amount per zone: devices from the device ledger, CPUs from the exclusive-CPU ledger."""
        if resource == CPU:
            return self.cpu_free

        def compute(nodes: np.ndarray) -> np.ndarray:
            out = np.zeros((len(nodes), self.zones), dtype=np.int64)
            for k, i in enumerate(nodes):
                zones = self.device_zone[int(i)].get(resource)
                if zones is not None:
                    pool = cluster.devices[int(i)].pools[resource]
                    hit = zones[pool.free & (zones >= 0)]
                    out[k] = np.bincount(hit, minlength=self.zones)[: self.zones]
            return out

        return cluster.node_values(("numa-free", resource), compute)


def aligned_requests(pod: Pod, requests: dict[str, int], index: TopologyIndex) -> dict[str, int]:
    """The part of a request the Topology Manager aligns: devices with known NUMA placement, and whole
    exclusive CPUs of a Guaranteed pod (the static CPU manager's case)."""
    out = {r: a for r, a in requests.items() if r in index.capacity and r != CPU and a > 0}
    cpu = requests.get(CPU, 0)
    if pod.guaranteed and cpu and cpu % 1000 == 0 and index.capacity[CPU].any():
        out[CPU] = cpu // 1000
    return out


def _combine(index: TopologyIndex, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Masks reachable as ``a & b`` with a from ``left`` and b from ``right`` (per node): the kubelet's merge of
    one hint from each provider. Exact up to 4 NUMA nodes; beyond, only equal masks combine (conservative)."""
    if index.zones > 4:
        return left & right
    out = np.zeros_like(left)
    for m, (a, b) in enumerate(index.and_pairs):
        out[:, m] = (left[:, a] & right[:, b]).any(axis=1)
    return out


def evaluate(
    index: TopologyIndex, cluster: ClusterState, requests: dict[str, int], nodes: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each node: (admitted by its policy, best merged mask or -1, that mask is preferred).

    Per resource, the hints are the masks whose free amount covers the request, preferred when as narrow as
    the node's capacity allows. Merged hints are ANDs of one hint per resource, preferred when all parts are;
    a resource the node cannot place on NUMA nodes gives a don't-care hint, as in the kubelet.
    """
    sel = slice(None) if nodes is None else nodes
    present = index.present[sel]
    n = present.shape[0]
    full = present.astype(np.int64) @ (1 << np.arange(index.zones))  # each node's own zones as a mask
    values = np.arange(index.masks.shape[1])
    valid = ((values[None, :] & ~full[:, None]) == 0) & (values[None, :] > 0)
    neutral = np.zeros_like(valid)
    neutral[np.arange(n), full] = True
    reach_all = reach_pref = None
    single = np.ones((n, index.zones), dtype=bool)
    singles = 1 << np.arange(index.zones)
    for res, amount in requests.items():
        cap = index.capacity[res][sel]
        known = (cap.sum(axis=1) > 0)[:, None]
        fits = valid & ((index.free(cluster, res)[sel] @ index.masks) >= amount)
        enough = valid & ((cap @ index.masks) >= amount)
        narrowest = np.where(enough, index.popcount[None, :], _INFINITE).min(axis=1)
        preferred = fits & (index.popcount[None, :] == narrowest[:, None])
        single &= np.where(known, preferred[:, singles], True)
        fits, preferred = np.where(known, fits, neutral), np.where(known, preferred, neutral)
        reach_all = fits if reach_all is None else _combine(index, reach_all, fits)
        reach_pref = preferred if reach_pref is None else _combine(index, reach_pref, preferred)
    if reach_all is None:
        return np.ones(n, dtype=bool), np.full(n, -1), np.ones(n, dtype=bool)
    reach_all &= valid
    reach_pref &= valid
    single &= present
    policy = index.policy[sel]
    rank = index.rank[None, :]
    cost = np.where(reach_pref, rank, np.where(reach_all, _INFINITE // 2 + rank, _INFINITE))
    best = cost.argmin(axis=1)
    found = cost[np.arange(n), best] < _INFINITE
    best_single = singles[single.argmax(axis=1)]
    is_single = policy == POLICY_CODES["single-numa-node"]
    best = np.where(is_single & single.any(axis=1), best_single, np.where(found, best, -1))
    admitted = (
        (policy <= POLICY_CODES["best-effort"])
        | ((policy == POLICY_CODES["restricted"]) & reach_pref.any(axis=1))
        | (is_single & single.any(axis=1))
    )
    best_preferred = np.where(is_single, single.any(axis=1), reach_pref.any(axis=1))
    return admitted, best, best_preferred


def evaluate_one(
    index: TopologyIndex,
    cluster: ClusterState,
    requests: dict[str, int],
    node: int,
    free: dict[str, np.ndarray] | None = None,
) -> tuple[bool, int, bool]:
    """``evaluate`` for one node in plain Python (numpy's per-call cost dwarfs a few masks); tests hold them equal.

    The verdict depends only on the node's policy, zone count and, per resource, the request and the capacity
    and free amount per zone, so identical nodes in identical states share one memoized answer.
    """
    k = len(index.zone_ids[node])
    if not k or not requests:  # no NUMA zones known (or nothing to align): no hint narrows anything
        return int(index.policy[node]) <= POLICY_CODES["best-effort"] or not requests, -1, not requests
    if free is None:
        free = {res: index.free(cluster, res) for res in requests}
    items = tuple(
        (amount, tuple(index.capacity[res][node].tolist()), tuple(free[res][node].tolist()))
        for res, amount in requests.items()
    )
    return _merged_verdict(int(index.policy[node]), k, index.zones, items)


@functools.lru_cache(maxsize=65536)
def _merged_verdict(
    policy: int, k: int, zones: int, items: tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]
) -> tuple[bool, int, bool]:
    """The kubelet's merge for one node: ``items`` holds (request, capacity per zone, free per zone) per resource."""
    full = (1 << k) - 1
    masks = [m for m in range(1, 1 << zones) if not m & ~full]
    pop = [bin(m).count("1") for m in range(1 << zones)]
    rank = {m: (pop[m], m) for m in range(1 << zones)}
    bits = {m: [z for z in range(k) if m >> z & 1] for m in masks}
    reach_all: set[int] | None = None
    reach_pref: set[int] | None = None
    single = [True] * k
    for amount, cap, free in items:
        if sum(cap) > 0:
            fits = {m for m in masks if sum(free[z] for z in bits[m]) >= amount}
            enough = [pop[m] for m in masks if sum(cap[z] for z in bits[m]) >= amount]
            narrowest = min(enough) if enough else _INFINITE
            preferred = {m for m in fits if pop[m] == narrowest}
            single = [ok and (1 << z) in preferred for z, ok in enumerate(single)]
        else:
            fits = preferred = {full}
        reach_all = fits if reach_all is None else _combine_sets(zones, reach_all, fits)
        reach_pref = preferred if reach_pref is None else _combine_sets(zones, reach_pref, preferred)
    if reach_all is None or reach_pref is None:
        return True, -1, True
    if policy == POLICY_CODES["single-numa-node"]:
        z = next((z for z, ok in enumerate(single) if ok), None)
        if z is not None:
            return True, 1 << z, True
        best = min(reach_pref or reach_all, key=lambda m: rank[m], default=-1)
        return False, best, False
    best = min(reach_pref or reach_all, key=lambda m: rank[m], default=-1)
    admitted = policy <= POLICY_CODES["best-effort"] or (policy == POLICY_CODES["restricted"] and bool(reach_pref))
    return admitted, best, bool(reach_pref)


def _combine_sets(zones: int, left: set[int], right: set[int]) -> set[int]:
    if zones > 4:
        return left & right
    return {a & b for a in left for b in right} - {0}


def pod_admitted(pod: Pod, index: TopologyIndex, cluster: ClusterState) -> np.ndarray:
    """Admission over all nodes, per the node's scope: the pod's total, or each container on its own.

    A node's verdict depends only on its own free devices and CPUs and the request, so it is cached per request
    shape and recomputed only at nodes that changed since (ClusterState.node_values).
    """
    total = aligned_requests(pod, pod.requests, index)
    if not total:
        return np.ones(cluster.n, dtype=bool)
    per_container = [c for c in (aligned_requests(pod, c, index) for c in pod.container_requests) if c]
    if len(per_container) == 1 and per_container[0] == total:
        per_container = []

    def compute(nodes: np.ndarray) -> np.ndarray:
        out = np.ones(len(nodes), dtype=bool)
        strict = index.policy[nodes] >= POLICY_CODES["restricted"]
        if strict.any():
            sub = nodes[strict]
            admitted = evaluate(index, cluster, total, sub)[0]
            if per_container:
                container_ok = np.ones(len(sub), dtype=bool)
                for req in per_container:
                    container_ok &= evaluate(index, cluster, req, sub)[0]
                admitted = np.where(index.pod_scope[sub], admitted, container_ok)
            out[strict] = admitted
        return out

    free = {res: index.free(cluster, res) for res in total}  # current before node_values asks for any node

    def compute_one(node: int) -> bool:
        if index.policy[node] < POLICY_CODES["restricted"]:
            return True
        if per_container and not index.pod_scope[node]:
            return all(evaluate_one(index, cluster, req, node, free)[0] for req in per_container)
        return evaluate_one(index, cluster, total, node, free)[0]

    key = ("topology-admit", tuple(sorted(total.items())), tuple(tuple(sorted(c.items())) for c in per_container))
    return cluster.node_values(key, compute, compute_one)


def mask_zones(index: TopologyIndex, mask: int) -> list[int]:
    """Zone indices in mask index ``mask`` (-1: every zone)."""
    if mask < 0:
        return list(range(index.zones))
    return [z for z in range(index.zones) if index.masks[z, mask]]


def _place(d: PciDevice) -> tuple:
    """What a link class depends on: identity within the node, NUMA node, PCIe path and NVLinks."""
    return (d.address, d.numa_node, d.root, d.bridges, tuple(sorted(d.nvlinks.items())))


def _unknown(ident: str) -> PciDevice:
    return PciDevice(ident, 0, 0, 0, None, (), "unknown", "accelerator", ident)
