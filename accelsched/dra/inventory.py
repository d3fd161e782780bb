"""This node's devices for DRA, and the ResourceSlices (``resource.k8s.io/v1`` API dicts) that publish them.

Two sources, read afresh on every scan so a device that disappears (hot-unplug, a fake device marked missing) drops
out of the next slices and comes back when it reappears:

- the sysfs topology (accelsched.topology.sysfs.discover): accelerators and NICs with the standard
  ``resource.kubernetes.io/pcieRoot`` and ``resource.kubernetes.io/pciBusID`` attributes, ``numaNode``, the PCIe
  switch and path attributes the scheduler's layout reads (topology.layout), and PCI vendor and device IDs;
- a fake inventory (``FakeSpec``, a flag or a YAML file): ``gpu-<i>`` devices shaped like dra-example-driver's
  gpu.example.com GPUs (index, uuid, model, driverVersion, memory capacity), spread over NUMA nodes with one PCIe
  root each, optionally with fake NICs beside them.

MIG-capable GPUs (a known A100/H100 PCI device ID, or a fake ``migModel``) become partitionable devices (KEP 4815,
beta in 1.36): a counter set per physical GPU with ``memory``, ``compute-slices`` and one ``memory-slice-<i>``
counter per memory slice, and besides the full GPU one device per MIG profile and start slot
(accelsched.devices.mig's tables) consuming the memory slices it covers and its compute slices. Two placements that
share a memory slice, or that need more than 7 compute slices together, would overdraw a counter, so the allocator
can never hand out both (a 3g.20gb@0 and a 4g.20gb@0 on one A100-40GB), while 3g.20gb@4 beside 4g.20gb@0 fits, as on
the hardware. The MIG tables carry no SM or engine counts, so those counters are not published.

Since 1.35 a slice holds devices or sharedCounters, never both: the counter sets go in their own slices (at most 8
sets each) and devices in others (at most 64 per slice when any consumes counters, else 128), all in one pool named
after the node.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelsched.devices import mig
from accelsched.errors import InputError
from accelsched.topology.layout import ATTR_KIND, ATTR_NUMA, ATTR_PATH, ATTR_PCIE_ROOT, ATTR_SWITCH
from accelsched.topology.model import VENDOR_AMD, VENDOR_NVIDIA, PciDevice
from accelsched.topology.sysfs import discover

API_VERSION = "resource.k8s.io/v1"
ATTR_PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
KIND_ACCELERATOR, KIND_NIC, KIND_MIG = "accelerator", "nic", "mig"
MAX_DEVICES = 128  # resource.k8s.io/v1 ResourceSliceMaxDevices
MAX_DEVICES_WITH_COUNTERS = 64  # ResourceSliceMaxDevicesWithAdvancedFeatures
MAX_COUNTER_SETS = 8  # ResourceSliceMaxCounterSets
GI = 1024**3

# NVIDIA PCI device IDs of the MIG-capable GPUs accelsched.devices.mig has tables for (pci.ids).
MIG_MODEL_BY_PCI_ID = {
    0x20B0: "A100-40GB",  # A100 SXM4 40GB
    0x20F1: "A100-40GB",  # A100 PCIe 40GB
    0x20B2: "A100-80GB",  # A100 SXM4 80GB
    0x20B5: "A100-80GB",  # A100 PCIe 80GB
    0x2330: "H100-80GB",  # H100 SXM5 80GB
    0x2331: "H100-80GB",  # H100 PCIe
}
MODEL_MEMORY_GI = {"A100-40GB": 40, "A100-80GB": 80, "H100-80GB": 80}


@dataclass(frozen=True)
class NodeDevice:
    """One device in this node's pool: what the slice says about it and what Prepare needs to hand it out."""

    name: str  # a DNS label, unique in the pool
    kind: str  # accelerator | nic | mig
    attributes: Mapping[str, Any]  # API form: {"numaNode": {"int": 0}, ...}
    capacity: Mapping[str, Any] = field(default_factory=dict)  # API form: {"memory": {"value": "80Gi"}}
    consumes_counters: tuple[Mapping[str, Any], ...] = ()  # API form
    pci_address: str = ""
    parent: str = ""  # a MIG device's GPU
    device_nodes: tuple[str, ...] = ()  # /dev paths the container needs

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "attributes": dict(self.attributes)}
        if self.capacity:
            out["capacity"] = dict(self.capacity)
        if self.consumes_counters:
            out["consumesCounters"] = [dict(c) for c in self.consumes_counters]
        return out


@dataclass(frozen=True)
class NodeInventory:
    devices: tuple[NodeDevice, ...]
    counter_sets: tuple[Mapping[str, Any], ...] = ()  # API form: {"name": ..., "counters": {...}}

    def by_name(self) -> dict[str, NodeDevice]:
        return {d.name: d for d in self.devices}


# ---------------------------------------------------------------------------------------------- MIG


def counter_set_name(gpu: str) -> str:
    return f"{gpu}-counters"


def _gi(n: int) -> dict[str, str]:
    return {"value": f"{n}Gi"}


def mig_devices(gpu: NodeDevice, model: mig.Model) -> tuple[Mapping[str, Any], list[NodeDevice]]:
    """The counter set of one physical GPU and one device per MIG profile placement on it, each with the GPU's
    placement attributes (so a matchAttribute on pcieRoot pairs a MIG device with a NIC as it would the GPU)."""
    slice_gi = MODEL_MEMORY_GI[model.name] // mig.SLICES
    counters = {"memory": _gi(slice_gi * mig.SLICES), "compute-slices": {"value": str(mig.COMPUTE_SLICES)}}
    counters.update({f"memory-slice-{i}": {"value": "1"} for i in range(mig.SLICES)})
    placement = {k: v for k, v in gpu.attributes.items() if k in _PLACEMENT_ATTRS}
    devices = []
    for profile in model.profiles.values():
        for start in profile.starts:
            used = {"memory": _gi(slice_gi * profile.size), "compute-slices": {"value": str(profile.compute)}}
            used.update({f"memory-slice-{i}": {"value": "1"} for i in range(start, start + profile.size)})
            devices.append(
                NodeDevice(
                    name=f"{gpu.name}-mig-{profile.name.replace('.', '-')}-{start}",
                    kind=KIND_MIG,
                    attributes={
                        **placement,
                        ATTR_KIND: {"string": KIND_MIG},
                        "profile": {"string": profile.name},
                        "parent": {"string": gpu.name},
                        "memorySliceStart": {"int": start},
                        "model": {"string": model.name},
                    },
                    capacity={
                        "memory": _gi(slice_gi * profile.size),
                        "computeSlices": {"value": str(profile.compute)},
                    },
                    consumes_counters=({"counterSet": counter_set_name(gpu.name), "counters": used},),
                    pci_address=gpu.pci_address,
                    parent=gpu.name,
                    device_nodes=gpu.device_nodes,
                )
            )
    return {"name": counter_set_name(gpu.name), "counters": counters}, devices


def full_consumption(counter_set: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """The whole GPU draws every counter of its set, so it excludes every MIG placement and they exclude it."""
    return ({"counterSet": counter_set["name"], "counters": dict(counter_set["counters"])},)


def _with_mig(gpu: NodeDevice, model: mig.Model | None) -> tuple[list[NodeDevice], list[Mapping[str, Any]]]:
    if model is None:
        return [gpu], []
    counter_set, parts = mig_devices(gpu, model)
    whole = NodeDevice(
        gpu.name,
        gpu.kind,
        {**gpu.attributes, "model": {"string": model.name}},
        {**gpu.capacity, "memory": _gi(MODEL_MEMORY_GI[model.name])},
        full_consumption(counter_set),
        gpu.pci_address,
        device_nodes=gpu.device_nodes,
    )
    return [whole, *parts], [counter_set]


# What a MIG device shares with its GPU: where it sits. Not pciBusID, which names one PCI function (the GPU's).
_PLACEMENT_ATTRS = frozenset({ATTR_PCIE_ROOT, ATTR_NUMA, ATTR_SWITCH, ATTR_PATH})


# ---------------------------------------------------------------------------------------------- sysfs


def _dns_label(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")[:63]


def _device_nodes(root: Path, address: str) -> tuple[str, ...]:
    from accelsched.deviceplugin.sources import sysfs_device_nodes

    nodes = sysfs_device_nodes(root / "sys" / "bus" / "pci" / "devices" / address)
    paths = {"accel": "/dev/accel/accel{}", "render": "/dev/dri/renderD{}", "card": "/dev/dri/card{}"}
    return tuple(paths[k].format(v) for k, v in sorted(nodes.items()))


def _placement(dev: PciDevice) -> dict[str, Any]:
    attrs: dict[str, Any] = {ATTR_PCIE_ROOT: {"string": dev.root}, ATTR_PCI_BUS_ID: {"string": dev.address}}
    if dev.numa_node is not None:
        attrs[ATTR_NUMA] = {"int": dev.numa_node}
    if len(dev.bridges) >= 2:  # the switch's upstream port, shared by the devices below one switch (as render.py)
        attrs[ATTR_SWITCH] = {"string": dev.bridges[-2]}
    if dev.bridges:
        attrs[ATTR_PATH] = {"string": "/".join(dev.bridges)}
    return attrs


def from_sysfs(root: str | Path = "/", mig_enabled: bool = True, vendors: Sequence[int] = ()) -> NodeInventory:
    """The accelerators and NICs under ``root``/sys (``vendors``: only accelerators of these PCI vendors)."""
    topo = discover(root)
    devices: list[NodeDevice] = []
    counter_sets: list[Mapping[str, Any]] = []
    for dev in topo.accelerators():
        if vendors and dev.vendor not in vendors:
            continue
        gpu_like = dev.vendor in (VENDOR_NVIDIA, VENDOR_AMD)
        attrs = {
            ATTR_KIND: {"string": KIND_ACCELERATOR},
            **_placement(dev),
            "vendor": {"string": f"0x{dev.vendor:04x}"},
            "deviceID": {"string": f"0x{dev.device:04x}"},
        }
        base = NodeDevice(
            f"{'gpu' if gpu_like else 'accel'}-{_dns_label(dev.address)}",
            KIND_ACCELERATOR,
            attrs,
            pci_address=dev.address,
            device_nodes=_device_nodes(Path(root), dev.address),
        )
        name = MIG_MODEL_BY_PCI_ID.get(dev.device) if dev.vendor == VENDOR_NVIDIA and mig_enabled else None
        items, sets = _with_mig(base, mig.MODELS[name] if name else None)
        devices += items
        counter_sets += sets
    for dev in topo.nics():
        attrs = {ATTR_KIND: {"string": KIND_NIC}, **_placement(dev), "vendor": {"string": f"0x{dev.vendor:04x}"}}
        if dev.name:
            attrs["interface"] = {"string": dev.name}
        devices.append(NodeDevice(f"nic-{_dns_label(dev.address)}", KIND_NIC, attrs, pci_address=dev.address))
    return NodeInventory(tuple(devices), tuple(counter_sets))


# ---------------------------------------------------------------------------------------------- fake


@dataclass(frozen=True)
class FakeSpec:
    """A made-up node: ``devices`` GPUs ``gpu-0..`` (``missing`` ones left out, as if gone), ``nics`` NICs."""

    devices: int = 8
    model: str = "LATEST-GPU-MODEL"
    memory: str = "80Gi"
    driver_version: str = "1.0.0"
    numa_nodes: int = 1
    nics: int = 0
    mig_model: str = ""
    missing: tuple[str, ...] = ()


_FAKE_FIELDS = {
    "devices": ("devices", int),
    "model": ("model", str),
    "memory": ("memory", str),
    "driverVersion": ("driver_version", str),
    "numaNodes": ("numa_nodes", int),
    "nics": ("nics", int),
    "migModel": ("mig_model", str),
    "missing": ("missing", list),
}


def parse_fake(doc: Any, source: str = "") -> FakeSpec:
    """A FakeSpec from the fake inventory file's mapping; InputError naming the file and field otherwise."""
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise InputError("the fake inventory must be a mapping", source=source, obj="FakeInventory")
    values: dict[str, Any] = {}
    for key, value in doc.items():
        if key not in _FAKE_FIELDS:
            raise InputError(
                f"unknown field (known: {', '.join(_FAKE_FIELDS)})", source=source, obj="FakeInventory", field=key
            )
        attr, kind = _FAKE_FIELDS[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InputError(f"must be a {kind.__name__}", source=source, obj="FakeInventory", field=key)
        values[attr] = tuple(str(v) for v in value) if kind is list else value
    spec = FakeSpec(**values)
    for key, n, low in (("devices", spec.devices, 0), ("numaNodes", spec.numa_nodes, 1), ("nics", spec.nics, 0)):
        if not low <= n <= 1024:
            raise InputError(f"must be between {low} and 1024", source=source, obj="FakeInventory", field=key)
    if spec.mig_model:
        try:
            mig.model(spec.mig_model)
        except ValueError as exc:
            raise InputError(str(exc), source=source, obj="FakeInventory", field="migModel") from None
    from accelsched.api.quantity import parse_fraction

    try:
        parse_fraction(spec.memory)
    except Exception as exc:
        raise InputError(f"not a quantity: {exc}", source=source, obj="FakeInventory", field="memory") from None
    return spec


def fake_uuid(node_name: str, device: str) -> str:
    """Stable per node and device, so a restart publishes the same uuid (dra-example-driver seeds its fakes too)."""
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"accelsched.io/fake/{node_name}/{device}"))


def from_fake(spec: FakeSpec, node_name: str) -> NodeInventory:
    per = -(-max(spec.devices, 1) // spec.numa_nodes)
    model = mig.model(spec.mig_model) if spec.mig_model else None
    devices: list[NodeDevice] = []
    counter_sets: list[Mapping[str, Any]] = []
    missing = set(spec.missing)

    def placement(numa: int) -> dict[str, Any]:
        return {ATTR_NUMA: {"int": numa}, ATTR_PCIE_ROOT: {"string": f"pci{numa:04x}:00"}}

    for i in range(spec.devices):
        name = f"gpu-{i}"
        if name in missing:
            continue
        gpu = NodeDevice(
            name,
            KIND_ACCELERATOR,
            {
                ATTR_KIND: {"string": KIND_ACCELERATOR},
                **placement(min(i // per, spec.numa_nodes - 1)),
                "index": {"int": i},
                "uuid": {"string": fake_uuid(node_name, name)},
                "model": {"string": spec.model},
                "driverVersion": {"version": spec.driver_version},
            },
            {"memory": {"value": spec.memory}},
        )
        items, sets = _with_mig(gpu, model)
        devices += items
        counter_sets += sets
    for i in range(spec.nics):
        name = f"nic-{i}"
        if name not in missing:
            attrs = {ATTR_KIND: {"string": KIND_NIC}, **placement(i % spec.numa_nodes), "index": {"int": i}}
            devices.append(NodeDevice(name, KIND_NIC, attrs))
    return NodeInventory(tuple(devices), tuple(counter_sets))


# ---------------------------------------------------------------------------------------------- slices


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def slice_specs(inventory: NodeInventory, driver: str, node_name: str) -> list[dict[str, Any]]:
    """The ``spec`` of every slice of this node's pool, pool generation and count left for the publisher.

    Order is stable (counter slices, then plain devices, then counter-consuming ones), so the same inventory always
    gives the same slices under the same names."""
    plain = [d.to_api() for d in inventory.devices if not d.consumes_counters]
    counted = [d.to_api() for d in inventory.devices if d.consumes_counters]
    specs: list[dict[str, Any]] = []
    base = {"driver": driver, "nodeName": node_name}
    for sets in _chunks(list(inventory.counter_sets), MAX_COUNTER_SETS):
        specs.append({**base, "sharedCounters": [dict(s) for s in sets]})
    for devices in _chunks(plain, MAX_DEVICES):
        specs.append({**base, "devices": list(devices)})
    for devices in _chunks(counted, MAX_DEVICES_WITH_COUNTERS):
        specs.append({**base, "devices": list(devices)})
    if not specs:  # an empty pool is still published, so the scheduler knows this node has none (as real drivers)
        specs.append({**base, "devices": []})
    return specs


def slice_name(node_name: str, driver: str, index: int) -> str:
    return f"{node_name}-{_dns_label(driver)}-{index}"


def resource_slices(
    inventory: NodeInventory,
    driver: str,
    node_name: str,
    generation: int = 1,
    owner: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """This node's ResourceSlices as the API holds them: one pool (named after the node) at ``generation``, each
    slice owned by the Node (``owner``: its name and uid) so they go when the Node does, as real drivers do."""
    specs = slice_specs(inventory, driver, node_name)
    out = []
    for i, spec in enumerate(specs):
        meta: dict[str, Any] = {"name": slice_name(node_name, driver, i)}
        if owner:
            meta["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": owner["name"], "uid": owner["uid"], "controller": True}
            ]
        pool = {"name": node_name, "generation": generation, "resourceSliceCount": len(specs)}
        spec = {**spec, "pool": pool}
        out.append({"apiVersion": API_VERSION, "kind": "ResourceSlice", "metadata": meta, "spec": spec})
    return out
