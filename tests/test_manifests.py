"""Schema checks for the shipped Kubernetes manifests (deploy/ and examples/).

Every document in every ``*.yaml``/``*.yml`` file under ``deploy/`` and ``examples/``
(recursively, so files added later are picked up without touching this test) is
validated against the Kubernetes OpenAPI schema bundled with kubernetes-validate, in
strict mode (unknown fields are errors). ``kind: List`` documents are expanded.

Kinds the core schema cannot know (scheduler component config, CRDs) are skipped only
when listed in ``CUSTOM_KINDS``; any other unknown kind fails.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError, latest_version, major_minor

REPO = Path(__file__).resolve().parents[1]
MANIFEST_DIRS = ("deploy", "examples")

# Newest Kubernetes version the installed kubernetes-validate ships schemas for.
K8S_VERSION = major_minor(latest_version())

# (API group, kind) of objects that are not core Kubernetes types, so the bundled
# schema cannot validate them. Matched on the group too: kubernetes-validate picks a
# schema by the first label of the group only (scheduling.x-k8s.io -> "scheduling"),
# which would check a coscheduling PodGroup against the unrelated core
# scheduling.k8s.io PodGroup if we let it through.
CUSTOM_KINDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("kubescheduler.config.k8s.io", "KubeSchedulerConfiguration"),
        ("scheduling.x-k8s.io", "PodGroup"),
        ("topology.node.k8s.io", "NodeResourceTopology"),
        ("kueue.x-k8s.io", "Topology"),  # checked against Kueue's own CRD in tests/test_fabric_crd.py
        # the kubectl plugin's krew manifest (deploy/krew), checked by tests/test_chart.py against hack/krew.py
        ("krew.googlecontainertools.github.com", "Plugin"),
        # Kueue's (checked against its CRDs by accelsched's own schema: tests/test_queues_api.py)
        *(("kueue.x-k8s.io", kind) for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort")),
        *(("kueue.x-k8s.io", kind) for kind in ("WorkloadPriorityClass", "Workload")),
        # Kueue's own config file (read by accelsched/queues/config.py, checked in tests/test_queues_fairsharing.py)
        ("config.kueue.x-k8s.io", "Configuration"),
    }
)

DEVICE_PLUGIN_FILE = REPO / "deploy" / "device-plugin-daemonset.yaml"
TENANT_FILE = REPO / "deploy" / "tenant-inference.yaml"
ACCEL = "qualcomm.com/ai-accelerator"
DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"


def _manifest_files() -> list[Path]:
    files: set[Path] = set()
    for d in MANIFEST_DIRS:
        root = REPO / d
        if root.is_dir():
            for pattern in ("*.yaml", "*.yml"):
                files.update(p for p in root.rglob(pattern) if p.is_file())
    return sorted(files)


def _expand(doc: Any) -> list[Any]:
    """A ``kind: List`` document stands for its items; anything else for itself."""
    if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        return [obj for item in doc["items"] for obj in _expand(item)]
    return [doc]


def _load(path: Path) -> list[Any]:
    with path.open(encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    return [obj for d in docs for obj in _expand(d)]


def _describe(obj: Any) -> str:
    if isinstance(obj, dict):
        name = (obj.get("metadata") or {}).get("name", "?")
        return f"{obj.get('kind', '?')}/{name}"
    return type(obj).__name__


def _params() -> list[Any]:
    params = []
    for path in _manifest_files():
        rel = path.relative_to(REPO).as_posix()
        try:
            objs = _load(path)
        except yaml.YAMLError as e:
            # Report a broken file as one failing case instead of a collection error.
            params.append(pytest.param(rel, None, e, id=f"{rel}:unparsable"))
            continue
        for i, obj in enumerate(objs):
            params.append(pytest.param(rel, obj, None, id=f"{rel}#{i}:{_describe(obj)}"))
    return params


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


@pytest.mark.parametrize(("rel", "obj", "load_error"), _params())
def test_manifest_validates_against_k8s_schema(rel: str, obj: Any, load_error: Exception | None) -> None:
    assert load_error is None, f"{rel}: YAML does not parse: {load_error}"
    assert isinstance(obj, dict), f"{rel}: document is a {type(obj).__name__}, not a Kubernetes object"
    assert isinstance(obj.get("apiVersion"), str) and obj["apiVersion"], f"{rel}: {_describe(obj)} lacks apiVersion"
    assert isinstance(obj.get("kind"), str) and obj["kind"], f"{rel}: object lacks kind"
    if (_group(obj["apiVersion"]), obj["kind"]) in CUSTOM_KINDS:
        pytest.skip(f"{obj['apiVersion']} {obj['kind']} is a custom kind outside the core schema")
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except SchemaNotFoundError as e:
        pytest.fail(f"{rel}: {e.message}; if this is a CRD/component-config kind, add it to CUSTOM_KINDS")
    except ValidationError as e:
        path = "/".join(str(p) for p in e.absolute_path)
        pytest.fail(f"{rel}: {_describe(obj)} invalid for Kubernetes {K8S_VERSION} at /{path}: {e.message}")


def test_manifests_are_found() -> None:
    rels = {p.relative_to(REPO).as_posix() for p in _manifest_files()}
    assert {"deploy/device-plugin-daemonset.yaml", "deploy/tenant-inference.yaml"} <= rels


# ---------------------------------------------------------------------------
# Properties the deployment must have, beyond schema validity.


def _one(path: Path, kind: str, name: str) -> dict[str, Any]:
    found = [
        o
        for o in _load(path)
        if isinstance(o, dict) and o.get("kind") == kind and (o.get("metadata") or {}).get("name") == name
    ]
    assert len(found) == 1, f"expected exactly one {kind}/{name} in {path.name}, found {len(found)}"
    return found[0]


@pytest.fixture
def daemonset() -> dict[str, Any]:
    return _one(DEVICE_PLUGIN_FILE, "DaemonSet", "accelsched-device-plugin")


@pytest.fixture
def deployment() -> dict[str, Any]:
    return _one(TENANT_FILE, "Deployment", "infer")


def _container(pod_spec: dict[str, Any], name: str) -> dict[str, Any]:
    found = [c for c in pod_spec.get("containers", []) if c.get("name") == name]
    assert len(found) == 1, f"expected one container {name!r}"
    return found[0]


def test_device_plugin_tolerates_every_taint(daemonset: dict[str, Any]) -> None:
    tolerations = daemonset["spec"]["template"]["spec"].get("tolerations") or []
    # Empty key + operator Exists matches every key; empty effect matches every effect.
    assert any(t.get("operator") == "Exists" and not t.get("key") and not t.get("effect") for t in tolerations), (
        f"no match-everything toleration in {tolerations}"
    )


def test_device_plugin_runs_unprivileged_with_a_read_only_root(daemonset: dict[str, Any]) -> None:
    # It reads sysfs and serves unix sockets in a hostPath: no privilege, no capability, nothing to write but those.
    pod = daemonset["spec"]["template"]["spec"]
    c = _container(pod, "device-plugin")
    sc = c.get("securityContext") or {}
    assert not sc.get("privileged")
    assert sc.get("allowPrivilegeEscalation") is False
    assert sc.get("readOnlyRootFilesystem") is True
    assert (sc.get("capabilities") or {}).get("drop") == ["ALL"]
    assert not (sc.get("capabilities") or {}).get("add")
    sys_mounts = [m for m in c.get("volumeMounts", []) if m.get("mountPath") == "/host/sys"]
    assert len(sys_mounts) == 1 and sys_mounts[0].get("readOnly") is True
    # Nothing the plugin reads but its own node's name (downward API): it writes that Node's healthy device IDs.
    assert c.get("env") == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]


def test_device_plugin_mounts_kubelet_socket_dir_from_host(daemonset: dict[str, Any]) -> None:
    pod = daemonset["spec"]["template"]["spec"]
    c = _container(pod, "device-plugin")
    mounts = [m for m in c.get("volumeMounts", []) if m.get("mountPath") == DEVICE_PLUGIN_DIR]
    assert len(mounts) == 1, f"{DEVICE_PLUGIN_DIR} is not mounted"
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    vol = volumes.get(mounts[0]["name"])
    assert vol is not None, f"volume {mounts[0]['name']!r} is not declared"
    assert (vol.get("hostPath") or {}).get("path") == DEVICE_PLUGIN_DIR


def test_tenant_requests_one_accelerator(deployment: dict[str, Any]) -> None:
    c = _container(deployment["spec"]["template"]["spec"], "server")
    resources = c.get("resources") or {}
    # Extended resources cannot be overcommitted: request and limit must both be 1.
    assert str((resources.get("requests") or {}).get(ACCEL)) == "1"
    assert str((resources.get("limits") or {}).get(ACCEL)) == "1"


def test_tenant_requires_anti_affinity_across_pdus(deployment: dict[str, Any]) -> None:
    template = deployment["spec"]["template"]
    anti = ((template["spec"].get("affinity") or {}).get("podAntiAffinity")) or {}
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    pdu_terms = [t for t in terms if t.get("topologyKey") == "accelsched.io/pdu"]
    assert pdu_terms, f"no required anti-affinity term on accelsched.io/pdu in {terms}"
    # The term must select the replicas themselves, or it does not spread them.
    labels = template["metadata"]["labels"]
    selector = pdu_terms[0].get("labelSelector") or {}
    assert selector.get("matchLabels") == {"app": "infer"}
    assert labels.get("app") == "infer"


def test_validator_rejects_unknown_container_field(daemonset: dict[str, Any]) -> None:
    # The unmodified object passes, so the failure below is due to the injected field alone.
    kubernetes_validate.validate(daemonset, K8S_VERSION, strict=True)
    broken = copy.deepcopy(daemonset)
    broken["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    with pytest.raises(ValidationError) as exc:
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)
    assert "imagePullPolcy" in exc.value.message
