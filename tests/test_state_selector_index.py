"""ClusterState's pod counts per selector, kept through the (namespace, label) index, equal a count of every pod."""

from __future__ import annotations

import random

import numpy as np

from accelsched.api.objects import parse_node, parse_pod
from accelsched.api.selectors import LabelSelector, Requirement
from accelsched.cluster.podmatch import pod_matches_all
from accelsched.cluster.state import ClusterState


def _pod(i: int, rng: random.Random):
    labels = {"app": f"a{rng.randrange(4)}", "tier": rng.choice(["web", "db"])}
    doc = {
        "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": f"ns{rng.randrange(3)}", "labels": labels},
        "spec": {"containers": [{"name": "c"}]},
    }
    return parse_pod(doc, "t")


def test_indexed_counts_match_a_full_count_through_binds_and_evictions() -> None:
    rng = random.Random(7)
    nodes = [parse_node({"kind": "Node", "metadata": {"name": f"n{i}"}}, "t") for i in range(6)]
    state = ClusterState(nodes)
    conditions = [
        ((LabelSelector((("app", "a1"),)), frozenset({"ns0"})),),  # indexed by (ns0, app, a1)
        ((LabelSelector((("tier", "db"),)), frozenset({"ns1", "ns2"})),),  # two namespaces: not indexed
        ((LabelSelector((), (Requirement("app", "In", ("a0", "a2")),)), frozenset({"ns2"})),),  # no matchLabels
        ((LabelSelector((("app", "a3"),)), None),),  # every namespace
        (
            (LabelSelector((("app", "a2"),)), frozenset({"ns1"})),
            (LabelSelector((("tier", "web"),)), frozenset({"ns1"})),
        ),
    ]
    pods = [_pod(i, rng) for i in range(200)]
    for pod in pods[:100]:  # some bound before the counts are first asked for, the rest after
        state.assume(pod, rng.randrange(6))
    for c in conditions:
        state.match_counts(c)
    for pod in pods[100:]:
        state.assume(pod, rng.randrange(6))
    for pod in rng.sample(pods, 60):
        state.forget(pod)
    for c in conditions:
        expected = np.array(
            [sum(1 for p in state.pods_on[i].values() if pod_matches_all(p, c)) for i in range(6)], dtype=np.int32
        )
        assert state.match_counts(c).tolist() == expected.tolist(), c
        assert expected.sum() > 0, c  # each condition counts something: the test could fail
