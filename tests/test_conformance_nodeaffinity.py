"""NodeAffinity: nodeSelector, required and preferred node affinity, as kube-scheduler does them.

Kubernetes sources:
- staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go: nodeSelectorTerms are
  ORed, the requirements of one term are ANDed, an empty term matches nothing, matchFields only knows
  ``metadata.name``; ``GetRequiredNodeAffinity`` ANDs spec.nodeSelector with the required affinity.
- staging/src/k8s.io/apimachinery/pkg/labels/selector.go, ``Requirement.Matches``: In/NotIn/Exists/DoesNotExist;
  Gt/Lt parse both sides with ``strconv.ParseInt(v, 10, 64)`` and do not match when either side does not parse.
  NotIn and DoesNotExist match a node without the label.
- pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go: the reason is
  ``node(s) didn't match Pod's node affinity/selector``; Score sums the weights of matching preferred terms and
  normalizes them (weight 2 in the default profile).
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import node, placements, pod, reason_counts, run

MISMATCH = "node(s) didn't match Pod's node affinity/selector"


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if exprs:
        out["matchExpressions"] = list(exprs)
    if fields:
        out["matchFields"] = fields
    return out


def feasible(nodes: list[dict[str, Any]], affinity: dict[str, Any] | None = None, **kw: Any) -> set[str]:
    """The nodes the pod may land on: schedule it once per node, each alone, and keep those that took it."""
    out = set()
    for n in nodes:
        result = run([n], [pod("p", affinity=affinity, **kw)])["p"]
        if result.node is not None:
            out.add(result.node)
        else:
            # A node the terms do not name is left out by NodeAffinity's PreFilter (PreFilterResult.NodeNames),
            # which kube-scheduler reports as its own status; any other mismatch is the Filter's reason.
            assert reason_counts(result) in ({MISMATCH: 1}, {NOT_NAMED: 1})
    return out


NODES = [
    node("none"),
    node("a100", labels={"gpu": "a100", "gpu-count": "8", "rack": "r1"}),
    node("h100", labels={"gpu": "h100", "gpu-count": "4", "rack": "r2"}),
    node("t4", labels={"gpu": "t4", "gpu-count": "1"}),
    node("odd", labels={"gpu": "", "gpu-count": "eight"}),
]


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (expr("gpu", "In", "a100", "h100"), {"a100", "h100"}),
        (expr("gpu", "In", ""), {"odd"}),
        (expr("gpu", "NotIn", "a100", "h100"), {"none", "t4", "odd"}),  # NotIn matches a missing label
        (expr("gpu", "Exists"), {"a100", "h100", "t4", "odd"}),  # an empty value still exists
        (expr("gpu", "DoesNotExist"), {"none"}),
        (expr("gpu-count", "Gt", "1"), {"a100", "h100"}),  # integer compare, "eight" does not match
        (expr("gpu-count", "Gt", "4"), {"a100"}),
        (expr("gpu-count", "Lt", "8"), {"h100", "t4"}),  # not a string compare: "10" < "8" would differ
        (expr("gpu-count", "Lt", "10"), {"a100", "h100", "t4"}),
        (expr("gpu-count", "Gt", "-1"), {"a100", "h100", "t4"}),
        (expr("rack", "Gt", "0"), set()),  # labels that are not integers never match Gt/Lt
    ],
)
def test_operators(requirement: dict[str, Any], expected: set[str]) -> None:
    assert feasible(NODES, required(term(requirement))) == expected


@pytest.mark.parametrize(
    ("value", "op", "bound", "matches"),
    [
        ("+5", "Gt", "4", True),  # ParseInt accepts a sign
        ("-5", "Lt", "-4", True),
        ("007", "Gt", "6", True),  # leading zeros are still base 10
        ("5_0", "Gt", "4", False),  # ParseInt(base 10) rejects underscores (Python's int() accepts them)
        ("1.5", "Gt", "1", False),  # not an integer
        ("99999999999999999999", "Gt", "1", False),  # out of int64 range: ParseInt fails, no match
        ("9223372036854775807", "Gt", "9223372036854775806", True),  # int64 max still parses
    ],
)
def test_gt_lt_parse_like_parseint(value: str, op: str, bound: str, matches: bool) -> None:
    n = node("n", labels={"v": value})
    assert feasible([n], required(term(expr("v", op, bound)))) == ({"n"} if matches else set())


def test_terms_are_ored() -> None:
    aff = required(term(expr("gpu", "In", "t4")), term(expr("rack", "In", "r2")))
    assert feasible(NODES, aff) == {"t4", "h100"}


def test_expressions_in_a_term_are_anded() -> None:
    aff = required(term(expr("gpu", "Exists"), expr("gpu-count", "Gt", "2"), expr("rack", "NotIn", "r2")))
    assert feasible(NODES, aff) == {"a100"}


def test_empty_term_matches_nothing() -> None:
    assert feasible(NODES, required(term())) == set()
    # ... but does not stop another term from matching.
    assert feasible(NODES, required(term(), term(expr("gpu", "In", "t4")))) == {"t4"}


def test_match_fields_metadata_name() -> None:
    fields = [{"key": "metadata.name", "operator": "In", "values": ["h100", "t4"]}]
    assert feasible(NODES, required(term(fields=fields))) == {"h100", "t4"}
    not_in = [{"key": "metadata.name", "operator": "NotIn", "values": ["h100"]}]
    assert feasible(NODES, required(term(fields=not_in))) == {"none", "a100", "t4", "odd"}
    # matchFields and matchExpressions of one term are ANDed.
    both = required(
        term(
            expr("gpu", "In", "h100", "t4"),
            fields=[{"key": "metadata.name", "operator": "In", "values": ["t4", "a100"]}],
        )
    )
    assert feasible(NODES, both) == {"t4"}


NOT_NAMED = "node(s) didn't satisfy plugin(s) [NodeAffinity]"


def test_nodes_the_terms_do_not_name_are_left_out_at_prefilter() -> None:
    """Recorded from kube-scheduler v1.36.3 (tests/conformance_cases/nodeaffinity-1a2f841e2e.yaml has the case):
    the nodes outside ``matchFields metadata.name In`` get the PreFilterResult status, unresolvably, before any
    filter runs; a named node that fails the rest of the term gets the Filter's reason."""
    fields = [{"key": "metadata.name", "operator": "In", "values": ["t4", "a100"]}]
    both = required(term(expr("gpu", "In", "h100", "t4"), fields=fields))
    result = run(NODES, [pod("p", affinity=both, node_selector={"rack": "r9"})])["p"]
    assert result.node is None
    assert reason_counts(result) == {NOT_NAMED: 3, MISMATCH: 2}
    conflict = required(
        term(
            fields=[
                {"key": "metadata.name", "operator": "In", "values": ["t4"]},
                {"key": "metadata.name", "operator": "In", "values": ["a100"]},
            ]
        )
    )
    message = run(NODES, [pod("p", affinity=conflict)])["p"].message
    assert message.startswith("0/5 nodes are available: pod affinity terms conflict.")


def test_node_selector() -> None:
    assert feasible(NODES, node_selector={"gpu": "h100"}) == {"h100"}
    assert feasible(NODES, node_selector={"gpu": "h100", "rack": "r1"}) == set()
    assert feasible(NODES, node_selector={"gpu": ""}) == {"odd"}


def test_node_selector_and_affinity_are_anded() -> None:
    aff = required(term(expr("gpu", "In", "a100", "h100", "t4")))
    assert feasible(NODES, aff, node_selector={"rack": "r2"}) == {"h100"}
    assert feasible(NODES, aff, node_selector={"gpu": ""}) == set()


def test_mismatch_reason_and_message() -> None:
    results = run(NODES, [pod("p", node_selector={"gpu": "mi300"})])
    assert results["p"].node is None
    assert results["p"].message.startswith(f"0/5 nodes are available: 5 {MISMATCH}.")
    assert set(results["p"].reasons) == {"none", "a100", "h100", "t4", "odd"}


def test_each_node_reports_its_first_failing_filter() -> None:
    """NodeResourcesFit runs after NodeAffinity: a node failing both shows the NodeAffinity reason only."""
    nodes = [node("small", cpu="1", labels={"gpu": "t4"}), node("big", cpu="16"), node("tiny", cpu="1")]
    results = run(nodes, [pod("p", cpu="4", node_selector={"gpu": "t4"})])
    assert results["p"].reasons == {"small": ["Insufficient cpu"], "big": [MISMATCH], "tiny": [MISMATCH]}
    assert reason_counts(results["p"]) == {"Insufficient cpu": 1, MISMATCH: 2}


# ---------------------------------------------------------------------------------------- preferred


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w, "preference": t} for w, t in weighted]
        }
    }


@pytest.mark.parametrize("seed", range(6))
def test_preferred_term_steers_choice(seed: int) -> None:
    nodes = [node("x"), node("y", labels={"disk": "ssd"}), node("z")]
    aff = preferred((10, term(expr("disk", "In", "ssd"))))
    assert run(nodes, [pod("p", affinity=aff)], seed=seed)["p"].node == "y"


@pytest.mark.parametrize("seed", range(6))
def test_preferred_weights_add_up(seed: int) -> None:
    """Weights of every matching term are summed: two light terms beat one heavier term."""
    nodes = [
        node("heavy", labels={"a": "1"}),
        node("two-light", labels={"b": "1", "c": "1"}),
        node("nothing"),
    ]
    aff = preferred((50, term(expr("a", "Exists"))), (30, term(expr("b", "Exists"))), (30, term(expr("c", "Exists"))))
    assert run(nodes, [pod("p", affinity=aff)], seed=seed)["p"].node == "two-light"


def test_preferred_never_filters() -> None:
    nodes = [node("x"), node("y")]
    aff = preferred((100, term(expr("disk", "In", "ssd"))))
    results = run(nodes, [pod("p1", affinity=aff), pod("p2", affinity=aff)])
    assert set(placements(results).values()) <= {"x", "y"}
    assert all(r.node is not None for r in results.values())
