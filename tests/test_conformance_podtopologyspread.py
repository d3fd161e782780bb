"""PodTopologySpread, as kube-scheduler does it.

Kubernetes sources (pkg/scheduler/framework/plugins/podtopologyspread/):
- filtering.go: PreFilter counts the pods matching each constraint's selector, in the incoming pod's namespace,
  per domain over the nodes that carry every constraint key and pass nodeAffinityPolicy (default Honor) and
  nodeTaintsPolicy (default Ignore). Filter: a node without the key is UnschedulableAndUnresolvable with
  ``node(s) didn't match pod topology spread constraints (missing required label)``; a node where
  ``matchNum + selfMatch - globalMin > maxSkew`` is rejected with
  ``node(s) didn't match pod topology spread constraints``. ``minMatchNum``: when fewer domains than
  minDomains exist, the global minimum is 0.
- scoring.go: ScheduleAnyway constraints only score; fewer matching pods in the node's domain scores higher.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from builders import ZONE, config, node, pod, reason_counts, run

SPREAD = "node(s) didn't match pod topology spread constraints"
MISSING = SPREAD + " (missing required label)"
WEB = {"app": "web"}


def constraint(
    max_skew: int = 1, key: str = ZONE, when: str = "DoNotSchedule", labels: dict | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": labels or WEB},
        **extra,
    }


def zone_nodes(zones: str = "ab", per_zone: int = 2, **kw: Any) -> list[dict[str, Any]]:
    return [node(f"{z}{i}", labels={ZONE: z}, **kw) for z in zones for i in range(per_zone)]


def web(name: str, *constraints: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return pod(name, labels=WEB, spread=constraints or [constraint()], **kw)


@pytest.mark.parametrize("seed", range(4))
def test_do_not_schedule_fills_zones_evenly(seed: int) -> None:
    results = run(zone_nodes("abc"), [web(f"w{i}") for i in range(9)], seed=seed)
    per_zone: Counter[str] = Counter()
    for r in results.values():  # results come in the order the pods were bound
        assert r.node is not None
        per_zone[r.node[0]] += 1
        counts = [per_zone[z] for z in "abc"]
        assert max(counts) - min(counts) <= 1, counts
    assert per_zone == {"a": 3, "b": 3, "c": 3}


def test_pod_that_would_exceed_skew_is_rejected() -> None:
    """Zone b can hold only one pod (pods: 1). The third web pod goes to zone a (skew 1); the fourth would
    make zone a two ahead of zone b, so it is rejected there, and zone b is full."""
    nodes = [node("a0", labels={ZONE: "a"}), node("b0", labels={ZONE: "b"}, pods=1)]
    results = run(nodes, [web(f"w{i}") for i in range(4)])
    placed = Counter(r.node for r in results.values() if r.node)
    assert placed == {"a0": 2, "b0": 1}
    (pending,) = [r for r in results.values() if r.node is None]
    assert pending.reasons == {"a0": [SPREAD], "b0": ["Too many pods"]}
    assert reason_counts(pending) == {SPREAD: 1, "Too many pods": 1}


def test_max_skew_two_allows_a_lead_of_two() -> None:
    nodes = [node("a0", labels={ZONE: "a"}), node("b0", labels={ZONE: "b"}, pods=1)]
    results = run(nodes, [web(f"w{i}", constraint(max_skew=2)) for i in range(5)])
    placed = Counter(r.node for r in results.values() if r.node)
    assert placed == {"a0": 3, "b0": 1}


def test_node_missing_the_key() -> None:
    nodes = [node("a0", labels={ZONE: "a"}), node("nozone")]
    for seed in range(4):
        assert run(nodes, [web("w")], seed=seed)["w"].node == "a0"
    result = run([node("nozone"), node("nozone2")], [web("w")])["w"]
    assert result.node is None
    assert reason_counts(result) == {MISSING: 2}


def test_missing_key_and_skew_reported_per_node() -> None:
    nodes = [node("a0", labels={ZONE: "a"}), node("b0", labels={ZONE: "b"}), node("nozone")]
    existing = [pod(f"old{i}", labels=WEB, node_name="a0") for i in range(2)]
    blocker = pod("fill", cpu="8", node_name="b0")  # b0 is full, so b stays at 0 pods
    result = run(nodes, [*existing, blocker, web("w")])["w"]
    assert result.reasons == {"a0": [SPREAD], "b0": ["Insufficient cpu"], "nozone": [MISSING]}


def test_min_domains_forces_global_minimum_zero() -> None:
    """Two zones but minDomains 3: the global minimum counts as 0, so each zone takes only maxSkew pods."""
    nodes = zone_nodes("ab")
    results = run(nodes, [web(f"w{i}", constraint(minDomains=3)) for i in range(3)])
    placed = Counter(r.node[0] for r in results.values() if r.node)
    assert placed == {"a": 1, "b": 1}
    (pending,) = [r for r in results.values() if r.node is None]
    assert reason_counts(pending) == {SPREAD: 4}
    # Without minDomains the third pod fits (skew 2 - 1 = 1).
    results = run(nodes, [web(f"w{i}") for i in range(3)])
    assert all(r.node for r in results.values())


def test_min_domains_met_behaves_as_usual() -> None:
    results = run(zone_nodes("abc", per_zone=1), [web(f"w{i}", constraint(minDomains=3)) for i in range(6)])
    assert Counter(r.node[0] for r in results.values() if r.node) == {"a": 2, "b": 2, "c": 2}


def test_only_matching_pods_in_the_same_namespace_count() -> None:
    nodes = [node("a0", labels={ZONE: "a"}), node("b0", labels={ZONE: "b"})]
    others = [
        pod("other-ns", namespace="elsewhere", labels=WEB, node_name="b0"),
        pod("other-app", labels={"app": "db"}, node_name="b0"),
        pod("mine", labels=WEB, node_name="a0"),
    ]
    for seed in range(4):
        assert run(nodes, [*others, web("w")], seed=seed)["w"].node == "b0"


def test_self_match_counts_the_incoming_pod() -> None:
    """A pod not matched by its own selector adds nothing to the skew: it may land in the fuller zone."""
    nodes = [node("a0", labels={ZONE: "a"}), node("b0", labels={ZONE: "b"}, unschedulable=True)]
    existing = [pod("old", labels=WEB, node_name="a0")]
    outsider = pod("x", labels={"app": "x"}, spread=[constraint()])
    assert run(nodes, [*existing, outsider])["x"].node == "a0"  # 1 + 0 - 0 <= 1
    assert run(nodes, [*existing, web("w")])["w"].node is None  # 1 + 1 - 0 > 1


def test_node_affinity_policy_honor_ignores_excluded_domains() -> None:
    """Zone c's only node is excluded by the pod's nodeSelector: with nodeAffinityPolicy Honor (the default)
    it is not a domain, so its zero pods do not pull the minimum down; with Ignore they do."""
    nodes = [
        node("a0", labels={ZONE: "a", "pool": "gpu"}),
        node("b0", labels={ZONE: "b", "pool": "gpu"}),
        node("c0", labels={ZONE: "c"}),
    ]
    existing = [pod("oa", labels=WEB, node_name="a0"), pod("ob", labels=WEB, node_name="b0")]
    honor = web("w", node_selector={"pool": "gpu"})
    assert run(nodes, [*existing, honor])["w"].node in ("a0", "b0")
    ignore = web("w", constraint(nodeAffinityPolicy="Ignore"), node_selector={"pool": "gpu"})
    result = run(nodes, [*existing, ignore])["w"]
    assert result.node is None
    assert result.reasons == {
        "a0": [SPREAD],
        "b0": [SPREAD],
        "c0": ["node(s) didn't match Pod's node affinity/selector"],
    }


def test_two_constraints_both_apply() -> None:
    """Spread over zones and hosts at once: each host gets one pod before any host gets a second."""
    nodes = zone_nodes("ab", per_zone=2)
    host = constraint(key="kubernetes.io/hostname")
    results = run(nodes, [web(f"w{i}", constraint(), host) for i in range(5)])
    per_host = Counter(r.node for r in results.values())
    assert sorted(per_host.values()) == [1, 1, 1, 2]


# ---------------------------------------------------------------------------------------- ScheduleAnyway


def big_zone_nodes(zones: str = "ab", **kw: Any) -> list[dict[str, Any]]:
    """Nodes so large that resource scores tie, so the spread score decides."""
    return [node(f"{z}0", cpu="1000", memory="4Ti", labels={ZONE: z}, **kw) for z in zones]


@pytest.mark.parametrize("seed", range(6))
def test_schedule_anyway_prefers_the_emptier_zone(seed: int) -> None:
    existing = [pod(f"old{i}", labels=WEB, node_name="a0") for i in range(2)]
    new = web("w", constraint(when="ScheduleAnyway"))
    assert run(big_zone_nodes(), [*existing, new], seed=seed)["w"].node == "b0"


def test_schedule_anyway_never_rejects() -> None:
    """Zone b is cordoned: the pod goes to zone a although that makes the skew 3 > maxSkew 1."""
    nodes = [node("a0", labels={ZONE: "a"}), node("b0", labels={ZONE: "b"}, unschedulable=True)]
    existing = [pod(f"old{i}", labels=WEB, node_name="a0") for i in range(2)]
    results = run(nodes, [*existing, web("w", constraint(when="ScheduleAnyway"))])
    assert results["w"].node == "a0"
    strict = run(nodes, [*existing, web("w")])["w"]
    assert strict.node is None
    assert strict.reasons == {"a0": [SPREAD], "b0": ["node(s) were unschedulable"]}


def test_schedule_anyway_on_a_node_without_the_key_is_not_rejected() -> None:
    results = run([node("nozone")], [web("w", constraint(when="ScheduleAnyway"))])
    assert results["w"].node == "nozone"


@pytest.mark.parametrize("seed", range(4))
def test_schedule_anyway_spreads_a_stream_of_pods(seed: int) -> None:
    nodes = big_zone_nodes("abc")
    results = run(nodes, [web(f"w{i}", constraint(when="ScheduleAnyway")) for i in range(6)], seed=seed)
    assert Counter(r.node for r in results.values()) == {"a0": 2, "b0": 2, "c0": 2}


# ---------------------------------------------------------------------------------------- requeue


def test_rejected_pod_then_another_bind() -> None:
    """A pod rejected by PodTopologySpread waits; binding another pod afterwards asks the queueing hint whether
    it may now fit. The run must finish with the rejected pod still Pending and the other pod bound."""
    nodes = [node("a0", labels={ZONE: "a"}), node("b0", labels={ZONE: "b"}, pods=1)]
    existing = [  # as important as "first": nothing to preempt
        pod("o1", labels=WEB, node_name="a0", priority=10),
        pod("o2", labels=WEB, node_name="b0", priority=10),
        pod("o3", labels=WEB, node_name="a0", priority=10),
    ]
    results = run(nodes, [*existing, web("first", priority=10), pod("later")])
    assert results["first"].node is None
    assert reason_counts(results["first"]) == {SPREAD: 1, "Too many pods": 1}
    assert results["later"].node == "a0"


def test_spread_with_config_defaulting_list() -> None:
    """PodTopologySpreadArgs defaultingType List with defaultConstraints applies to pods owned by a ReplicaSet."""
    cfg = config(
        pluginConfig=[
            {
                "name": "PodTopologySpread",
                "args": {
                    "defaultingType": "List",
                    "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}],
                },
            }
        ]
    )

    def owned(name: str) -> dict[str, Any]:
        p = pod(name, labels=WEB)
        p["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "u1", "controller": True}
        ]
        return p

    nodes = [node("a0", labels={ZONE: "a"}), node("b0", labels={ZONE: "b"}, pods=1)]
    results = run(nodes, [owned(f"w{i}") for i in range(4)], config=cfg)
    assert Counter(r.node for r in results.values()) == {"a0": 2, "b0": 1, None: 1}
