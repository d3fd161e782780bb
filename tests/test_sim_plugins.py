"""The FGD paper's policies are score plugins of the framework: a KubeSchedulerConfiguration enables them, and
FGDScore's choice of GPU for a sharing pod reaches the device IDs DeviceAllocation hands out."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from builders import start
from click.testing import CliRunner
from sim_traces import trace_folder

from accelsched.cli import main
from accelsched.config import parse_config
from accelsched.devices.partition import MILLI_RESOURCE
from accelsched.errors import InputError
from accelsched.plugins.registry import REGISTRY
from accelsched.sim.policies import POLICIES


def milli_node(name: str, devices: int = 2) -> dict:
    annotation = yaml.safe_dump({"mode": "milli", "devices": devices})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"accelsched.io/gpu-model": "T4"},
            "annotations": {"accelsched.io/partitioning": annotation},
        },
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
    }


def share_pod(name: str, milli: int, node_name: str = "", held: str = "") -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if held:
        meta["annotations"] = {"accelsched.io/devices": json.dumps({MILLI_RESOURCE: [held]})}
    spec: dict = {
        "containers": [
            {
                "name": "c",
                "resources": {"requests": {MILLI_RESOURCE: str(milli)}, "limits": {MILLI_RESOURCE: str(milli)}},
            }
        ]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def profile_config(plugin: str, args: dict | None = None) -> dict:
    profile: dict = {
        "schedulerName": "default-scheduler",
        "plugins": {
            "multiPoint": {"enabled": [{"name": plugin}]},
            "score": {"disabled": [{"name": "*"}], "enabled": [{"name": plugin}]},
        },
    }
    if args is not None:
        profile["pluginConfig"] = [{"name": plugin, "args": args}]
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": [profile]}


def schedule(config: dict, *docs: dict) -> dict:
    session = start(*docs, config=parse_config(config))
    return {r.pod.name: r for r in session.rejected + session.schedule()}


def test_every_policy_is_a_registered_score_plugin():
    for cls in POLICIES.values():
        assert cls.name in REGISTRY
        parse_config(profile_config(cls.name))  # enabling it is a valid configuration


def test_fgd_picks_the_gpu_that_keeps_shares_usable():
    # gpu-0 has 600 free, gpu-1 1000. A 400 share: binpack would take gpu-0 (tightest) and strand 200; FGD, told that
    # 600 shares are typical, takes gpu-1 so both GPUs still fit one.
    docs = [milli_node("a"), share_pod("held", 400, "a", "gpu-0:milli=400"), share_pod("new", 400)]
    typical = {"typicalPods": [{"cpuMilli": 0, "numGpu": 1, "gpuMilli": 600, "weight": 1}]}
    fgd = schedule(profile_config("FGDScore", typical), *docs)
    assert fgd["new"].devices == {MILLI_RESOURCE: ["gpu-1:milli=400"]}
    binpack = schedule(profile_config("BestFitScore"), *docs)
    assert binpack["new"].devices == {MILLI_RESOURCE: ["gpu-0:milli=400"]}


def whole_pod(name: str) -> dict:
    resources = {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": resources}]},
    }


def test_fgd_learns_typical_pods_from_the_workload_without_args():
    # Having seen a whole-GPU pod, FGD counts a half-used GPU as fragment for it: the next share fills that GPU
    # instead of opening another, so four shares pair up on two GPUs.
    docs = [milli_node("a"), milli_node("b"), whole_pod("w"), *[share_pod(f"p{i}", 500) for i in range(4)]]
    results = schedule(profile_config("FGDScore"), *docs)
    assert all(r.scheduled for r in results.values())
    used = {d.split(":")[0] + "@" + r.node for r in results.values() for d in r.devices.get(MILLI_RESOURCE, [])}
    assert len(used) == 2


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"typicalPods": [{"cpuMilli": 1, "numGpu": 1, "gpuMilli": 0}]}, "args.typicalPods[0].gpuMilli"),
        ({"typicalPods": [{"numGpu": 9, "gpuMilli": 1000}]}, "args.typicalPods[0].numGpu"),
        ({"typicalPods": [{"gpus": 1}]}, "args.typicalPods[0]"),
        ({"bogus": 1}, "args"),
    ],
)
def test_bad_plugin_args_name_the_field(args, field):
    with pytest.raises(InputError) as err:
        parse_config(profile_config("FGDScore", args))
    assert field in str(err.value)


def test_simulate_replays_any_scoring_profile_through_the_scheduler(tmp_path):
    pod_path = trace_folder(tmp_path, 6, nodes=8, pods=60)
    config = tmp_path / "mostallocated.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": "default-scheduler",
                        "pluginConfig": [
                            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
                        ],
                    }
                ],
            }
        )
    )
    args = [
        "simulate",
        "--data",
        str(tmp_path),
        "--pods",
        str(pod_path),
        "--policy",
        f"bestfit,{config}",
        "--seeds",
        "1",
        "--jobs",
        "1",
        "-o",
        "json",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = {p["policy"]: p for p in json.loads(result.output)["policies"]}
    assert set(rows) == {"bestfit", "mostallocated"} and 0 < rows["mostallocated"]["final_alloc"] <= 1


# ------------------------------------------------------------------------- FGD's learned typical pods (no args)


def learned_cluster():
    from accelsched.api.objects import parse_node, parse_pod
    from accelsched.cluster.state import ClusterState

    cluster = ClusterState([parse_node(milli_node(n)) for n in ("a", "b", "c")])
    return cluster, parse_pod


def spec_pod(name: str, milli: int, models: list[str]) -> dict:
    doc = share_pod(name, milli)
    term = {"matchExpressions": [{"key": "accelsched.io/gpu-model", "operator": "In", "values": models}]}
    doc["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    return doc


def test_learned_typical_pods_count_bound_pods_with_their_gpu_spec_and_forget_deleted_ones():
    from accelsched.plugins.gpushare import LearnedShapes

    cluster, parse_pod = learned_cluster()
    learned = LearnedShapes()
    models = ["T4", "V100", ""]
    a, b = parse_pod(share_pod("a", 500)), parse_pod(spec_pod("b", 300, ["V100"]))
    cluster.assume(a, 0)
    cluster.assume(b, 1)
    typical = learned.typical(cluster, models)
    shapes = {(int(typical.milli[t]), tuple(models[m] for m in range(3) if typical.access[m, t])) for t in range(2)}
    assert shapes == {(500, ("T4", "V100", "")), (300, ("V100",))}  # gpu_spec kept: b accepts V100 only
    cluster.forget(a)  # deleted: no longer part of the workload
    typical = learned.typical(cluster, models)
    assert typical.size == 1 and int(typical.milli[0]) == 300 and typical.covered == 1
    empty, _ = learned_cluster()  # another cluster: counted afresh, nothing of the first one kept
    assert learned.typical(empty, models).covered == 0


def test_learned_typical_pods_recount_only_changed_nodes_and_keep_the_most_common_shapes(monkeypatch):
    from accelsched.plugins import gpushare

    cluster, parse_pod = learned_cluster()
    learned = gpushare.LearnedShapes()
    monkeypatch.setattr(gpushare.LearnedShapes, "MAX_SHAPES", 2)
    for i, milli in enumerate([100, 100, 100, 200, 200, 300]):
        cluster.assume(parse_pod(share_pod(f"p{i}", milli)), i % 2)
    counted = []
    real = gpushare.typical_shape
    monkeypatch.setattr(gpushare, "typical_shape", lambda pod: counted.append(pod.name) or real(pod))
    typical = learned.typical(cluster, ["T4", ""])
    assert sorted(int(m) for m in typical.milli) == [100, 200]  # 300 is the third shape: beyond MAX_SHAPES
    assert len(counted) == 6
    counted.clear()
    cluster.assume(parse_pod(share_pod("q", 300)), 2)  # one bind on node c: only node c's pods are recounted
    learned.typical(cluster, ["T4", ""])
    assert counted == ["q"]
    counted.clear()
    assert learned.typical(cluster, ["T4", ""]) is learned.typical(cluster, ["T4", ""])  # nothing changed
    assert counted == []


def test_fgd_does_not_count_the_pod_it_scores():
    # No pod bound yet: the first share is scored with no typical pods at all (every node alike), not with itself.
    from accelsched.framework.interface import CycleState
    from accelsched.plugins.gpushare import FACTORIES

    cluster, parse_pod = learned_cluster()
    plugin = FACTORIES["FGDScore"]({}, None)
    pod = parse_pod(share_pod("first", 500))
    state = CycleState()
    plugin.pre_filter(state, pod, cluster)
    scores = plugin.score(state, pod, cluster, np.arange(3))
    assert plugin.policy.typical.covered == 0 and set(scores.tolist()) == {50}
