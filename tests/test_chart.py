"""charts/accelsched with the real Helm v4 (built from helm.sh/helm/v4 by hack/build-controlplane.sh helm): lint,
the values schema's refusals, and what `helm template` renders, read back by accelsched's own loaders.

Helm is only looked up here, never built (the unit suite stays fast): `make test` builds it first
(hack/test-deps.sh); where it cannot, these tests skip saying so (and fail under CI, tests/prereqs.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import prereqs
import pytest
import yaml

from accelsched.config.load import load_config

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "accelsched"
RELEASE, NAMESPACE = "gpu", "accel-system"


@pytest.fixture(scope="module")
def helm() -> Path:
    return prereqs.cached_binary("helm", "helm")


def _helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, check=False)


def render(helm: Path, *sets: str) -> list[dict[str, Any]]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for s in sets:
        args += ["--set", s]
    proc = _helm(helm, *args)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_lint_passes_strict(helm: Path) -> None:
    proc = _helm(helm, "lint", "--strict", str(CHART))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


def test_every_object_is_labelled_and_in_the_release_namespace(helm: Path) -> None:
    docs = render(helm, "draDriver.enabled=true", "metrics.serviceMonitor.enabled=true")
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "DaemonSet", "ConfigMap", "ClusterRole", "Role", "Service", "ServiceMonitor"} <= kinds
    assert "DeviceClass" in kinds
    for d in docs:
        labels = d["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == RELEASE, d["metadata"]["name"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/name"] == "accelsched"
        namespaced = d["kind"] not in ("ClusterRole", "ClusterRoleBinding", "DeviceClass")
        assert d["metadata"].get("namespace") == (NAMESPACE if namespaced else None), d["metadata"]["name"]
    # workloads select their own pods only, with labels stable across upgrades (no version in the selector)
    for d in [*by_kind(docs, "Deployment").values(), *by_kind(docs, "DaemonSet").values()]:
        selector = d["spec"]["selector"]["matchLabels"]
        assert "app.kubernetes.io/version" not in selector
        assert selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()


def test_each_part_switches_off(helm: Path) -> None:
    off = render(
        helm, "scheduler.enabled=false", "devicePlugin.enabled=false", "ui.enabled=false", "draDriver.enabled=false"
    )
    assert off == []
    only_plugin = render(helm, "scheduler.enabled=false", "ui.enabled=false")
    assert {d["kind"] for d in only_plugin} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "DaemonSet",
    }


def test_the_rendered_configs_are_ones_accelsched_accepts(helm: Path, tmp_path: Path) -> None:
    """The scheduler's KubeSchedulerConfiguration loads with `accelsched run --config`'s loader, one profile for
    the schedulerName of the values; the device plugin's config loads with `device-plugin --config`'s."""
    from accelsched.deviceplugin.config import load as load_plugin_config

    docs = render(helm, "scheduler.schedulerName=gpu-scheduler", "scheduler.config.podMaxBackoffSeconds=30")
    maps = by_kind(docs, "ConfigMap")
    (tmp_path / "scheduler.yaml").write_text(maps["gpu-accelsched-scheduler"]["data"]["config.yaml"])
    config = load_config(str(tmp_path / "scheduler.yaml"))
    assert list(config.profiles) == ["gpu-scheduler"]
    assert config.pod_max_backoff_seconds == 30
    (tmp_path / "plugin.yaml").write_text(maps["gpu-accelsched-device-plugin"]["data"]["config.yaml"])
    plugin = load_plugin_config(str(tmp_path / "plugin.yaml"))
    assert plugin.resource_name == "qualcomm.com/ai-accelerator"


def test_rbac_matches_the_deploy_manifests(helm: Path) -> None:
    """The chart grants each component exactly the rules of deploy/ (which the live RBAC tests exercise)."""
    roles = by_kind(render(helm, "draDriver.enabled=true"), "ClusterRole")
    deploy = {
        "gpu-accelsched-scheduler": REPO / "deploy/scheduler/rbac.yaml",
        "gpu-accelsched-device-plugin": REPO / "deploy/device-plugin-daemonset.yaml",
        "gpu-accelsched-dra-driver": REPO / "deploy/dra/driver.yaml",
        "gpu-accelsched-ui-read": REPO / "deploy/ui/rbac.yaml",
    }
    for name, path in deploy.items():
        want = next(d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "ClusterRole")
        assert roles[name]["rules"] == want["rules"], name


def test_leader_election_uses_the_release_namespace(helm: Path) -> None:
    docs = render(helm, "scheduler.replicas=2")
    deployment = by_kind(docs, "Deployment")["gpu-accelsched-scheduler"]
    assert deployment["spec"]["replicas"] == 2
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert f"--leader-elect-resource-namespace={NAMESPACE}" in command
    role = by_kind(docs, "Role")["gpu-accelsched-scheduler-leader-election"]
    assert role["rules"][1]["resourceNames"] == ["gpu-accelsched-scheduler"]


@pytest.mark.parametrize(
    ("setting", "wanted"),
    [
        ("scheduler.replicas=two", "scheduler.replicas"),
        ("scheduler.bogus=1", "bogus"),
        ("image.pullPolicy=Sometimes", "image.pullPolicy"),
        ("scheduler.schedulerName=Not_A_Name", "scheduler.schedulerName"),
        ("ui.port=70000", "ui.port"),
        ("metrics.serviceMonitor.interval=soon", "metrics.serviceMonitor.interval"),
    ],
)
def test_bad_values_are_refused_naming_the_field(helm: Path, setting: str, wanted: str) -> None:
    proc = _helm(helm, "template", RELEASE, str(CHART), "--set", setting)
    assert proc.returncode != 0
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert wanted.split(".")[-1] in proc.stderr, proc.stderr


def test_two_replicas_without_leader_election_are_refused(helm: Path) -> None:
    proc = _helm(
        helm, "template", RELEASE, str(CHART), "--set", "scheduler.replicas=2", "--set",
        "scheduler.leaderElection.enabled=false",
    )  # fmt: skip
    assert proc.returncode != 0
    assert "scheduler.replicas > 1 needs scheduler.leaderElection.enabled" in proc.stderr


def test_the_krew_manifest_names_the_archive_it_describes() -> None:
    """deploy/krew/accelsched.yaml carries the sha256 of the reproducible archive hack/krew.py builds, and the
    package's version; the shim it installs runs the same plugin as the entry point."""
    proc = subprocess.run([sys.executable, str(REPO / "hack" / "krew.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load((REPO / "deploy" / "krew" / "accelsched.yaml").read_text())
    assert doc["kind"] == "Plugin" and doc["metadata"]["name"] == "accelsched"
    assert {p["selector"]["matchLabels"]["os"] for p in doc["spec"]["platforms"]} == {"linux", "darwin"}
    shim = subprocess.run(
        ["sh", str(REPO / "deploy" / "krew" / "kubectl-accelsched"), "--help"],
        capture_output=True, text=True, env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
    )  # fmt: skip
    assert shim.returncode == 0, shim.stderr
    assert "explain" in shim.stdout and "map" in shim.stdout and "whatif" in shim.stdout


def test_the_rules_and_the_dashboard_ship_as_the_files_say(helm: Path) -> None:
    docs = render(helm, "metrics.prometheusRule.enabled=true", "metrics.dashboard.enabled=true")
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    assert rule["spec"] == yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())
    dashboard = by_kind(docs, "ConfigMap")["gpu-accelsched-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads((CHART / "files" / "dashboard.json").read_text())
    assert json.loads(dashboard["data"]["accelsched.json"]) == shipped
    assert not [d for d in render(helm) if d["kind"] == "PrometheusRule"]  # off by default
