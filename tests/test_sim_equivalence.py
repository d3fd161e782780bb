"""The simulator's fast path places every pod exactly where the framework's Scheduler (with the policy's score
plugin, DevicePartition's milli ledger and DeviceAllocation's GPU choice) places it: same node, same GPUs."""

from __future__ import annotations

import pytest
from sim_traces import write_trace

from accelsched.sim import generic
from accelsched.sim.fragmentation import trace_typical_pods
from accelsched.sim.policies import POLICIES
from accelsched.sim.replay import FastEngine, shapes_of
from accelsched.sim.trace import load_nodes, load_pods


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(
    ("seed", "tie_break"), [(3, "name"), (5, "random"), pytest.param(11, "random", marks=pytest.mark.integration)]
)
def test_fast_path_places_like_the_scheduler(tmp_path, policy, seed, tie_break):
    node_path, pod_path = write_trace(tmp_path, seed, nodes=16, pods=180)
    nodes, pods = load_nodes(node_path), load_pods(pod_path)
    typical = trace_typical_pods(pods, nodes.models)
    fast = FastEngine(nodes, typical, pods.specs, policy, seed, tie_break)
    slow = generic.GenericEngine(nodes, generic.policy_config(policy, typical, nodes.models, seed), seed, tie_break)
    shapes = shapes_of(pods)
    placed = failed = shared = 0
    for i, shape in enumerate(shapes):
        want = slow.schedule(generic.trace_pod(pods, i, pods.names[i]), int(pods.gpu_request[i]))
        got = fast.schedule(shape, int(pods.spec[i]))
        assert got == want, f"pod {pods.names[i]} ({shape})"
        placed += got is not None
        failed += got is None
        shared += got is not None and shape.sharing
    assert (fast.cluster.gpu_free == slow.gpu_free()).all()
    assert fast.cluster.allocated == slow.allocated
    # The trace is crowded enough to exercise every branch: shares, failures, and placements.
    assert placed > 40 and failed > 15 and shared > 25
