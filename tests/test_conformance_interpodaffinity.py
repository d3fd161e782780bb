"""InterPodAffinity: required and preferred pod affinity and anti-affinity, as kube-scheduler does them.

Kubernetes sources (pkg/scheduler/framework/plugins/interpodaffinity/):
- filtering.go: PreFilter counts, per topology pair, the existing pods matching the incoming pod's terms
  (``updateWithAffinityTerms`` only when a pod matches *all* affinity terms) and the existing pods whose required
  anti-affinity matches the incoming pod (symmetry). Filter checks, in order: affinity
  (``node(s) didn't match pod affinity rules``, also when the node lacks a topology key), anti-affinity
  (``node(s) didn't match pod anti-affinity rules``), existing pods' anti-affinity
  (``node(s) didn't satisfy existing pods anti-affinity rules``). A pod whose affinity matches no existing pod
  may still land when it matches its own terms (the first pod of a group), on any node carrying the keys.
- A term sees pods in its ``namespaces`` and those matched by ``namespaceSelector`` (an empty selector: all
  namespaces); with neither, only the pod's own namespace (pkg/scheduler/framework/types.go, ``newAffinityTerm``).
- scoring.go: preferred terms of the incoming pod, and of existing pods towards the incoming pod, add their
  weight per matching pod in the node's domain; the result is min-max normalized (weight 2 in the profile).
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import HOSTNAME, ZONE, namespace, node, placements, pod, reason_counts, run

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
PDU = "example.com/pdu"


def aff_term(labels: dict[str, str], key: str = HOSTNAME, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def anti(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def preferred(kind: str, *weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "podAffinityTerm": t} for w, t in weighted
            ]
        }
    }


def big(name: str, **labels: str) -> dict[str, Any]:
    """A node so large that resource scores cannot tell nodes apart, so affinity scores decide."""
    return node(name, cpu="1000", memory="4Ti", labels=labels)


# ---------------------------------------------------------------------------------------- required anti-affinity


def test_anti_affinity_on_hostname_spreads_one_per_node() -> None:
    db = {"app": "db"}
    pods = [pod(f"db{i}", labels=db, affinity=anti(aff_term(db))) for i in range(4)]
    results = run([node("n1"), node("n2"), node("n3")], pods)
    nodes = [r.node for r in results.values() if r.node]
    assert sorted(nodes) == ["n1", "n2", "n3"]
    (pending,) = [r for r in results.values() if r.node is None]
    assert reason_counts(pending) == {ANTI: 3}


def test_anti_affinity_on_custom_key() -> None:
    """PDU domains: n1 and n2 share a PDU with the existing replica; n3 is elsewhere; n4 has no PDU label,
    and a node without the key is never in a matching domain."""
    nodes = [node("n1", labels={PDU: "p1"}), node("n2", labels={PDU: "p1"}), node("n3", labels={PDU: "p2"}), node("n4")]
    db = {"app": "db"}
    existing = pod("old", labels=db, node_name="n1")
    for seed in range(6):
        results = run(nodes, [existing, pod("new", labels=db, affinity=anti(aff_term(db, PDU)))], seed=seed)
        assert results["new"].node in ("n3", "n4")
    only_pdu1 = run(nodes[:2], [existing, pod("new", labels=db, affinity=anti(aff_term(db, PDU)))])["new"]
    assert only_pdu1.node is None
    assert only_pdu1.reasons == {"n1": [ANTI], "n2": [ANTI]}


def test_anti_affinity_on_zone_fills_one_pod_per_zone() -> None:
    nodes = [node(f"{z}{i}", labels={ZONE: z}) for z in ("a", "b") for i in range(2)]
    web = {"app": "web"}
    results = run(nodes, [pod(f"w{i}", labels=web, affinity=anti(aff_term(web, ZONE))) for i in range(3)])
    zones = sorted(r.node[0] for r in results.values() if r.node)
    assert zones == ["a", "b"]
    (pending,) = [r for r in results.values() if r.node is None]
    assert reason_counts(pending) == {ANTI: 4}


def test_anti_affinity_does_not_match_other_labels() -> None:
    results = run(
        [node("n1")],
        [
            pod("old", labels={"app": "x"}, node_name="n1"),
            pod("new", labels={"app": "db"}, affinity=anti(aff_term({"app": "db"}))),
        ],
    )
    assert results["new"].node == "n1"


# ---------------------------------------------------------------------------------------- symmetry


def test_existing_pods_anti_affinity_keeps_matching_pod_out() -> None:
    guard = pod("guard", labels={"app": "guard"}, node_name="n1", affinity=anti(aff_term({"app": "web"})))
    results = run([node("n1"), node("n2")], [guard, pod("web", labels={"app": "web"})])
    assert results["web"].node == "n2"
    results = run([node("n1")], [guard, pod("web", labels={"app": "web"}), pod("other", labels={"app": "x"})])
    assert results["web"].node is None
    assert results["web"].reasons == {"n1": [EXISTING_ANTI]}
    assert reason_counts(results["web"]) == {EXISTING_ANTI: 1}
    assert results["other"].node == "n1"


def test_existing_anti_affinity_covers_its_whole_domain() -> None:
    nodes = [node("a1", labels={ZONE: "a"}), node("a2", labels={ZONE: "a"}), node("b1", labels={ZONE: "b"})]
    guard = pod("guard", node_name="a1", affinity=anti(aff_term({"app": "web"}, ZONE)))
    for seed in range(4):
        results = run(nodes, [guard, pod("web", labels={"app": "web"})], seed=seed)
        assert results["web"].node == "b1"


def test_existing_anti_affinity_only_sees_its_namespaces() -> None:
    """The guard's term has no namespaces: it covers only its own namespace, so a web pod elsewhere may land."""
    guard = pod("guard", namespace="team-a", node_name="n1", affinity=anti(aff_term({"app": "web"})))
    results = run([node("n1")], [guard, pod("web", namespace="team-b", labels={"app": "web"})])
    assert results["web"].node == "n1"
    results = run([node("n1")], [guard, pod("web", namespace="team-a", labels={"app": "web"})])
    assert results["web"].node is None


def test_own_anti_affinity_reported_before_existing() -> None:
    """A node failing both the pod's own anti-affinity and an existing pod's reports only the first."""
    guard = pod("guard", labels={"app": "db"}, node_name="n1", affinity=anti(aff_term({"app": "db"})))
    new = pod("new", labels={"app": "db"}, affinity=anti(aff_term({"app": "db"})))
    result = run([node("n1")], [guard, new])["new"]
    assert result.reasons == {"n1": [ANTI]}


# ---------------------------------------------------------------------------------------- required affinity


def test_affinity_lands_in_the_domain_of_a_matching_pod() -> None:
    nodes = [big("a1", **{ZONE: "a"}), big("a2", **{ZONE: "a"}), big("b1", **{ZONE: "b"}), big("b2", **{ZONE: "b"})]
    # Best-effort pods: 1.36's BalancedAllocation scores how much a pod improves a node's balance, so 100m of cpu
    # next to the cache pod's 100m would already score b2 one point above b1 (75 vs 74); without requests it skips.
    cache = pod("cache", cpu=None, labels={"app": "cache"}, node_name="b2")
    seen = set()
    for seed in range(8):
        app = pod("app", cpu=None, affinity=affinity(aff_term({"app": "cache"}, ZONE)))
        results = run(nodes, [cache, app], seed=seed)
        seen.add(results["app"].node)
    assert seen == {"b1", "b2"}  # anywhere in zone b, not only next to the cache pod


def test_affinity_rejects_other_domains_with_affinity_reason() -> None:
    nodes = [node("a1", labels={ZONE: "a"}), node("b1", labels={ZONE: "b"}, cpu="1"), node("nokey")]
    cache = pod("cache", labels={"app": "cache"}, cpu="500m", node_name="b1")
    result = run(nodes, [cache, pod("app", cpu="1", affinity=affinity(aff_term({"app": "cache"}, ZONE)))])["app"]
    assert result.node is None
    # a1 is in the wrong zone and nokey lacks the key: both affinity; b1 passes affinity but is full.
    assert result.reasons == {"a1": [AFFINITY], "b1": ["Insufficient cpu"], "nokey": [AFFINITY]}


def test_affinity_without_any_matching_pod_is_unschedulable() -> None:
    """The pod does not match its own term, so it cannot be the first of its group."""
    result = run([node("n1"), node("n2")], [pod("app", affinity=affinity(aff_term({"app": "cache"})))])["app"]
    assert result.node is None
    assert reason_counts(result) == {AFFINITY: 2}


def test_first_pod_of_a_self_matching_group_goes_anywhere_with_the_key() -> None:
    grp = {"group": "g1"}
    nodes = [node("z1", labels={ZONE: "a"}), node("z2", labels={ZONE: "b"}), node("nokey")]
    pods = [pod(f"p{i}", labels=grp, affinity=affinity(aff_term(grp, ZONE))) for i in range(4)]
    for seed in range(4):
        results = run(nodes, pods, seed=seed)
        placed = {r.node for r in results.values()}
        assert None not in placed
        assert len(placed) == 1  # the first picks a zone, the rest follow it
        assert placed <= {"z1", "z2"}
    only_nokey = run([node("nokey")], pods[:1])["p0"]
    assert only_nokey.node is None
    assert only_nokey.reasons == {"nokey": [AFFINITY]}


def test_first_pod_rule_counts_only_pods_on_nodes_with_the_key() -> None:
    """A matching pod on a node without the topology key adds no topology pair, so the affinity counts stay
    empty and the self-matching newcomer may still start the group (updateWithAffinityTerms / update)."""
    grp = {"group": "g1"}
    nodes = [node("nokey"), node("z1", labels={ZONE: "a"})]
    existing = pod("old", labels=grp, node_name="nokey")
    result = run(nodes, [existing, pod("new", labels=grp, affinity=affinity(aff_term(grp, ZONE)))])["new"]
    assert result.node == "z1"


def test_affinity_needs_one_pod_matching_all_terms() -> None:
    """Two terms: a domain qualifies only through a pod matching both (podMatchesAllAffinityTerms)."""
    nodes = [big("n1"), big("n2"), big("n3")]
    pods = [
        pod("a", labels={"role": "a"}, node_name="n1"),
        pod("b", labels={"role": "b"}, node_name="n2"),
        pod("ab", labels={"role": "a", "tier": "b"}, node_name="n3"),
        pod("new", affinity=affinity(aff_term({"role": "a"}), aff_term({"tier": "b"}))),
    ]
    assert run(nodes, pods)["new"].node == "n3"


def test_affinity_and_anti_affinity_together() -> None:
    """Co-locate with the cache's zone but never on the same host as another app replica."""
    nodes = [big(f"{z}{i}", **{ZONE: z}) for z in "ab" for i in range(2)]
    cache = pod("cache", labels={"app": "cache"}, node_name="a0")
    app = {"app": "app"}
    spec = {**affinity(aff_term({"app": "cache"}, ZONE)), **anti(aff_term(app))}
    results = run(nodes, [cache] + [pod(f"app{i}", labels=app, affinity=spec) for i in range(3)])
    placed = sorted(r.node for r in results.values() if r.node)
    assert placed == ["a0", "a1"]
    (pending,) = [r for r in results.values() if r.node is None]
    assert reason_counts(pending) == {AFFINITY: 2, ANTI: 2}


# ---------------------------------------------------------------------------------------- namespaces


NAMESPACES = [namespace("ml-a", {"team": "ml"}), namespace("ml-b", {"team": "ml"}), namespace("web", {"team": "web"})]


def _cache_in(ns: str) -> dict[str, Any]:
    return pod("cache", namespace=ns, labels={"app": "cache"}, node_name="n2")


@pytest.mark.parametrize(
    ("cache_ns", "term_extra", "expected"),
    [
        ("default", {}, "n2"),  # no namespaces: the pod's own namespace (default)
        ("ml-a", {}, None),
        ("ml-a", {"namespaces": ["ml-a"]}, "n2"),
        ("ml-a", {"namespaces": ["web"]}, None),
        ("ml-b", {"namespaceSelector": {"matchLabels": {"team": "ml"}}}, "n2"),
        ("web", {"namespaceSelector": {"matchLabels": {"team": "ml"}}}, None),
        ("web", {"namespaceSelector": {}}, "n2"),  # empty selector: every namespace
        ("web", {"namespaces": ["web"], "namespaceSelector": {"matchLabels": {"team": "ml"}}}, "n2"),  # union
        ("ml-a", {"namespaces": ["web"], "namespaceSelector": {"matchLabels": {"team": "ml"}}}, "n2"),
        (
            "ml-a",
            {
                "namespaceSelector": {
                    "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml-a"]}]
                }
            },
            "n2",
        ),
    ],
)
def test_affinity_term_sees_only_its_namespaces(cache_ns: str, term_extra: dict, expected: str | None) -> None:
    new = pod("app", affinity=affinity(aff_term({"app": "cache"}, **term_extra)))
    results = run([node("n1"), node("n2")], [_cache_in(cache_ns), new], namespaces=NAMESPACES)
    assert results["app"].node == expected


@pytest.mark.parametrize(
    ("cache_ns", "term_extra", "blocked"),
    [
        ("default", {}, True),
        ("ml-a", {}, False),
        ("ml-a", {"namespaces": ["ml-a"]}, True),
        ("ml-a", {"namespaceSelector": {"matchLabels": {"team": "ml"}}}, True),
        ("web", {"namespaceSelector": {"matchLabels": {"team": "ml"}}}, False),
        ("web", {"namespaceSelector": {}}, True),
    ],
)
def test_anti_affinity_term_sees_only_its_namespaces(cache_ns: str, term_extra: dict, blocked: bool) -> None:
    new = pod("app", affinity=anti(aff_term({"app": "cache"}, **term_extra)))
    results = run([node("n2")], [_cache_in(cache_ns), new], namespaces=NAMESPACES)
    assert (results["app"].node is None) is blocked


# ---------------------------------------------------------------------------------------- preferred


@pytest.mark.parametrize("seed", range(6))
def test_preferred_affinity_moves_the_choice(seed: int) -> None:
    nodes = [big("n1"), big("n2"), big("n3")]
    cache = pod("cache", labels={"app": "cache"}, node_name="n2")
    new = pod("app", affinity=preferred("podAffinity", (50, aff_term({"app": "cache"}))))
    assert run(nodes, [cache, new], seed=seed)["app"].node == "n2"


@pytest.mark.parametrize("seed", range(6))
def test_preferred_anti_affinity_moves_the_choice(seed: int) -> None:
    nodes = [big("n1"), big("n2")]
    noisy = pod("noisy", labels={"app": "noisy"}, node_name="n1", cpu="1")
    other = pod("other", labels={"app": "x"}, node_name="n2", cpu="2")  # n2 is busier: resources prefer n1
    new = pod("app", affinity=preferred("podAntiAffinity", (100, aff_term({"app": "noisy"}))))
    assert run(nodes, [noisy, other, new], seed=seed)["app"].node == "n2"


@pytest.mark.parametrize("seed", range(6))
def test_preferred_affinity_beats_resource_spread(seed: int) -> None:
    """Affinity (weight 2) outweighs a small LeastAllocated difference (weight 1)."""
    nodes = [big("n1"), big("n2")]
    cache = pod("cache", labels={"app": "cache"}, node_name="n2", cpu="10")
    new = pod("app", affinity=preferred("podAffinity", (100, aff_term({"app": "cache"}))))
    assert run(nodes, [cache, new], seed=seed)["app"].node == "n2"


@pytest.mark.parametrize("seed", range(6))
def test_existing_pods_preferred_anti_affinity_counts(seed: int) -> None:
    """Scoring is symmetric too: an existing pod's preferred anti-affinity pushes matching newcomers away."""
    nodes = [big("n1"), big("n2")]
    loner = pod("loner", node_name="n1", affinity=preferred("podAntiAffinity", (100, aff_term({"app": "web"}))))
    filler = pod("filler", node_name="n2")
    assert run(nodes, [loner, filler, pod("web", labels={"app": "web"})], seed=seed)["web"].node == "n2"


@pytest.mark.parametrize("seed", range(6))
def test_heavier_preferred_term_wins(seed: int) -> None:
    nodes = [big("n1"), big("n2"), big("n3")]
    pods = [
        pod("a", labels={"app": "a"}, node_name="n1"),
        pod("b", labels={"app": "b"}, node_name="n2"),
        pod("new", affinity=preferred("podAffinity", (10, aff_term({"app": "a"})), (80, aff_term({"app": "b"})))),
    ]
    assert run(nodes, pods, seed=seed)["new"].node == "n2"


def test_preferred_never_filters() -> None:
    cache = pod("cache", labels={"app": "cache"}, node_name="n1")
    new = pod("app", affinity=preferred("podAntiAffinity", (100, aff_term({"app": "cache"}))))
    assert placements(run([node("n1")], [cache, new])) == {"app": "n1"}


def test_first_pod_rule_needs_the_pod_in_the_terms_namespaces() -> None:
    """The self-match check uses the term's namespaces too: a term looking only at another namespace does not
    select the pod itself, so with no matching pod anywhere the pod cannot start the group."""
    grp = {"group": "g1"}
    own = pod("p", labels=grp, affinity=affinity(aff_term(grp)))
    assert run([node("n1")], [own])["p"].node == "n1"
    elsewhere = pod("p", labels=grp, affinity=affinity(aff_term(grp, namespaces=["other"])))
    result = run([node("n1")], [elsewhere])["p"]
    assert result.node is None
    assert result.reasons == {"n1": [AFFINITY]}


def test_existing_anti_affinity_namespace_selector_matches_a_later_namespace() -> None:
    """Every namespace carries kubernetes.io/metadata.name; the guard's selector picks namespace b by it."""
    term = aff_term({"app": "web"}, namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": "b"}})
    guard = pod("guard", namespace="a", node_name="n1", affinity=anti(term))
    result = run([node("n1")], [guard, pod("web", namespace="b", labels={"app": "web"})])["web"]
    assert result.node is None
    assert result.reasons == {"n1": [EXISTING_ANTI]}


def test_existing_anti_affinity_namespace_selector_with_namespace_objects() -> None:
    term = aff_term({"app": "web"}, namespaceSelector={"matchLabels": {"team": "ml"}})
    guard = pod("guard", namespace="a", node_name="n1", affinity=anti(term))
    namespaces = [namespace("b", {"team": "ml"}), namespace("c", {"team": "web"})]
    blocked = run([node("n1")], [guard, pod("web", namespace="b", labels={"app": "web"})], namespaces=namespaces)
    assert blocked["web"].reasons == {"n1": [EXISTING_ANTI]}
    free = run([node("n1")], [guard, pod("web", namespace="c", labels={"app": "web"})], namespaces=namespaces)
    assert free["web"].node == "n1"


def test_match_label_keys_narrow_anti_affinity_to_the_same_revision() -> None:
    """KEP-3633: matchLabelKeys adds ``key In (own value)``: a new revision ignores the old revision's pods."""
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "kubernetes.io/hostname",
        "matchLabelKeys": ["pod-template-hash"],
    }
    spec = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}

    def web(name: str, rev: str, node_name: str = "") -> dict:
        extra = {"nodeName": node_name} if node_name else {}
        return {
            "metadata": {"name": name, "labels": {"app": "web", "pod-template-hash": rev}},
            "spec": {**spec, **extra, "containers": [{"name": "c"}]},
        }

    from accelsched.api.loader import Inputs
    from accelsched.api.objects import parse_node, parse_pod
    from accelsched.engine import Session

    nodes = [parse_node({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}})]
    old = parse_pod(web("old", "v1", "n1"))
    same = parse_pod(web("same", "v1"))
    new = parse_pod(web("new", "v2"))
    results = {r.pod.name: r for r in Session.start(Inputs(nodes=nodes, pods=[old, same, new])).schedule()}
    assert results["same"].node is None
    assert results["new"].node == "n1"
