"""The FGD paper's policies are score plugins of the framework: a KubeSchedulerConfiguration enables them, and
FGDScore's choice of GPU for a sharing pod reaches the device IDs DeviceAllocation hands out."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner
from sim_traces import trace_folder

from accelsched.api.loader import Document, Inputs, build_inputs
from accelsched.cli import main
from accelsched.devices.partition import MILLI_RESOURCE
from accelsched.engine import Session
from accelsched.errors import InputError
from accelsched.framework.profile import REGISTRY, parse_config
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
    inputs = build_inputs([Document(d, "test.yaml", d["kind"]) for d in docs], base=Inputs())
    session = Session.start(inputs, parse_config(config))
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
