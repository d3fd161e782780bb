"""`kubectl accelsched ...` through a real kubectl v1.36.3 (built from the pinned module) against the test API server.

kubectl finds ``kubectl-accelsched`` (the package's entry point) on PATH and hands it the rest of the command line;
the plugin reads the cluster of the kubeconfig context as kubectl does (-n, --context, -A) and writes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import prereqs
import pytest
import yaml
from conftest import ACCELERATOR, KubeContext
from livekit import accel_pod

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent  # kubectl-accelsched and accelsched, installed with the package


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prereqs.built_binary("kubectl", "kubectl", tmp_path_factory.mktemp("kubectl") / "build.log")


def _run(cmd: list[str], kubeconfig: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "KUBECONFIG": str(kubeconfig)}
    environ.update(env)
    return subprocess.run(cmd, env=environ, capture_output=True, text=True, timeout=120, check=False)


def _with_tenant_context(kubeconfig: Path, namespace: str, out: Path) -> Path:
    """The admin kubeconfig plus a context "tenant" whose namespace is ``namespace`` (not the current one)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    current = next(c for c in doc["contexts"] if c["name"] == doc["current-context"])
    doc["contexts"].append({"name": "tenant", "context": {**current["context"], "namespace": namespace}})
    out.write_text(yaml.safe_dump(doc))
    return out


def _pods(kube: KubeContext) -> dict[str, Any]:
    return {p.metadata.name: p.spec.node_name for p in kube.core.list_namespaced_pod(kube.namespace).items}


def test_kubectl_runs_the_plugin_read_only(kube: KubeContext, kubectl: Path, tmp_path: Path) -> None:
    ns = kube.namespace
    kube.make_node("node-a", {"accelsched.io/rack": "r1"}, capacity={ACCELERATOR: 4})
    kube.make_node("node-b", {"accelsched.io/rack": "r1"}, capacity={ACCELERATOR: 4}, unschedulable=True)
    small = accel_pod("small", ns, 2)
    small["spec"]["nodeName"] = "node-a"  # bound, as if scheduled
    kube.core.create_namespaced_pod(ns, small)
    kube.core.create_namespaced_pod(ns, accel_pod("big", ns, 8))
    before = _pods(kube)
    config = _with_tenant_context(kube.kubeconfig, ns, tmp_path / "kubeconfig")

    listed = _run([str(kubectl), "plugin", "list"], config)
    assert f"{BIN}/kubectl-accelsched" in listed.stdout, listed.stdout + listed.stderr

    # explain: -n, then the --context's namespace; the same explanation as `accelsched explain --from-cluster`
    by_flag = _run([str(kubectl), "accelsched", "explain", "big", "-n", ns, "-o", "json"], config)
    assert by_flag.returncode == 0, by_flag.stderr
    reference = _run(
        [str(BIN / "accelsched"), "explain", f"{ns}/big", "--kubeconfig", str(config), "-o", "json"], config
    )
    assert reference.returncode == 0, reference.stderr
    assert json.loads(by_flag.stdout) == json.loads(reference.stdout)
    message = json.loads(by_flag.stdout)["message"]
    assert message.startswith("0/2 nodes are available:"), message
    by_context = _run([str(kubectl), "accelsched", "explain", "big", "--context", "tenant"], config)
    assert by_context.returncode == 0, by_context.stderr
    assert f"{ns}/big stays Pending" in by_context.stdout
    assert "node(s) were unschedulable" in by_context.stdout
    # the current context's namespace is "default": no such pod there, a clear error and exit 2
    wrong = _run([str(kubectl), "accelsched", "explain", "big"], config)
    assert wrong.returncode == 2
    assert 'pods "big" not found in namespace default' in wrong.stderr
    assert "Traceback" not in wrong.stderr

    # map: devices, used and free per node, holders; the cordoned node flagged
    shown = _run([str(kubectl), "accelsched", "map", "-o", "json"], config)
    assert shown.returncode == 0, shown.stderr
    rows = {r["node"].split(" ")[0]: r for r in json.loads(shown.stdout)["nodes"]}
    assert rows["node-a"]["used"] == 2 and rows["node-a"]["free"] == 2
    assert rows["node-a"]["holders"] == f"{ns}/small x2"
    assert rows["node-a"]["group"] == "r1"
    assert rows["node-b"]["used"] == 0 and "cordoned" in rows["node-b"]["node"]
    table = _run([str(kubectl), "accelsched", "map", "-n", "default"], config)
    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split() == ["NODE", "RACK", "DEVICES", "USED", "FREE", "HOLDERS"]
    assert any(line.startswith("node-a") and line.rstrip().endswith("other x2") for line in lines), table.stdout

    # whatif drain: the bound pod loses its place (node-b is cordoned, the rest too small); nothing written
    drained = _run([str(kubectl), "accelsched", "whatif", "drain", "node-a", "-o", "json"], config)
    assert drained.returncode == 0, drained.stderr
    result = json.loads(drained.stdout)
    assert [e["pod"] for e in result["lost"]] == [f"{ns}/small"]
    assert result["readOnly"] == "What-if only: nothing is written to the cluster."
    missing = _run([str(kubectl), "accelsched", "whatif", "drain", "node-z"], config)
    assert missing.returncode == 2 and "node-z" in missing.stderr, missing.stderr
    assert _pods(kube) == before
    assert kube.core.read_node("node-a").spec.unschedulable in (None, False)
