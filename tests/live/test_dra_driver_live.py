"""The DRA driver against a real kube-apiserver, authenticated as deploy/dra's ServiceAccount with its RBAC: it
publishes this node's slices (the API server's validation accepts them), keeps them current, and prepares a claim
the API server holds for the kubelet-side peer (tests/dra_kubelet_peer.py)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import KubeContext
from controlplane import REPO
from livekit import kube_for

from accelsched.dra.driver.main import DRADriver, DriverConfig
from accelsched.dra.driver.prepare import RESOURCE_CLAIMS, ApiClaimSource
from accelsched.dra.driver.publish import RESOURCE_SLICES
from accelsched.live import kube as k
from accelsched.live.kube import ApiError

if str(REPO / "tests") not in sys.path:  # the kubelet-side peer lives in tests/, beside the unit tests using it
    sys.path.insert(0, str(REPO / "tests"))
from dra_kubelet_peer import DRAError, DRAKubeletPeer

DRIVER = "dra.accelsched.io"
NODE = "dra-node"
RESOURCES = {
    "ServiceAccount": k.Resource("/api/v1", "serviceaccounts"),
    "ClusterRole": k.Resource("/apis/rbac.authorization.k8s.io/v1", "clusterroles", namespaced=False),
    "ClusterRoleBinding": k.Resource("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", namespaced=False),
    "DeviceClass": k.Resource("/apis/resource.k8s.io/v1", "deviceclasses", namespaced=False),
}


def _apply(api: k.Kube, path: Path, kinds: set[str]) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] not in kinds:
            continue
        resource, namespace = RESOURCES[doc["kind"]], doc["metadata"].get("namespace")
        try:
            api.create(resource, doc, namespace)
        except ApiError as exc:
            if exc.status != 409:
                raise
            current = api.get(resource, doc["metadata"]["name"], namespace)
            doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            api.replace(resource, doc["metadata"]["name"], doc, namespace)


@pytest.fixture
def sa_kube(kube: KubeContext) -> k.Kube:
    """A client with the deployed ServiceAccount's token: what the DaemonSet's pod can do, no more."""
    admin = kube_for(kube.kubeconfig)
    _apply(admin, REPO / "deploy" / "dra" / "driver.yaml", {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"})
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    path = RESOURCES["ServiceAccount"].path("kube-system", "accelsched-dra-driver", "token")
    token = admin.request("POST", path, body=request)["status"]["token"]
    return kube_for(kube.control_plane.token_kubeconfig(token, "accelsched-dra-driver"))


@pytest.fixture
def dirs() -> Iterator[dict[str, str]]:
    root = tempfile.mkdtemp(prefix="dral-")
    out = {name: os.path.join(root, name) for name in ("plugins", "registry", "cdi")}
    out["fake"] = os.path.join(root, "fake.yaml")
    yield out
    shutil.rmtree(root, ignore_errors=True)


def _slices(api: k.Kube) -> dict[str, dict[str, Any]]:
    items = api.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={NODE},spec.driver={DRIVER}")["items"]
    return {s["metadata"]["name"]: s for s in items}


def _devices(slices: dict[str, dict[str, Any]]) -> list[str]:
    return sorted(d["name"] for s in slices.values() for d in s["spec"].get("devices", []))


def test_publishes_keeps_current_and_prepares_with_the_deployed_rbac(
    kube: KubeContext, sa_kube: k.Kube, dirs: dict[str, str]
) -> None:
    admin = kube_for(kube.kubeconfig)
    node = kube.make_node(NODE)
    # A slice an earlier run left behind, at a higher generation than this run starts from.
    stale = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{NODE}-left-over"},
        "spec": {"driver": DRIVER, "nodeName": NODE, "pool": {"name": NODE, "generation": 7, "resourceSliceCount": 1}},
    }
    admin.create(RESOURCE_SLICES, stale)
    Path(dirs["fake"]).write_text("devices: 2\nnics: 1\nmigModel: A100-40GB\n")
    config = DriverConfig(
        node_name=NODE,
        driver=DRIVER,
        plugins_dir=dirs["plugins"],
        registry_dir=dirs["registry"],
        cdi_dir=dirs["cdi"],
        fake_file=dirs["fake"],
        interval=3600,  # the test takes the watch steps
    )
    driver = DRADriver(config, ApiClaimSource(sa_kube), sa_kube)
    peer = DRAKubeletPeer(dirs["registry"])
    try:
        driver.start()
        assert driver.published.is_set(), "the first publish failed (see the log)"
        slices = _slices(admin)
        assert f"{NODE}-left-over" not in slices
        assert {s["spec"]["pool"]["generation"] for s in slices.values()} == {8}
        assert len(slices) == 3  # the counter sets, the NIC, the GPUs with their MIG placements
        assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices.values()} == {3}
        owner = {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node.metadata.uid, "controller": True}
        assert all(s["metadata"]["ownerReferences"] == [owner] for s in slices.values())
        assert len(_devices(slices)) == 2 * 19 + 1 and "gpu-1-mig-3g-20gb-4" in _devices(slices)
        counters = [c["name"] for s in slices.values() for c in s["spec"].get("sharedCounters", [])]
        assert counters == ["gpu-0-counters", "gpu-1-counters"]

        versions = {n: s["metadata"]["resourceVersion"] for n, s in slices.items()}
        driver.step()  # nothing changed: nothing written
        assert {n: s["metadata"]["resourceVersion"] for n, s in _slices(admin).items()} == versions

        Path(dirs["fake"]).write_text("devices: 2\nnics: 1\nmigModel: A100-40GB\nmissing: [gpu-1]\n")
        driver.step()  # gpu-1 is gone: a new generation without it
        slices = _slices(admin)
        assert {s["spec"]["pool"]["generation"] for s in slices.values()} == {9}
        assert not [d for d in _devices(slices) if d.startswith("gpu-1")]

        for name in slices:  # the kubelet wipes a node's slices when it starts
            admin.delete(RESOURCE_SLICES, name)
        driver.step()
        assert sorted(_slices(admin)) == sorted(slices)

        # A claim the scheduler allocated (written as kube-scheduler's PreBind does), prepared for the peer.
        ns = kube.namespace
        claim = admin.create(
            RESOURCE_CLAIMS,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "gpu-and-nic", "namespace": ns},
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "accelerator.accelsched.io"}},
                            {"name": "nic", "exactly": {"deviceClassName": "nic.accelsched.io"}},
                        ]
                    }
                },
            },
            ns,
        )
        results = [
            {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-0"},
            {"request": "nic", "driver": DRIVER, "pool": NODE, "device": "nic-0"},
        ]
        claim["status"] = {"allocation": {"devices": {"results": results}}}
        admin.request(
            "PUT", RESOURCE_CLAIMS.path(ns, "gpu-and-nic", "status"), body=claim
        )  # the status subresource, as kube-scheduler writes it
        uid = claim["metadata"]["uid"]
        peer.start()
        peer.wait_registered(DRIVER, timeout=30)
        devices = peer.prepare(DRIVER, [(ns, uid, "gpu-and-nic")])[uid]
        assert [(list(d.request_names), d.device_name, list(d.cdi_device_ids)) for d in devices] == [
            (["gpu"], "gpu-0", [f"k8s.{DRIVER}/device={uid}-gpu-0"]),
            (["nic"], "nic-0", [f"k8s.{DRIVER}/device={uid}-nic-0"]),
        ]
        assert Path(dirs["cdi"], f"k8s.{DRIVER}-device_{uid}.json").exists()
        with pytest.raises(DRAError, match=f"ResourceClaim {ns}/missing not found"):
            peer.prepare(DRIVER, [(ns, "uid-x", "missing")])
        peer.unprepare(DRIVER, [(ns, uid, "gpu-and-nic")])
        assert not Path(dirs["cdi"], f"k8s.{DRIVER}-device_{uid}.json").exists()
    finally:
        peer.stop()
        driver.stop()
        for name in _slices(admin):  # no garbage collector runs here to follow the owner reference
            admin.delete(RESOURCE_SLICES, name)


def test_the_shipped_device_classes_are_accepted(kube: KubeContext) -> None:
    admin = kube_for(kube.kubeconfig)
    _apply(admin, REPO / "deploy" / "dra" / "deviceclasses.yaml", {"DeviceClass"})
    names = {c["metadata"]["name"] for c in admin.list(RESOURCES["DeviceClass"])["items"]}
    assert {"accelerator.accelsched.io", "nic.accelsched.io", "mig.accelsched.io"} <= names
