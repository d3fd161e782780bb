"""The scheduler as deployed: authenticated as the accelsched ServiceAccount with deploy/scheduler's RBAC and
KubeSchedulerConfiguration, it lists and watches, binds, records events, patches conditions and leads."""

from __future__ import annotations

import logging
from pathlib import Path

import yaml
from conftest import KubeContext
from controlplane import REPO
from livekit import accel_pod, condition_message, decided, events_for, kube_for, node_of, running_scheduler, wait_for

from accelsched.live import kube as k
from accelsched.live.kube import ApiError
from accelsched.live.leaderelection import ElectionConfig

SCHEDULER_DIR = REPO / "deploy" / "scheduler"
RESOURCES = {
    "ServiceAccount": k.Resource("/api/v1", "serviceaccounts"),
    "ClusterRole": k.Resource("/apis/rbac.authorization.k8s.io/v1", "clusterroles", namespaced=False),
    "ClusterRoleBinding": k.Resource("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", namespaced=False),
    "Role": k.Resource("/apis/rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": k.Resource("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
}


def _apply(api: k.Kube, path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        resource = RESOURCES[doc["kind"]]
        namespace = doc["metadata"].get("namespace")
        try:
            api.create(resource, doc, namespace)
        except ApiError as exc:
            if exc.status != 409:
                raise
            api.replace(resource, doc["metadata"]["name"], doc, namespace)


def test_scheduler_works_with_the_deployed_service_account_and_rbac(kube: KubeContext, tmp_path: Path, caplog) -> None:
    admin = kube_for(kube.kubeconfig)
    _apply(admin, SCHEDULER_DIR / "serviceaccount.yaml")
    _apply(admin, SCHEDULER_DIR / "rbac.yaml")
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    token = admin.request(
        "POST", k.Resource("/api/v1", "serviceaccounts").path("kube-system", "accelsched", "token"), body=request
    )["status"]["token"]
    kubeconfig = kube.control_plane.token_kubeconfig(token, "accelsched-sa")
    configmap = yaml.safe_load((SCHEDULER_DIR / "config.yaml").read_text())
    config = tmp_path / "config.yaml"
    config.write_text(configmap["data"]["config.yaml"])

    # The ServiceAccount may not do what it does not need: reading a Secret is refused.
    try:
        kube_for(kubeconfig).list(k.Resource("/api/v1", "secrets"), "kube-system")
        raise AssertionError("the accelsched ServiceAccount can read secrets")
    except ApiError as exc:
        assert exc.status == 403

    kube.make_node("sa1", capacity={"qualcomm.com/ai-accelerator": 2})
    election = ElectionConfig("accelsched", "kube-system", "rbac-test", 4.0, 3.0, 0.5)
    caplog.set_level(logging.WARNING, logger="accelsched")
    with running_scheduler(kubeconfig, str(config), election=election) as scheduler:
        wait_for("leadership", lambda: scheduler.leading, timeout=20)
        admin.create(k.PODS, accel_pod("fits", kube.namespace, 2), kube.namespace)
        admin.create(k.PODS, accel_pod("too-big", kube.namespace, 3), kube.namespace)
        assert wait_for("fits bound", lambda: node_of(admin, kube.namespace, "fits")) == "sa1"
        pod = wait_for("too-big marked", lambda: decided(admin, kube.namespace, "too-big"))
        assert condition_message(pod).startswith("0/1 nodes are available: 1 Insufficient qualcomm.com/ai-accelerator.")
        wait_for("the events", lambda: admin.list(k.EVENTS, kube.namespace)["items"])
        # The same failure again (a node change retries it): one Event whose series counts it, as client-go's
        # recorder does, not a second Event.
        admin.patch(k.NODES, "sa1", {"metadata": {"labels": {"retry": "1"}}})
        wait_for("too-big retried", lambda: _failed_series(admin, kube.namespace) >= 2)
        assert len(events_for(admin, kube.namespace, "too-big", "FailedScheduling")) == 1
        # Granted for the paths a healthy run does not take: confirming a bind whose answer was lost.
        assert kube_for(kubeconfig).get(k.PODS, "fits", kube.namespace)["spec"]["nodeName"] == "sa1"
    refused = [
        r.getMessage() + str(vars(r))
        for r in caplog.records
        if getattr(r, "status", None) == 403 or "forbidden" in str(getattr(r, "error", "")).lower()
    ]
    assert not refused, refused


def _failed_series(api: k.Kube, namespace: str) -> int:
    events = events_for(api, namespace, "too-big", "FailedScheduling")
    return max(((e.get("series") or {}).get("count", 1) for e in events), default=0)
