"""percentageOfNodesToScore as kube-scheduler v1.36.3 uses it (schedule_one.go numFeasibleNodesToFind and
findNodesThatPassFilters, backend/cache/node_tree.go): the figures below are worked from that source."""

from __future__ import annotations

import numpy as np
import pytest
from builders import node, pod, session

from accelsched.config import parse_config
from accelsched.framework.scheduler import num_feasible_nodes_to_find, snapshot_order, zone_key

ZONE = "topology.kubernetes.io/zone"


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        (0, 10, 10),  # below minFeasibleNodesToFind: every node
        (0, 99, 99),
        (0, 100, 100),  # 50% of 100 is 50, raised to the minimum of 100
        (0, 1000, 420),  # adaptive: 50 - 1000/125 = 42%
        (0, 5000, 500),  # 50 - 40 = 10%
        (0, 6000, 300),  # 50 - 48 = 2%, raised to minFeasibleNodesPercentageToFind 5%
        (10, 500, 100),  # 50 nodes, raised to 100
        (30, 1000, 300),
        (100, 1000, 1000),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def test_snapshot_order_interleaves_zones_in_first_seen_order() -> None:
    zones = ["a", "a", "a", "b", "c", "b", ""]
    assert snapshot_order(zones).tolist() == [0, 3, 4, 6, 1, 5, 2]


def test_zone_key_prefers_the_beta_labels_and_is_empty_without_any() -> None:
    assert zone_key({}) == ""
    assert zone_key({ZONE: "z1"}) == ":\x00:z1"
    assert zone_key({ZONE: "z1", "failure-domain.beta.kubernetes.io/zone": "old"}) == ":\x00:old"
    assert zone_key({"topology.kubernetes.io/region": "r"}) == "r:\x00:"


def cfg(top: int | None = None, profile: int | None = None):
    doc: dict = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    if top is not None:
        doc["percentageOfNodesToScore"] = top
    doc["profiles"] = [{"schedulerName": "default-scheduler"}]
    if profile is not None:
        doc["profiles"][0]["percentageOfNodesToScore"] = profile
    return parse_config(doc)


def big_cluster(n: int = 400, zones: int = 2) -> list[dict]:
    return [node(f"n{i:03d}", labels={ZONE: f"z{i % zones}"}) for i in range(n)]


def test_a_cycle_scores_only_the_first_k_feasible_nodes_from_the_rotating_start() -> None:
    """400 nodes: K = 400 x 30% = 120 (profile value over the top-level 80). The first cycle visits nodes 0..119 in
    snapshot order and scores them; the next starts at 120."""
    s = session(big_cluster(), [], config=cfg(top=80, profile=30))
    sched = s.scheduler
    profile = next(iter(sched.config.profiles.values()))
    assert sched.nodes_to_find(profile) == 120
    order = sched.snapshot_order
    chosen = sched.first_feasible(profile, np.arange(400))
    assert chosen.tolist() == sorted(order[:120].tolist())
    assert sched.next_start_node_index == 120
    # Every even node infeasible: the search goes on until 120 feasible ones, 240 nodes later.
    odd = np.arange(1, 400, 2)
    chosen = sched.first_feasible(profile, odd)
    visited = np.roll(order, -120)
    odd_positions = np.flatnonzero(visited % 2 == 1)
    assert chosen.tolist() == sorted(visited[odd_positions[:120]].tolist())
    assert sched.next_start_node_index == (120 + int(odd_positions[119]) + 1) % 400


def test_fewer_feasible_than_k_keeps_every_one_and_the_start() -> None:
    s = session(big_cluster(), [], config=cfg(profile=30))
    sched = s.scheduler
    profile = next(iter(sched.config.profiles.values()))
    feasible = np.arange(0, 400, 4)  # 100 < 120
    assert sched.first_feasible(profile, feasible) is feasible
    assert sched.next_start_node_index == 0


def test_score_all_nodes_and_small_clusters_score_every_feasible_node() -> None:
    s = session(big_cluster(), [], config=cfg(profile=30))
    sched = s.scheduler
    profile = next(iter(sched.config.profiles.values()))
    sched.score_all_nodes = True
    assert sched.first_feasible(profile, np.arange(400)).size == 400
    small = session(big_cluster(100), []).scheduler
    assert small.nodes_to_find(next(iter(small.config.profiles.values()))) == 100


def test_the_placement_comes_from_the_scored_window() -> None:
    """All 400 nodes equal but one, emptier, outside the first window: kube-scheduler does not see it on the first
    pod's cycle, so the pod goes elsewhere; with --score-all-nodes it goes there."""
    nodes = big_cluster()
    nodes[399] = node("n399", cpu="64", labels={ZONE: "z1"})
    s = session(nodes, [pod("p", cpu="1")], config=cfg(profile=10))  # K = max(40, 100) = 100
    (result,) = s.schedule()
    assert result.node != "n399"
    s = session(nodes, [pod("p", cpu="1")], config=cfg(profile=10))
    s.scheduler.score_all_nodes = True
    (result,) = s.schedule()
    assert result.node == "n399"
