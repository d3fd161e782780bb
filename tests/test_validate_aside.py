"""Validation in a forked child (api/validate_aside.py) gives exactly what a sequential load gives."""

from __future__ import annotations

import json
import os
import time

import pytest
import yaml

from accelsched.api import loader, validate_aside
from accelsched.errors import InputError

NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
"""
GOOD_POD = """apiVersion: v1
kind: Pod
metadata: {name: good, namespace: default}
spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}
"""
# Valid for the schema, refused when the objects are built: admission finds no such node.
UNBUILDABLE = """apiVersion: v1
kind: Pod
metadata: {name: lost, namespace: default}
spec: {nodeName: nowhere, containers: [{name: c, image: busybox}]}
"""
# Refused by the schema (and so before anything is built).
MISSPELT = """apiVersion: v1
kind: Pod
metadata: {name: typo, namespace: default, labelss: {a: b}}
spec: {containers: [{name: c, image: busybox}]}
"""


@pytest.fixture(params=["aside", "sequential"])
def mode(request, monkeypatch):
    if request.param == "aside":
        monkeypatch.setattr(validate_aside, "MIN_BYTES", 0)
        if not validate_aside.worthwhile([b" {}"]):
            pytest.skip("no fork or a single CPU here: validation never runs aside")
    else:
        monkeypatch.setenv("ACCELSCHED_VALIDATE_ASIDE", "0")
    return request.param


def write(tmp_path, **files: str) -> list[str]:
    """Each file as kubectl's JSON List (validation goes aside for JSON only)."""
    paths = []
    for name, text in files.items():
        path = tmp_path / f"{name}.json"
        items = [d for d in yaml.safe_load_all(text) if d]
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        paths.append(str(path))
    return paths


def test_valid_input_builds_the_same_objects(tmp_path, mode):
    inputs = loader.load(write(tmp_path, nodes=NODE, pods=GOOD_POD))
    assert [n.name for n in inputs.nodes] == ["n1"]
    assert [(p.key, p.requests) for p in inputs.pods] == [("default/good", {"cpu": 1000})]


def test_a_schema_error_wins_over_a_build_error_in_an_earlier_file(tmp_path, mode):
    # Sequentially every file is validated before any object is built, so the typo in the second file is what
    # is reported, although building the first would already fail.
    paths = write(tmp_path, nodes=NODE + "---\n" + UNBUILDABLE, pods=MISSPELT)
    with pytest.raises(InputError) as err:
        loader.load(paths)
    assert str(err.value).endswith("Pod default/typo: metadata.labelss: unknown field (did you mean labels?)")


def test_a_build_error_stands_when_validation_finds_nothing(tmp_path, mode):
    with pytest.raises(InputError) as err:
        loader.load(write(tmp_path, nodes=NODE, pods=UNBUILDABLE))
    assert "spec.nodeName: node 'nowhere' does not exist in the input" in str(err.value)


def test_a_child_without_a_verdict_is_replaced_by_validating_here():
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    parent = os.getpid()
    calls = []

    def validate_all() -> None:
        if os.getpid() != parent:
            os._exit(9)  # the child dies before it can say anything (as if killed for memory)
        calls.append("here")
        raise InputError("found here", source="f.yaml")

    with pytest.raises(InputError, match="found here"), validate_aside.aside(validate_all, True) as aside:
        assert aside
    assert calls == ["here"]


def test_only_json_goes_aside(monkeypatch):
    # YAML costs libyaml's events to read again, several times what validating it costs.
    monkeypatch.setattr(validate_aside, "MIN_BYTES", 0)
    assert not validate_aside.worthwhile([b"{}", b"apiVersion: v1\nkind: List\n"])


def test_a_body_that_fails_otherwise_leaves_no_child_behind():
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    with pytest.raises(RuntimeError, match="interrupted"), validate_aside.aside(lambda: time.sleep(30), True):
        raise RuntimeError("interrupted")
    with pytest.raises(ChildProcessError):  # killed and reaped: no child left, running or zombie
        os.waitpid(-1, os.WNOHANG)
