"""The real Helm v4 against a test API server, and what a release made as the server holds it.

Shared by the chart's tests without a node (tests/live/test_chart_live.py) and on the real node
(tests/node/test_chart_node.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from controlplane import REPO

CHART = REPO / "charts" / "accelsched"


def helm(
    binary: Path, kubeconfig: Path, home: Path, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``helm`` on ``kubeconfig`` with nothing of the machine's: its cache, config and data dirs under ``home``."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "KUBECONFIG": str(kubeconfig)}
    return subprocess.run([str(binary), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)


def release_objects(api: Any, namespace: str, release: str) -> dict[str, Any]:
    """What the release made, by kind and name (the ``app.kubernetes.io/instance`` label), as the API server holds
    it; kinds with none are left out."""
    from kubernetes import client

    selector = f"app.kubernetes.io/instance={release}"
    apps, rbac, core = client.AppsV1Api(api), client.RbacAuthorizationV1Api(api), client.CoreV1Api(api)
    found = {
        "Deployment": apps.list_namespaced_deployment(namespace, label_selector=selector).items,
        "DaemonSet": apps.list_namespaced_daemon_set(namespace, label_selector=selector).items,
        "ReplicaSet": apps.list_namespaced_replica_set(namespace, label_selector=selector).items,
        "Pod": core.list_namespaced_pod(namespace, label_selector=selector).items,
        "ConfigMap": core.list_namespaced_config_map(namespace, label_selector=selector).items,
        "ServiceAccount": core.list_namespaced_service_account(namespace, label_selector=selector).items,
        "Service": core.list_namespaced_service(namespace, label_selector=selector).items,
        "Role": rbac.list_namespaced_role(namespace, label_selector=selector).items,
        "ClusterRole": rbac.list_cluster_role(label_selector=selector).items,
        "ClusterRoleBinding": rbac.list_cluster_role_binding(label_selector=selector).items,
        "DeviceClass": client.ResourceV1Api(api).list_device_class(label_selector=selector).items,
    }
    return {kind: {o.metadata.name: o for o in items} for kind, items in found.items() if items}
