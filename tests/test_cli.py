"""The CLI contract (design.md): JSON shape, exit codes, and one-line errors naming file, object and field."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from accelsched.cli import main

ROOT = Path(__file__).resolve().parent.parent
NODES = str(ROOT / "examples/lab/00-nodes.yaml")
TENANT = str(ROOT / "deploy/tenant-inference.yaml")

POD = """
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec:
  containers:
    - name: c
      resources: {requests: {cpu: "1", qualcomm.com/ai-accelerator: "1"}, limits: {qualcomm.com/ai-accelerator: "1"}}
"""


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def write(tmp_path: Path, text: str, name: str = "in.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_json_output_is_the_design_contract():
    result = run("schedule", "-f", NODES, "-f", TENANT, "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert set(out) == {"pods", "nodes"}
    for pod in out["pods"]:  # per-node reasons only with --reasons (they grow with Pending pods x nodes)
        assert set(pod) == {"namespace", "name", "node", "devices", "message"}
    assert [n["name"] for n in out["nodes"]] == ["node-a", "node-b", "node-c", "node-d"]
    assert all(set(n) == {"name", "allocatable", "requested"} for n in out["nodes"])
    placed = [p for p in out["pods"] if p["node"]]
    assert len(placed) == 2 and all(len(p["devices"]["qualcomm.com/ai-accelerator"]) == 1 for p in placed)
    (pending,) = [p for p in out["pods"] if not p["node"]]
    assert pending["message"].startswith("0/4 nodes are available:")
    requested = {n["name"]: n["requested"].get("qualcomm.com/ai-accelerator", "0") for n in out["nodes"]}
    assert sorted(requested.values()) == ["0", "0", "1", "1"]


def test_json_reasons_adds_each_rejected_node_and_agrees_with_the_message():
    plain = json.loads(run("schedule", "-f", NODES, "-f", TENANT, "-o", "json").output)
    result = run("schedule", "-f", NODES, "-f", TENANT, "-o", "json", "--reasons")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert [{k: v for k, v in p.items() if k != "reasons"} for p in out["pods"]] == plain["pods"]
    assert all(p["reasons"] == {} for p in out["pods"] if p["node"])
    (pending,) = [p for p in out["pods"] if not p["node"]]
    assert pending["reasons"]["node-c"] == ["node(s) had untolerated taint(s)"]
    # The message's histogram counts exactly the per-node reasons.
    counts = Counter(reason for why in pending["reasons"].values() for reason in why)
    histogram = pending["message"].split(": ", 1)[1].split(". ")[0].rstrip(".")
    assert sorted(f"{n} {reason}" for reason, n in counts.items()) == sorted(histogram.split(", "))


def test_yaml_output_sets_node_name_and_conditions():
    result = run("schedule", "-f", NODES, "-f", TENANT, "-o", "yaml")
    assert result.exit_code == 0
    doc = yaml.safe_load(result.output)
    assert doc["kind"] == "List"
    bound = [p for p in doc["items"] if p["spec"].get("nodeName")]
    assert len(bound) == 2
    assert all("accelsched.io/devices" in p["metadata"]["annotations"] for p in bound)
    pending = [p for p in doc["items"] if not p["spec"].get("nodeName")]
    (cond,) = pending[0]["status"]["conditions"]
    assert cond["reason"] == "Unschedulable" and cond["status"] == "False"


def test_table_output_names_pods_and_nodes():
    result = run("schedule", "-f", NODES, "-f", TENANT)
    assert result.exit_code == 0
    assert "node-a" in result.output and "Pending" in result.output


def test_explain_names_the_fix(tmp_path):
    pod = write(tmp_path, POD.replace("p1", "big").replace('ai-accelerator: "1"', 'ai-accelerator: "6"'))
    result = run("explain", "big", "-f", NODES, "-f", pod, "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["node"] is None
    nodes = {n["node"]: n for n in out["nodes"]}
    assert nodes["node-c"]["filter"] == "TaintToleration"
    assert "tolerate maintenance=true:NoSchedule would make node-c feasible" in nodes["node-c"]["remedies"]
    assert nodes["node-a"]["filter"] == "NodeResourcesFit"
    assert any("2 short" in d for d in nodes["node-a"]["details"])


def test_a_resource_no_node_advertises_is_pending_not_bad_input(tmp_path):
    """kube-scheduler keeps such a pod Pending with ``Insufficient <resource>`` on every node (fitsRequest: the
    node's allocatable of it is 0); the message below is written from the v1.36.3 source."""
    pod = write(tmp_path, POD.replace("qualcomm.com/ai-accelerator", "qualcomm.com/ai-accelerators"))
    result = run("schedule", "-f", NODES, "-f", pod, "-o", "json")
    assert result.exit_code == 0, result.output
    (p1,) = [p for p in json.loads(result.output)["pods"] if p["name"] == "p1"]
    assert p1["node"] is None
    assert p1["message"] == (
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 Insufficient qualcomm.com/ai-accelerators. "
        "no new claims to deallocate, "
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    )
    result = run("explain", "p1", "-f", NODES, "-f", pod, "-o", "json")
    assert result.exit_code == 0, result.output
    notes = json.loads(result.output)["notes"]
    assert notes == ["no node advertises qualcomm.com/ai-accelerators; nodes advertise qualcomm.com/ai-accelerator"]
    table = run("explain", "p1", "-f", NODES, "-f", pod)
    assert "no node advertises qualcomm.com/ai-accelerators; nodes advertise qualcomm.com/ai-accelerator" in (
        " ".join(table.output.split())
    )


def test_explain_of_a_scheduled_pod_shows_scores(tmp_path):
    result = run("explain", "p1", "-f", NODES, "-f", write(tmp_path, POD), "-o", "json")
    out = json.loads(result.output)
    assert out["node"] in {"node-a", "node-b", "node-d"}
    feasible = [n for n in out["nodes"] if n["feasible"]]
    assert len(feasible) == 3 and all("NodeResourcesFit" in n["scores"] for n in feasible)


BAD_INPUTS = {
    "malformed yaml": ("kind: Pod\nmetadata: {name: [x\n", "malformed YAML"),
    "no kind": ("apiVersion: v1\nmetadata: {name: x}\n", "has no kind"),
    "negative quantity": (
        POD.replace('cpu: "1"', 'cpu: "-2"'),
        "Pod default/p1: spec.containers[0].resources.requests[cpu]",
    ),
    "unparsable quantity": (POD.replace('cpu: "1"', "cpu: 2 cores"), "spec.containers[0].resources.requests[cpu]"),
    "unknown node": (
        POD.replace("spec:\n", "spec:\n  nodeName: node-z\n"),
        "spec.nodeName: node 'node-z' does not exist",
    ),
    "duplicate name": (POD + "---\n" + POD, "duplicate object"),
    "bad taint effect": (
        # (not ``name: n``: kubectl's go-yaml reads an unquoted n as false)
        "apiVersion: v1\nkind: Node\nmetadata: {name: n0}\nspec: {taints: [{key: k, effect: Sometimes}]}\n",
        "Node n0: spec.taints[0].effect",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2(tmp_path, case):
    text, expected = BAD_INPUTS[case]
    path = write(tmp_path, text)
    result = run("schedule", "-f", NODES, "-f", path)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert expected in lines[0]
    assert "Traceback" not in result.output
    if case not in ("malformed yaml",):
        assert path in lines[0]


def test_bad_config_is_exit_2(tmp_path):
    config = write(
        tmp_path,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles: [{schedulerName: default-scheduler, plugins: {score: {enabled: [{name: NoSuchPlugin}]}}}]\n",
        "config.yaml",
    )
    result = run("schedule", "-f", NODES, "--config", config)
    assert result.exit_code == 2
    assert "unknown plugin 'NoSuchPlugin'" in result.output


@pytest.mark.parametrize("module", ["accelsched.cli", "accelsched"])
def test_installed_entry_point_exits_2_without_traceback(tmp_path, module):
    path = write(tmp_path, "kind: Pod\nmetadata: {name: [x\n")
    proc = subprocess.run(
        [sys.executable, "-m", module, "schedule", "-f", path], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"accelsched: error: {path}: malformed YAML")
    assert "Traceback" not in proc.stderr
