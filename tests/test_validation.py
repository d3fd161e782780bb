"""Manifests are validated as the API server would: strict schema, names, labels, enums, bounded multipliers.

Kubernetes sources:
- api/openapi-spec/v3 of k8s.io/kubernetes@v1.36.3 (the schema; hack/gen-schema.py extracts it);
- k8s.io/apimachinery/pkg/api/validate/content (label keys and values, DNS-1123 names: the messages);
- pkg/apis/core/validation (ValidateNamespaceName is a DNS label, tolerations, taints, node selector terms),
  pkg/apis/apps/validation (ValidateStatefulSetName is a DNS label);
- k8s.io/apimachinery/pkg/api/resource/quantity.go (a quantity holds at most 2^63-1 in its unit).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cli_limits import invoke, run_limited

from accelsched.api import limits, quantity, validation
from accelsched.api.loader import read_documents
from accelsched.errors import InputError, Where
from accelsched.topology import layout

ROOT = Path(__file__).resolve().parent.parent
NODE = """\
apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110", qualcomm.com/ai-accelerator: "4"}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""


def schedule(tmp_path: Path, *docs: str, args: tuple[str, ...] = ()):
    path = tmp_path / "in.yaml"
    path.write_text("---\n".join(docs))
    return invoke(["schedule", "-f", str(path), "-o", "json", *args]), str(path)


def assert_bad(outcome, source: str, obj: str, field: str, *words: str) -> str:
    """Exit 2 and one line ``accelsched: error: FILE: OBJECT: FIELD...: ...`` (no traceback); FIELD is a prefix."""
    assert outcome.exit_code == 2, outcome.describe()
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.describe()
    assert lines[0].startswith(f"accelsched: error: {source}: {obj}: {field}"), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------------------------------------- the schema


@pytest.mark.parametrize(
    ("doc", "obj", "field", "words"),
    [
        (POD.replace("namespace: ml", "namespace: ml, labelss: {a: b}"), "Pod ml/p", "metadata.labelss",
         ("unknown field", "did you mean labels?")),
        (POD.replace("image: x", "image: x, resource: {}"), "Pod ml/p", "spec.containers[0].resource",
         ("unknown field",)),
        ("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: hi}\nvalue: 10\n"
         "globalDefaultt: true\n", "PriorityClass hi", "globalDefaultt", ("unknown field",)),
        (POD.replace("image: x", "image: 7"), "Pod ml/p", "spec.containers[0].image", ("must be a string",)),
        (POD.replace("image: x", "image: x, ports: [{containerPort: '80'}]"), "Pod ml/p",
         "spec.containers[0].ports[0].containerPort", ("must be an integer",)),
        (POD.replace("image: x", "image: x, ports: [{containerPort: 3000000000}]"), "Pod ml/p",
         "spec.containers[0].ports[0].containerPort", ("must fit in int32",)),
        (POD.replace("image: x", "image: x, stdin: 'yes'"), "Pod ml/p", "spec.containers[0].stdin",
         ("must be true or false",)),
        (POD.replace("name: c, ", ""), "Pod ml/p", "spec.containers[0].name", ("Required value",)),
        (POD.replace('cpu: "1"', "cpu: 1 core"), "Pod ml/p", "spec.containers[0].resources.requests[cpu]",
         ("is not a valid quantity",)),
    ],
)  # fmt: skip
def test_the_schema_is_strict(tmp_path, doc, obj, field, words):
    outcome, source = schedule(tmp_path, NODE, doc)
    assert_bad(outcome, source, obj, field, *words)


def test_an_unquoted_number_is_no_label_value(tmp_path):
    """YAML reads ``1.10`` as the float 1.1; the API server's decoder refuses a number for a string field."""
    outcome, source = schedule(tmp_path, NODE, POD.replace("namespace: ml", "namespace: ml, labels: {v: 1.10}"))
    line = assert_bad(outcome, source, "Pod ml/p", "metadata.labels[v]", "must be a string, got number 1.1")
    assert "quote it" in line
    outcome, _ = schedule(tmp_path, NODE, POD.replace("namespace: ml", "namespace: ml, labels: {v: '1.10'}"))
    assert outcome.exit_code == 0, outcome.describe()


@pytest.mark.parametrize(
    ("doc", "obj", "field"),
    [
        ("apiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n", "Deployment default/d",
         "apiVersion"),
        (POD.replace("apiVersion: v1", "apiVersion: apps/v1"), "Pod ml/p", "apiVersion"),
        (POD.replace("apiVersion: v1\n", ""), "Pod ml/p", "apiVersion"),
        ("apiVersion: scheduling.x-k8s.io/v1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 2}\n",
         "PodGroup default/g", "apiVersion"),
    ],
)  # fmt: skip
def test_the_api_version_must_serve_the_kind(tmp_path, doc, obj, field):
    outcome, source = schedule(tmp_path, NODE, doc)
    assert_bad(outcome, source, obj, field, "served")


def test_served_versions_come_from_the_spec():
    kinds = validation.schema().kinds
    assert set(kinds["Deployment"]) == {"apps/v1"}
    assert set(kinds["Event"]) == {"v1", "events.k8s.io/v1"}
    assert "resource.k8s.io/v1" in kinds["ResourceSlice"]
    assert set(kinds["NodeResourceTopology"]) == {"topology.node.k8s.io/v1alpha2"}


# ---------------------------------------------------------------------------------------------- API server rules


@pytest.mark.parametrize(
    ("doc", "obj", "field", "words"),
    [
        (POD.replace("name: p,", "name: P_1,"), "Pod ml/P_1", "metadata.name", ("RFC 1123 subdomain",)),
        ("apiVersion: v1\nkind: Namespace\nmetadata: {name: team.a}\n", "Namespace team.a", "metadata.name",
         ("RFC 1123 label",)),
        (POD.replace("namespace: ml", "namespace: ML"), "Pod ML/p", "metadata.namespace", ("RFC 1123 label",)),
        (POD.replace("namespace: ml", "namespace: ml, labels: {'a b': x}"), "Pod ml/p", "metadata.labels[a b]",
         ("name part must consist of alphanumeric characters",)),
        (POD.replace("namespace: ml", "namespace: ml, labels: {'Example.com/a': x}"), "Pod ml/p",
         "metadata.labels[Example.com/a]", ("prefix part a lowercase RFC 1123 subdomain",)),
        (POD.replace("namespace: ml", "namespace: ml, labels: {a: 'x y'}"), "Pod ml/p", "metadata.labels[a]",
         ("a valid label must be an empty string",)),
        (POD.replace("namespace: ml", f"namespace: ml, labels: {{a: {'x' * 64}}}"), "Pod ml/p",
         "metadata.labels[a]", ("must be no more than 63 characters",)),
        (POD.replace("namespace: ml", "namespace: ml, annotations: {'a/b/c': x}"), "Pod ml/p",
         "metadata.annotations[a/b/c]", ("a valid label key",)),
        (POD + "  tolerations: [{key: k, operator: Exists, effect: NoScheduel}]\n", "Pod ml/p",
         "spec.tolerations[0].effect", ('Unsupported value: "NoScheduel"', '"NoSchedule"')),
        (POD + "  tolerations: [{key: k, operator: Exists, value: v}]\n", "Pod ml/p", "spec.tolerations[0].operator",
         ("value must be empty",)),
        (POD + "  nodeSelector: {zone: 1}\n", "Pod ml/p", "spec.nodeSelector[zone]", ("must be a string",)),
        (POD + "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
         "[{matchExpressions: [{key: zone, operator: In}]}]}}}\n", "Pod ml/p",
         "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
         ".matchExpressions[0].values", ("Required value",)),
        (POD + "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
         "[{matchExpressions: [{key: zone, operator: Gt, values: [ten]}]}]}}}\n", "Pod ml/p",
         "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
         ".matchExpressions[0].values[0]", ("must be an integer",)),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchExpressions: "
         "[{key: app, operator: Is, values: [x]}]}\n  template: {spec: {containers: [{name: c}]}}\n",
         "Deployment default/d", "spec.selector.matchExpressions[0].operator", ('Unsupported value: "Is"',)),
        ("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db.main}\nspec:\n  selector: {matchLabels: "
         "{app: db}}\n  template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c}]}}\n",
         "StatefulSet default/db.main", "metadata.name", ("RFC 1123 label",)),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: w}}\n"
         "  template: {metadata: {labels: {app: 'w w'}}, spec: {containers: [{name: c}]}}\n",
         "Deployment default/d", "spec.template.metadata.labels[app]", ("a valid label",)),
    ],
)  # fmt: skip
def test_the_api_servers_rules(tmp_path, doc, obj, field, words):
    outcome, source = schedule(tmp_path, NODE, doc)
    assert_bad(outcome, source, obj, field, *words)


def test_node_taint_effect_must_exist(tmp_path):
    node = NODE.replace("metadata: {name: node-a}", "metadata: {name: node-a}\nspec: {taints: [{key: k, effect: X}]}")
    outcome, source = schedule(tmp_path, node, POD)
    assert_bad(outcome, source, "Node node-a", "spec.taints[0].effect", 'Unsupported value: "X"')


@pytest.mark.parametrize(
    ("check", "good", "bad"),
    [
        (validation.dns1123_subdomain_problem, ["a", "a.b-c", "0x", "a" * 253], ["A", "a_b", "-a", "a.", "a" * 254]),
        (validation.dns1123_label_problem, ["a", "a-b", "1a"], ["a.b", "a" * 64, ""]),
        (validation.dns1035_label_problem, ["a", "a-1"], ["1a", "a-"]),
        (validation.label_key_problem, ["a", "A_b.c", "example.com/x", "k8s.io/" + "a" * 63],
         ["", "/a", "a/", "a/b/c", "-a", "a" * 64, "Ex.com/a"]),
        (validation.label_value_problem, ["", "a", "A-b_c.1", "a" * 63], ["-a", "a b", "a" * 64, "a/b"]),
    ],
)  # fmt: skip
def test_name_and_label_syntax(check, good, bad):
    assert [v for v in good if check(v)] == []
    assert [v for v in bad if not check(v)] == []


# ---------------------------------------------------------------------------------------------- what passes


def test_every_shipped_manifest_is_valid():
    """examples/ and deploy/ are what users copy: the API server would take each of them."""
    files = sorted([*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("deploy/**/*.yaml")])
    assert len(files) >= 10
    for path in files:
        read_documents(path)  # validates every document


KUBECTL_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-7d9f-abcde",
        "generateName": "web-7d9f-",
        "namespace": "prod",
        "uid": "0b5e8a0c-1111-2222-3333-444455556666",
        "resourceVersion": "123456",
        "creationTimestamp": "2026-05-01T10:00:00Z",
        "labels": {"app": "web", "pod-template-hash": "7d9f"},
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-05-01T10:00:00Z"},
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "uid": "a", "controller": True}
        ],
        "managedFields": [
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-05-01T10:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}},
            }
        ],
    },
    "spec": {
        "containers": [
            {
                "name": "web",
                "image": "nginx:1.27",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": 536870912}},
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 10},
            }
        ],
        "nodeName": "node-17",
        "priority": 0,
        "tolerations": [
            {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "tolerationSeconds": 300},
        ],
        "volumes": [{"name": "v", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {
            "expirationSeconds": 3607, "path": "token"}}]}}],
    },
    "status": {
        "phase": "Running",
        "podIPs": [{"ip": "10.1.2.3"}],
        "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None,
                        "lastTransitionTime": "2026-05-01T10:00:01Z"}],
        "containerStatuses": [{"name": "web", "image": "nginx:1.27", "imageID": "", "ready": True,
                               "restartCount": 0, "state": {"running": {"startedAt": "2026-05-01T10:00:02Z"}}}],
    },
}  # fmt: skip


def test_a_kubectl_dump_is_valid():
    """Objects as the API server returns them: managedFields, status, timestamps, null fields, int-or-string."""
    validation.validate_object(KUBECTL_POD, "dump.json")
    stamped = yaml.safe_load(POD.replace("namespace: ml", "namespace: ml, creationTimestamp: 2026-01-01T00:00:00Z"))
    validation.validate_object(stamped, "in.yaml")  # YAML reads the unquoted timestamp as a datetime


def test_timestamps_are_rfc3339(tmp_path):
    outcome, source = schedule(tmp_path, NODE, POD.replace("namespace: ml", "namespace: ml, creationTimestamp: today"))
    assert_bad(outcome, source, "Pod ml/p", "metadata.creationTimestamp", "RFC 3339")


def test_yaml_keys_that_are_not_strings_are_read_as_kubectl_reads_them():
    """A label key ``1`` or ``on`` (YAML: a number, a boolean) becomes a string on its way to JSON: no traceback."""
    doc = yaml.safe_load(POD.replace("namespace: ml", "namespace: ml, labels: {1: a, on: b}"))
    validation.validate_object(doc, "in.yaml")
    doc["metadata"]["labels"] = {"a b": "x"}
    with pytest.raises(InputError, match="name part"):
        validation.validate_object(doc, "in.yaml")


def test_unknown_kinds_are_left_to_their_api_server():
    validation.validate_object({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"x": 1}}, "in.yaml")


def test_the_committed_schema_is_what_the_generator_makes(tmp_path):
    """hack/gen-schema.py run on the pinned spec reproduces the committed package data (in a child process: the
    full spec takes some hundred MB that the test process should not keep)."""
    spec = importlib.util.spec_from_file_location("gen_schema", ROOT / "hack" / "gen-schema.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    if not Path(gen.SPEC).is_dir():
        pytest.skip("the pinned OpenAPI spec is not on this machine")
    out = tmp_path / "schema.json.gz"
    subprocess.run([sys.executable, str(ROOT / "hack" / "gen-schema.py"), "--out", str(out)], check=True)
    committed = Path(validation.__file__).with_name("schema.json.gz")
    assert json.loads(gzip.decompress(out.read_bytes())) == json.loads(gzip.decompress(committed.read_bytes()))


# ---------------------------------------------------------------------------------------------- quantities


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("cpu", "1e999999"),
        ("memory", "1e3000000"),
        ("memory", "1e9999999"),
        ("qualcomm.com/ai-accelerator", "1e9999999"),
        ("memory", "9223372036854775808"),
        ("memory", "8Ei"),
        ("cpu", "9223372036854776"),  # * 1000 millicores is past int64
        ("memory", "1" + "0" * 5000),
        ("memory", "1e" + "9" * 5000),
    ],
)
def test_huge_quantities_are_errors_in_linear_time(name, text):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"too large|out of range"):
        quantity.parse(name, text)
    assert time.perf_counter() - start < 0.05


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("memory", "9223372036854775807", 2**63 - 1),
        ("cpu", "9223372036854775807m", 2**63 - 1),
        ("memory", "7Ei", 7 * 2**60),
        ("cpu", "1e-9999999", 1),  # a tiny positive amount rounds up to the smallest unit
        ("memory", "0." + "0" * 5000 + "1", 1),
        ("memory", "0e9999999", 0),
        ("memory", "1." + "0" * 60 + "1", 2),  # a remainder far past the digits that fit still rounds up
    ],
)
def test_quantity_edges(name, text, expected):
    assert quantity.parse(name, text) == expected


def test_a_fractional_device_count_far_down_is_still_fractional():
    with pytest.raises(ValueError, match="whole number"):
        quantity.parse("qualcomm.com/ai-accelerator", "1." + "0" * 100 + "1")


def bounded(tmp_path: Path, *docs: str, args: tuple[str, ...] = ()):
    """The CLI in a child limited in memory and time: a regression hangs or dies there, not in the test run."""
    path = tmp_path / "in.yaml"
    path.write_text("---\n".join(docs))
    return run_limited(["schedule", "-f", str(path), *args], timeout=10), str(path)


def test_a_huge_quantity_through_the_cli(tmp_path):
    outcome, source = bounded(tmp_path, NODE, POD.replace('cpu: "1"', "memory: 1e3000000"))
    assert_bad(outcome, source, "Pod ml/p", "spec.containers[0].resources.requests[memory]", "too large")


# ---------------------------------------------------------------------------------------------- limits

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: x}]}
"""


def test_huge_replicas_are_refused_before_anything_is_made(tmp_path):
    outcome, source = bounded(tmp_path, NODE, DEPLOYMENT.replace("REPLICAS", "100000000"))
    assert_bad(outcome, source, "Deployment default/web", "spec.replicas", "more than the limit of 200000",
               "--limit pods=100000000")  # fmt: skip
    assert outcome.seconds < 10


def test_the_limit_flag_sets_the_bound(tmp_path):
    outcome, source = schedule(tmp_path, NODE, DEPLOYMENT.replace("REPLICAS", "3"), args=("--limit", "pods=2"))
    assert_bad(outcome, source, "Deployment default/web", "spec.replicas", "more than the limit of 2")
    outcome, _ = schedule(tmp_path, NODE, DEPLOYMENT.replace("REPLICAS", "3"), args=("--limit", "pods=3"))
    assert outcome.exit_code == 0, outcome.describe()
    assert len(json.loads(outcome.stdout)["pods"]) == 3


@pytest.mark.parametrize("item", ["pods", "pods=", "pods=0", "pods=-1", "pods=1e3", "nodes=5", "pods=" + "9" * 30])
def test_a_bad_limit_flag_is_a_usage_error(tmp_path, item):
    outcome, _ = schedule(tmp_path, NODE, POD, args=("--limit", item))
    assert outcome.exit_code == 2
    assert "--limit" in outcome.stderr and "Traceback" not in outcome.stderr


def test_limits_reset_with_each_command(tmp_path):
    schedule(tmp_path, NODE, POD, args=("--limit", "devices=9"))
    schedule(tmp_path, NODE, POD)
    assert limits.current() == limits.DEFAULTS


def partitioned_node(partitioning: str) -> str:
    return NODE.replace(
        "metadata: {name: node-a}",
        "metadata:\n  name: node-a\n  annotations:\n    accelsched.io/partitioning: " + json.dumps(partitioning),
    )


def test_huge_partitioning_device_counts_are_refused(tmp_path):
    outcome, source = bounded(tmp_path, partitioned_node("{mode: mig, model: A100-40GB, devices: 2147483647}"), POD)
    assert_bad(outcome, source, "Node node-a", "metadata.annotations[accelsched.io/partitioning].devices",
               "more than the limit of 4096")  # fmt: skip
    outcome, _ = schedule(tmp_path, partitioned_node("{mode: mig, model: A100-40GB, devices: 5000}"), POD,
                          args=("--limit", "devices=5000"))  # fmt: skip
    assert outcome.exit_code == 0, outcome.describe()


def test_partitioning_dynamic_must_be_a_boolean(tmp_path):
    """``dynamic: 'no'`` is a non-empty string, which ``bool()`` reads as true: it must be an error."""
    outcome, source = schedule(tmp_path, partitioned_node("{mode: mig, model: A100-40GB, dynamic: 'no'}"), POD)
    assert_bad(outcome, source, "Node node-a", "metadata.annotations[accelsched.io/partitioning].dynamic",
               "must be true or false, got 'no'")  # fmt: skip


def test_huge_node_device_counts_are_refused(tmp_path):
    outcome, source = schedule(tmp_path, NODE.replace('ai-accelerator: "4"', 'ai-accelerator: "100000000"'), POD)
    assert_bad(outcome, source, "Node node-a", "status.allocatable[qualcomm.com/ai-accelerator]", "the limit")


NRT = """\
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata: {name: node-a}
zones:
- name: node-0
  type: Node
  resources:
  - {name: qualcomm.com/ai-accelerator, capacity: COUNT, allocatable: COUNT, available: COUNT}
"""


def test_huge_nrt_device_counts_are_refused(tmp_path):
    outcome, source = bounded(tmp_path, NODE, NRT.replace("COUNT", "2147483647"))
    assert_bad(outcome, source, "NodeResourceTopology node-a", "zones", "more than the limit of 4096")


@pytest.mark.parametrize(
    ("nrt", "field"),
    [
        (NRT.replace("name: node-0", "name: {a: 1}").replace("COUNT", "4"), "zones[0].name"),
        (NRT.replace("type: Node", "type: [Node]").replace("COUNT", "4"), "zones[0].type"),
        (NRT.replace("COUNT", "[4]"), "zones[0].resources[0].capacity"),
        (NRT.replace("{name: qualcomm", "{name: {x: 1}, n: qualcomm").replace("COUNT", "4"),
         "zones[0].resources[0].n"),
    ],
)  # fmt: skip
def test_wrong_types_in_nrt_zones(tmp_path, nrt, field):
    outcome, source = schedule(tmp_path, NODE, nrt)
    assert_bad(outcome, source, "NodeResourceTopology node-a", field)


@pytest.mark.parametrize(
    "attributes",
    [
        {"numaNode": {"int": {"a": 1}}},
        {"numaNode": {"int": [0]}},
        {"accelsched.io/resource": {"string": ["x"]}},
        {"numaNode": {"integer": 0}},
    ],
)
def test_wrong_types_in_resource_slice_attributes(tmp_path, attributes):
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-a-accel"},
        "spec": {
            "nodeName": "node-a",
            "driver": "accel.example.com",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "qaic-0", "attributes": attributes}],
        },
    }
    outcome, source = schedule(tmp_path, NODE, yaml.safe_dump(doc))
    assert_bad(outcome, source, "ResourceSlice node-a-accel", "spec.devices[0].attributes")


@pytest.mark.parametrize(
    "doc",
    [
        {"zones": [{"name": {"a": 1}, "type": "Node"}]},
        {"zones": [{"name": "node-0", "resources": [{"name": ["x"], "allocatable": 1}]}]},
        {"zones": [{"name": "node-0", "resources": [{"name": "cpu", "allocatable": {"a": 1}}]}]},
        {"zones": "node-0"},
        {"topologyPolicies": [{"a": 1}]},
        {"attributes": [{"name": "topologyManagerPolicy", "value": ["x"]}]},
    ],
)
def test_layout_reads_nrt_without_tracebacks(doc):
    """The layout's own checks: objects that reach it without schema validation still fail as bad input."""
    with pytest.raises(InputError):
        layout.apply_nrt(layout.NodeLayout(), Where("x", "NodeResourceTopology n"), doc, {"example.com/a"})


@pytest.mark.parametrize(
    "device",
    [
        {"name": "d", "attributes": {"numaNode": {"int": {"a": 1}}, "accelsched.io/resource": "example.com/a"}},
        {"name": "d", "attributes": {"numaNode": [0], "accelsched.io/resource": "example.com/a"}},
        {"name": "d", "attributes": {"accelsched.io/resource": {"string": ["x"]}}},
        {"name": ["d"], "attributes": {"accelsched.io/resource": "example.com/a"}},
        {"name": "d", "attributes": ["x"]},
    ],
)
def test_layout_reads_resource_slices_without_tracebacks(device):
    with pytest.raises(InputError):
        layout.apply_resource_slice(layout.NodeLayout(), Where("x", "ResourceSlice s"), {"spec": {"devices": [device]}})


# ---------------------------------------------------------------------------------------------- review findings


def test_rbac_names_are_path_segments():
    # ValidateRBACName: every built-in system: role is a valid name, and only '.', '..', '/' and '%' are refused.
    role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: %s}\n"
    validation.validate_object(yaml.safe_load(role % '"system:controller:attachdetach-controller"'), "r.yaml")
    with pytest.raises(InputError, match="may not contain '/'"):
        validation.validate_object(yaml.safe_load(role % '"a/b"'), "r.yaml")


def test_annotation_size_counts_bytes():
    doc = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "annotations": {"a": "€" * 100_000}}}
    with pytest.raises(InputError, match="Too long: may not be more than 262144 bytes"):
        validation.validate_object(doc, "n.yaml")


def test_a_quantity_with_surrounding_space_is_valid_as_for_quantity_unmarshal(tmp_path):
    pod = POD.replace('cpu: "1"', 'cpu: " 1 "')
    outcome, _ = schedule(tmp_path, NODE, pod)
    assert outcome.exit_code == 0, outcome.output


def test_a_schema_nested_past_the_stack_is_an_error_not_a_traceback():
    props: dict = {"type": "string"}
    for _ in range(400):
        props = {"type": "object", "properties": {"a": props}}
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x.e.io"},
        "spec": {"group": "e.io", "scope": "Namespaced", "names": {"plural": "x", "kind": "X"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": props}}]},
    }  # fmt: skip
    with pytest.raises(InputError, match="nested too deeply"):
        validation.validate_object(crd, "crd.yaml")


def test_yaml_is_typed_as_kubectl_types_it(tmp_path):
    # go-yaml v2: an impossible date is a string (no traceback), a timestamp label value is a string, and 08 is a
    # number (so no label value).
    node = NODE.replace("metadata: {name: node-a}", "metadata: {name: node-a, labels: {built: 2024-02-30}}")
    outcome, _ = schedule(tmp_path, node)
    assert outcome.exit_code == 0, outcome.output
    outcome, source = schedule(tmp_path, NODE.replace("{name: node-a}", "{name: node-a, labels: {v: 08}}"))
    assert_bad(outcome, source, "Node node-a", "metadata.labels[v]", "must be a string, got number 8")
