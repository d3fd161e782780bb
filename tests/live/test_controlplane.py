"""The test control plane is the real thing: upstream validation, admission, RBAC, persistence in etcd, 410 Gone.

Each test pins behaviour a mock would not have, which is what the live scheduler's tests rely on.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from conftest import KubeContext
from controlplane import ACCELERATOR, REPO
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from accelsched.topology.render import to_nrt
from accelsched.topology.sysfs import discover

PODGROUP = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
NRT = ("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies")


def _pod(name: str, accelerators: int = 1, scheduler: str = "accelsched") -> dict[str, Any]:
    amount = str(accelerators)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/infer:1",
                    "resources": {"requests": {ACCELERATOR: amount}, "limits": {ACCELERATOR: amount}},
                }
            ],
        },
    }


def _watch_first_event(core: Any, namespace: str, resource_version: str, kind: str = "config_map") -> dict[str, Any]:
    """The first event of a watch from ``resource_version``, read off the wire (no client-side reinterpretation)."""
    lister = getattr(core, f"list_namespaced_{kind}")
    resp = lister(namespace, watch=True, resource_version=resource_version, timeout_seconds=5, _preload_content=False)
    try:
        for line in resp:
            if line.strip():
                return json.loads(line)
    finally:
        resp.release_conn()
    raise AssertionError(f"watch from resourceVersion {resource_version} ended without an event")


def test_node_status_advertises_the_extended_resource(kube: KubeContext) -> None:
    kube.make_node("node-a", {"accelsched.io/pdu": "pdu-1"}, {ACCELERATOR: 8})
    node = kube.core.read_node("node-a")
    assert node.status.capacity[ACCELERATOR] == "8"
    assert node.status.allocatable[ACCELERATOR] == "8"
    assert node.status.allocatable["cpu"] == "64"
    assert node.metadata.labels["accelsched.io/pdu"] == "pdu-1"
    assert node.metadata.labels["kubernetes.io/hostname"] == "node-a"
    ready = [c for c in node.status.conditions if c.type == "Ready"]
    assert len(ready) == 1 and ready[0].status == "True"
    # TaintNodesByCondition admission tainted the new Node not-ready; make_node lifts it as the node lifecycle
    # controller does once the node is Ready, and keeps the taints the test asked for.
    assert not node.spec.taints


def test_make_node_keeps_requested_taints(kube: KubeContext) -> None:
    taint = {"key": "accelsched.io/reserved", "value": "training", "effect": "NoSchedule"}
    node = kube.make_node("node-t", taints=[taint])
    assert [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.spec.taints] == [taint]


def test_pod_is_admitted_and_read_back_pending(kube: KubeContext) -> None:
    kube.core.create_namespaced_pod(kube.namespace, _pod("p-1", 2))
    pod = kube.core.read_namespaced_pod("p-1", kube.namespace)
    assert pod.spec.scheduler_name == "accelsched"
    assert pod.spec.node_name is None
    assert pod.status.phase == "Pending"
    assert pod.spec.containers[0].resources.requests[ACCELERATOR] == "2"
    # Admission plugins ran: ServiceAccount set the account, DefaultTolerationSeconds added the NoExecute
    # tolerations every real pod carries (and the scheduler must tolerate-check like any other).
    assert pod.spec.service_account_name == "default"
    keys = {t.key for t in pod.spec.tolerations or []}
    assert {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} <= keys


def test_api_validation_rejects_an_overcommitted_extended_resource(kube: KubeContext) -> None:
    body = _pod("bad")
    body["spec"]["containers"][0]["resources"]["limits"][ACCELERATOR] = "2"
    with pytest.raises(ApiException) as exc:
        kube.core.create_namespaced_pod(kube.namespace, body)
    assert exc.value.status == 422
    assert "must be equal to" in exc.value.body  # upstream's message for extended resources, request != limit


def test_binding_subresource_sets_node_name_once(kube: KubeContext) -> None:
    kube.make_node("node-a", capacity={ACCELERATOR: 4})
    kube.core.create_namespaced_pod(kube.namespace, _pod("p-1"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p-1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
    }
    # _preload_content=False: the generated client cannot deserialize the Status a Binding POST returns.
    kube.core.create_namespaced_pod_binding("p-1", kube.namespace, binding, _preload_content=False)
    assert kube.core.read_namespaced_pod("p-1", kube.namespace).spec.node_name == "node-a"
    with pytest.raises(ApiException) as exc:  # a second bind is a conflict, as a racing scheduler would see
        kube.core.create_namespaced_pod_binding("p-1", kube.namespace, binding, _preload_content=False)
    assert exc.value.status == 409


def test_objects_survive_an_apiserver_kill_and_restart(kube: KubeContext) -> None:
    cp = kube.control_plane
    kube.make_node("node-a", capacity={ACCELERATOR: 8})
    kube.core.create_namespaced_pod(kube.namespace, _pod("p-1"))
    pid = cp.apiserver_pid
    cp.stop_apiserver()
    assert cp.apiserver_pid is None
    with pytest.raises(urllib3.exceptions.MaxRetryError, match="Connection refused"):
        kube.core.read_node("node-a", _request_timeout=3)
    cp.start_apiserver()
    assert cp.apiserver_pid not in (None, pid)
    assert kube.core.read_node("node-a").status.allocatable[ACCELERATOR] == "8"
    assert kube.core.read_namespaced_pod("p-1", kube.namespace).spec.scheduler_name == "accelsched"


def test_watch_from_a_compacted_revision_gets_410_gone(kube: KubeContext) -> None:
    # configmaps have no watch cache here (ControlPlane's default --watch-cache-sizes), so the watch is served by
    # etcd and expires when kube-apiserver's compactor (--etcd-compaction-interval=5s) compacts past it.
    cm = kube.core.create_namespaced_config_map(kube.namespace, {"metadata": {"name": "c"}, "data": {"v": "0"}})
    start = cm.metadata.resource_version
    for i in range(1, 4):
        kube.core.patch_namespaced_config_map("c", kube.namespace, {"data": {"v": str(i)}})
    # Before compaction the same watch replays history: the 410 below is compaction's doing, nothing else.
    first = _watch_first_event(kube.core, kube.namespace, start)
    assert first["type"] == "MODIFIED" and first["object"]["data"]["v"] == "1"
    deadline = time.monotonic() + 40
    while True:
        event = _watch_first_event(kube.core, kube.namespace, start)
        if event["type"] == "ERROR":
            break
        assert time.monotonic() < deadline, "no compaction within 40s with --etcd-compaction-interval=5s"
        time.sleep(1)
    assert event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"


def test_watch_cache_forgets_history_across_an_apiserver_restart(kube: KubeContext) -> None:
    # Pods are served from the watch cache, which a restarted API server fills from a fresh list: a watch that
    # resumes from before the restart is told to relist (410), as a scheduler's informer is after an outage.
    pod = kube.core.create_namespaced_pod(kube.namespace, _pod("p-1"))
    kube.core.patch_namespaced_pod("p-1", kube.namespace, {"metadata": {"labels": {"touched": "yes"}}})
    assert _watch_first_event(kube.core, kube.namespace, pod.metadata.resource_version, "pod")["type"] == "MODIFIED"
    kube.control_plane.stop_apiserver()
    kube.control_plane.start_apiserver()
    event = _watch_first_event(kube.core, kube.namespace, pod.metadata.resource_version, "pod")
    assert event["type"] == "ERROR" and event["object"]["code"] == 410, event


def _example_podgroups() -> list[dict[str, Any]]:
    found = []
    for path in sorted((REPO / "examples").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            items = doc.get("items", []) if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
            found += [d for d in items if isinstance(d, dict) and d.get("kind") == "PodGroup"]
    return found


def test_crds_accept_the_podgroups_and_topology_accelsched_reads(kube: KubeContext) -> None:
    custom = client.CustomObjectsApi(kube.api)
    groups = _example_podgroups()
    assert groups, "examples/ has PodGroups (examples/lab/09-gangs.yaml)"
    for pg in groups:
        pg = {**pg, "metadata": {**pg["metadata"], "namespace": kube.namespace}}
        group, version, plural = PODGROUP
        custom.create_namespaced_custom_object(group, version, kube.namespace, plural, pg, field_validation="Strict")
        back = custom.get_namespaced_custom_object(group, version, kube.namespace, plural, pg["metadata"]["name"])
        assert back["spec"] == pg["spec"]
    # What `accelsched topology -o nrt` prints for this machine's real /sys.
    nrt = to_nrt(discover("/"), "node-a", ACCELERATOR, "single-numa-node", "pod")
    custom.create_cluster_custom_object(*NRT[:2], NRT[2], nrt, field_validation="Strict")
    back = custom.get_cluster_custom_object(*NRT[:2], NRT[2], "node-a")
    assert back["zones"] == nrt["zones"] and back["attributes"] == nrt["attributes"]


def test_crd_schema_rejects_a_malformed_podgroup(kube: KubeContext) -> None:
    custom = client.CustomObjectsApi(kube.api)
    bad = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g"}}
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(
            *PODGROUP[:2], kube.namespace, PODGROUP[2], {**bad, "spec": {"minMember": "four"}}
        )
    assert exc.value.status == 422 and "spec.minMember" in exc.value.body
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(
            *PODGROUP[:2], kube.namespace, PODGROUP[2], {**bad, "spec": {"minMembers": 4}}, field_validation="Strict"
        )
    assert exc.value.status == 400 and "minMembers" in exc.value.body


def test_service_account_token_is_held_to_its_rbac(kube: KubeContext, tmp_path: Path) -> None:
    rbac = client.RbacAuthorizationV1Api(kube.api)
    kube.core.create_namespaced_service_account(kube.namespace, {"metadata": {"name": "sched"}})
    request = {"spec": {"audiences": [], "expirationSeconds": 3600}}
    token = kube.core.create_namespaced_service_account_token("sched", kube.namespace, request).status.token
    with config.new_client_from_config(config_file=str(kube.control_plane.token_kubeconfig(token, "sched"))) as api:
        as_sched = client.CoreV1Api(api)
        with pytest.raises(ApiException) as exc:
            as_sched.list_node()
        assert exc.value.status == 403
        role = f"{kube.namespace}-node-reader"
        rbac.create_cluster_role(
            {"metadata": {"name": role}, "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}
        )
        subject = {"kind": "ServiceAccount", "name": "sched", "namespace": kube.namespace}
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [subject],
            }
        )
        try:
            deadline = time.monotonic() + 10
            while True:  # the RBAC authorizer sees the new binding through its informer, a moment later
                try:
                    as_sched.list_node()
                    break
                except ApiException as e:
                    assert e.status == 403 and time.monotonic() < deadline
                    time.sleep(0.2)
            with pytest.raises(ApiException) as exc:  # list granted; nothing else was
                as_sched.delete_node("any")
            assert exc.value.status == 403
        finally:
            rbac.delete_cluster_role_binding(role)
            rbac.delete_cluster_role(role)
