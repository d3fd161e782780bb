"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): enabling, disabling, reweighting, plugin args.

Kubernetes sources:
- pkg/scheduler/apis/config/v1/default_plugins.go and ``mergePlugins``: per extension point, ``disabled``
  removes default plugins (``*`` all of them), ``enabled`` adds or overrides (with a score weight).
- pkg/scheduler/framework/plugins/noderesources/least_allocated.go / most_allocated.go: LeastAllocated scores
  free capacity (spread), MostAllocated scores used capacity (bin packing); chosen by
  NodeResourcesFitArgs.scoringStrategy.type.
- The configuration is decoded strictly: unknown fields and unknown plugin names are errors
  (pkg/scheduler/apis/config/validation, ``frameworkruntime.NewFramework``: "... does not exist").
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import config, node, pod, run, taint

from accelsched.config import parse_config
from accelsched.errors import InputError


def kubeconfig(**top: Any) -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", **top}


# ---------------------------------------------------------------------------------------- disabling


def test_disable_taint_toleration_at_filter() -> None:
    nodes = [node("tainted", taints=[taint("dedicated", "NoSchedule")])]
    assert run(nodes, [pod("p")])["p"].node is None
    cfg = config(plugins={"filter": {"disabled": [{"name": "TaintToleration"}]}})
    assert run(nodes, [pod("p")], config=cfg)["p"].node == "tainted"


def test_disable_through_multipoint() -> None:
    nodes = [node("cordoned", unschedulable=True)]
    cfg = config(plugins={"multiPoint": {"disabled": [{"name": "NodeUnschedulable"}]}})
    assert run(nodes, [pod("p")], config=cfg)["p"].node == "cordoned"


def test_disable_all_filters_then_enable_one() -> None:
    nodes = [node("cordoned", unschedulable=True), node("tainted", taints=[taint("x")]), node("small", cpu="1")]
    cfg = config(plugins={"filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit"}]}})
    results = run(nodes, [pod(f"p{i}", cpu="2") for i in range(4)], config=cfg)
    assert {r.node for r in results.values()} == {"cordoned", "tainted"}
    default = run(nodes, [pod("p", cpu="2")])["p"]
    assert default.node is None


def test_disabling_a_filter_keeps_its_score() -> None:
    """Disabled at filter only, TaintToleration still scores PreferNoSchedule at Score."""
    nodes = [node("spot", taints=[taint("spot", "PreferNoSchedule")]), node("ondemand")]
    cfg = config(plugins={"filter": {"disabled": [{"name": "TaintToleration"}]}})
    for seed in range(4):
        assert run(nodes, [pod("p")], config=cfg, seed=seed)["p"].node == "ondemand"
    no_score = config(plugins={"score": {"disabled": [{"name": "TaintToleration"}]}})
    seen = {run(nodes, [pod("p")], config=no_score, seed=s)["p"].node for s in range(16)}
    assert seen == {"spot", "ondemand"}


# ---------------------------------------------------------------------------------------- scoring strategy


def _fit_strategy(kind: str) -> Any:
    return config(pluginConfig=[{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": kind}}}])


@pytest.mark.parametrize("seed", range(4))
def test_most_vs_least_allocated(seed: int) -> None:
    """The busy node is half full; the pod keeps both nodes balanced, so only the strategy differs."""
    nodes = [node("busy", cpu="8", memory="32Gi"), node("idle", cpu="8", memory="32Gi")]
    pods = [pod("old", cpu="4", memory="16Gi", node_name="busy"), pod("new", cpu="1", memory="4Gi")]
    assert run(nodes, pods, seed=seed)["new"].node == "idle"  # default: LeastAllocated
    assert run(nodes, pods, config=_fit_strategy("LeastAllocated"), seed=seed)["new"].node == "idle"
    assert run(nodes, pods, config=_fit_strategy("MostAllocated"), seed=seed)["new"].node == "busy"


def test_most_allocated_binpacks_a_stream() -> None:
    nodes = [node(f"n{i}", cpu="4", memory="16Gi") for i in range(4)]
    pods = [pod(f"p{i}", cpu="1", memory="4Gi") for i in range(8)]
    packed = run(nodes, pods, config=_fit_strategy("MostAllocated"))
    assert len({r.node for r in packed.values()}) == 2
    spread = run(nodes, pods)
    assert len({r.node for r in spread.values()}) == 4


def test_requested_to_capacity_ratio_shape() -> None:
    """A rising shape packs like MostAllocated."""
    cfg = config(
        pluginConfig=[
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": "RequestedToCapacityRatio",
                        "requestedToCapacityRatio": {
                            "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                        },
                    }
                },
            }
        ]
    )
    nodes = [node("busy", cpu="8", memory="32Gi"), node("idle", cpu="8", memory="32Gi")]
    pods = [pod("old", cpu="4", memory="16Gi", node_name="busy"), pod("new", cpu="1", memory="4Gi")]
    assert run(nodes, pods, config=cfg)["new"].node == "busy"


# ---------------------------------------------------------------------------------------- weights


def _conflict() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ssd node is preferred by NodeAffinity but carries a PreferNoSchedule taint."""
    nodes = [node("ssd", labels={"disk": "ssd"}, taints=[taint("spot", "PreferNoSchedule")]), node("plain")]
    aff = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                }
            ]
        }
    }
    return nodes, pod("p", affinity=aff)


@pytest.mark.parametrize("seed", range(4))
def test_weight_change_alters_the_choice(seed: int) -> None:
    nodes, p = _conflict()
    # Default weights: TaintToleration 3 x 100 on plain beats NodeAffinity 2 x 100 on ssd.
    assert run(nodes, [p], seed=seed)["p"].node == "plain"
    heavier = config(plugins={"score": {"enabled": [{"name": "NodeAffinity", "weight": 5}]}})
    assert run(nodes, [p], config=heavier, seed=seed)["p"].node == "ssd"
    lighter_taints = config(plugins={"multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 1}]}})
    assert run(nodes, [p], config=lighter_taints, seed=seed)["p"].node == "ssd"


# ---------------------------------------------------------------------------------------- bad configuration


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        (kubeconfig(profiles=[{"plugins": {"filter": {"enabled": [{"name": "NoSuchPlugin"}]}}}]), "NoSuchPlugin"),
        (
            kubeconfig(profiles=[{"plugins": {"score": {"disabled": [{"name": "TaintTolerations"}]}}}]),
            "TaintTolerations",
        ),
        (kubeconfig(profiles=[{"pluginConfig": [{"name": "NodeResourceFit", "args": {}}]}]), "NodeResourceFit"),
        (kubeconfig(bogusField=1), "bogusField"),
        (kubeconfig(profiles=[{"schedulerName": "x", "plugin": {}}]), "plugin"),
        (kubeconfig(profiles=[{"plugins": {"filters": {}}}]), "filters"),
        (
            kubeconfig(
                profiles=[
                    {
                        "pluginConfig": [
                            {"name": "NodeResourcesFit", "args": {"scoringStrategyy": {"type": "MostAllocated"}}}
                        ]
                    }
                ]
            ),
            "scoringStrategyy",
        ),
        (
            kubeconfig(
                profiles=[
                    {
                        "pluginConfig": [
                            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAlocated"}}}
                        ]
                    }
                ]
            ),
            "MostAlocated",
        ),
        (
            kubeconfig(
                profiles=[{"pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 101}}]}]
            ),
            "hardPodAffinityWeight",
        ),
    ],
)
def test_bad_config_names_the_culprit(doc: dict[str, Any], named: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_config(doc, "sched.yaml")
    assert named in str(exc.value)


def test_bad_kind_and_api_version() -> None:
    with pytest.raises(InputError, match="kind"):
        parse_config({**kubeconfig(), "kind": "KubeSchedulerConfig"})
    with pytest.raises(InputError, match="apiVersion"):
        parse_config({**kubeconfig(), "apiVersion": "kubescheduler.config.k8s.io/v1beta1"})


def test_second_profile_serves_its_scheduler_name() -> None:
    cfg = parse_config(
        kubeconfig(
            profiles=[
                {"schedulerName": "default-scheduler"},
                {
                    "schedulerName": "packer",
                    "pluginConfig": [
                        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
                    ],
                },
            ]
        )
    )
    nodes = [node("busy", cpu="8", memory="32Gi"), node("idle", cpu="8", memory="32Gi")]
    old = pod("old", cpu="4", memory="16Gi", node_name="busy")
    packer = pod("new", cpu="1", memory="4Gi")
    packer["spec"]["schedulerName"] = "packer"
    assert run(nodes, [old, packer], config=cfg)["new"].node == "busy"
    assert run(nodes, [old, pod("new", cpu="1", memory="4Gi")], config=cfg)["new"].node == "idle"
