"""The queue panel in Chromium (issue 27, "Queues"): with Kueue objects in the input, every ClusterQueue's and
cohort's quota, usage and borrowing per flavor and resource, and the queued workloads with their QuotaReserved
message, equal to ``accelsched schedule -o json``'s ``clusterQueues`` and ``workloads`` run as a separate process;
the cohort's sums are checked against the input's nominalQuota. Without Kueue objects the panel is hidden."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from browserkit import wait_rendered

from accelsched.queues.resources import format_amount, value
from accelsched.ui.state import DemoState, FilesState

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TWO_TEAMS = REPO / "examples" / "queues" / "two-teams.yaml"


def schedule_json(path: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", "from accelsched.cli import main; main()", "schedule", "-f", str(path), "-o", "json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def rows(page: Any, kind: str) -> dict[tuple[str, str, str], dict[str, str]]:
    got = page.eval_on_selector_all(
        f"#queues-body tr[data-{kind}]",
        "rs => rs.map(r => [r.dataset.cq || r.dataset.cohort, r.dataset.flavor, r.dataset.resource, Object.fromEntries("
        "[...r.querySelectorAll('td[data-field]')].map(t => [t.dataset.field, t.textContent]))])",
    )
    return {(name, flavor, resource): cells for name, flavor, resource, cells in got}


def test_the_queue_panel_equals_schedule_json(ui_server: Any, page: Any) -> None:
    expected = schedule_json(TWO_TEAMS)
    server = ui_server(FilesState.load([TWO_TEAMS]))
    page.goto(server.url)
    wait_rendered(page)
    page.wait_for_selector("#queues-panel:not([hidden]) #queues-body tr[data-cq]")

    cq_rows = rows(page, "cq")
    want = {
        (cq["name"], flavor, resource): (used, cq["borrowed"][flavor][resource])
        for cq in expected["clusterQueues"]
        for flavor, resources in cq["usage"].items()
        for resource, used in resources.items()
    }
    assert {k: (v["used"], v["borrowed"]) for k, v in cq_rows.items()} == want
    assert any(b != "0" for _, b in want.values()), "the example borrows: the check covers borrowing"

    # the quota shown is the input's nominalQuota, and each cohort's row sums its ClusterQueues
    docs = [d for d in yaml.safe_load_all(TWO_TEAMS.read_text()) if d and d.get("kind") == "ClusterQueue"]
    nominal = {
        (d["metadata"]["name"], f["name"], r["name"]): value(r["name"], r["nominalQuota"])
        for d in docs
        for g in d["spec"]["resourceGroups"]
        for f in g["flavors"]
        for r in f["resources"]
    }
    assert {k: v["nominal"] for k, v in cq_rows.items()} == {k: format_amount(k[2], n) for k, n in nominal.items()}
    cohort_of = {d["metadata"]["name"]: d["spec"].get("cohortName") for d in docs}
    for (cohort, flavor, resource), cells in rows(page, "cohort").items():
        members = [cq for cq, c in cohort_of.items() if c == cohort]
        total = sum(nominal[(cq, flavor, resource)] for cq in members)
        used = sum(value(resource, want[(cq, flavor, resource)][0]) for cq in members)
        assert (cells["nominal"], cells["used"]) == (format_amount(resource, total), format_amount(resource, used))

    queued = page.eval_on_selector_all(
        "#queues-body .queued li[data-workload]",
        "ls => ls.map(l => [l.dataset.workload, l.querySelector('.message').textContent])",
    )
    held = [
        [f"{w['namespace']}/{w['name']}", c["message"]]
        for w in expected["workloads"]
        if not w["admitted"]
        for c in w["conditions"]
        if c["type"] == "QuotaReserved"
    ]
    assert queued == held and held


def test_the_queue_panel_is_hidden_without_kueue_objects(ui_server: Any, page: Any) -> None:
    server = ui_server(DemoState.lab(12))  # the lab up to its fabric steps: Kueue's objects come with step 13
    page.goto(server.url)
    wait_rendered(page)
    page.wait_for_selector("#map .node-row[data-node]")
    assert page.locator("#queues-panel").is_hidden()
