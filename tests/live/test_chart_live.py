"""charts/accelsched installed with the real Helm v4 into the test API server: the server accepts every object the
chart makes (its own schema validation, RBAC escalation checks), `helm upgrade` with a changed config rolls the
scheduler's pod template and nothing else, `helm rollback` restores it, and `helm uninstall` leaves nothing.

There is no kubelet here, so no pod runs (tests/node does that part); what is checked is what the API server holds.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import helmkit
import prereqs
import pytest
from conftest import KubeContext

pytestmark = pytest.mark.integration

CHART = helmkit.CHART


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prereqs.built_binary("helm", "helm", tmp_path_factory.mktemp("helm") / "build.log")


def _helm(helm: Path, kube: KubeContext, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return helmkit.helm(helm, kube.kubeconfig, tmp_path, *args)


def _objects(kube: KubeContext, release: str) -> dict[str, Any]:
    return helmkit.release_objects(kube.api, kube.namespace, release)


def test_install_upgrade_rollback_uninstall(kube: KubeContext, helm: Path, tmp_path: Path) -> None:
    release, ns = "gpu", kube.namespace
    common = ["--namespace", ns, "--set", "image.tag=test", "--set", "draDriver.enabled=true"]
    installed = _helm(helm, kube, tmp_path, "install", release, str(CHART), *common)
    assert installed.returncode == 0, installed.stderr
    assert f"accelsched 0.1.0 is installed as release {release} in namespace {ns}" in installed.stdout  # NOTES.txt
    objects = _objects(kube, release)
    assert set(objects["Deployment"]) == {"gpu-accelsched-scheduler", "gpu-accelsched-ui"}
    assert set(objects["DaemonSet"]) == {"gpu-accelsched-device-plugin", "gpu-accelsched-dra-driver"}
    assert set(objects["DeviceClass"]) == {"accelerator.accelsched.io", "nic.accelsched.io", "mig.accelsched.io"}
    scheduler = objects["Deployment"]["gpu-accelsched-scheduler"]
    assert scheduler.spec.template.spec.containers[0].image == "accelsched/accelsched:test"
    before = scheduler.spec.template.metadata.annotations["checksum/config"]
    plugin_before = objects["DaemonSet"]["gpu-accelsched-device-plugin"].spec.template.metadata.annotations

    backoff = ["--set", "scheduler.config.podMaxBackoffSeconds=30"]
    upgraded = _helm(helm, kube, tmp_path, "upgrade", release, str(CHART), *common, *backoff)
    assert upgraded.returncode == 0, upgraded.stderr
    objects = _objects(kube, release)
    scheduler = objects["Deployment"]["gpu-accelsched-scheduler"]
    assert scheduler.spec.template.metadata.annotations["checksum/config"] != before  # the scheduler's pods roll
    assert "podMaxBackoffSeconds: 30" in objects["ConfigMap"]["gpu-accelsched-scheduler"].data["config.yaml"]
    # the device plugin's pods (and the devices they hand out) are left alone by a scheduler-only change
    assert objects["DaemonSet"]["gpu-accelsched-device-plugin"].spec.template.metadata.annotations == plugin_before

    rolled = _helm(helm, kube, tmp_path, "rollback", release, "1", "--namespace", ns)
    assert rolled.returncode == 0, rolled.stderr
    scheduler = _objects(kube, release)["Deployment"]["gpu-accelsched-scheduler"]
    assert scheduler.spec.template.metadata.annotations["checksum/config"] == before
    history = json.loads(_helm(helm, kube, tmp_path, "history", release, "--namespace", ns, "-o", "json").stdout)
    assert [h["revision"] for h in history] == [1, 2, 3]

    removed = _helm(helm, kube, tmp_path, "uninstall", release, "--namespace", ns, "--wait")
    assert removed.returncode == 0, removed.stderr
    assert _objects(kube, release) == {}
