"""Regressions found in review, each against the Kubernetes (or ledger) behaviour it must match."""

from __future__ import annotations

import json

import numpy as np
from builders import config, node, pod, run, session

from accelsched.api.loader import Document, Inputs, build_inputs
from accelsched.devices.partition import GPU_RESOURCE, MILLI_RESOURCE, Partition
from accelsched.engine import Session
from accelsched.framework.interface import Code, CycleState

HOST = "kubernetes.io/hostname"


def _rs(p: dict) -> dict:
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "u1", "controller": True}
    ]
    return p


def _plugin(s: Session, name: str):
    profile = next(iter(s.scheduler.config.profiles.values()))
    return next(p for p in profile.at("score") if p.name == name)


def test_system_default_spreading_still_spreads_over_hosts_without_zone_labels():
    """scoring.go: requireAllTopologies is false under System defaulting, so hostname spreading still scores."""
    s = session(
        [node("node-a"), node("node-b"), node("node-c")],
        [
            _rs(pod("web-1", labels={"app": "web"}, node_name="node-a")),
            _rs(pod("web-2", labels={"app": "web"})),
        ],
    )
    pts, state, feasible = _plugin(s, "PodTopologySpread"), CycleState(), np.arange(3)
    assert pts.pre_score(state, s.inputs.pending[0], s.cluster, feasible).code == Code.SUCCESS
    assert pts.score(state, s.inputs.pending[0], s.cluster, feasible).tolist() == [50, 100, 100]


def test_ignore_preferred_terms_of_existing_pods_skips_only_pods_without_preferred_terms():
    cfg = config(pluginConfig=[{"name": "InterPodAffinity", "args": {"ignorePreferredTermsOfExistingPods": True}}])

    def term(labels: dict) -> dict:
        return {"labelSelector": {"matchLabels": labels}, "topologyKey": HOST}

    def scores(bound: dict, pending: dict):
        s = session([node("node-a"), node("node-b")], [bound, pending], config=cfg)
        ipa, state, feasible = _plugin(s, "InterPodAffinity"), CycleState(), np.arange(2)
        if ipa.pre_score(state, s.inputs.pending[0], s.cluster, feasible).code == Code.SKIP:
            return "SKIP"
        return ipa.score(state, s.inputs.pending[0], s.cluster, feasible).tolist()

    required = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "web"})]}}
    db = pod("db", labels={"app": "db"}, node_name="node-a", affinity=required)
    assert scores(db, pod("web", labels={"app": "web"})) == "SKIP"
    preferred = {"weight": 50, "podAffinityTerm": term({"app": "web"})}
    db = pod(
        "db",
        labels={"app": "db"},
        node_name="node-a",
        affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [preferred]}},
    )
    own = {"weight": 10, "podAffinityTerm": term({"app": "nothing"})}
    web = pod(
        "web",
        labels={"app": "web"},
        affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [own]}},
    )
    assert scores(db, web) == [100, 0]


def test_pods_spread_by_default_constraints_are_requeued_when_a_bind_lowers_the_skew():
    zone = "topology.kubernetes.io/zone"
    constraint = {"maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "DoNotSchedule"}
    cfg = config(
        pluginConfig=[
            {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [constraint]}}
        ]
    )
    from builders import taint, tol

    nodes = [node("a0", labels={zone: "a"}), node("b0", labels={zone: "b"}, taints=[taint("dedicated")])]
    pods = [
        _rs(pod("w0", labels={"app": "web"}, node_name="a0")),
        _rs(pod("x", labels={"app": "web"})),  # zone a would be skew 2: waits
        _rs(pod("y", labels={"app": "web"}, tolerations=[tol("dedicated", "Exists")])),  # to b0; then x fits a0
    ]
    results = run(nodes, pods, config=cfg)
    assert results["y"].node == "b0" and results["x"].node == "a0"


def test_interpod_affinity_normalizes_like_kube_scheduler():
    """int64(MaxNodeScore * (float(s-min) / float(max-min))): raw 29 of 100 is 28.999... -> 28, not 29."""

    def pref(weight: int, labels: dict) -> dict:
        return {"weight": weight, "podAffinityTerm": {"labelSelector": {"matchLabels": labels}, "topologyKey": HOST}}

    terms = [pref(29, {"app": "a"}), pref(100, {"app": "b"})]
    docs = [
        pod("a", labels={"app": "a"}, node_name="node-a"),
        pod("b", labels={"app": "b"}, node_name="node-b"),
        pod("web", affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}),
    ]
    s = session([node("node-a"), node("node-b"), node("node-c")], docs)
    ipa, state, feasible = _plugin(s, "InterPodAffinity"), CycleState(), np.arange(3)
    ipa.pre_score(state, s.inputs.pending[0], s.cluster, feasible)
    assert ipa.score(state, s.inputs.pending[0], s.cluster, feasible).tolist() == [28, 100, 0]


def _partition_session(part: dict, *pods: dict) -> tuple[Session, dict]:
    import yaml

    n = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n", "annotations": {"accelsched.io/partitioning": yaml.safe_dump(part)}},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
    }
    s = Session.start(build_inputs([Document(d, "x.yaml", d["kind"]) for d in (n, *pods)], base=Inputs()))
    return s, {r.pod.name: r for r in s.rejected + s.schedule()}


def _held(name: str, resource: str, amount: int, ids: list[str] | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if ids:
        meta["annotations"] = {"accelsched.io/devices": json.dumps({resource: ids})}
    res = {resource: str(amount)}
    spec: dict = {"containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]}
    if ids:
        spec["nodeName"] = "n"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def test_a_rejected_bound_pod_holds_no_partition_device():
    fixed = {
        "mode": "mig",
        "model": "A100-40GB",
        "devices": 1,
        "dynamic": False,
        "instances": {"gpu-0": ["3g.20gb@0", "3g.20gb@4"]},
    }
    r = "nvidia.com/mig-3g.20gb"
    _, results = _partition_session(
        fixed, _held("bad", r, 2, ["gpu-0:3g.20gb@0", "gpu-0:3g.20gb@2"]), _held("p1", r, 1), _held("p2", r, 1)
    )
    assert results["bad"].node is None
    assert results["p1"].node == "n" and results["p2"].node == "n"


def test_bound_pods_cannot_double_book_partitions():
    dyn = {"mode": "mig", "model": "A100-40GB", "devices": 1}
    s, _ = _partition_session(
        dyn,
        _held("a", "nvidia.com/mig-1g.5gb", 1, ["gpu-0:1g.5gb@0"]),
        _held("b", "nvidia.com/mig-1g.5gb", 1, ["gpu-0:1g.5gb@0"]),
        _held("c", "nvidia.com/mig-4g.20gb", 1, ["gpu-0:4g.20gb@0"]),
    )
    assert sorted(r.pod.name for r in s.rejected) == ["b", "c"]
    s, _ = _partition_session(
        {"mode": "milli", "devices": 2},
        _held("a", MILLI_RESOURCE, 800, ["gpu-0:milli=800"]),
        _held("b", MILLI_RESOURCE, 800, ["gpu-0:milli=800"]),
    )
    assert [r.pod.name for r in s.rejected] == ["b"]
    assert s.cluster.devices[0].partition.milli == [800, 0]


def test_a_failed_reserve_never_releases_devices_named_by_a_stale_annotation():
    accel = "example.com/accel"
    cfg = config(pluginConfig=[{"name": "NodeResourcesFit", "args": {"ignoredResources": [accel]}}])
    a = pod("a", extra={accel: 1}, node_name="n")
    a["metadata"]["annotations"] = {"accelsched.io/devices": json.dumps({accel: ["accel-0"]})}
    x = pod("x", extra={accel: 3})  # more than the node has: its Reserve fails
    x["metadata"]["annotations"] = {"accelsched.io/devices": json.dumps({accel: ["accel-0"]})}
    results = run([node("n", **{accel: 2})], [a, x, pod("y", extra={accel: 2})], config=cfg)
    assert results["y"].node is None  # only accel-1 is free; accel-0 stays with a


def test_milli_fragmentation_counts_a_whole_gpu_as_1000():
    part = Partition("milli", ["gpu-0", "gpu-1"], instances=[[], []], used=[set(), set()], milli=[500, 0])
    for typical in ([{GPU_RESOURCE: 1}], [{MILLI_RESOURCE: 600}, {GPU_RESOURCE: 1}], [{MILLI_RESOURCE: 600}]):
        assert part.fragmentation(typical) == 500
