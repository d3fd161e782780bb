"""TaintToleration and NodeUnschedulable, as kube-scheduler does them.

Kubernetes sources:
- staging/src/k8s.io/api/core/v1/toleration.go, ``Toleration.ToleratesTaint``: an empty effect matches every
  effect, an empty key (with operator Exists) matches every key, Exists ignores the value, Equal compares it.
- pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go: Filter rejects nodes with an
  untolerated NoSchedule or NoExecute taint (``node(s) had untolerated taint(s)``); PreferNoSchedule taints
  never filter, Score counts them (``getAllTolerationPreferNoSchedule``) and NormalizeScore reverses the count.
- pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go: ``spec.unschedulable`` rejects with
  ``node(s) were unschedulable`` unless the pod tolerates ``node.kubernetes.io/unschedulable:NoSchedule``.
"""

from __future__ import annotations

import pytest
from builders import node, placements, pod, reason_counts, run, taint, tol

UNTOLERATED = "node(s) had untolerated taint(s)"
UNSCHEDULABLE = "node(s) were unschedulable"


def _one_tainted(t: dict, tolerations: list[dict]) -> str | None:
    """Schedule one pod onto a cluster with a single node carrying taint ``t``; the node or None."""
    result = run([node("n1", taints=[t])], [pod("p", tolerations=tolerations)])["p"]
    if result.node is None:
        assert reason_counts(result) == {UNTOLERATED: 1}
    return result.node


# ---------------------------------------------------------------------------------------- toleration matching


@pytest.mark.parametrize(
    ("taint_", "toleration", "tolerated"),
    [
        # Exists with an empty key tolerates every taint, of every effect.
        (taint("gpu", "NoSchedule", "a100"), tol(operator="Exists"), True),
        (taint("dedicated", "NoExecute"), tol(operator="Exists"), True),
        # An empty effect matches every effect.
        (taint("gpu", "NoSchedule", "x"), tol("gpu", "Equal", "x"), True),
        (taint("gpu", "NoExecute", "x"), tol("gpu", "Equal", "x"), True),
        (taint("gpu", "NoExecute"), tol("gpu", "Exists"), True),
        # A set effect must be equal.
        (taint("gpu", "NoExecute", "x"), tol("gpu", "Equal", "x", "NoSchedule"), False),
        (taint("gpu", "NoSchedule", "x"), tol("gpu", "Equal", "x", "NoSchedule"), True),
        (taint("gpu", "NoSchedule"), tol(operator="Exists", effect="NoExecute"), False),
        (taint("gpu", "NoExecute"), tol(operator="Exists", effect="NoExecute"), True),
        # Equal compares the value (an absent value is the empty string).
        (taint("gpu", "NoSchedule", "x"), tol("gpu", "Equal", "y"), False),
        (taint("gpu", "NoSchedule", "x"), tol("gpu", "Equal"), False),
        (taint("gpu", "NoSchedule"), tol("gpu", "Equal"), True),
        (taint("gpu", "NoSchedule"), tol("gpu", "Equal", "x"), False),
        # Exists with a key ignores the value, but the key must match.
        (taint("gpu", "NoSchedule", "anything"), tol("gpu", "Exists"), True),
        (taint("gpu", "NoSchedule", "x"), tol("fpga", "Exists"), False),
        (taint("gpu", "NoSchedule", "x"), tol("fpga", "Equal", "x"), False),
    ],
)
def test_toleration_matching(taint_: dict, toleration: dict, tolerated: bool) -> None:
    assert (_one_tainted(taint_, [toleration]) == "n1") is tolerated


def test_operator_defaults_to_equal() -> None:
    """An omitted operator is Equal (API defaulting), so the value is compared."""
    t = taint("gpu", "NoSchedule", "x")
    assert _one_tainted(t, [{"key": "gpu", "value": "x"}]) == "n1"
    assert _one_tainted(t, [{"key": "gpu", "value": "y"}]) is None


def test_every_taint_must_be_tolerated() -> None:
    """One tolerated taint is not enough: the node is rejected while any NoSchedule/NoExecute taint is not."""
    taints = [taint("a", "NoSchedule"), taint("b", "NoExecute")]
    only_a = run([node("n1", taints=taints)], [pod("p", tolerations=[tol("a", "Exists")])])["p"]
    assert only_a.node is None
    assert reason_counts(only_a) == {UNTOLERATED: 1}
    both = run([node("n1", taints=taints)], [pod("p", tolerations=[tol("a", "Exists"), tol("b", "Exists")])])["p"]
    assert both.node == "n1"


# ---------------------------------------------------------------------------------------- filter vs score


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_noschedule_and_noexecute_filter(effect: str) -> None:
    nodes = [node("tainted", taints=[taint("dedicated", effect, "ml")]), node("free", cpu="1")]
    results = run(nodes, [pod("p1", cpu="600m"), pod("p2", cpu="600m")])
    # Both pods would prefer the bigger node; the taint keeps them off it, so the second one fits nowhere.
    assert results["p1"].node == "free"
    assert results["p2"].node is None
    assert reason_counts(results["p2"]) == {UNTOLERATED: 1, "Insufficient cpu": 1}
    assert results["p2"].reasons == {"tainted": [UNTOLERATED], "free": ["Insufficient cpu"]}


def test_prefer_no_schedule_never_filters() -> None:
    """A PreferNoSchedule taint on every node still leaves them all feasible."""
    nodes = [node("a", taints=[taint("spot", "PreferNoSchedule")]), node("b", taints=[taint("x", "PreferNoSchedule")])]
    results = run(nodes, [pod("p")])
    assert results["p"].node in ("a", "b")


@pytest.mark.parametrize("seed", range(8))
def test_prefer_no_schedule_lowers_score(seed: int) -> None:
    """Two otherwise equal nodes: the pod lands on the one without the PreferNoSchedule taint, whatever the seed."""
    nodes = [node("spot", taints=[taint("spot", "PreferNoSchedule", "true")]), node("ondemand")]
    assert run(nodes, [pod("p")], seed=seed)["p"].node == "ondemand"
    reversed_nodes = list(reversed(nodes))
    assert run(reversed_nodes, [pod("p")], seed=seed)["p"].node == "ondemand"


def test_prefer_no_schedule_counts_taints() -> None:
    """Fewer untolerated PreferNoSchedule taints score higher (the count is what is normalized)."""
    nodes = [
        node("two", taints=[taint("a", "PreferNoSchedule"), taint("b", "PreferNoSchedule")]),
        node("one", taints=[taint("a", "PreferNoSchedule")]),
    ]
    assert run(nodes, [pod("p")])["p"].node == "one"


def test_tolerated_prefer_no_schedule_does_not_lower_score() -> None:
    """With the taint tolerated both nodes score the same, so the seeded tie-break reaches both."""
    nodes = [node("spot", taints=[taint("spot", "PreferNoSchedule", "true")]), node("ondemand")]
    seen = {
        run(nodes, [pod("p", tolerations=[tol("spot", "Equal", "true", "PreferNoSchedule")])], seed=s)["p"].node
        for s in range(16)
    }
    assert seen == {"spot", "ondemand"}


def test_noschedule_toleration_does_not_cover_prefer_no_schedule() -> None:
    """Only tolerations with an empty or PreferNoSchedule effect count at Score (getAllTolerationPreferNoSchedule)."""
    nodes = [node("spot", taints=[taint("spot", "PreferNoSchedule")]), node("ondemand")]
    for seed in range(6):
        p = pod("p", tolerations=[tol("spot", "Exists", effect="NoSchedule")])
        assert run(nodes, [p], seed=seed)["p"].node == "ondemand"


# ---------------------------------------------------------------------------------------- cordon


def test_cordoned_node_rejected() -> None:
    results = run([node("c", unschedulable=True), node("d", unschedulable=True)], [pod("p")])
    assert results["p"].node is None
    assert reason_counts(results["p"]) == {UNSCHEDULABLE: 2}
    assert results["p"].reasons == {"c": [UNSCHEDULABLE], "d": [UNSCHEDULABLE]}


def test_cordon_filters_before_taints() -> None:
    """NodeUnschedulable runs before TaintToleration: a cordoned, tainted node reports only the cordon."""
    results = run([node("c", unschedulable=True, taints=[taint("x")])], [pod("p")])
    assert results["p"].reasons == {"c": [UNSCHEDULABLE]}


@pytest.mark.parametrize(
    ("toleration", "allowed"),
    [
        (tol("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule"), True),
        (tol("node.kubernetes.io/unschedulable", "Exists"), True),
        (tol(operator="Exists"), True),
        (tol("node.kubernetes.io/unschedulable", "Exists", effect="NoExecute"), False),
        (tol("node.kubernetes.io/unschedulable", "Equal", "true", "NoSchedule"), False),
        (tol("node.kubernetes.io/not-ready", "Exists"), False),
    ],
)
def test_cordon_tolerated_only_by_unschedulable_toleration(toleration: dict, allowed: bool) -> None:
    results = run([node("c", unschedulable=True)], [pod("p", tolerations=[toleration])])
    assert (results["p"].node == "c") is allowed
    if not allowed:
        assert reason_counts(results["p"]) == {UNSCHEDULABLE: 1}


def test_cordon_with_other_nodes() -> None:
    """A cordoned node sends every pod to the schedulable one."""
    results = run([node("c", unschedulable=True), node("ok")], [pod("p1"), pod("p2")])
    assert placements(results) == {"p1": "ok", "p2": "ok"}
