"""explain for queues (accelsched/queues/explain.py): which quota blocks a workload, the borrowing left in its cohort,
whose workloads hold the quota, and the smallest change that admits it.

Each change offered is applied here to the input files, as a person would edit them (the change's own words are
parsed), and ``schedule`` is run again from the edited files: the workload must then be admitted. The explainer
checks its changes itself on a copy of the state; these tests check them from scratch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from accelsched.api.loader import load
from accelsched.cli import main
from accelsched.engine import Session, schedule
from accelsched.explain import explain_pod

TWO_TEAMS = Path(__file__).resolve().parents[1] / "examples" / "queues" / "two-teams.yaml"
GPU = "nvidia.com/gpu"


def documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(TWO_TEAMS.read_text()) if d]


def write(tmp_path: Path, docs: list[dict[str, Any]], name: str = "in.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def gpu_quota(docs: list[dict[str, Any]], cluster_queue: str) -> dict[str, Any]:
    cq = find(docs, "ClusterQueue", cluster_queue)
    (q,) = [r for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == GPU]
    return q


def admitted(path: Path) -> dict[str, bool]:
    """Job name -> admitted, from a fresh ``schedule`` of the file."""
    session, _ = schedule([path])
    assert session.queues is not None
    return {o.info.name.split("-")[1]: o.admitted for o in session.queues.outcomes}


def explained(path: Path, job: str):
    session = Session.start(load([path]))  # explain_pod schedules it
    pod = next(p for p in session.inputs.pods if p.name.startswith(f"{job}-"))
    return explain_pod(session, pod.key).queue


def apply(change: str, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Edit the documents as the change's words say (and fail on words this does not know)."""
    if m := re.fullmatch(r"raise (nominalQuota|borrowingLimit) of ([\w-]+)/([\w-]+) nvidia\.com/gpu by (\d+)", change):
        field, cq, _flavor, by = m.groups()
        q = gpu_quota(docs, cq)
        q[field] = int(q.get(field, 0)) + int(by)
        return docs
    if m := re.fullmatch(r"wait for workload [\w-]+/job-([\w]+)-[0-9a-f]{5} \(\d+ nvidia\.com/gpu\) to finish", change):
        (job,) = m.groups()
        return [d for d in docs if not (d["kind"] == "Job" and d["metadata"]["name"] == job)]
    if m := re.fullmatch(r"set spec\.preemption\.(\w+): (\w+) on ClusterQueue ([\w-]+)", change):
        policy, value, cq = m.groups()
        find(docs, "ClusterQueue", cq)["spec"].setdefault("preemption", {})[policy] = value
        return docs
    raise AssertionError(f"a change this test cannot apply: {change}")


def test_a_job_short_of_quota_names_the_quota_the_holders_and_changes_that_admit_it(tmp_path: Path) -> None:
    path = write(tmp_path, documents())
    why = explained(path, "ablation")
    assert why.message.endswith("insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed")
    (block,) = why.blockers
    assert (block.cluster_queue, block.flavor, block.resource) == ("team-a", "a100", GPU)
    # team-a holds 12 of its 8 (4 borrowed from team-b, whose own eval holds the other 4): nothing left
    assert (block.requested, block.used, block.nominal, block.available, block.borrow_left) == (4, 12, 8, 0, 0)
    assert [(h.workload.split("/")[1].split("-")[1], h.amount, h.borrowing) for h in why.holders] == [
        ("pretrain", 8, True),
        ("finetune", 4, True),
        ("eval", 4, False),
    ]  # biggest first, then by name
    assert all(h.preemptible == "" for h in why.holders)  # team-a's preemption policy is Never everywhere
    kinds = [f.kind for f in why.fixes]
    assert kinds[0] == "wait" and "nominalQuota" in kinds
    assert why.fixes[0].text.startswith("wait for workload team-a/job-finetune-")  # the smallest holder that frees 4
    nominal = next(f for f in why.fixes if f.kind == "nominalQuota")
    assert nominal.text == "raise nominalQuota of team-a/a100 nvidia.com/gpu by 4"
    for fix in why.fixes:
        edited = write(tmp_path, apply(fix.text, documents()), "edited.yaml")
        assert admitted(edited)["ablation"], fix.text
    assert not admitted(path)["ablation"]


def test_raising_the_quota_by_less_than_offered_does_not_admit(tmp_path: Path) -> None:
    """The offered raise is the least: one GPU less leaves the workload waiting."""
    docs = documents()
    gpu_quota(docs, "team-a")["nominalQuota"] = 8 + 3
    assert not admitted(write(tmp_path, docs))["ablation"]


def running_team_a() -> list[dict[str, Any]]:
    """team-a's pretrain (8) and finetune (4) already run, 4 of them borrowed from team-b; team-b's eval asks for 8."""
    docs = [d for d in documents() if not (d["kind"] == "Job" and d["metadata"]["name"] == "ablation")]
    find(docs, "Job", "pretrain")["spec"]["template"]["spec"]["nodeName"] = "gpu-node-1"
    find(docs, "Job", "finetune")["spec"]["template"]["spec"]["nodeName"] = "gpu-node-2"
    find(docs, "Job", "eval")["spec"].update(parallelism=2, completions=2)
    return docs


def test_a_queue_that_cannot_reclaim_is_told_which_policy_would_preempt_the_borrower(tmp_path: Path) -> None:
    """team-b's preemption policy is Never: its 8 GPUs are its own, but team-a borrows 4 of them."""
    why = explained(write(tmp_path, running_team_a()), "eval")
    (block,) = why.blockers
    assert (block.cluster_queue, block.used, block.nominal, block.available, block.borrow_left) == (
        "team-b",
        0,
        8,
        4,
        0,
    )
    assert [(h.workload.split("-")[2], h.amount, h.borrowing, h.preemptible) for h in why.holders] == [
        ("pretrain", 8, True, ""),
        ("finetune", 4, True, ""),
    ]
    policy = next(f for f in why.fixes if f.kind == "preemptionPolicy")
    assert policy.text == "set spec.preemption.reclaimWithinCohort: Any on ClusterQueue team-b"
    assert len(policy.preempted) == 1 and policy.preempted[0].startswith("team-a/job-finetune-")
    # equal sizes (4 GPUs each): waiting changes nothing, so it comes first
    assert [f.kind for f in why.fixes] == ["wait", "nominalQuota", "preemptionPolicy"]
    outcome = admitted(write(tmp_path, apply(policy.text, running_team_a()), "edited.yaml"))
    assert outcome["eval"] and not outcome["finetune"] and outcome["pretrain"]
    for fix in why.fixes:
        assert admitted(write(tmp_path, apply(fix.text, running_team_a()), "edited.yaml"))["eval"], fix.text


def test_a_borrowing_limit_that_binds_is_raised(tmp_path: Path) -> None:
    docs = documents()
    gpu_quota(docs, "team-a")["borrowingLimit"] = 2
    why = explained(write(tmp_path, docs), "finetune")
    (block,) = why.blockers
    assert block.borrowing_limit == 2 and block.borrow_left == 2  # team-b has 4 idle, the limit lets 2 go
    fix = next(f for f in why.fixes if f.kind == "borrowingLimit")
    assert fix.text == "raise borrowingLimit of team-a/a100 nvidia.com/gpu by 2"
    edited = apply(fix.text, docs)
    assert admitted(write(tmp_path, edited, "edited.yaml"))["finetune"]


def test_explain_prints_the_queue_explanation_and_puts_it_in_json() -> None:
    session, _ = schedule([TWO_TEAMS])
    (pod,) = [p for p in session.inputs.pods if p.name.startswith("ablation-")]
    text = CliRunner().invoke(main, ["explain", pod.key, "-f", str(TWO_TEAMS)], terminal_width=250)
    assert text.exit_code == 0, text.output
    assert (
        "queue: blocked by ClusterQueue team-a, flavor a100, nvidia.com/gpu: needs 4, used 12 of nominal 8"
        in text.output
    )
    assert "queue: smallest change that admits it: wait for workload team-a/job-finetune-" in text.output
    out = CliRunner().invoke(main, ["explain", pod.key, "-f", str(TWO_TEAMS), "-o", "json"])
    assert out.exit_code == 0, out.output
    queue = json.loads(out.output)["queue"]
    assert queue["blockedBy"][0]["used"] == "12" and queue["blockedBy"][0]["borrowLeft"] == "0"
    assert queue["smallestChange"]["kind"] == "wait"
    assert [h["amount"] for h in queue["heldBy"]] == ["8", "4", "4"]


@pytest.mark.parametrize("job", ["pretrain", "eval"])
def test_an_admitted_workload_has_no_queue_explanation(job: str) -> None:
    assert explained(TWO_TEAMS, job) is None
