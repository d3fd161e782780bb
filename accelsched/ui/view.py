"""The page's view model: every node with its device cells (by NUMA node and PCIe switch), the Pending list and
one pod's detail, as JSON-ready dicts.

Everything is read from a finished run (its Session's cluster and its results), so the page shows exactly what
``schedule`` computed. The work is linear in nodes + pods + devices: each pod's devices are visited once, from the
node that holds it, never by scanning every pod per node (the map must stay quick at 5,000 nodes x 8 devices).

To keep the state small, a NodeView and a DeviceCell leave out keys that are null, false or empty (the front end
reads a missing key as null or empty): see ``_compact``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

from accelsched import report
from accelsched.api import quantity, reader
from accelsched.cluster.devices import is_device_resource
from accelsched.devices import mig
from accelsched.devices import partition as partitioning
from accelsched.dra import explain as dra_explain
from accelsched.dra import state as dra_state
from accelsched.dra.model import ALLOCATION_MODE_EXACT_COUNT, DeviceID
from accelsched.framework import gang
from accelsched.topology.allocator import NIC_ANNOTATION, NUMA_ANNOTATION
from accelsched.topology.layout import ATTR_PCIE_ROOT
from accelsched.ui import capacity, reuse
from accelsched.ui.queues import queue_panel

# Label keys a platform team groups nodes by, most useful first (groupKeys lists the present ones in this order).
KNOWN_GROUP_KEYS = (
    "accelsched.io/pdu",
    "accelsched.io/rack",
    "topology.kubernetes.io/zone",
    "nvidia.com/gpu.clique",  # the NVLink domain (GPU Feature Discovery)
    "node.kubernetes.io/instance-type",
)
# Never offered for grouping: one value per node, a group of one.
_UNGROUPED_KEYS = frozenset({"kubernetes.io/hostname"})
_SHARE_UNIT = {"timeslicing": "replicas", "slices": "slices", "milli": "milli"}


# ------------------------------------------------------------------------------------ the whole view


def build_view(run: Any, group_by: str | None, reuse: tuple[Any, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The /api/state body without version and mode (the Hub adds those, and readOnly/source if it wants its own).

    Built with the cyclic collector paused, as the loader reads (api/reader.paused_gc): the view is some 100,000
    small dicts at 5,000 nodes, none garbage yet, and each collection would walk the whole session's heap again
    (three quarters of a cold build's time)."""
    with reader.paused_gc():
        return _build_view(run, group_by, reuse)


def _build_view(run: Any, group_by: str | None, reuse: tuple[Any, dict[str, Any]] | None) -> dict[str, Any]:
    session = run.session
    cluster = session.cluster
    dra_holders = _dra_holders(cluster)
    if reuse is not None and cluster.dra is None:
        nodes = _reused_views(run, reuse[0], reuse[1], dra_holders)
        keys = group_keys(cluster.nodes, session.scheduler.topologies, reuse[0])
    else:
        nodes = [_node_view(run, i, dra_holders) for i in range(cluster.n)]
        keys = group_keys(cluster.nodes, session.scheduler.topologies)
    chosen = group_by if group_by is not None else (keys[0] if keys else None)
    devices = free = 0
    counted = reuse[0].cache.setdefault("cell_counts", {}) if reuse is not None else {}
    for n in nodes:  # a node view reused from today's is counted once (by identity: the same dict)
        hit = counted.get(id(n))
        if hit is None or hit[0] is not n:
            hit = (n, *_cell_counts(n))
            if reuse is not None and reuse[1].get(n["name"]) is n:
                counted[id(n)] = hit
        devices += hit[1]
        free += hit[2]
    pending = pending_list(run)
    state = getattr(run, "state", None)
    return {
        "readOnly": True,
        "source": getattr(state, "description", ""),
        "groupKeys": keys,
        "groupBy": chosen,
        "order": node_order(cluster.nodes, chosen, reuse[0] if reuse is not None else None),
        "nodes": nodes,
        "gangs": gang_map(run),
        "pending": pending,
        "capacity": capacity.panel(cluster, run.results),
        "queues": queue_panel(session.queues),
        "counts": {
            "nodes": cluster.n,
            "devices": devices,
            "freeDevices": free,
            "pods": len(cluster.pod_node),
            "pending": sum(1 for r in run.results if r.node is None),
        },
        "warnings": list(run.warnings),
    }


def _reused_views(
    run: Any, before: Any, before_nodes: dict[str, Any], dra_holders: dict[DeviceID, tuple[list[str], list[str]]]
) -> list[dict[str, Any]]:
    """Node views of ``run``, taking ``before``'s entry (by name, from ``before_nodes``) for every node whose
    signature is the same in both runs: a what-if changes a few nodes, and building 5,000 views was a fifth of it."""
    old = before.session.cluster
    signatures = before.cache.get("node_signatures")  # today's: computed once, compared by every what-if
    if signatures is None:
        signatures = before.cache["node_signatures"] = {n.name: node_signature(old, i) for i, n in enumerate(old.nodes)}
    cluster = run.session.cluster
    same = reuse.same_nodes(old, cluster, _nic)
    out = []
    for i, node in enumerate(cluster.nodes):
        was = signatures.get(node.name)
        entry = before_nodes.get(node.name)
        if entry is not None and (same[i] or (was is not None and node_signature(cluster, i) == was)):
            out.append(entry)
        else:
            out.append(_node_view(run, i, dra_holders))
    return out


def node_signature(cluster: Any, i: int) -> tuple[Any, ...]:
    """What a node's view is made of, short of its DRA devices: the node (labels, taints, cordon, topology policy),
    its resources, its pods with their devices and NIC, and its split devices' ledger. Equal signatures, equal
    views (callers leave DRA clusters out)."""
    node = cluster.nodes[i]
    resources = tuple(
        (res, int(cluster.allocatable[r, i]), int(cluster.requested[r, i]))
        for r, res in enumerate(cluster.resources)
        if cluster.allocatable[r, i] or cluster.requested[r, i]
    )
    pods = tuple(
        (key, tuple((res, tuple(ids)) for res, ids in pod.devices.items()), _annotations(pod).get(NIC_ANNOTATION))
        for key, pod in cluster.pods_on[i].items()
    )
    part = cluster.devices[i].partition
    ledger = (repr(part.instances), repr(part.used), repr(part.milli)) if part is not None else None
    layout = node.layout
    return (
        node.name,
        tuple(sorted(node.labels.items())),
        tuple(str(t) for t in node.taints),
        bool(node.unschedulable),
        layout.policy if layout is not None else None,
        resources,
        pods,
        ledger,
    )


def _cell_counts(node: dict[str, Any]) -> tuple[int, int]:
    """(devices, free devices) of a node view."""
    cells = [c for group in _cells_of(node) for c in group]
    return len(cells), sum(1 for c in cells if not c.get("holders") and not c.get("claims"))


def _nic(pod: Any) -> str | None:
    return _annotations(pod).get(NIC_ANNOTATION)


def group_keys(nodes: list[Any], topologies: Iterable[Any] = (), today: Any = None) -> list[str]:
    """Label keys to group the map by: the known ones present, then the levels of Kueue's Topology objects (their
    domains, narrowest above the host first: where a gang is kept together), then any other key one value of which
    is shared by more than one node (a key unique per node groups nothing). ``today``: today's run, whose label
    counts a what-if's nodes (the same objects but a few) start from (ui/reuse.py)."""
    values = reuse.label_counts(nodes, today)
    levels = [k for t in topologies for k in reversed(t.levels) if k in values and k not in _UNGROUPED_KEYS]
    known = list(dict.fromkeys([k for k in KNOWN_GROUP_KEYS if k in values] + levels))
    others = sorted(
        k
        for k, counts in values.items()
        if k not in known and k not in _UNGROUPED_KEYS and max(counts.values()) > 1
    )
    return known + others


def _natural(text: str) -> tuple[Any, ...]:
    """``pdu-2`` before ``pdu-10``: digits compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def node_order(nodes: list[Any], group_by: str | None, today: Any = None) -> list[str]:
    """Node names in display order: by the group label's value (nodes without it last), cluster order within.
    ``today``: today's run, whose order a what-if's nodes keep when they have the same names and group values."""
    if not group_by:
        return [n.name for n in nodes]
    return reuse.same_order(nodes, group_by, today, _node_order)


def _node_order(nodes: list[Any], group_by: str) -> list[str]:
    keyed = sorted(
        range(len(nodes)),
        key=lambda i: (group_by not in nodes[i].labels, _natural(nodes[i].labels.get(group_by, "")), i),
    )
    return [nodes[i].name for i in keyed]


def gang_map(run: Any) -> dict[str, str]:
    """Pod key -> gang key for every pod of the run (on a node or in the results) that belongs to a gang."""
    out: dict[str, str] = {}
    cluster = run.session.cluster
    for pods in cluster.pods_on:
        for key, pod in pods.items():
            if (g := gang.group_key(pod)) is not None:
                out[key] = g
    for r in run.results:
        if (g := gang.group_key(r.pod)) is not None:
            out[r.pod.key] = g
    return dict(sorted(out.items()))


def _cells_of(node: dict[str, Any]) -> Iterable[list[dict[str, Any]]]:
    for group in node.get("groups", ()):
        for sw in group["switches"]:
            yield sw.get("devices", [])


# ------------------------------------------------------------------------------------ one node


def node_view(run: Any, i: int) -> dict[str, Any]:
    """NodeView of node ``i`` (cluster order)."""
    return _node_view(run, i, _dra_holders(run.session.cluster))


def _node_view(run: Any, i: int, dra_holders: dict[DeviceID, tuple[list[str], list[str]]]) -> dict[str, Any]:
    cluster = run.session.cluster
    node = cluster.nodes[i]
    devices = cluster.devices[i]
    pods = cluster.pods_on[i]
    holders = _device_holders(devices, pods.values())
    layout = node.layout
    place = _layout_places(layout)

    cells: list[tuple[tuple[int | None, str | None], dict[str, Any]]] = []
    for res, pool in devices.pools.items():
        for ident in pool.ids:
            cell = {"id": ident, "resource": res, "kind": "device", "holders": holders.get((res, ident), [])}
            cells.append((place.get(ident, (None, None)), cell))
    part = devices.partition
    if part is not None:
        res = capacity.PHYSICAL.get(part.mode, part.resource)
        for d, ident in enumerate(part.devices):
            cells.append((place.get(ident, (None, None)), _partition_cell(part, d, res, holders.get((res, ident), []))))
    if cluster.dra is not None:
        for where, cell in _dra_cells(cluster, node.name, dra_holders):
            cells.append((where, cell))

    nics: list[tuple[tuple[int | None, str | None], dict[str, Any]]] = []
    if layout is not None:
        by_nic: dict[str, list[str]] = {}
        for key, pod in pods.items():
            nic = _annotations(pod).get(NIC_ANNOTATION)
            if nic:
                by_nic.setdefault(nic, []).append(key)
        for nic in layout.nics:
            ident = nic.name or nic.address
            held = by_nic.get(ident) or by_nic.get(nic.address) or []
            nics.append(((nic.numa_node, _switch(nic.bridges)), {"id": ident, "holders": held}))

    free: dict[str, int] = {cell["resource"]: 0 for _, cell in cells}  # a 0 is said, not left out
    for _, cell in cells:
        if not cell["holders"] and not cell.get("claims"):
            free[cell["resource"]] = free.get(cell["resource"], 0) + 1
    base = report.node_json(cluster, i)
    entry: dict[str, Any] = {
        "name": node.name,
        "labels": dict(node.labels),
        "unschedulable": bool(node.unschedulable),
        "taints": [str(t) for t in node.taints],
        "allocatable": base["allocatable"],
        "requested": base["requested"],
        "policy": layout.policy if layout is not None else None,
        "groups": _groups(cells, nics),
        "pods": list(pods),
        "free": free,
    }
    entry = _compact(entry)
    entry["etag"] = etag(entry)
    return entry


def etag(entry: dict[str, Any]) -> str:
    """A short hash of a node entry (without its etag): equal entries, equal tags, so a delta sends changed nodes."""
    body = {k: v for k, v in entry.items() if k != "etag"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _compact(entry: dict[str, Any]) -> dict[str, Any]:
    """Drop the NodeView keys that are false, null or empty; cells and NIC entries drop empty holders and null
    fields. ``name``, ``allocatable``, ``requested`` and ``groups`` always stay."""
    keep = {"name", "allocatable", "requested", "groups"}
    out = {k: v for k, v in entry.items() if k in keep or v not in (None, False, [], {})}
    for group in out["groups"]:
        for sw in group["switches"]:
            for item in (*sw.get("devices", ()), *sw.get("nics", ())):
                for k in [k for k, v in item.items() if v is None or v == []]:
                    del item[k]
    return out


def _switch(bridges: tuple[str, ...]) -> str | None:
    """The PCIe switch a device hangs below: the switch's upstream bridge of a sysfs chain (root port, upstream,
    downstream), or the one bridge an annotation names."""
    if len(bridges) >= 2:
        return bridges[-2]
    return bridges[0] if bridges else None


def _layout_places(layout: Any) -> dict[str, tuple[int | None, str | None]]:
    if layout is None:
        return {}
    return {d.address: (d.numa_node, _switch(d.bridges)) for devs in layout.devices.values() for d in devs}


def _groups(
    cells: list[tuple[tuple[int | None, str | None], dict[str, Any]]],
    nics: list[tuple[tuple[int | None, str | None], dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Cells and NICs by NUMA node (ascending, unknown last), then by switch in the order first seen."""
    numas: dict[int | None, dict[str | None, dict[str, list[dict[str, Any]]]]] = {}
    for field, items in (("devices", cells), ("nics", nics)):
        for (numa, switch), item in items:
            sw = numas.setdefault(numa, {}).setdefault(switch, {"devices": [], "nics": []})
            sw[field].append(item)
    if not numas:
        numas[None] = {None: {"devices": [], "nics": []}}
    out = []
    for numa in sorted(numas, key=lambda n: (n is None, n or 0)):
        switches = []
        for switch, content in numas[numa].items():
            sw: dict[str, Any] = {"switch": switch, "devices": content["devices"]}
            if content["nics"]:
                sw["nics"] = content["nics"]
            switches.append(sw)
        out.append({"numa": numa, "switches": switches})
    return out


def _device_id(part: Any, res: str, ident: str) -> str:
    """The physical device an allocation ID names: ``gpu-0:3g.20gb@4``, ``gpu-0::3``, ``gpu-2:milli=250`` and
    ``gpu-1:slices=2-4`` are all on the device before the first colon (devices/partition.py)."""
    if part is not None and part.manages(res):
        return ident.partition(":")[0]
    return ident


def _device_holders(devices: Any, pods: Iterable[Any]) -> dict[tuple[str, str], list[str]]:
    """(cell resource, device id) -> the pods holding it, in the node's pod order (several on a shared device)."""
    part = devices.partition
    physical = capacity.PHYSICAL.get(part.mode, part.resource) if part is not None else None
    out: dict[tuple[str, str], list[str]] = {}
    for pod in pods:
        for res, ids in pod.devices.items():
            split = part is not None and part.manages(res)
            cell_res = physical if split else res
            for ident in ids:
                held = out.setdefault((cell_res, _device_id(part, res, ident) if split else ident), [])
                if pod.key not in held:
                    held.append(pod.key)
    return out


def _partition_cell(part: Any, d: int, res: str, holders: list[str]) -> dict[str, Any]:
    cell: dict[str, Any] = {"id": part.devices[d], "resource": res, "kind": part.mode, "holders": holders}
    if part.mode == "mig":
        slots = sorted(part.instances[d], key=lambda io: io[0].start)
        cell["slots"] = [
            {"start": inst.start, "size": inst.size, "profile": inst.profile, "holder": owner or None}
            for inst, owner in slots
        ]
        cell["slotCount"] = mig.SLICES
        if not holders:  # the ledger's owners are the truth for MIG; the annotation agrees with them
            cell["holders"] = list(dict.fromkeys(o for _, o in slots if o))
    else:
        used = part.milli[d] if part.mode == "milli" else len(part.used[d])
        total = {"milli": partitioning.MILLI, "slices": part.units, "timeslicing": part.replicas}[part.mode]
        cell["share"] = {"used": used, "total": total, "unit": _SHARE_UNIT[part.mode]}
    return cell


# ------------------------------------------------------------------------------------ DRA


def _dra_holders(cluster: Any) -> dict[DeviceID, tuple[list[str], list[str]]]:
    """Per DRA device in use: (the pods its claims are reserved for or in flight to, the claims holding it); one
    pass over the claims, so each node's cells are a lookup."""
    dra = getattr(cluster, "dra", None)
    if dra is None:
        return {}
    out: dict[DeviceID, tuple[list[str], list[str]]] = {}
    for key, results, pods in dra_explain.claim_holders(dra):
        for result in results:
            held, claims = out.setdefault(result.device_id, ([], []))
            held.extend(p for p in pods if p not in held)
            if key not in claims:
                claims.append(key)
    return out


def _dra_cells(
    cluster: Any, node: str, dra_holders: dict[DeviceID, tuple[list[str], list[str]]]
) -> list[tuple[tuple[int | None, str | None], dict[str, Any]]]:
    """The node's DRA devices (its pools' devices it can use) as ``dra`` cells, placed by their NUMA attribute and
    PCIe root (the topology DRA publishes)."""
    out = []
    for s, d in cluster.dra.devices_for_node(node):
        ident = DeviceID(s.driver, s.pool.name, d.name)
        holders, claims = dra_holders.get(ident, ([], []))
        attrs = d.attributes or {}
        numa = next((v for k, v in attrs.items() if k.rsplit("/", 1)[-1] == "numaNode" and isinstance(v, int)), None)
        root = attrs.get(ATTR_PCIE_ROOT)
        cell = {
            "id": d.name,
            "resource": s.driver,
            "kind": "dra",
            "holders": list(holders),
            "driver": s.driver,
            "pool": s.pool.name,
            "claims": list(claims),
        }
        out.append(((numa, str(root) if root is not None else None), cell))
    return out


# ------------------------------------------------------------------------------------ Pending


def _status(r: Any) -> str:
    if r.preempted_by:
        return "Preempted"
    if r.node is not None:
        return "Placed"
    if r.gated is not None:
        return "Gated"
    return "Pending"


def _device_count(requests: dict[str, int], dra_devices: int = 0) -> float | int:
    """Devices a request asks for: whole extended resources, milli shares as the fraction of a device, plus the
    devices its DRA claims request (``dra_devices``, see _claimed_devices)."""
    total: float | int = dra_devices
    for res, amount in requests.items():
        if res == partitioning.MILLI_RESOURCE:
            total += amount / partitioning.MILLI
        elif is_device_resource(res):
            total += amount
    return total


def _claimed_devices(cluster: Any, pod: Any) -> int:
    """Devices a pod's DRA claims request: per claim (its ResourceClaim, or the template it is made from), each
    request's count (an ``exactly`` request's, or the first ``firstAvailable`` alternative's; allocationMode All
    counts one, its size being the pool's). Claims not in the input count nothing."""
    dra = getattr(cluster, "dra", None)
    if dra is None or not (pod.raw.get("spec") or {}).get("resourceClaims"):
        return 0
    total = 0
    for pc in dra_state.pod_resource_claims(pod):
        if pc.resource_claim_name:
            claim = dra.claims.get(f"{pod.namespace}/{pc.resource_claim_name}")
            spec = claim.spec if claim is not None else None
        else:
            template = dra.inputs.templates.get(f"{pod.namespace}/{pc.resource_claim_template_name}")
            spec = template.spec if template is not None else None
        for request in spec.requests if spec is not None else ():
            sub = request.exactly or (request.first_available[0] if request.first_available else None)
            if sub is not None:
                total += sub.count if sub.allocation_mode == ALLOCATION_MODE_EXACT_COUNT else 1
    return total


def _formatted(requests: dict[str, int]) -> dict[str, str]:
    return {res: quantity.format_quantity(res, amount) for res, amount in sorted(requests.items())}


def pending_list(run: Any) -> list[dict[str, Any]]:
    """Every result without a node, a gang's pending members as one entry; largest first (devices, then cpu,
    then key). A single pod's message is exactly ``schedule -o json``'s. Per-node reasons are left out here: at 5,000
    nodes they are 5,000 strings per Pending pod (28 MB for 100 pods), so the page asks for them per pod
    (pod_detail, or explain's verdicts) when one is selected."""
    singles: list[dict[str, Any]] = []
    gangs: dict[str, list[Any]] = {}
    cluster = run.session.cluster
    for r in run.results:
        if r.node is not None:
            continue
        key = gang.group_key(r.pod)
        if key is not None:
            gangs.setdefault(key, []).append(r)
            continue
        pod = r.pod
        singles.append(
            {
                "kind": "pod",
                "key": pod.key,
                "namespace": pod.namespace,
                "name": pod.name,
                "requests": _formatted(pod.requests),
                "devices": _device_count(pod.requests, _claimed_devices(cluster, pod)),
                "priority": pod.priority,
                "message": r.message,
                "status": _status(r),
                "owner": f"{pod.owner_kind}/{pod.owner_name}" if pod.owner_kind else None,
                "_cpu": pod.requests.get(quantity.CPU, 0),
            }
        )
    for key, members in gangs.items():
        first = members[0]
        total: dict[str, int] = {}
        for r in members:
            for res, amount in r.pod.requests.items():
                total[res] = total.get(res, 0) + amount
        namespace, name = gang.key_parts(key)
        singles.append(
            {
                "kind": "gang",
                "key": key,
                "namespace": namespace,
                "name": name,
                "requests": _formatted(total),
                "devices": _device_count(total, sum(_claimed_devices(cluster, r.pod) for r in members)),
                "priority": first.pod.priority,
                "message": first.message,
                "status": _status(first),
                "members": [
                    {
                        "namespace": r.pod.namespace,
                        "name": r.pod.name,
                        "key": r.pod.key,
                        "message": r.message,
                        "status": _status(r),
                    }
                    for r in members
                ],
                "_cpu": total.get(quantity.CPU, 0),
            }
        )
    singles.sort(key=lambda e: (-e["devices"], -e["_cpu"], e["key"]))
    for e in singles:
        del e["_cpu"]
        if e.get("owner", "") is None:
            del e["owner"]  # a bare pod: no key rather than a null per pod
    return singles


# ------------------------------------------------------------------------------------ one pod


def _annotations(pod: Any) -> dict[str, str]:
    """The pod's annotations after the run (the bind writes devices, NUMA and NIC into pod.raw)."""
    raw = (pod.raw.get("metadata") or {}).get("annotations")
    return dict(raw) if isinstance(raw, dict) else dict(pod.annotations)


def pod_detail(run: Any, key: str) -> dict[str, Any] | None:
    """One pod as the side panel shows it; None when the run has no such pod. Phase: Bound (nodeName in the
    input), Placed (by this run), Pending, Gated or Preempted."""
    cluster = run.session.cluster
    result = None
    for r in run.results:
        if r.pod.key == key:
            result = r  # the last result of a pod is its outcome
    node_index = cluster.pod_node.get(key)
    pod = None
    if result is not None:
        pod = result.pod
    elif node_index is not None:
        pod = cluster.pods_on[node_index][key]
    else:
        pod = next((p for p in run.session.inputs.pods if p.key == key), None)
        if pod is None:
            return None
    if result is not None:
        phase = _status(result)
        node = result.node
    elif node_index is not None:
        phase, node = "Bound", cluster.nodes[node_index].name
    else:
        phase, node = "Pending", None
    annotations = _annotations(pod)
    alignment = {}
    if node is not None:
        if annotations.get(NUMA_ANNOTATION):
            alignment["numaNodes"] = annotations[NUMA_ANNOTATION]
        if annotations.get(NIC_ANNOTATION):
            alignment["nic"] = annotations[NIC_ANNOTATION]
    dra = cluster.dra
    has_claims = bool((pod.raw.get("spec") or {}).get("resourceClaims"))
    claims = dra.pod_claim_results(pod) if dra is not None and (has_claims or dra.extended_claim_key(pod)) else []
    out: dict[str, Any] = {
        "namespace": pod.namespace,
        "name": pod.name,
        "key": pod.key,
        "node": node,
        "phase": phase,
        "priority": pod.priority,
        "requests": _formatted(pod.requests),
        "devices": {res: list(ids) for res, ids in pod.devices.items()} if node is not None else {},
        "claims": claims,
        "alignment": alignment,
        "gang": gang.group_key(pod),
        "owner": f"{pod.owner_kind}/{pod.owner_name}" if pod.owner_kind else None,
        "message": result.message if result is not None else "",
        "labels": dict(pod.labels),
        "annotations": annotations,
    }
    if result is not None and result.preempted_by:
        out["preemptedBy"] = result.preempted_by
    if result is not None and result.preempted:
        out["preempted"] = [v.key for v in result.preempted]
    return out
