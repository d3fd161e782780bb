"""discover("/") on this machine against hwloc, the reference tool for the same discovery.

hwloc's XML gives NUMA nodes (os_index, cpuset bitmask, local_memory) and PCI objects placed in the tree: a PCIDev
hangs below its bridges, the host bridge, and then the CPU-side object (Package, Group, Machine) whose cpuset is the
device's locality; that object's nodeset is the device's NUMA locality as hwloc sees it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from accelsched.topology import NodeTopology, discover
from accelsched.topology.model import parse_cpulist

IO_TYPES = {"Bridge", "PCIDev", "OSDev", "Misc"}


def bitmask(text: str) -> set[int]:
    """hwloc's ``0xffffffff,0x0000000f`` (32-bit words, most significant first) as a set of indexes."""
    value = int("".join(word.removeprefix("0x").rjust(8, "0") for word in text.split(",")), 16)
    return {i for i in range(value.bit_length()) if value >> i & 1}


@dataclass
class HwlocPci:
    busid: str
    class_code: int
    vendor: int
    device: int
    bridges: tuple[str, ...]  # PCI bridges from the root port down, as hwloc nests them
    host_bridge: str  # "DDDD:[SS-EE]"
    nodeset: set[int]  # of the first CPU-side ancestor


@dataclass
class Hwloc:
    numa: dict[int, tuple[set[int], int, int]]  # os_index -> (cpus, local_memory, hugepage bytes)
    machine_nodeset: set[int]
    pci: list[HwlocPci]
    distances: dict[tuple[int, int], int]


def run_hwloc() -> str:
    for exe in ("hwloc-ls", "lstopo-no-graphics"):
        if shutil.which(exe):
            cmd = [exe, "--whole-io", "--of", "xml", "-"]
            return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60).stdout
    pytest.skip("hwloc is not installed (apt-get install hwloc)")


def parse(xml_text: str) -> Hwloc:
    root = ET.fromstring(xml_text)
    machine = root.find("object")
    assert machine is not None and machine.get("type") == "Machine"
    numa: dict[int, tuple[set[int], int, int]] = {}
    pci: list[HwlocPci] = []

    def walk(obj: ET.Element, cpu_side: ET.Element, chain: list[ET.Element]) -> None:
        kind = obj.get("type")
        if kind == "NUMANode":
            huge = sum(
                int(p.get("size", 0)) * int(p.get("count", 0))
                for p in obj.findall("page_type")
                if int(p.get("size", 0)) > 4096
            )
            numa[int(obj.get("os_index", -1))] = (
                bitmask(obj.get("cpuset", "0x0")),
                int(obj.get("local_memory", 0)),
                huge,
            )
        if kind == "PCIDev":
            m = re.match(r"([0-9a-f]{4}) \[([0-9a-f]{4}):([0-9a-f]{4})\]", obj.get("pci_type", ""))
            assert m, obj.attrib
            bridges = tuple(b.get("pci_busid", "") for b in chain if b.get("pci_busid"))
            hosts = [b.get("bridge_pci", "") for b in chain if not b.get("pci_busid")]
            pci.append(
                HwlocPci(
                    obj.get("pci_busid", ""),
                    int(m[1], 16),
                    int(m[2], 16),
                    int(m[3], 16),
                    bridges,
                    hosts[0] if hosts else "",
                    bitmask(cpu_side.get("nodeset", "0x0")),
                )
            )
        next_side = cpu_side if kind in IO_TYPES else obj
        next_chain = [*chain, obj] if kind == "Bridge" else chain
        for child in obj.findall("object"):
            walk(child, next_side, next_chain)

    walk(machine, machine, [])
    distances: dict[tuple[int, int], int] = {}
    for dist in root.iter("distances2"):
        if dist.get("type") != "NUMANode" or dist.get("indexing") != "os" or "Latency" not in dist.get("name", ""):
            continue
        idx = [int(x) for x in (dist.findtext("indexes") or "").split()]
        values = [int(x) for v in dist.findall("u64values") for x in (v.text or "").split()]
        for k, value in enumerate(values):
            distances[(idx[k // len(idx)], idx[k % len(idx)])] = value
    return Hwloc(numa, bitmask(machine.get("nodeset", "0x0")), pci, distances)


@pytest.fixture(scope="module")
def real() -> tuple[NodeTopology, Hwloc]:
    hw = parse(run_hwloc())
    return discover("/", all_devices=True), hw


def test_discover_runs_on_this_machine() -> None:
    topo = discover("/")
    assert len(topo.numa) >= 1
    online = set(parse_cpulist(Path("/sys/devices/system/cpu/online").read_text()))
    assert set().union(*(n.cpus for n in topo.numa)) == online
    for dev in topo.devices:
        assert dev.kind in ("accelerator", "nic")
        assert dev.numa_node is None or topo.numa_node(dev.numa_node) is not None


def test_numa_nodes_match_hwloc(real: tuple[NodeTopology, Hwloc]) -> None:
    topo, hw = real
    assert sorted(n.id for n in topo.numa) == sorted(hw.numa)
    for node in topo.numa:
        cpus, local_memory, huge = hw.numa[node.id]
        assert set(node.cpus) == cpus, f"NUMA node {node.id}"
        # hwloc may count huge pages apart from local_memory; MemTotal includes them.
        assert node.memory_bytes in (local_memory, local_memory + huge), f"NUMA node {node.id}"
    ids = [n.id for n in topo.numa]
    for node in topo.numa:
        for j, other in enumerate(ids):
            if (node.id, other) in hw.distances:
                assert node.distances[j] == hw.distances[(node.id, other)]


def test_pci_devices_match_hwloc(real: tuple[NodeTopology, Hwloc]) -> None:
    topo, hw = real
    ours = {d.address: d for d in topo.devices}
    assert hw.pci, "hwloc --whole-io reports no PCI device"
    for h in hw.pci:
        assert h.busid in ours, f"hwloc sees {h.busid}, discover does not"
        d = ours[h.busid]
        assert (d.class_code, d.vendor, d.device) == (h.class_code, h.vendor, h.device), h.busid
        assert d.bridges == h.bridges, h.busid
        domain, _, buses = h.host_bridge.partition(":")
        assert d.root == f"pci{domain}:{buses[1:3]}", (h.busid, h.host_bridge)
        if d.numa_node is not None:
            assert d.numa_node in h.nodeset, (h.busid, d.numa_node, h.nodeset)
            if len(h.nodeset) == 1:
                assert h.nodeset == {d.numa_node}
        else:
            # numa_node -1: hwloc (which places by local_cpus) must not pin it to fewer nodes than the whole machine.
            assert h.nodeset == hw.machine_nodeset, (h.busid, h.nodeset)
