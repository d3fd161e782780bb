"""accelsched/ui/view.py on the lab (demo.play) and on small hand-written clusters: every node and device with its
holder, the Pending list as ``schedule -o json`` has it, and pod detail per phase."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from accelsched import demo, report
from accelsched.api.loader import load
from accelsched.engine import Session
from accelsched.framework import gang
from accelsched.topology.allocator import NIC_ANNOTATION
from accelsched.ui import view


@dataclass
class FakeState:
    description: str = "test"
    mode: str = "offline"


@dataclass
class StandIn:
    """The fields of state.Run view.py reads: a real Session and its results."""

    session: Session
    results: list
    warnings: list[str] = field(default_factory=list)
    state: FakeState = field(default_factory=FakeState)


@pytest.fixture(scope="module")
def lab() -> list[StandIn]:
    """One run per lab step (index 0 = step 1)."""
    return [StandIn(o.session, o.results) for o in demo.play()]


def cells(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """id -> DeviceCell of one NodeView (ids are unique per node in the lab)."""
    out = {}
    for group in entry["groups"]:
        for sw in group["switches"]:
            for cell in sw.get("devices", []):
                assert cell["id"] not in out
                out[cell["id"]] = cell
    return out


def nics(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for g in entry["groups"] for sw in g["switches"] for n in sw.get("nics", [])}


def physical(ident: str) -> str:
    return ident.partition(":")[0]


def expected_ids(cluster: Any, i: int) -> set[str]:
    devices = cluster.devices[i]
    ids = {d for pool in devices.pools.values() for d in pool.ids}
    if devices.partition is not None:
        ids |= set(devices.partition.devices)
    if cluster.dra is not None:
        ids |= {d.name for _, d in cluster.dra.devices_for_node(cluster.nodes[i].name)}
    return ids


# ------------------------------------------------------------------------------------ the map


def test_every_node_and_device_with_its_holders(lab: list[StandIn]) -> None:
    run = lab[-1]
    cluster = run.session.cluster
    built = view.build_view(run, None)
    assert [n["name"] for n in built["nodes"]] == [n.name for n in cluster.nodes]
    for i, entry in enumerate(built["nodes"]):
        by_id = cells(entry)
        assert set(by_id) == expected_ids(cluster, i), entry["name"]
        assert entry == view.node_view(run, i)
        # Every pod on the node holds the cells of its devices; every holder is such a pod.
        holds: dict[str, set[str]] = {}
        for key, pod in cluster.pods_on[i].items():
            for ids in pod.devices.values():
                for ident in ids:
                    holds.setdefault(physical(ident), set()).add(key)
        for ident, cell in by_id.items():
            if cell["kind"] != "dra":
                assert set(cell.get("holders", [])) == holds.get(ident, set()), (entry["name"], ident)
        assert entry.get("pods", []) == list(cluster.pods_on[i])


def test_holders_agree_with_schedule_json(lab: list[StandIn]) -> None:
    for run in lab:
        cluster = run.session.cluster
        nodes = {n["name"]: cells(n) for n in view.build_view(run, None)["nodes"]}
        for entry in report.to_json(run.results, cluster)["pods"]:
            key = f"{entry['namespace']}/{entry['name']}"
            if entry["node"] is None:
                assert all(key not in c.get("holders", []) for n in nodes.values() for c in n.values())
                continue
            for ids in entry["devices"].values():
                for ident in ids:
                    assert key in nodes[entry["node"]][physical(ident)].get("holders", []), (key, ident)
            for claim in entry.get("claims", []):
                for res in claim["results"]:
                    cell = nodes[entry["node"]][res["device"]]
                    assert cell["kind"] == "dra" and key in cell["holders"]
                    assert cell["driver"] == res["driver"] and cell["pool"] == res["pool"]


def test_mig_slots_and_time_slicing_share(lab: list[StandIn]) -> None:
    run = lab[-1]
    cluster = run.session.cluster
    built = {n["name"]: n for n in view.build_view(run, None)["nodes"]}
    mig = cells(built["node-h"])
    i = cluster.index["node-h"]
    seen = 0
    for key, pod in cluster.pods_on[i].items():
        for ident in pod.devices["nvidia.com/mig-1g.5gb"]:
            dev, _, instance = ident.partition(":")
            start = int(instance.split("@")[1])
            slot = next(s for s in mig[dev]["slots"] if s["start"] == start)
            assert slot == {"start": start, "size": 1, "profile": "1g.5gb", "holder": key}
            assert key in mig[dev]["holders"]
            seen += 1
    assert seen == 8
    assert mig["gpu-0"]["kind"] == "mig" and mig["gpu-0"]["slotCount"] == 8
    assert len(mig["gpu-0"]["slots"]) == 7 and len(mig["gpu-1"]["slots"]) == 1
    shared = cells(built["node-i"])
    assert shared["gpu-0"]["kind"] == "timeslicing"
    assert shared["gpu-0"]["share"] == {"used": 4, "total": 4, "unit": "replicas"}
    assert len(shared["gpu-0"]["holders"]) == 4


def test_topology_groups_and_nic_holders(lab: list[StandIn]) -> None:
    run = lab[-1]
    entry = view.node_view(run, run.session.cluster.index["node-e"])
    assert entry["policy"] == "single-numa-node"
    layout = [
        (g["numa"], sw["switch"], [c["id"] for c in sw["devices"]], [n["id"] for n in sw.get("nics", [])])
        for g in entry["groups"]
        for sw in g["switches"]
    ]
    assert layout == [
        (0, "sw0", ["qaic-0", "qaic-1"], ["nic0"]),
        (0, "sw1", ["qaic-2", "qaic-3"], []),
        (1, "sw2", ["qaic-4", "qaic-5"], []),
        (1, "sw3", ["qaic-6", "qaic-7"], []),
    ]
    pod = run.session.cluster.pods_on[run.session.cluster.index["node-e"]]["default/train-nic"]
    assert pod.raw["metadata"]["annotations"][NIC_ANNOTATION] == "nic0"
    assert nics(entry)["nic0"]["holders"] == ["default/train-nic"]
    node_f = view.node_view(run, run.session.cluster.index["node-f"])
    assert "holders" not in nics(node_f)["nic0"]  # nobody asked for node-f's NIC


def test_dra_cells(lab: list[StandIn]) -> None:
    run = lab[-1]
    cluster = run.session.cluster
    built = {n["name"]: n for n in view.build_view(run, None)["nodes"]}
    claimed = {
        r["device"]
        for claim in cluster.dra.pod_claim_results(cluster.pods_on[cluster.index["node-p"]]["default/train-dra-a"])
        for r in claim["results"]
    }
    assert len(claimed) == 3
    for name in ("node-p", "node-q"):
        for ident, cell in cells(built[name]).items():
            assert cell["kind"] == "dra" and cell["driver"] == "dra.accelsched.io" and cell["pool"] == name
            held = name == "node-p" and ident in claimed
            assert cell.get("holders", []) == (["default/train-dra-a"] if held else [])
    # Free DRA devices agree with the nodes table's DRA column.
    for name in ("node-p", "node-q"):
        free = built[name]["free"].get("dra.accelsched.io", 0)
        total = sum(1 for c in cells(built[name]).values())
        assert report.dra_free_cell(cluster, name) == f"DRA {free}/{total} free"


def test_cordon_taint_and_compact_keys(lab: list[StandIn]) -> None:
    built = {n["name"]: n for n in view.build_view(lab[-1], None)["nodes"]}
    assert built["node-b"]["unschedulable"] is True
    assert built["node-c"]["taints"] == ["maintenance=true:NoSchedule"]
    assert (
        "unschedulable" not in built["node-a"] and "taints" not in built["node-a"] and "policy" not in built["node-a"]
    )
    free_cell = cells(built["node-b"])["ai-accelerator-0"]
    assert free_cell == {"id": "ai-accelerator-0", "resource": "qualcomm.com/ai-accelerator", "kind": "device"}
    assert built["node-b"]["free"] == {"qualcomm.com/ai-accelerator": 4}
    assert built["node-a"]["free"] == {"qualcomm.com/ai-accelerator": 0}  # all four cards held: a 0, said
    base = report.node_json(lab[-1].session.cluster, 0)
    assert built["node-a"]["allocatable"] == base["allocatable"]
    assert built["node-a"]["requested"] == base["requested"]


def test_view_is_json_deterministic_with_etags(lab: list[StandIn]) -> None:
    run = lab[-1]
    first = view.build_view(run, None)
    text = json.dumps(first, sort_keys=True)
    assert json.dumps(view.build_view(run, None), sort_keys=True) == text
    again = list(demo.play())[-1]  # a second, separate run of the same inputs
    assert json.dumps(view.build_view(StandIn(again.session, again.results), None), sort_keys=True) == text
    tags = [n["etag"] for n in first["nodes"]]
    assert len(set(tags)) == len(tags)
    for n in first["nodes"]:
        assert n["etag"] == view.etag(n) and len(n["etag"]) == 16
    changed = dict(first["nodes"][0], unschedulable=True)
    assert view.etag(changed) != first["nodes"][0]["etag"]


def test_group_keys_order_gangs_and_counts(lab: list[StandIn]) -> None:
    run = lab[-1]
    built = view.build_view(run, None)
    assert built["groupKeys"][:4] == [
        "accelsched.io/pdu",
        "topology.kubernetes.io/zone",
        "nvidia.com/gpu.clique",  # the lab's fabric trays (examples/lab/12-fabric-nodes.yaml)
        "node.kubernetes.io/instance-type",
    ]
    assert "cloud.provider.com/topology-block" in built["groupKeys"]  # a Topology level shared by trays
    assert "kubernetes.io/hostname" not in built["groupKeys"]
    assert "accelsched.io/pool" in built["groupKeys"]  # shared by node-j..node-n, not a known key
    assert built["groupBy"] == "accelsched.io/pdu"
    by_zone = view.build_view(run, "topology.kubernetes.io/zone")
    assert by_zone["groupBy"] == "topology.kubernetes.io/zone"
    zone_nodes = [n.name for n in run.session.cluster.nodes if "topology.kubernetes.io/zone" in n.labels]
    assert by_zone["order"][: len(zone_nodes)] == zone_nodes  # labelled first, cluster order within
    assert sorted(by_zone["order"]) == sorted(built["order"])
    assert built["gangs"]["default/train-b-0"] == "default/train-b"
    assert built["gangs"]["default/train-a-0"] == "default/train-a"
    assert "default/train-16" not in built["gangs"]
    cluster = run.session.cluster
    all_cells = [c for n in built["nodes"] for c in cells(n).values()]
    assert built["counts"] == {
        "nodes": cluster.n,
        "devices": len(all_cells),
        "freeDevices": sum(1 for c in all_cells if not c.get("holders") and not c.get("claims")),
        "pods": sum(len(p) for p in cluster.pods_on),
        "pending": sum(1 for r in run.results if r.node is None),
    }
    assert built["readOnly"] is True and built["source"] == "test" and built["warnings"] == []
    assert built["capacity"]["resources"]


def test_node_order_is_natural() -> None:
    @dataclass
    class N:
        name: str
        labels: dict[str, str]

    nodes = [N("a", {"r": "rack-10"}), N("b", {}), N("c", {"r": "rack-2"}), N("d", {"r": "rack-10"})]
    assert view.node_order(nodes, "r") == ["c", "a", "d", "b"]
    assert view.node_order(nodes, None) == ["a", "b", "c", "d"]


# ------------------------------------------------------------------------------------ Pending


@pytest.mark.parametrize("step", [2, 3, 4, 5, 9, 10, 11])
def test_pending_list_matches_schedule_json(lab: list[StandIn], step: int) -> None:
    run = lab[step - 1]
    pods = report.to_json(run.results, run.session.cluster, reasons=True)["pods"]  # as schedule --reasons
    contract = {f"{p['namespace']}/{p['name']}": p for p in pods}
    pending = view.pending_list(run)
    seen = []
    for entry in pending:
        if entry["kind"] == "pod":
            want = contract[entry["key"]]
            got = {k: entry[k] for k in ("namespace", "name", "message")}
            assert got == {k: want[k] for k in ("namespace", "name", "message")}
            assert "reasons" not in view.pod_detail(run, entry["key"])  # per node: explain's, on demand
            assert want["node"] is None
            seen.append(entry["key"])
        else:
            members = [r for r in run.results if r.node is None and gang.group_key(r.pod) == entry["key"]]
            assert [m["key"] for m in entry["members"]] == [r.pod.key for r in members]
            for m in entry["members"]:
                want = contract[m["key"]]
                assert m["message"] == want["message"]
            assert entry["message"] == entry["members"][0]["message"]
            seen.extend(m["key"] for m in entry["members"])
    assert sorted(seen) == sorted(r.pod.key for r in run.results if r.node is None)
    order = [(-e["devices"], e["key"]) for e in pending]
    assert [o[0] for o in order] == sorted(o[0] for o in order)  # largest first
    json.dumps(pending)


def test_pending_entries_of_the_lab(lab: list[StandIn]) -> None:
    keys = {e["key"]: e for e in view.pending_list(lab[8])}  # step 9: gangs
    assert keys["default/train-16"]["devices"] == 16
    assert keys["default/train-16"]["requests"]["qualcomm.com/ai-accelerator"] == "16"
    assert keys["default/train-16"]["status"] == "Pending"
    assert view.pending_list(lab[8])[0]["key"] == "default/train-16"
    g = keys["default/train-b"]
    assert g["kind"] == "gang" and (g["namespace"], g["name"]) == ("default", "train-b")
    assert g["devices"] == 8 and g["requests"]["qualcomm.com/ai-accelerator"] == "8"
    assert [m["name"] for m in g["members"]] == ["train-b-0", "train-b-1", "train-b-2", "train-b-3"]
    assert "default/infer-b" in keys  # taint, step 3
    step5 = {e["key"]: e for e in view.pending_list(lab[4])}  # the third replica, before step 7 adds pdu-3
    anti = [k for k in step5 if k.startswith("tenant-a/infer-")]
    assert len(anti) == 1 and "anti-affinity" in step5[anti[0]]["message"]
    preempted = {e["key"]: e for e in view.pending_list(lab[9])}  # step 10
    sweep = preempted["default/sweep"]
    assert sweep["kind"] == "gang" and sweep["status"] == "Preempted"
    assert {m["status"] for m in sweep["members"]} == {"Preempted"}


# ------------------------------------------------------------------------------------ pod detail


def test_pod_detail_per_phase(lab: list[StandIn]) -> None:
    run = lab[-1]
    bound = view.pod_detail(run, "default/train-nic")
    assert bound is not None
    assert (bound["node"], bound["phase"]) == ("node-e", "Bound")
    assert bound["devices"] == {"qualcomm.com/ai-accelerator": ["qaic-0", "qaic-1", "qaic-2", "qaic-3"]}
    assert bound["alignment"] == {"numaNodes": "0", "nic": "nic0"}
    assert bound["requests"]["qualcomm.com/ai-accelerator"] == "4" and bound["message"] == ""
    owned = view.pod_detail(run, next(k for k in run.session.cluster.pod_node if k.startswith("tenant-a/infer-")))
    assert owned is not None and owned["owner"].startswith("ReplicaSet/")

    placed = view.pod_detail(run, "default/train-dra-a")
    assert placed is not None and (placed["node"], placed["phase"]) == ("node-p", "Placed")
    contract = {p["name"]: p for p in report.to_json(run.results, run.session.cluster)["pods"]}
    assert placed["claims"] == contract["train-dra-a"]["claims"]

    pending = view.pod_detail(run, "default/train-16")
    assert pending is not None and (pending["node"], pending["phase"]) == (None, "Pending")
    assert pending["message"] == contract["train-16"]["message"]
    assert pending["devices"] == {} and pending["gang"] is None

    member = view.pod_detail(run, "default/train-b-0")
    assert member is not None and member["gang"] == "default/train-b"

    victim = view.pod_detail(lab[9], "default/sweep-0")
    assert victim is not None and victim["phase"] == "Preempted" and victim["node"] is None
    assert victim["preemptedBy"] == "default/infer-urgent"
    assert view.pod_detail(lab[9], "default/infer-urgent")["preempted"] == ["default/sweep-0", "default/sweep-1"]

    assert view.pod_detail(run, "default/no-such-pod") is None
    json.dumps([bound, placed, pending, victim])


# ------------------------------------------------------------------------------------ partition IDs from files


FILES = """
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Node
    metadata:
      name: milli
      annotations:
        accelsched.io/partitioning: |
          mode: milli
          devices: [gpu-0, gpu-1, gpu-2]
    status:
      allocatable: {cpu: "32", memory: 64Gi, pods: "110"}
  - apiVersion: v1
    kind: Node
    metadata:
      name: sliced
      annotations:
        accelsched.io/partitioning: |
          mode: slices
          resource: example.com/accel-slice
          units: 8
          devices: [gpu-0, gpu-1]
    status:
      allocatable: {cpu: "32", memory: 64Gi, pods: "110"}
  - apiVersion: v1
    kind: Pod
    metadata:
      name: bound-slices
      annotations:
        accelsched.io/devices: '{"example.com/accel-slice": ["gpu-1:slices=2-4"]}'
    spec:
      nodeName: sliced
      containers:
        - name: c
          resources:
            requests: {cpu: "1", example.com/accel-slice: "3"}
            limits: {example.com/accel-slice: "3"}
  - apiVersion: v1
    kind: Pod
    metadata: {name: quarter}
    spec:
      nodeSelector: {kubernetes.io/hostname: milli}
      containers:
        - name: c
          resources:
            requests: {cpu: "1", accelsched.io/gpu-milli: "250"}
            limits: {accelsched.io/gpu-milli: "250"}
  - apiVersion: v1
    kind: Pod
    metadata: {name: whole}
    spec:
      nodeSelector: {kubernetes.io/hostname: milli}
      containers:
        - name: c
          resources:
            requests: {cpu: "1", nvidia.com/gpu: "1"}
            limits: {nvidia.com/gpu: "1"}
"""


def test_milli_and_slices_cells(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(FILES)
    session = Session.start(load([path]))
    run = StandIn(session, session.rejected + session.schedule())
    assert all(r.node == "milli" for r in run.results)
    built = {n["name"]: n for n in view.build_view(run, None)["nodes"]}
    sliced = cells(built["sliced"])
    assert sliced["gpu-1"]["holders"] == ["default/bound-slices"]
    assert sliced["gpu-1"]["share"] == {"used": 3, "total": 8, "unit": "slices"}
    assert sliced["gpu-1"]["kind"] == "slices" and sliced["gpu-1"]["resource"] == "example.com/accel-slice"
    assert "holders" not in sliced["gpu-0"]
    milli = cells(built["milli"])
    holders = {ident: c.get("holders", []) for ident, c in milli.items()}
    pods = {r.pod.key: r.devices for r in run.results}
    quarter = pods["default/quarter"]["accelsched.io/gpu-milli"][0]
    assert quarter.endswith(":milli=250")
    assert holders[physical(quarter)] == ["default/quarter"]
    assert milli[physical(quarter)]["share"] == {"used": 250, "total": 1000, "unit": "milli"}
    whole = pods["default/whole"]["nvidia.com/gpu"][0]
    assert holders[whole] == ["default/whole"] and milli[whole]["share"]["used"] == 1000
    assert built["milli"]["free"] == {"nvidia.com/gpu": 1}
    assert view.pod_detail(run, "default/bound-slices")["phase"] == "Bound"
    assert view.pod_detail(run, "default/quarter")["phase"] == "Placed"


def test_the_queue_panel_is_schedules_queue_json_with_quota_and_cohort_sums() -> None:
    """The view's ``queues``: ``clusterQueues`` and ``workloads`` as ``schedule -o json`` writes them (the same
    report functions over the same run), plus each ClusterQueue's nominalQuota and the cohort's sums; None
    without Kueue objects."""
    from accelsched.ui.state import DemoState, FilesState, execute

    run = execute(FilesState.load([Path(__file__).resolve().parents[1] / "examples" / "queues" / "two-teams.yaml"]))
    panel = view.build_view(run, None)["queues"]
    expected = report.queues_json(run.session.queues)
    assert [{k: cq[k] for k in ("name", "cohort", "usage", "borrowed")} for cq in panel["clusterQueues"]] == expected[
        "clusterQueues"
    ]
    assert [cq["nominal"] for cq in panel["clusterQueues"]] == [
        {"a100": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"}}
    ] * 2
    (cohort,) = panel["cohorts"]
    assert cohort["clusterQueues"] == ["team-a", "team-b"]
    assert cohort["nominal"] == {"a100": {"cpu": "192", "memory": "2Ti", "nvidia.com/gpu": "16"}}
    assert cohort["usage"]["a100"]["nvidia.com/gpu"] == "16"
    held = [w for w in expected["workloads"] if not w["admitted"]]
    assert [(w["name"], w["message"]) for w in panel["queued"]] == [
        (w["name"], w["conditions"][0]["message"]) for w in held
    ]
    assert "4 more needed" in panel["queued"][0]["message"]
    assert panel["admitted"] == {"team-a": 2, "team-b": 1}
    from accelsched.demo import LAB_STEPS

    before_queues = next(n for n, step in enumerate(LAB_STEPS) if step.queues)  # the lab before its Kueue objects
    assert view.build_view(execute(DemoState.lab(before_queues)), None)["queues"] is None
    assert view.build_view(execute(DemoState.lab(before_queues + 1)), None)["queues"] is not None
