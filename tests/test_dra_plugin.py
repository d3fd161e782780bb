"""DynamicResources end to end through engine.schedule: allocation, Reserve within a run, shared claims, PreEnqueue,
PreFilter and Filter messages, preemption freeing a victim's devices, and the Filter's per-node verdict cache.

Expected FailedScheduling strings are taken from kube-scheduler 1.36.3's source (dynamicresources.go, the assume
cache, resourceclaim.Name, framework/types.go FitError) where marked ``# from the Go source``."""

from __future__ import annotations

import textwrap

from accelsched.engine import schedule

NODES = """
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
"""


def pod(name: str, claim: str = "resourceClaimTemplateName: one-gpu", cpu: str = "1", extra: str = "") -> str:
    return textwrap.dedent(f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}, namespace: default}}
        spec:
          containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
          resourceClaims: [{{name: gpu, {claim}}}]
        """) + extra


def run(tmp_path, *docs: str):
    path = tmp_path / "in.yaml"
    path.write_text("\n---\n".join([NODES, *docs]))
    session, results = schedule([path])
    return session, {r.pod.name: r for r in results}


def test_devices_taken_in_reserve_are_seen_by_the_next_pod(tmp_path):
    _, out = run(tmp_path, pod("p1"), pod("p2"), pod("p3"))
    assert out["p1"].node == out["p2"].node == "node-a"
    assert out["p3"].node is None
    # from the Go source: Filter's "cannot allocate all claims" (UnschedulableAndUnresolvable, so preemption finds no
    # helpful node) and PostFilter's "still not schedulable" before DefaultPreemption's part
    assert out["p3"].message == (
        "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_allocations_are_distinct_and_written_like_prebind(tmp_path):
    session, out = run(tmp_path, pod("p1"), pod("p2"))
    dra = session.cluster.dra
    devices = sorted(r["device"] for p in ("p1", "p2") for c in dra.pod_claim_results(out[p].pod) for r in c["results"])
    assert devices == ["gpu-0", "gpu-1"]
    claims = dra.claims_out()
    assert len(claims) == 2
    for claim in claims:
        assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        assert claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [
            "node-a"
        ]
        (consumer,) = claim["status"]["reservedFor"]
        assert consumer["resource"] == "pods" and consumer["name"] in ("p1", "p2")


def test_shared_claim_is_allocated_once_and_reserved_for_both(tmp_path):
    shared = textwrap.dedent("""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: shared, namespace: default}
        spec:
          devices:
            requests:
            - name: gpu
              exactly: {deviceClassName: gpu.example.com}
        """)
    session, out = run(tmp_path, shared, pod("s1", "resourceClaimName: shared"), pod("s2", "resourceClaimName: shared"),
                       pod("t1"), pod("t2"))  # fmt: skip
    assert out["s1"].node == out["s2"].node == "node-a"
    (claim,) = [c for c in session.cluster.dra.claims_out() if c["metadata"]["name"] == "shared"]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["s1", "s2"]
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 1
    # the shared claim holds one device: one of the two template pods still fits, the other does not
    assert sorted(r.node is None for r in (out["t1"], out["t2"])) == [False, True]


def test_missing_claims_are_rejected_at_pre_enqueue(tmp_path):
    _, out = run(tmp_path, pod("m1", "resourceClaimName: nope"), pod("m2", "resourceClaimTemplateName: nothing"))
    assert out["m1"].message == 'could not find ResourceClaim "default/nope"'  # from the Go source (assume cache)
    assert out["m2"].message == 'pod "default/m2": ResourceClaim not created yet'  # from the Go source
    assert out["m1"].gated is not None and out["m1"].gated.plugin == "DynamicResources"


def test_missing_device_class_is_unresolvable_at_pre_filter(tmp_path):
    template = textwrap.dedent("""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaimTemplate
        metadata: {name: other, namespace: default}
        spec:
          spec:
            devices:
              requests:
              - name: gpu
                exactly: {deviceClassName: no-such-class}
        """)
    _, out = run(tmp_path, template, pod("c1", "resourceClaimTemplateName: other"))
    # from the Go source: validateDeviceClass; PreFilter stopped before the claims were stored, so PostFilter has
    # "no new claims to deallocate"
    assert out["c1"].message == (
        "0/2 nodes are available: request gpu: device class no-such-class does not exist. "
        "no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_pod_without_claims_is_untouched(tmp_path):
    plain = textwrap.dedent("""
        apiVersion: v1
        kind: Pod
        metadata: {name: big, namespace: default}
        spec:
          containers: [{name: c, image: x, resources: {requests: {cpu: "64"}}}]
        """)
    _, out = run(tmp_path, plain)
    assert out["big"].message == (
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_cel_runtime_error_aborts_the_attempt(tmp_path):
    bad = textwrap.dedent("""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaimTemplate
        metadata: {name: bad, namespace: default}
        spec:
          spec:
            devices:
              requests:
              - name: gpu
                exactly:
                  deviceClassName: gpu.example.com
                  selectors:
                  - cel: {expression: 'device.attributes["gpu.example.com"].model == "x"'}
        """)
    _, out = run(tmp_path, bad, pod("e1", "resourceClaimTemplateName: bad"))
    assert out["e1"].node is None
    # from the Go source: RunFilterPlugins wraps a Filter's Error, and no PostFilter runs
    assert out["e1"].message.startswith('running "DynamicResources" filter plugin: ')
    assert "preemption" not in out["e1"].message


def test_preemption_frees_the_victims_devices(tmp_path):
    classes = textwrap.dedent("""
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: high}
        value: 1000
        ---
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: low-claim, namespace: default}
        spec:
          devices:
            requests:
            - name: gpu
              exactly: {deviceClassName: gpu.example.com}
        """)
    low = textwrap.dedent("""
        apiVersion: v1
        kind: Pod
        metadata: {name: low, namespace: default}
        spec:
          nodeName: node-a
          containers: [{name: c, image: x, resources: {requests: {cpu: "4"}}}]
          resourceClaims: [{name: gpu, resourceClaimName: low-claim}]
        """)
    high = pod("high", cpu="2").replace("spec:\n", "spec:\n  priorityClassName: high\n", 1)
    session, out = run(tmp_path, classes, low, high, pod("later", cpu="2"))
    assert out["high"].node == "node-a"
    assert [p.name for p in out["high"].preempted] == ["low"]
    # the victim left its claim's reservedFor, so the claim was deallocated (resourceclaim controller): its device
    # is free again for the next pod
    assert out["later"].node == "node-a", out["later"].message
    (claim,) = [c for c in session.cluster.dra.claims_out() if c["metadata"]["name"] == "low-claim"]
    assert "allocation" not in claim.get("status", {})


def test_filter_recomputes_only_nodes_whose_devices_changed(tmp_path, monkeypatch):
    from accelsched.dra.state import DRAState

    calls: list[int] = []
    original = DRAState.allocate

    def counting(self, node, claims):
        calls.append(node)
        return original(self, node, claims)

    monkeypatch.setattr(DRAState, "allocate", counting)
    _, out = run(tmp_path, pod("p1"), pod("p2"))
    assert out["p1"].node == out["p2"].node == "node-a"
    # node-b sees no pool: rejected without the allocator; node-a: once for p1, once more for p2 after p1's Reserve
    assert calls == [0, 0]
