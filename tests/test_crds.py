"""The custom objects accelsched reads (PodGroup, NodeResourceTopology) against the CRDs shipped in deploy/crds.

test_manifests.py validates core kinds and the CRD manifests themselves; it cannot know a PodGroup's schema. Here
every PodGroup and NodeResourceTopology in deploy/ and examples/, and what ``accelsched topology -o nrt`` renders,
is checked offline against the CRD's openAPIV3Schema, strictly (an unknown field is an error, as the API server's
``fieldValidation=Strict`` makes it). tests/live/test_controlplane.py applies the same objects to a real API server.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import sysfs_builder as sb
from test_manifests import REPO, _describe, _group, _load, _manifest_files

from accelsched.topology.render import to_nrt
from accelsched.topology.sysfs import discover

CRD_DIR = REPO / "deploy" / "crds"


def _strict(schema: Any) -> Any:
    """The schema with every object that lists its properties closed to others (metadata, listing none, stays
    open, as the API server validates ObjectMeta itself)."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items() if k != "properties"}
    if "properties" in schema:  # its keys are field names, not keywords: only the schemas under them are walked
        out["properties"] = {name: _strict(s) for name, s in schema["properties"].items()}
        out.setdefault("additionalProperties", False)
    return out


def _crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> strict schema, for every served version of every CRD in deploy/crds."""
    schemas = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for crd in _load(path):
            spec = crd["spec"]
            for version in spec["versions"]:
                if version.get("served"):
                    key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                    schemas[key] = _strict(version["schema"]["openAPIV3Schema"])
    return schemas


SCHEMAS = _crd_schemas()
CUSTOM_GROUPS = {(_group(api_version), kind) for api_version, kind in SCHEMAS}


def _validate(obj: dict[str, Any]) -> None:
    schema = SCHEMAS.get((obj.get("apiVersion"), obj.get("kind")))
    assert schema is not None, f"{_describe(obj)}: no served CRD version for apiVersion {obj.get('apiVersion')!r}"
    jsonschema.validate(obj, schema)


def _custom_objects() -> list[Any]:
    params = []
    for path in _manifest_files():
        if path.parent == CRD_DIR:
            continue
        rel = path.relative_to(REPO).as_posix()
        for i, obj in enumerate(_load(path)):
            if isinstance(obj, dict) and (_group(str(obj.get("apiVersion", ""))), obj.get("kind")) in CUSTOM_GROUPS:
                params.append(pytest.param(obj, id=f"{rel}#{i}:{_describe(obj)}"))
    return params


def test_crds_define_the_kinds_accelsched_reads() -> None:
    assert ("scheduling.x-k8s.io/v1alpha1", "PodGroup") in SCHEMAS
    assert ("topology.node.k8s.io/v1alpha2", "NodeResourceTopology") in SCHEMAS
    for path in CRD_DIR.glob("*.yaml"):
        for crd in _load(path):
            storage = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]
            assert len(storage) == 1, f"{path.name}: exactly one storage version, got {storage}"


@pytest.mark.parametrize("obj", _custom_objects())
def test_shipped_custom_objects_validate_against_their_crd(obj: dict[str, Any]) -> None:
    _validate(obj)


def test_shipped_manifests_include_podgroups() -> None:
    assert any(p.values[0]["kind"] == "PodGroup" for p in _custom_objects())


def test_rendered_nrt_validates_against_the_crd(tmp_path: Path) -> None:
    topo = discover(sb.dgx_like(tmp_path))
    _validate(to_nrt(topo, "dgx-1", "nvidia.com/gpu", "single-numa-node", "pod"))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda pg: pg["spec"].update(minMember="four"), "'four' is not of type 'integer'"),
        (lambda pg: pg["spec"].update(minMembers=4), "'minMembers' was unexpected"),
        (lambda pg: pg["spec"].update(minResources={"cpu": "lots"}), "'lots'"),
    ],
    ids=["wrong-type", "unknown-field", "bad-quantity"],
)
def test_malformed_podgroup_is_rejected(edit: Any, message: str) -> None:
    pg = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g"},
        "spec": {"minMember": 4, "scheduleTimeoutSeconds": 60},
    }
    _validate(pg)  # the unedited group passes, so the failure below is the edit's
    broken = copy.deepcopy(pg)
    edit(broken)
    with pytest.raises(jsonschema.ValidationError, match=message):
        _validate(broken)
