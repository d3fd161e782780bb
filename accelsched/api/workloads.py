"""Expand workload controllers (Deployment, Job, DaemonSet, ...) into the Pods their controllers would create.

The scheduler places Pods, but people write Deployments. This module plays the controllers' part once:
it applies the same defaults, names, labels, owner references and (for DaemonSets) the same per-node rules,
so the Pods it hands back are the ones a real cluster would have pending. No randomness and no clock:
generated names come from hashes, so the same input always gives the same Pods.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelsched.api import limits, object_fields, objects
from accelsched.api.selectors import NO_EXECUTE, NO_SCHEDULE, terms_match, untolerated_taint
from accelsched.errors import InputError, Where, quoted

WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet", "ReplicationController")

_API_VERSIONS = {
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ReplicationController": "v1",
    "Job": "batch/v1",
}

# k8s.io/apimachinery/pkg/util/rand: no vowels (no words) and no look-alike characters.
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# names.SimpleNameGenerator: a generateName base is cut so that base + 5 random characters fits in 63.
_MAX_GENERATE_BASE = 58

_JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
_JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
_JOB_INDEX_KEY = "batch.kubernetes.io/job-completion-index"

# util.AddOrUpdateDaemonPodTolerations: daemons survive node problems and cordons.
_DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", NO_EXECUTE),
    ("node.kubernetes.io/unreachable", NO_EXECUTE),
    ("node.kubernetes.io/disk-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/memory-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/pid-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/unschedulable", NO_SCHEDULE),
)
_HOST_NETWORK_TOLERATION = ("node.kubernetes.io/network-unavailable", NO_SCHEDULE)


@dataclass
class _Workload:
    """One workload object, read and validated: what every kind's expansion needs."""

    kind: str
    name: str
    namespace: str
    uid: str
    where: Where
    spec: Mapping[str, Any]
    template: Mapping[str, Any]
    template_spec: Mapping[str, Any]
    labels: dict[str, str]
    annotations: dict[str, str]


def expand(doc: Mapping[str, Any], source: str, nodes: Sequence[objects.Node]) -> list[dict[str, Any]]:
    """The Pod manifests the workload's controller would create. ``nodes`` matters only for DaemonSets."""
    kind = doc.get("kind")
    if kind not in WORKLOAD_KINDS:
        raise InputError(
            f"{quoted(kind)} is not a workload kind ({', '.join(WORKLOAD_KINDS)})", source=source, field="kind"
        )
    w = _read(doc, source, kind)
    if kind == "Deployment":
        return _deployment(w)
    if kind in ("ReplicaSet", "ReplicationController"):
        owner = _owner(kind, w.name, w.uid)
        return _replicated(w, owner, _count(w, "replicas", 1), {})
    if kind == "StatefulSet":
        return _statefulset(w)
    if kind == "Job":
        return _job(w)
    return _daemonset(w, nodes)


# ---------------------------------------------------------------------------------------------- reading


def _read(doc: Mapping[str, Any], source: str, kind: str) -> _Workload:
    where, name, namespace, meta = objects.metadata(doc, source, kind, namespaced=True)
    spec = object_fields._mapping(where, doc.get("spec"), "spec")
    template = spec.get("template")
    if template is None:
        raise where.error("spec.template", "is required")
    template = object_fields._mapping(where, template, "spec.template")
    tmeta = object_fields._mapping(where, template.get("metadata"), "spec.template.metadata")
    probe = _validate_template(where, source, name, namespace, tmeta, template.get("spec"))
    uid = object_fields._str(where, meta.get("uid"), "metadata.uid") or _derived_uid(kind, namespace, name)
    w = _Workload(kind, name, namespace, uid, where, spec, template, template["spec"], probe.labels, probe.annotations)
    _check_restart_policy(w)
    _check_selector(w)
    return w


def _validate_template(
    where: Where, source: str, name: str, namespace: str, tmeta: Mapping[str, Any], tspec: Any
) -> objects.Pod:
    """Parse the template as a Pod so template mistakes fail here, even when no Pod would be created.

    The error is re-raised against the workload and its ``spec.template.`` path: the user wrote a
    Deployment, so "Pod default/web: spec.containers[0]..." would point at something that is not in the file.
    """
    meta = {
        "name": name,
        "namespace": namespace,
        "labels": tmeta.get("labels"),
        "annotations": tmeta.get("annotations"),
    }
    try:
        return objects.parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tspec}, source)
    except InputError as exc:
        field = f"spec.template.{exc.field}" if exc.field else "spec.template"
        raise where.error(field, exc.message) from None


def _check_restart_policy(w: _Workload) -> None:
    """The API server's rule: a Job's pods must end (Never/OnFailure), other controllers' pods must not."""
    policy = w.template_spec.get("restartPolicy")
    path = "spec.template.spec.restartPolicy"
    if w.kind == "Job":
        if policy not in ("Never", "OnFailure"):
            raise w.where.error(path, f"must be Never or OnFailure for a Job, got {quoted(policy)}")
    elif policy not in (None, "Always"):
        raise w.where.error(path, f"must be Always for a {w.kind}, got {quoted(policy)}")


def _check_selector(w: _Workload) -> None:
    """The API server rejects a controller whose selector would not select its own pods."""
    raw = w.spec.get("selector")
    if w.kind == "ReplicationController":
        # A plain map; when absent it defaults to the template's labels.
        selector = object_fields._string_map(w.where, raw, "spec.selector") or dict(w.labels)
        if not selector:
            raise w.where.error("spec.selector", "is required (or spec.template.metadata.labels)")
        matches = all(w.labels.get(k) == v for k, v in selector.items())
    elif w.kind == "Job" and w.spec.get("manualSelector") is not True:
        return  # The API server generates the selector from the controller-uid label.
    else:
        parsed = objects.parse_label_selector(w.where, raw, "spec.selector")
        if parsed is None:
            raise w.where.error("spec.selector", "is required")
        if parsed.empty:
            raise w.where.error("spec.selector", "must not be empty")
        matches = parsed.matches(w.labels)
    if not matches:
        raise w.where.error("spec.selector", "does not match spec.template.metadata.labels")


def _count(w: _Workload, key: str, default: int) -> int:
    """A non-negative count field of the spec (replicas, parallelism, completions), with its API default."""
    value = w.spec.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise w.where.error(f"spec.{key}", f"must be an integer, got {quoted(value)}")
    if value < 0:
        raise w.where.error(f"spec.{key}", f"must be >= 0, got {value}")
    problem = limits.exceeded(key, value, "pods")
    if problem:
        raise w.where.error(f"spec.{key}", problem)
    return value


def _flag(w: _Workload, key: str) -> bool:
    value = w.spec.get(key, False)
    if not isinstance(value, bool):
        raise w.where.error(f"spec.{key}", f"must be true or false, got {quoted(value)}")
    return value


# ------------------------------------------------------------------------------------------- names and pods


def _encode(seed: str, length: int) -> str:
    """``length`` safe-alphabet characters hashed from ``seed``: kubernetes' random suffix, made stable."""
    n = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
    out = []
    for _ in range(length):
        n, i = divmod(n, len(_SAFE_ALPHABET))
        out.append(_SAFE_ALPHABET[i])
    return "".join(out)


def _generate_name(base: str, seed: str, taken: set[str]) -> str:
    """generateName as the API server does it (base cut to 58 characters, plus 5), unique within ``taken``.

    A hash can collide where the real random suffix would be retried, so a clash moves to the next attempt.
    """
    base = base[:_MAX_GENERATE_BASE]
    attempt = 0
    while (name := base + _encode(f"{seed}#{attempt}", 5)) in taken:
        attempt += 1
    taken.add(name)
    return name


def _derived_uid(kind: str, namespace: str, name: str) -> str:
    """A stable stand-in for a uid the API server would assign (the object was never created)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"accelsched:{kind}/{namespace}/{name}"))


def _owner(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": _API_VERSIONS[kind],
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod(
    w: _Workload,
    name: str,
    owner: dict[str, Any],
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """controller.GetPodFromTemplate: the template's labels, annotations and spec, owned by ``owner``."""
    meta: dict[str, Any] = {"name": name, "namespace": w.namespace, "labels": {**w.labels, **labels}}
    all_annotations = {**w.annotations, **(annotations or {})}
    if all_annotations:
        meta["annotations"] = all_annotations
    meta["ownerReferences"] = [dict(owner)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec if spec is not None else copy.deepcopy(dict(w.template_spec)),
    }


# ---------------------------------------------------------------------------------------------- kinds


def _replicated(w: _Workload, owner: dict[str, Any], replicas: int, labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """ReplicaSet and ReplicationController: ``replicas`` interchangeable pods named ``<owner>-xxxxx``."""
    taken: set[str] = set()
    return [
        _pod(w, _generate_name(f"{owner['name']}-", f"{owner['name']}/{i}", taken), owner, labels)
        for i in range(replicas)
    ]


def _deployment(w: _Workload) -> list[dict[str, Any]]:
    """A new Deployment makes one full-size ReplicaSet ``<name>-<pod-template-hash>``, which makes the pods.

    A Deployment created paused gets no ReplicaSet at all (the controller only syncs, it does not roll out).
    """
    replicas = _count(w, "replicas", 1)
    if _flag(w, "paused"):
        replicas = 0
    template_hash = _pod_template_hash(w.template)
    rs_name = f"{w.name}-{template_hash}"
    owner = _owner("ReplicaSet", rs_name, _derived_uid("ReplicaSet", w.namespace, rs_name))
    return _replicated(w, owner, replicas, {"pod-template-hash": template_hash})


def _pod_template_hash(template: Mapping[str, Any]) -> str:
    """The Deployment controller's pod-template-hash: a stable hash of the template, in _SAFE_ALPHABET."""
    return _encode(json.dumps(template, sort_keys=True, default=str), 10)


def _statefulset(w: _Workload) -> list[dict[str, Any]]:
    """Pods ``<name>-<ordinal>`` with stable identities: hostname, subdomain, pod-name/pod-index labels."""
    replicas = _count(w, "replicas", 1)
    ordinals = object_fields._mapping(w.where, w.spec.get("ordinals"), "spec.ordinals")
    start = object_fields._int(w.where, ordinals.get("start"), "spec.ordinals.start", default=0, minimum=0)
    service = object_fields._str(w.where, w.spec.get("serviceName"), "spec.serviceName")
    owner = _owner("StatefulSet", w.name, w.uid)
    pods = []
    for ordinal in range(start, start + replicas):
        name = f"{w.name}-{ordinal}"
        spec = copy.deepcopy(dict(w.template_spec))
        spec["hostname"] = name
        if service:
            spec["subdomain"] = service
        labels = {"statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": str(ordinal)}
        pods.append(_pod(w, name, owner, labels, spec=spec))
    return pods


def _job(w: _Workload) -> list[dict[str, Any]]:
    """The Job's first wave: min(parallelism, completions) pods, none while suspended.

    Indexed Jobs give each pod its completion index (label, annotation, name ``<job>-<i>-xxxxx``, hostname).
    """
    parallelism = _count(w, "parallelism", 1)
    completions = w.spec.get("completions")
    mode = object_fields._str(w.where, w.spec.get("completionMode"), "spec.completionMode", "NonIndexed")
    object_fields._choice(w.where, mode, "spec.completionMode", ("NonIndexed", "Indexed"))
    if mode == "Indexed" and completions is None:
        raise w.where.error("spec.completions", "is required when completionMode is Indexed")
    active = parallelism if completions is None else min(parallelism, _count(w, "completions", 1))
    if _flag(w, "suspend"):
        active = 0
    labels = {key: w.name for key in _JOB_NAME_LABELS} | {key: w.uid for key in _JOB_UID_LABELS}
    owner = _owner("Job", w.name, w.uid)
    taken: set[str] = set()
    pods = []
    for i in range(active):
        if mode == "NonIndexed":
            pods.append(_pod(w, _generate_name(f"{w.name}-", f"{w.name}/{i}", taken), owner, labels))
            continue
        index = {_JOB_INDEX_KEY: str(i)}
        spec = copy.deepcopy(dict(w.template_spec))
        spec["hostname"] = f"{w.name}-{i}"
        # podGenerateNameWithIndex: a long job name is cut, never the index.
        suffix = f"-{i}-"
        name = _generate_name(w.name[: _MAX_GENERATE_BASE - len(suffix)] + suffix, f"{w.name}/{i}", taken)
        pods.append(_pod(w, name, owner, labels | index, index, spec))
    return pods


def _daemonset(w: _Workload, nodes: Sequence[objects.Node]) -> list[dict[str, Any]]:
    """One pod per node the DaemonSet controller would run a daemon on, pinned to it by node affinity."""
    base_spec = dict(w.template_spec)
    base_spec["tolerations"] = _daemon_tolerations(
        base_spec.get("tolerations") or [], host_network=base_spec.get("hostNetwork") is True
    )
    candidate = _validate_template(w.where, w.where.source, w.name, w.namespace, {}, base_spec)
    owner = _owner("DaemonSet", w.name, w.uid)
    taken: set[str] = set()
    pods = []
    for node in nodes:
        if not _should_run_daemon(candidate, node):
            continue
        spec = copy.deepcopy(base_spec)
        spec["affinity"] = _pin_to_node(spec.get("affinity"), node.name)
        pods.append(_pod(w, _generate_name(f"{w.name}-", f"{w.name}/{node.name}", taken), owner, {}, spec=spec))
    return pods


def _daemon_tolerations(tolerations: list[Any], *, host_network: bool) -> list[Any]:
    """util.AddOrUpdateDaemonPodTolerations: add each automatic toleration, or replace one that matches it.

    A template toleration with the same key, operator, value and effect is replaced in place (dropping any
    tolerationSeconds, so the daemon is never evicted for it); identical ones are left alone, not duplicated.
    """
    out = list(tolerations)
    wanted = [*_DAEMON_TOLERATIONS, *([_HOST_NETWORK_TOLERATION] if host_network else [])]
    for key, effect in wanted:
        auto = {"key": key, "operator": "Exists", "effect": effect}
        for i, existing in enumerate(out):
            if isinstance(existing, Mapping) and _same_toleration(existing, auto):
                out[i] = auto
                break
        else:
            out.append(auto)
    return out


def _same_toleration(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """v1.Toleration.MatchToleration: key, operator, value and effect equal (tolerationSeconds ignored)."""
    return all(
        (a.get(f) or d) == (b.get(f) or d)
        for f, d in (("key", ""), ("operator", "Equal"), ("value", ""), ("effect", ""))
    )


def _should_run_daemon(pod: objects.Pod, node: objects.Node) -> bool:
    """NodeShouldRunDaemonPod: nodeName, nodeSelector, required node affinity, NoSchedule/NoExecute taints.

    ``pod`` already carries the automatic tolerations, so cordoned or pressured nodes still get their daemon.
    """
    if pod.node_name and pod.node_name != node.name:
        return False
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.required_node_affinity is not None and not terms_match(pod.required_node_affinity, node.name, node.labels):
        return False
    return untolerated_taint(pod.tolerations, node.taints, (NO_SCHEDULE, NO_EXECUTE)) is None


def _pin_to_node(affinity: Any, node_name: str) -> dict[str, Any]:
    """ReplaceDaemonSetPodNodeNameNodeAffinity: the required terms become one matchFields term, the node name.

    Preferred terms and pod (anti-)affinity stay as they were; the scheduler places the pod as any other.
    """
    affinity = copy.deepcopy(dict(affinity or {}))
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    required["nodeSelectorTerms"] = [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    ]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    return affinity
