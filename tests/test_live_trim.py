"""What the live informers keep of a pod or node (live.trim): the same object less managedFields, its repeated
strings shared between objects, no container shared."""

from __future__ import annotations

import copy
import json

from accelsched.live.convert import Snapshot, convert
from accelsched.live.trim import trim

POD = {
    "kind": "Pod",
    "apiVersion": "v1",
    "metadata": {
        "name": "p-1",
        "namespace": "team-a",
        "uid": "0f6d1c1e-0000-4000-8000-000000000001",
        "resourceVersion": "9231",
        "labels": {"app": "infer"},
        "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:nodeName": {}}}}],
    },
    "spec": {
        "nodeName": "node-0",
        "schedulerName": "default-scheduler",
        "containers": [
            {"name": "main", "image": "registry.example.com/infer:1", "resources": {"requests": {"cpu": "100m"}}}
        ],
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300}],
        "priority": 0,
        "enableServiceLinks": True,
    },
    "status": {"phase": "Pending"},
}


def decoded(obj: dict) -> dict:
    return json.loads(json.dumps(obj))  # a fresh decode: every string its own object, as a watch event's


def test_trim_keeps_everything_but_managed_fields() -> None:
    expected = copy.deepcopy(POD)
    del expected["metadata"]["managedFields"]
    assert trim(decoded(POD)) == expected
    node = {"kind": "Node", "metadata": {"name": "n", "managedFields": [{"manager": "kubelet"}]}, "status": {}}
    assert trim(decoded(node)) == {"kind": "Node", "metadata": {"name": "n"}, "status": {}}


def test_repeated_strings_are_one_object_and_containers_are_not_shared() -> None:
    a, b = trim(decoded(POD)), trim(decoded(POD))
    assert decoded(POD)["spec"]["schedulerName"] is not decoded(POD)["spec"]["schedulerName"]  # what trim undoes
    assert a["spec"]["schedulerName"] is b["spec"]["schedulerName"]
    assert a["spec"]["containers"][0]["image"] is b["spec"]["containers"][0]["image"]
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert next(iter(a["spec"])) is next(iter(b["spec"]))  # keys too
    assert a["spec"]["containers"] is not b["spec"]["containers"]
    assert a["spec"]["tolerations"][0] is not b["spec"]["tolerations"][0]
    a["metadata"]["labels"]["app"] = "changed"
    assert b["metadata"]["labels"]["app"] == "infer"


def test_a_trimmed_pod_converts_as_the_original() -> None:
    node = {
        "kind": "Node",
        "metadata": {"name": "node-0", "managedFields": [{"manager": "kubelet"}]},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }
    pending = decoded(POD)
    del pending["spec"]["nodeName"]
    pending["metadata"]["name"] = "p-2"
    pending["spec"]["schedulerName"] = "accelsched"
    plain = Snapshot(nodes=[decoded(node)], pods=[decoded(POD), copy.deepcopy(pending)])
    trimmed = Snapshot(nodes=[trim(decoded(node))], pods=[trim(decoded(POD)), trim(copy.deepcopy(pending))])
    one, two = convert(plain, {"accelsched"}), convert(trimmed, {"accelsched"})
    assert [p.key for p in one.inputs.pods] == [p.key for p in two.inputs.pods]
    for x, y in zip(one.inputs.pods, two.inputs.pods, strict=True):
        assert (x.node_name, x.requests, x.tolerations, x.labels) == (y.node_name, y.requests, y.tolerations, y.labels)
