"""The volume plugins live: storage objects read from the API server, and VolumeBinding's PreBind writing
``volume.kubernetes.io/selected-node`` on a WaitForFirstConsumer claim and waiting, as kube-scheduler does, until
the claim is bound before the pod is. The test plays the external provisioner and the PV controller (the test
control plane runs neither): it provisions a PV on the selected node and binds the claim to it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import KubeContext
from livekit import kube_for, node_of, running_scheduler, wait_for

from accelsched.api.storage import ANN_BIND_COMPLETED, ANN_SELECTED_NODE
from accelsched.live import kube as k
from accelsched.live.kube import ApiError, Kube
from accelsched.live.volumes import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES


def _pod(name: str, namespace: str, claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "accelsched",
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }


def _claim(name: str, namespace: str, storage_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def _local_pv(name: str, node: str, storage_class: str, claim: dict[str, Any] | None = None) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
    spec: dict[str, Any] = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": storage_class,
        "local": {"path": "/mnt/nvme0"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
    }
    if claim is not None:
        meta = claim["metadata"]
        spec["claimRef"] = {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def _bind_claim(api: Kube, claim: dict[str, Any], pv: str) -> None:
    """The PV controller's part: spec.volumeName, bind-completed, phase Bound."""
    meta = claim["metadata"]
    current = api.get(PERSISTENT_VOLUME_CLAIMS, meta["name"], meta["namespace"])
    current["spec"]["volumeName"] = pv
    current["metadata"].setdefault("annotations", {})[ANN_BIND_COMPLETED] = "yes"
    current = api.replace(PERSISTENT_VOLUME_CLAIMS, meta["name"], current, meta["namespace"])
    current["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
    api.request("PUT", PERSISTENT_VOLUME_CLAIMS.path(meta["namespace"], meta["name"], "status"), body=current)


@pytest.fixture
def cluster_objects(kube: KubeContext) -> Iterator[list[tuple[k.Resource, str]]]:
    """Cluster-scoped objects the test creates, deleted afterwards (the namespace cleanup does not reach them)."""
    created: list[tuple[k.Resource, str]] = []
    yield created
    api = kube_for(kube.kubeconfig)
    for resource, name in created:
        with contextlib.suppress(ApiError):
            api.delete(resource, name)


def test_prebind_selects_the_node_of_a_wait_for_first_consumer_claim(
    kube: KubeContext, cluster_objects: list[tuple[k.Resource, str]]
) -> None:
    api = kube_for(kube.kubeconfig)
    ns = kube.namespace
    sc = f"{ns}-wffc"
    kube.make_node("gpu-a", labels={"topology.kubernetes.io/zone": "za"})
    kube.make_node("gpu-b", labels={"topology.kubernetes.io/zone": "zb"})
    api.create(STORAGE_CLASSES, {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": sc},
        "provisioner": "nvme.csi.example.com", "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["zb"]}]}],
    })  # fmt: skip
    cluster_objects.append((STORAGE_CLASSES, sc))
    claim = api.create(PERSISTENT_VOLUME_CLAIMS, _claim("scratch", ns, sc), ns)
    with running_scheduler(kube.kubeconfig):
        api.create(k.PODS, _pod("trainer", ns, "scratch"), ns)
        selected = wait_for(
            "the selected-node annotation",
            lambda: (api.get(PERSISTENT_VOLUME_CLAIMS, "scratch", ns)["metadata"].get("annotations") or {}).get(
                ANN_SELECTED_NODE
            ),
        )
        assert selected == "gpu-b"  # the class allows zone zb only
        assert node_of(api, ns, "trainer") == ""  # PreBind waits for the claim to be bound
        pv = f"{ns}-pv"
        api.create(PERSISTENT_VOLUMES, _local_pv(pv, selected, sc, claim))
        cluster_objects.append((PERSISTENT_VOLUMES, pv))
        _bind_claim(api, claim, pv)
        assert wait_for("the pod bound", lambda: node_of(api, ns, "trainer"), timeout=30) == "gpu-b"


def test_a_bound_local_pv_pins_the_pod_to_its_node(
    kube: KubeContext, cluster_objects: list[tuple[k.Resource, str]]
) -> None:
    api = kube_for(kube.kubeconfig)
    ns = kube.namespace
    sc = f"{ns}-local"
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        kube.make_node(name)
    api.create(STORAGE_CLASSES, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": sc},
                                 "provisioner": "kubernetes.io/no-provisioner",
                                 "volumeBindingMode": "WaitForFirstConsumer"})  # fmt: skip
    cluster_objects.append((STORAGE_CLASSES, sc))
    claim = api.create(PERSISTENT_VOLUME_CLAIMS, _claim("nvme", ns, sc), ns)
    pv = f"{ns}-nvme-c"
    api.create(PERSISTENT_VOLUMES, _local_pv(pv, "gpu-c", sc, claim))
    cluster_objects.append((PERSISTENT_VOLUMES, pv))
    _bind_claim(api, claim, pv)
    with running_scheduler(kube.kubeconfig):
        api.create(k.PODS, _pod("reader", ns, "nvme"), ns)
        assert wait_for("the pod bound", lambda: node_of(api, ns, "reader")) == "gpu-c"


def test_prebind_binds_an_available_local_pv_as_the_binder_does(
    kube: KubeContext, cluster_objects: list[tuple[k.Resource, str]]
) -> None:
    api = kube_for(kube.kubeconfig)
    ns = kube.namespace
    sc = f"{ns}-local"
    kube.make_node("gpu-a")
    kube.make_node("gpu-b")
    api.create(STORAGE_CLASSES, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": sc},
                                 "provisioner": "kubernetes.io/no-provisioner",
                                 "volumeBindingMode": "WaitForFirstConsumer"})  # fmt: skip
    cluster_objects.append((STORAGE_CLASSES, sc))
    pv = f"{ns}-nvme-b"
    created = api.create(PERSISTENT_VOLUMES, _local_pv(pv, "gpu-b", sc))
    cluster_objects.append((PERSISTENT_VOLUMES, pv))
    created["status"] = {"phase": "Available"}  # the PV controller's doing, in a full cluster
    api.request("PUT", PERSISTENT_VOLUMES.path(None, pv, "status"), body=created)
    claim = api.create(PERSISTENT_VOLUME_CLAIMS, _claim("nvme", ns, sc), ns)
    with running_scheduler(kube.kubeconfig):
        api.create(k.PODS, _pod("reader", ns, "nvme"), ns)
        bound = wait_for("the PV's claimRef", lambda: api.get(PERSISTENT_VOLUMES, pv)["spec"].get("claimRef") or {})
        assert (bound["name"], bound["namespace"], bound["uid"]) == ("nvme", ns, claim["metadata"]["uid"])
        assert bound["kind"] == "PersistentVolumeClaim"
        annotations = api.get(PERSISTENT_VOLUMES, pv)["metadata"].get("annotations") or {}
        assert annotations.get("pv.kubernetes.io/bound-by-controller") == "yes"
        assert node_of(api, ns, "reader") == ""  # waiting for the PV controller to bind the claim
        _bind_claim(api, claim, pv)
        assert wait_for("the pod bound", lambda: node_of(api, ns, "reader"), timeout=30) == "gpu-b"
