"""resource.k8s.io/v1 objects read as kube-apiserver 1.36.3 reads them (accelsched/dra/objects.py), pods' claims and
the claims the resourceclaim controller makes from templates (accelsched/dra/claims.py), and the loader's wiring.

Every expected error message below was confirmed once by hand against the real kube-apiserver v1.36.3
(tests/live/controlplane.py, POSTing each bad object): the same field path and the same text, except where a
comment says otherwise (CEL compiler messages come from the Python CEL library, not cel-go).
Sources: kubernetes@v1.36.3 pkg/apis/resource/validation/validation.go, pkg/apis/core/validation (pod claims),
pkg/controller/resourceclaim/controller.go (claim names), api@v0.36.3/resource/v1/types.go.
"""

from __future__ import annotations

import copy
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_limits import invoke

from accelsched.api import loader, objects
from accelsched.dra import cel, claims
from accelsched.dra import objects as dra
from accelsched.dra.model import POD_CLAIM_NAME_ANNOTATION, PodResourceClaim, Version
from accelsched.errors import InputError

GiB = 1 << 30
CLASS = "gpu.example.com"

# dra-example-driver (kubernetes-sigs/dra-example-driver): one pool per node, GPUs with index/uuid/model/driverVersion.
EXAMPLE_SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-a-gpu.example.com-x7k2p"},
    "spec": {
        "driver": "gpu.example.com",
        "nodeName": "node-a",
        "pool": {"name": "node-a", "generation": 0, "resourceSliceCount": 1},
        "devices": [
            {
                "name": f"gpu-{i}",
                "attributes": {
                    "index": {"int": i},
                    "uuid": {"string": f"gpu-18db0e85-99e9-c746-8531-ffeb86328b3{i}"},
                    "model": {"string": "LATEST-GPU-MODEL"},
                    "driverVersion": {"version": "1.0.0"},
                    "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 4:02x}"},
                },
                "capacity": {"memory": {"value": "80Gi"}},
            }
            for i in range(8)
        ],
    },
}


def _mig_devices(gpu: int) -> list[dict[str, Any]]:
    """NVIDIA's partitionable model (KEP-4815): the full GPU and each MIG placement draw from one counter set."""
    full = {
        "name": f"gpu-{gpu}",
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA A100-SXM4-40GB"},
                       "cudaComputeCapability": {"version": "8.0.0"}, "brand": {"string": "Nvidia"}},
        "capacity": {"memory": {"value": "40Gi"}, "multiprocessors": {"value": "98"}},
        "consumesCounters": [{"counterSet": f"gpu-{gpu}-counter-set", "counters": {
            "memory": {"value": "40Gi"}, "multiprocessors": {"value": "98"},
            **{f"memory-slice-{s}": {"value": "1"} for s in range(8)}}}],
    }  # fmt: skip
    migs = [
        {
            "name": f"gpu-{gpu}-mig-1g-5gb-{start}",
            "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.5gb"},
                           "parentUUID": {"string": f"GPU-{gpu}"}},
            "capacity": {"memory": {"value": "4864Mi"}, "multiprocessors": {"value": "14"}},
            "consumesCounters": [{"counterSet": f"gpu-{gpu}-counter-set", "counters": {
                "memory": {"value": "4864Mi"}, "multiprocessors": {"value": "14"},
                f"memory-slice-{start}": {"value": "1"}}}],
        }
        for start in range(7)
    ]  # fmt: skip
    return [full, *migs]


NVIDIA_COUNTERS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-b-gpu.nvidia.com-counters"},
    "spec": {
        "driver": "gpu.nvidia.com",
        "nodeName": "node-b",
        "pool": {"name": "node-b", "generation": 3, "resourceSliceCount": 2},
        "sharedCounters": [
            {"name": f"gpu-{g}-counter-set", "counters": {
                "memory": {"value": "40Gi"}, "multiprocessors": {"value": "98"},
                **{f"memory-slice-{s}": {"value": "1"} for s in range(8)}}}
            for g in range(2)
        ],
    },
}  # fmt: skip
NVIDIA_DEVICES = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-b-gpu.nvidia.com-devices"},
    "spec": {
        "driver": "gpu.nvidia.com",
        "nodeName": "node-b",
        "pool": {"name": "node-b", "generation": 3, "resourceSliceCount": 2},
        "devices": _mig_devices(0) + _mig_devices(1),
    },
}

CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {
        "devices": {
            "requests": [
                {"name": "gpus", "exactly": {
                    "deviceClassName": CLASS, "count": 2,
                    "selectors": [{"cel": {"expression": "device.capacity['gpu.example.com'].memory"
                                                         ".compareTo(quantity('40Gi')) >= 0"}}],
                    "tolerations": [{"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoSchedule"}]}},
                {"name": "nic", "firstAvailable": [
                    {"name": "fast", "deviceClassName": "nic.example.com",
                     "selectors": [{"cel": {"expression": "device.attributes['nic.example.com'].speed >= 200"}}]},
                    {"name": "any", "deviceClassName": "nic.example.com", "allocationMode": "All"}]},
                {"name": "share", "exactly": {"deviceClassName": CLASS,
                                              "capacity": {"requests": {"memory": "10Gi"}}}},
            ],
            "constraints": [
                {"requests": ["gpus", "nic/fast"], "matchAttribute": "resource.kubernetes.io/pcieRoot"},
                {"requests": ["gpus"], "distinctAttribute": "gpu.example.com/uuid"},
            ],
            "config": [{"requests": ["gpus"], "opaque": {"driver": CLASS, "parameters": {
                "apiVersion": "gpu.resource.example.com/v1alpha1", "kind": "GpuConfig",
                "sharing": {"strategy": "TimeSlicing"}}}}],
        }
    },
}  # fmt: skip
ALLOCATED_CLAIM = {
    **CLAIM,
    "metadata": {"name": "train", "namespace": "ml", "uid": "0f6c4bd4-3a2e-4f5e-9a55-7d1e6a0f2b11",
                 "finalizers": ["resource.kubernetes.io/delete-protection"]},
    "status": {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpus", "driver": CLASS, "pool": "node-a", "device": "gpu-0"},
                    {"request": "gpus", "driver": CLASS, "pool": "node-a", "device": "gpu-1"},
                    {"request": "nic/fast", "driver": "nic.example.com", "pool": "node-a", "device": "nic-0"},
                    {"request": "share", "driver": CLASS, "pool": "node-a", "device": "gpu-2",
                     "shareID": "5b1f0a7e-2c1d-4e8f-9a3b-6c7d8e9f0a1b", "consumedCapacity": {"memory": "10Gi"}},
                ],
                "config": [{"source": "FromClaim", "requests": ["gpus"],
                            "opaque": {"driver": CLASS, "parameters": {"kind": "GpuConfig"}}}],
            },
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]},
            "allocationTimestamp": "2026-01-02T15:04:05Z",
        },
        "reservedFor": [{"resource": "pods", "name": "train-0", "uid": "8a7d9b1c-0000-4000-8000-000000000001"}],
    },
}  # fmt: skip
DEVICE_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": CLASS},
    "spec": {
        "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
        "config": [{"opaque": {"driver": CLASS, "parameters": {"kind": "GpuConfig"}}}],
        "extendedResourceName": "example.com/gpu",
    },
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "ml"},
    "spec": {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"example.com/note": "from template"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
    },
}


def pod_doc(name: str = "train-0", *pod_claims: dict[str, Any], uid: str = "", node: str = "", **extra: Any) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": "ml"}
    if uid:
        meta["uid"] = uid
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": c["name"]} for c in pod_claims]}}],
        "resourceClaims": list(pod_claims),
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, **extra}


def node_doc(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}  # fmt: skip


def load(tmp_path: Path, *docs: dict[str, Any]) -> loader.Inputs:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return loader.load([path])


def refused(doc: dict[str, Any], field: str, message: str, source: str = "in.yaml") -> None:
    """The object is refused with exactly ``message`` at ``field`` (after the schema, as the loader reads it)."""
    with pytest.raises(InputError) as info:
        from accelsched.api import validation

        validation.validate_object(doc, source)
        dra.parse(doc["kind"], doc, source)
    assert (info.value.field, info.value.message) == (field, message)
    assert info.value.source == source


# ---------------------------------------------------------------------------------------------- realistic objects


def test_example_driver_slice_names_are_qualified_with_the_driver():
    s = dra.parse_resource_slice(EXAMPLE_SLICE, "cluster.yaml")
    assert (s.name, s.driver, s.node_name, s.pool.name, s.pool.generation) == (
        "node-a-gpu.example.com-x7k2p", CLASS, "node-a", "node-a", 0)  # fmt: skip
    gpu = s.devices[5]
    assert gpu.attributes == {
        "gpu.example.com/index": 5,
        "gpu.example.com/uuid": "gpu-18db0e85-99e9-c746-8531-ffeb86328b35",
        "gpu.example.com/model": "LATEST-GPU-MODEL",
        "gpu.example.com/driverVersion": Version("1.0.0"),
        "resource.kubernetes.io/pcieRoot": "pci0000:01",
    }
    assert gpu.capacity["memory"].value == Fraction(80 * GiB)
    assert s.raw is not EXAMPLE_SLICE and s.raw["spec"] is EXAMPLE_SLICE["spec"]


def test_nvidia_partitionable_slices_counters_in_a_slice_of_their_own():
    counters = dra.parse_resource_slice(NVIDIA_COUNTERS)
    devices = dra.parse_resource_slice(NVIDIA_DEVICES)
    assert counters.devices == () and [c.name for c in counters.shared_counters] == [
        "gpu-0-counter-set",
        "gpu-1-counter-set",
    ]
    assert counters.shared_counters[0].counters["memory"] == 40 * GiB
    assert counters.shared_counters[0].counters["memory-slice-7"] == 1
    assert len(devices.devices) == 16 and devices.pool.resource_slice_count == 2
    mig = devices.devices[3]
    assert mig.name == "gpu-0-mig-1g-5gb-2"
    assert mig.attributes["gpu.nvidia.com/profile"] == "1g.5gb"
    (use,) = mig.consumes_counters
    assert use.counter_set == "gpu-0-counter-set"
    assert use.counters == {"memory": 4864 << 20, "multiprocessors": 14, "memory-slice-2": 1}
    assert devices.devices[0].attributes["gpu.nvidia.com/cudaComputeCapability"] == Version("8.0.0")


def test_claim_with_first_available_constraints_tolerations_and_capacity():
    c = dra.parse_resource_claim(CLAIM, "claims.yaml")
    gpus, nic, share = c.spec.requests
    assert gpus.exactly is not None and gpus.exactly.count == 2 and gpus.exactly.allocation_mode == "ExactCount"
    assert gpus.exactly.tolerations[0].operator == "Exists" and gpus.exactly.tolerations[0].effect == "NoSchedule"
    assert nic.exactly is None and [s.name for s in nic.first_available] == ["fast", "any"]
    assert nic.first_available[1].allocation_mode == "All" and nic.first_available[1].count == 0
    assert nic.first_available[0].admin_access is None  # subrequests have no adminAccess
    assert share.exactly.count == 1  # SetDefaults: ExactCount, count 1
    assert share.exactly.capacity_requests == {"memory": 10 * GiB}  # as written: no driver to qualify it with
    match, distinct = c.spec.constraints
    assert match.requests == ("gpus", "nic/fast") and match.match_attribute == "resource.kubernetes.io/pcieRoot"
    assert distinct.distinct_attribute == "gpu.example.com/uuid"
    assert c.spec.config[0].requests == ("gpus",) and c.spec.config[0].driver == CLASS
    assert c.allocation is None and c.reserved_for == []


def test_allocated_claim_from_a_dump_keeps_its_allocation_and_reservations():
    c = dra.parse_resource_claim(ALLOCATED_CLAIM, "dump.json")
    assert c.allocation is not None and c.allocation.node_name == "node-a"
    assert [str(r.device_id) for r in c.allocation.results] == [
        "gpu.example.com/node-a/gpu-0", "gpu.example.com/node-a/gpu-1", "nic.example.com/node-a/nic-0",
        "gpu.example.com/node-a/gpu-2"]  # fmt: skip
    assert c.allocation.results[3].consumed_capacity == {"memory": 10 * GiB}
    assert c.allocation.config[0].source == "FromClaim"
    assert [(r.resource, r.name) for r in c.reserved_for] == [("pods", "train-0")]
    assert c.finalizers == ("resource.kubernetes.io/delete-protection",)


def test_device_class_and_template():
    cls = dra.parse_device_class(DEVICE_CLASS)
    assert cls.selectors == ("device.driver == 'gpu.example.com'",)
    assert cls.extended_resource_name == "example.com/gpu"
    assert cls.implicit_extended_resource_name == "deviceclass.resource.kubernetes.io/gpu.example.com"
    t = dra.parse_resource_claim_template(TEMPLATE)
    assert (t.key, t.labels, t.spec.requests[0].exactly.device_class_name) == ("ml/one-gpu", {"team": "ml"}, CLASS)


def test_v1beta1_flattened_requests_and_basic_devices_read_as_v1():
    claim = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim", "metadata": {"name": "c"},
             "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": CLASS, "count": 2}]}}}  # fmt: skip
    assert dra.parse_resource_claim(claim).spec.requests[0].exactly.count == 2
    s = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice", "metadata": {"name": "s"},
         "spec": {"driver": CLASS, "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "g", "basic": {"attributes": {"index": {"int": 3}}}}]}}  # fmt: skip
    assert dra.parse_resource_slice(s).devices[0].attributes == {"gpu.example.com/index": 3}


# ---------------------------------------------------------------------------------------------- validation rules


def _slice(**spec: Any) -> dict[str, Any]:
    doc = copy.deepcopy(EXAMPLE_SLICE)
    doc["metadata"]["name"] = "s"
    doc["spec"]["devices"] = doc["spec"]["devices"][:1]
    for key, value in spec.items():
        if value is None:
            doc["spec"].pop(key, None)
        else:
            doc["spec"][key] = value
    return doc


def _claim(*requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    reqs = list(requests) or [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ml"},
            "spec": {"devices": {"requests": reqs, **devices}}}  # fmt: skip


def _exactly(**fields: Any) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": CLASS, **fields}}


ONE_OF_NODE = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
PER_DEVICE = ("exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is "
              "set to true in the ResourceSlice spec")  # fmt: skip
C_IDENT = ("a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
           "characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is "
           "'[A-Za-z_][A-Za-z0-9_]*')")  # fmt: skip
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
             "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")  # fmt: skip
COUNTERS = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
TAINT = [{"key": "k", "effect": "NoSchedule"}]

SLICE_CASES = [
    ("both devices and sharedCounters", _slice(sharedCounters=COUNTERS), "spec",
     'Invalid value: "": only one of `sharedCounters` or `devices` is allowed'),
    ("empty devices and sharedCounters", _slice(devices=[], sharedCounters=COUNTERS), "spec",
     'Invalid value: "": only one of `sharedCounters` or `devices` is allowed'),
    ("no node field", _slice(nodeName=None), "spec", f"Required value: {ONE_OF_NODE}"),
    ("two node fields", _slice(allNodes=True), "spec",
     f'Invalid value: "{{`nodeName`, `allNodes`}}": {ONE_OF_NODE}, but multiple fields are set'),
    ("allNodes false", _slice(nodeName=None, allNodes=False), "spec.allNodes",
     "Invalid value: false: must be either unset or set to true"),
    ("two selector terms", _slice(nodeName=None, nodeSelector={"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "b", "operator": "Exists"}]}]}),
     "spec.nodeSelector.nodeSelectorTerms",
     'Invalid value: [{"MatchExpressions":[{"Key":"a","Operator":"Exists","Values":null}],"MatchFields":null},'
     '{"MatchExpressions":[{"Key":"b","Operator":"Exists","Values":null}],"MatchFields":null}]: '
     "must have exactly one node selector term"),
    ("bad driver", _slice(driver="Gpu_Example"), "spec.driver", f'Invalid value: "Gpu_Example": {SUBDOMAIN}'),
    ("bad pool", _slice(pool={"name": "a/B", "generation": 0, "resourceSliceCount": 1}), "spec.pool.name",
     f'Invalid value: "B": {SUBDOMAIN}'),
    ("slice count 0", _slice(pool={"name": "a", "generation": 0, "resourceSliceCount": 0}),
     "spec.pool.resourceSliceCount", "Invalid value: 0: must be greater than zero"),
    ("duplicate device", _slice(devices=[{"name": "a"}, {"name": "a"}]), "spec.devices[1]", 'Duplicate value: "a"'),
    ("129 devices", _slice(devices=[{"name": f"d{i}"} for i in range(129)]), "spec.devices",
     "Too many: 129: must have at most 128 items"),
    ("65 devices with taints", _slice(devices=[{"name": f"d{i}", "taints": TAINT} for i in range(65)]),
     "spec.devices", "Too many: 65: must have at most 64 items"),
    ("65 devices with counters", _slice(devices=[{"name": f"d{i}", "consumesCounters": [
        {"counterSet": "c", "counters": {"m": {"value": "1"}}}]} for i in range(65)]),
     "spec.devices", "Too many: 65: must have at most 64 items"),
    ("9 counter sets", _slice(devices=None, sharedCounters=[{"name": f"c{i}", "counters": {"m": {"value": "1"}}}
                                                            for i in range(9)]),
     "spec.sharedCounters", "Too many: 9: must have at most 8 items"),
    ("duplicate counter set", _slice(devices=None, sharedCounters=COUNTERS * 2), "spec.sharedCounters[1]",
     'Duplicate value: "gpu-0"'),
    ("33 attributes", _slice(devices=[{"name": "a", "attributes": {f"a{i}": {"int": i} for i in range(33)}}]),
     "spec.devices[0]", "Invalid value: 33: the total number of attributes and capacities must not exceed 32"),
    ("attributes and capacity past 32", _slice(devices=[{"name": "a", "attributes": {f"a{i}": {"int": i}
                                                                                     for i in range(20)},
                                                         "capacity": {f"c{i}": {"value": "1"} for i in range(13)}}]),
     "spec.devices[0]", "Invalid value: 33: the total number of attributes and capacities must not exceed 32"),
    ("bad attribute name", _slice(devices=[{"name": "a", "attributes": {"bad-name": {"int": 1}}}]),
     "spec.devices[0].attributes", f'Invalid value: "bad-name": {C_IDENT}'),
    ("empty domain", _slice(devices=[{"name": "a", "attributes": {"/x": {"int": 1}}}]),
     "spec.devices[0].attributes", 'Invalid value: "": the domain must not be empty'),
    ("attribute without value", _slice(devices=[{"name": "a", "attributes": {"x": {}}}]),
     "spec.devices[0].attributes[x]", 'Invalid value: "": exactly one value must be specified'),
    ("attribute with two values", _slice(devices=[{"name": "a", "attributes": {"x": {"int": 1, "string": "a"}}}]),
     "spec.devices[0].attributes[x]",
     'Invalid value: {"IntValue":1,"BoolValue":null,"StringValue":"a","VersionValue":null,"IntValues":null,'
     '"BoolValues":null,"StringValues":null,"VersionValues":null}: exactly one value must be specified'),
    ("bad version", _slice(devices=[{"name": "a", "attributes": {"x": {"version": "1.0"}}}]),
     "spec.devices[0].attributes[x].version", 'Invalid value: "1.0": must be a string compatible with semver.org '
                                              "spec 2.0.0"),
    ("long string", _slice(devices=[{"name": "a", "attributes": {"x": {"string": "y" * 65}}}]),
     "spec.devices[0].attributes[x].string", "Too long: may not be more than 64 bytes"),
    ("node on a device", _slice(devices=[{"name": "a", "nodeName": "n1"}]), "spec.devices[0]",
     "Invalid value: null: `nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` "
     "is set to true in the ResourceSlice spec"),
    ("per device, none", _slice(nodeName=None, perDeviceNodeSelection=True, devices=[{"name": "a"}]),
     "spec.devices[0]", f"Required value: {PER_DEVICE}"),
    ("per device, two", _slice(nodeName=None, perDeviceNodeSelection=True, devices=[
        {"name": "a", "nodeName": "n", "allNodes": True}]),
     "spec.devices[0]", f'Invalid value: "{{`nodeName`, `allNodes`}}": {PER_DEVICE}'),
    ("request policy, single allocation", _slice(devices=[{"name": "a", "capacity": {
        "m": {"value": "1", "requestPolicy": {"default": "1"}}}}]),
     "spec.devices[0].capacity[m].requestPolicy", "Forbidden: allowMultipleAllocations must be true"),
    ("request policy step", _slice(devices=[{"name": "a", "allowMultipleAllocations": True, "capacity": {
        "m": {"value": "10", "requestPolicy": {"default": "3", "validRange": {"min": "2", "step": "2"}}}}}]),
     "spec.devices[0].capacity[m].requestPolicy.validRange.step",
     'Invalid value: "3": value is not a multiple of a given step (2) from (2)'),
    ("valid values unsorted", _slice(devices=[{"name": "a", "allowMultipleAllocations": True, "capacity": {
        "m": {"value": "10", "requestPolicy": {"default": "2", "validValues": ["4", "2"]}}}}]),
     "spec.devices[0].capacity[m].requestPolicy.validValues[1]",
     'Invalid value: "2": values must be sorted in ascending order'),
    ("taint effect", _slice(devices=[{"name": "a", "taints": [{"key": "k", "effect": "PreferNoSchedule"}]}]),
     "spec.devices[0].taints[0].effect",
     'Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None"'),
    ("duplicate counter consumption", _slice(devices=[{"name": "a", "consumesCounters": [
        {"counterSet": "c", "counters": {"m": {"value": "1"}}}] * 2}]),
     "spec.devices[0].consumesCounters[1]", 'Duplicate value: "c"'),
    ("binding conditions alone", _slice(devices=[{"name": "a", "bindingConditions": ["a.b/c"]}]),
     "spec.devices[0].bindingFailureConditions",
     "Invalid value: null: bindingFailureConditions are required to use bindingConditions"),
]  # fmt: skip

CLAIM_CASES = [
    ("bad CEL", _claim(_exactly(selectors=[{"cel": {"expression": "device.attributes["}}])),
     "spec.devices.requests[0].exactly.selectors[0].cel.expression", 'Invalid value: "device.attributes[": '),
    ("bad CEL in a later request", _claim(_exactly(), {"name": "b", "exactly": {
        "deviceClassName": CLASS, "selectors": [{"cel": {"expression": "device.x =="}}]}}),
     "spec.devices.requests[1].exactly.selectors[0].cel.expression", 'Invalid value: "device.x ==": compilation '),
    ("CEL too long", _claim(_exactly(selectors=[{"cel": {"expression": "true || " * 1300 + "true"}}])),
     "spec.devices.requests[0].exactly.selectors[0].cel.expression", "Too long: may not be more than 10240 bytes"),
    ("no selector", _claim(_exactly(selectors=[{}])), "spec.devices.requests[0].exactly.selectors[0].cel",
     "Required value"),
    ("neither exactly nor firstAvailable", _claim({"name": "gpu"}), "spec.devices.requests[0]",
     "Required value: exactly one of `exactly` or `firstAvailable` is required"),
    ("both", _claim({"name": "gpu", "exactly": {"deviceClassName": CLASS},
                     "firstAvailable": [{"name": "a", "deviceClassName": CLASS}]}),
     "spec.devices.requests[0]",
     "Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"),
    ("duplicate request", _claim(_exactly(), _exactly()), "spec.devices.requests[1]", 'Duplicate value: "gpu"'),
    ("33 requests", _claim(*({"name": f"r{i}", "exactly": {"deviceClassName": CLASS}} for i in range(33))),
     "spec.devices.requests", "Too many: 33: must have at most 32 items"),
    ("9 subrequests", _claim({"name": "gpu", "firstAvailable": [{"name": f"s{i}", "deviceClassName": CLASS}
                                                                for i in range(9)]}),
     "spec.devices.requests[0].firstAvailable", "Too many: 9: must have at most 8 items"),
    ("duplicate subrequest", _claim({"name": "gpu", "firstAvailable": [{"name": "s", "deviceClassName": CLASS}] * 2}),
     "spec.devices.requests[0].firstAvailable[1]", 'Duplicate value: "s"'),
    ("count with All", _claim(_exactly(allocationMode="All", count=2)), "spec.devices.requests[0].exactly.count",
     "Invalid value: 2: must not be specified when allocationMode is 'All'"),
    ("negative count", _claim(_exactly(count=-1)), "spec.devices.requests[0].exactly.count",
     "Invalid value: -1: must be greater than zero"),
    ("allocation mode", _claim(_exactly(allocationMode="Some")), "spec.devices.requests[0].exactly.allocationMode",
     'Unsupported value: "Some": supported values: "All", "ExactCount"'),
    ("constraint without attribute", _claim(constraints=[{"requests": ["gpu"]}]), "spec.devices.constraints[0]",
     'Required value: exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are '
     "set"),
    ("unqualified matchAttribute", _claim(constraints=[{"matchAttribute": "model"}]),
     "spec.devices.constraints[0].matchAttribute",
     'Invalid value: "model": a fully qualified name must be a domain and a name separated by a slash'),
    ("constraint names no request", _claim(constraints=[{"requests": ["nope"], "matchAttribute": "a.b/model"}]),
     "spec.devices.constraints[0].requests[0]",
     "Invalid value: \"nope\": must be the name of a request in the claim or the name of a request and a subrequest "
     "separated by '/'"),
    ("toleration operator", _claim(_exactly(tolerations=[{"key": "k", "operator": "Gt"}])),
     "spec.devices.requests[0].exactly.tolerations[0].operator",
     'Unsupported value: "Gt": supported values: "Equal", "Exists"'),
    ("toleration Exists with value", _claim(_exactly(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}])),
     "spec.devices.requests[0].exactly.tolerations[0].value",
     'Invalid value: "v": must be empty for operator `Exists`'),
    ("toleration effect", _claim(_exactly(tolerations=[{"key": "k", "effect": "PreferNoSchedule"}])),
     "spec.devices.requests[0].exactly.tolerations[0].effect",
     'Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None"'),
    ("reservedFor without allocation", {**_claim(), "status": {"reservedFor": [
        {"resource": "pods", "name": "p", "uid": "u"}]}}, "status.reservedFor",
     "Forbidden: may not be specified when `allocated` is not set"),
]  # fmt: skip

OTHER_CASES = [
    ("class bad CEL", {**DEVICE_CLASS, "spec": {"selectors": [{"cel": {"expression": "device.driver == "}}]}},
     "spec.selectors[0].cel.expression", 'Invalid value: "device.driver == ": compilation failed: '),
    ("class native extended resource", {**DEVICE_CLASS, "spec": {"extendedResourceName": "kubernetes.io/gpu"}},
     "spec.extendedResourceName", 'Invalid value: "kubernetes.io/gpu": must be a valid extended resource name'),
    ("template bad CEL", {**TEMPLATE, "spec": {"spec": {"devices": {"requests": [
        {"name": "a", "exactly": {"deviceClassName": CLASS}},
        {"name": "b", "exactly": {"deviceClassName": CLASS,
                                  "selectors": [{"cel": {"expression": "device.x =="}}]}}]}}}},
     "spec.spec.devices.requests[1].exactly.selectors[0].cel.expression", 'Invalid value: "device.x ==": '),
]  # fmt: skip


@pytest.mark.parametrize(("doc", "field", "message"), [c[1:] for c in SLICE_CASES], ids=[c[0] for c in SLICE_CASES])
def test_slice_rules(doc, field, message):
    refused(doc, field, message)


@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [c[1:] for c in CLAIM_CASES + OTHER_CASES],
    ids=[c[0] for c in CLAIM_CASES + OTHER_CASES],
)
def test_claim_class_and_template_rules(doc, field, message):
    # CEL messages start as the API server's ("compilation failed: " ...); the compiler's own text after it comes
    # from the Python CEL library (cel-go adds a caret line), so only the prefix is compared for those.
    with pytest.raises(InputError) as info:
        from accelsched.api import validation

        validation.validate_object(doc, "in.yaml")
        dra.parse(doc["kind"], doc, "in.yaml")
    assert info.value.field == field
    if "cel.expression" in field and message.startswith("Invalid value"):
        assert info.value.message.startswith(message), info.value.message
    else:
        assert info.value.message == message


def test_the_error_names_file_object_and_field():
    doc = _claim(_exactly(selectors=[{"cel": {"expression": "device.attributes["}}]))
    with pytest.raises(InputError) as info:
        dra.parse_resource_claim(doc, "claims.yaml")
    assert str(info.value).startswith(
        "claims.yaml: ResourceClaim ml/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value"
    )


def test_accepted_as_the_api_server_accepts():
    # All created by kube-apiserver 1.36.3: a negative counter or capacity ("Any parsed quantity is valid"),
    # count 0 (defaulted to 1), and a claim asking a negative capacity.
    counters = _slice(devices=None, sharedCounters=[{"name": "c", "counters": {"m": {"value": "-1"}}}])
    assert dra.parse_resource_slice(counters).shared_counters[0].counters == {"m": -1}
    capacity = _slice(devices=[{"name": "a", "capacity": {"memory": {"value": "-1Gi"}}}])
    assert dra.parse_resource_slice(capacity).devices[0].capacity["memory"].value == -GiB
    assert dra.parse_resource_claim(_claim(_exactly(count=0))).spec.requests[0].exactly.count == 1
    more_slashes = _slice(devices=[{"name": "a", "attributes": {"a/b/c": {"int": 1}}}])  # upstream's TODO
    assert dra.parse_resource_slice(more_slashes).devices[0].attributes == {"a/b/c": 1}


def test_unknown_fields_are_refused_for_every_dra_kind(tmp_path):
    for doc, field in (
        ({**TEMPLATE, "spec": {**TEMPLATE["spec"], "specc": {}}}, "spec.specc"),
        ({**DEVICE_CLASS, "spec": {"selector": []}}, "spec.selector"),
        (_claim({"name": "gpu", "exactly": {"deviceClassName": CLASS, "cout": 2}}),
         "spec.devices.requests[0].exactly.cout"),
        (_slice(devices=[{"name": "a", "atributes": {}}]), "spec.devices[0].atributes"),
    ):  # fmt: skip
        out = invoke(["schedule", "-f", str(_write(tmp_path, doc)), "-o", "json"])
        assert out.exit_code == 2, out.describe()
        assert f": {field}: unknown field" in out.stderr, out.stderr


def test_compiles_each_distinct_expression_once():
    expr = "device.attributes['gpu.example.com'].index >= 0 && true"
    before = cel.compile_selector.cache_info().misses
    for i in range(200):
        doc = _claim(_exactly(selectors=[{"cel": {"expression": expr}}]))
        doc["metadata"]["name"] = f"c{i}"
        dra.parse_resource_claim(doc)
    assert cel.compile_selector.cache_info().misses - before <= 1


def test_parsing_many_slices_is_linear():
    """Thousands of slices: each device once, with no per-device CEL; 8x the slices cost about 8x (not 64x)."""
    docs = [copy.deepcopy(EXAMPLE_SLICE) for _ in range(400)]
    for i, d in enumerate(docs):
        d["metadata"]["name"] = f"s{i}"

    def seconds(n: int) -> float:
        start = time.perf_counter()
        for d in docs[:n]:
            dra.parse_resource_slice(d)
        return time.perf_counter() - start

    seconds(50)  # warm the caches
    small, large = min(seconds(50) for _ in range(3)), min(seconds(400) for _ in range(3))
    assert large < 20 * small + 0.05, (small, large)


# ---------------------------------------------------------------------------------------------- pods' claims


POD_CASES = [
    ("both names", [{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}], [],
     "spec.resourceClaims[0]",
     'Invalid value: {"Name":"gpu","ResourceClaimName":"a","ResourceClaimTemplateName":"b"}: at most one of '
     "`resourceClaimName` or `resourceClaimTemplateName` may be specified"),
    ("no name", [{"name": "gpu"}], [], "spec.resourceClaims[0]",
     'Invalid value: {"Name":"gpu","ResourceClaimName":null,"ResourceClaimTemplateName":null}: must specify one of: '
     "`resourceClaimName`, `resourceClaimTemplateName`"),
    ("duplicate", [{"name": "gpu", "resourceClaimName": "a"}, {"name": "gpu", "resourceClaimName": "b"}], [],
     "spec.resourceClaims[1].name", 'Duplicate value: "gpu"'),
    ("bad template name", [{"name": "gpu", "resourceClaimTemplateName": "Bad_Name"}], [],
     "spec.resourceClaims[0].resourceClaimTemplateName", f'Invalid value: "Bad_Name": {SUBDOMAIN}'),
    ("container names a missing claim", [{"name": "gpu", "resourceClaimName": "a"}], [{"name": "nope"}],
     "spec.containers[0].resources.claims[0]",
     'Not found: "nope": must be one of the names in pod.spec.resourceClaims: gpu'),
    ("container claim, none in the pod", [], [{"name": "gpu"}], "spec.containers[0].resources.claims[0]",
     'Not found: "gpu": must be one of the names in pod.spec.resourceClaims which is empty'),
    ("container claim twice", [{"name": "gpu", "resourceClaimName": "a"}], [{"name": "gpu"}, {"name": "gpu"}],
     "spec.containers[0].resources.claims[1]", 'Duplicate value: "gpu"'),
    ("whole claim after one of its requests", [{"name": "gpu", "resourceClaimName": "a"}],
     [{"name": "gpu", "request": "r"}, {"name": "gpu"}], "spec.containers[0].resources.claims[1]",
     'Duplicate value: "gpu"'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod_claims", "container_claims", "field", "message"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES]
)
def test_pod_claim_rules(pod_claims, container_claims, field, message):
    doc = pod_doc("p", *pod_claims)
    doc["spec"]["containers"][0]["resources"]["claims"] = container_claims
    with pytest.raises(InputError) as info:
        claims.pod_resource_claims(objects.parse_pod(doc, "pods.yaml"))
    assert (info.value.obj, info.value.field, info.value.message) == ("Pod ml/p", field, message)


def test_pod_resource_claims_and_resolved_names():
    doc = pod_doc(
        "p", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}, {"name": "nic", "resourceClaimName": "n"}
    )
    pod = objects.parse_pod(doc)
    gpu, nic = claims.pod_resource_claims(pod)
    assert gpu == PodResourceClaim("gpu", resource_claim_template_name="one-gpu")
    assert claims.resolved_claim_name(pod, nic) == "n"
    assert claims.resolved_claim_name(pod, gpu) is None  # not created yet
    claims.set_claim_status(pod, gpu, "p-gpu-abcde")
    assert claims.resolved_claim_name(pod, gpu) == "p-gpu-abcde"
    assert claims.pod_resource_claims(objects.parse_pod(pod_doc("plain"))) == ()


@pytest.mark.parametrize(
    ("pod_name", "claim_name", "base"),
    [
        ("train-0", "gpu", "train-0-gpu-"),
        # Past 57 characters both are cut in proportion to their lengths (and the hyphen after the claim goes).
        ("a" * 60, "gpu-claim", "a" * 48 + "-" + "gpu-cla"),
        # A one-letter pod name is cut to nothing: the name starts with "-", which the API server then refuses.
        ("p", "c" * 70, "-" + "c" * 54),
    ],
)
def test_generate_name_is_the_controllers(pod_name, claim_name, base):
    assert claims.generate_name(pod_name, claim_name) == base
    assert len(base) <= 58


def test_a_generated_name_the_api_server_refuses_makes_no_claim(tmp_path):
    # The controller's Create fails (the name is no DNS subdomain), so the claim never exists and the pod waits.
    pod = pod_doc("p", {"name": "c" * 63, "resourceClaimTemplateName": "one-gpu"})
    inputs = load(tmp_path, TEMPLATE, pod)
    assert inputs.dra.claims == {} and "resourceClaimStatuses" not in (inputs.pods[0].raw.get("status") or {})


def test_claim_from_template_as_the_controller_makes_it():
    pod = objects.parse_pod(pod_doc("train-0", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                                    uid="8a7d9b1c-0000-4000-8000-000000000001"))  # fmt: skip
    (pc,) = claims.pod_resource_claims(pod)
    template = dra.parse_resource_claim_template(TEMPLATE, "t.yaml")
    made = claims.claim_from_template(pod, pc, template)
    again = claims.claim_from_template(objects.parse_pod(pod.raw), pc, template)
    assert made.name == again.name and made.name.startswith("train-0-gpu-") and len(made.name) == 17
    assert set(made.name[-5:]) <= set(claims.SUFFIX_ALPHABET)
    assert made.annotations == {"example.com/note": "from template", POD_CLAIM_NAME_ANNOTATION: "gpu"}
    assert (made.owner_pod_name, made.owner_pod_uid, made.spec) == ("train-0", pod.uid, template.spec)
    meta = made.raw["metadata"]
    assert meta["generateName"] == "train-0-gpu-" and meta["labels"] == {"team": "ml"}
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "train-0", "uid": pod.uid, "controller": True}
    ]
    assert made.raw["spec"] == TEMPLATE["spec"]["spec"] and made.raw["spec"] is not TEMPLATE["spec"]["spec"]
    other = objects.parse_pod({**pod.raw, "metadata": {**pod.raw["metadata"], "uid": "another"}})
    assert claims.claim_from_template(other, pc, template).name != made.name  # the uid is part of the hash


# ---------------------------------------------------------------------------------------------- the loader


def _write(tmp_path: Path, *docs: dict[str, Any]) -> Path:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def test_loader_reads_dra_objects_and_makes_template_claims(tmp_path):
    pending = pod_doc("train-0", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                      {"name": "shared", "resourceClaimName": "train"})  # fmt: skip
    missing = pod_doc("train-1", {"name": "gpu", "resourceClaimTemplateName": "no-such-template"})
    bound = pod_doc("train-2", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}, node="node-a")
    inputs = load(tmp_path, node_doc("node-a"), DEVICE_CLASS, EXAMPLE_SLICE, NVIDIA_COUNTERS, NVIDIA_DEVICES,
                  CLAIM, TEMPLATE, pending, missing, bound)  # fmt: skip
    dra_inputs = inputs.dra
    assert set(dra_inputs.classes) == {CLASS}
    assert set(dra_inputs.slices) == {"node-a-gpu.example.com-x7k2p", "node-b-gpu.nvidia.com-counters",
                                      "node-b-gpu.nvidia.com-devices"}  # fmt: skip
    assert set(dra_inputs.templates) == {"ml/one-gpu"}
    made = [c for k, c in dra_inputs.claims.items() if k != "ml/train"]
    assert len(made) == 1 and made[0].owner_pod_name == "train-0"  # not for the bound pod, none without a template
    pods = {p.name: p for p in inputs.pods}
    assert pods["train-0"].raw["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": made[0].name}
    ]
    assert "resourceClaimStatuses" not in (pods["train-1"].raw.get("status") or {})
    assert inputs.ignored == {}  # nothing of DRA read past any more
    # Other drivers' slices are no topology (node-b is not even in the input): no error.
    assert all(n.layout is None or not n.layout.devices for n in inputs.nodes)
    # The same input twice gives the same claim names.
    assert set(load(tmp_path, node_doc("node-a"), DEVICE_CLASS, TEMPLATE, pending).dra.claims) == {made[0].key}


def test_loader_uses_a_claim_the_pod_status_names(tmp_path):
    existing = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "train-0-gpu-x2b4z", "namespace": "ml",
                             "annotations": {POD_CLAIM_NAME_ANNOTATION: "gpu"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "train-0", "uid": "u-1",
                                                  "controller": True}]},
                "spec": TEMPLATE["spec"]["spec"]}  # fmt: skip
    named = pod_doc(
        "train-0",
        {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
        uid="u-1",
        status={"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "train-0-gpu-x2b4z"}]},
    )
    assert set(load(tmp_path, TEMPLATE, existing, named).dra.claims) == {"ml/train-0-gpu-x2b4z"}
    # An orphan the controller made before it could record it: found by owner and annotation, not made again.
    unnamed = pod_doc("train-0", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}, uid="u-1")
    inputs = load(tmp_path, TEMPLATE, existing, unnamed)
    assert set(inputs.dra.claims) == {"ml/train-0-gpu-x2b4z"}
    assert inputs.pods[0].raw["status"]["resourceClaimStatuses"][0]["resourceClaimName"] == "train-0-gpu-x2b4z"


def test_non_topology_slices_with_node_selectors_load(tmp_path):
    selector = _slice(nodeName=None, nodeSelector={"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]})  # fmt: skip
    everywhere = {**_slice(nodeName=None, allNodes=True), "metadata": {"name": "s2"}}
    inputs = load(tmp_path, node_doc("node-a"), selector, everywhere)
    assert inputs.dra.slices["s"].node_selector is not None and inputs.dra.slices["s2"].all_nodes


def test_topology_slices_still_feed_the_layout(tmp_path):
    from accelsched.topology import layout

    topo = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-a-accelsched"},
            "spec": {"driver": layout.TOPOLOGY_DRIVER, "nodeName": "node-a",
                     "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "qaic-0", "attributes": {
                         "accelsched.io/resource": {"string": "qualcomm.com/ai-accelerator"}, "numaNode": {"int": 1},
                         "resource.kubernetes.io/pcieRoot": {"string": "pci0000:80"}}}]}}  # fmt: skip
    node = node_doc("node-a")
    node["status"]["allocatable"]["qualcomm.com/ai-accelerator"] = "1"
    inputs = load(tmp_path, node, topo)
    (device,) = inputs.nodes[0].layout.devices["qualcomm.com/ai-accelerator"]
    assert device.numa_node == 1
    assert "node-a-accelsched" in inputs.dra.slices


@pytest.mark.parametrize("kind_doc", [DEVICE_CLASS, EXAMPLE_SLICE, CLAIM, TEMPLATE], ids=lambda d: d["kind"])
def test_duplicates_are_refused(tmp_path, kind_doc):
    out = invoke(["schedule", "-f", str(_write(tmp_path, kind_doc, kind_doc))])
    assert out.exit_code == 2, out.describe()
    assert "duplicate object: also defined in" in out.stderr and ": metadata.name: " in out.stderr


# ---------------------------------------------------------------------------------------------- the CLI


def test_cli_bad_cel_is_one_line_exit_2(tmp_path):
    selectors = [{"cel": {"expression": "device.x =="}}]
    bad = _claim(_exactly(), {"name": "b", "exactly": {"deviceClassName": CLASS, "selectors": selectors}})
    path = _write(tmp_path, node_doc("node-a"), bad)
    out = invoke(["schedule", "-f", str(path), "-o", "json"])
    assert out.exit_code == 2, out.describe()
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(
        f"accelsched: error: {path}: ResourceClaim ml/c: spec.devices.requests[1].exactly.selectors[0].cel.expression: "
        'Invalid value: "device.x ==": compilation failed'
    ), lines[0]


def test_cli_slice_with_devices_and_shared_counters_exit_2(tmp_path):
    path = _write(tmp_path, node_doc("node-a"), _slice(sharedCounters=COUNTERS))
    out = invoke(["schedule", "-f", str(path)])
    assert out.exit_code == 2, out.describe()
    assert out.stderr.strip() == (
        f'accelsched: error: {path}: ResourceSlice s: spec: Invalid value: "": only one of `sharedCounters` or '
        "`devices` is allowed"
    )
