"""What ``schedule -o json|yaml`` and ``explain`` print for pods with DRA claims: the design.md contract's ``claims``
entry, the ResourceClaims as the API would hold them after PreBind, and the device-level explanation in JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from accelsched.cli import main

LAB = Path(__file__).resolve().parent.parent / "examples" / "lab"
DRA_FILES = ("11-dra-nodes.yaml", "11-dra-slices.yaml", "11-dra-claims.yaml")
PLAIN_POD = """
apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: default}
spec:
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
"""


def run(*args: str, extra: str | None = None, tmp_path: Path | None = None) -> str:
    files = [a for name in DRA_FILES for a in ("-f", str(LAB / name))]
    if extra is not None:
        assert tmp_path is not None
        path = tmp_path / "extra.yaml"
        path.write_text(extra)
        files += ["-f", str(path)]
    result = CliRunner().invoke(main, [*args, *files])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def scheduled() -> dict:
    return json.loads(run("schedule", "-o", "json"))


def test_json_claims_follow_the_contract(scheduled):
    pods = {p["name"]: p for p in scheduled["pods"]}
    bound, pending = pods["train-dra-a"], pods["train-dra-b"]
    (claim,) = bound["claims"]
    assert list(claim) == ["name", "resourceClaimName", "results"]
    assert claim["name"] == "net-accel"
    assert claim["resourceClaimName"].startswith("train-dra-a-net-accel-")
    assert [list(r) for r in claim["results"]] == [["request", "driver", "pool", "device"]] * 3
    assert [(r["request"], r["driver"], r["pool"]) for r in claim["results"]] == [
        ("accel", "dra.accelsched.io", "node-p"),
        ("accel", "dra.accelsched.io", "node-p"),
        ("nic", "dra.accelsched.io", "node-p"),
    ]
    assert bound["node"] == "node-p" and bound["devices"] == {}  # DRA devices are not device-plugin devices
    # Pending: the claim the resourceclaim controller made for it, nothing allocated.
    (unallocated,) = pending["claims"]
    assert unallocated["resourceClaimName"].startswith("train-dra-b-net-accel-") and unallocated["results"] == []
    assert pending["node"] is None and "cannot allocate all claims" in pending["message"]


def test_json_pods_without_claims_carry_no_claims_key(tmp_path):
    out = json.loads(run("schedule", "-o", "json", extra=PLAIN_POD, tmp_path=tmp_path))
    plain = next(p for p in out["pods"] if p["name"] == "plain")
    assert "claims" not in plain and plain["node"] in ("node-p", "node-q")


def test_yaml_prints_the_pods_then_the_claims_as_the_api_holds_them(scheduled):
    items = yaml.safe_load(run("schedule", "-o", "yaml"))["items"]
    assert [i["kind"] for i in items] == ["Pod", "Pod", "ResourceClaim", "ResourceClaim"]
    pods = {i["metadata"]["name"]: i for i in items if i["kind"] == "Pod"}
    claims = {i["metadata"]["name"]: i for i in items if i["kind"] == "ResourceClaim"}
    bound = next(p for p in scheduled["pods"] if p["name"] == "train-dra-a")
    name = bound["claims"][0]["resourceClaimName"]
    assert pods["train-dra-a"]["spec"]["nodeName"] == "node-p"
    assert pods["train-dra-a"]["status"]["resourceClaimStatuses"] == [{"name": "net-accel", "resourceClaimName": name}]
    claim = claims[name]
    assert claim["apiVersion"] == "resource.k8s.io/v1"
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/pod-claim-name": "net-accel"}
    allocation = claim["status"]["allocation"]
    assert allocation["devices"]["results"] == bound["claims"][0]["results"]
    assert allocation["nodeSelector"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-p"]}]}]
    }
    (consumer,) = claim["status"]["reservedFor"]
    assert consumer["resource"] == "pods" and consumer["name"] == "train-dra-a" and "uid" in consumer
    pending = next(c for n, c in claims.items() if n.startswith("train-dra-b-"))
    assert "status" not in pending and "finalizers" not in pending["metadata"]
    assert pods["train-dra-b"]["status"]["conditions"][-1]["reason"] == "Unschedulable"


def test_explain_json_carries_the_device_funnel_per_node_and_the_summary_notes():
    out = json.loads(run("explain", "train-dra-b", "-o", "json"))
    assert out["notes"][0].startswith("claim default/train-dra-b-net-accel-")
    assert "request accel (2 of accelerator.accelsched.io): 8 devices of the class on 2 nodes" in out["notes"][0]
    nodes = {n["node"]: n for n in out["nodes"]}
    accel, nic = nodes["node-p"]["claims"]
    assert (accel["request"], accel["needed"], accel["ofClass"], accel["matching"]) == ("accel", 2, 4, 4)
    assert sorted(accel["free"]) == ["node-p/accel-0000-81-00-0", "node-p/accel-0000-82-00-0"]
    assert list(nic["allocated"].values()) == [1] and nic["free"] == []
    assert nodes["node-q"]["remedies"] == ["1 more accel device with pcieRoot pci0000:00 would make node-q feasible"]
    assert nodes["node-p"]["filter"] == "DynamicResources"


def test_explain_names_a_missing_device_class_and_a_missing_claim(tmp_path):
    extra = """
apiVersion: v1
kind: List
items:
  - apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: typo, namespace: default}
    spec:
      devices:
        requests: [{name: gpu, exactly: {deviceClassName: acclerator.accelsched.io}}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: wants-typo, namespace: default}
    spec:
      resourceClaims: [{name: gpu, resourceClaimName: typo}]
      containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: wants-nothing, namespace: default}
    spec:
      resourceClaims: [{name: gpu, resourceClaimName: not-there}]
      containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
"""
    typo = json.loads(run("explain", "wants-typo", "-o", "json", extra=extra, tmp_path=tmp_path))
    assert typo["node"] is None
    assert (
        "claim default/typo, request gpu: device class acclerator.accelsched.io does not exist; did you mean "
        "accelerator.accelsched.io?"
    ) in typo["notes"]
    missing = json.loads(run("explain", "wants-nothing", "-o", "json", extra=extra, tmp_path=tmp_path))
    assert missing["node"] is None
    assert (
        "claim default/not-there (the pod's gpu) does not exist: the pod waits until it is created" in missing["notes"]
    )
