"""The benchmark harness runs end to end and schedules what it must; speed is reported, never asserted."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
from kubernetes_validate.utils import latest_version, major_minor

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # benchmarks/ is not an installed package: import it from the checkout
    sys.path.insert(0, str(REPO))

from accelsched.cluster.state import ClusterState  # noqa: E402
from accelsched.config import default_config  # noqa: E402
from accelsched.dra.model import AllocationResult, DeviceRequestAllocationResult  # noqa: E402
from accelsched.dra.state import DRAState  # noqa: E402
from accelsched.framework.scheduler import Scheduler  # noqa: E402
from benchmarks import dra  # noqa: E402
from benchmarks.harness import measure  # noqa: E402
from benchmarks.workloads import BY_NAME, WORKLOADS, Sizes, Workload, node_doc, pod_doc, select  # noqa: E402


@pytest.mark.integration
def test_quick_benchmarks_schedule_every_measured_pod(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["quick"] is True
    rows = {r["workload"]: r for r in doc["workloads"]}
    assert set(rows) == {w.name for w in WORKLOADS}
    for w in WORKLOADS:
        r = rows[w.name]
        sizes = w.sizes(quick=True)
        assert "error" not in r, r
        assert r["problems"] == [], (w.name, r["problems"])
        assert r["nodes"] == sizes.nodes
        # Sizes.measured_pods counts the stream's single pods; the Gangs workload adds its gangs' workers.
        assert r["measured_pods"] == r["expected_scheduled"] >= sizes.measured_pods
        assert r["scheduled"] == r["expected_scheduled"], (w.name, r)
        if w.family == "Gangs":
            assert r["gangs"] > 0 and r["gangs_per_s"] > 0
        assert r["all_scheduled"] is True
        assert r["pods_per_s"] > 0
        assert r["peak_rss_mib"] > 0
        assert r["kube_scheduler_pods_per_s"] == w.threshold
        assert r["ratio"] == pytest.approx(r["pods_per_s"] / w.threshold, rel=0.01, abs=0.01)


def test_templates_are_valid_kubernetes_objects() -> None:
    version = major_minor(latest_version())
    docs = [
        node_doc("node-0", {"topology.kubernetes.io/zone": "zone1"}, {"nvidia.com/gpu": 8}),
        pod_doc("pod-0"),
        pod_doc("pod-h-0", resources={"cpu": "9", "memory": "500Mi"}, limits=False, priority=10),
        pod_doc(
            "anti-0",
            "sched-0",
            labels={"color": "green"},
            affinity={
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}
                    ]
                }
            },
        ),
    ]
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_select_by_name_or_substring() -> None:
    assert [w.name for w in select(None)] == [w.name for w in WORKLOADS]
    assert [w.family for w in select(["NodeAffinity"])] == ["SchedulingNodeAffinity"]
    assert [w.family for w in select(["podantiaffinity,basic"])] == ["SchedulingPodAntiAffinity", "SchedulingBasic"]
    assert len(select(["SchedulingWithExtendedResource"])) == 2
    with pytest.raises(SystemExit):
        select(["NoSuchWorkload"])


@pytest.mark.integration
def test_quick_cli_benchmark_runs_the_real_process_and_schedules_every_pending_pod(tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.cli", "--quick", "--dir", str(tmp_path), "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["workload"]: r for r in json.loads(out.read_text())["workloads"]}
    assert set(rows) == {"pending", "dump"}
    for r in rows.values():
        assert r["rc"] == 0 and r["scheduled"] == r["pending"] and r["pending_after"] == 0, r
    assert rows["dump"]["bound"] == 5000 and (tmp_path / "dump-500n-5000b-500p.json").read_bytes().startswith(b"{")


@pytest.mark.integration
def test_quick_scale_benchmark_runs_the_cli_on_openb_shapes(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale", "--quick", "--dir", str(tmp_path), "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert [(r["nodes"], r["pending_pct"]) for r in doc["cases"]] == [(100, 0), (100, 50), (300, 0), (300, 50)]
    for r in doc["cases"] + [r for rows in doc["sweeps"].values() for r in rows]:
        # Every Pending pod has a result, and so has each bound pod that preemption evicted.
        assert r["rc"] == 0 and r["scheduled"] + r["pending_after"] >= r["pending"], r
        assert r["peak_rss_mib"] > 0 and r["wall_s"] > 0
        assert 0 <= r["preempted"] <= r["pending_after"]  # a victim is Pending again (bare pods)
    half = {r["nodes"]: r for r in doc["cases"] if r["pending_pct"] == 50}
    assert all(r["pending"] >= r["pods"] // 2 for r in half.values())  # at least half the file is Pending
    assert set(doc["exponents"]) == {"nodes", "pods"}
    assert all(isinstance(e["peak_rss"], float) for e in doc["exponents"].values())
    assert all("cpu_in_pending_after" in e for e in doc["exponents"].values())


# ---------------------------------------------------------------------------------------------- DRA workloads


def _dra_workload(name: str, sizes: Sizes) -> Workload:
    return dataclasses.replace(BY_NAME[name], full=sizes)


def test_dra_workloads_are_selected_by_group() -> None:
    names = {w.name for w in select(["DRA"])}
    assert {
        "SchedulingWithResourceClaimTemplate/5000pods_500nodes",
        "SteadyStateClusterResourceClaimTemplate/empty_500nodes",
        "SteadyStateClusterResourceClaimTemplate/half_500nodes",
        "SteadyStateClusterResourceClaimTemplate/full_500nodes",
        "Partitionable/2000pods_100nodes",
        "FirstAvailable/5000pods_500nodes",
        "DeviceTaintToleration/5000pods_500nodes",
        "ConsumableCapacity/2000pods_100nodes",
    } <= names
    assert all(w.group == "DRA" for w in select(["DRA"]))


def test_dra_templates_are_valid_kubernetes_objects() -> None:
    version = major_minor(latest_version())
    docs = [
        dra.node_doc("scheduler-perf-dra-bbbbb"),
        dra.driver_slice_doc("scheduler-perf-dra-bbbbb", 10, taint=True),
        *dra.partitionable_slice_docs(0),
        dra.consumable_slice_doc(0),
        dra.device_class_doc(),
        dra.device_class_doc("test-class-0", extended_resource_name="example.com/gpu-0"),
        *(dra.claim_template_doc("test", d) for d in (dra.ONE_DEVICE, dra.TWO_DEVICES, dra.FIRST_AVAILABLE)),
        *(dra.claim_template_doc("test", d) for d in (dra.TOLERATION, dra.CONSUMABLE)),
        dra.claim_doc("test-claim-with-selector-0", "init", dra.WITH_SELECTOR),
        *dra.preallocated_claim_docs(3, ["scheduler-perf-dra-bbbbb"], 10),
        dra.pod_with_claim_template_doc("test-drabbbbb", "test"),
        dra.pod_with_extended_resource_doc("test-dra-0", "test", "example.com/gpu-0"),
    ]
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_claim_template_workload_allocates_one_device_per_pod_on_its_node() -> None:
    # 4 nodes x 10 devices, 15 + 25 pods: all 40 devices taken, each once (Run.verify checks every allocation).
    row = measure(_dra_workload("SchedulingWithResourceClaimTemplate/5000pods_500nodes", Sizes(4, 15, 25)), False)
    assert row["problems"] == [] and row["all_scheduled"], row["problems"]
    assert row["scheduled"] == 25 and row["nodes"] == 4
    assert any("QueueingHintsEnabled: threshold 56" in note for note in row["deviations"])


def test_one_pod_too_many_for_the_devices_is_reported() -> None:
    # 41 pods for 40 devices: the last one must stay Pending with kube-scheduler's message, and the row says so.
    row = measure(_dra_workload("SchedulingWithResourceClaimTemplate/5000pods_500nodes", Sizes(4, 15, 26)), False)
    assert not row["all_scheduled"] and row["scheduled"] == 25
    assert any("cannot allocate all claims" in p for p in row["problems"]), row["problems"]


@pytest.mark.parametrize("fill", ["empty", "half", "full"])
def test_steady_state_reuses_the_devices_of_deleted_pods(fill: str) -> None:
    # full: 3 nodes x 10 devices, 20 allocated up front, 10 free: 60 pods in batches of 10 fit only when each
    # deleted pod's claim is deleted and its device freed. Every batch is checked at the moment it was bound.
    name = f"SteadyStateClusterResourceClaimTemplate/{fill}_500nodes"
    row = measure(_dra_workload(name, Sizes(3, 0, 60)), False, score_all_nodes=True)
    assert row["problems"] == [] and row["all_scheduled"] and row["scheduled"] == 60, row["problems"]


def test_steady_state_fails_when_deleted_pods_keep_their_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same run with pods taken off their nodes but their claims left allocated (no resourceclaim controller):
    # the second batch finds no free device. Shows the workload's count depends on real release.
    monkeypatch.setattr(dra, "delete_pod", lambda scheduler, pod: scheduler.evict(pod))
    row = measure(_dra_workload("SteadyStateClusterResourceClaimTemplate/full_500nodes", Sizes(3, 0, 30)), False)
    assert row["scheduled"] == 10 and not row["all_scheduled"]


def test_checker_finds_a_device_given_twice_and_an_unreachable_one() -> None:
    built = dra.build_scheduling_with_template(Sizes(2, 0, 1))
    scheduler = Scheduler(ClusterState(built.nodes), default_config())
    scheduler.cluster.dra = DRAState(built.dra, scheduler.cluster)
    node_a, node_b = (n.name for n in built.nodes)
    one = AllocationResult((DeviceRequestAllocationResult("req-0", dra.DRIVER, node_a, "instance-0"),))
    ghost = AllocationResult((DeviceRequestAllocationResult("req-0", dra.DRIVER, node_a, "instance-99"),))
    checker = dra.Checker(built.dra, scheduler, [dra.Holding("init/a", one, None)])
    assert checker.check([]) == []
    assert checker.check([dra.Holding("test/b", one, node_a)]) == [
        f"device {dra.DRIVER}/{node_a}/instance-0 given to init/a, test/b"
    ]
    assert checker.check([dra.Holding("test/c", one, node_b)])[0] == (
        f"test/c: device {dra.DRIVER}/{node_a}/instance-0 is not reachable from node {node_b}"
    )
    assert checker.check([dra.Holding("test/d", ghost, node_a)]) == [
        f"test/d: device {dra.DRIVER}/{node_a}/instance-99 does not exist"
    ]


@pytest.mark.integration
def test_quick_dra_benchmarks_schedule_what_they_must(tmp_path: Path) -> None:
    out = tmp_path / "dra.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--workload", "DRA", "--score-all-nodes", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["workload"]: r for r in json.loads(out.read_text())["workloads"]}
    assert set(rows) == {w.name for w in select(["DRA"])}
    for r in rows.values():
        assert r["problems"] == [] and r["scheduled"] == r["expected_scheduled"] > 0, (r["workload"], r["problems"])
        assert r["nodes_scored"].startswith("all nodes") and r["feasible_nodes_mean"] > 0


def test_fabric_benchmarks_run_and_keep_gangs_in_their_domains() -> None:
    """benchmarks/fabric.py and fabric_timeline.py, small: every gang placed keeps its NVLink domain count at the
    fewest possible, ranks cross no more boundaries than the domains used, preemption evicts the optimum."""
    from benchmarks import fabric, fabric_timeline

    trial = fabric.trial(0)
    assert trial["placed"] > 0 and set(trial["rack_x"]) == {0} and set(trial["host_x"]) == {0}
    assert fabric.preemption(5)["optimal"] == 5
    run = fabric_timeline.run(0, 30, fabric=True)
    assert run["extra"] and set(run["extra"]) == {0}
    assert max(fabric_timeline.run(0, 30, fabric=False)["extra"]) > 0  # without a request gangs spread


def test_fabric_kueue_reads_topology_assignments_and_runs_accelsched_side() -> None:
    """benchmarks/fabric_kueue.py without Kueue: a v1beta2 TopologyAssignment (universal and individual values,
    prefix and suffix, universal and individual pod counts) read rank by rank; accelsched's side keeps every
    placed gang in one block with whole slices per rack."""
    from benchmarks import fabric_kueue as fk

    host = fk.HOST
    assignment = {
        "levels": [fk.BLOCK, host],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"universal": "b0"},
                    {"individual": {"prefix": "t1-b0-r", "roots": ["0-h1", "1-h0"]}},
                ],
                "podCounts": {"individual": [2, 1]},
            },
            {
                "domainCount": 1,
                "valuesPerLevel": [{"universal": "b0"}, {"individual": {"suffix": "-h3", "roots": ["t1-b0-r2"]}}],
                "podCounts": {"universal": 2},
            },
        ],
    }
    assert fk._ranks(assignment, "t1-") == ["b0-r0-h1", "b0-r0-h1", "b0-r1-h0", "b0-r2-h3", "b0-r2-h3"]
    case = fk.fabric(0, 2, 6, fk.REQUESTS["slices"])
    out = fk.accelsched(case)
    placed = [hosts for hosts in out.hosts.values() if hosts]
    assert placed
    for hosts in placed:
        assert len({h.split("-")[0] for h in hosts}) == 1  # one block
        for i in range(0, len(hosts), 4):  # slices of 4 consecutive ranks, each in one rack
            assert len({h.rsplit("-", 1)[0] for h in hosts[i : i + 4]}) == 1, hosts


@pytest.mark.integration
def test_deep_queue_drains_through_kueue_and_accelsched(tmp_path: Path) -> None:
    """benchmarks/deepqueue.py, tiny: both systems admit every Workload of the queue (quota freed as they finish),
    each Workload's wait measured from its create to its QuotaReserved."""
    from benchmarks import deepqueue

    try:
        rows = deepqueue.run(12, 2, 4, 0.5, deepqueue.SYSTEMS, tmp_path, timeout=120)
    except deepqueue.Unavailable as exc:
        pytest.skip(str(exc))
    assert [r["system"] for r in rows] == ["kueue", "accelsched"]
    for r in rows:
        assert r["admitted"] == r["workloads"] == 12, r
        assert r["admissions_per_s"] > 0 and 0 < r["wait_p50_s"] <= r["wait_p99_s"] <= r["wait_max_s"], r
        # 14 GPUs through a 4-GPU queue, each held 0.5 s: the last wait is at least a few rounds of finishing.
        assert r["wait_max_s"] >= 1.0, r
