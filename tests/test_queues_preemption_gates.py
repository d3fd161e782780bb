"""Kueue's Workload preemption gates (v0.19.2): read and refused as the CRD schema refuses them, honoured only with
the feature gate ConcurrentAdmission or MultiKueueOrchestratedPreemption, and worded as Kueue words them.

Each test names the rule of Kueue's source it pins: workload.HasClosedPreemptionGate (a gate without a position is
closed), scheduler.go processEntry (a Preempt-mode head with targets and a closed gate preempts nothing, reserves
nothing, QuotaReserved False Pending and BlockedOnPreemptionGates True PreemptionGated with "Workload requires
preemption, but it's gated"), requeueAndUpdate (its patch written only if that last condition changed),
cluster_queue.go RequeueIfNotPresent (PreemptionGated: immediate in StrictFIFO only), SetQuotaReservation (the
condition reset on admission) and evict.prepareForEviction (reset and every gate closed on eviction).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from accelsched.api.loader import Inputs, load
from accelsched.cli import main
from accelsched.errors import InputError
from accelsched.queues import explain, preemptiongates
from accelsched.queues.admission import Outcome, QueueResult, admit
from tests.test_queues_admission import GPU, KUEUE, cluster_queue, flavor, job, local_queue, node, quota, run

GATED = "Workload requires preemption, but it's gated"
BLOCKED = {"type": "BlockedOnPreemptionGates", "status": "True", "reason": "PreemptionGated", "message": GATED}
REFUSED = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": GATED}


def config(**gates: bool) -> dict:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}


def workload(
    name: str,
    gpus: int,
    priority: int = 0,
    gates: list[str] | None = None,
    positions: dict[str, str] | None = None,
    running: bool = False,
    conditions: list[dict] | None = None,
) -> dict:
    """A Workload object of one pod asking ``gpus``; ``running``: admitted already (status.admission)."""
    container = {"name": "c", "image": "x", "resources": {"requests": {GPU: str(gpus)}}}
    spec: dict[str, Any] = {
        "queueName": "lq",
        "priority": priority,
        "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
    }
    if gates is not None:
        spec["preemptionGates"] = [{"name": g} for g in gates]
    status: dict[str, Any] = {}
    if positions:
        status["preemptionGates"] = [
            {"name": g, "position": p, "lastTransitionTime": "2026-12-06T10:00:00Z"} for g, p in positions.items()
        ]
    if running:
        status["admission"] = {
            "clusterQueue": "team-a",
            "podSetAssignments": [{"name": "main", "flavors": {GPU: "default"}, "count": 1}],
        }
    if conditions:
        status["conditions"] = [{**c, "lastTransitionTime": "2026-12-06T10:00:00Z"} for c in conditions]
    doc = {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": "default"}, "spec": spec}
    if status:
        doc["status"] = status
    return doc


def queue(strategy: str = "BestEffortFIFO") -> list[dict]:
    """One ClusterQueue of 8 GPUs whose workloads may preempt lower priorities in it."""
    return [
        node("n1"),
        flavor("default"),
        cluster_queue(
            "team-a",
            [("default", [quota(GPU, 8)])],
            preemption={"withinClusterQueue": "LowerPriority"},
            queueingStrategy=strategy,
        ),
        local_queue("lq", "team-a"),
    ]


def outcomes(tmp_path: Path, docs: list[dict]) -> dict[str, dict]:
    return {w["name"]: w for w in run(tmp_path, docs)["workloads"]}


def conditions(w: dict) -> dict[str, dict]:
    return {c["type"]: c for c in w["conditions"]}


def admitted(tmp_path: Path, docs: list[dict]) -> tuple[dict[str, Outcome], QueueResult, Inputs]:
    """Admission through the Python API: the outcomes by workload name, the result and the inputs."""
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    inputs = load([path])
    result = admit(inputs.queues, inputs.pods, inputs.namespaces, inputs.nodes)
    return {o.info.name: o for o in result.outcomes}, result, inputs


def explained(tmp_path: Path, docs: list[dict], name: str) -> explain.QueueExplanation:
    outcomes, result, inputs = admitted(tmp_path, docs)
    return explain.explain(result, outcomes[name], inputs.pods, inputs.namespaces, inputs.nodes)


# ------------------------------------------------------------------------------------------------ the cycle


@pytest.mark.parametrize("gate", preemptiongates.FEATURE_GATES)
def test_a_closed_gate_keeps_a_workload_from_preempting_with_kueues_words(tmp_path: Path, gate: str) -> None:
    """low runs with 6 of 8; high (priority 100) wants 4: Preempt mode with low as its target. Its only gate has
    no position in status, so it is closed: nothing is preempted, and high carries both of Kueue's conditions."""
    docs = [config(**{gate: True}), *queue(), workload("low", 6, running=True), workload("high", 4, 100, ["orch"])]
    w = outcomes(tmp_path, docs)
    assert w["low"]["admitted"] and not w["low"]["preempted"]
    assert not w["high"]["admitted"]
    assert w["high"]["conditions"] == [REFUSED, BLOCKED]


@pytest.mark.parametrize("configuration", [None, config(), config(ConcurrentAdmission=False)])
def test_without_either_feature_gate_the_gates_are_ignored(tmp_path: Path, configuration: dict | None) -> None:
    """Both feature gates are alpha and off by default: the closed gate changes nothing, high preempts low."""
    docs = [*queue(), workload("low", 6, running=True), workload("high", 4, 100, ["orch"])]
    w = outcomes(tmp_path, ([configuration] if configuration else []) + docs)
    assert w["high"]["admitted"] and w["low"]["preempted"]
    assert "BlockedOnPreemptionGates" not in conditions(w["high"])


@pytest.mark.parametrize(
    ("gates", "positions", "closed"),
    [
        (["orch"], {"orch": "Open"}, False),
        (["orch"], {"orch": "Closed"}, True),
        (["orch", "mk"], {"orch": "Open"}, True),  # mk has no position: closed
        (["orch"], {"other": "Open"}, True),  # a position for a gate not in spec opens nothing
        ([], {"orch": "Closed"}, False),  # a position without its gate in spec closes nothing
    ],
)
def test_a_gate_is_closed_unless_status_gives_it_the_position_open(
    tmp_path: Path, gates: list[str], positions: dict[str, str], closed: bool
) -> None:
    docs = [
        config(MultiKueueOrchestratedPreemption=True), *queue(),
        workload("low", 6, running=True), workload("high", 4, 100, gates, positions),
    ]  # fmt: skip
    w = outcomes(tmp_path, docs)
    assert w["high"]["admitted"] is not closed and w["low"]["preempted"] is not closed
    assert (conditions(w["high"]).get("BlockedOnPreemptionGates") == BLOCKED) is closed


def test_a_gate_matters_only_to_a_workload_that_must_preempt(tmp_path: Path) -> None:
    """Gated workloads that fit are admitted (Fit mode); one that needs preemption and has no candidate (a higher
    priority holds the quota) gets the usual words, not the gate's: stuck goes first (priority 100) and finds 2
    of 8 left; fits then takes them."""
    docs = [
        config(ConcurrentAdmission=True), *queue(), workload("top", 6, 1000, running=True),
        workload("fits", 2, gates=["orch"]), workload("stuck", 4, 100, ["orch"]),
    ]  # fmt: skip
    w = outcomes(tmp_path, docs)
    assert w["fits"]["admitted"]
    assert not w["stuck"]["admitted"] and "BlockedOnPreemptionGates" not in conditions(w["stuck"])
    assert conditions(w["stuck"])["QuotaReserved"]["message"].endswith("2 more needed")


def test_best_effort_fifo_a_gated_head_steps_aside_for_the_next_workload(tmp_path: Path) -> None:
    """Gated, high preempts nothing and goes to the inadmissible workloads alone (no bulk move: its reason is
    PreemptionGated): small (priority 0, 2 GPUs) behind it becomes the head and is admitted on the 2 GPUs left."""
    docs = [
        config(ConcurrentAdmission=True), *queue(),
        workload("low", 6, running=True), workload("high", 4, 100, ["orch"]), workload("small", 2),
    ]  # fmt: skip
    w = outcomes(tmp_path, docs)
    assert w["small"]["admitted"] and not w["high"]["admitted"] and not w["low"]["preempted"]
    assert w["high"]["conditions"] == [REFUSED, BLOCKED]


def test_strict_fifo_a_gated_head_stays_the_head_and_blocks_its_queue(tmp_path: Path) -> None:
    """StrictFIFO requeues it at once (RequeueIfNotPresent: immediate but for NamespaceMismatch): it stays the head,
    and small behind it is never tried, its pods waiting behind it."""
    docs = [
        config(ConcurrentAdmission=True), *queue("StrictFIFO"),
        workload("low", 6, running=True), workload("high", 4, 100, ["orch"]), workload("small", 2),
    ]  # fmt: skip
    w = outcomes(tmp_path, docs)
    assert not w["small"]["admitted"] and w["small"]["conditions"] == []
    assert w["high"]["conditions"] == [REFUSED, BLOCKED]


def test_admission_turns_a_blocked_condition_false(tmp_path: Path) -> None:
    """SetQuotaReservation resets BlockedOnPreemptionGates as it resets Evicted and Preempted: False, reason
    QuotaReserved, "Previously: " and its message. Here the room is free now, so the workload fits."""
    gated = workload("high", 4, 100, ["orch"], conditions=[REFUSED, BLOCKED])
    docs = [config(ConcurrentAdmission=True), *queue(), gated]
    w = outcomes(tmp_path, docs)
    assert w["high"]["admitted"]
    assert conditions(w["high"])["BlockedOnPreemptionGates"] == {
        "type": "BlockedOnPreemptionGates", "status": "False", "reason": "QuotaReserved",
        "message": f"Previously: {GATED}",
    }  # fmt: skip


def test_gated_again_kueue_writes_nothing_when_the_blocked_condition_already_says_so(tmp_path: Path) -> None:
    """requeueAndUpdate keeps only the last condition's answer (``updated = SetBlockedOnPreemptionGatesCondition``):
    with BlockedOnPreemptionGates already True with these words, the patch is not sent, so QuotaReserved keeps the
    message it had (here an earlier NoFit's) and the pods show it."""
    earlier = {**REFUSED, "message": "couldn't assign flavors to pod set main: something earlier"}
    docs = [
        config(ConcurrentAdmission=True), *queue(), workload("low", 6, running=True),
        workload("high", 4, 100, ["orch"], conditions=[earlier, BLOCKED]),
    ]  # fmt: skip
    w = outcomes(tmp_path, docs)
    assert not w["high"]["admitted"] and w["high"]["conditions"] == [earlier, BLOCKED]
    docs[-1]["status"]["conditions"][1]["message"] = "other words"  # changed: written, both conditions
    w = outcomes(tmp_path, docs)
    assert w["high"]["conditions"] == [REFUSED, BLOCKED]


def test_an_eviction_closes_every_gate_and_turns_a_blocked_condition_false(tmp_path: Path) -> None:
    """prepareForEviction: mid, running with its gate open, is preempted by high: its gate is Closed (whoever
    opened it decides again). A BlockedOnPreemptionGates still True at an eviction turns False with the eviction's
    reason and message (admission resets it first, so here it is set on the evicted outcome by hand)."""
    docs = [
        config(ConcurrentAdmission=True), *queue(),
        workload("mid", 8, 50, ["orch"], {"orch": "Open"}, running=True), workload("high", 4, 100),
    ]  # fmt: skip
    mid = admitted(tmp_path, docs)[0]["mid"]
    assert mid.preempted and mid.gates.closed() == ["orch"] and mid.gates.positions == {"orch": "Closed"}
    assert "BlockedOnPreemptionGates" not in {c["type"] for c in mid.conditions}  # never True: not written
    again = Outcome(mid.info, conditions=[dict(BLOCKED)])
    again.evict("InClusterQueue", "preempted by someone")
    assert {c["type"]: (c["status"], c["reason"], c["message"]) for c in again.conditions}[
        "BlockedOnPreemptionGates"
    ] == ("False", "Preempted", "preempted by someone")


def test_gates_positions_after_eviction() -> None:
    """close_all turns every position the status holds Closed and adds none; open_all opens every spec gate."""
    gates = preemptiongates.Gates(("a", "b"), {"a": "Open", "x": "Open"})
    assert gates.closed() == ["b"]
    assert gates.close_all().positions == {"a": "Closed", "x": "Closed"} and gates.close_all().closed() == ["a", "b"]
    assert gates.open_all().closed() == []


# ------------------------------------------------------------------------------------------------ explain


def test_explain_names_the_closed_gate_and_offers_opening_it_checked(tmp_path: Path) -> None:
    """The gated workload's explanation: its quota blocker, the holder it would preempt, the closed gate, and the
    changes admission admits it after: opening the gate (preempting low) among them."""
    docs = [config(ConcurrentAdmission=True), *queue(), workload("low", 6, running=True)]
    docs.append(workload("high", 4, 100, ["orch", "mk"], {"mk": "Open"}))
    why = explained(tmp_path, docs, "high")
    assert why.message == GATED and why.gates == ["orch"]
    assert "gated: it needs to preempt, and its preemption gate orch is closed" in "\n".join(why.lines())
    gate = next(f for f in why.fixes if f.kind == "preemptionGate")
    assert gate.text == "open preemption gate orch of workload default/high (status.preemptionGates)"
    assert gate.preempted == ["default/low"] and gate.size == 6
    assert why.to_json()["closedPreemptionGates"] == ["orch"]


def test_explain_says_nothing_of_gates_when_the_feature_gates_are_off(tmp_path: Path) -> None:
    """A workload with a gate in a Kueue that ignores gates waits for quota, not for its gate."""
    docs = [*queue(), workload("top", 6, 1000, running=True), workload("high", 4, 100, ["orch"])]
    why = explained(tmp_path, docs, "high")
    assert why.gates == [] and not any(f.kind == "preemptionGate" for f in why.fixes)


def test_the_explain_command_prints_the_gate_for_a_jobs_pod(tmp_path: Path) -> None:
    """``accelsched explain POD`` on a Job's pod whose Workload (named as Kueue names it) carries the gate."""
    base = [config(ConcurrentAdmission=True), *queue(), workload("low", 6, running=True)]
    train = job("train", "lq", 1, gpus=4, cpu="0")
    train["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {GPU: "4"}}
    name = run(tmp_path, [*queue(), train])["workloads"][0]["name"]
    gated = workload(name, 4, 100, ["orch"])
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all([*base, train, gated]))
    pods = [p["name"] for p in run(tmp_path, [*base, train, gated])["pods"]]
    assert len(pods) == 1
    result = CliRunner().invoke(main, ["explain", f"default/{pods[0]}", "-f", str(path)])
    assert result.exit_code == 0, result.output
    assert GATED in result.output and "its preemption gate orch is closed" in result.output


# ------------------------------------------------------------------------------------------------ the API


def _gated_docs(**changes: Any) -> list[dict]:
    wl = workload("high", 4, 100, ["orch"], {"orch": "Open"})
    wl["spec"]["preemptionGates"] = changes.get("spec", wl["spec"]["preemptionGates"])
    wl["status"]["preemptionGates"] = changes.get("status", wl["status"]["preemptionGates"])
    return [*queue(), wl]


_T = "2026-12-06T10:00:00Z"
_OBJ = "Workload default/high"
BAD = [
    ({"spec": [{"name": f"g{i}"} for i in range(9)]}, "spec.preemptionGates",
     "Too many: 9: must have at most 8 items"),
    ({"spec": [{"name": ""}]}, "spec.preemptionGates[0].name",
     'Invalid value: "": spec.preemptionGates[0].name in body should be at least 1 chars long'),
    ({"spec": [{"name": "g" * 64}]}, "spec.preemptionGates[0].name", "Too long: may not be more than 63 bytes"),
    ({"spec": [{"name": "a"}, {"name": "a"}]}, "spec.preemptionGates[1]", 'Duplicate value: {"name":"a"}'),
    ({"spec": [{}]}, "spec.preemptionGates[0].name", "Required value"),
    ({"spec": [{"name": "a", "when": "now"}]}, "spec.preemptionGates[0].when", "unknown field"),
    ({"status": [{"name": f"g{i}", "position": "Open", "lastTransitionTime": _T} for i in range(9)]},
     "status.preemptionGates", "Too many: 9: must have at most 8 items"),
    ({"status": [{"name": "orch", "position": "Ajar", "lastTransitionTime": _T}]},
     "status.preemptionGates[0].position", 'Unsupported value: "Ajar": supported values: "Closed", "Open"'),
    ({"status": [{"name": "orch", "position": "Open"}]}, "status.preemptionGates[0].lastTransitionTime",
     "Required value"),
    ({"status": [{"name": "orch", "position": "Open", "lastTransitionTime": _T}] * 2}, "status.preemptionGates[1]",
     'Duplicate value: {"name":"orch"}'),
    ({"status": [{"name": "x" * 64, "position": "Open", "lastTransitionTime": _T}]},
     "status.preemptionGates[0].name", "Too long: may not be more than 63 bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "field", "message"), BAD)
def test_bad_preemption_gates_are_refused_naming_the_field(
    tmp_path: Path, changes: dict, field: str, message: str
) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(_gated_docs(**changes)))
    with pytest.raises(InputError) as info:
        load([path])
    assert (info.value.obj, info.value.field) == (_OBJ, field)
    assert message in info.value.message


def test_eight_gates_of_63_characters_are_read_in_order(tmp_path: Path) -> None:
    names = [f"{i}" * 63 for i in range(8)]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(_gated_docs(spec=[{"name": n} for n in names], status=[])))
    gates = load([path]).queues.workloads["default/high"].preemption_gates
    assert gates.names == tuple(names) and gates.closed() == names


def test_the_cli_exits_2_with_one_line_for_a_bad_gate(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump_all(_gated_docs(spec=[{"name": "a"}, {"name": "a"}])))
    result = CliRunner().invoke(main, ["schedule", "-f", str(path)])
    assert result.exit_code == 2
    assert [line for line in result.output.splitlines() if line] == [
        f'accelsched: error: {path}: {_OBJ}: spec.preemptionGates[1]: Duplicate value: {{"name":"a"}}'
    ]


@pytest.mark.parametrize(
    ("gates", "on"),
    [({}, False), ({"ConcurrentAdmission": True}, True), ({"MultiKueueOrchestratedPreemption": True}, True),
     ({"ConcurrentAdmission": False, "MultiKueueOrchestratedPreemption": False}, False)],
)  # fmt: skip
def test_the_configuration_turns_gates_on_with_either_feature_gate(tmp_path: Path, gates: dict, on: bool) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all([config(**gates), *queue()]))
    assert load([path]).queues.config.preemption_gates is on


def test_live_mode_closes_a_preempted_workloads_gates_in_its_eviction_patch() -> None:
    """The eviction patch live mode writes on a preempted Workload of ours (Preempted, Evicted) also carries
    status.preemptionGates, each Closed at the time of the write (evict.closeAllPreemptionGates)."""
    from accelsched.live import workloadstatus
    from tests.test_queues_live import reclaimed_borrower

    def gated(borrower: dict) -> None:
        borrower["spec"]["preemptionGates"] = [{"name": "orch"}]
        borrower["status"]["preemptionGates"] = [{"name": "orch", "position": "Open", "lastTransitionTime": _T}]

    session, store = reclaimed_borrower(gated)
    (write,), _ = workloadstatus.preemptions(session.queues, store, {"accelsched"}, now="T1")
    closed = [{"name": "orch", "position": "Closed", "lastTransitionTime": "T1"}]
    assert write.patch["status"]["preemptionGates"] == closed
    session, store = reclaimed_borrower()
    (unchanged,), _ = workloadstatus.preemptions(session.queues, store, {"accelsched"}, now="T1")
    assert "preemptionGates" not in unchanged.patch["status"]  # none to close
