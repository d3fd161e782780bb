"""The incremental what-if (ui/incremental.py) gives the full run's answer: on random clusters and actions, from
files and from a live snapshot, every pod's result (node, devices, message, reason, in order), the cluster's
accounting and the what-if panel's body equal those of a session built anew from the changed state."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelsched.api.loader import Document
from accelsched.api.objects import DEVICES_ANNOTATION
from accelsched.live.convert import Snapshot
from accelsched.ui import incremental, view, whatif
from accelsched.ui.hub import Hub
from accelsched.ui.live import LiveState
from accelsched.ui.state import DocumentState, RawState, Run, execute

ACCEL = "qualcomm.com/ai-accelerator"
TAINT_KEY = "maintenance"


def node(name: str, rng: random.Random) -> dict[str, Any]:
    devices = rng.choice([0, 2, 4, 8, 8])
    capacity = {"cpu": str(rng.choice([8, 16, 32])), "memory": "64Gi", "pods": str(rng.choice([4, 110])),
                **({ACCEL: str(devices)} if devices else {})}  # fmt: skip
    spec: dict[str, Any] = {}
    if rng.random() < 0.15:
        spec["unschedulable"] = True
        spec["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    elif rng.random() < 0.2:
        spec["taints"] = [{"key": TAINT_KEY, "value": "x", "effect": rng.choice(["NoSchedule", "PreferNoSchedule"])}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": f"z{rng.randint(0, 1)}"}},
        "spec": spec,
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pod(name: str, rng: random.Random, devices: int, node_name: str = "", ids: list[str] | None = None) -> dict:
    cpu = rng.choice(["500m", "1", "2"] if node_name else ["500m", "1", "4", "16"])  # bound ones fit, as admitted
    requests = {"cpu": cpu, "memory": "1Gi", **({ACCEL: str(devices)} if devices else {})}
    app = rng.choice(["a", "b", "c"])
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i", "resources": {
        "requests": requests, **({"limits": {ACCEL: str(devices)}} if devices else {})}}]}  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"app": app}}
    owner = rng.choice([None, "ReplicaSet", "ReplicaSet", "DaemonSet"])
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{app}-{owner.lower()}",
                                    "uid": f"u-{app}-{owner}", "controller": True}]  # fmt: skip
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": TAINT_KEY, "operator": "Exists"}]
    if rng.random() < 0.2:  # counted per node as pods come and go (ClusterState's term groups and selector counts)
        spec["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10,
            "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}},
                                "topologyKey": "kubernetes.io/hostname"}}]}}  # fmt: skip
    elif rng.random() < 0.2:
        when = rng.choice(["DoNotSchedule", "ScheduleAnyway"])
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": when,
                                              "labelSelector": {"matchLabels": {"app": app}}}]  # fmt: skip
    if node_name:
        spec["nodeName"] = node_name
        if ids:
            meta["annotations"] = {DEVICES_ANNOTATION: json.dumps({ACCEL: ids})}
    elif rng.random() < 0.1:
        spec["priority"] = 100  # may preempt a bound pod: its victims are the what-if's own copies
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def cluster(rng: random.Random) -> tuple[list[dict], list[dict]]:
    nodes = [node(f"n{i}", rng) for i in range(rng.randint(3, 7))]
    pods = []
    for n in nodes:
        free = int(n["status"]["capacity"].get(ACCEL, 0))
        taken = 0
        for k in range(rng.randint(0, 3)):
            want = rng.choice([0, 1, 2, 4])
            if want > free - taken:
                want = 0
            named = None
            if want and rng.random() < 0.5:  # our bind's annotation, devices not the lowest free ones
                named = [f"ai-accelerator-{free - 1 - taken - j}" for j in range(want)]
                taken += want  # named ones take the top; unnamed ones the lowest free (admission order matters)
            elif want:
                taken += want
            pods.append(pod(f"{n['metadata']['name']}-p{k}", rng, want, n["metadata"]["name"], named))
    for k in range(rng.randint(0, 6)):
        pods.append(pod(f"wait-{k}", rng, rng.choice([0, 1, 2, 4, 8])))
    rng.shuffle(pods)
    return nodes, pods


def action(rng: random.Random, names: list[str]) -> dict[str, Any]:
    op = rng.choice(["cordon", "uncordon", "drain", "drain", "taint", "taint", "add"])
    if op == "add":
        return {"op": "add", "node": rng.choice(names), "count": rng.randint(1, 2)}
    out: dict[str, Any] = {"op": op, "nodes": rng.sample(names, rng.randint(1, 2))}
    if op == "taint":
        key = rng.choice([TAINT_KEY, "other"])
        out["taint"] = f"{key}=y:{rng.choice(['NoSchedule', 'NoExecute', 'NoExecute', 'PreferNoSchedule'])}"
    return out


def files_state(nodes: list[dict], pods: list[dict]) -> RawState:
    docs = [Document(d, "gen.yaml", d["kind"]) for d in [*nodes, *pods]]
    state = DocumentState(docs, "generated", "offline")
    state.inputs()  # as FilesState.load: validates, and fills the pod cache
    return state


def outcome(before: Run, after: Run, applied: whatif.Applied) -> dict[str, Any]:
    cluster = after.session.cluster
    return {
        "results": [(r.pod.key, r.node, r.devices, r.message, r.reason) for r in after.results],
        "pods": [(p.key, p.node_name, p.devices, p.priority) for p in after.session.inputs.pods],
        "nodes": [n.name for n in cluster.nodes],
        "requested": cluster.requested.tolist(),
        "unschedulable": cluster.unschedulable.tolist(),
        "held": {i: sorted(pods) for i, pods in enumerate(cluster.pods_on)},
        "free": [{r: p.free.tolist() for r, p in d.pools.items()} for d in cluster.devices],
        "bind order": sorted(cluster.pod_node, key=lambda k: cluster.bound_seq[k]),
        "body": whatif.compare(before, after, applied.actions, applied.notes, applied.evicted),
    }


def check(state: RawState, actions: list[dict[str, Any]]) -> bool:
    """Both runs of the what-if agree; True when the incremental one ran (not the full one instead). The Hub's
    answer (today's node views, label counts and order reused: ui/reuse.py) equals one built from scratch."""
    hub = Hub(state)
    body = hub.whatif({"actions": actions})
    applied = whatif.apply(hub.state, whatif.parse({"actions": actions}))
    fast = incremental.rerun(hub.run, applied.state)
    full = execute(applied.state)
    scratch = whatif.compare(hub.run, full, applied.actions, applied.notes, applied.evicted)
    assert body == {**scratch, "nodes": body["nodes"]}
    assert body["nodes"] == view.build_view(full, None)["nodes"]
    if fast is not None:
        assert outcome(hub.run, fast, applied) == outcome(hub.run, full, applied)
        # and again from the same Base: the first what-if changed none of today's objects
        again = incremental.rerun(hub.run, whatif.apply(hub.state, whatif.parse({"actions": actions})).state)
        assert again is not None
        assert outcome(hub.run, again, applied) == outcome(hub.run, full, applied)
    return fast is not None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), live=st.booleans())
def test_the_incremental_whatif_equals_the_full_one(seed: int, live: bool) -> None:
    rng = random.Random(seed)
    nodes, pods = cluster(rng)
    names = [n["metadata"]["name"] for n in nodes]
    actions = [action(rng, names) for _ in range(rng.randint(1, 2))]
    state = LiveState(Snapshot(nodes=nodes, pods=pods)) if live else files_state(nodes, pods)
    assert check(state, actions)  # nothing here keeps it from the incremental path


@pytest.mark.parametrize("live", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_each_action_takes_the_incremental_path(seed: int, live: bool) -> None:
    rng = random.Random(seed)
    nodes, pods = cluster(rng)
    names = [n["metadata"]["name"] for n in nodes]
    for body in (
        [{"op": "cordon", "nodes": names[:1]}],
        [{"op": "uncordon", "nodes": names}],
        [{"op": "drain", "nodes": names[1:3]}],
        [{"op": "taint", "nodes": names[:2], "taint": f"{TAINT_KEY}=z:NoExecute"}],
        [{"op": "add", "node": names[0], "count": 2}, {"op": "cordon", "nodes": [names[-1]]}],
    ):
        state = LiveState(Snapshot(nodes=nodes, pods=pods)) if live else files_state(nodes, pods)
        assert check(state, body), body


def test_a_cluster_the_incremental_path_cannot_follow_runs_in_full() -> None:
    """The lab (gangs, CPU topology, MIG, DRA): no Base is kept, and the Hub's what-if runs in full."""
    from accelsched.ui.state import DemoState

    hub = Hub(DemoState.lab(None))
    assert incremental.CACHE_KEY not in hub.run.cache
    applied = whatif.apply(hub.state, whatif.parse({"actions": [{"op": "cordon", "nodes": ["node-a"]}]}))
    assert incremental.rerun(hub.run, applied.state) is None


def test_a_node_whose_pods_changed_but_not_its_amounts_is_not_taken_as_unchanged() -> None:
    """reuse.same_nodes: the same Node and the same requested amounts are not enough; the pods, their order and
    their devices must be the same too (else the what-if would show today's view of a node it changed)."""
    from accelsched.ui import reuse

    rng = random.Random(7)
    nodes = [node(f"n{i}", rng) for i in range(3)]
    for n in nodes:
        n["status"]["capacity"][ACCEL] = "8"
        n["spec"] = {}
    pods = [pod("a", rng, 2, "n0"), pod("b", rng, 2, "n1")]
    pods[1]["spec"]["containers"] = pods[0]["spec"]["containers"]  # the same requests
    run = execute(files_state(nodes, pods))
    before = run.session.cluster
    assert reuse.same_nodes(before, before.copy(), lambda p: None) == [True, True, True]

    swapped = before.copy()  # n0 holds b instead of a, on the same devices: the same amounts
    a, b = swapped.pods_on[0]["default/a"], swapped.pods_on[1]["default/b"]
    swapped.forget(a)
    swapped.forget(b)
    b_here = copy.copy(b)
    b_here.devices = a.devices
    swapped.assume(b_here, 0)
    assert (swapped.requested[:, 0] == before.requested[:, 0]).all()
    assert reuse.same_nodes(before, swapped, lambda p: None)[0] is False

    moved = before.copy()  # n0 holds a on other devices
    a2 = copy.copy(moved.pods_on[0]["default/a"])
    moved.forget(a2)
    a2.devices = {ACCEL: ["ai-accelerator-6", "ai-accelerator-7"]}
    moved.assume(a2, 0)
    assert reuse.same_nodes(before, moved, lambda p: None) == [False, True, True]
