"""The benchmark harness runs end to end and schedules what it must; speed is reported, never asserted."""

from __future__ import annotations

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

from benchmarks.workloads import WORKLOADS, node_doc, pod_doc, select  # noqa: E402


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
