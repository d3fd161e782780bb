"""The Prometheus rules and dashboard the chart ships, checked with the real promtool (Prometheus v0.316.0, built
from its Go module by hack/build-controlplane.sh prometheus): the rule file is valid, its unit tests
(tests/prometheus/rules_test.yaml) pass, and every dashboard query parses.

promtool is only looked up here, never built (the unit suite stays fast): `make test` builds it first
(hack/test-deps.sh); where it cannot, these tests skip saying so (and fail under CI, tests/prereqs.py). Whether each
dashboard query returns data from a live accelsched is tests/live/test_prometheus_live.py's part.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import prereqs
import pytest

REPO = Path(__file__).resolve().parent.parent
FILES = REPO / "charts" / "accelsched" / "files"
RULES = FILES / "prometheus-rules.yaml"
DASHBOARD = FILES / "dashboard.json"


@pytest.fixture(scope="module")
def promtool() -> Path:
    return prereqs.cached_binary("prometheus", "promtool")


def _promtool(promtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool), *args], capture_output=True, text=True, timeout=120, check=False)


def test_rules_are_valid(promtool: Path) -> None:
    proc = _promtool(promtool, "check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 10 rules found" in proc.stdout


def test_rules_unit_tests_pass(promtool: Path) -> None:
    proc = _promtool(promtool, "test", "rules", str(REPO / "tests" / "prometheus" / "rules_test.yaml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_a_broken_expectation_fails(promtool: Path, tmp_path: Path) -> None:
    """The unit tests can fail: the same file with one expected value changed does."""
    text = (REPO / "tests" / "prometheus" / "rules_test.yaml").read_text()
    broken = tmp_path / "rules_test.yaml"
    broken.write_text(text.replace("value: 0.125", "value: 0.25").replace("../../charts", str(REPO / "charts")))
    proc = _promtool(promtool, "test", "rules", str(broken))
    assert proc.returncode != 0
    assert "accelsched:accelerators_stranded:ratio" in proc.stdout + proc.stderr


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expr) of every target in the dashboard."""
    doc = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in doc["panels"] for t in p.get("targets", [])]


def test_dashboard_is_grafana_json_with_queries() -> None:
    doc = json.loads(DASHBOARD.read_text())
    assert doc["schemaVersion"] >= 39 and doc["uid"] and doc["title"]
    assert {v["name"] for v in doc["templating"]["list"]} >= {"datasource"}
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    assert len(dashboard_queries()) >= 8


def test_every_dashboard_query_parses(promtool: Path, tmp_path: Path) -> None:
    """Each query, with Grafana's $__rate_interval as a duration, as a recording rule that promtool checks."""
    rules = [
        {"record": f"dashboard:query_{i}", "expr": expr.replace("$__rate_interval", "5m")}
        for i, (_, expr) in enumerate(dashboard_queries())
    ]
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = _promtool(promtool, "check", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout
