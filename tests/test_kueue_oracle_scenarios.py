"""The Kueue oracle's scenarios (conformance/kueue) without Kueue: every generated scenario is a valid set of
v1beta2 objects accelsched reads, and placing it into a slot keeps every reference inside the slot."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from conformance.kueue import compare, generator  # noqa: E402
from conformance.kueue.scenario import GATE_LABEL, place  # noqa: E402


def test_generated_scenarios_are_read_by_accelsched_with_one_outcome_per_workload() -> None:
    for s in generator.generate(10, seed=4):
        objects, phases = place(s, "slot")
        namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"slot-p{i}"}}
                      for i in range(len(phases))]
        workloads = [w for phase in phases for w in phase]
        for i, w in enumerate(workloads):
            w["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{i:02d}Z"
        ours = compare.accelsched(compare.inputs(namespaces + objects, workloads, len(phases) - 1))
        assert sorted(ours) == sorted(f"{w['metadata']['namespace']}/{w['metadata']['name']}" for w in workloads)


def test_place_prefixes_every_cluster_scoped_name_and_reference_and_gates_every_cluster_queue() -> None:
    s = generator.build("tree", 11)
    objects, phases = place(s, "t7")
    for obj in objects:
        spec = obj.get("spec") or {}
        if obj["kind"] == "LocalQueue":
            assert obj["metadata"]["namespace"] in {"t7-p0", "t7-p1"}
            assert spec["clusterQueue"].startswith("t7-")
        else:
            assert obj["metadata"]["name"].startswith("t7-")
        if obj["kind"] == "ClusterQueue":
            assert spec["namespaceSelector"]["matchLabels"][GATE_LABEL] == "t7"
            assert spec["cohortName"].startswith("t7-")
            assert all(f["name"].startswith("t7-") for g in spec["resourceGroups"] for f in g["flavors"])
        if obj["kind"] == "Cohort" and "parentName" in spec:
            assert spec["parentName"].startswith("t7-")
    assert all(w["metadata"]["namespace"] == f"t7-p{i}" for i, phase in enumerate(phases) for w in phase)


def _claimant(s: generator.Scenario) -> dict | None:
    """The ClusterQueue a fairsharing contest's second phase leans to, if it has a contest's claimant's shape: none
    of the first phase's workloads, most of the second's, at most 2 of each resource, a weight above 0, and
    reclaimWithinCohort on."""
    first = {w["spec"]["queueName"] for w in s.phases[0]}
    second = [w["spec"]["queueName"] for w in s.phases[1]]
    for i, cq in enumerate(o for o in s.objects if o["kind"] == "ClusterQueue"):
        spec = cq["spec"]
        quotas = [q for g in spec["resourceGroups"] for f in g["flavors"] for q in f["resources"]]
        if (f"lq{i}" not in first and 2 * second.count(f"lq{i}") > len(second)
                and all(int(str(q["nominalQuota"]).removesuffix("Gi")) <= 8 if q["name"] == "memory"
                        else int(q["nominalQuota"]) <= 2 for q in quotas)
                and float(spec["fairSharing"]["weight"]) > 0
                and spec["preemption"]["reclaimWithinCohort"] != "Never"):
            return cq
    return None


def test_fairsharing_scenarios_are_often_a_contest_a_claimant_must_borrow_in() -> None:
    scenarios = generator.generate(60, seed=7, classes=[generator.FAIR_SHARING])
    contests = [s for s in scenarios if _claimant(s) is not None]
    assert len(contests) >= len(scenarios) // 4
    for s in contests:  # a lender: another ClusterQueue of the cohort with quota to lend
        assert any(int(q["nominalQuota"]) >= 4 for o in s.objects if o["kind"] == "ClusterQueue"
                   for g in o["spec"]["resourceGroups"] for f in g["flavors"] for q in f["resources"]
                   if q["name"] == generator.GPU)


def test_preemptiongates_scenarios_gate_some_workloads_and_accelsched_reads_them_with_the_feature_gate() -> None:
    """The preemptiongates class: the preemption class's scenario leaning on preemption, with a gate on some
    workloads (a few opened in status), read by accelsched with Kueue's Configuration carrying the feature gate."""
    import yaml

    from accelsched.api.loader import build_inputs, read_documents
    from conformance.kueue import runner

    scenarios = generator.generate(30, seed=5, classes=[generator.PREEMPTION_GATES])
    workloads = [w for s in scenarios for w in s.workloads()]
    gated = [w for w in workloads if w["spec"].get("preemptionGates")]
    opened = [w for w in gated if (w.get("status") or {}).get("preemptionGates")]
    assert 0.4 < len(gated) / len(workloads) < 0.8 and opened
    for s in scenarios:  # leaning on preemption: the second phase outranks the first, every queue may preempt
        assert all(cq["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
                   for cq in s.objects if cq["kind"] == "ClusterQueue")
        assert [{w["spec"]["priority"] for w in phase} for phase in s.phases] == [{10}, {1000}][:len(s.phases)]

    class Cluster:  # what runner.configuration reads of a KueueCluster
        fair_sharing = None
        feature_gates = generator.PREEMPTION_GATES_FEATURES

    s = next(s for s in scenarios if any((w.get("status") or {}).get("preemptionGates") for w in s.workloads()))
    objects, phases = place(s, "slot")
    flat = [w for phase in phases for w in phase]
    docs = runner.configuration(Cluster()) + compare.inputs(objects, flat, len(phases) - 1)  # type: ignore[arg-type]
    queues = build_inputs(read_documents("oracle.yaml", yaml.safe_dump_all(docs))).queues
    assert queues.config.preemption_gates
    read = {w["metadata"]["name"]: queues.workloads[f"{w['metadata']['namespace']}/{w['metadata']['name']}"]
            for w in flat}
    for w in flat:
        closed = read[w["metadata"]["name"]].preemption_gates.closed()
        position = ((w.get("status") or {}).get("preemptionGates") or [{}])[0].get("position")
        assert closed == (["orchestrator"] if w["spec"].get("preemptionGates") and position != "Open" else [])


def test_a_disagreement_counts_once_it_comes_back_on_a_second_run(monkeypatch) -> None:
    """--confirm's bookkeeping: each disagreeing scenario is judged again (here the second verdicts are given: the
    real runs are tests/live/test_kueue_oracle.py's); one that agrees then takes the first verdict's place."""
    from conformance.kueue import __main__ as oracle
    from conformance.kueue import runner

    a, b, c = (generator.build("cohort", seed) for seed in (1, 2, 3))
    tally = runner.Tally([runner.Verdict(a), runner.Verdict(b, diffs=["condition-QuotaReserved: x"]),
                          runner.Verdict(c, diffs=["admitted: y"])])
    asked: list[list] = []

    def judge_all(cluster, scenarios):
        asked.append(scenarios)
        return [runner.Verdict(b), runner.Verdict(c, diffs=["admitted: y"])]

    monkeypatch.setattr(runner, "judge_all", judge_all)
    lines = oracle._confirm(None, tally)  # type: ignore[arg-type]
    assert asked == [[b, c]]
    assert [v.agree for v in tally.verdicts] == [True, True, False]
    assert lines == ["cohort 2: condition-QuotaReserved: x (agrees on a second run)",
                     "cohort 3: admitted: y (disagrees again)"]
