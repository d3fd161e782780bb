"""Topology discovery on fixture sysfs trees: devices, NUMA nodes, link classes, scores, renderings, broken input."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
import sysfs_builder as sb
import yaml
from rich.console import Console

from accelsched.errors import InputError
from accelsched.topology import NodeTopology, discover
from accelsched.topology.model import device_kind, format_cpulist, parse_cpulist
from accelsched.topology.render import labels, matrix, numa_table, to_json, to_nrt


@pytest.fixture
def dgx(tmp_path: Path) -> NodeTopology:
    return discover(sb.dgx_like(tmp_path))


@pytest.fixture
def qaic(tmp_path: Path) -> NodeTopology:
    return discover(sb.qaic_box(tmp_path))


# -- parsing helpers -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3,8-11", (0, 1, 2, 3, 8, 9, 10, 11)), ("", ()), ("\n", ()), ("5", (5,)), (" 0,2-3 \n", (0, 2, 3))],
)
def test_parse_cpulist(text: str, cpus: tuple[int, ...]) -> None:
    assert parse_cpulist(text) == cpus
    assert parse_cpulist(format_cpulist(cpus)) == cpus


@pytest.mark.parametrize("text", ["x", "3-1", "0-", "-1", "1-2-3"])
def test_parse_cpulist_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cpulist(text)


def test_format_cpulist_is_compact() -> None:
    assert format_cpulist([*range(16), *range(32, 48), 60]) == "0-15,32-47,60"


@pytest.mark.parametrize(
    ("pci_class", "vendor", "kind"),
    [
        (0x030200, sb.NVIDIA, "accelerator"),
        (0x030000, sb.NVIDIA, "accelerator"),
        (0x030000, 0x1002, "accelerator"),
        (0x030000, sb.ASPEED, "other"),  # a BMC's VGA is no accelerator
        (0x038000, 0x1002, "accelerator"),
        (0x120000, sb.QUALCOMM, "accelerator"),
        (0x020000, sb.MELLANOX, "nic"),
        (0x020700, sb.MELLANOX, "nic"),
        (0x028000, sb.INTEL, "nic"),
        (0x060400, sb.BROADCOM, "other"),
        (0x010802, 0x144D, "other"),
    ],
)
def test_device_kind(pci_class: int, vendor: int, kind: str) -> None:
    assert device_kind(pci_class, vendor) == kind


# -- dgx_like ---------------------------------------------------------------------------------------------------------


def test_dgx_devices(dgx: NodeTopology) -> None:
    assert [d.address for d in dgx.accelerators()] == sb.DGX_GPUS
    assert [d.address for d in dgx.nics()] == sb.DGX_NICS
    assert [d.name for d in dgx.nics()] == sb.DGX_NIC_NAMES  # InfiniBand name preferred over the netdev
    assert {d.address for d in dgx.devices} == {*sb.DGX_GPUS, *sb.DGX_NICS}  # BMC VGA, NVMe, bridges left out
    gpu0 = dgx.device(sb.DGX_GPUS[0])
    assert (gpu0.vendor, gpu0.device, gpu0.pci_class, gpu0.class_code) == (sb.NVIDIA, sb.H100, 0x030200, 0x0302)
    assert gpu0.root == "pci0000:00"
    assert gpu0.bridges == ("0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0")
    assert [d.numa_node for d in dgx.accelerators()] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [d.numa_node for d in dgx.nics()] == [0, 0, 1, 1]
    assert [dgx.device(a).root for a in sb.DGX_GPUS[4:]] == ["pci0000:80"] * 2 + ["pci0000:c0"] * 2
    assert dgx.warnings == []


def test_dgx_numa(dgx: NodeTopology) -> None:
    assert [n.id for n in dgx.numa] == [0, 1]
    assert dgx.numa[0].cpus == sb.DGX_CPUS[0]
    assert dgx.numa[1].cpus == sb.DGX_CPUS[1]
    assert [n.memory_bytes for n in dgx.numa] == [sb.DGX_MEM_KB * 1024] * 2
    assert [n.distances for n in dgx.numa] == [(10, 21), (21, 10)]


def test_all_devices_keeps_every_function(tmp_path: Path) -> None:
    topo = discover(sb.dgx_like(tmp_path), all_devices=True)
    by_kind = {k: sorted(d.address for d in topo.devices if d.kind == k) for k in ("accelerator", "nic", "other")}
    assert by_kind["accelerator"] == sb.DGX_GPUS
    assert "0000:0e:00.0" in by_kind["other"]  # the BMC VGA
    assert "0000:0f:00.0" in by_kind["other"]  # the NVMe
    bridges = [d for d in topo.devices if d.class_code == 0x0604]
    # 5 root ports, the top switch (1 up + 2 down), leaf switches A-D (1 up + 3 down each), the BMC's bridge
    assert len(bridges) == 5 + 3 + 4 * 4 + 1
    assert topo.device("0000:01:00.0").bridges == ("0000:00:01.0",)


@pytest.mark.parametrize(
    ("a", "b", "link"),
    [
        (0, 1, "PIX"),  # two GPUs on one leaf switch
        (0, 2, "PXB"),  # leaf switches A and B below the top switch: several bridges, no host bridge
        (2, 3, "PIX"),
        (4, 5, "PIX"),
        (4, 6, "NODE"),  # switches C and D on two root complexes of socket 1
        (0, 4, "SYS"),  # across sockets
        (3, 7, "SYS"),
        (0, 0, "X"),
    ],
)
def test_dgx_gpu_links(dgx: NodeTopology, a: int, b: int, link: str) -> None:
    assert dgx.link(sb.DGX_GPUS[a], sb.DGX_GPUS[b]) == link
    assert dgx.link(sb.DGX_GPUS[b], sb.DGX_GPUS[a]) == link


@pytest.mark.parametrize(
    ("gpu", "nic", "link"),
    [(0, 0, "PIX"), (1, 0, "PIX"), (0, 1, "PXB"), (4, 2, "PIX"), (6, 3, "PIX"), (4, 3, "NODE"), (0, 2, "SYS")],
)
def test_dgx_gpu_nic_links(dgx: NodeTopology, gpu: int, nic: int, link: str) -> None:
    assert dgx.link(sb.DGX_GPUS[gpu], sb.DGX_NICS[nic]) == link


def test_dgx_switch_grouping(dgx: NodeTopology) -> None:
    """Devices that are PIX to each other are exactly the ones behind one switch: two GPUs and one NIC each."""
    groups = {d.bridges[:-1] for d in dgx.devices}
    members = sorted(sorted(d.address for d in dgx.devices if d.bridges[:-1] == g) for g in groups)
    assert members == sorted(sorted([*sb.DGX_GPUS[2 * i : 2 * i + 2], sb.DGX_NICS[i]]) for i in range(4))
    for group in members:
        assert all(dgx.link(x, y) == "PIX" for x in group for y in group if x != y)


@pytest.mark.parametrize(("a", "b", "score"), [(0, 1, 50), (0, 2, 40), (4, 6, 20), (0, 4, 10), (0, 0, 0)])
def test_dgx_pair_scores(dgx: NodeTopology, a: int, b: int, score: int) -> None:
    assert dgx.pair_score(sb.DGX_GPUS[a], sb.DGX_GPUS[b]) == score


def test_nvlink_overrides_link_and_adds_to_score(dgx: NodeTopology) -> None:
    """go-gpuallocator adds 100 per NVLink on top of the PCIe link's score; one side's record is enough."""
    g0, g1, g4 = sb.DGX_GPUS[0], sb.DGX_GPUS[1], sb.DGX_GPUS[4]
    dgx.devices = [dataclasses.replace(d, nvlinks={g1: 12, g4: 2}) if d.address == g0 else d for d in dgx.devices]
    assert dgx.link(g0, g1) == dgx.link(g1, g0) == "NV12"
    assert dgx.pair_score(g0, g1) == 12 * 100 + 50
    assert dgx.link(g4, g0) == "NV2"
    assert dgx.pair_score(g0, g4) == 2 * 100 + 10
    assert "NV12" in matrix(dgx)


# -- qaic_box and nic_on_other_socket --------------------------------------------------------------------------------


def test_qaic_box(qaic: NodeTopology) -> None:
    assert [d.address for d in qaic.accelerators()] == sb.QAIC_CARDS
    assert {(d.vendor, d.class_code) for d in qaic.accelerators()} == {(sb.QUALCOMM, 0x1200)}
    assert [d.numa_node for d in qaic.accelerators()] == [0, 0, 1, 1]
    assert [(d.address, d.name, d.numa_node) for d in qaic.nics()] == [(sb.QAIC_NIC, "eth0", 0)]
    c = sb.QAIC_CARDS
    assert qaic.link(c[0], c[1]) == "PHB"  # two root ports of one host bridge
    assert qaic.link(c[0], c[2]) == "SYS"
    assert qaic.link(c[0], sb.QAIC_NIC) == "NODE"
    assert qaic.link(c[3], sb.QAIC_NIC) == "SYS"
    assert qaic.pair_score(c[0], c[1]) == 30
    assert list(labels(qaic).values()) == ["ACC0", "ACC1", "ACC2", "ACC3", "NIC0"]


def test_nic_on_other_socket(tmp_path: Path) -> None:
    topo = discover(sb.nic_on_other_socket(tmp_path))
    assert [(d.address, d.numa_node) for d in topo.accelerators()] == [(g, 0) for g in sb.OTHER_SOCKET_GPUS]
    assert [(d.address, d.numa_node) for d in topo.nics()] == [(sb.OTHER_SOCKET_NIC, 1)]
    assert {topo.link(g, sb.OTHER_SOCKET_NIC) for g in sb.OTHER_SOCKET_GPUS} == {"SYS"}
    assert topo.link(*sb.OTHER_SOCKET_GPUS) == "PHB"
    nrt = to_nrt(topo, "n1")
    gpus = [[r for r in z["resources"] if r["name"] == "nvidia.com/gpu"] for z in nrt["zones"]]
    assert gpus == [[{"name": "nvidia.com/gpu", "capacity": "2", "allocatable": "2", "available": "2"}], []]


def test_unknown_numa_across_root_complexes_is_sys() -> None:
    topo = NodeTopology.from_dict(
        {
            "devices": [
                {
                    "address": "0000:01:00.0",
                    "vendor": "0x10de",
                    "device": "0x2330",
                    "class": "0x030200",
                    "root": "pci0000:00",
                    "bridges": ["0000:00:01.0"],
                },
                {
                    "address": "0000:41:00.0",
                    "vendor": "0x10de",
                    "device": "0x2330",
                    "class": "0x030200",
                    "root": "pci0000:40",
                    "bridges": ["0000:40:01.0"],
                },
            ]
        }
    )
    assert topo.link("0000:01:00.0", "0000:41:00.0") == "SYS"


def test_no_numa_dirs_make_one_node(tmp_path: Path) -> None:
    topo = discover(sb.no_numa(tmp_path))
    assert [(n.id, n.cpus, n.distances) for n in topo.numa] == [(0, tuple(range(6)), (10,))]
    assert topo.accelerators()[0].numa_node is None
    assert any("sys/devices/system/node: no NUMA nodes" in w for w in topo.warnings)


def test_absolute_symlink_is_taken_inside_root(tmp_path: Path) -> None:
    b = sb.SysfsBuilder(tmp_path).numa(0, range(2), 1024, [10])
    b.pci("0000:01:00.0", 0x0302, sb.NVIDIA, sb.H100, 0, ["0000:00:01.0"])
    link = tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:01:00.0"
    link.unlink()
    os.symlink("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", link)
    topo = discover(tmp_path)
    assert [(d.address, d.bridges, d.numa_node) for d in topo.devices] == [("0000:01:00.0", ("0000:00:01.0",), 0)]


# -- serialization and rendering -------------------------------------------------------------------------------------


def test_to_dict_round_trip(dgx: NodeTopology) -> None:
    dgx.devices[0] = dataclasses.replace(dgx.devices[0], nvlinks={sb.DGX_GPUS[1]: 4})
    dgx.warnings.append("something odd")
    data = dgx.to_dict()
    assert data["devices"][0]["class"] == "0x030200"
    assert data["numa"][0]["cpus"] == "0-15,32-47"
    for text in (json.dumps(data), yaml.safe_dump(data)):
        back = NodeTopology.from_dict(yaml.safe_load(text))
        assert back == dgx
        assert back.to_dict() == data
        assert back.link(sb.DGX_GPUS[0], sb.DGX_GPUS[1]) == "NV4"


def test_from_dict_names_the_bad_field() -> None:
    with pytest.raises(InputError) as err:
        NodeTopology.from_dict({"devices": [{"address": "0000:01:00.0", "vendor": "nope", "class": 1}]}, "t.yaml")
    assert str(err.value).startswith("t.yaml: NodeTopology: devices[0]: ")


def test_nrt_shape(dgx: NodeTopology) -> None:
    nrt = to_nrt(dgx, "gpu-node-1", policy="single-numa-node", scope="pod")
    assert nrt["apiVersion"] == "topology.node.k8s.io/v1alpha2"
    assert nrt["kind"] == "NodeResourceTopology"
    assert nrt["metadata"] == {"name": "gpu-node-1"}
    assert nrt["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    assert nrt["attributes"] == [
        {"name": "topologyManagerPolicy", "value": "single-numa-node"},
        {"name": "topologyManagerScope", "value": "pod"},
    ]
    assert [z["name"] for z in nrt["zones"]] == ["node-0", "node-1"]
    zone0 = nrt["zones"][0]
    assert zone0["type"] == "Node"
    assert zone0["costs"] == [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}]
    res = {r["name"]: r for r in zone0["resources"]}
    assert list(res) == ["cpu", "memory", "nvidia.com/gpu"]
    assert res["cpu"] == {"name": "cpu", "capacity": "32", "allocatable": "32", "available": "32"}
    assert res["memory"]["capacity"] == str(sb.DGX_MEM_KB * 1024)
    assert res["nvidia.com/gpu"]["capacity"] == "4"
    assert to_nrt(dgx, "n")["topologyPolicies"] == ["None"]
    named = to_nrt(dgx, "n", resource_name="example.com/gpu")
    assert [r["name"] for r in named["zones"][1]["resources"]] == ["cpu", "memory", "example.com/gpu"]
    json.dumps(nrt)


def test_nrt_rejects_unknown_policy(dgx: NodeTopology) -> None:
    with pytest.raises(InputError, match="single-numa-node"):
        to_nrt(dgx, "n", policy="single-numa")


def test_matrix(dgx: NodeTopology) -> None:
    text = matrix(dgx)
    lines = text.splitlines()
    assert lines[0].split() == [
        *(f"GPU{i}" for i in range(8)),
        *(f"NIC{i}" for i in range(4)),
        "CPU",
        "Affinity",
        "NUMA",
        "Affinity",
    ]
    assert lines[1].split() == [
        "GPU0",
        "X",
        "PIX",
        "PXB",
        "PXB",
        *["SYS"] * 4,
        "PIX",
        "PXB",
        "SYS",
        "SYS",
        "0-15,32-47",
        "0",
    ]
    assert lines[7].split()[:9] == ["GPU6", "SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "X", "PIX"]
    assert "Legend:" in text
    assert "  PIX  = Connection traversing at most a single PCIe bridge" in text
    assert "  NV#  = Connection traversing a bonded set of # NVLinks" in text
    assert "NIC Legend:" in text and "  NIC1: enp12s0" in text


def test_matrix_without_devices() -> None:
    assert "No accelerators" in matrix(NodeTopology(numa=[], devices=[]))


def test_numa_table(dgx: NodeTopology) -> None:
    console = Console(record=True, width=200)
    console.print(numa_table(dgx))
    text = console.export_text()
    assert "0-15,32-47" in text and "512.0 GiB" in text and "GPU4 GPU5 GPU6 GPU7" in text and "NIC2 NIC3" in text


def test_to_json(qaic: NodeTopology) -> None:
    out = to_json(qaic)
    assert out["labels"][sb.QAIC_CARDS[0]] == "ACC0"
    assert out["links"]["ACC0"]["ACC1"] == "PHB"
    assert out["links"]["NIC0"]["ACC3"] == "SYS"
    json.dumps(out)


# -- broken trees ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(sb.BROKEN))
def test_broken_tree_degrades(tmp_path: Path, name: str) -> None:
    root = sb.BROKEN[name](tmp_path)
    locked = [p for p in tmp_path.rglob("numa_node") if not p.stat().st_mode & 0o777]
    if name == "unreadable_numa_node" and all(os.access(p, os.R_OK) for p in locked):
        pytest.skip("running as root: a mode-000 file is still readable")
    topo = discover(root)
    assert topo.warnings, "broken input must be reported"
    assert all(str(tmp_path) in w for w in topo.warnings), topo.warnings
    addresses = [d.address for d in topo.devices]
    gpu0 = sb.SMALL_GPUS[0]
    if name in ("missing_numa_node", "numa_minus_one", "unreadable_numa_node"):
        assert addresses == [*sb.SMALL_GPUS, sb.SMALL_NIC]
        assert topo.device(gpu0).numa_node is None
        assert any(
            w.endswith("numa_node: " + msg) or msg in w
            for w in topo.warnings
            for msg in ("missing", "no NUMA affinity", "permission denied")
        )
    elif name == "dangling_symlink":
        assert addresses == [*sb.SMALL_GPUS, sb.SMALL_NIC]
        assert any("0000:09:00.0: dangling symlink" in w for w in topo.warnings)
    elif name == "garbage_class":
        assert addresses == [gpu0, sb.SMALL_NIC]
        assert any(f"{sb.SMALL_GPUS[1]}/class: garbage" in w for w in topo.warnings)
    elif name == "garbage_numa_files":
        assert [(n.id, n.cpus, n.memory_bytes, n.distances) for n in topo.numa] == [(0, (), None, ())]
        assert len(topo.warnings) == 3
    # Whatever broke, the renderers still work.
    matrix(topo)
    to_nrt(topo, "n")
    NodeTopology.from_dict(topo.to_dict())
