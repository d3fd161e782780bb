"""The fragmentation and capacity panel: free devices by type and by the largest shape a node can still take,
capacity stranded on nodes no new pod can use, and the split devices' fragmentation as ``schedule`` prints it.

The per-resource numbers come from the cluster's requested/allocatable matrices in a few array operations, so the
panel costs the same at 5,000 nodes as the table rows ``schedule`` prints cost per node.

Stranded: free devices of a resource on a node that no pod asking for that resource can use, because of the node
(cordoned, a NoSchedule or NoExecute taint, no pod slot, no cpu or memory left). A taint, or a cordon (the
``node.kubernetes.io/unschedulable:NoSchedule`` taint NodeUnschedulable checks), strands a resource's devices only
if no pod of the run that requests that resource tolerates it (the run's results and the pods bound in the
cluster): clusters that taint their accelerator nodes so only accelerator pods land there (GKE's
``nvidia.com/gpu=present:NoSchedule``, which ExtendedResourceToleration or the workloads' own tolerations let every
GPU pod tolerate) keep those devices usable. A pod that requests none of the resource says nothing about it (a
device plugin's DaemonSet tolerates every taint). The node's own reasons (no pod slot, cpu, memory) strand all.

``devices`` totals physical devices: a partition-managed resource (MIG profiles, time-slicing replicas, milli
shares, slices) advertises overlapping counts of the same devices (eight 1g.5gb and three 2g.10gb of one A100),
so on a node whose devices are split its resources are left out, and the node counts its devices wholly free
instead; the partitions entries give their free units (slices, replicas) apart.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from accelsched import report
from accelsched.api import quantity
from accelsched.api.selectors import NO_EXECUTE, NO_SCHEDULE, Taint, Toleration, tolerates_all
from accelsched.devices import partition as partitioning
from accelsched.dra.model import DeviceID
from accelsched.plugins.nodeunschedulable import UNSCHEDULABLE_TAINT

# The physical resource a partitioned device is counted as, per partition mode (slices and time-slicing name theirs).
PHYSICAL = {"mig": partitioning.GPU_RESOURCE, "milli": partitioning.GPU_RESOURCE}

# How a sentence names a resource's device ("an 8-GPU pod"); any other resource goes by its name after the slash.
SHORT_NAMES = {
    "nvidia.com/gpu": "GPU",
    "amd.com/gpu": "GPU",
    "qualcomm.com/ai-accelerator": "accelerator",
    "aws.amazon.com/neuron": "Neuron device",
    "google.com/tpu": "TPU",
}
STRANDED_SENTENCES = 5  # stranded nodes named one by one; the rest are summed in one sentence


def short_name(resource: str) -> str:
    return SHORT_NAMES.get(resource, resource.rsplit("/", 1)[-1])


def _article(n: int) -> str:
    """``an 8-GPU``, ``an 11-GPU``, ``an 18000-GPU``, ``a 4-GPU``: by how the number is said."""
    digits = str(n)
    spoken_an = digits.startswith("8") or (re.fullmatch(r"1[18](\d{3})*", digits) is not None)
    return "an" if spoken_an else "a"


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def device_resources(cluster: Any) -> list[str]:
    """Extended resources some node advertises (partition-managed ones too), in the cluster's resource order."""
    return [
        res
        for res in cluster.resources
        if quantity.is_extended(res) and cluster.allocatable[cluster.res_index[res]].any()
    ]


def tolerated_taints(cluster: Any, results: list[Any], resources: list[str]) -> dict[str, frozenset[Taint]]:
    """Per device resource, the NoSchedule/NoExecute taints of the nodes (and the cordon's unschedulable taint)
    that some pod of the run requesting that resource tolerates: the results' pods and the pods bound in the
    cluster. Pods are grouped by their tolerations first, so a cluster of one workload type costs one check."""
    taints = {t for node in cluster.nodes for t in node.taints if t.effect in (NO_SCHEDULE, NO_EXECUTE)}
    if np.asarray(cluster.unschedulable, dtype=bool).any():
        taints.add(UNSCHEDULABLE_TAINT)
    out: dict[str, set[Taint]] = {res: set() for res in resources}
    if not taints:
        return {res: frozenset() for res in resources}
    wanted = set(resources)
    asking: dict[tuple[Toleration, ...], set[str]] = {}
    seen: set[str] = set()
    pods = [r.pod for r in results]
    pods += [pod for on_node in cluster.pods_on for pod in on_node.values()]
    for pod in pods:
        if not pod.tolerations or pod.key in seen:
            continue
        seen.add(pod.key)
        asked = {res for res, amount in pod.requests.items() if amount > 0 and res in wanted}
        if asked:
            asking.setdefault(tuple(pod.tolerations), set()).update(asked)
    for tolerations, asked in asking.items():
        held = {t for t in taints if tolerates_all(tolerations, t)}
        for res in asked:
            out[res] |= held
    return {res: frozenset(held) for res, held in out.items()}


def blocked(cluster: Any, tolerated: frozenset[Taint] = frozenset()) -> tuple[np.ndarray, list[str]]:
    """Per node whether a new pod cannot land there, and why (empty for usable nodes): cordoned, a NoSchedule or
    NoExecute taint, no pod slot, or no cpu or memory left (of what the node advertises). A taint in
    ``tolerated`` (a cordon: UNSCHEDULABLE_TAINT) blocks nothing; a cordoned node's own unschedulable taint is
    said as "cordoned"."""
    n = cluster.n
    why = [""] * n
    mask = np.zeros(n, dtype=bool)

    def row(res: str) -> tuple[np.ndarray, np.ndarray]:
        r = cluster.res_index.get(res)
        if r is None:
            zero = np.zeros(n, dtype=np.int64)
            return zero, zero
        return cluster.allocatable[r], cluster.allocatable[r] - cluster.requested[r]

    _, pods_free = row(quantity.PODS)
    cpu_alloc, cpu_free = row(quantity.CPU)
    mem_alloc, mem_free = row(quantity.MEMORY)
    no_slot = pods_free <= 0
    no_cpu = (cpu_alloc > 0) & (cpu_free <= 0)
    no_mem = (mem_alloc > 0) & (mem_free <= 0)
    cordoned = np.asarray(cluster.unschedulable, dtype=bool)
    if UNSCHEDULABLE_TAINT in tolerated:
        cordoned = np.zeros(n, dtype=bool)
    mask |= cordoned | no_slot | no_cpu | no_mem
    hard = [
        [
            str(t)
            for t in node.taints
            if t.effect in (NO_SCHEDULE, NO_EXECUTE)
            and t not in tolerated
            and not (node.unschedulable and t == UNSCHEDULABLE_TAINT)
        ]
        for node in cluster.nodes
    ]
    for i in np.flatnonzero(mask | np.array([bool(h) for h in hard], dtype=bool)):
        parts = []
        if cordoned[i]:
            parts.append("cordoned")
        if hard[i]:
            parts.append("tainted " + ", ".join(hard[i]))
        if no_slot[i]:
            parts.append("no pod slot left")
        if no_cpu[i]:
            parts.append("no cpu left")
        if no_mem[i]:
            parts.append("no memory left")
        why[i] = ", ".join(parts)
        mask[i] = True
    return mask, why


def _partitioned(cluster: Any, res: str) -> bool:
    return any(d.partition is not None and d.partition.manages(res) for d in cluster.devices)


def shape_sizes(largest: int) -> list[int]:
    """1, 2, 4, ... up to the largest per-node allocatable, plus that largest."""
    sizes = []
    size = 1
    while size <= largest:
        sizes.append(size)
        size *= 2
    if largest > 0 and sizes[-1] != largest:
        sizes.append(largest)
    return sizes


def panel(cluster: Any, results: list[Any]) -> dict[str, Any]:
    """CapacityPanel (spec17.md): resources, stranded, partitions, dra and the sentences that sum them up."""
    typical = [r.pod.requests for r in results]
    resources = []
    stranded = []
    sentences: list[str] = []
    rows = device_resources(cluster)
    tolerated = tolerated_taints(cluster, results, rows)
    by_tolerated: dict[frozenset[Taint], tuple[np.ndarray, list[str]]] = {}
    free_by_res, unusable_by_res, why_by_res = {}, {}, {}
    for res in rows:
        if tolerated[res] not in by_tolerated:
            by_tolerated[tolerated[res]] = blocked(cluster, tolerated[res])
        unusable, why = by_tolerated[tolerated[res]]
        usable = ~unusable
        unusable_by_res[res], why_by_res[res] = unusable, why
        r = cluster.res_index[res]
        alloc = cluster.allocatable[r]
        free = np.maximum(alloc - cluster.requested[r], 0)
        free_by_res[res] = free
        largest = int(alloc.max())
        shapes = [{"size": s, "nodes": int(((free >= s) & usable).sum())} for s in shape_sizes(largest)]
        resources.append(
            {
                "resource": res,
                "allocatable": int(alloc.sum()),
                "used": int(cluster.requested[r].sum()),
                "free": int(free.sum()),
                "stranded": int(free[unusable].sum()),
                "shapes": shapes,
            }
        )
        taking = [s for s in shapes if s["nodes"]]
        name = short_name(res)
        if not taking:
            sentences.append(f"no node can take {_article(1)} 1-{name} pod")
            continue
        best = taking[-1]
        sentences.append(f"{_nodes(best['nodes'])} can still take {_article(best['size'])} {best['size']}-{name} pod")
        if shapes[-1]["nodes"] == 0 and not _partitioned(cluster, res):  # a split resource's count is a bound
            size = shapes[-1]["size"]
            sentences.append(f"no node can take {_article(size)} {size}-{name} pod")
    any_unusable = np.zeros(cluster.n, dtype=bool)
    for res in rows:
        any_unusable |= unusable_by_res[res]
    for i in np.flatnonzero(any_unusable):
        for res in rows:
            amount = int(free_by_res[res][i])
            if amount and unusable_by_res[res][i]:
                stranded.append(
                    {"node": cluster.nodes[i].name, "resource": res, "free": amount, "why": why_by_res[res][i]}
                )
    for entry in stranded[:STRANDED_SENTENCES]:
        sentences.append(f"{entry['free']} {entry['resource']} stranded on {entry['node']} ({entry['why']})")
    if len(stranded) > STRANDED_SENTENCES:
        rest = stranded[STRANDED_SENTENCES:]
        nodes = len({e["node"] for e in rest})
        sentences.append(f"{sum(e['free'] for e in rest)} more devices stranded on {_nodes(nodes)}")
    partitions = partition_entries(cluster, typical)
    for p in partitions:
        share = f" ({100 * p['fragmented'] // p['free']}%)" if p["free"] else ""
        sentences.append(
            f"{p['mode']}: {p['free']} of {p['total']} {p['unit']} free, {p['fragmented']} of them fragmented{share}"
        )
    dra = dra_entries(cluster)
    for d in dra:
        sentences.append(f"DRA {d['driver']}: {d['free']} of {d['devices']} devices free")
    return {
        "resources": resources,
        "devices": physical_devices(cluster, rows, free_by_res, unusable_by_res),
        "physical": physical_table(cluster, rows, free_by_res, unusable_by_res),
        "stranded": stranded,
        "partitions": partitions,
        "dra": dra,
        "sentences": sentences,
    }


def physical_devices(
    cluster: Any, rows: list[str], free: dict[str, np.ndarray], unusable: dict[str, np.ndarray]
) -> dict[str, int]:
    """Free and stranded devices, each physical device once (the sums of ``physical_table``). ``free`` counts
    only devices a new pod can use: a device stranded (on a cordoned or tainted node, one with no pod slot, cpu
    or memory left) is in ``stranded`` alone, so a drain, which cordons, never raises the free count."""
    table = physical_table(cluster, rows, free, unusable)
    stranded = sum(e["stranded"] for e in table)
    return {"free": sum(e["free"] for e in table) - stranded, "stranded": stranded}


def physical_table(
    cluster: Any, rows: list[str], free: dict[str, np.ndarray], unusable: dict[str, np.ndarray]
) -> list[dict[str, Any]]:
    """Per physical device type (a MIG-split A100 is one ``nvidia.com/gpu``, a time-sliced GPU one GPU, not its
    replicas): ``devices``, ``used`` (held in part or whole), ``free`` (wholly free), ``stranded`` (wholly free
    where no resource it serves is usable), and under ``split`` what its partitions serve, in their own units
    (MIG instances per profile, time-slicing replicas, slices, milli), so no row adds replicas to devices.

    A resource a node serves through its partition is left out of that node's plain count; the partition's
    devices count instead, wholly free when no pod holds a unit of them."""
    out: dict[str, dict[str, Any]] = {}

    def entry(resource: str) -> dict[str, Any]:
        return out.setdefault(resource, {"resource": resource, "devices": 0, "used": 0, "free": 0, "stranded": 0,
                                         "split": {}})  # fmt: skip

    split = [i for i, d in enumerate(cluster.devices) if d.partition is not None]
    for res in rows:
        managed = np.zeros(cluster.n, dtype=bool)
        for i in split:
            managed[i] = cluster.devices[i].partition.manages(res)
        r = cluster.res_index[res]
        plain = ~managed
        if not (cluster.allocatable[r] * plain).any():
            continue
        e = entry(res)
        e["devices"] += int((cluster.allocatable[r] * plain).sum())
        e["used"] += int((cluster.requested[r] * plain).sum())
        counted = free[res] * plain
        e["free"] += int(counted.sum())
        e["stranded"] += int(counted[unusable[res]].sum())
    for i in split:
        p = cluster.devices[i].partition
        n = len(p.devices)
        per_device = p.total_units // n if n else 0
        whole = sum(1 for d in range(n) if p.free_units(d) == per_device)
        served = [res for res in rows if p.manages(res) and cluster.allocatable[cluster.res_index[res]][i] > 0]
        e = entry(PHYSICAL.get(p.mode, p.resource))
        e["devices"] += n
        e["used"] += n - whole
        e["free"] += whole
        if served and all(unusable[res][i] for res in served):
            e["stranded"] += whole
        for res in served:
            r = cluster.res_index[res]
            unit = "instances" if p.mode == "mig" else partitioning.UNIT_NAMES[p.mode]
            sub = e["split"].setdefault(res, {"resource": res, "mode": p.mode, "unit": unit, "total": 0, "used": 0})
            sub["total"] += int(cluster.allocatable[r][i])
            sub["used"] += int(cluster.requested[r][i])
    for e in out.values():
        e["split"] = [{**s, "free": s["total"] - s["used"]} for s in e["split"].values()]
    return list(out.values())


def partition_entries(cluster: Any, typical: list[dict[str, int]]) -> list[dict[str, Any]]:
    """Per partition mode, what report.fragmentation_line sums: used, total, free and fragmented units."""
    out = []
    for mode, group in report.partitions_by_mode(cluster).items():
        frag, free = partitioning.cluster_fragmentation(group, typical)
        total = sum(p.total_units for p in group)
        out.append(
            {
                "mode": mode,
                "unit": partitioning.UNIT_NAMES[mode],
                "used": total - free,
                "total": total,
                "free": free,
                "fragmented": frag,
            }
        )
    return out


def dra_entries(cluster: Any) -> list[dict[str, Any]]:
    """Per DRA driver its devices any node can use (each counted once) and how many no claim holds."""
    dra = getattr(cluster, "dra", None)
    if dra is None:
        return []
    seen: dict[str, set[DeviceID]] = {}
    for node in cluster.nodes:
        for s, d in dra.devices_for_node(node.name):
            seen.setdefault(s.driver, set()).add(DeviceID(s.driver, s.pool.name, d.name))
    taken = dra.allocated
    return [
        {"driver": driver, "devices": len(ids), "free": sum(1 for x in ids if not taken.is_allocated(x))}
        for driver, ids in sorted(seen.items())
    ]
