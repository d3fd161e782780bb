"""The resource scores have a vector path (whole cluster) and a scalar path (the one node a bind changed):
they must agree on every node, or cached scores would drift from fresh ones."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsched.api.objects import parse_node, parse_pod
from accelsched.cluster.state import ClusterState
from accelsched.config import parse_config
from accelsched.plugins.noderesources import BALANCED_NAME, FIT_NAME

STRATEGIES = [
    {"type": "LeastAllocated"},
    {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "example.com/gpu", "weight": 3}]},
    {
        "type": "RequestedToCapacityRatio",
        "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]},
    },
]


def plugins(strategy):
    config = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "pluginConfig": [
                        {"name": FIT_NAME, "args": {"scoringStrategy": strategy}},
                        {
                            "name": BALANCED_NAME,
                            "args": {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu"}]},
                        },
                    ],
                }
            ],
        }
    )
    return {p.name: p for p in config.profiles["default-scheduler"].at("score")}


def cluster_of(nodes: list[tuple[int, int, int, int]]) -> ClusterState:
    """Nodes from (cpu millis, memory GiB, GPUs, _) tuples."""
    return ClusterState(
        [
            parse_node(
                {
                    "metadata": {"name": f"n{i}"},
                    "status": {
                        "allocatable": {"cpu": f"{c}m", "memory": f"{m}Gi", "pods": "110", "example.com/gpu": g}
                    },
                }
            )
            for i, (c, m, g, _) in enumerate(nodes)
        ]
    )


node_specs = st.lists(
    st.tuples(st.integers(0, 8000), st.integers(0, 64), st.integers(0, 8), st.integers(0, 3)), min_size=1, max_size=6
)
pod_specs = st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 16), st.integers(0, 4)), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(node_specs, pod_specs, st.sampled_from(range(len(STRATEGIES))))
def test_scalar_and_vector_scores_agree(nodes, pods, which):
    cluster = cluster_of(nodes)
    scored = plugins(STRATEGIES[which])
    for j, (cpu, mem, gpu) in enumerate(pods):
        requests = {"cpu": f"{cpu}m", "memory": f"{mem}Gi"}
        if gpu:
            requests["example.com/gpu"] = str(gpu)
        pod = parse_pod(
            {
                "metadata": {"name": f"p{j}"},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "resources": {
                                "requests": requests,
                                "limits": {k: v for k, v in requests.items() if "/" in k},
                            },
                        }
                    ]
                },
            }
        )
        for name in (FIT_NAME, BALANCED_NAME):
            plugin = scored[name]
            vector = plugin._score_nodes(pod, cluster, np.arange(cluster.n))
            scalar = [plugin._score_node(pod, cluster, i) for i in range(cluster.n)]
            assert vector.tolist() == scalar, name
        target = j % cluster.n
        if all(cluster.free[cluster.res_index[r], target] >= a for r, a in pod.requests.items()):
            cluster.assume(pod, target)


@settings(max_examples=40, deadline=None)
@given(node_specs, pod_specs)
def test_cached_weighted_total_equals_the_per_plugin_sum(nodes, pods):
    """The cycle's cached total (node-local scores, updated at changed nodes) ranks nodes exactly as the weighted
    per-plugin sum does."""
    from accelsched.config import default_config
    from accelsched.framework.interface import CycleState
    from accelsched.framework.scheduler import Scheduler

    cluster = cluster_of(nodes)
    scheduler = Scheduler(cluster, default_config())
    profile = scheduler.config.profiles["default-scheduler"]
    everyone = np.arange(cluster.n)
    for j, (cpu, mem, gpu) in enumerate(pods):
        requests = {"cpu": f"{cpu}m", "memory": f"{mem}Gi", **({"example.com/gpu": str(gpu)} if gpu else {})}
        limits = {k: v for k, v in requests.items() if "/" in k}
        pod = parse_pod(
            {
                "metadata": {"name": f"p{j}"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": requests, "limits": limits}}]},
            }
        )
        state = CycleState()
        fast, _ = scheduler.score(profile, state, pod, scheduler.all_nodes)
        if state.best_nodes is not None:  # the incrementally kept best nodes are exactly the argmax set
            assert sorted(state.best_nodes) == np.flatnonzero(fast == fast.max()).tolist()
        slow, _ = scheduler.score(profile, CycleState(), pod, everyone, breakdown=True)
        # The cached total leaves out plugins that score every node alike (a constant shift, same ranking).
        assert (fast - fast.min()).tolist() == (slow - slow.min()).tolist()
        target = j % cluster.n
        if all(cluster.free[cluster.res_index[r], target] >= a for r, a in pod.requests.items()):
            cluster.assume(pod, target)
