"""A node's topology as the scheduler sees it: NUMA zones, exclusive CPUs per zone, and for each device its
NUMA node and PCIe place, plus the node's Topology Manager policy and scope.

It comes from standard objects — NodeResourceTopology (topology.node.k8s.io/v1alpha2) for zones and policy,
ResourceSlices (resource.k8s.io/v1) for per-device attributes — or from the compact ``accelsched.io/topology``
node annotation for hand-written examples:

    accelsched.io/topology: |
      policy: single-numa-node        # none | best-effort | restricted | single-numa-node
      scope: pod                      # container | pod
      numa: {0: {cpus: 32}, 1: {cpus: 32}}
      devices:
        qualcomm.com/ai-accelerator: [qaic-0@0/sw0, qaic-1@0/sw0, qaic-2@1/sw1, qaic-3@1/sw1]
      nics: [nic0@0/sw0, nic1@1/sw2]

``ID@NUMA/SWITCH`` (switch optional) is shorthand for ``{id: ID, numa: NUMA, switch: SWITCH}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelsched.api import limits
from accelsched.api.annotations import yaml_annotation
from accelsched.cluster.devices import default_device_ids
from accelsched.errors import Where
from accelsched.topology.model import TOPOLOGY_POLICIES, TOPOLOGY_SCOPES, PciDevice

TOPOLOGY_ANNOTATION = "accelsched.io/topology"
POLICY_LABEL = "accelsched.io/topology-manager-policy"
SCOPE_LABEL = "accelsched.io/topology-manager-scope"
POLICIES = TOPOLOGY_POLICIES
SCOPES = TOPOLOGY_SCOPES
# ResourceSlice device attributes accelsched reads (the pcieRoot one is Kubernetes' standard attribute).
ATTR_NUMA = "numaNode"
ATTR_PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
ATTR_SWITCH = "accelsched.io/pcieSwitch"
ATTR_PATH = "accelsched.io/pciePath"  # the bridge chain from the root port, "/"-joined, when discovery knows it
ATTR_RESOURCE = "accelsched.io/resource"
ATTR_KIND = "accelsched.io/kind"
TOPOLOGY_DRIVER = "accelsched.io"  # the driver of the slices topology.render writes and apply_resource_slice reads
# NodeResourceTopology's older policy names (topologyPolicies) mapped to the kubelet's.
_NRT_POLICIES = {
    "None": ("none", "container"),
    "BestEffort": ("best-effort", "container"),
    "Restricted": ("restricted", "container"),
    "SingleNUMANodeContainerLevel": ("single-numa-node", "container"),
    "SingleNUMANodePodLevel": ("single-numa-node", "pod"),
}


@dataclass
class NodeLayout:
    policy: str = "none"
    scope: str = "container"
    cpus: dict[int, int] = field(default_factory=dict)  # exclusive CPUs per NUMA zone
    devices: dict[str, list[PciDevice]] = field(default_factory=dict)
    nics: list[PciDevice] = field(default_factory=list)

    @property
    def numa_ids(self) -> list[int]:
        ids = set(self.cpus)
        for devs in (*self.devices.values(), self.nics):
            ids.update(d.numa_node for d in devs if d.numa_node is not None)
        return sorted(ids)


def _device(where: Where, path: str, item: Any, kind: str) -> PciDevice:
    if isinstance(item, str):
        ident, _, place = item.partition("@")
        numa_text, _, switch = place.partition("/")
        try:
            numa = int(numa_text) if numa_text else None
        except ValueError:
            raise where.error(path, f"{item!r}: expected ID@NUMA/SWITCH, e.g. qaic-0@0/sw0") from None
        item = {"id": ident, "numa": numa, "switch": switch or None}
    if not isinstance(item, Mapping) or not item.get("id"):
        raise where.error(path, "each device needs an id (ID@NUMA/SWITCH or {id, numa, switch, root})")
    numa = item.get("numa")
    if numa is not None and (not isinstance(numa, int) or isinstance(numa, bool) or numa < 0):
        raise where.error(f"{path}.numa", f"must be a NUMA node number, got {numa!r}")
    return make_device(str(item["id"]), numa, item.get("switch"), item.get("root"), kind, item.get("nvlinks") or {})


def make_device(
    ident: str,
    numa: int | None,
    switch: str | None,
    root: str | None,
    kind: str,
    nvlinks: Mapping[str, int] | None = None,
    bridges: tuple[str, ...] | None = None,
) -> PciDevice:
    """A device known by NUMA node and PCIe switch/root (or its full bridge chain): enough for link classes."""
    return PciDevice(
        address=ident,
        vendor=0,
        device=0,
        pci_class=0,
        numa_node=numa,
        bridges=bridges if bridges is not None else ((str(switch),) if switch else ()),
        root=str(root) if root else f"numa{numa}-root",
        kind=kind,
        name=ident,
        nvlinks=dict(nvlinks or {}),
    )


def _check_policy(where: Where, path: str, policy: Any, scope: Any) -> tuple[str, str]:
    if policy not in POLICIES:
        raise where.error(f"{path}policy", f"unknown Topology Manager policy {policy!r} ({', '.join(POLICIES)})")
    if scope not in SCOPES:
        raise where.error(f"{path}scope", f"unknown Topology Manager scope {scope!r} (container, pod)")
    return policy, scope


def from_annotation(where: Where, text: str) -> NodeLayout:
    path = f"metadata.annotations[{TOPOLOGY_ANNOTATION}]"
    fields = {"policy", "scope", "numa", "devices", "nics"}
    doc = yaml_annotation(where, TOPOLOGY_ANNOTATION, text, fields, "policy, scope, numa, devices, nics")
    policy, scope = _check_policy(where, f"{path}.", doc.get("policy", "none"), doc.get("scope", "container"))
    layout = NodeLayout(policy, scope)
    numa_zones = doc.get("numa") or {}
    if not isinstance(numa_zones, Mapping):
        raise where.error(f"{path}.numa", "must map a NUMA node number to {cpus: N}")
    for zone, spec in numa_zones.items():
        # Read as manifests are (api/reader.py), a YAML key 0 is the JSON key "0".
        if isinstance(zone, str) and zone.isascii() and zone.isdigit() and len(zone) < 6:
            zone = int(zone)
        cpus = (spec or {}).get("cpus", 0) if isinstance(spec, Mapping) else spec
        if not isinstance(zone, int) or not isinstance(cpus, int) or cpus < 0:
            raise where.error(f"{path}.numa.{zone}", "must map a NUMA node number to {cpus: N}")
        layout.cpus[zone] = cpus
    devices = doc.get("devices") or {}
    if not isinstance(devices, Mapping):
        raise where.error(f"{path}.devices", "must map a resource name to a list of devices")
    for res, items in devices.items():
        if not isinstance(items, list):
            raise where.error(f"{path}.devices[{res}]", "must be a list of devices")
        layout.devices[str(res)] = [
            _device(where, f"{path}.devices[{res}][{i}]", it, "accelerator") for i, it in enumerate(items)
        ]
    nics = doc.get("nics") or []
    if not isinstance(nics, list):
        raise where.error(f"{path}.nics", "must be a list of NICs")
    layout.nics = [_device(where, f"{path}.nics[{i}]", it, "nic") for i, it in enumerate(nics)]
    return layout


def apply_labels(node: Any, where: Where) -> None:
    """Node labels may set the Topology Manager policy/scope (what the kubelet was started with)."""
    policy, scope = node.labels.get(POLICY_LABEL), node.labels.get(SCOPE_LABEL)
    if policy is None and scope is None:
        return
    layout = node.layout or NodeLayout()
    layout.policy, layout.scope = _check_policy(
        where, "metadata.labels.", policy or layout.policy, scope or layout.scope
    )
    node.layout = layout


def finish(node: Any, where: Where) -> None:
    """Tie the layout's devices to the node's device IDs: named devices become the node's IDs; devices known
    only by count (from NodeResourceTopology zones) take the node's IDs in order."""
    layout = node.layout
    if layout is None:
        return
    for res, devices in layout.devices.items():
        count = node.allocatable.get(res, 0)
        if all(d.address for d in devices):
            ids = [d.address for d in devices]
            if res in node.device_ids and set(node.device_ids[res][:count]) - set(ids):
                raise where.error(TOPOLOGY_ANNOTATION, f"lists {res} devices that differ from the node's device IDs")
            node.device_ids.setdefault(res, ids)
        if len(devices) < count:
            raise where.error(
                f"metadata.annotations[{TOPOLOGY_ANNOTATION}]",
                f"places {len(devices)} devices of {res} but the node advertises {count}",
            )
        if not all(d.address for d in devices):
            ids = node.device_ids.get(res) or default_device_ids(res, len(devices))
            layout.devices[res] = [
                make_device(ident, d.numa_node, d.bridges[0] if d.bridges else None, d.root, d.kind)
                for ident, d in zip(ids, devices, strict=False)
            ]


def _items(where: Where, value: Any, path: str) -> list[Mapping[str, Any]]:
    """A list of objects (zones, resources, attributes, devices): anything else is bad input, not a traceback."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise where.error(path, "must be a list of objects")
    return value


def _text(where: Where, value: Any, path: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise where.error(path, f"must be a string, got {type(value).__name__}")
    return value


def apply_nrt(layout: NodeLayout, where: Where, doc: Mapping[str, Any], device_resources: set[str]) -> None:
    """Zones, per-zone CPUs and policy from a NodeResourceTopology; per-zone device counts when no device list."""
    attrs = {
        _text(where, a.get("name"), f"attributes[{i}].name"): _text(where, a.get("value"), f"attributes[{i}].value")
        for i, a in enumerate(_items(where, doc.get("attributes"), "attributes"))
    }
    policy, scope = layout.policy, layout.scope
    old_policies = doc.get("topologyPolicies") or []
    if not isinstance(old_policies, list):
        raise where.error("topologyPolicies", "must be a list of strings")
    for j, old in enumerate(old_policies):
        policy, scope = _NRT_POLICIES.get(_text(where, old, f"topologyPolicies[{j}]"), (policy, scope))
    policy = attrs.get("topologyManagerPolicy", policy)
    scope = attrs.get("topologyManagerScope", scope)
    layout.policy, layout.scope = _check_policy(where, "attributes.", policy, scope)
    counts: dict[str, list[tuple[int, int]]] = {}
    for i, zone in enumerate(_items(where, doc.get("zones"), "zones")):
        name = _text(where, zone.get("name"), f"zones[{i}].name")
        if _text(where, zone.get("type"), f"zones[{i}].type", "Node") != "Node":
            continue
        try:
            numa = int(name.rsplit("-", 1)[-1])
        except ValueError:
            raise where.error(f"zones[{i}].name", f"{name!r}: expected node-<NUMA id>") from None
        for j, res in enumerate(_items(where, zone.get("resources"), f"zones[{i}].resources")):
            rname = _text(where, res.get("name"), f"zones[{i}].resources[{j}].name")
            amount = res.get("allocatable", res.get("capacity", 0))
            text = str(amount)
            if isinstance(amount, bool) or not isinstance(amount, (int, str)) or not text.isdigit() or len(text) > 18:
                raise where.error(f"zones[{i}].resources[{rname}]", f"{text[:40]!r} is not a whole number") from None
            amount = int(text)
            if rname == "cpu":
                layout.cpus[numa] = amount
            elif rname in device_resources:
                counts.setdefault(rname, []).append((numa, amount))
    for res, zones in counts.items():
        problem = limits.exceeded(f"{res} devices", sum(n for _, n in zones), "devices")
        if problem:
            raise where.error("zones", problem)
        if res not in layout.devices:
            layout.devices[res] = [
                make_device("", numa, None, None, "accelerator") for numa, n in zones for _ in range(n)
            ]


def _attribute(where: Where, value: Any, path: str) -> Any:
    """A DeviceAttribute ({int|bool|string|version: value}, or the bare value): a scalar or bad input."""
    if isinstance(value, Mapping):
        value = next(iter(value.values()), None)
    if value is not None and not isinstance(value, (str, int)):
        raise where.error(path, f"must hold a string, integer or boolean, got {type(value).__name__}")
    return value


def is_topology_slice(doc: Mapping[str, Any]) -> bool:
    """A ResourceSlice accelsched publishes for the device-plugin layout (topology.render.to_resource_slice): its
    driver is TOPOLOGY_DRIVER. Other drivers' slices are DRA devices only (dra/objects.py)."""
    spec = doc.get("spec")
    return isinstance(spec, Mapping) and spec.get("driver") == TOPOLOGY_DRIVER


def apply_resource_slice(layout: NodeLayout, where: Where, doc: Mapping[str, Any]) -> None:
    """Devices with numaNode / pcieRoot / pcieSwitch attributes; accelsched.io/resource names the resource."""
    spec = doc.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise where.error("spec", "must be an object")
    for i, dev in enumerate(_items(where, spec.get("devices"), "spec.devices")):
        raw = dev.get("attributes") or {}
        if not isinstance(raw, Mapping):
            raise where.error(f"spec.devices[{i}].attributes", "must map attribute names to values")
        attrs = {k: _attribute(where, v, f"spec.devices[{i}].attributes[{k}]") for k, v in raw.items()}
        p = f"spec.devices[{i}].attributes"
        kind = _text(where, attrs.get(ATTR_KIND), f"{p}[{ATTR_KIND}]", "accelerator")
        res = _text(where, attrs.get(ATTR_RESOURCE), f"{p}[{ATTR_RESOURCE}]")
        if kind != "nic" and not res:
            raise where.error(p, f"needs {ATTR_RESOURCE} (the extended resource it backs)")
        numa = attrs.get(ATTR_NUMA)
        if numa is not None and (isinstance(numa, bool) or not isinstance(numa, int) or numa < 0):
            raise where.error(f"{p}[{ATTR_NUMA}]", f"must be a NUMA node number, got {numa!r}")
        path = _text(where, attrs.get(ATTR_PATH), f"{p}[{ATTR_PATH}]")
        device = make_device(
            _text(where, dev.get("name"), f"spec.devices[{i}].name"),
            numa,
            _text(where, attrs.get(ATTR_SWITCH), f"{p}[{ATTR_SWITCH}]") or None,
            _text(where, attrs.get(ATTR_PCIE_ROOT), f"{p}[{ATTR_PCIE_ROOT}]") or None,
            kind,
            bridges=tuple(path.split("/")) if path else None,
        )
        if kind == "nic":
            layout.nics.append(device)
        else:
            layout.devices.setdefault(res, []).append(device)
