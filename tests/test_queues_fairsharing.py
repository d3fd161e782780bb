"""Kueue's fair sharing (queues/fairsharing.py): shares, the tournament and fair-sharing preemption.

The facts are Kueue v0.19.2's own unit tests' (inputs and expected outcomes), rebuilt here as accelsched inputs:
pkg/cache/scheduler/fair_sharing_test.go TestDominantResourceShare for the shares, and
pkg/scheduler/preemption/preemption_fair_test.go TestFairPreemptions for the victims and their reasons. Those
tests give every admitted workload the same reservation time and its name as UID, so candidates of one priority
are taken in name order; the inputs below do the same.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelsched.api import loader
from accelsched.errors import InputError
from accelsched.queues import admission, fairsharing, quota
from accelsched.queues.api import ClusterQueue, Cohort, FlavorQuotas, QueueObjects, ResourceGroup, ResourceQuota

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "example.com/gpu"
T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


# ---------------------------------------------------------------------------------------------- shares


def _cq(name: str, cohort: str, quotas: dict[str, list[ResourceQuota]], weight: str = "1") -> ClusterQueue:
    groups = tuple(
        ResourceGroup(tuple(q.name for q in qs), (FlavorQuotas(flavor, tuple(qs)),)) for flavor, qs in quotas.items()
    )
    return ClusterQueue(name, cohort, groups, fair_weight=Fraction(weight))


def _shares(
    cqs: list[ClusterQueue], usage: dict[tuple[str, str], int], cohorts: tuple[Cohort, ...] = ()
) -> dict[str, int]:
    objects = QueueObjects()
    objects.cluster_queues = {c.name: c for c in cqs}
    objects.cohorts = {c.name: c for c in cohorts}
    tree = quota.build(objects)
    for fr, amount in usage.items():
        tree.cluster_queues["cq"].add_usage(fr, amount)
    nodes = {**tree.cluster_queues, **tree.cohorts}
    return {name: fairsharing.share(node).rounded() for name, node in nodes.items()}


def _q(name: str, nominal: int, **limits: int) -> ResourceQuota:
    return ResourceQuota(name, nominal, limits.get("borrowing"), limits.get("lending"))


@pytest.mark.parametrize(
    ("usage", "weight", "want"),
    [
        ({"cpu": 1000, GPU: 2}, "1", 0),  # usage below nominal
        ({"cpu": 3000, GPU: 7}, "1", 200),  # (7-5)*1000/10: gpu dominates cpu's (3-2)*1000/10
        ({"cpu": 3000, GPU: 3}, "1", 100),  # one resource above nominal
        ({"cpu": 5000, GPU: 6}, "1", 300),  # the usage with a workload of 4 cpu / 4 gpu on 1 / 2
        ({GPU: 7}, "2", 100),  # integer weight: 200 / 2
        ({GPU: 7}, "0.5", 400),  # decimal weight: 200 / (1/2)
    ],
)
def test_dominant_resource_share_of_a_borrowing_cluster_queue(usage: dict, weight: str, want: int) -> None:
    """fair_sharing_test.go: cq (2 cpu, 5 gpu) and lending-cq (8 cpu, 5 gpu) in one cohort; the cohort, the
    lender and (below nominal) cq have no share."""
    cqs = [
        _cq("cq", "test-cohort", {"default": [_q("cpu", 2000), _q(GPU, 5)]}, weight),
        _cq("lending-cq", "test-cohort", {"default": [_q("cpu", 8000), _q(GPU, 5)]}),
    ]
    got = _shares(cqs, {("default", r): v for r, v in usage.items()})
    assert got == {"cq": want, "lending-cq": 0, "test-cohort": 0}


def test_a_zero_weight_borrower_has_an_infinite_share_and_sorts_after_every_other() -> None:
    """fair_sharing_test.go "above nominal with zero weight": math.MaxInt; CompareDRS puts it last."""
    cqs = [
        _cq("cq", "test-cohort", {"default": [_q(GPU, 5)]}, "0"),
        _cq("lending-cq", "test-cohort", {"default": [_q(GPU, 10)]}),
    ]
    assert _shares(cqs, {("default", GPU): 7})["cq"] == 2**63 - 1
    inf = fairsharing.DRS(0.0, 133.0, GPU, True)
    assert math.isinf(inf.precise())
    assert fairsharing.compare(inf, fairsharing.DRS(1.0, 900.0, GPU, True)) == 1


@pytest.mark.parametrize(
    ("usage", "want"),
    [
        ({"cq": 501}, 1),  # 1*1000/1500 rounded up: the lender's weight 300 does not matter
    ],
)
def test_a_share_is_rounded_up_per_mille_of_what_the_parent_could_lend(usage: dict, want: int) -> None:
    cqs = [
        _cq("cq", "test-cohort", {"default": [_q(GPU, 500)]}),
        _cq("lending-cq", "test-cohort", {"default": [_q(GPU, 1000)]}, "300"),
    ]
    assert _shares(cqs, {("default", GPU): usage["cq"]})["cq"] == want


def test_two_flavors_sum_what_they_borrow_per_resource() -> None:
    """ "multiple flavors": on-demand 15+10 of 20 (5 borrowed), spot under nominal; lendable is both flavors' 200
    cpu: 5*1000/200 = 25."""
    cqs = [
        _cq("cq", "test-cohort", {"on-demand": [_q("cpu", 20_000)], "spot": [_q("cpu", 80_000)]}),
        _cq("lending-cq", "test-cohort", {"default": [_q("cpu", 100_000)]}),
    ]
    got = _shares(cqs, {("on-demand", "cpu"): 25_000, ("spot", "cpu"): 5_000})
    assert got["cq"] == 25


def test_a_cohorts_share_is_divided_by_its_own_weight() -> None:
    """ "cohort has resource share": cq (5 gpu) uses 10 in child-cohort (weight 2) under root (45 of its own):
    cq 5/50 = 100, child-cohort 50, root 0."""
    cqs = [_cq("cq", "child-cohort", {"default": [_q(GPU, 5)]})]
    root_groups = (ResourceGroup((GPU,), (FlavorQuotas("default", (_q(GPU, 45),)),)),)
    cohorts = (Cohort("child-cohort", "root", (), Fraction(2)), Cohort("root", "", root_groups))
    assert _shares(cqs, {("default", GPU): 10}, cohorts) == {"cq": 100, "child-cohort": 50, "root": 0}


# ---------------------------------------------------------------------------------------------- preemption


def _base_cq(name: str, nominal: str, weight: str = "1", threshold: bool = True) -> dict:
    preemption: dict[str, Any] = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    if threshold:
        preemption["borrowWithinCohort"] = {"policy": "LowerPriority", "maxPriorityThreshold": -3}
    spec: dict[str, Any] = {
        "cohortName": "all",
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": nominal}]}],
            }
        ],
        "fairSharing": {"weight": weight},
    }
    if nominal != "0":
        spec["preemption"] = preemption
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _workload(name: str, cq: str, cpu: str = "1", priority: int = 0, admitted: bool = True) -> dict:
    doc: dict[str, Any] = {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "uid": name, "creationTimestamp": T0 if admitted else T1},
        "spec": {
            "queueName": f"lq-{cq}",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
                    },
                }
            ],
        },
    }
    if admitted:
        doc["status"] = {
            "admission": {
                "clusterQueue": cq,
                "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "count": 1}],
            },
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": f"Quota reserved in ClusterQueue {cq}", "lastTransitionTime": T0},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted",
                 "lastTransitionTime": T0},
            ],
        }  # fmt: skip
    return doc


def _config(*strategies: str, version: str = "v1beta2") -> dict:
    fair: dict[str, Any] = {"preemptionStrategies": list(strategies or fairsharing_defaults())}
    return {"apiVersion": f"config.kueue.x-k8s.io/{version}", "kind": "Configuration", "fairSharing": fair}


def fairsharing_defaults() -> tuple[str, ...]:
    return ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


BASE = [("a", "3"), ("b", "3"), ("c", "3"), ("preemptible", "0")]


def _admit(tmp_path: Path, docs: list[dict]) -> dict[str, admission.Outcome]:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    inputs = loader.load([path])
    result = admission.admit(inputs.queues, inputs.pods, inputs.namespaces, inputs.nodes)
    return {o.info.name: o for o in result.outcomes}


def _scenario(
    admitted: list[tuple[str, str, str, int]],
    incoming: tuple[str, str, str],
    queues: list[dict] | None = None,
    strategies: tuple[str, ...] = (),
) -> list[dict]:
    cqs = queues or [_base_cq(n, q) for n, q in BASE]
    docs: list[dict] = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        _config(*strategies),
        *cqs,
    ]
    for cq in cqs:
        name = cq["metadata"]["name"]
        lq = {"name": f"lq-{name}", "namespace": "default"}
        docs.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": lq, "spec": {"clusterQueue": name}})
    docs += [_workload(n, cq, cpu, prio) for n, cq, cpu, prio in admitted]
    docs.append(_workload(incoming[0], incoming[1], incoming[2], admitted=False))
    return docs


_REASONS = {
    "prioritization in the ClusterQueue": "InClusterQueue",
    "reclamation within the cohort": "InCohortReclamation",
    "Fair Sharing within the cohort": "InCohortFairSharing",
}


def _preempted(outcomes: dict[str, admission.Outcome], by: str) -> dict[str, str]:
    """The workloads ``by`` preempted, with the reason Kueue's message words (also on a victim readmitted since,
    whose Preempted condition then reads "Previously: ...")."""
    out = {}
    for name, o in outcomes.items():
        for c in o.conditions:
            if c["type"] == "Preempted" and f"(UID: {by}," in c["message"]:
                out[name] = next(r for words, r in _REASONS.items() if f"due to {words};" in c["message"])
    return out


def _units(cq: str, *names: str, priority: int = 0) -> list[tuple[str, str, str, int]]:
    return [(n, cq, "1", priority) for n in names]


CASES: dict[str, tuple[list, tuple[str, str, str], dict[str, str], tuple[str, ...]]] = {
    # a and c use their nominal 3 and 1, b borrows 2: c takes back its nominal from b, within nominal
    "reclaim nominal from user using the most": (
        _units("a", "a1", "a2", "a3") + _units("b", "b1", "b2", "b3", "b4", "b5") + _units("c", "c1"),
        ("c-incoming", "c", "1"),
        {"b1": "InCohortReclamation"},
        (),
    ),
    # a would borrow 1 with the incoming one; b borrows 2: b's share stays above a's after losing b1
    "reclaim borrowable quota from user using the most": (
        _units("a", "a1", "a2", "a3") + _units("b", "b1", "b2", "b3", "b4", "b5") + _units("c", "c1"),
        ("a-incoming", "a", "1"),
        {"b1": "InCohortFairSharing"},
        (),
    ),
    "can't preempt when everyone under nominal": (
        _units("a", "a1", "a2", "a3") + _units("b", "b1", "b2", "b3") + _units("c", "c1", "c2", "c3"),
        ("c-incoming", "c", "1"),
        {},
        (),
    ),
    "can't preempt when it would switch the imbalance": (
        _units("a", "a1", "a2", "a3") + _units("b", "b1", "b2", "b3", "b4", "b5"),
        ("a-incoming", "a", "2"),
        {},
        (),
    ),
    "can preempt lower priority workloads from same CQ": (
        _units("a", "a1-low", "a2-low", priority=-1)
        + _units("a", "a3", "a4")
        + _units("b", "b1", "b2", "b3", "b4", "b5"),
        ("a-incoming", "a", "2"),
        {"a1-low": "InClusterQueue", "a2-low": "InClusterQueue"},
        (),
    ),
    "can preempt a combination of same CQ and highest user": (
        _units("a", "a-low", priority=-1) + _units("a", "a2", "a3") + _units("b", *(f"b{i}" for i in range(1, 7))),
        ("a-incoming", "a", "2"),
        {"a-low": "InClusterQueue", "b1": "InCohortFairSharing"},
        (),
    ),
    "preempt huge workload if there is no other option, as long as the target CQ gets a lower share": (
        [("b1", "b", "9", 0)],
        ("a-incoming", "a", "2"),
        {"b1": "InCohortReclamation"},
        (),
    ),
    "can't preempt huge workload if the incoming is also huge": (
        [("a1", "a", "2", 0), ("b1", "b", "7", 0)],
        ("a-incoming", "a", "5"),
        {},
        (),
    ),
    "can't preempt 2 smaller workloads if the incoming is huge": (
        [("b1", "b", "2", 0), ("b2", "b", "2", 0), ("b3", "b", "3", 0)],
        ("a-incoming", "a", "6"),
        {},
        (),
    ),
    "preempt from target and others even if over nominal": (
        [("a1-low", "a", "2", -1), ("a2-low", "a", "1", -1), ("b1", "b", "3", 0), ("b2", "b", "3", 0)],
        ("a-incoming", "a", "4"),
        {"a1-low": "InClusterQueue", "b1": "InCohortFairSharing"},
        (),
    ),
    "prefer to preempt workloads that don't make the target CQ have the biggest share": (
        [("b1", "b", "2", 0), ("b2", "b", "1", 0), ("b3", "b", "2", 0), ("c1", "c", "1", 0)],
        ("a-incoming", "a", "3.5"),
        {"b2": "InCohortFairSharing"},
        (),
    ),
    "preempt from different cluster queues if the end result has a smaller max share": (
        [("b1", "b", "2", 0), ("b2", "b", "2.5", 0), ("c1", "c", "2", 0), ("c2", "c", "2.5", 0)],
        ("a-incoming", "a", "3.5"),
        {"b1": "InCohortFairSharing", "c1": "InCohortFairSharing"},
        (),
    ),
    "scenario above does not flap": (
        [("a1", "a", "3.5", 0), ("b2", "b", "2.5", 0), ("c2", "c", "2.5", 0)],
        ("b-incoming", "b", "2"),
        {},
        (),
    ),
    "cannot preempt if it would make the candidate CQ go under nominal after preempting one element": (
        [("b1", "b", "3", 0), ("b2", "b", "3", 0), ("c1", "c", "3", 0)],
        ("a-incoming", "a", "4"),
        {},
        (),
    ),
    "workloads under priority threshold not capriciously preempted": (
        _units("a", "a1", "a2", "a3")
        + _units("b", "b1", "b2", "b3")
        + _units("preemptible", "preemptible1", "preemptible2", "preemptible3", priority=-3),
        ("a-incoming", "a", "2"),
        {},
        (),
    ),
    "preempt lower priority first, even if big": (
        [("a1", "a", "3", 0), ("b-low", "b", "5", 0), ("b-high", "b", "1", 1)],
        ("a-incoming", "a", "1"),
        {"b-low": "InCohortFairSharing"},
        ("LessThanInitialShare",),
    ),
    "preempt workload that doesn't transfer the imbalance, even if high priority": (
        [("a1", "a", "3", 0), ("b-low", "b", "5", 0), ("b-high", "b", "1", 1)],
        ("a-incoming", "a", "1"),
        {"b-high": "InCohortFairSharing"},
        ("LessThanOrEqualToFinalShare",),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fair_preemption_takes_kueues_victims_with_kueues_reasons(tmp_path: Path, name: str) -> None:
    admitted, incoming, want, strategies = CASES[name]
    outcomes = _admit(tmp_path, _scenario(admitted, incoming, strategies=strategies))
    assert _preempted(outcomes, incoming[0]) == want
    if want:  # the preemptor waited for its victims, then was admitted
        assert outcomes[incoming[0]].admitted


def test_a_fair_sharing_victim_carries_kueues_message(tmp_path: Path) -> None:
    """preemptionMessage with HumanReadablePreemptionReasons[InCohortFairSharing]."""
    admitted, incoming, _, _ = CASES["reclaim borrowable quota from user using the most"]
    outcomes = _admit(tmp_path, _scenario(admitted, incoming))
    preempted = next(c for c in outcomes["b1"].conditions if c["type"] == "Preempted")
    assert preempted == {
        "type": "Preempted",
        "status": "True",
        "reason": "InCohortFairSharing",
        "message": "Preempted to accommodate a workload (UID: a-incoming, JobUID: UNKNOWN) due to Fair Sharing "
        "within the cohort; preemptor path: /all/a; preemptee path: /all/b",
    }


def test_a_cluster_queue_with_a_higher_weight_can_preempt_more(tmp_path: Path) -> None:
    """ "CQ with higher weight can preempt more": a (weight 2) borrows 1 more with the incoming one, share
    1/6*1000/2 = 83 after, b borrows 3 (500 before, 333 after losing one): a preempts b's."""
    queues = [
        _base_cq("a", "3", "2", threshold=False),
        _base_cq("b", "3", threshold=False),
        _base_cq("c", "3", threshold=False),
    ]
    admitted = _units("a", "a1", "a2", "a3") + _units("b", *(f"b{i}" for i in range(1, 7)))
    outcomes = _admit(tmp_path, _scenario(admitted, ("a-incoming", "a", "2"), queues))
    assert _preempted(outcomes, "a-incoming") == {"b1": "InCohortFairSharing", "b2": "InCohortFairSharing"}


def test_without_fair_sharing_the_same_input_preempts_classically(tmp_path: Path) -> None:
    """The Configuration is what turns it on: the same input with no Configuration takes Kueue's classical
    path (a borrowing preemptor may not reclaim: borrowWithinCohort's threshold -3 excludes priority 0)."""
    admitted, incoming, _, _ = CASES["reclaim borrowable quota from user using the most"]
    docs = [d for d in _scenario(admitted, incoming) if d["kind"] != "Configuration"]
    assert _preempted(_admit(tmp_path, docs), incoming[0]) == {}


# ---------------------------------------------------------------------------------------------- the tournament


def test_the_tournament_admits_the_head_of_the_queue_with_the_lower_share_first(tmp_path: Path) -> None:
    """Two queues (1 cpu each) share a cohort with 2 idle cpu in "lender". Both heads borrow; with fair sharing
    the one whose queue would borrow less goes first, whatever its priority: b (a 1-cpu head, share 1/4*1000)
    before a (a 2-cpu head of priority 10, share 2/4*1000). Classically the priority would win. (a0 has a's
    priority too, so a's head cannot take its place within the queue.)"""
    queues = [
        _base_cq("a", "1", threshold=False),
        _base_cq("b", "1", threshold=False),
        _base_cq("lender", "2", threshold=False),
    ]
    docs = _scenario([("a0", "a", "1", 10), ("b0", "b", "1", 0)], ("b-head", "b", "1"), queues)
    docs.append(_workload("a-head", "a", "2", priority=10, admitted=False))
    outcomes = _admit(tmp_path, docs)
    assert outcomes["b-head"].admitted
    assert not outcomes["a-head"].admitted
    assert outcomes["a-head"].conditions[-1]["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed"
    )
    classical = _admit(tmp_path, [d for d in docs if d["kind"] != "Configuration"])
    assert classical["a-head"].admitted and not classical["b-head"].admitted


# ---------------------------------------------------------------------------------------------- configuration


def _load_config(tmp_path: Path, doc: dict) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return loader.load([path]).queues.config


def test_v1beta1_enable_turns_fair_sharing_on_with_both_strategies_by_default(tmp_path: Path) -> None:
    on = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", "fairSharing": {"enable": True}}
    assert _load_config(tmp_path, on).fair_sharing == fairsharing_defaults()
    on["fairSharing"]["enable"] = False
    assert _load_config(tmp_path, on).fair_sharing is None
    assert _load_config(tmp_path, _config("LessThanInitialShare")).fair_sharing == ("LessThanInitialShare",)


@pytest.mark.parametrize(
    ("fair", "message"),
    [
        ({}, "fairSharing.preemptionStrategies: Required value: must be specified"),
        (
            {"preemptionStrategies": ["LessThanInitialShare", "LessThanOrEqualToFinalShare"]},
            "fairSharing.preemptionStrategies: Unsupported value: []v1beta2.PreemptionStrategy"
            '{"LessThanInitialShare", "LessThanOrEqualToFinalShare"}: supported values: "LessThanOrEqualToFinalShare", '
            '"LessThanInitialShare", "LessThanOrEqualToFinalShare,LessThanInitialShare"',
        ),
        ({"enable": True}, "fairSharing.enable: unknown field(s) enable"),
    ],
)
def test_a_bad_fair_sharing_configuration_is_refused_naming_the_field(tmp_path: Path, fair: dict, message: str) -> None:
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": fair}
    with pytest.raises(InputError) as err:
        _load_config(tmp_path, doc)
    assert message in str(err.value)
    assert "Configuration" in str(err.value)


def test_admission_fair_sharing_settings_are_read_and_checked(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "admissionFairSharing": {"usageHalfLifeTime": "1h", "resourceWeights": {"nvidia.com/gpu": 4}},
    }
    afs = _load_config(tmp_path, doc).admission_fair_sharing
    assert (afs.usage_half_life, afs.usage_sampling_interval, dict(afs.resource_weights)) == (
        3600.0,
        300.0,
        {"nvidia.com/gpu": 4.0},
    )
    doc["admissionFairSharing"]["resourceWeights"] = {"cpu": -1}
    with pytest.raises(InputError, match=r"admissionFairSharing\.resourceWeights\.cpu"):
        _load_config(tmp_path, doc)


def _queue(name: str, cohort: str, nominal: str, weight: str = "1", reclaim: str = "Never") -> dict:
    doc = _base_cq(name, nominal, weight, threshold=False)
    doc["spec"]["cohortName"] = cohort
    doc["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority" if reclaim != "Never" else "Never",
                                 "reclaimWithinCohort": reclaim}  # fmt: skip
    return doc


def _cohort(name: str, parent: str, nominal: str, weight: str = "1") -> dict:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": nominal}]}],
            }
        ],
        "fairSharing": {"weight": weight},
    }
    if parent:
        spec["parentName"] = parent
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def test_fair_preemption_walks_the_cohort_tree_the_most_unfair_subtree_first(tmp_path: Path) -> None:
    """ "hierarchical preemption": ROOT (5) over LEFT (5, weight 2: a weight 2, b) and RIGHT (5: d, e weight
    0.99), c directly under ROOT; every queue has 1 cpu and b, c, d, e run five 1-cpu workloads of priorities 1
    to 5. A 5-cpu workload for a takes b1, b2, c1, c2 and e1, Kueue's answer: the lowest priorities of the
    subtrees with the highest shares, in turn, each pick changing the shares."""
    queues = [
        _queue("a", "left", "1", "2", reclaim="Any"),
        _queue("b", "left", "1"),
        _queue("c", "root", "1"),
        _queue("d", "right", "1"),
        _queue("e", "right", "1", "0.99"),
    ]
    docs = _scenario([(f"{q}{p}", q, "1", p) for q in "bcde" for p in range(1, 6)], ("unit", "a", "5"), queues)
    docs += [_cohort("root", "", "5"), _cohort("left", "root", "5", "2"), _cohort("right", "root", "5")]
    outcomes = _admit(tmp_path, docs)
    assert _preempted(outcomes, "unit") == dict.fromkeys(("b1", "b2", "c1", "c2", "e1"), "InCohortFairSharing")
    assert outcomes["unit"].admitted


def test_everything_a_zero_weight_queue_borrows_can_be_taken(tmp_path: Path) -> None:
    """ "can preempt anything borrowing from CQ with 0 weight": b (weight 0) borrows 3 and has an infinite
    share; a 3-cpu workload for a takes b1, b2 and b3."""
    queues = [
        _queue("a", "all", "3", reclaim="Any"),
        _queue("b", "all", "3", "0", reclaim="Any"),
        _queue("c", "all", "3", reclaim="Any"),
    ]
    admitted = _units("a", "a1", "a2", "a3") + _units("b", *(f"b{i}" for i in range(1, 7)))
    outcomes = _admit(tmp_path, _scenario(admitted, ("a-incoming", "a", "3"), queues))
    assert _preempted(outcomes, "a-incoming") == dict.fromkeys(("b1", "b2", "b3"), "InCohortFairSharing")


def test_the_fair_sharing_example_reclaims_then_preempts_by_share(tmp_path: Path) -> None:
    """examples/queues/fair-sharing.yaml, through ``schedule -o json``: team-c's finetune reclaims its nominal
    quota from team-a's newest sweep, eval preempts the next by share (rule S2-b); the JSON reports Kueue's
    weightedShare (team-c borrows 4 of 16 GPUs on weight 2: 125)."""
    from click.testing import CliRunner

    from accelsched.cli import main

    result = CliRunner().invoke(main, ["schedule", "-f", "examples/queues/fair-sharing.yaml", "-o", "json"])
    assert result.exit_code == 0, result.output
    out = yaml.safe_load(result.output)
    reasons = {w["name"]: c["reason"] for w in out["workloads"] for c in w["conditions"] if c["type"] == "Preempted"}
    assert reasons == {"sweep-2": "InCohortReclamation", "sweep-1": "InCohortFairSharing"}
    assert all(w["admitted"] for w in out["workloads"] if w["namespace"] == "team-c")
    shares = {c["name"]: c["fairSharing"]["weightedShare"] for c in out["clusterQueues"]}
    assert shares == {"team-a": 0, "team-b": 0, "team-c": 125}
