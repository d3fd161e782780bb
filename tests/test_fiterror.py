"""The FailedScheduling message, laid out like kube-scheduler's FitError.

Kubernetes sources:
- pkg/scheduler/framework/types.go, ``FitError.Error()``: ``0/%v nodes are available: `` then every reason of
  every rejected node counted, each entry ``"<count> <reason>"``, the entries sorted as plain strings (so
  ``"10 ..."`` sorts before ``"2 ..."``), joined by ``", "`` and closed with ``"."``.
- pkg/scheduler/schedule_one.go: ``ErrNoNodesAvailable`` = ``no nodes available to schedule pods``.
- pkg/scheduler/framework/plugins/noderesources/fit.go, ``fitsRequest``: ``Too many pods`` and
  ``Insufficient <resource>`` for every resource the node is short of, so one node can add several reasons.
"""

from __future__ import annotations

from builders import ACCEL, filter_message, node, pod, reason_counts, run, taint

TAINTED = "node(s) had untolerated taint(s)"


def test_counts_sort_as_strings() -> None:
    """10 tainted nodes and 2 small ones: "10 node(s)..." precedes "2 Insufficient cpu" as a string,
    although 2 < 10 and "Insufficient" < "node(s)"."""
    nodes = [node(f"t{i:02d}", taints=[taint("dedicated")]) for i in range(10)]
    nodes += [node("s1", cpu="1"), node("s2", cpu="1")]
    result = run(nodes, [pod("p", cpu="2")])["p"]
    assert result.node is None
    assert filter_message(result) == f"0/12 nodes are available: 10 {TAINTED}, 2 Insufficient cpu."


def test_counts_sort_as_strings_three_ways() -> None:
    nodes = [node(f"c{i:02d}", unschedulable=True) for i in range(11)]
    nodes += [node(f"s{i}", cpu="1") for i in range(3)]
    nodes += [node("t", taints=[taint("x", "NoExecute")])]
    result = run(nodes, [pod("p", cpu="2")])["p"]
    assert filter_message(result) == (
        f"0/15 nodes are available: 1 {TAINTED}, 11 node(s) were unschedulable, 3 Insufficient cpu."
    )


def test_node_short_of_two_resources_gives_both_reasons() -> None:
    nodes = [node("n1", cpu="1", memory="1Gi"), node("n2", cpu="4", memory="1Gi")]
    result = run(nodes, [pod("p", cpu="2", memory="2Gi")])["p"]
    assert result.reasons == {"n1": ["Insufficient cpu", "Insufficient memory"], "n2": ["Insufficient memory"]}
    assert filter_message(result) == "0/2 nodes are available: 1 Insufficient cpu, 2 Insufficient memory."


def test_no_nodes() -> None:
    result = run([], [pod("p")])["p"]
    assert result.node is None
    assert result.message == "no nodes available to schedule pods"


def test_insufficient_extended_resource() -> None:
    nodes = [node("n1", **{ACCEL: 2}), node("n2", **{ACCEL: 4})]
    result = run(nodes, [pod("p", extra={ACCEL: 8})])["p"]
    assert filter_message(result) == f"0/2 nodes are available: 2 Insufficient {ACCEL}."
    assert result.reasons == {"n1": [f"Insufficient {ACCEL}"], "n2": [f"Insufficient {ACCEL}"]}


def test_extended_resource_cannot_be_overcommitted() -> None:
    nodes = [node("n1", **{ACCEL: 4})]
    results = run(nodes, [pod("a", extra={ACCEL: 3}), pod("b", extra={ACCEL: 2})])
    assert results["a"].node == "n1"
    assert len(results["a"].devices[ACCEL]) == 3
    assert results["b"].node is None
    assert filter_message(results["b"]) == f"0/1 nodes are available: 1 Insufficient {ACCEL}."


def test_node_without_the_extended_resource() -> None:
    nodes = [node("cpu-only"), node("accel", **{ACCEL: 1})]
    results = run(nodes, [pod("a", extra={ACCEL: 1}), pod("b", extra={ACCEL: 1})])
    assert results["a"].node == "accel"
    assert results["b"].reasons == {"cpu-only": [f"Insufficient {ACCEL}"], "accel": [f"Insufficient {ACCEL}"]}


def test_too_many_pods() -> None:
    nodes = [node("n1", pods=2), node("n2", pods=1)]
    results = run(nodes, [pod(f"p{i}", cpu="10m") for i in range(4)])
    placed = [r for r in results.values() if r.node]
    assert len(placed) == 3
    (pending,) = [r for r in results.values() if r.node is None]
    assert filter_message(pending) == "0/2 nodes are available: 2 Too many pods."


def test_too_many_pods_is_listed_first_per_node() -> None:
    """fitsRequest checks the pod count before cpu and memory, so "Too many pods" leads the node's reasons."""
    nodes = [node("full", cpu="1", memory="1Gi", pods=1)]
    bound = pod("old", cpu="100m", node_name="full")
    result = run(nodes, [bound, pod("p", cpu="2", memory="2Gi")])["p"]
    assert result.reasons == {"full": ["Too many pods", "Insufficient cpu", "Insufficient memory"]}
    assert filter_message(result) == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Too many pods."
    )


def test_bound_pods_count_against_capacity() -> None:
    nodes = [node("n1", cpu="2"), node("n2", cpu="2")]
    pods = [pod("old1", cpu="1500m", node_name="n1"), pod("old2", cpu="1", node_name="n2"), pod("new", cpu="1")]
    results = run(nodes, pods)
    assert results["new"].node == "n2"
    assert set(results) == {"new"}  # bound pods are admitted, not scheduled


def test_message_counts_every_node_once_per_reason() -> None:
    nodes = [node(f"n{i}", cpu="1", memory="1Gi") for i in range(12)]
    result = run(nodes, [pod("p", cpu="2", memory="2Gi")])["p"]
    assert reason_counts(result) == {"Insufficient cpu": 12, "Insufficient memory": 12}
    assert filter_message(result) == "0/12 nodes are available: 12 Insufficient cpu, 12 Insufficient memory."


def test_resource_no_node_advertises() -> None:
    """Every node lacks the resource, so every node is short of it (allocatable 0): ``Insufficient <name>``, in
    every mode (the YAML loader lets such a pod through, as the API server does)."""
    result = run([node("n1"), node("n2")], [pod("p", extra={ACCEL: 1})])["p"]
    assert result.node is None
    assert filter_message(result) == f"0/2 nodes are available: 2 Insufficient {ACCEL}."
    assert result.reasons == {"n1": [f"Insufficient {ACCEL}"], "n2": [f"Insufficient {ACCEL}"]}
