"""A conformance scenario: plain Kubernetes objects (what both schedulers read) plus the scheduler config group.

A scenario is written with canonical names (``node-0``, namespace ``ns-main``, ``pv-0``...) so recorded cases read
well and shrink well. Each real run renames every cluster-scoped name and namespace to unique ones (nodes are
cluster-scoped and the next scenario must not see this one's), by replacing exact string values: names were
chosen so that a value equal to a node name is always that node (its hostname label, a PV's node affinity).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

MAIN_NAMESPACE = "ns-main"
# Kinds whose object names are cluster-scoped and get a unique prefix per real run (PriorityClasses are shared:
# they are the same in every scenario and created once).
RENAMED_CLUSTER_KINDS = ("Node", "PersistentVolume", "StorageClass", "CSINode", "Namespace", "DeviceClass",
                         "ResourceSlice")
NAMESPACED_KINDS = ("Pod", "PersistentVolumeClaim", "CSIStorageCapacity", "ResourceClaim", "ResourceClaimTemplate")
# The order objects are created in on the real cluster (and listed in a case file).
KIND_ORDER = (
    "PriorityClass",
    "RuntimeClass",
    "Namespace",
    "StorageClass",
    "CSIDriver",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CSIStorageCapacity",
    "CSINode",
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "Node",
    "Pod",
)


@dataclass
class Scenario:
    """Objects to create, then ``pending`` pods to schedule one after another, under scheduler config ``config``."""

    klass: str
    config: str = "default"
    objects: list[JSON] = field(default_factory=list)  # everything but the pending pods, bound pods included
    pending: list[JSON] = field(default_factory=list)  # in the order they are created (and scheduled)
    seed: int = 0

    def copy(self) -> Scenario:
        return Scenario(self.klass, self.config, copy.deepcopy(self.objects), copy.deepcopy(self.pending), self.seed)

    @property
    def nodes(self) -> list[JSON]:
        return [o for o in self.objects if o["kind"] == "Node"]

    @property
    def bound(self) -> list[JSON]:
        return [o for o in self.objects if o["kind"] == "Pod"]

    def of_kind(self, kind: str) -> list[JSON]:
        return [o for o in self.objects if o["kind"] == kind]

    def documents(self) -> list[JSON]:
        """All objects in creation order, the pending pods last (in their order): what accelsched reads."""
        rank = {k: i for i, k in enumerate(KIND_ORDER)}
        return sorted(self.objects, key=lambda o: rank.get(o["kind"], len(rank))) + self.pending

    def digest(self) -> str:
        text = json.dumps([self.config, self.documents()], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:10]


def key(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta['name']}" if meta.get("namespace") else meta["name"]


def renaming(scenario: Scenario, prefix: str) -> dict[str, str]:
    """canonical -> unique name for every renamed cluster-scoped object and namespace of the scenario."""
    names: dict[str, str] = {}
    for obj in scenario.objects:
        if obj["kind"] in RENAMED_CLUSTER_KINDS:
            name = obj["metadata"]["name"]
            names[name] = f"{prefix}-{name}"
        if obj["kind"] == "ResourceSlice":
            # DRA pools are cluster-wide (driver, pool name): a unique pool name per run keeps another scenario's
            # slices out (a lagging delete, a network-attached pool); one prefix for all keeps their sort order.
            pool = obj["spec"]["pool"]["name"]
            names.setdefault(pool, f"{prefix}-{pool}")
    for obj in [*scenario.objects, *scenario.pending]:
        ns = (obj.get("metadata") or {}).get("namespace")
        if ns:
            names.setdefault(ns, f"{prefix}-{ns}")
        for image in _images(obj):
            # kube-scheduler's ImageLocality counts the nodes having an image as of each node's last snapshot clone,
            # so a node of an earlier scenario not yet gone from its cache would count; unique names keep it out.
            names.setdefault(image, f"{prefix}/{image}")
    return names


def _images(obj: JSON) -> Iterator[str]:
    """Image names a scenario object carries: a node's status.images, a pod's containers' images."""
    if obj.get("kind") == "Node":
        for image in (obj.get("status") or {}).get("images") or []:
            yield from image.get("names") or []
    elif obj.get("kind") == "Pod":
        spec = obj.get("spec") or {}
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            if container.get("image"):
                yield container["image"]


def rename(value: Any, names: dict[str, str]) -> Any:
    """A deep copy with every string value (never a key) found in ``names`` replaced."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, list):
        return [rename(v, names) for v in value]
    if isinstance(value, dict):
        return {k: rename(v, names) for k, v in value.items()}
    return value


def namespaces_of(objs: Iterable[JSON]) -> list[str]:
    """Namespaces the objects live in that have no Namespace object of their own (created plain)."""
    declared = {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"}
    seen: list[str] = []
    for o in objs:
        ns = (o.get("metadata") or {}).get("namespace")
        if ns and ns not in declared and ns not in seen:
            seen.append(ns)
    return seen
