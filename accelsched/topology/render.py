"""Ways to show a NodeTopology: an ``nvidia-smi topo -m`` matrix, a NUMA table, a NodeResourceTopology object, JSON.

The matrix reuses nvidia-smi's vocabulary and legend so people can compare it with what they already know; the NRT
object is what node-feature-discovery's topology-updater publishes, so the scheduler-plugins NodeResourceTopologyMatch
plugin (and accelsched) can read either.
"""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from accelsched.errors import InputError
from accelsched.topology.layout import ATTR_KIND, ATTR_NUMA, ATTR_PATH, ATTR_PCIE_ROOT, ATTR_RESOURCE, ATTR_SWITCH
from accelsched.topology.model import (
    LINK_LEGEND,
    TOPOLOGY_POLICIES,
    TOPOLOGY_SCOPES,
    VENDOR_AMD,
    VENDOR_NVIDIA,
    VENDOR_QUALCOMM,
    NodeTopology,
    PciDevice,
    format_cpulist,
)

# Default extended-resource names per vendor, as their device plugins (and this project, for Qualcomm) advertise them.
RESOURCE_BY_VENDOR = {
    VENDOR_NVIDIA: "nvidia.com/gpu",
    VENDOR_AMD: "amd.com/gpu",
    VENDOR_QUALCOMM: "qualcomm.com/ai-accelerator",
}
# The legacy v1alpha2 ``topologyPolicies`` value for (policy, scope), as node-feature-discovery writes it.
_LEGACY_POLICY = {"best-effort": "BestEffort", "restricted": "Restricted", "single-numa-node": "SingleNUMANode"}


def labels(topo: NodeTopology) -> dict[str, str]:
    """Row names by address: GPU<i> for display-class accelerators, ACC<i> for others (e.g. 0x1200), NIC<i>."""
    out: dict[str, str] = {}
    counters = {"GPU": 0, "ACC": 0, "NIC": 0}
    for dev in [*topo.accelerators(), *topo.nics()]:
        prefix = "NIC" if dev.kind == "nic" else ("GPU" if dev.class_code >> 8 == 0x03 else "ACC")
        out[dev.address] = f"{prefix}{counters[prefix]}"
        counters[prefix] += 1
    return out


def _affinity(topo: NodeTopology, dev: PciDevice) -> tuple[str, str]:
    if dev.numa_node is None:
        return "N/A", "N/A"
    node = topo.numa_node(dev.numa_node)
    return (format_cpulist(node.cpus) if node else "N/A"), str(dev.numa_node)


def matrix(topo: NodeTopology) -> str:
    """The ``nvidia-smi topo -m`` table for accelerators and NICs, then the link legend and the NIC legend."""
    names = labels(topo)
    devices = [*topo.accelerators(), *topo.nics()]
    if not devices:
        return "No accelerators or NICs found.\n"
    header = ["", *names.values(), "CPU Affinity", "NUMA Affinity"]
    rows = [header]
    for a in devices:
        cells = [topo.link(a.address, b.address) for b in devices]
        rows.append([names[a.address], *cells, *_affinity(topo, a)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += ["", "Legend:", ""]
    lines += [f"  {key:<4} = {text}" for key, text in LINK_LEGEND.items()]
    nics = topo.nics()
    if nics:
        lines += ["", "NIC Legend:", ""]
        lines += [f"  {names[n.address]}: {n.name or n.address}" for n in nics]
    return "\n".join(lines) + "\n"


def numa_table(topo: NodeTopology) -> Table:
    """One row per NUMA node: CPUs, memory, distances, and which accelerators and NICs are local to it."""
    names = labels(topo)
    table = Table(title="NUMA nodes")
    for column in ("NUMA", "CPUs", "#CPUs", "Memory", "Distances", "Accelerators", "NICs"):
        table.add_column(column, justify="right" if column in ("#CPUs", "Memory") else "left")
    devices = [*topo.accelerators(), *topo.nics()]

    def local(node_id: int | None, kind: str) -> str:
        return " ".join(names[d.address] for d in devices if d.numa_node == node_id and d.kind == kind) or "-"

    for node in topo.numa:
        memory = "?" if node.memory_bytes is None else f"{node.memory_bytes / 2**30:.1f} GiB"
        table.add_row(
            str(node.id),
            format_cpulist(node.cpus) or "-",
            str(len(node.cpus)),
            memory,
            " ".join(map(str, node.distances)) or "?",
            local(node.id, "accelerator"),
            local(node.id, "nic"),
        )
    if any(d.numa_node is None for d in devices):
        table.add_row("unknown", "", "", "", "", local(None, "accelerator"), local(None, "nic"))
    return table


def _resource(name: str, amount: int) -> dict[str, Any]:
    # Quantities serialize as strings; sysfs knows nothing of kubelet reservations, so all three are the capacity.
    return {"name": name, "capacity": str(amount), "allocatable": str(amount), "available": str(amount)}


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # as Go's %q for printable text


def check_topology_manager(policy: str, scope: str) -> None:
    """The kubelet's checks of topologyManagerPolicy and topologyManagerScope (pkg/kubelet/apis/config/validation,
    worded as there): InputError naming the flag."""
    if policy not in TOPOLOGY_POLICIES:
        choices = " ".join(map(_go_quote, TOPOLOGY_POLICIES))
        raise InputError(
            f"invalid configuration: topologyManagerPolicy (--topology-manager-policy) {_go_quote(policy[:80])} must"
            f" be one of: [{choices}]",
            field="--policy",
        )
    if scope not in TOPOLOGY_SCOPES:
        choices = ", or ".join(map(_go_quote, TOPOLOGY_SCOPES))
        raise InputError(
            f"invalid configuration: topologyManagerScope (--topology-manager-scope) {_go_quote(scope[:80])} must be"
            f" one of: {choices}",
            field="--scope",
        )


def to_nrt(
    topo: NodeTopology,
    node_name: str,
    resource_name: str | None = None,
    policy: str = "none",
    scope: str = "container",
) -> dict[str, Any]:
    """A ``topology.node.k8s.io/v1alpha2`` NodeResourceTopology: one zone per NUMA node with CPU, memory and devices.

    ``resource_name`` counts every accelerator under one name; without it each is counted under its vendor's usual
    name (``nvidia.com/gpu``...). Accelerators whose NUMA node is unknown belong to no zone and are left out.
    """
    check_topology_manager(policy, scope)
    legacy = "None" if policy == "none" else f"{_LEGACY_POLICY[policy]}{scope.capitalize()}Level"
    zones = []
    for node in topo.numa:
        counts: dict[str, int] = {}
        for dev in topo.accelerators():
            if dev.numa_node == node.id:
                name = resource_name or RESOURCE_BY_VENDOR.get(dev.vendor, f"accelsched.io/pci-{dev.vendor:04x}")
                counts[name] = counts.get(name, 0) + 1
        resources = [_resource("cpu", len(node.cpus))]
        if node.memory_bytes is not None:
            resources.append(_resource("memory", node.memory_bytes))
        resources += [_resource(name, n) for name, n in sorted(counts.items())]
        costs = [
            {"name": f"node-{other.id}", "value": node.distances[i]}
            for i, other in enumerate(topo.numa)
            if i < len(node.distances)
        ]
        zones.append({"name": f"node-{node.id}", "type": "Node", "costs": costs, "resources": resources})
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node_name},
        "topologyPolicies": [legacy],
        "attributes": [
            {"name": "topologyManagerPolicy", "value": policy},
            {"name": "topologyManagerScope", "value": scope},
        ],
        "zones": zones,
    }


def to_json(topo: NodeTopology) -> dict[str, Any]:
    """``to_dict`` plus what a reader would otherwise recompute: row labels and the link matrix."""
    names = labels(topo)
    out = topo.to_dict()
    out["labels"] = names
    out["links"] = {names[a]: {names[b]: topo.link(a, b) for b in names} for a in names}
    return out


def to_resource_slice(topo: NodeTopology, node_name: str, resource_name: str | None = None) -> dict[str, Any]:
    """A ``resource.k8s.io/v1`` ResourceSlice listing the node's accelerators and NICs with the attributes the
    scheduler reads back (topology.layout): NUMA node, PCIe root, PCIe switch, and the extended resource backed.

    A device's switch is the bridge above its downstream port (the switch's upstream port), so two devices on one
    switch share it; a device straight on a root port has none.
    """
    devices = []
    for dev in [*topo.accelerators(), *topo.nics()]:
        attrs: dict[str, Any] = {
            ATTR_KIND: {"string": dev.kind},
            ATTR_PCIE_ROOT: {"string": dev.root},
            "resource.kubernetes.io/pciBusID": {"string": dev.address},
        }
        if dev.numa_node is not None:
            attrs[ATTR_NUMA] = {"int": dev.numa_node}
        if len(dev.bridges) >= 2:
            attrs[ATTR_SWITCH] = {"string": dev.bridges[-2]}
        if dev.bridges:
            attrs[ATTR_PATH] = {"string": "/".join(dev.bridges)}
        if dev.kind == "accelerator":
            name = resource_name or RESOURCE_BY_VENDOR.get(dev.vendor, f"accelsched.io/pci-{dev.vendor:04x}")
            attrs[ATTR_RESOURCE] = {"string": name}
        devices.append({"name": _dns_label(dev.name or dev.address), "attributes": attrs})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-accelsched"},
        "spec": {
            "driver": "accelsched.io",
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _dns_label(text: str) -> str:
    """Device names must be DNS labels: ``0000:3b:00.0`` becomes ``0000-3b-00-0``."""
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")[:63]
