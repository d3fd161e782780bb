"""Admission fair sharing (queues/admissionfairsharing.py): Kueue v0.19.2's own unit cases, ported.

pkg/util/admissionfairsharing/admission_fair_sharing_test.go (usage, penalty, decay) and
pkg/scheduler/scheduler_afs_test.go TestScheduleForAFS and TestShouldApplyEntryPenalty (which workload of a
usage-based ClusterQueue is admitted, on the same objects, usages and clock settings).
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsched.api import loader
from accelsched.errors import InputError
from accelsched.queues import admission
from accelsched.queues import admissionfairsharing as afs
from accelsched.queues.admission import Outcome
from accelsched.queues.config import AdmissionFairSharing
from accelsched.queues.incremental import OpenAdmission
from accelsched.queues.workloads import Info, PodSet

KUEUE = "kueue.x-k8s.io/v1beta2"
T0 = "2026-01-01T00:00:"
MIN5, MIN10, WEEK = 300.0, 600.0, 168 * 3600.0


# ---------------------------------------------------------------- admission_fair_sharing_test.go


@pytest.mark.parametrize(
    ("consumed", "penalty", "weight", "resource_weights", "want"),
    [
        ({"gpu-logical": 2}, {}, 1, {}, 2),  # DRA resource with default weight
        ({"gpu-logical": 2}, {}, 1, {"gpu-logical": 3.0}, 6),  # with explicit weight
        ({"cpu": 4, "gpu-logical": 2}, {}, 1, {"cpu": 1.0, "gpu-logical": 5.0}, 14),  # mixed CPU and DRA
        ({"gpu-logical": 10}, {}, 1, {"gpu-logical": 0}, 0),  # weight zero contributes nothing
        ({}, {"gpu-logical": 3}, 1, {}, 3),  # in penalty only
        ({"gpu-logical": 2}, {"gpu-logical": 1}, 2, {"gpu-logical": 4.0}, 6),  # in both, over the queue's weight
    ],
)
def test_calculate_usage(consumed: dict, penalty: dict, weight: float, resource_weights: dict, want: float) -> None:
    assert afs.usage(consumed, penalty, weight, resource_weights) == want


@pytest.mark.parametrize(("consumed", "weight"), [({}, 0), ({"cpu": 4}, 0), ({"cpu": 4}, -1)])
def test_a_non_positive_local_queue_weight_gives_infinite_usage_never_nan(consumed: dict, weight: float) -> None:
    got = afs.usage(consumed, {}, weight, {})
    assert not math.isnan(got)
    assert got == math.inf


def test_entry_penalty_is_alpha_of_the_sampling_interval_times_the_requests() -> None:
    config = AdmissionFairSharing(usage_half_life=MIN10, usage_sampling_interval=MIN5)
    penalty = afs.entry_penalty({"cpu": 4, "gpu-logical": 2}, config)
    a = 1 - 0.5**0.5  # five minutes of a ten-minute half-life
    assert penalty == pytest.approx({"cpu": 4 * a, "gpu-logical": 2 * a})
    long = afs.entry_penalty({"cpu": 2, "nvidia.com/gpu": 1}, AdmissionFairSharing(WEEK, MIN5))
    assert all(v > 0 for v in long.values())  # TestCalculateEntryPenaltyWithLongHalfLife
    assert afs.entry_penalty({"cpu": 4}, AdmissionFairSharing(0.0, MIN5)) == {"cpu": 0.0}  # no half-life, no alpha


def test_decayed_consumed_accumulates_small_samples() -> None:
    consumed: dict[str, float] = {}
    previous = {"cpu": 0.0, "nvidia.com/gpu": 0.0}
    for _ in range(3):
        consumed = afs.decayed(consumed, {"cpu": 2, "nvidia.com/gpu": 1}, MIN5, WEEK)
        assert all(consumed[k] > previous[k] for k in previous)
        previous = dict(consumed)


def test_decayed_consumed_converges_to_usage_on_the_half_life_curve() -> None:
    consumed: dict[str, float] = {}
    for half_lives, want in ((1, 1.0), (2, 1.5), (3, 1.75)):
        for _ in range(2016):  # 168h / 5m samples per half-life
            consumed = afs.decayed(consumed, {"cpu": 2}, MIN5, WEEK)
        assert consumed["cpu"] == pytest.approx(want, abs=0.001), half_lives
        assert consumed["cpu"] <= 2


# ---------------------------------------------------------------- scheduler_afs_test.go TestScheduleForAFS


def _cluster_queue(mode: str | None = "UsageBasedAdmissionFairSharing") -> dict:
    quotas = [{"name": "cpu", "nominalQuota": "8"}, {"name": "memory", "nominalQuota": "8Gi"}]
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default", "resources": quotas}]}
        ],
    }
    if mode:
        spec["admissionScope"] = {"admissionMode": mode}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq1"}, "spec": spec}


def _local_queue(name: str, weight: str, consumed: dict[str, str] | None) -> dict:
    doc: dict[str, Any] = {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterQueue": "cq1", "fairSharing": {"weight": weight}},
    }
    if consumed is not None:
        status = {"consumedResources": consumed, "lastUpdate": "2026-01-01T00:00:00Z"}
        doc["status"] = {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": status}}
    return doc


def _workload(name: str, queue: str, cpu: str, second: int) -> dict:
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "uid": name, "creationTimestamp": f"{T0}{second:02d}Z"},
        "spec": {
            "queueName": queue,
            "podSets": [{"name": "one", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }  # fmt: skip


def _config(afs_on: bool = True, gate: bool | None = None) -> dict:
    doc: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
    if afs_on:
        doc["admissionFairSharing"] = {"usageHalfLifeTime": "10s", "usageSamplingInterval": "1s"}
    if gate is not None:
        doc["featureGates"] = {"AdmissionFairSharing": gate}
    return doc


def _run(
    tmp_path: Path,
    usage: dict[str, str],
    workloads: list[tuple[str, str, str, int]],
    config: dict | None = None,
    mode: str | None = "UsageBasedAdmissionFairSharing",
) -> admission._Admission:
    docs = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        config or _config(),
        _cluster_queue(mode),
        *[
            _local_queue(name, weight, {"cpu": usage[name]} if name in usage else None)
            for name, weight in (("lq-a", "1"), ("lq-b", "1"), ("lq-c", "1"), ("lq-zero", "0"))
        ],
        *[_workload(*w) for w in workloads],
    ]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    inputs = loader.load([path])
    run = admission._Admission(inputs.queues, inputs.pods, inputs.namespaces, inputs.nodes)
    run.result = run.run()  # type: ignore[attr-defined]
    return run


def _admitted(run: admission._Admission) -> set[str]:
    return {o.info.name for o in run.result.outcomes if o.admitted}  # type: ignore[attr-defined]


def _message(run: admission._Admission, name: str) -> str:
    outcome = next(o for o in run.result.outcomes if o.info.name == name)  # type: ignore[attr-defined]
    return next(c["message"] for c in outcome.conditions if c["type"] == "QuotaReserved")


NEEDS_8 = "couldn't assign flavors to pod set one: insufficient unused quota for cpu in flavor default, 8 more needed"
A1_B1 = [("wl-a1", "lq-a", "8", 0), ("wl-b1", "lq-b", "8", 1)]


def test_admits_the_workload_of_the_less_active_local_queue(tmp_path: Path) -> None:
    run = _run(tmp_path, {"lq-a": "8", "lq-b": "2"}, A1_B1)
    assert _admitted(run) == {"wl-b1"}  # wl-a1 was created first, but its LocalQueue used more
    assert _message(run, "wl-a1") == NEEDS_8


def test_without_admission_fair_sharing_the_classic_order_ignores_queue_usage(tmp_path: Path) -> None:
    assert _admitted(_run(tmp_path, {"lq-a": "8", "lq-b": "2"}, A1_B1, _config(afs_on=False))) == {"wl-a1"}
    # the gate off (Kueue's featureGates) turns the configuration's admissionFairSharing off too
    assert _admitted(_run(tmp_path, {"lq-a": "8", "lq-b": "2"}, A1_B1, _config(gate=False))) == {"wl-a1"}
    # and a ClusterQueue without the usage-based admission mode keeps the classic order
    assert _admitted(_run(tmp_path, {"lq-a": "8", "lq-b": "2"}, A1_B1, mode="NoAdmissionFairSharing")) == {"wl-a1"}


def test_a_zero_weight_local_queue_is_not_prioritized(tmp_path: Path) -> None:
    workloads = [("wl-z1", "lq-zero", "8", 0), ("wl-a1", "lq-a", "8", 1)]
    run = _run(tmp_path, {"lq-a": "0", "lq-zero": "0"}, workloads)
    assert _admitted(run) == {"wl-a1"}
    assert _message(run, "wl-z1") == NEEDS_8


def test_admits_one_workload_from_each_local_queue_when_quota_is_limited(tmp_path: Path) -> None:
    """Equal usage: wl-a1 goes first (created first); its entry penalty puts lq-a above lq-b, so lq-b's wl-b1
    goes next, ahead of wl-a2 created before it."""
    workloads = [("wl-a1", "lq-a", "4", 0), ("wl-a2", "lq-a", "4", 1), ("wl-b1", "lq-b", "4", 2)]
    workloads.append(("wl-b2", "lq-b", "4", 3))
    run = _run(tmp_path, {"lq-a": "4", "lq-b": "4"}, workloads)
    assert _admitted(run) == {"wl-a1", "wl-b1"}
    a = 1 - 0.5 ** (1 / 10)  # a one-second sample of a ten-second half-life
    assert run.afs is not None
    assert run.afs.usage("default/lq-a") == pytest.approx(4 + 4 * a)
    assert run.afs.usage("default/lq-b") == pytest.approx(4 + 4 * a)


def test_schedules_normally_when_queues_have_equal_usage(tmp_path: Path) -> None:
    workloads = [("wl-a1", "lq-a", "4", 0), ("wl-b1", "lq-b", "3", 0), ("wl-c1", "lq-c", "1", 0)]
    assert _admitted(_run(tmp_path, {"lq-a": "2", "lq-b": "2", "lq-c": "2"}, workloads)) == {"wl-a1", "wl-b1", "wl-c1"}


def test_a_local_queue_without_status_starts_with_no_usage(tmp_path: Path) -> None:
    """'admits workload from lq-b with uninitialized cache'."""
    run = _run(tmp_path, {"lq-a": "8"}, A1_B1)
    assert _admitted(run) == {"wl-b1"}


# ---------------------------------------------------------------- TestShouldApplyEntryPenalty


def test_the_entry_penalty_is_pushed_only_on_a_usage_based_cluster_queue(tmp_path: Path) -> None:
    workloads = [("wl-a1", "lq-a", "4", 0)]
    run = _run(tmp_path, {}, workloads)
    assert run.afs is not None
    assert run.afs.entries["default/lq-a"].penalty == pytest.approx({"cpu": 4 * (1 - 0.5 ** (1 / 10))})
    assert _run(tmp_path, {}, workloads, _config(afs_on=False)).afs is None
    assert _run(tmp_path, {}, workloads, mode=None).afs is None


# ---------------------------------------------------------------- the clock (simulate --queues)


def test_sampling_ticks_decay_toward_the_admitted_usage_and_compose() -> None:
    config = AdmissionFairSharing(usage_half_life=10.0, usage_sampling_interval=1.0)
    ledger = afs.Ledger(config, {})
    ledger.advance(0.0, ["ns/lq"], lambda _: {"cpu": 8.0})
    ledger.advance(10.5, ["ns/lq"], lambda _: {"cpu": 8.0})  # ten ticks: one half-life toward 8
    entry = ledger.entries["ns/lq"]
    assert (entry.consumed["cpu"], entry.last_update) == (pytest.approx(4.0), 10.0)
    ledger.advance(30.0, ["ns/lq"], lambda _: {})  # two half-lives with nothing admitted
    assert entry.consumed["cpu"] == pytest.approx(1.0)


def test_settling_folds_the_penalty_after_decaying_to_now() -> None:
    config = AdmissionFairSharing(usage_half_life=10.0, usage_sampling_interval=1.0)
    ledger = afs.Ledger(config, {})
    ledger._entry("ns/lq").consumed = {"cpu": 8.0}
    ledger.entries["ns/lq"].penalty = {"cpu": 1.0}
    ledger.now = 10.0
    ledger.settle("ns/lq", {"cpu": 0.0})
    entry = ledger.entries["ns/lq"]
    assert (entry.consumed["cpu"], entry.penalty, entry.last_update) == (pytest.approx(5.0), {}, 10.0)


# ---------------------------------------------------------------- the objects


def test_a_bad_admission_mode_or_consumed_quantity_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all([_cluster_queue("Usage")]))
    with pytest.raises(InputError, match=r"spec\.admissionScope\.admissionMode.*Unsupported value: \"Usage\""):
        loader.load([path])
    path.write_text(yaml.safe_dump_all([_local_queue("lq-a", "1", {"cpu": "lots"})]))
    with pytest.raises(InputError, match=r"consumedResources\[cpu\]: .lots. is not a valid quantity"):
        loader.load([path])


def _open(tmp_path: Path, config: dict) -> OpenAdmission:
    docs = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        config,
        _cluster_queue(),
        _local_queue("lq-a", "1", None),
        _local_queue("lq-b", "1", None),
    ]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return OpenAdmission(loader.load([path]).queues)


def _submit(run: OpenAdmission, name: str, queue: str, order: int) -> Outcome:
    return run.submit(Info("default", name, queue, [PodSet("one", 1, {"cpu": 8000})], 0, f"{order:04d}", order))


@pytest.mark.parametrize("fair", [True, False])
def test_over_time_the_queue_that_used_more_waits_until_its_usage_decays(tmp_path: Path, fair: bool) -> None:
    """lq-a holds the whole quota for 100 s (ten half-lives): its usage nears 8 cpu. Then one workload of each
    queue waits for the freed quota: lq-b's goes first though lq-a's was created first. Ten more half-lives
    with nothing admitted bring lq-a back near 0, below lq-b's fresh usage: lq-a's next one goes first, though
    created after lq-b's."""
    run = _open(tmp_path, _config(afs_on=fair))
    run.advance(0.0)
    first = _submit(run, "a-0", "lq-a", 0)
    assert run.run_cycles()[0] == [first]
    run.advance(100.0)
    run.finish(first)
    _submit(run, "a-1", "lq-a", 1)
    _submit(run, "b-1", "lq-b", 2)
    admitted, _ = run.run_cycles()
    assert [o.info.name for o in admitted] == (["b-1"] if fair else ["a-1"])
    if not fair:
        return
    assert run.afs is not None
    penalty = 8 * (1 - 0.5**0.1)  # a-0's, settled at once: then a hundred one-second ticks toward 8
    assert run.afs.usage("default/lq-a") == pytest.approx(penalty * 0.5**10 + 8 * (1 - 0.5**10), rel=1e-9)
    run.advance(300.0)  # lq-b runs b-1 for 200 s; lq-a has nothing admitted
    assert run.afs.usage("default/lq-a") < 0.01 < run.afs.usage("default/lq-b")
    # the admitted usage read for some LocalQueues (their ClusterQueues' workloads alone) is every one's, cut
    every = run._local_queue_usage()
    assert every["default/lq-b"] and run._local_queue_usage(["default/lq-b"]) == {"default/lq-b": every["default/lq-b"]}
    run.finish(admitted[0])
    # b-2 and a-2 arrive while their class is still bulk-moved (a-1 did not fit, and the requeue of b-1's finish
    # comes after the cycles in flight): they wait with a-1, untried (PushOrUpdate), and the requeue brings the
    # three back together. lq-a's oldest goes first, though lq-b's b-2 was created before a-2.
    _submit(run, "b-2", "lq-b", 3)
    _submit(run, "a-2", "lq-a", 4)
    assert not run.queues.get("cq1") and len(run.inadmissible["cq1"]) == 3
    assert [o.info.name for o in run.run_cycles()[0]] == ["a-1"]


def test_the_example_admits_the_least_recent_users_first() -> None:
    """examples/queues/admission-fair-sharing.yaml through ``schedule -o json``: team-b (2 GPUs of recent usage)
    and team-c (8 on weight 2) before team-a (12), though team-a's job was created first."""
    from click.testing import CliRunner

    from accelsched.cli import main

    example = Path(__file__).resolve().parent.parent / "examples/queues/admission-fair-sharing.yaml"
    result = CliRunner().invoke(main, ["schedule", "-f", str(example), "-o", "json"])
    assert result.exit_code == 0, result.output
    admitted = {w["namespace"]: w["admitted"] for w in yaml.safe_load(result.output)["workloads"]}
    assert admitted == {"team-a": False, "team-b": True, "team-c": True}


def _running(name: str, queue: str, cpu: str, second: int) -> dict:
    doc = _workload(name, queue, cpu, 0)
    assignment = [{"name": "one", "flavors": {"cpu": "default"}, "count": 1, "resourceUsage": {"cpu": cpu}}]
    reserved = {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": "Quota reserved in ClusterQueue cq1",
        "lastTransitionTime": f"{T0}{second:02d}Z",
    }
    doc["status"] = {"admission": {"clusterQueue": "cq1", "podSetAssignments": assignment}, "conditions": [reserved]}
    return doc


@pytest.mark.parametrize("fair_sharing", [False, True])
@pytest.mark.parametrize(("fair", "victim"), [(True, "run-a"), (False, "run-b")])
def test_preemption_takes_the_candidate_of_the_local_queue_that_used_more(
    tmp_path: Path, fair: bool, victim: str, fair_sharing: bool
) -> None:
    """CandidatesOrdering, in classical and in fair-sharing preemption: run-b was admitted more recently, the
    usual first victim; with AFS the candidate of lq-a (usage 8 against 1) goes first."""
    config = _config(afs_on=fair)
    if fair_sharing:
        config["fairSharing"] = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    cq = _cluster_queue()
    cq["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    incoming = _workload("urgent", "lq-c", "4", 9)
    incoming["spec"]["priority"] = 100
    docs = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        config,
        cq,
        _local_queue("lq-a", "1", {"cpu": "8"}),
        _local_queue("lq-b", "1", {"cpu": "1"}),
        _local_queue("lq-c", "1", None),
        _running("run-a", "lq-a", "4", 10),
        _running("run-b", "lq-b", "4", 20),
        incoming,
    ]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    inputs = loader.load([path])
    result = admission.admit(inputs.queues, inputs.pods, inputs.namespaces, inputs.nodes)
    preempted = {o.info.name for o in result.outcomes if o.preempted}
    assert preempted == {victim}


# ---------------------------------------------------------------- the head, read up to each LocalQueue's first


def _head_reading_all(ledger: afs.Ledger, pending: list[Any], sticky: Any) -> Any:
    """The head as it was read before: every pending workload ranked, the sticky one where it stands."""
    usages: dict[str, float] = {}
    best, chosen = None, pending[0]
    for position, item in enumerate(pending):
        key = f"{item.info.namespace}/{item.info.queue_name}"
        if key in usages and item is not sticky:
            continue
        usages.setdefault(key, ledger.usage(key))
        rank = (usages[key], item is not sticky, position)
        if best is None or rank < best:
            best, chosen = rank, item
    return chosen


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=12),
    st.lists(st.integers(0, 3), min_size=4, max_size=4),
    st.integers(-1, 11),
)
def test_the_head_read_up_to_each_local_queues_first_is_the_one_read_from_every_workload(
    queues: list[int], consumed: list[int], sticky_at: int
) -> None:
    """A head read stops once each LocalQueue feeding the ClusterQueue has shown its first (``lanes``): the same
    head as ranking every waiting workload, the sticky one (waiting for its preemptions) wherever it stands."""
    ledger = afs.Ledger(AdmissionFairSharing(usage_half_life=10.0, usage_sampling_interval=1.0), {})
    for lq, cpu in enumerate(consumed):
        ledger._entry(f"ns/lq{lq}").consumed = {"cpu": float(cpu)}  # equal usages among them: ties on the order
    pending = [SimpleNamespace(info=SimpleNamespace(namespace="ns", queue_name=f"lq{q}")) for q in queues]
    sticky = pending[sticky_at] if 0 <= sticky_at < len(pending) else None
    want = _head_reading_all(ledger, pending, sticky)
    assert ledger.head(iter(pending), sticky, lanes=len(set(queues))) is want
    assert ledger.head(pending, sticky) is want
