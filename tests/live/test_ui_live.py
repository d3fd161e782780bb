"""``accelsched ui --from-cluster`` against a real kube-apiserver, as deployed: authenticated as the accelsched-ui
ServiceAccount bound to deploy/ui/rbac.yaml's read-only ClusterRole. The page follows the cluster (a node added, a
pod bound through the API show within 2 s), every read it needs is granted, and a write is refused twice: by the
process before it is sent, and by the API server itself for that identity."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ACCELERATOR, KubeContext
from controlplane import REPO
from livekit import accel_pod, kube_for, wait_for

from accelsched.live import kube as k
from accelsched.live.kube import ApiError, api_client
from accelsched.live.snapshot import resources
from accelsched.ui import server
from accelsched.ui.hub import Hub
from accelsched.ui.live import LiveSource, ReadOnlyError, ReadOnlyKube

pytestmark = pytest.mark.integration

RBAC = REPO / "deploy" / "ui" / "rbac.yaml"
RBAC_RESOURCES = {
    "ServiceAccount": k.Resource("/api/v1", "serviceaccounts"),
    "ClusterRole": k.Resource("/apis/rbac.authorization.k8s.io/v1", "clusterroles", namespaced=False),
    "ClusterRoleBinding": k.Resource("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", namespaced=False),
}


def _apply_rbac(admin: k.Kube) -> None:
    for doc in yaml.safe_load_all(RBAC.read_text()):
        resource, namespace = RBAC_RESOURCES[doc["kind"]], doc["metadata"].get("namespace")
        try:
            admin.create(resource, doc, namespace)
        except ApiError as exc:
            if exc.status != 409:
                raise
            admin.replace(resource, doc["metadata"]["name"], doc, namespace)


def _ui_kubeconfig(kube: KubeContext, admin: k.Kube) -> Path:
    """A kubeconfig holding a TokenRequest token of kube-system/accelsched-ui (what `kubectl create token` gets)."""
    _apply_rbac(admin)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    path = RBAC_RESOURCES["ServiceAccount"].path("kube-system", "accelsched-ui", "token")
    token = admin.request("POST", path, body=request)["status"]["token"]
    return kube.control_plane.token_kubeconfig(token, "accelsched-ui")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def test_the_rbac_grants_reads_only(kube: KubeContext) -> None:
    admin = kube_for(kube.kubeconfig)
    as_ui = k.Kube(api_client(str(_ui_kubeconfig(kube, admin))))  # a plain Kube: the API server alone decides
    for _, resource, optional, query in resources():
        try:
            as_ui.list(resource, limit="1", **query)
        except ApiError as exc:
            assert optional and exc.status == 404, (resource.plural, exc)
    kube.make_node("rbac-n1", capacity={ACCELERATOR: 2})
    as_ui.get(k.NODES, "rbac-n1")
    pod = accel_pod("written", kube.namespace, 1)
    refusals = {
        "create pods": lambda: as_ui.create(k.PODS, pod, kube.namespace),
        "bind": lambda: as_ui.bind(kube.namespace, "written", "rbac-n1"),
        "patch nodes": lambda: as_ui.patch(k.NODES, "rbac-n1", {"spec": {"unschedulable": True}}),
        "delete nodes": lambda: as_ui.delete(k.NODES, "rbac-n1"),
        "list secrets": lambda: as_ui.list(k.Resource("/api/v1", "secrets"), "kube-system"),
    }
    for what, call in refusals.items():
        with pytest.raises(ApiError) as refused:
            call()
        assert refused.value.status == 403, what
    assert admin.get(k.NODES, "rbac-n1")["spec"].get("unschedulable") is not True
    # The process refuses first: ReadOnlyKube never sends a write at all (405 of its own, not the server's 403).
    read_only = ReadOnlyKube(api_client(str(_ui_kubeconfig(kube, admin))))
    with pytest.raises(ReadOnlyError, match="read-only: create pods is refused"):
        read_only.create(k.PODS, pod, kube.namespace)
    with pytest.raises(ReadOnlyError, match="read-only: POST"):
        read_only.request("POST", k.PODS.path(kube.namespace), body=pod)
    assert read_only.get(k.NODES, "rbac-n1")["metadata"]["name"] == "rbac-n1"


def test_live_page_follows_the_cluster_as_the_ui_service_account(kube: KubeContext) -> None:
    admin = kube_for(kube.kubeconfig)
    kube.make_node("ui-n1", capacity={ACCELERATOR: 4})
    kube.make_node("ui-n2", capacity={ACCELERATOR: 4})
    admin.create(k.PODS, accel_pod("train", kube.namespace, 2), kube.namespace)
    key = f"{kube.namespace}/train"

    source = LiveSource(ReadOnlyKube(api_client(str(_ui_kubeconfig(kube, admin)))))
    hub = Hub(source.start(timeout=30))
    source.follow(hub)
    url, stop = server.start_in_thread(hub)
    try:
        view = _get(url + "api/state")
        assert view["mode"] == "live" and view["source"].startswith("cluster https://")
        assert {"ui-n1", "ui-n2"} <= set(view["order"])
        first = _get(url + f"api/pod?key={key}")
        assert first["phase"] in ("Placed", "Pending")  # the page's own run; nothing was written

        # A node added through the API shows up without a reload.
        started = time.monotonic()
        kube.make_node("ui-n3", capacity={ACCELERATOR: 8})
        wait_for("ui-n3 on the page", lambda: "ui-n3" in _get(url + "api/state")["order"], timeout=2.0, every=0.05)
        assert time.monotonic() - started < 2.0

        # A bind made through the API (the pods/binding subresource, as a scheduler does) shows within 2 s.
        target = "ui-n2" if first.get("node") != "ui-n2" else "ui-n1"
        started = time.monotonic()
        admin.bind(kube.namespace, "train", target)

        def bound() -> bool:
            detail = _get(url + f"api/pod?key={key}")
            if detail["phase"] != "Bound" or detail["node"] != target:
                return False
            node = next(n for n in _get(url + "api/state")["nodes"] if n["name"] == target)
            return key in node["pods"]

        wait_for("the bind on the page", bound, timeout=2.0, every=0.05)
        assert time.monotonic() - started < 2.0
        assert admin.get(k.PODS, "train", kube.namespace)["spec"]["nodeName"] == target
    finally:
        stop()
        started = time.monotonic()
        source.stop()
    # Stopping ends every watch at once, the quiet ones too (a thread each would linger for its 300 s timeout).
    alive = [i.resource.plural for i in source.informers.values() if i._thread is not None and i._thread.is_alive()]
    assert alive == [] and time.monotonic() - started < 5.0


def test_the_command_reads_the_cluster_and_bad_credentials_exit_2(kube: KubeContext) -> None:
    from click.testing import CliRunner

    from accelsched.cli import main

    admin = kube_for(kube.kubeconfig)
    kube.make_node("cli-n1", capacity={ACCELERATOR: 4})
    result = CliRunner().invoke(main, ["ui", "--kubeconfig", str(_ui_kubeconfig(kube, admin)), "--once"])
    assert result.exit_code == 0, result.output
    view = json.loads(result.output)
    assert view["mode"] == "live" and "cli-n1" in view["order"]
    bogus = kube.control_plane.token_kubeconfig("not-a-token", "bogus")
    result = CliRunner().invoke(main, ["ui", "--kubeconfig", str(bogus), "--port", "0"])
    assert result.exit_code == 2, result.output
    assert "cannot list nodes: 401" in result.output and "Traceback" not in result.output
