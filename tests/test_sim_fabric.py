"""``simulate --fabric``: the gang rule (deterministic, documented), the fabric's grouping, a required level never
left, and the figures (waits, domains against the minimum, stranded free nodes) on a hand-checkable case."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from sim_traces import trace_folder, write_trace
from test_sim_timeline import write

from accelsched.cli import main
from accelsched.sim import fabric, timeline
from accelsched.sim.replay import shapes_of
from accelsched.sim.trace import load_nodes, load_pods


def test_gang_rule_joins_same_shape_seeds_within_the_window_and_scales_them(tmp_path):
    _, pods = write(
        tmp_path,
        ["n1,96000,393216,8,G2"],
        [
            "a,8000,8192,8,1000,,0,100",
            "one,1000,1024,1,1000,,5,50",  # a single GPU: never a gang
            "d,2000,2048,2,1000,,50,60",  # another shape: its own gang
            "b,8000,8192,8,1000,,100,400",  # within 150 s of a: joins it
            "c,8000,8192,8,1000,,200,210",  # 200 s after a: a new gang
        ],
    )
    rule = fabric.GangRule(gang_gpus=2, window=150, scale=3)
    replayed, groups = fabric.derive_gangs(pods, rule)
    assert groups[0] == [0]  # the single pod alone
    gangs = groups[1:]
    assert [[replayed.names[i] for i in g] for g in gangs] == [["a"] * 3 + ["b"] * 3, ["d"] * 3, ["c"] * 3]
    ab = gangs[0]
    # The gang arrives with its first seed and leaves together after the longest seed's run (b: 300 s).
    assert set(replayed.creation[ab].tolist()) == {0} and set(replayed.deletion[ab].tolist()) == {300}
    again, groups_again = fabric.derive_gangs(pods, rule)
    assert groups_again == groups and again.names == replayed.names
    assert np.array_equal(again.deletion, replayed.deletion)


def test_gang_rule_on_the_openb_trace_keeps_shapes_windows_and_counts():
    from accelsched.sim.trace import trace_paths

    pods = load_pods(trace_paths("openb", "default")[1])
    rule = fabric.GangRule(gang_gpus=2, window=3600, scale=2)
    replayed, groups = fabric.derive_gangs(pods, rule)
    seeds = int((pods.num_gpu >= 2).sum())
    assert replayed.n == pods.n - seeds + seeds * rule.scale
    assert sorted(i for g in groups for i in g) == list(range(replayed.n))  # every pod exactly once
    for g in groups:
        if len(g) > 1:
            assert len({(replayed.num_gpu[i], replayed.cpu[i], replayed.memory[i], replayed.spec[i]) for i in g}) == 1
            assert replayed.num_gpu[g[0]] >= 2 and len(g) % rule.scale == 0
    # Deterministic: the same rule gives the same gangs.
    assert fabric.derive_gangs(pods, rule)[1] == groups


def test_nodes_group_into_domains_of_one_kind_and_blocks(tmp_path):
    lines = [f"a{i:02},64000,262144,8,G2" for i in range(20)] + [f"t{i:02},32000,131072,2,T4" for i in range(5)]
    nodes, _ = write(tmp_path, lines, ["p,1000,1024,1,1000,,0,1"])
    layout = fabric.group_nodes(nodes, domain_size=18, block_domains=2)
    sizes = np.bincount(layout.domain).tolist()
    assert sizes == [18, 2, 5]  # G2 cut at 18; the T4 nodes never share a domain with G2 ones
    for d in range(3):
        assert len({nodes.model[i] for i in np.flatnonzero(layout.domain == d)}) == 1
    assert layout.block.tolist() == [0] * 20 + [1] * 5 and layout.blocks == ("block-00", "block-01")


def test_fewest_domains_and_stranded_free_nodes_by_hand():
    assert fabric.fewest_domains(np.array([10, 18, 18]), 20) == 2
    assert fabric.fewest_domains(np.array([10, 18, 18]), 18) == 1
    assert fabric.fewest_domains(np.array([5, 5, 5]), 20) == 0  # cannot hold it at all
    free = np.array([1, 0, 1, 1, 1, 0])
    domain = np.array([0, 0, 1, 1, 2, 2])
    # One queued gang of 2: domain 1 holds it (room 2), domains 0 and 2 do not (room 1).
    assert fabric.stranded_free_nodes(free, domain, [np.array([1, 2, 1])], [np.array([2, 2, 2])]) == (2, 4)
    # A domain no queued gang could ever use (need 0) is neither stranded nor counted as usable.
    assert fabric.stranded_free_nodes(free, domain, [np.array([1, 2, 1])], [np.array([2, 2, 0])]) == (1, 3)
    assert fabric.nearest_rank([0.0, 80.0], 0.5) == 80.0 and fabric.nearest_rank([], 0.95) == 0.0


def hand_case(tmp_path, topology: str) -> fabric.FabricRun:
    """Four 8-GPU nodes in two domains of two: A = {n1, n2}, B = {n3, n0} (n0 has more CPU, so sorts last).
    A one-GPU pod that only n0 can hold (CPU) runs 0-100. Gang 1 (two 8-GPU pods) arrives at 10 and runs to
    1000: only A is whole, so it goes there. Gang 2 (another shape) arrives at 20: B has one node free (n3),
    so it waits, n3 stranded, until the small pod leaves at 100."""
    nodes, pods = write(
        tmp_path,
        ["n0,64000,262144,8,G2", "n1,32000,262144,8,G2", "n2,32000,262144,8,G2", "n3,32000,262144,8,G2"],
        [
            "small,48000,1024,1,1000,,0,100",
            "g1,16000,8192,8,1000,,10,1000",
            "g2,16001,8192,8,1000,,20,2000",
        ],
    )
    layout = fabric.group_nodes(nodes, domain_size=2, block_domains=2)
    rule = fabric.GangRule(gang_gpus=2, window=0, scale=2, big=2)
    return fabric.replay_fabric(nodes, pods, "fgd", 0, rule, layout, topology)


def test_figures_on_a_hand_checkable_case(tmp_path):
    run = hand_case(tmp_path, "required")
    g1, g2 = sorted(run.gangs, key=lambda g: g.arrival)
    assert (g1.wait, g1.domains, g1.fewest) == (0, 1, 1)
    assert (g2.wait, g2.domains, g2.fewest) == (80, 1, 1)
    row = fabric.figures([run])
    assert row["big_gangs"] == 2 and row["big_gang_wait_p50_s"] == 80 and row["big_gang_wait_p95_s"] == 80
    assert row["domains_used"] == 2 and row["domains_minimum"] == 2 and row["domains_over_minimum_max"] == 0
    # From 20 to 100 the one free node (n3) sits in B, too broken for gang 2: all of the free node-time.
    assert run.stranded == 1.0 and run.stranded_nodes == 1.0 and run.free_nodes == 1.0
    assert row["required_level_violations"] == 0


def test_without_a_request_the_gangs_use_more_domains(tmp_path):
    # Pod by pod, FGD puts a gang's pods wherever they score best; a required domain keeps each in one.
    spread = hand_case(tmp_path, "none")
    kept = hand_case(tmp_path, "required")
    assert all(g.wait >= 0 for g in spread.gangs)
    assert sum(g.domains for g in spread.gangs) > sum(g.domains for g in kept.gangs) == 2


class Recording(fabric.FabricArrivals):
    """FabricArrivals that keeps every gang's nodes and how many of its pods each node of the empty cluster holds,
    to check the required level from outside."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.placements: list[tuple[int, list[int], np.ndarray]] = []

    def start(self, engine, shapes, specs, group, now):
        placed = super().start(engine, shapes, specs, group, now)
        if placed is not None and len(group) > 1:
            spec = specs[group[0]]
            empty = fabric.empty_room(self.nodes, shapes[group[0]], engine.cluster.spec_mask[spec] if spec else None)
            self.placements.append((len(group), [node for node, _ in placed], empty))
        return placed


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_a_required_level_is_never_left(tmp_path, seed):
    node_path, pod_path = write_trace(tmp_path, seed, nodes=40, pods=400)
    nodes, pods = load_nodes(node_path), load_pods(pod_path)
    layout = fabric.group_nodes(nodes, domain_size=4, block_domains=2)
    replayed, groups = fabric.derive_gangs(pods, fabric.GangRule(gang_gpus=2, window=200, scale=3))
    arrivals = Recording(nodes, layout, groups, shapes_of(replayed), replayed.spec.tolist(), "required")
    timeline.replay(nodes, replayed, "fgd", seed, compress=5.0, arrivals=arrivals)
    assert arrivals.placements  # some gangs ran
    for count, placed, empty in arrivals.placements:
        assert len(placed) == count
        # Required: one NVLink domain when one could hold the gang on the empty cluster, else one block.
        level = layout.domain if np.bincount(layout.domain, weights=empty).max() >= count else layout.block
        assert len({int(level[n]) for n in placed}) == 1


def test_cli_fabric_json_and_bad_options(tmp_path):
    pods = trace_folder(tmp_path, 5, nodes=30, pods=300)
    args = ["simulate", "--fabric", "--data", str(tmp_path), "--pods", str(pods), "--policy", "fgd", "--seeds", "1"]
    result = CliRunner().invoke(main, [*args, "--compress", "5", "--domain-size", "4", "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [r["topology"] for r in doc["rows"]] == ["required", "none"]
    assert doc["fabric"]["domain_size"] == 4 and doc["fabric"]["topology"]["kind"] == "Topology"
    assert doc["rows"][0]["required_level_violations"] == 0
    assert doc["rows"][0]["gangs"] > 0
    bad = CliRunner().invoke(main, [*args, "--gang-topology", "rack"])
    assert bad.exit_code == 2 and "--gang-topology: unknown request 'rack'" in bad.output
    profile = tmp_path / "sched.yaml"
    profile.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    bad = CliRunner().invoke(main, [*args[:-4], "--devices", "dra", "--policy", str(profile), "--seeds", "1"])
    assert bad.exit_code == 2 and "inflation mode; --fabric runs on the device-plugin model only" in bad.output
    bad = CliRunner().invoke(main, [*args, "--domain-size", "0"])
    assert bad.exit_code == 2 and "--domain-size" in bad.output
