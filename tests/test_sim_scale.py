"""``simulate --scale-nodes/--scale-pods``: the trace copied to a bigger (or smaller) cluster with the same mix, and
the time-based replay's waiting queue at that size: the same decisions as the plain queue rule, and no full-cluster
filter pass for a request that cannot have room (its cost does not grow with Pending pods x nodes)."""

from __future__ import annotations

import heapq
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from sim_traces import write_trace

from accelsched.cli import main
from accelsched.sim import scale, timeline
from accelsched.sim.cluster import SimCluster
from accelsched.sim.fragmentation import trace_typical_pods
from accelsched.sim.replay import FastEngine, shapes_of
from accelsched.sim.trace import load_nodes, load_pods


@pytest.fixture
def trace(tmp_path):
    node_path, pod_path = write_trace(tmp_path, 3, nodes=10, pods=120)
    return load_nodes(node_path), load_pods(pod_path)


def test_replicas_take_whole_copies_then_evenly_spaced_rows():
    rows, copies = scale.replicas(4, 2.5)
    assert rows.tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 2]
    assert copies.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    rows, copies = scale.replicas(10, 0.3)  # a smaller cluster: every third row or so, not a prefix
    assert rows.tolist() == [0, 3, 6] and copies.tolist() == [0, 0, 0]


def test_scaled_trace_keeps_the_mix_names_and_run_times(trace):
    nodes, pods = trace
    big_nodes, big_pods = scale.scale_trace(nodes, pods, 30, None, seed=5)
    assert big_nodes.n == 30 and big_pods.n == 360  # the trace's pods per node
    assert len(set(big_nodes.names)) == 30 and len(set(big_pods.names)) == 360
    assert big_nodes.names[:10] == nodes.names and big_nodes.names[10] == f"{nodes.names[0]}-1"
    assert Counter(big_nodes.model.tolist()) == {m: 3 * c for m, c in Counter(nodes.model.tolist()).items()}

    def shapes(p):
        return Counter(zip(p.cpu, p.memory, p.num_gpu, p.gpu_milli, p.spec, strict=True))

    assert shapes(big_pods) == {s: 3 * c for s, c in shapes(pods).items()}
    run = pods.deletion - pods.creation
    assert (big_pods.deletion - big_pods.creation).tolist() == np.tile(run, 3).tolist()
    assert big_pods.creation[:120].tolist() == pods.creation.tolist()  # copy 0 is the trace itself
    offset = big_pods.creation[120:] - np.tile(pods.creation, 2)
    gap = (pods.creation.max() - pods.creation.min()) // (pods.n - 1)
    assert offset.min() >= 0 and offset.max() < gap and len(set(offset.tolist())) > 1
    again = scale.scale_trace(nodes, pods, 30, None, seed=5)[1]
    other = scale.scale_trace(nodes, pods, 30, None, seed=6)[1]
    assert again.creation.tolist() == big_pods.creation.tolist() != other.creation.tolist()
    assert scale.scale_trace(nodes, pods, 30, 500, seed=5)[1].n == 500


def naive_replay(nodes, pods, policy: str, seed: int, typical) -> tuple[list, list]:
    """The queue rule of docs/simulate.md written plainly: departures, then every waiting pod in arrival order
    (a request that failed in the pass is skipped), then the arrivals. Samples (time, allocated, waiting) and
    delays."""
    engine = FastEngine(nodes, typical, pods.specs, policy, seed, "random")
    shapes, specs = shapes_of(pods), pods.spec.tolist()
    created, duration = pods.creation.tolist(), (pods.deletion - pods.creation).tolist()
    leaving: list = []
    waiting: list[int] = []
    samples, delays = [], []

    def start(i: int, now: int) -> bool:
        placed = engine.schedule(shapes[i], specs[i])
        if placed is not None:
            heapq.heappush(leaving, (now + duration[i], i, *placed))
            if now > created[i]:
                delays.append(now - created[i])
        return placed is not None

    order = sorted(range(pods.n), key=lambda i: (created[i], i))
    k = 0
    while k < len(order) or leaving:
        now = min(created[order[k]] if k < len(order) else 1 << 62, leaving[0][0] if leaving else 1 << 62)
        left = False
        while leaving and leaving[0][0] == now:
            _, i, node, gpus = heapq.heappop(leaving)
            engine.cluster.remove(node, shapes[i], gpus)
            left = True
        if left:
            failed, still = set(), []
            for i in waiting:
                if (shapes[i], specs[i]) in failed or not start(i, now):
                    failed.add((shapes[i], specs[i]))
                    still.append(i)
            waiting = still
        while k < len(order) and created[order[k]] == now:
            i = order[k]
            k += 1
            if engine.cluster.fits_empty(shapes[i], specs[i]) and not start(i, now):
                waiting.append(i)
        samples.append((now, engine.cluster.allocated, len(waiting)))
    return samples, delays


@pytest.mark.parametrize("policy", ["fgd", "bestfit", "random"])
def test_the_waiting_queue_decides_as_the_plain_rule(trace, policy):
    nodes, pods = scale.scale_trace(*trace, 10, 300, seed=1)  # crowded: pods wait and retry
    pods.creation //= 20  # arrivals close together: a backlog
    typical = trace_typical_pods(pods, nodes.models)
    run = timeline.replay(nodes, pods, policy, 9, typical, "random")
    samples, delays = naive_replay(nodes, pods, policy, 9, typical)
    assert int(run.waiting.max()) > 25  # the case has a real backlog
    assert list(zip(run.times.tolist(), run.allocated.tolist(), run.waiting.tolist(), strict=True)) == samples
    assert run.delays.tolist() == delays


def test_a_request_that_cannot_have_room_gets_no_full_filter_pass(trace, monkeypatch):
    # The cost guard: departures that free room a waiting request cannot use must not filter all nodes for it.
    # Counted: full-cluster filter passes (SimCluster.feasible), against arrivals + pods started after a wait.
    nodes, pods = scale.scale_trace(*trace, 10, 300, seed=1)
    pods.creation //= 20
    passes = 0
    feasible = SimCluster.feasible

    def counting(self, pod, spec):
        nonlocal passes
        passes += 1
        return feasible(self, pod, spec)

    monkeypatch.setattr(SimCluster, "feasible", counting)
    run = timeline.replay(nodes, pods, "bestfit", 9, tie_break="random")
    started_after_wait = len(run.delays)
    assert int(run.waiting.max()) > 25
    # Each departure instant tries each waiting request once at most; with the queueing hint most are not tried.
    retries_allowed = pods.n + started_after_wait
    assert passes <= retries_allowed + 0.1 * pods.n, (passes, retries_allowed)


def test_scale_options_are_checked_before_anything_runs():
    runner = CliRunner()
    result = runner.invoke(main, ["simulate", "--scale-nodes", "15000", "--seeds", "42"])
    assert result.exit_code == 2
    assert "--scale-nodes: scales the time-based replay (--mode timeline) only" in result.output
    result = runner.invoke(main, ["simulate", "--mode", "timeline", "--scale-pods", "0"])
    assert result.exit_code == 2 and "--scale-pods: must be from 1 to" in result.output
    assert "Traceback" not in result.output


@pytest.mark.integration  # a fresh simulate process, as the benchmarks' smoke tests
def test_the_benchmark_row_runs_simulate_at_a_scaled_size(monkeypatch):
    # benchmarks/ is not an installed package: import it from the checkout
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    from benchmarks.simulate import scale_rows

    (row,) = scale_rows([60], 10.5, timeout=300)
    assert row["rc"] == 0 and row["nodes"] == 60 and row["pods"] == 630
    assert 0 < row["peak_waiting"] < row["pods"] and row["peak_rss_mib"] > 0
