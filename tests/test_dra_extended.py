"""Extended resources backed by DRA (DeviceClass spec.extendedResourceName, DRAExtendedResource, beta-on in 1.36):
a plain ``example.com/gpu`` request is served by DRA devices on nodes without device-plugin capacity, by the device
plugin where the node advertises it.

Expected FailedScheduling strings come from kube-scheduler 1.36.3's source where marked ``# from the Go source``
(dynamicresources.go, extendeddynamicresources.go, noderesources/fit.go, framework/types.go FitError)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from accelsched import report
from accelsched.api.objects import parse_pod
from accelsched.dra import extended
from accelsched.engine import schedule

CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  extendedResourceName: example.com/gpu
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
"""

DRA_NODE = """
apiVersion: v1
kind: Node
metadata: {name: dra-node, labels: {kind: dra}}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: dra-node-gpus}
spec:
  driver: gpu.example.com
  nodeName: dra-node
  pool: {name: dra-node, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}]
"""

PLUGIN_NODE = """
apiVersion: v1
kind: Node
metadata: {name: plugin-node, labels: {kind: plugin}}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110", example.com/gpu: "1"}}
"""


def pod(name: str, gpus: int = 1, resource: str = "example.com/gpu", kind: str | None = None) -> str:
    selector = f"nodeSelector: {{kind: {kind}}}, " if kind else ""
    return textwrap.dedent(f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}, namespace: default}}
        spec: {{{selector}containers: [{{name: c, image: x, resources: {{limits: {{{resource}: {gpus}}}}}}}]}}
        """)


def run(tmp_path, *docs: str):
    path = tmp_path / "in.yaml"
    path.write_text("\n---\n".join(textwrap.dedent(d) for d in docs))
    session, results = schedule([path], reasons=True)
    return session, {r.pod.name: r for r in results}, results


def devices(session, result) -> list[str]:
    return [r["device"] for c in session.cluster.dra.pod_claim_results(result.pod) for r in c["results"]]


def test_plain_request_is_allocated_from_dra_devices_and_written_as_prebind_does(tmp_path):
    session, out, results = run(tmp_path, CLASS, DRA_NODE, pod("p1"))
    assert out["p1"].node == "dra-node"
    (entry,) = report.to_json(results, session.cluster)["pods"][0]["claims"]
    assert entry["name"] == "<extended-resources>"
    assert entry["resourceClaimName"].startswith("p1-extended-resources-")
    assert len(entry["resourceClaimName"]) == len("p1-extended-resources-") + 5
    assert entry["results"] == [
        {"request": "container-0-request-0", "driver": "gpu.example.com", "pool": "dra-node", "device": "gpu-0"}
    ]
    assert out["p1"].devices == {}  # no device plugin took anything
    (claim,) = session.cluster.dra.claims_out()
    meta = claim["metadata"]
    assert meta["name"] == entry["resourceClaimName"] and meta["generateName"] == "p1-extended-resources-"
    assert meta["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    (owner,) = meta["ownerReferences"]
    assert owner["kind"] == "Pod" and owner["name"] == "p1" and owner["controller"] is True
    # the pod had no metadata.uid: DRA gave it a stable one, the same in the owner and in reservedFor
    assert owner["uid"] == extended.pod_uid(out["p1"].pod) != ""
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "p1", "uid": owner["uid"]}]
    assert claim["spec"]["devices"]["requests"] == [
        {"name": "container-0-request-0",
         "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}
    ]  # fmt: skip
    (pod_obj,) = [i for i in report.to_objects(results, session.cluster)["items"] if i["kind"] == "Pod"]
    assert pod_obj["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": [{"containerName": "c", "resourceName": "example.com/gpu",
                             "requestName": "container-0-request-0"}],
        "resourceClaimName": meta["name"],
    }  # fmt: skip


def test_pending_when_dra_devices_are_exhausted(tmp_path):
    session, out, _ = run(tmp_path, CLASS, DRA_NODE, pod("p1", 2), pod("p2"))
    assert sorted(devices(session, out["p1"])) == ["gpu-0", "gpu-1"]
    assert out["p2"].node is None
    # from the Go source: NodeResourcesFit leaves the resource to DRA (no "Insufficient example.com/gpu"); Filter's
    # allocator finds nothing ("cannot allocate all claims"); the pod has a claim, so PostFilter answers "still not
    # schedulable", not "no new claims to deallocate"
    assert out["p2"].message == (
        "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
    assert session.cluster.dra.pod_claim_results(out["p2"].pod) == []


def test_node_with_device_plugin_capacity_is_used_the_old_way(tmp_path):
    session, out, results = run(tmp_path, CLASS, PLUGIN_NODE, pod("p1"), pod("p2"))
    assert out["p1"].node == "plugin-node"
    assert out["p1"].devices == {"example.com/gpu": ["gpu-0"]}
    assert session.cluster.dra.claims_out() == []  # no claim was created
    assert "claims" not in report.to_json(results, session.cluster)["pods"][0]
    # from the Go source (fit.go): the node advertises the resource, so NodeResourcesFit checks it as before; the
    # pod's extended resource claim makes PostFilter say "still not schedulable"
    assert out["p2"].message == (
        "0/1 nodes are available: 1 Insufficient example.com/gpu. still not schedulable, "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


def test_mixed_cluster_serves_each_node_its_own_way(tmp_path):
    docs = [CLASS, DRA_NODE, PLUGIN_NODE, pod("a", kind="plugin"), pod("b", kind="dra"), pod("c"), pod("d"), pod("e")]
    session, out, _ = run(tmp_path, *docs)
    assert out["a"].node == "plugin-node" and out["a"].devices == {"example.com/gpu": ["gpu-0"]}
    assert out["b"].node == "dra-node" and devices(session, out["b"]) == ["gpu-0"]
    # one device-plugin GPU and two DRA GPUs in all: three pods fit, two do not
    assert [p for p in "abcde" if out[p].node] == ["a", "b", "c"]
    assert out["c"].node == "dra-node" and devices(session, out["c"]) == ["gpu-1"] and out["c"].devices == {}
    # from the Go source: Insufficient on the node that advertises the resource, the allocator's verdict on the other
    for p in "de":
        assert out[p].message == (
            "0/2 nodes are available: 1 Insufficient example.com/gpu, 1 cannot allocate all claims. still not "
            "schedulable, preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
            "1 Preemption is not helpful for scheduling."
        )


def test_implicit_class_name_and_one_request_per_container(tmp_path):
    two = textwrap.dedent("""
        apiVersion: v1
        kind: Pod
        metadata: {name: two, namespace: default}
        spec:
          containers:
          - {name: a, image: x, resources: {limits: {cpu: "1", deviceclass.resource.kubernetes.io/gpu.example.com: 1}}}
          - {name: b, image: x, resources: {limits: {deviceclass.resource.kubernetes.io/gpu.example.com: 1}}}
        """)
    # the implicit name needs no extendedResourceName, and no node advertises it: both go to DRA
    plain_class = CLASS.replace("  extendedResourceName: example.com/gpu\n", "")
    session, out, _ = run(tmp_path, plain_class, DRA_NODE, two)
    assert out["two"].node == "dra-node"
    (claim,) = session.cluster.dra.claims_out()
    # createRequestsAndMappings: the request index is the resource's place among the container's sorted requests
    assert [r["name"] for r in claim["spec"]["devices"]["requests"]] == [
        "container-0-request-1",
        "container-1-request-0",
    ]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert sorted((r["request"], r["device"]) for r in results) == [
        ("container-0-request-1", "gpu-0"), ("container-1-request-0", "gpu-1")]  # fmt: skip


def test_unmapped_extended_resource_missing_on_node_cannot_fit(tmp_path):
    both = textwrap.dedent("""
        apiVersion: v1
        kind: Pod
        metadata: {name: both, namespace: default}
        spec:
          containers: [{name: c, image: x, resources: {limits: {example.com/gpu: 1, other.com/fpga: 1}}}]
        """)
    fpga_node = PLUGIN_NODE.replace("plugin-node", "fpga-node").replace('example.com/gpu: "1"', 'other.com/fpga: "1"')
    _, out, _ = run(tmp_path, CLASS, DRA_NODE, fpga_node, both)
    # fpga-node lists no example.com/gpu, so DRA serves it there: only the allocator speaks (no devices there);
    # dra-node lacks other.com/fpga, which NodeResourcesFit rejects first
    assert out["both"].node is None
    assert out["both"].reasons == {
        "dra-node": ["Insufficient other.com/fpga"],
        "fpga-node": ["cannot allocate all claims"],
    }
    # with NodeResourcesFit told to ignore other.com/fpga, DynamicResources' own check speaks on dra-node: neither
    # the node lists the resource nor does a class back it (from the Go source: "cannot fit resource")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
        "- schedulerName: default-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n"
        "    args: {ignoredResources: [other.com/fpga]}\n"
    )
    _, results = schedule([tmp_path / "in.yaml"], config=cfg, reasons=True)
    assert results[0].reasons == {"dra-node": ["cannot fit resource"], "fpga-node": ["cannot allocate all claims"]}


def test_requests_and_mappings_match_upstream_for_init_containers():
    # extendeddynamicresources_test.go's shape: an init container reuses the requests of the long-lived ones
    # after it before asking for the rest; only the largest regular init request is kept
    p = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": {
        "initContainers": [
            {"name": "i0", "image": "x", "resources": {"limits": {"example.com/gpu": 3}}},
            {"name": "i1", "image": "x", "resources": {"limits": {"example.com/gpu": 1}}},
        ],
        "containers": [{"name": "c", "image": "x", "resources": {"limits": {"example.com/gpu": 2}}}],
    }})  # fmt: skip
    cls = type("C", (), {"name": "gpu.example.com"})()
    requests, mappings = extended.requests_and_mappings(p, ("example.com/gpu",), {"example.com/gpu": cls})
    assert [(r.name, r.exactly.count) for r in requests] == [("container-0-request-0", 1), ("container-2-request-0", 2)]
    assert [(m["containerName"], m["requestName"]) for m in mappings] == [
        ("c", "container-2-request-0"),
        ("i0", "container-2-request-0"), ("i0", "container-0-request-0"),
        ("i1", "container-2-request-0"),
    ]  # fmt: skip


@pytest.mark.parametrize("uid", ["", "11111111-2222-3333-4444-555555555555"])
def test_pod_uid_is_the_pods_own_or_derived(uid):
    p = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": uid},
                   "spec": {"containers": [{"name": "c", "image": "x"}]}})  # fmt: skip
    got = extended.pod_uid(p)
    assert got == (uid or extended.pod_uid(p)) and len(got) == 36
    if not uid:
        other = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q", "namespace": "ns"},
                           "spec": {"containers": [{"name": "c", "image": "x"}]}})  # fmt: skip
        assert extended.pod_uid(other) != got


STALE_CLAIM = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: p1-extended-resources-abcde
  namespace: default
  annotations: {resource.kubernetes.io/extended-resource-claim: "true"}
  ownerReferences: [{apiVersion: v1, kind: Pod, name: p1, uid: "", controller: true}]
spec:
  devices:
    requests:
    - name: container-0-request-0
      exactly: {deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 1}
status:
  allocation:
    devices:
      results: [{request: container-0-request-0, driver: gpu.example.com, pool: dra-node, device: gpu-1}]
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [dra-node]}]}]
"""


def test_claim_left_from_an_earlier_attempt_is_deleted_then_the_pod_schedules_anew(tmp_path):
    session, out, _ = run(tmp_path, CLASS, DRA_NODE, STALE_CLAIM, pod("p1", 2))
    # Filter refuses every node ("cannot schedule extended resource claim", from the Go source), PostFilter deletes
    # the claim ("deletion of ResourceClaim completed"), which frees gpu-1: the next attempt takes both devices
    assert out["p1"].node == "dra-node"
    assert sorted(devices(session, out["p1"])) == ["gpu-0", "gpu-1"]
    (claim,) = session.cluster.dra.claims_out()
    assert claim["metadata"]["name"] != "p1-extended-resources-abcde"


def test_stale_claim_message_comes_from_filter_and_postfilter(tmp_path):
    from accelsched.framework.interface import CycleState
    from accelsched.plugins.dynamicresources import DynamicResources

    session, _, _ = run(tmp_path, CLASS, DRA_NODE, STALE_CLAIM)
    cluster = session.cluster
    p = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default"},
                   "spec": {"containers": [{"name": "c", "image": "x",
                                            "resources": {"limits": {"example.com/gpu": 1}}}]}})  # fmt: skip
    plugin, state = DynamicResources(), CycleState()
    assert plugin.pre_filter(state, p, cluster).ok
    result = plugin.filter(state, p, cluster)
    # from the Go source (extendeddynamicresources.go filterExtendedResources, dynamicresources.go PostFilter)
    assert [(r.reason, bool(r.nodes[0]), r.resolvable) for r in result.rejections] == [
        ("cannot schedule extended resource claim", True, False)
    ]
    _, status = plugin.post_filter(state, p, type("H", (), {"cluster": cluster})(), None)
    assert status.reasons == ("deletion of ResourceClaim completed",)
    assert "default/p1-extended-resources-abcde" not in cluster.dra.claims


def test_own_claim_and_device_plugin_resource_fail_at_prebind_as_upstream(tmp_path):
    nic = """
    apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: nic.example.com}
    spec:
      selectors:
      - cel: {expression: 'device.driver == "nic.example.com"'}
    ---
    apiVersion: resource.k8s.io/v1
    kind: ResourceSlice
    metadata: {name: nics}
    spec:
      driver: nic.example.com
      nodeName: plugin-node
      pool: {name: plugin-node, generation: 1, resourceSliceCount: 1}
      devices: [{name: nic-0}]
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: p1, namespace: default}
    spec:
      containers: [{name: c, image: x, resources: {limits: {example.com/gpu: 1}}}]
      resourceClaims: [{name: nic, resourceClaimName: nic}]
    ---
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: nic, namespace: default}
    spec:
      devices:
        requests:
        - name: nic
          exactly: {deviceClassName: nic.example.com}
    """
    session, out, _ = run(tmp_path, CLASS, PLUGIN_NODE, nic)
    # from the Go source: with a claim of its own the pod's extended resource claim is allocated too, with no
    # requests where the device plugin serves the resource, and patchPodExtendedResourceClaimStatus refuses the
    # empty request mappings at PreBind; Unreserve deletes the created claim and releases everything
    assert out["p1"].node is None
    assert out["p1"].message.endswith(
        "nil or empty request mappings, no update of pod default/p1 ExtendedResourceClaimStatus"
    )
    dra = session.cluster.dra
    # the pod's own claim keeps the allocation PreBind wrote before the failure; Unreserve drops the reservation
    assert list(dra.claims) == ["default/nic"] and dra.claims["default/nic"].reserved_for == []
    assert not dra.pending


def test_scoring_counts_dra_devices_as_allocatable(tmp_path):
    # resource_allocation.go calculateDRAResourceTotals: with the resource in scoringStrategy.resources, a node
    # without device-plugin capacity scores the class's devices there (capacity) and the allocated ones (used).
    second = DRA_NODE.replace("dra-node", "dra-two").replace("kind: dra", "kind: two")
    second = second.replace("[{name: gpu-0}, {name: gpu-1}]", "[{name: gpu-0}, {name: gpu-1}, {name: gpu-2}]")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        textwrap.dedent("""
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: default-scheduler
          pluginConfig:
          - name: NodeResourcesFit
            args:
              scoringStrategy:
                type: MostAllocated
                resources: [{name: example.com/gpu, weight: 1}]
        """)
    )
    path = tmp_path / "in.yaml"
    # MostAllocated: "first" scores 1/2 = 50 on dra-node against 1/3 = 33 on dra-two; then "second" 2/2 = 100
    # against 33: both on dra-node (without the DRA totals neither node would score the resource at all)
    path.write_text("\n---\n".join([CLASS, DRA_NODE, second, pod("first"), pod("second")]))
    session, results = schedule([path], config=cfg)
    out = {r.pod.name: r for r in results}
    assert out["first"].node == out["second"].node == "dra-node"
    fit = session.scheduler.profile_for(out["first"].pod)
    plugin = next(p for p in fit.at("score") if p.name == "NodeResourcesFit")
    third = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "x",
                                                "resources": {"limits": {"example.com/gpu": 1}}}]}})  # fmt: skip
    cluster = session.cluster
    nodes = [cluster.index["dra-node"], cluster.index["dra-two"]]
    # dra-node: 2 devices, both allocated, +1 requested -> min(3, 2) / 2 = 100; dra-two: 1 / 3 -> 33
    assert [plugin._score_node(third, cluster, i) for i in nodes] == [100, 33]
    assert plugin._score_nodes(third, cluster, np.array(nodes)).tolist() == [100, 33]


def test_in_flight_extended_claims_of_two_pods_are_kept_apart(tmp_path):
    from accelsched.framework.interface import CycleState
    from accelsched.plugins.dynamicresources import DynamicResources

    session, _, _ = run(tmp_path, CLASS, DRA_NODE)
    cluster, dra = session.cluster, session.cluster.dra
    plugin = DynamicResources()
    node = cluster.index["dra-node"]
    states = []
    for name in ("a", "b", "c"):
        p = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "x",
                                                "resources": {"limits": {"example.com/gpu": 1}}}]}})  # fmt: skip
        state = CycleState()
        assert plugin.pre_filter(state, p, cluster).ok
        result = plugin.filter(state, p, cluster)
        if name == "c":  # both devices are in flight for a and b (Reserve, no PreBind yet)
            assert [r.reason for r in result.rejections if r.nodes[node]] == ["cannot allocate all claims"]
            break
        assert not any(r.nodes[node] for r in result.rejections)
        assert plugin.reserve(state, p, cluster, node).ok
        states.append((state, p))
    assert len(dra.pending) == 2  # one in-memory "<extended-resources>" claim each, not one shared entry
    taken = sorted(r.device for pending in dra.pending.values() for r in pending.allocation.results)
    assert taken == ["gpu-0", "gpu-1"]
    state, p = states[0]
    plugin.unreserve(state, p, cluster, node)
    assert len(dra.pending) == 1 and not dra.claims


BOUND_WITH_CLAIM = """
apiVersion: v1
kind: Pod
metadata: {name: held, namespace: default, uid: uid-held}
spec:
  nodeName: dra-node
  containers: [{name: c, image: x, resources: {limits: {example.com/gpu: 1}}}]
status:
  extendedResourceClaimStatus:
    resourceClaimName: held-extended-resources-bcdfg
    requestMappings: [{containerName: c, resourceName: example.com/gpu, requestName: container-0-request-0}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: held-extended-resources-bcdfg
  namespace: default
  uid: uid-claim
  annotations: {resource.kubernetes.io/extended-resource-claim: "true"}
  ownerReferences: [{apiVersion: v1, kind: Pod, name: held, uid: uid-held, controller: true}]
spec:
  devices:
    requests:
    - {name: container-0-request-0, exactly: {deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 1}}
status:
  allocation:
    devices:
      results: [{request: container-0-request-0, driver: gpu.example.com, pool: dra-node, device: gpu-0}]
  reservedFor: [{resource: pods, name: held, uid: uid-held}]
"""


def test_a_bound_pod_served_by_dra_is_admitted_and_holds_its_claims_devices(tmp_path):
    """The kubelet's admission checks no extended resource the node does not report (removeMissingExtendedResources,
    predicate.go): a pod bound with its extended-resource claim (as kube-scheduler or `accelsched run` left it) is
    admitted, its device held by the claim; one more pod gets the other device, a third waits."""
    session, out, _ = run(tmp_path, CLASS, DRA_NODE, BOUND_WITH_CLAIM, pod("p1"), pod("p2"))
    assert session.rejected == [] and "held" not in out
    assert out["p1"].node == "dra-node" and devices(session, out["p1"]) == ["gpu-1"]
    assert out["p2"].node is None


def test_a_bound_pod_over_a_reported_extended_resource_is_rejected_as_the_kubelet_does(tmp_path):
    bound = pod("big", 2, kind="plugin").replace("spec: {", "spec: {nodeName: plugin-node, ")
    _, out, _ = run(tmp_path, CLASS, PLUGIN_NODE, bound)
    # from the Go source (lifecycle/predicate.go InsufficientResourceError, "Pod was rejected: " + message)
    assert out["big"].message == (
        "Pod was rejected: Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1"
    )
