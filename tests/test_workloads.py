"""Workload expansion: the Pods each controller would create, with the names, labels and pins it sets."""

from __future__ import annotations

import copy
import re
from typing import Any

import kubernetes_validate
import pytest
from kubernetes_validate.utils import latest_version, major_minor

from accelsched.api import objects, workloads
from accelsched.errors import InputError

SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
DAEMON_AUTO = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


def template(labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "web"} if labels is None else labels, "annotations": {"team": "ml"}},
        "spec": {
            "containers": [{"name": "c", "image": "img", "resources": {"requests": {"cpu": "1"}}}],
            **spec,
        },
    }


def workload(kind: str, name: str = "web", namespace: str | None = "prod", **spec: Any) -> dict[str, Any]:
    api = {"Job": "batch/v1", "ReplicationController": "v1"}.get(kind, "apps/v1")
    meta = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    restart = {"restartPolicy": "Never"} if kind == "Job" else {}
    body: dict[str, Any] = {"template": template(**restart)}
    if kind not in ("Job", "ReplicationController"):
        body["selector"] = {"matchLabels": {"app": "web"}}
    body.update(spec)
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": body}


def node(name: str, labels: dict[str, str] | None = None, taints: list[Any] | None = None, **spec: Any) -> objects.Node:
    doc = {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or [], **spec}}
    return objects.parse_node(doc)


def expand(doc: dict[str, Any], nodes: list[objects.Node] | None = None) -> list[dict[str, Any]]:
    pods = workloads.expand(doc, "w.yaml", nodes or [])
    for pod in pods:  # Every result must be a Pod our own parser accepts.
        objects.parse_pod(pod, "w.yaml")
    return pods


def names(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def owner(pod: dict[str, Any]) -> dict[str, Any]:
    (ref,) = pod["metadata"]["ownerReferences"]
    return ref


# ------------------------------------------------------------------------------------------ replicated kinds


def test_deployment_pods_belong_to_its_hashed_replicaset() -> None:
    pods = expand(workload("Deployment", replicas=3))
    assert len(pods) == 3
    rs = owner(pods[0])["name"]
    template_hash = pods[0]["metadata"]["labels"]["pod-template-hash"]
    assert re.fullmatch(f"{SAFE}{{10}}", template_hash)
    assert rs == f"web-{template_hash}"
    for pod in pods:
        meta = pod["metadata"]
        assert re.fullmatch(f"{re.escape(rs)}-{SAFE}{{5}}", meta["name"])
        assert meta["namespace"] == "prod"
        assert meta["labels"] == {"app": "web", "pod-template-hash": template_hash}
        assert meta["annotations"] == {"team": "ml"}
        assert owner(pod) == {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": rs,
            "uid": owner(pod)["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert pod["spec"] == template()["spec"]
        assert "status" not in pod
    assert len(set(names(pods))) == 3


def test_deployment_defaults_to_one_replica_in_default_namespace() -> None:
    (pod,) = expand(workload("Deployment", namespace=None))
    assert pod["metadata"]["namespace"] == "default"


def test_deployment_hash_follows_the_template() -> None:
    a = expand(workload("Deployment"))[0]["metadata"]["labels"]["pod-template-hash"]
    changed = workload("Deployment")
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "img:2"
    b = expand(changed)[0]["metadata"]["labels"]["pod-template-hash"]
    scaled = expand(workload("Deployment", replicas=5))[0]["metadata"]["labels"]["pod-template-hash"]
    assert a != b
    assert a == scaled  # replicas are not part of the template


def test_paused_new_deployment_creates_no_pods() -> None:
    assert expand(workload("Deployment", replicas=3, paused=True)) == []


@pytest.mark.parametrize("kind", ["ReplicaSet", "ReplicationController"])
def test_replicaset_and_rc_pods(kind: str) -> None:
    doc = workload(kind, replicas=2)
    doc["metadata"]["uid"] = "u-1"
    pods = expand(doc)
    assert len(pods) == 2
    for pod in pods:
        assert re.fullmatch(f"web-{SAFE}{{5}}", pod["metadata"]["name"])
        assert pod["metadata"]["labels"] == {"app": "web"}
        ref = owner(pod)
        assert (ref["kind"], ref["name"], ref["uid"]) == (kind, "web", "u-1")
        assert ref["apiVersion"] == ("v1" if kind == "ReplicationController" else "apps/v1")


def test_replication_controller_plain_map_selector() -> None:
    assert len(expand(workload("ReplicationController", selector={"app": "web"}))) == 1
    with pytest.raises(InputError, match="does not match"):
        expand(workload("ReplicationController", selector={"app": "db"}))


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "ReplicationController"])
def test_zero_replicas_create_nothing(kind: str) -> None:
    assert expand(workload(kind, replicas=0)) == []


def test_expansion_is_deterministic() -> None:
    nodes = [node("a"), node("b")]
    for kind in workloads.WORKLOAD_KINDS:
        doc = workload(kind, replicas=4, parallelism=4)
        first, second = expand(doc, nodes), expand(copy.deepcopy(doc), nodes)
        assert first and first == second, kind


def test_expansion_does_not_modify_the_workload() -> None:
    doc = workload("DaemonSet", template=template(tolerations=[{"operator": "Exists"}]))
    before = copy.deepcopy(doc)
    expand(doc, [node("a")])
    assert doc == before


# ---------------------------------------------------------------------------------------------- statefulset


def test_statefulset_pods_have_ordinal_identities() -> None:
    pods = expand(workload("StatefulSet", replicas=3, serviceName="web-hl"))
    assert names(pods) == ["web-0", "web-1", "web-2"]
    for i, pod in enumerate(pods):
        assert pod["metadata"]["labels"] == {
            "app": "web",
            "statefulset.kubernetes.io/pod-name": f"web-{i}",
            "apps.kubernetes.io/pod-index": str(i),
        }
        assert pod["spec"]["hostname"] == f"web-{i}"
        assert pod["spec"]["subdomain"] == "web-hl"
        assert (owner(pod)["kind"], owner(pod)["name"]) == ("StatefulSet", "web")


def test_statefulset_without_service_has_no_subdomain_and_honours_ordinals_start() -> None:
    pods = expand(workload("StatefulSet", replicas=2, ordinals={"start": 5}))
    assert names(pods) == ["web-5", "web-6"]
    assert "subdomain" not in pods[0]["spec"]


# ---------------------------------------------------------------------------------------------- job


@pytest.mark.parametrize(
    ("spec", "count"),
    [
        ({}, 1),
        ({"parallelism": 4}, 4),
        ({"parallelism": 4, "completions": 2}, 2),
        ({"parallelism": 2, "completions": 10}, 2),
        ({"completions": 3}, 1),
        ({"parallelism": 0}, 0),
        ({"parallelism": 4, "suspend": True}, 0),
    ],
)
def test_job_pod_count(spec: dict[str, Any], count: int) -> None:
    assert len(expand(workload("Job", **spec))) == count


def test_job_pods_labels_and_derived_uid() -> None:
    pods = expand(workload("Job", name="train", parallelism=2))
    uid = owner(pods[0])["uid"]
    assert uid  # derived from prod/train, since the manifest has none
    for pod in pods:
        assert re.fullmatch(f"train-{SAFE}{{5}}", pod["metadata"]["name"])
        assert pod["metadata"]["labels"] == {
            "app": "web",
            "batch.kubernetes.io/job-name": "train",
            "job-name": "train",
            "batch.kubernetes.io/controller-uid": uid,
            "controller-uid": uid,
        }
        assert (owner(pod)["apiVersion"], owner(pod)["kind"]) == ("batch/v1", "Job")
    other = expand(workload("Job", name="train", namespace="dev"))
    assert owner(other[0])["uid"] != uid


def test_job_uses_its_own_uid() -> None:
    doc = workload("Job")
    doc["metadata"]["uid"] = "1234"
    (pod,) = expand(doc)
    assert pod["metadata"]["labels"]["controller-uid"] == "1234"
    assert owner(pod)["uid"] == "1234"


def test_indexed_job_pods_carry_their_index() -> None:
    pods = expand(workload("Job", name="train", completionMode="Indexed", completions=5, parallelism=3))
    assert len(pods) == 3
    for i, pod in enumerate(pods):
        meta = pod["metadata"]
        assert re.fullmatch(f"train-{i}-{SAFE}{{5}}", meta["name"])
        assert meta["labels"]["batch.kubernetes.io/job-completion-index"] == str(i)
        assert meta["annotations"] == {"team": "ml", "batch.kubernetes.io/job-completion-index": str(i)}
        assert pod["spec"]["hostname"] == f"train-{i}"


@pytest.mark.parametrize("policy", [None, "Always"])
def test_job_restart_policy_must_end(policy: str | None) -> None:
    doc = workload("Job")
    doc["spec"]["template"]["spec"]["restartPolicy"] = policy
    with pytest.raises(InputError) as err:
        expand(doc)
    assert err.value.field == "spec.template.spec.restartPolicy"


def test_deployment_restart_policy_must_be_always() -> None:
    with pytest.raises(InputError, match="must be Always") as err:
        expand(workload("Deployment", template=template(restartPolicy="Never")))
    assert err.value.field == "spec.template.spec.restartPolicy"


# ---------------------------------------------------------------------------------------------- errors


def test_selector_mismatch_is_rejected() -> None:
    with pytest.raises(InputError) as err:
        expand(workload("Deployment", selector={"matchLabels": {"app": "db"}}))
    assert str(err.value) == "w.yaml: Deployment prod/web: spec.selector: does not match spec.template.metadata.labels"


def test_missing_selector_is_rejected() -> None:
    doc = workload("StatefulSet")
    del doc["spec"]["selector"]
    with pytest.raises(InputError, match="is required") as err:
        expand(doc)
    assert err.value.field == "spec.selector"


def test_negative_replicas_are_rejected() -> None:
    with pytest.raises(InputError, match="must be >= 0") as err:
        expand(workload("Deployment", replicas=-1))
    assert (err.value.obj, err.value.field) == ("Deployment prod/web", "spec.replicas")


def test_missing_or_malformed_template() -> None:
    doc = workload("ReplicaSet")
    del doc["spec"]["template"]
    with pytest.raises(InputError, match="is required") as err:
        expand(doc)
    assert err.value.field == "spec.template"
    with pytest.raises(InputError, match="must be a mapping") as err:
        expand(workload("ReplicaSet", template=["not", "a", "mapping"]))
    assert err.value.field == "spec.template"


@pytest.mark.parametrize("replicas", [0, 2])
def test_template_error_names_the_workload_and_template_field(replicas: int) -> None:
    doc = workload("Deployment", replicas=replicas)
    doc["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(InputError) as err:
        expand(doc)
    assert err.value.source == "w.yaml"
    assert err.value.obj == "Deployment prod/web"
    assert err.value.field == "spec.template.spec.containers[0].resources.requests[cpu]"


def test_suspended_job_template_is_still_checked() -> None:
    doc = workload("Job", suspend=True)
    doc["spec"]["template"]["spec"]["containers"] = []
    with pytest.raises(InputError) as err:
        expand(doc)
    assert (err.value.obj, err.value.field) == ("Job prod/web", "spec.template.spec.containers")


def test_unknown_kind_is_rejected() -> None:
    with pytest.raises(InputError) as err:
        expand({"kind": "CronJob", "metadata": {"name": "x"}, "spec": {}})
    assert err.value.field == "kind"


# ---------------------------------------------------------------------------------------------- daemonset


def pin(pod: dict[str, Any]) -> list[Any]:
    return pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]


def test_daemonset_skips_untolerated_taint_and_lands_on_cordoned_and_tolerated_nodes() -> None:
    nodes = [
        node("plain"),
        node("gpu-only", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
        node(
            "cordoned",
            taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
            unschedulable=True,
        ),
        node("dedicated", taints=[{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]),
        node("soft", taints=[{"key": "soft", "effect": "PreferNoSchedule"}]),
    ]
    own = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}
    pods = expand(workload("DaemonSet", name="agent", template=template(tolerations=[own])), nodes)
    pinned = [pin(p)[0]["matchFields"][0]["values"][0] for p in pods]
    assert pinned == ["plain", "cordoned", "dedicated", "soft"]
    for pod, node_name in zip(pods, pinned, strict=True):
        assert re.fullmatch(f"agent-{SAFE}{{5}}", pod["metadata"]["name"])
        assert pin(pod) == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]
        assert pod["spec"]["tolerations"] == [own, *DAEMON_AUTO]
        assert (owner(pod)["kind"], owner(pod)["name"]) == ("DaemonSet", "agent")
    assert len(set(names(pods))) == len(pods)


def test_daemonset_tolerating_everything_runs_everywhere() -> None:
    nodes = [
        node("a", taints=[{"key": "x", "effect": "NoSchedule"}]),
        node("b", taints=[{"key": "y", "value": "z", "effect": "NoExecute"}]),
        node("c"),
    ]
    pods = expand(workload("DaemonSet", template=template(tolerations=[{"operator": "Exists"}])), nodes)
    assert [pin(p)[0]["matchFields"][0]["values"] for p in pods] == [["a"], ["b"], ["c"]]


def test_daemonset_names_are_stable_per_node() -> None:
    doc = workload("DaemonSet")
    both = dict(zip(["a", "b"], names(expand(doc, [node("a"), node("b")])), strict=True))
    only_b = names(expand(doc, [node("b")]))
    assert only_b == [both["b"]]


def test_daemonset_follows_node_selector_and_required_affinity_then_replaces_it() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [{"key": "fast", "operator": "Exists"}]}}
            ],
        }
    }
    tpl = template(nodeSelector={"accel": "yes"}, affinity=affinity)
    nodes = [
        node("n1", {"accel": "yes", "zone": "z1"}),
        node("n2", {"accel": "yes", "zone": "z2"}),
        node("n3", {"zone": "z1"}),
    ]
    (pod,) = expand(workload("DaemonSet", template=tpl), nodes)
    assert pin(pod) == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    preferred = pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred == affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert pod["spec"]["nodeSelector"] == {"accel": "yes"}


def test_daemonset_tolerations_replace_matching_and_skip_identical() -> None:
    evict_late = {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 30,
    }
    identical = {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"}
    tpl = template(tolerations=[evict_late, identical], hostNetwork=True)
    (pod,) = expand(workload("DaemonSet", template=tpl), [node("a")])
    network = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}
    expected = [DAEMON_AUTO[0], identical, *DAEMON_AUTO[1:4], DAEMON_AUTO[5], network]
    assert pod["spec"]["tolerations"] == expected


# ---------------------------------------------------------------------------------------------- schema


def test_every_kind_yields_schema_valid_pods() -> None:
    version = major_minor(latest_version())
    nodes = [node("a")]
    for kind in workloads.WORKLOAD_KINDS:
        doc = workload(kind, replicas=2, parallelism=2, completionMode="Indexed", completions=2)
        if kind != "Job":
            del doc["spec"]["completionMode"], doc["spec"]["completions"]
        for pod in expand(doc, nodes):
            kubernetes_validate.validate(pod, version, strict=True)
