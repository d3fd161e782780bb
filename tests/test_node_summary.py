"""tests/node/summary.py: the last lines of `make node-e2e` and `make chart-e2e` from the pods the tests recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SUMMARY = Path(__file__).resolve().parent / "node" / "summary.py"


def _run(tmp_path: Path, rows: list[dict], code: int, *mode: str) -> subprocess.CompletedProcess[str]:
    report = tmp_path / "report.jsonl"
    report.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [sys.executable, str(SUMMARY), str(report), str(code), *mode]
    return subprocess.run(args, capture_output=True, text=True, check=False)


def _row(pod: str, agree: bool, **extra: object) -> dict:
    devices = ["d-0"]
    return {
        "test": "t",
        "pod": pod,
        "annotation": devices,
        "checkpoint": devices if agree else [],
        "agree": agree,
        **extra,
    }


def test_chart_line_counts_pods_that_ran_and_were_bound_in_cluster(tmp_path: Path) -> None:
    rows = [
        _row("w/a", True, in_cluster=True),
        _row("w/b", True, in_cluster=False),
        _row("w/c", False, in_cluster=True),
    ]
    proc = _run(tmp_path, rows, 1, "chart")
    lines = proc.stdout.splitlines()
    assert lines[-1] == "chart e2e: 1/3 pods ran, scheduled by the in-cluster accelsched"
    assert "  t: w/b: not bound by the chart's scheduler pod" in lines
    assert any(line.startswith("  t: w/c: accelsched chose") for line in lines)
    assert proc.returncode == 1


def test_node_line_is_unchanged(tmp_path: Path) -> None:
    proc = _run(tmp_path, [_row("n/a", True), _row("n/b", True)], 0)
    assert proc.stdout.splitlines()[-1] == "node e2e: 2/2 pods ran with the devices accelsched chose"
    assert proc.returncode == 0


def test_no_pod_recorded_fails_even_when_pytest_passed(tmp_path: Path) -> None:
    proc = _run(tmp_path, [], 0, "chart")
    assert proc.stdout.strip() == "chart e2e: 0/0 pods ran, scheduled by the in-cluster accelsched"
    assert proc.returncode == 1
