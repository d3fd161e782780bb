"""Gang scheduling: a PodGroup's members are placed together in one decision, or none is.

Members join a gang with the label ``scheduling.x-k8s.io/pod-group: <name>``, the scheduler-plugins
Coscheduling convention; the ``PodGroup`` (``scheduling.x-k8s.io/v1alpha1``) gives ``minMember``. A Job whose
pods carry the label without a PodGroup object is a gang of all its pods.

Why this cannot deadlock: when the first member of a gang leaves the queue, every pending member leaves with
it, and the whole gang is decided in one go. Each member runs a full cycle (so later members see earlier ones'
capacity, devices and anti-affinity), stops after Permit, and is held. If at least minMember are held they are
all bound; otherwise every held member is rolled back (Unreserve, forget) before anything else is scheduled.
Two gangs therefore never interleave, nothing is held across cycles (no timeout to wait for), and a gang that
passes an aggregate capacity check but cannot be placed fails once and waits, instead of looping.

A PodGroup may ask that all members share one topology domain: annotation ``accelsched.io/required-topology:
<node label key>`` (or ``accelsched.io/preferred-topology``, which falls back to the whole cluster). Domains are
tried tightest-fitting first, so a gang does not take a big domain when a smaller one holds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import Pod, metadata
from accelsched.errors import Where

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
REQUIRED_TOPOLOGY = "accelsched.io/required-topology"
PREFERRED_TOPOLOGY = "accelsched.io/preferred-topology"
GANG = "Coscheduling"


@dataclass(frozen=True)
class PodGroup:
    namespace: str
    name: str
    min_member: int
    timeout_seconds: int | None = None
    required_topology: str = ""
    preferred_topology: str = ""
    min_resources: tuple[tuple[str, int], ...] = ()  # spec.minResources, canonical units, sorted by name

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_pod_group(doc: Mapping[str, Any], source: str = "") -> PodGroup:
    where, name, namespace, meta = metadata(doc, source, "PodGroup", namespaced=True)
    spec = doc.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise where.error("spec", "must be a mapping")
    min_member = spec.get("minMember", 1)
    if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 1:
        raise where.error("spec.minMember", f"must be a whole number >= 1, got {min_member!r}")
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0):
        raise where.error("spec.scheduleTimeoutSeconds", f"must be a whole number >= 0, got {timeout!r}")
    min_resources = spec.get("minResources") or {}
    if not isinstance(min_resources, Mapping):
        raise where.error("spec.minResources", "must be a mapping of resource name to quantity")
    resources = []
    for res, value in sorted(min_resources.items()):
        try:
            resources.append((str(res), quantity.parse(str(res), value)))
        except ValueError as exc:
            raise where.error(f"spec.minResources[{res}]", str(exc)) from None
    annotations = meta.get("annotations") or {}
    required = str(annotations.get(REQUIRED_TOPOLOGY, ""))
    preferred = str(annotations.get(PREFERRED_TOPOLOGY, ""))
    if required and preferred:
        raise where.error(f"metadata.annotations[{PREFERRED_TOPOLOGY}]", f"cannot be set with {REQUIRED_TOPOLOGY}")
    return PodGroup(namespace, name, min_member, timeout, required, preferred, tuple(resources))


def group_key(pod: Pod) -> str | None:
    name = pod.labels.get(POD_GROUP_LABEL)
    return f"{pod.namespace}/{name}" if name else None


def implicit_groups(pods: list[Pod], groups: dict[str, PodGroup]) -> dict[str, PodGroup]:
    """Labelled pods without a PodGroup object (a Job with parallelism N): a gang of all of them."""
    counts: dict[str, int] = {}
    for pod in pods:
        key = group_key(pod)
        if key and key not in groups:
            counts[key] = counts.get(key, 0) + 1
    out = dict(groups)
    for key, count in counts.items():
        namespace, name = key.split("/", 1)
        out[key] = PodGroup(namespace, name, count)
    return out


def check_groups(pods: list[Pod], groups: dict[str, PodGroup], where_of: Mapping[str, Where]) -> None:
    """A gang with fewer pods than minMember can never start: bad input, named on its PodGroup."""
    members: dict[str, int] = {}
    for pod in pods:
        key = group_key(pod)
        if key:
            members[key] = members.get(key, 0) + 1
    for key, group in groups.items():
        if key in where_of and members.get(key, 0) < group.min_member:
            raise where_of[key].error(
                "spec.minMember",
                f"is {group.min_member}, but only {members.get(key, 0)} pods carry {POD_GROUP_LABEL}: {group.name}",
            )


def describe_request(pods: list[Pod]) -> str:
    """``8 pods x 4 qualcomm.com/ai-accelerator``: the gang's per-member request, by its device resources."""
    first = pods[0].requests
    devices = {r: a for r, a in first.items() if quantity.is_extended(r)}
    shown = devices or {r: a for r, a in first.items() if r in (quantity.CPU, quantity.MEMORY)}
    parts = " + ".join(f"{quantity.format_quantity(r, a)} {r}" for r, a in sorted(shown.items())) or "nothing"
    return f"{len(pods)} pods x {parts}"


def domains(cluster_labels: np.ndarray, values: tuple[str, ...]) -> list[tuple[str, np.ndarray]]:
    """Each value of a topology key with the mask of its nodes."""
    return [(value, cluster_labels == code) for code, value in enumerate(values)]
