"""The node topology model: NUMA nodes, PCI devices and the link class between two devices, without any I/O.

Discovery (``sysfs.py``) fills it, renderers (``render.py``) print it, and the scheduler reads it; keeping it plain
data means a topology captured on one machine (``to_dict``) can be replayed in tests or on another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from accelsched.errors import InputError
from accelsched.ranges import compact as compact_ranges

VENDOR_NVIDIA = 0x10DE
VENDOR_AMD = 0x1002
VENDOR_INTEL = 0x8086
VENDOR_MELLANOX = 0x15B3
VENDOR_QUALCOMM = 0x17CB

CLASS_BRIDGE_PCI = 0x0604
# Class codes are ``pci_class >> 8`` (class and subclass; the low byte is the programming interface).
ACCELERATOR_CLASSES = frozenset({0x0302, 0x0380, 0x1200})
VGA_ACCELERATOR_VENDORS = frozenset({VENDOR_NVIDIA, VENDOR_AMD})  # a VGA from these is a compute GPU, not a BMC
NIC_CLASSES = frozenset({0x0200, 0x0207, 0x0280})

# go-gpuallocator (besteffort_policy.go, calculateGPUPairScore) per link class. A pair scores its PCIe class and,
# added on top, 100 per NVLink, because NVML reports both links for such a pair. Its "same board" 60 (two GPUs on one
# card, NVML_TOPOLOGY_INTERNAL) cannot be told apart from PIX in sysfs, so it is never produced here.
PAIR_SCORES: dict[str, int] = {"PIX": 50, "PXB": 40, "PHB": 30, "NODE": 20, "SYS": 10}
SAME_BOARD_SCORE = 60
NVLINK_SCORE = 100

# Kubelet Topology Manager vocabulary (what NodeResourceTopology attributes carry).
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")

LINK_LEGEND: dict[str, str] = {
    "X": "Self",
    "SYS": "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
    "NODE": "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    "PHB": "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "PXB": "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    "PIX": "Connection traversing at most a single PCIe bridge",
    "NV#": "Connection traversing a bonded set of # NVLinks",
}


def device_kind(pci_class: int, vendor: int) -> str:
    """``accelerator``, ``nic`` or ``other`` from the 24-bit class and the vendor id."""
    code = pci_class >> 8
    if code in ACCELERATOR_CLASSES or (code == 0x0300 and vendor in VGA_ACCELERATOR_VENDORS):
        return "accelerator"
    if code in NIC_CLASSES:
        return "nic"
    return "other"


# The most CPUs a Linux kernel can be built for (CONFIG_NR_CPUS: 8192 on x86-64 with MAXSMP and on powerpc, less
# elsewhere): a CPU id at or past it cannot come from a kernel, and bounding it keeps a cpulist like 0-99999999 from
# being expanded into a hundred million ints.
MAX_CPUS = 8192
_CPU_RANGE_RE = re.compile(r"^([0-9]{1,5})(?:-([0-9]{1,5}))?$")  # digits only: int() would also take "+5" and "1_0"


class CpuLimitError(ValueError):
    """A cpulist names a CPU id no kernel has (at or past MAX_CPUS)."""


def parse_cpulist(text: str) -> tuple[int, ...]:
    """``"0-3,8-11"`` -> (0, 1, 2, 3, 8, 9, 10, 11); empty -> (). Raises ValueError on anything else, and
    CpuLimitError (a ValueError) for a CPU id at or past MAX_CPUS."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        m = _CPU_RANGE_RE.match(part)
        if not m:
            if re.fullmatch(r"[0-9]+(-[0-9]+)?", part):
                raise CpuLimitError(f"CPU range {part[:40]!r} goes past the kernel's limit of {MAX_CPUS} CPUs")
            raise ValueError(f"bad CPU range {part[:40]!r}")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        if last >= MAX_CPUS:
            raise CpuLimitError(f"CPU range {part!r} goes past the kernel's limit of {MAX_CPUS} CPUs")
        if last < first:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def format_cpulist(cpus: tuple[int, ...] | list[int]) -> str:
    """The inverse of parse_cpulist, in the kernel's compact form."""
    return compact_ranges(cpus)


@dataclass(frozen=True)
class NumaNode:
    """One NUMA node: its CPUs, its memory (None when meminfo was unreadable) and its row of the distance matrix."""

    id: int
    cpus: tuple[int, ...]
    memory_bytes: int | None
    distances: tuple[int, ...]


@dataclass(frozen=True)
class PciDevice:
    """One PCI function and where it hangs: root complex, the bridges down to it, and its NUMA node."""

    address: str
    vendor: int
    device: int
    pci_class: int  # 24-bit, as in sysfs ``class``: 0xCCSSPP
    numa_node: int | None
    bridges: tuple[str, ...]  # from the root port down to, not including, the device
    root: str  # root complex, e.g. "pci0000:00"
    kind: str  # "accelerator", "nic" or "other"
    name: str = ""  # netdev or InfiniBand name for NICs
    nvlinks: dict[str, int] = field(default_factory=dict, hash=False)  # peer address -> links

    @property
    def class_code(self) -> int:
        """Class and subclass (``0x0302``), without the programming interface."""
        return self.pci_class >> 8


def pcie_link(a: PciDevice, b: PciDevice) -> str:
    """The PCIe path class between two devices, NVLink ignored (what NVML's GetTopologyCommonAncestor reports)."""
    if a.address == b.address:
        return "X"
    if a.root != b.root:
        # Different host bridges: they meet in the CPU package (NODE) or across the socket interconnect (SYS).
        same_numa = a.numa_node is not None and a.numa_node == b.numa_node
        return "NODE" if same_numa else "SYS"
    common = 0
    for x, y in zip(a.bridges, b.bridges, strict=False):
        if x != y:
            break
        common += 1
    if common == 0:
        return "PHB"  # different root ports of one host bridge: the path goes through it
    # Below the deepest shared bridge, one more bridge each is one switch's downstream ports; more is a deeper tree.
    if len(a.bridges) - common <= 1 and len(b.bridges) - common <= 1:
        return "PIX"
    return "PXB"


def nvlink_count(a: PciDevice, b: PciDevice) -> int:
    """NVLinks between two devices as either side recorded them (sysfs cannot see NVLink; fixtures and NVML can)."""
    return max(a.nvlinks.get(b.address, 0), b.nvlinks.get(a.address, 0))


def link_class(a: PciDevice, b: PciDevice) -> str:
    """nvidia-smi topo vocabulary between two devices: X, NV#, PIX, PXB, PHB, NODE or SYS."""
    if a.address == b.address:
        return "X"
    n = nvlink_count(a, b)
    return f"NV{n}" if n else pcie_link(a, b)


def pair_score(a: PciDevice, b: PciDevice) -> int:
    """go-gpuallocator's pair score: the PCIe class score plus 100 per NVLink; 0 for a device with itself."""
    if a.address == b.address:
        return 0
    return PAIR_SCORES[pcie_link(a, b)] + NVLINK_SCORE * nvlink_count(a, b)


def _hex(value: Any, width: int) -> str:
    return f"0x{value:0{width}x}"


def _int(value: Any) -> int:
    """An int from an int or a ``0x``/decimal string, as to_dict writes and people type."""
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    return int(str(value), 0)


@dataclass
class NodeTopology:
    """A node's NUMA nodes and accelerator/NIC devices, plus what discovery could not read (``warnings``)."""

    numa: list[NumaNode]
    devices: list[PciDevice]
    warnings: list[str] = field(default_factory=list)

    def accelerators(self) -> list[PciDevice]:
        """Accelerators in PCI address order, which is the order nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID use."""
        return sorted((d for d in self.devices if d.kind == "accelerator"), key=lambda d: d.address)

    def nics(self) -> list[PciDevice]:
        return sorted((d for d in self.devices if d.kind == "nic"), key=lambda d: d.address)

    def device(self, address: str) -> PciDevice:
        for d in self.devices:
            if d.address == address:
                return d
        raise KeyError(address)

    def numa_node(self, node_id: int) -> NumaNode | None:
        return next((n for n in self.numa if n.id == node_id), None)

    def link(self, a: str, b: str) -> str:
        """nvidia-smi topo vocabulary between two device addresses: X, NV#, PIX, PXB, PHB, NODE or SYS."""
        return link_class(self.device(a), self.device(b))

    def pair_score(self, a: str, b: str) -> int:
        """go-gpuallocator's pair score between two device addresses (see the module function)."""
        return pair_score(self.device(a), self.device(b))

    def to_dict(self) -> dict[str, Any]:
        """JSON/YAML-able form; ids as hex strings and CPU sets as cpulists, the way sysfs and lspci show them."""
        return {
            "numa": [
                {
                    "id": n.id,
                    "cpus": format_cpulist(n.cpus),
                    "memory_bytes": n.memory_bytes,
                    "distances": list(n.distances),
                }
                for n in self.numa
            ],
            "devices": [
                {
                    "address": d.address,
                    "vendor": _hex(d.vendor, 4),
                    "device": _hex(d.device, 4),
                    "class": _hex(d.pci_class, 6),
                    "numa_node": d.numa_node,
                    "root": d.root,
                    "bridges": list(d.bridges),
                    "kind": d.kind,
                    "name": d.name,
                    "nvlinks": dict(d.nvlinks),
                }
                for d in self.devices
            ],
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "") -> NodeTopology:
        """The inverse of to_dict; a malformed entry raises InputError naming the field."""
        numa: list[NumaNode] = []
        devices: list[PciDevice] = []
        where = "numa"
        try:
            for i, n in enumerate(data.get("numa") or []):
                where = f"numa[{i}]"
                cpus = n.get("cpus", "")
                numa.append(
                    NumaNode(
                        id=_int(n["id"]),
                        cpus=parse_cpulist(cpus) if isinstance(cpus, str) else tuple(sorted(_int(c) for c in cpus)),
                        memory_bytes=None if n.get("memory_bytes") is None else _int(n["memory_bytes"]),
                        distances=tuple(_int(x) for x in n.get("distances") or ()),
                    )
                )
            for i, d in enumerate(data.get("devices") or []):
                where = f"devices[{i}]"
                pci_class, vendor = _int(d["class"]), _int(d["vendor"])
                devices.append(
                    PciDevice(
                        address=str(d["address"]),
                        vendor=vendor,
                        device=_int(d["device"]),
                        pci_class=pci_class,
                        numa_node=None if d.get("numa_node") is None else _int(d["numa_node"]),
                        bridges=tuple(str(b) for b in d.get("bridges") or ()),
                        root=str(d.get("root", "")),
                        kind=str(d.get("kind") or device_kind(pci_class, vendor)),
                        name=str(d.get("name") or ""),
                        nvlinks={str(k): _int(v) for k, v in (d.get("nvlinks") or {}).items()},
                    )
                )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InputError(f"bad topology entry: {e!r}", source=source, obj="NodeTopology", field=where) from e
        return cls(numa=numa, devices=devices, warnings=[str(w) for w in data.get("warnings") or []])
