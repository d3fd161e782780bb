"""Topology-aware scheduling: layouts from standard objects, Topology Manager prediction, device choice.

Kubernetes semantics (kubelet topologymanager): hints per resource are NUMA masks whose free devices cover the
request, preferred when the mask is as narrow as the node's hardware allows; restricted admits only a preferred
merged hint, single-numa-node only a preferred one-NUMA hint, best-effort and none always admit.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import sysfs_builder as sb
import yaml
from builders import start
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsched.api.loader import Document, Inputs, build_inputs
from accelsched.engine import Session
from accelsched.errors import InputError
from accelsched.topology.alignment import Links, TopologyIndex, pod_admitted
from accelsched.topology.allocator import best_set
from accelsched.topology.model import pair_score, pcie_link
from accelsched.topology.render import to_nrt, to_resource_slice
from accelsched.topology.sysfs import discover

GPU = "nvidia.com/gpu"


def node_doc(name: str, gpus: int, topology: dict | None = None, cpu: str = "64") -> dict:
    meta: dict = {"name": name}
    if topology is not None:
        meta["annotations"] = {"accelsched.io/topology": yaml.safe_dump(topology)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "status": {"allocatable": {"cpu": cpu, "memory": "512Gi", "pods": "110", GPU: str(gpus)}},
    }


def pod_doc(name: str, gpus: int, *, cpu: str = "1", want: bool = False, node: str = "", held=None, containers=None):
    meta: dict = {"name": name, "namespace": "default", "annotations": {}}
    if want:
        meta["annotations"]["accelsched.io/want-topology"] = "true"
    if held:
        meta["annotations"]["accelsched.io/devices"] = json.dumps({GPU: held})
    spec: dict = {}
    if node:
        spec["nodeName"] = node
    per = containers or [gpus]
    spec["containers"] = [
        {
            "name": f"c{i}",
            "resources": {
                "requests": {"cpu": cpu, "memory": "1Gi", GPU: str(g)},
                "limits": {"cpu": cpu, "memory": "1Gi", GPU: str(g)},
            },
        }
        for i, g in enumerate(per)
    ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def session_of(*docs: dict) -> Session:
    return start(*docs)


def two_numa(policy: str, scope: str = "pod", per_numa: int = 4) -> dict:
    ids = [f"g{i}@{i // per_numa}/sw{i // 2}" for i in range(2 * per_numa)]
    return {"policy": policy, "scope": scope, "numa": {0: {"cpus": 32}, 1: {"cpus": 32}}, "devices": {GPU: ids}}


def run(session: Session) -> dict:
    return {r.pod.name: r for r in session.schedule()}


# ---------------------------------------------------------------------------------------- policies


def test_single_numa_node_rejects_a_request_split_over_numa_nodes():
    held = pod_doc("held", 4, node="n1", held=["g0", "g1", "g4", "g5"])
    results = run(session_of(node_doc("n1", 8, two_numa("single-numa-node")), held, pod_doc("p", 3)))
    assert results["p"].node is None
    assert "would reject the pod at admission" in results["p"].message


def test_best_effort_and_none_admit_the_same_pod():
    for policy in ("best-effort", "none"):
        held = pod_doc("held", 4, node="n1", held=["g0", "g1", "g4", "g5"])
        results = run(session_of(node_doc("n1", 8, two_numa(policy)), held, pod_doc("p", 3)))
        assert results["p"].node == "n1", policy


def test_restricted_admits_a_preferred_wide_hint_but_not_a_needlessly_wide_one():
    # 6 GPUs need both NUMA nodes on this hardware: the 2-NUMA hint is preferred, so restricted admits.
    results = run(session_of(node_doc("n1", 8, two_numa("restricted")), pod_doc("wide", 6)))
    assert results["wide"].node == "n1"
    # 2 GPUs fit one NUMA node by capacity, but only 1+1 are free: the merged hint is not preferred.
    held = pod_doc("held", 6, node="n1", held=["g0", "g1", "g2", "g4", "g5", "g6"])
    results = run(session_of(node_doc("n1", 8, two_numa("restricted")), held, pod_doc("p", 2)))
    assert results["p"].node is None
    held = pod_doc("held", 6, node="n1", held=["g0", "g1", "g2", "g4", "g5", "g6"])
    results = run(session_of(node_doc("n1", 8, two_numa("best-effort")), held, pod_doc("p", 2)))
    assert results["p"].node == "n1"


def test_container_scope_aligns_each_container_pod_scope_the_whole_pod():
    held = pod_doc("held", 4, node="n1", held=["g0", "g1", "g4", "g5"])
    two = pod_doc("p", 4, containers=[2, 2])
    pod_scope = run(session_of(node_doc("n1", 8, two_numa("single-numa-node", "pod")), held, two))
    assert pod_scope["p"].node is None
    held = pod_doc("held", 4, node="n1", held=["g0", "g1", "g4", "g5"])
    two = pod_doc("p", 4, containers=[2, 2])
    container_scope = run(session_of(node_doc("n1", 8, two_numa("single-numa-node", "container")), held, two))
    assert container_scope["p"].node == "n1"


def test_exclusive_cpus_of_guaranteed_pods_must_fit_one_numa_node():
    results = run(session_of(node_doc("n1", 8, two_numa("single-numa-node")), pod_doc("big", 1, cpu="40")))
    assert results["big"].node is None  # 40 whole CPUs, 32 per NUMA node
    results = run(session_of(node_doc("n1", 8, two_numa("single-numa-node")), pod_doc("ok", 1, cpu="16")))
    assert results["ok"].node == "n1"
    # Burstable (fractional CPU) pods get no exclusive CPUs: the CPU manager gives no hint.
    results = run(session_of(node_doc("n1", 8, two_numa("single-numa-node")), pod_doc("frac", 1, cpu="40500m")))
    assert results["frac"].node == "n1"


@settings(max_examples=80, deadline=None)
@given(
    held=st.lists(st.integers(0, 7), unique=True, max_size=7),
    request=st.integers(1, 8),
    policy=st.sampled_from(["single-numa-node", "restricted", "best-effort"]),
)
def test_single_numa_node_never_binds_a_cross_numa_device_set(held, request, policy):
    docs = [node_doc("n1", 8, two_numa(policy))]
    if held:
        docs.append(pod_doc("held", len(held), node="n1", held=[f"g{i}" for i in held]))
    docs.append(pod_doc("p", request))
    result = run(session_of(*docs))["p"]
    free = [sum(1 for i in range(4 * z, 4 * z + 4) if i not in held) for z in (0, 1)]
    if policy == "single-numa-node":
        assert (result.node is not None) == (max(free) >= request)
    if result.node is not None:
        numas = {int(d[1:]) // 4 for d in result.devices[GPU]}
        assert len(result.devices[GPU]) == request and not set(result.devices[GPU]) & {f"g{i}" for i in held}
        if policy == "single-numa-node" or max(free) >= request:
            assert len(numas) == 1  # aligned whenever one NUMA node can hold it


# ---------------------------------------------------------------------------------------- allocation


@pytest.fixture(scope="module")
def dgx(tmp_path_factory):
    return discover(sb.dgx_like(tmp_path_factory.mktemp("dgx")))


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("used", [(), (0,), (1, 4), (0, 2, 6)])
def test_best_set_is_the_best_by_pair_score_among_all_sets(dgx, count, used):
    gpus = dgx.accelerators()
    free = [i for i in range(len(gpus)) if i not in used]
    links = Links(
        [[pair_score(a, b) for b in gpus] for a in gpus],
        [[pcie_link(a, b) == "PIX" for b in gpus] for a in gpus],
        [],
        [],
    )
    chosen, _ = best_set(free, count, links, list(used), want_nic=False)

    def total(subset):
        return sum(pair_score(gpus[a], gpus[b]) for a, b in itertools.combinations(subset, 2))

    assert len(chosen) == count and set(chosen) <= set(free)
    assert total(chosen) == max(total(s) for s in itertools.combinations(free, count))


def test_discovered_box_round_trips_through_nrt_and_resource_slice(dgx):
    nrt = to_nrt(dgx, "dgx-1", GPU, policy="single-numa-node", scope="pod")
    rs = to_resource_slice(dgx, "dgx-1", GPU)
    session = session_of(node_doc("dgx-1", 8), nrt, rs, pod_doc("p", 2, want=True))
    cluster = session.cluster
    layout = cluster.nodes[0].layout
    assert layout.policy == "single-numa-node" and layout.scope == "pod"
    assert len(layout.devices[GPU]) == 8 and len(layout.nics) == 4
    result = run(session)["p"]
    chosen = [d for d in layout.devices[GPU] if d.address in result.devices[GPU]]
    assert pcie_link(chosen[0], chosen[1]) == "PIX"
    nic = result.pod.raw["metadata"]["annotations"]["accelsched.io/nic"]
    (nic_dev,) = [n for n in layout.nics if n.address == nic]
    assert all(pcie_link(d, nic_dev) == "PIX" for d in chosen)


def test_want_topology_prefers_the_node_with_cards_beside_a_nic(tmp_path):
    other = discover(sb.nic_on_other_socket(tmp_path / "other"))
    box = discover(sb.dgx_like(tmp_path / "dgx"))
    docs = [
        node_doc("far", 2, cpu="128"),
        to_nrt(other, "far", GPU),
        to_resource_slice(other, "far", GPU),
        node_doc("near", 8),
        to_nrt(box, "near", GPU),
        to_resource_slice(box, "near", GPU),
        pod_doc("p", 2, want=True),
    ]
    assert run(session_of(*docs))["p"].node == "near"


def test_nrt_zone_counts_alone_place_devices_in_id_order():
    nrt = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "n1"},
        "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
        "zones": [
            {"name": "node-0", "type": "Node", "resources": [{"name": GPU, "capacity": "2", "allocatable": "2"}]},
            {"name": "node-1", "type": "Node", "resources": [{"name": GPU, "capacity": "2", "allocatable": "2"}]},
        ],
    }
    session = session_of(node_doc("n1", 4), nrt, pod_doc("a", 2), pod_doc("b", 2), pod_doc("c", 1))
    results = run(session)
    assert {tuple(results["a"].devices[GPU]), tuple(results["b"].devices[GPU])} == {
        ("gpu-0", "gpu-1"),
        ("gpu-2", "gpu-3"),
    }
    assert results["c"].node is None
    index = TopologyIndex.of(session.cluster)
    assert index.capacity[GPU][0].tolist() == [2, 2]


def test_admission_prediction_is_vectorized_over_nodes():
    session = session_of(
        node_doc("aligned", 8, two_numa("single-numa-node")),
        node_doc("split", 8, two_numa("single-numa-node")),
        pod_doc("held", 4, node="split", held=["g0", "g1", "g4", "g5"]),
        node_doc("plain", 8),
    )
    pod = build_inputs([Document(pod_doc("p", 3), "t", "Pod")], base=Inputs(nodes=session.inputs.nodes)).pods[0]
    admitted = pod_admitted(pod, TopologyIndex.of(session.cluster), session.cluster)
    assert admitted.tolist() == [True, False, True]


@pytest.mark.parametrize(
    ("topology", "field"),
    [
        ({"policy": "strict"}, "policy"),
        ({"scope": "node"}, "scope"),
        ({"devices": {GPU: ["g0@x"]}}, "devices"),
        ({"colour": "blue"}, "unknown field"),
    ],
)
def test_bad_topology_annotation_names_the_field(topology, field):
    with pytest.raises(InputError) as err:
        session_of(node_doc("n1", 1, topology))
    assert field in str(err.value) and "Node n1" in str(err.value)


def test_the_node_arrays_hold_zone_counts(dgx):
    session = session_of(node_doc("dgx-1", 8), to_nrt(dgx, "dgx-1", GPU), to_resource_slice(dgx, "dgx-1", GPU))
    index = TopologyIndex.of(session.cluster)
    assert index.capacity[GPU][0].tolist() == [4, 4]
    assert np.array_equal(index.nic_zone[0], [True, True])


@settings(max_examples=120, deadline=None)
@given(
    zones=st.integers(1, 3),
    per_zone=st.integers(1, 4),
    held_seed=st.integers(0, 2**16),
    gpus=st.integers(0, 9),
    cpus=st.integers(0, 40),
    policy=st.sampled_from(["none", "best-effort", "restricted", "single-numa-node"]),
)
def test_scalar_and_vector_hint_merge_agree(zones, per_zone, held_seed, gpus, cpus, policy):
    """evaluate (all nodes, numpy) and evaluate_one (one node, Python) must give the same verdict and hint."""
    from accelsched.topology.alignment import evaluate, evaluate_one

    total = zones * per_zone
    ids = [f"g{i}@{i // per_zone}" for i in range(total)]
    topo = {"policy": policy, "numa": {z: {"cpus": 16} for z in range(zones)}, "devices": {GPU: ids}}
    rng = np.random.default_rng(held_seed)
    held = [f"g{i}" for i in range(total) if rng.random() < 0.4]
    docs = [node_doc("n1", total, topo), node_doc("n0", 2)]
    if held:
        docs.append(pod_doc("held", len(held), node="n1", held=held))
    session = session_of(*docs)
    index = TopologyIndex.of(session.cluster)
    requests = {k: v for k, v in {GPU: gpus, "cpu": cpus}.items() if v}
    admitted, best, preferred = evaluate(index, session.cluster, requests)
    for node in range(session.cluster.n):
        assert evaluate_one(index, session.cluster, requests, node) == (
            bool(admitted[node]),
            int(best[node]),
            bool(preferred[node]),
        )
