"""Properties of the replay: it never overcommits a GPU's 1000 milli (nor CPU or memory), whatever arrives and
leaves, and its incrementally kept fragmentation equals the measure computed from scratch."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelsched.sim.cluster import SimCluster
from accelsched.sim.fragmentation import gpu_terms, node_fragmentation, typical_pods
from accelsched.sim.policies import POLICIES, PodShape
from accelsched.sim.replay import FastEngine
from accelsched.sim.trace import MILLI, Nodes

MODELS = ["T4", "G2"]

node_st = st.tuples(st.sampled_from([4000, 16000, 64000]), st.sampled_from([1, 2, 4, 8]), st.sampled_from([0, 1]))
pod_st = st.one_of(
    st.tuples(st.sampled_from([0, 1000, 6000]), st.just(0), st.just(0)),
    st.tuples(st.sampled_from([0, 1000, 6000]), st.just(1), st.integers(1, MILLI)),
    st.tuples(st.sampled_from([0, 1000, 6000]), st.sampled_from([1, 2, 4, 8]), st.just(MILLI)),
)


def nodes_of(spec):
    return Nodes(
        [f"n{i}" for i in range(len(spec))],
        np.array([c for c, _, _ in spec]),
        np.array([65536] * len(spec)),
        np.array([g for _, g, _ in spec]),
        np.array([m for _, _, m in spec]),
        MODELS,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=st.lists(node_st, min_size=1, max_size=6),
    pods=st.lists(pod_st, min_size=1, max_size=60),
    leave=st.lists(st.booleans(), min_size=60, max_size=60),
    policy=st.sampled_from(sorted(POLICIES)),
    tie_break=st.sampled_from(["paper", "name", "random"]),
)
def test_replay_never_overcommits_a_gpu(spec, pods, leave, policy, tie_break):
    nodes = nodes_of(spec)
    shapes = [PodShape(c, 1024, k, m) for c, k, m in pods]
    typical = typical_pods([(s.cpu, s.num_gpu, s.milli, frozenset()) for s in shapes], MODELS)
    engine = FastEngine(nodes, typical, [frozenset()], policy, seed=7, tie_break=tie_break)
    cluster = engine.cluster
    running: list[tuple[PodShape, int, tuple[int, ...]]] = []
    for i, shape in enumerate(shapes):
        placed = engine.schedule(shape, 0)
        if placed is not None:
            running.append((shape, *placed))
        if leave[i] and running:  # pods also leave: what they held must come back exactly
            gone, node, gpus = running.pop(len(running) // 2)
            cluster.remove(node, gone, gpus)
        # What every GPU holds, from the pods themselves: never above 1000 milli, and equal to the ledger.
        held = np.zeros_like(cluster.gpu_free)
        cpu = np.zeros(nodes.n, dtype=np.int64)
        for s, node, gpus in running:
            for g in gpus:
                held[node, g] += s.milli if s.sharing else MILLI
            cpu[node] += s.cpu
        assert (held <= MILLI).all()
        exists = np.arange(8)[None, :] < nodes.gpus[:, None]
        assert (held[~exists] == 0).all()
        assert (cluster.gpu_free == np.where(exists, MILLI - held, 0)).all()
        assert (cluster.cpu_free == nodes.cpu - cpu).all() and (cluster.cpu_free >= 0).all()
        assert (cluster.mem_free >= 0).all()
        assert cluster.allocated == int(held.sum())
        # The fragmentation kept one node at a time equals the measure from scratch.
        fits, usable = gpu_terms(cluster.gpu_free, typical)
        assert (cluster.fits == fits).all() and (cluster.usable == usable).all()
        scratch = node_fragmentation(cluster.gpu_free, cluster.cpu_free, nodes.model, typical).sum()
        assert abs(cluster.fragmentation_milli - scratch) < 1e-6


def test_a_share_that_fits_nowhere_fails_instead_of_overcommitting():
    nodes = nodes_of([(64000, 1, 0)])
    typical = typical_pods([(0, 1, 600, frozenset())], MODELS)
    cluster = SimCluster(nodes, typical, [frozenset()])
    engine = FastEngine(nodes, typical, [frozenset()], "fgd", 0)
    engine.cluster = cluster
    assert engine.schedule(PodShape(0, 0, 1, 600), 0) == (0, (0,))
    assert engine.schedule(PodShape(0, 0, 1, 600), 0) is None  # 400 left on the only GPU
    assert engine.schedule(PodShape(0, 0, 1, 400), 0) == (0, (0,))
    assert cluster.gpu_free[0, 0] == 0
