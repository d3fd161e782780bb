"""accelsched/ui/capacity.py: free, stranded and shape counts on a hand-built cluster with known numbers, and the
split devices' fragmentation as ``schedule`` prints it (the lab's MIG and time-sliced nodes)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from accelsched import demo, report
from accelsched.api.loader import load
from accelsched.engine import Session
from accelsched.ui import capacity

ACCEL = "qualcomm.com/ai-accelerator"


def _node(name: str, accel: int, *, gpus: int = 0, pods: int = 110, cpu: str = "16", extra: str = "") -> str:
    gpu = f", nvidia.com/gpu: '{gpus}'" if gpus else ""
    return f"""
  - apiVersion: v1
    kind: Node
    metadata: {{name: {name}}}
    spec: {{{extra}}}
    status:
      allocatable: {{cpu: '{cpu}', memory: 64Gi, pods: '{pods}', {ACCEL}: '{accel}'{gpu}}}"""


def _bound(name: str, node: str, accel: int, cpu: str = "1") -> str:
    return f"""
  - apiVersion: v1
    kind: Pod
    metadata: {{name: {name}}}
    spec:
      nodeName: {node}
      containers:
        - name: c
          resources:
            requests: {{cpu: '{cpu}', {ACCEL}: '{accel}'}}
            limits: {{{ACCEL}: '{accel}'}}"""


CLUSTER = (
    "apiVersion: v1\nkind: List\nitems:"
    + _node("node-a", 8)  # 3 used: 5 free
    + _node("node-b", 4, extra="unschedulable: true")  # cordoned: 4 stranded
    + _node("node-c", 8, extra="taints: [{key: maintenance, value: 'true', effect: NoSchedule}]")  # 7 stranded
    + _node("node-d", 4)  # full
    + _node("node-e", 2, pods=1)  # its one pod slot taken: 2 stranded
    + _node("node-f", 8)  # empty
    + _node("node-g", 4, cpu="1")  # its cpu all requested: 4 stranded
    + _node("node-h", 0, gpus=2)
    + _node("node-i", 0, gpus=2, extra="taints: [{key: soft, effect: PreferNoSchedule}]")  # a soft taint: usable
    + _bound("a1", "node-a", 3)
    + _bound("c1", "node-c", 1, cpu="100m")
    + _bound("d1", "node-d", 4)
    + _bound("e1", "node-e", 0)
    + _bound("g1", "node-g", 0)
    + "\n"
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path: Path = tmp_path_factory.mktemp("capacity") / "cluster.yaml"
    path.write_text(CLUSTER)
    session = Session.start(load([path]))
    results = session.rejected + session.schedule()
    assert results == []  # every pod is bound and admitted
    return capacity.panel(session.cluster, results)


def test_free_used_and_stranded_counts(built: dict[str, Any]) -> None:
    by_res = {r["resource"]: r for r in built["resources"]}
    assert list(by_res) == [ACCEL, "nvidia.com/gpu"]
    accel = by_res[ACCEL]
    assert (accel["allocatable"], accel["used"], accel["free"], accel["stranded"]) == (38, 8, 30, 17)
    gpu = by_res["nvidia.com/gpu"]
    assert (gpu["allocatable"], gpu["used"], gpu["free"], gpu["stranded"]) == (4, 0, 4, 0)
    assert built["stranded"] == [
        {"node": "node-b", "resource": ACCEL, "free": 4, "why": "cordoned"},
        {"node": "node-c", "resource": ACCEL, "free": 7, "why": "tainted maintenance=true:NoSchedule"},
        {"node": "node-e", "resource": ACCEL, "free": 2, "why": "no pod slot left"},
        {"node": "node-g", "resource": ACCEL, "free": 4, "why": "no cpu left"},
    ]
    assert built["partitions"] == [] and built["dra"] == []
    json.dumps(built)


def test_shapes_count_usable_nodes(built: dict[str, Any]) -> None:
    by_res = {r["resource"]: r for r in built["resources"]}
    # Usable with free accelerators: node-a (5) and node-f (8); node-h and node-i have none.
    assert by_res[ACCEL]["shapes"] == [
        {"size": 1, "nodes": 2},
        {"size": 2, "nodes": 2},
        {"size": 4, "nodes": 2},
        {"size": 8, "nodes": 1},
    ]
    assert by_res["nvidia.com/gpu"]["shapes"] == [{"size": 1, "nodes": 2}, {"size": 2, "nodes": 2}]


def test_sentences(built: dict[str, Any]) -> None:
    assert built["sentences"] == [
        "1 node can still take an 8-accelerator pod",
        "2 nodes can still take a 2-GPU pod",
        f"4 {ACCEL} stranded on node-b (cordoned)",
        f"7 {ACCEL} stranded on node-c (tainted maintenance=true:NoSchedule)",
        f"2 {ACCEL} stranded on node-e (no pod slot left)",
        f"4 {ACCEL} stranded on node-g (no cpu left)",
    ]


def test_shape_sizes_and_words() -> None:
    assert capacity.shape_sizes(8) == [1, 2, 4, 8]
    assert capacity.shape_sizes(6) == [1, 2, 4, 6]
    assert capacity.shape_sizes(1) == [1]
    assert capacity.shape_sizes(0) == []
    assert [capacity._article(n) for n in (1, 8, 11, 18, 80, 4, 16, 11000)] == [
        "a", "an", "an", "an", "an", "a", "a", "an",
    ]  # fmt: skip
    assert capacity.short_name("nvidia.com/gpu") == "GPU"
    assert capacity.short_name("example.com/accel-slice") == "accel-slice"


def test_partitions_equal_the_fragmentation_line() -> None:
    for outcome in demo.play():
        cluster = outcome.session.cluster
        typical = [r.pod.requests for r in outcome.results]
        line = report.fragmentation_line(cluster, typical)
        got = capacity.panel(cluster, outcome.results)
        if line is None:
            assert got["partitions"] == []
            continue
        printed = re.findall(r"(\w+) (\d+) of (\d+) free (\w+)", line)
        assert [(p["mode"], p["fragmented"], p["free"], p["unit"]) for p in got["partitions"]] == [
            (mode, int(frag), int(free), unit) for mode, frag, free, unit in printed
        ]
        for p in got["partitions"]:
            assert p["used"] + p["free"] == p["total"]
    # The lab's MIG node: two A100s of 8 slices, eight 1g.5gb pods, the last slice of gpu-0 unusable.
    mig = next(p for p in got["partitions"] if p["mode"] == "mig")
    assert mig == {"mode": "mig", "unit": "slices", "used": 8, "total": 16, "free": 8, "fragmented": 2}
    assert "mig: 8 of 16 slices free, 2 of them fragmented (25%)" in got["sentences"]


def test_dra_devices_per_driver() -> None:
    last = list(demo.play())[-1]
    cluster = last.session.cluster
    got = capacity.panel(cluster, last.results)
    cells = [report.dra_free_cell(cluster, n.name) for n in cluster.nodes]
    counts = [tuple(map(int, m.groups())) for c in cells if (m := re.fullmatch(r"DRA (\d+)/(\d+) free", c))]
    assert got["dra"] == [
        {"driver": "dra.accelsched.io", "devices": sum(t for _, t in counts), "free": sum(f for f, _ in counts)}
    ]
    assert got["dra"][0]["devices"] == 10 and got["dra"][0]["free"] == 7
    # The lab's cordoned node-b is its stranded capacity; node-c's maintenance taint strands nothing, as the
    # maint-tool pod bound there asks for an accelerator and tolerates it.
    assert [(s["node"], s["why"]) for s in got["stranded"]] == [("node-b", "cordoned")]
    assert "default/maint-tool" in cluster.pods_on[cluster.index["node-c"]]


def _panel(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "cluster.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems:" + text + "\n")
    session = Session.start(load([path]))
    return capacity.panel(session.cluster, session.rejected + session.schedule())


GKE_TAINT = "taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]"
GPU_POOL = _node("gpu-1", 0, gpus=8, extra=GKE_TAINT) + _node("gpu-2", 0, gpus=8, extra=GKE_TAINT)


def _gpu_pod(name: str, tolerations: str, *, gpus: int = 1, node: str = "") -> str:
    bound = f"\n      nodeName: {node}" if node else ""
    return f"""
  - apiVersion: v1
    kind: Pod
    metadata: {{name: {name}}}
    spec:{bound}
      tolerations: {tolerations}
      containers:
        - name: c
          resources:
            requests: {{cpu: '1', nvidia.com/gpu: '{gpus}'}}
            limits: {{nvidia.com/gpu: '{gpus}'}}"""


def test_a_taint_the_gpu_pods_tolerate_strands_nothing(tmp_path: Path) -> None:
    """GKE taints its GPU nodes nvidia.com/gpu=present:NoSchedule and every GPU pod tolerates it: those GPUs are
    usable. A taint strands a resource only where no pod of the run asking for it tolerates it: a pod that
    tolerates everything but asks for no GPU (a device plugin's DaemonSet) does not count."""
    agent = """
  - apiVersion: v1
    kind: Pod
    metadata: {name: agent}
    spec:
      nodeName: gpu-1
      tolerations: [{operator: Exists}]
      containers: [{name: c, resources: {requests: {cpu: 100m}}}]"""
    everything = _node("cpu-1", 0) + agent
    alone = _panel(tmp_path, GPU_POOL + everything)
    (gpu,) = [r for r in alone["resources"] if r["resource"] == "nvidia.com/gpu"]
    assert (gpu["free"], gpu["stranded"]) == (16, 16)
    assert "no node can take a 1-GPU pod" in alone["sentences"]
    assert alone["stranded"][0]["why"] == "tainted nvidia.com/gpu=present:NoSchedule"

    tolerating = "[{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]"
    for pod in (_gpu_pod("train", tolerating, gpus=2, node="gpu-1"), _gpu_pod("wait", tolerating, gpus=64)):
        got = _panel(tmp_path, GPU_POOL + everything + pod)  # a bound pod, or a Pending one of the run
        (gpu,) = [r for r in got["resources"] if r["resource"] == "nvidia.com/gpu"]
        assert gpu["stranded"] == 0 and got["stranded"] == []
        assert gpu["shapes"][-1] == {"size": 8, "nodes": 2 if "wait" in pod else 1}
        assert not any("no node can take" in s for s in got["sentences"])
        assert got["devices"]["stranded"] == 0


def test_a_cordon_is_its_taint_and_is_said_once(tmp_path: Path) -> None:
    """A cordoned node in a cluster carries node.kubernetes.io/unschedulable:NoSchedule: "cordoned", not the taint
    again. A pod asking for the devices that tolerates that taint passes NodeUnschedulable: nothing stranded."""
    cordoned = "unschedulable: true, taints: [{key: node.kubernetes.io/unschedulable, effect: NoSchedule}]"
    nodes = _node("node-a", 4, extra=cordoned) + _node("node-b", 4)
    got = _panel(tmp_path, nodes)
    assert got["stranded"] == [{"node": "node-a", "resource": ACCEL, "free": 4, "why": "cordoned"}]
    tolerant = """
  - apiVersion: v1
    kind: Pod
    metadata: {name: t}
    spec:
      nodeName: node-b
      tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists}]
      containers: [{name: c, resources: {requests: {cpu: '1', ACCEL: '1'}, limits: {ACCEL: '1'}}}]""".replace(
        "ACCEL", ACCEL
    )
    assert _panel(tmp_path, nodes + tolerant)["stranded"] == []


MIG_NODE = """
  - apiVersion: v1
    kind: Node
    metadata:
      name: mig-a
      annotations:
        accelsched.io/partitioning: |
          mode: mig
          model: A100-40GB
          strategy: mixed
          dynamic: true
          devices: [gpu-0, gpu-1]
    spec: {%s}
    status:
      allocatable: {cpu: '64', memory: 500Gi, pods: '110'}
  - apiVersion: v1
    kind: Pod
    metadata: {name: small}
    spec:
      containers: [{name: c, resources: {requests: {cpu: '1', nvidia.com/mig-1g.5gb: '1'},
                                         limits: {nvidia.com/mig-1g.5gb: '1'}}}]"""


def test_device_totals_count_physical_devices_not_mig_profiles(tmp_path: Path) -> None:
    """Two A100s split by MIG advertise 14 1g.5gb, 6 2g.10gb, ... of the same 16 slices: summing the profiles
    said 37 devices free. The totals count each physical device once: the plain node's 2 GPUs, and the MIG
    node's wholly free gpu-1 (a 1g.5gb pod holds a slice of gpu-0); its 15 free slices are the partition's."""
    got = _panel(tmp_path, MIG_NODE % "" + _node("plain", 0, gpus=2))
    assert sum(r["free"] for r in got["resources"]) == 37
    assert got["devices"] == {"free": 3, "stranded": 0}
    assert [(p["mode"], p["free"], p["total"]) for p in got["partitions"]] == [("mig", 15, 16)]
    got = _panel(tmp_path, MIG_NODE % "unschedulable: true" + _node("plain", 0, gpus=2))
    # the small pod waits: both A100s free, both cordoned: stranded, so not free (a drain must not raise "free")
    assert got["devices"] == {"free": 2, "stranded": 2}
    gpu = next(e for e in got["physical"] if e["resource"] == "nvidia.com/gpu")
    assert (gpu["devices"], gpu["used"], gpu["free"], gpu["stranded"]) == (4, 0, 4, 2)
    assert [e["resource"] for e in got["physical"]] == ["nvidia.com/gpu"], "MIG profiles are no device types"
    split = {s["resource"]: (s["total"], s["used"], s["free"], s["unit"]) for s in gpu["split"]}
    assert split["nvidia.com/mig-1g.5gb"] == (14, 0, 14, "instances")
    assert sum(r["allocatable"] for r in got["resources"] if r["resource"] == "nvidia.com/mig-7g.40gb") == 2
