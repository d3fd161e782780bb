"""Typed views of the Kubernetes objects the scheduler reads, parsed and validated once from YAML dicts.

Every parse error names the file, the object and the field path, so bad input is one clear line.
The raw dict is kept on each object so results can be written back as YAML unchanged but for what we set.

This module is the public face and parses the small kinds (PriorityClass, Namespace); the shared field checks are in
api/object_fields.py, Pods in api/pod_objects.py and Nodes in api/node_objects.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelsched.api.node_objects import (
    Node,
    parse_node,
)
from accelsched.api.object_fields import (
    DEFAULT_SCHEDULER,
    DEVICES_ANNOTATION,
    DO_NOT_SCHEDULE,
    HOSTNAME_LABEL,
    SCHEDULE_ANYWAY,
    _choice,
    _int,
    _str,
    _string_map,
    describe,
    metadata,
    parse_label_selector,
    parse_node_selector_terms,
    parse_quantity,
    parse_requirements,
    parse_resources,
    parse_taints,
    parse_tolerations,
)
from accelsched.api.pod_objects import (
    DEFAULT_BIND_ALL_HOST_IP,
    PORT_PROTOCOLS,
    SCHEDULING_GATED_MESSAGE,
    SCHEDULING_GATED_REASON,
    HostPort,
    NodeImage,
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
    WeightedNodeSelectorTerm,
    WeightedPodAffinityTerm,
    effective_requests,
    normalized_image_name,
    parse_devices_annotation,
    parse_host_ports,
    parse_node_images,
    parse_pod,
    parse_scheduling_gates,
    parse_scheduling_group,
    parse_spread_constraints,
    pod_images,
    writable_copy,
)
from accelsched.errors import InputError, quoted

# ---------------------------------------------------------------------------------------------- small kinds


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"


# Built into every cluster (pkg/apis/scheduling: SystemCriticalPriority = 2e9).
SYSTEM_PRIORITY_CLASSES = {
    "system-cluster-critical": PriorityClass("system-cluster-critical", 2_000_000_000),
    "system-node-critical": PriorityClass("system-node-critical", 2_000_001_000),
}


def parse_priority_class(doc: Mapping[str, Any], source: str = "") -> PriorityClass:
    where, name, _, _ = metadata(doc, source, "PriorityClass", namespaced=False)
    value = _int(where, doc.get("value"), "value")
    if value > 1_000_000_000 and name not in SYSTEM_PRIORITY_CLASSES:
        raise where.error("value", "must be <= 1000000000 for user-defined priority classes")
    gd = doc.get("globalDefault", False)
    if not isinstance(gd, bool):
        raise where.error("globalDefault", f"must be true or false, got {quoted(gd)}")
    policy = _choice(
        where,
        _str(where, doc.get("preemptionPolicy"), "preemptionPolicy", "PreemptLowerPriority"),
        "preemptionPolicy",
        ("PreemptLowerPriority", "Never"),
    )
    return PriorityClass(name, value, gd, policy)


@dataclass(frozen=True)
class Namespace:
    name: str
    labels: tuple[tuple[str, str], ...] = ()

    def label_map(self) -> dict[str, str]:
        return dict(self.labels)


def parse_namespace(doc: Mapping[str, Any], source: str = "") -> Namespace:
    where, name, _, meta = metadata(doc, source, "Namespace", namespaced=False)
    labels = _string_map(where, meta.get("labels"), "metadata.labels")
    labels.setdefault("kubernetes.io/metadata.name", name)
    return Namespace(name, tuple(sorted(labels.items())))


def check_kind(doc: Any, source: str, index: int) -> str:
    """The document's kind, or an InputError naming the document's position in the file."""
    if not isinstance(doc, Mapping):
        raise InputError(f"document {index + 1} is a {type(doc).__name__}, not a Kubernetes object", source=source)
    kind = doc.get("kind")
    if not kind or not isinstance(kind, str):
        name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), Mapping) else None
        obj = f"document {index + 1}" + (f" ({name})" if name else "")
        raise InputError("has no kind", source=source, obj=obj, field="kind")
    return kind


__all__ = [
    "DEFAULT_BIND_ALL_HOST_IP",
    "DEFAULT_SCHEDULER",
    "DEVICES_ANNOTATION",
    "DO_NOT_SCHEDULE",
    "HOSTNAME_LABEL",
    "PORT_PROTOCOLS",
    "SCHEDULE_ANYWAY",
    "SCHEDULING_GATED_MESSAGE",
    "SCHEDULING_GATED_REASON",
    "SYSTEM_PRIORITY_CLASSES",
    "HostPort",
    "Namespace",
    "Node",
    "NodeImage",
    "Pod",
    "PodAffinityTerm",
    "PriorityClass",
    "TopologySpreadConstraint",
    "WeightedNodeSelectorTerm",
    "WeightedPodAffinityTerm",
    "check_kind",
    "describe",
    "effective_requests",
    "metadata",
    "normalized_image_name",
    "parse_devices_annotation",
    "parse_host_ports",
    "parse_label_selector",
    "parse_namespace",
    "parse_node",
    "parse_node_images",
    "parse_node_selector_terms",
    "parse_pod",
    "parse_priority_class",
    "parse_quantity",
    "parse_requirements",
    "parse_resources",
    "parse_scheduling_gates",
    "parse_scheduling_group",
    "parse_spread_constraints",
    "parse_taints",
    "parse_tolerations",
    "pod_images",
    "writable_copy",
]
