"""The time-based replay's queue rule and its properties: a pod that fits no node even of the empty cluster is
rejected at arrival (unschedulable), every arrival is tried at once, waiting pods retry in arrival order when
something leaves; whatever arrives and leaves, no GPU holds more than 1000 milli and CPU and memory never overcommit.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_traces import NODE_HEADER, POD_HEADER

from accelsched.sim import timeline
from accelsched.sim.cluster import SimCluster
from accelsched.sim.policies import POLICIES
from accelsched.sim.trace import MILLI, load_nodes, load_pods


def write(tmp_path, nodes: list[str], pods: list[str]):
    """nodes: 'name,cpu,memory,gpus,model'; pods: 'name,cpu,memory,num_gpu,milli,spec,created,deleted'."""
    node_path, pod_path = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    node_path.write_text("\n".join([NODE_HEADER, *nodes]) + "\n")
    rows = []
    for line in pods:
        name, cpu, mem, num, milli, spec, created, deleted = line.split(",")
        rows.append(f"{name},{cpu},{mem},{num},{milli},{spec},LS,Running,{created},{deleted},{created}")
    pod_path.write_text("\n".join([POD_HEADER, *rows]) + "\n")
    return load_nodes(node_path), load_pods(pod_path)


def test_a_pod_that_fits_no_empty_node_is_rejected_at_arrival_and_blocks_no_one(tmp_path):
    # The reviewer's case: a pod asking for 999 cores arrives first; the shares after it must run on arrival.
    nodes, pods = write(
        tmp_path,
        ["n1,64000,262144,8,T4"],
        [
            "big,999000,1024,0,0,,0,100",
            "p1,1000,1024,1,500,,10,20",
            "p2,1000,1024,1,500,,30,40",
            "p3,1000,1024,1,500,,50,60",
        ],
    )
    run = timeline.replay(nodes, pods, "fgd", 0)
    assert run.unschedulable == 1 and run.never == 0
    assert len(run.delays) == 0  # nobody waited
    assert int(run.waiting.max()) == 0
    assert int(run.allocated.max()) == 500


def test_unschedulable_covers_memory_gpu_count_and_gpu_model(tmp_path):
    nodes, pods = write(
        tmp_path,
        ["n1,64000,1024,2,T4", "n2,8000,262144,1,G2"],
        [
            "mem,1000,4096,1,500,T4,0,10",  # only n1 is T4, and it has 1 GiB
            "gpus,1000,1024,4,1000,,0,10",  # no node has 4 GPUs
            "model,1000,1024,1,500,V100M32,0,10",  # no V100M32 node
            "ok,1000,1024,1,500,G2,0,10",
        ],
    )
    run = timeline.replay(nodes, pods, "bestfit", 0)
    assert run.unschedulable == 3 and run.never == 0 and int(run.allocated.max()) == 500


def test_arrivals_are_tried_at_once_and_waiting_pods_retry_in_arrival_order(tmp_path):
    # One 1-GPU node. a holds the GPU 0..100; b and c (whole GPU) arrive at 10 and 20 and wait; d (CPU only) arrives
    # at 30 and runs at once although others wait. At 100 a leaves: b (first to arrive) gets the GPU, c waits on
    # until b leaves at 150.
    nodes, pods = write(
        tmp_path,
        ["n1,64000,262144,1,T4"],
        [
            "a,1000,1024,1,1000,,0,100",
            "b,1000,1024,1,1000,,10,60",
            "c,1000,1024,1,1000,,20,40",
            "d,1000,1024,0,0,,30,35",
        ],
    )
    run = timeline.replay(nodes, pods, "bestfit", 0)
    assert sorted(run.delays.tolist()) == [100 - 10, 150 - 20]  # b: 90 s, c: waits for b's 50 s run too
    assert run.never == 0 and run.unschedulable == 0
    at = {int(t): int(w) for t, w in zip(run.times, run.waiting, strict=True)}
    assert at[30] == 2  # d ran on arrival; b and c still wait
    assert at[100] == 1 and at[150] == 0


# ------------------------------------------------------------------------------------------------ properties

MODELS = ("T4", "G2", "V100M32")
node_st = st.tuples(
    st.sampled_from([4000, 8000, 16000]),
    st.sampled_from([4096, 16384]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from(MODELS),
)
pod_st = st.tuples(
    st.sampled_from([0, 2000, 4000, 6000]),  # cpu: binding on 4-8 core nodes
    st.sampled_from([1024, 4096, 8192]),  # memory: binding on 4 GiB nodes
    st.one_of(
        st.just((0, 0)),
        st.tuples(st.just(1), st.integers(1, MILLI)),
        st.tuples(st.sampled_from([1, 2, 4]), st.just(MILLI)),
    ),
    st.sampled_from(["", "T4", "G2|V100M32"]),
    st.integers(0, 40),  # arrival gap
    st.integers(1, 80),  # run time
)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    spec=st.lists(node_st, min_size=1, max_size=5),
    pods=st.lists(pod_st, min_size=1, max_size=50),
    policy=st.sampled_from(sorted(POLICIES)),
    tie_break=st.sampled_from(["paper", "name", "random"]),
)
def test_timeline_replay_never_overcommits(tmp_path_factory, monkeypatch, spec, pods, policy, tie_break):
    tmp = tmp_path_factory.mktemp("tl")
    t = 0
    rows = []
    for i, (cpu, mem, (num, milli), gspec, gap, run) in enumerate(pods):
        t += gap
        rows.append(f"p{i},{cpu},{mem},{num},{milli},{gspec},{t},{t + run}")
    nodes, trace = write(tmp, [f"n{i},{c},{m},{g},{model}" for i, (c, m, g, model) in enumerate(spec)], rows)
    # What every GPU, CPU and memory holds, from the binds and departures themselves (not from the ledger).
    held: dict[int, tuple[int, object, tuple[int, ...]]] = {}
    binds = itertools.count()
    place, remove = SimCluster.place, SimCluster.remove

    def spy_place(self, node, pod, gpu=None):
        taken = place(self, node, pod, gpu)
        held[next(binds)] = (node, pod, taken)
        return taken

    def spy_remove(self, node, pod, taken):
        key = next(k for k, v in held.items() if v[0] == node and v[1] is pod and v[2] == taken)
        del held[key]
        remove(self, node, pod, taken)

    monkeypatch.setattr(SimCluster, "place", spy_place)
    monkeypatch.setattr(SimCluster, "remove", spy_remove)
    exists = np.arange(8)[None, :] < nodes.gpus[:, None]

    def check(now, cluster):
        gpu = np.zeros((nodes.n, 8), dtype=np.int64)
        cpu = np.zeros(nodes.n, dtype=np.int64)
        mem = np.zeros(nodes.n, dtype=np.int64)
        for node, pod, taken in held.values():
            for g in taken:
                gpu[node, g] += pod.milli if pod.sharing else MILLI
            cpu[node] += pod.cpu
            mem[node] += pod.memory
        assert (gpu <= MILLI).all() and (gpu[~exists] == 0).all(), now
        assert (cpu <= nodes.cpu).all() and (mem <= nodes.memory).all(), now
        assert (cluster.gpu_free == np.where(exists, MILLI - gpu, 0)).all()
        assert (cluster.cpu_free == nodes.cpu - cpu).all() and (cluster.mem_free == nodes.memory - mem).all()
        assert cluster.allocated == int(gpu.sum())

    run = timeline.replay(nodes, trace, policy, 7, tie_break=tie_break, observe=check)
    assert not held  # every pod that ran has left and given everything back
    ran = trace.n - run.unschedulable - run.never
    assert len(run.delays) <= ran and run.never == 0  # everything that fits an empty node runs eventually
