"""DynamicResources end to end through engine.schedule: allocation, Reserve within a run, shared claims, PreEnqueue,
PreFilter and Filter messages, preemption freeing a victim's devices, and the Filter's per-node verdict cache.

Expected FailedScheduling strings are taken from kube-scheduler 1.36.3's source (dynamicresources.go, the assume
cache, resourceclaim.Name, framework/types.go FitError) where marked ``# from the Go source``."""

from __future__ import annotations

import textwrap

import pytest

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

    def counting(self, node, claims, deadline=None):
        calls.append(node)
        return original(self, node, claims, deadline)

    monkeypatch.setattr(DRAState, "allocate", counting)
    _, out = run(tmp_path, pod("p1"), pod("p2"))
    assert out["p1"].node == out["p2"].node == "node-a"
    # node-b sees no pool: rejected without the allocator; node-a: once for p1, once more for p2 after p1's Reserve
    assert calls == [0, 0]


SHARED_POOL = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: fpga.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "fpga.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: rack-fpgas}
spec:
  driver: fpga.example.com
  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: rack, operator: In, values: ["r1"]}]}]}
  pool: {name: rack-1, generation: 1, resourceSliceCount: 1}
  devices: [{name: fpga-0}, {name: fpga-1}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-fpga, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: fpga
        exactly: {deviceClassName: fpga.example.com}
"""


def rack_node(name: str) -> str:
    return textwrap.dedent(f"""
        apiVersion: v1
        kind: Node
        metadata: {{name: {name}, labels: {{rack: r1}}}}
        status: {{allocatable: {{cpu: "4", memory: 16Gi, pods: "110"}}}}
        """)


def test_nodes_seeing_the_same_network_attached_pools_share_one_allocation(tmp_path, monkeypatch):
    from accelsched.dra.state import DRAState

    calls: list[int] = []
    original = DRAState.allocate

    def counting(self, node, claims, deadline=None):
        calls.append(node)
        return original(self, node, claims, deadline)

    monkeypatch.setattr(DRAState, "allocate", counting)
    fpga = "resourceClaimTemplateName: one-fpga"
    session, out = run(tmp_path, SHARED_POOL, *(rack_node(f"rack-{i}") for i in range(4)),
                       pod("f1", fpga), pod("f2", fpga), pod("f3", fpga))  # fmt: skip
    # node-a (0) sees its own GPUs only (tried once: its version never moves), node-b (1) no pool at all; rack-0..3
    # (2..5) see only the rack's pool: one view, one allocation per pod (f1, f2 after f1's Reserve, f3 which finds
    # none left), where a per-node Filter made four.
    assert calls == [0, 2, 2, 2]
    assert out["f1"].node is not None and out["f2"].node is not None and out["f3"].node is None
    assert out["f3"].message.startswith("0/6 nodes are available: 6 cannot allocate all claims.")
    claims = [c for c in session.cluster.dra.claims_out() if (c.get("status") or {}).get("allocation")]
    assert sorted(c["status"]["allocation"]["devices"]["results"][0]["device"] for c in claims) == ["fpga-0", "fpga-1"]
    for claim in claims:  # the slice's node selector, not the node the verdict was computed on
        assert claim["status"]["allocation"]["nodeSelector"] == {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]
        }


def test_a_node_with_its_own_devices_is_its_own_view(tmp_path):
    session, _ = run(tmp_path, SHARED_POOL, rack_node("rack-0"), rack_node("rack-1"))
    dra = session.cluster.dra
    index = session.cluster.index
    assert dra.view_key(index["rack-0"]) == dra.view_key(index["rack-1"]) >= 0
    assert dra.view_key(index["node-a"]) == -1 - index["node-a"]  # node-a's own slice: a node-local pool
    assert dra.view_key(index["node-b"]) != dra.view_key(index["rack-0"])


FAST_GPUS = """
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-b-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-b
  pool: {name: node-b, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: fast-0, attributes: {fast: {bool: true}}}
  - {name: fast-1, attributes: {fast: {bool: true}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: fast-or-any, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - name: fast
          deviceClassName: gpu.example.com
          selectors: [{cel: {expression: '"fast" in device.attributes["gpu.example.com"]'}}]
        - {name: any, deviceClassName: gpu.example.com}
"""


def test_first_available_scores_the_node_whose_devices_fit_the_earlier_subrequest(tmp_path):
    # computeScore: 8 points for "fast" (index 0) on node-b, 7 for "any" on node-a; normalized 100 against 87, which
    # outweighs the 200m of CPU p1 put on node-b (without DynamicResources' score p2 goes to node-a). The points are
    # kept per cached verdict and recomputed with it: p2 still goes to node-b after p1's Reserve moved node-b's
    # verdict, p3 finds no fast device left and takes node-a's.
    claim = "resourceClaimTemplateName: fast-or-any"
    session, out = run(tmp_path, FAST_GPUS, *(pod(p, claim, cpu="200m") for p in ("p1", "p2", "p3")))
    assert [out[p].node for p in ("p1", "p2", "p3")] == ["node-b", "node-b", "node-a"]
    requests = {
        p: [r["request"] for c in session.cluster.dra.pod_claim_results(out[p].pod) for r in c["results"]]
        for p in ("p1", "p2", "p3")
    }
    assert requests == {"p1": ["gpu/fast"], "p2": ["gpu/fast"], "p3": ["gpu/any"]}


def _class_and_template(name: str, expression: str) -> str:
    return textwrap.dedent(f"""
        apiVersion: resource.k8s.io/v1
        kind: DeviceClass
        metadata: {{name: {name}}}
        spec:
          selectors:
          - cel: {{expression: '{expression}'}}
        ---
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaimTemplate
        metadata: {{name: {name}, namespace: default}}
        spec:
          spec:
            devices:
              requests:
              - name: gpu
                exactly: {{deviceClassName: {name}}}
        """)


NODE_C = """
apiVersion: v1
kind: Node
metadata: {name: node-c}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-c-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-c
  pool: {name: node-c, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}]
"""


def test_claims_whose_classes_select_alike_share_verdicts(tmp_path, monkeypatch):
    from accelsched.dra.state import DRAState

    calls: list[int] = []
    original = DRAState.allocate

    def counting(self, node, claims, deadline=None):
        calls.append(node)
        return original(self, node, claims, deadline)

    monkeypatch.setattr(DRAState, "allocate", counting)
    same = 'device.driver == "gpu.example.com"'
    a, b = "resourceClaimTemplateName: copy-a", "resourceClaimTemplateName: copy-b"
    session, out = run(tmp_path, NODE_C, _class_and_template("copy-a", same), _class_and_template("copy-b", same),
                       pod("a1", a), pod("b1", b))  # fmt: skip
    # NODES' own gpu.example.com selects alike too; the first by name stands for all
    assert session.cluster.dra.class_aliases == {"copy-b": "copy-a", "gpu.example.com": "copy-a"}
    assert out["a1"].node is not None and out["b1"].node is not None
    # a1: node-a (0) and node-c (2); b1, whose class differs in name only, reuses a1's verdicts where a1's bind
    # changed nothing: only a1's node again
    first = session.cluster.index[out["a1"].node]
    assert calls == [0, 2, first]
    devices = {(r["pool"], r["device"]) for p in ("a1", "b1")
               for c in session.cluster.dra.pod_claim_results(out[p].pod) for r in c["results"]}  # fmt: skip
    assert len(devices) == 2


def test_an_error_names_the_class_of_the_pods_own_claim_when_classes_alias(tmp_path):
    failing = 'device.attributes["gpu.example.com"].model == "x"'  # the devices have no model: a CEL runtime error
    a, b = "resourceClaimTemplateName: bad-a", "resourceClaimTemplateName: bad-b"
    _, out = run(tmp_path, _class_and_template("bad-a", failing), _class_and_template("bad-b", failing),
                 pod("a1", a), pod("b1", b))  # fmt: skip
    # from the Go source (allocator_incubating.go isSelectable): "class %s: selector #%d: CEL runtime error: %v"
    assert "class bad-a: selector #0: CEL runtime error" in out["a1"].message
    assert "class bad-b: selector #0: CEL runtime error" in out["b1"].message
    # The in-memory claims for extended resources have one key whatever the class: the verdict found for e1's
    # class is not e2's error
    extended = [
        textwrap.dedent(f"""
            apiVersion: v1
            kind: Pod
            metadata: {{name: {name}, namespace: default}}
            spec:
              containers:
              - {{name: c, image: x, resources: {{requests: {{"{resource}": "1"}}, limits: {{"{resource}": "1"}}}}}}
            """)
        for name, resource in (("e1", "deviceclass.resource.kubernetes.io/bad-a"),
                               ("e2", "deviceclass.resource.kubernetes.io/bad-b"))
    ]  # fmt: skip
    _, out = run(tmp_path, _class_and_template("bad-a", failing), _class_and_template("bad-b", failing), *extended)
    assert "class bad-a: selector #0: CEL runtime error" in out["e1"].message
    assert "class bad-b: selector #0: CEL runtime error" in out["e2"].message


def local_gpus(node: str) -> str:
    return textwrap.dedent(f"""
        apiVersion: resource.k8s.io/v1
        kind: ResourceSlice
        metadata: {{name: {node}-gpus}}
        spec:
          driver: gpu.example.com
          nodeName: {node}
          pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}
          devices: [{{name: gpu-0}}]
        """)


def test_node_local_devices_no_request_can_use_leave_the_view_shared(tmp_path, monkeypatch):
    from accelsched.dra.state import DRAState

    calls: list[int] = []
    original = DRAState.allocate

    def counting(self, node, claims, deadline=None):
        calls.append(node)
        return original(self, node, claims, deadline)

    monkeypatch.setattr(DRAState, "allocate", counting)
    racks = [doc for i in range(3) for doc in (rack_node(f"rack-{i}"), local_gpus(f"rack-{i}"))]
    session, out = run(tmp_path, SHARED_POOL, *racks, pod("f1", "resourceClaimTemplateName: one-fpga"))
    dra, index = session.cluster.dra, session.cluster.index
    # rack-0..2 (2..4) each have a GPU of their own, which the fpga class never selects: one allocation for the three
    assert calls == [0, 2]
    assert out["f1"].node is not None
    fpga = dra.request_signatures([dra.claims[k] for k in dra.claims if k.startswith("default/f1-")])
    gpu = frozenset({(('device.driver == "gpu.example.com"',), ())})
    assert dra.view_key(index["rack-0"], fpga) == dra.view_key(index["rack-2"], fpga) >= 0
    # a GPU request can use the node's own GPU: each rack node is its own view for it, and without signatures
    assert dra.view_key(index["rack-0"], gpu) == -1 - index["rack-0"]
    assert dra.view_key(index["rack-0"]) == -1 - index["rack-0"]


def test_filter_timeout_bounds_each_nodes_search_and_is_an_error(monkeypatch) -> None:
    """filterTimeout as upstream: a node's allocation that runs past it stops with "node <name>: timed out trying
    to allocate devices", an error (the attempt fails as a whole), not a fit error. Five requests that need five
    distinct values of an attribute 12 devices have 4 of: a search of ~5,000 steps that fits nowhere. The clock
    jumps ten seconds per reading (it is read every 1,024 steps), so the test does not wait."""
    import itertools

    from accelsched.dra import allocator as allocator_module
    from accelsched.dra import allocator_search
    from accelsched.dra.allocated import AllocatedState
    from accelsched.dra.model import (
        ClaimSpec,
        Device,
        DeviceClass,
        DeviceConstraint,
        DeviceRequest,
        DeviceSubRequest,
        ResourceClaim,
        ResourcePool,
        ResourceSlice,
    )

    devices = tuple(Device(f"dev-{i}", {"d.example.com/x": i % 4}) for i in range(12))
    pool = ResourcePool("n0", 1, 1)
    slices = [ResourceSlice("s", "d.example.com", pool, node_name="n0", devices=devices)]
    classes = {"c": DeviceClass("c", ('device.driver == "d.example.com"',))}
    spec = ClaimSpec(
        requests=tuple(DeviceRequest(f"r{k}", exactly=DeviceSubRequest(f"r{k}", "c")) for k in range(5)),
        constraints=(DeviceConstraint(distinct_attribute="d.example.com/x"),),
    )
    claim = ResourceClaim("ns", "pair", spec)
    alloc = allocator_module.Allocator(classes, slices)
    assert alloc.allocate("n0", {}, [claim], AllocatedState()) is None  # unbounded: the whole search, no fit
    ticks = itertools.count(0.0, 10.0)
    monkeypatch.setattr(allocator_search.time, "monotonic", lambda: next(ticks))
    fresh = allocator_module.Allocator(classes, slices)  # nothing learnt from the search above
    with pytest.raises(allocator_module.AllocationError, match=r"^node n0: timed out trying to allocate devices$"):
        fresh.allocate("n0", {}, [claim], AllocatedState(), deadline=5.0)


def test_dynamic_resources_args_are_validated_as_kube_scheduler_does() -> None:
    from accelsched.errors import InputError
    from accelsched.plugins import dynamicresources

    assert dynamicresources.new({}, None).filter_timeout == 10.0
    assert dynamicresources.new({"filterTimeout": "0s"}, None).filter_timeout == 0.0
    assert dynamicresources.new({"filterTimeout": "1m30s", "bindingTimeout": "5s"}, None).filter_timeout == 90.0
    with pytest.raises(InputError, match="filterTimeout: Invalid value: '-1s': must be zero or positive"):
        dynamicresources.new({"filterTimeout": "-1s"}, None)
    with pytest.raises(InputError, match="bindingTimeout: Invalid value: '500ms': must be at least 1 second"):
        dynamicresources.new({"bindingTimeout": "500ms"}, None)
    with pytest.raises(InputError, match="is not a duration"):
        dynamicresources.new({"filterTimeout": "10"}, None)
