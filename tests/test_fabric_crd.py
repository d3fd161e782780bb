"""fabric.levels checks a Topology with the rules of Kueue's own CRD (v0.19.2, read from the Go module cache):
the same pattern, lengths, item counts and CEL messages, and the lab's Topology validates against its schema.
Skipped where Go or the module is absent (``go mod download sigs.k8s.io/kueue@v0.19.2`` fetches it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from accelsched.fabric import levels

KUEUE = "sigs.k8s.io/kueue@v0.19.2"
CRD = "config/components/crd/bases/kueue.x-k8s.io_topologies.yaml"
LAB = Path(__file__).resolve().parents[1] / "examples" / "lab" / "12-fabric-nodes.yaml"


def kueue_crd_versions(crd: str) -> dict:
    """Version name -> openAPIV3Schema of one of Kueue's CRDs (``crd``: its path in the module); the test is skipped
    where Go or the module is absent."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no go toolchain")
    cache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    path = Path(cache) / KUEUE / crd
    if not path.is_file():
        pytest.skip(f"{KUEUE} is not in the module cache")
    doc = yaml.safe_load(path.read_text())
    return {v["name"]: v["schema"]["openAPIV3Schema"] for v in doc["spec"]["versions"]}


@pytest.fixture(scope="module")
def versions() -> dict:
    return kueue_crd_versions(CRD)


def levels_schema(schema: dict) -> dict:
    return schema["properties"]["spec"]["properties"]["levels"]


def test_the_rules_are_the_crds(versions):
    assert set(versions) == {"v1beta1", "v1beta2"}
    for schema in versions.values():
        spec = levels_schema(schema)
        label = spec["items"]["properties"]["nodeLabel"]
        assert label["pattern"] == levels.NODE_LABEL_PATTERN
        assert (label["minLength"], label["maxLength"]) == (1, levels.MAX_LABEL_LENGTH)
        assert (spec["minItems"], spec["maxItems"]) == (1, levels.MAX_LEVELS)
        messages = {" ".join(rule["message"].split()) for rule in spec["x-kubernetes-validations"]}
        assert {levels.UNIQUE, levels.HOSTNAME_LOWEST} <= messages


def test_the_lab_topology_is_valid_for_the_crd_and_for_us(versions):
    lab = yaml.safe_load(LAB.read_text())
    (topology,) = [o for o in lab["items"] if o["kind"] == "Topology"]
    jsonschema.validate(topology, versions["v1beta2"])
    assert levels.parse_topology(topology).levels == (
        "cloud.provider.com/topology-block",
        "nvidia.com/gpu.clique",
        "kubernetes.io/hostname",
    )


@pytest.mark.parametrize("label", ["cloud.provider.com/topology-rack", "rack", "a/b", "Rack", "x" * 63])
def test_labels_the_crd_accepts_are_accepted(versions, label):
    pattern = levels_schema(versions["v1beta2"])["items"]["properties"]["nodeLabel"]["pattern"]
    assert re.match(pattern, label)
    assert levels.parse_topology(
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
         "spec": {"levels": [{"nodeLabel": label}]}}
    ).levels == (label,)  # fmt: skip
