"""Topology levels from real objects: Kueue's ``Topology`` (kueue.x-k8s.io/v1beta2), checked as its CRD checks
it, and NVIDIA's ``nvidia.com/gpu.clique`` node label as an NVLink domain level.

A Topology lists node label keys from the widest domain to the narrowest (block, rack, host). A request names one
level; the levels below it are where the placement keeps pods together (fewest domains at each). A request for a
label no Topology lists gets that label alone above the node, as ``accelsched.io/required-topology`` always had.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from accelsched.api import validation as rules
from accelsched.api.objects import metadata

GROUP = "kueue.x-k8s.io"
KIND = "Topology"
API_VERSION = f"{GROUP}/v1beta2"
HOSTNAME = "kubernetes.io/hostname"
# GPU Feature Discovery's label: "<NVLink cluster UUID>.<clique id>"; nodes with one value share an NVLink domain
# (an NVL72 rack of 18 GB200 trays, for one).
CLIQUE = "nvidia.com/gpu.clique"
MAX_LEVELS = 16  # +kubebuilder:validation:MaxItems=16
MAX_LABEL_LENGTH = 316  # +kubebuilder:validation:MaxLength=316
# +kubebuilder:validation:Pattern of TopologyLevel.nodeLabel, verbatim.
NODE_LABEL_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_NODE_LABEL_RE = re.compile(NODE_LABEL_PATTERN)
UNIQUE = "must be unique"
HOSTNAME_LOWEST = f"the {HOSTNAME} label can only be used at the lowest level of topology"


@dataclass(frozen=True)
class Topology:
    name: str
    levels: tuple[str, ...]  # node label keys, widest first


def is_topology(doc: Mapping[str, Any]) -> bool:
    """Kueue's Topology; one without an apiVersion too, so that it is refused rather than read past unseen."""
    api_version = doc.get("apiVersion")
    if doc.get("kind") != KIND:
        return False
    return not api_version or (isinstance(api_version, str) and api_version.split("/", 1)[0] == GROUP)


def parse_topology(doc: Mapping[str, Any], source: str = "") -> Topology:
    """A Topology, refused with the message the API server gives for its CRD's rules."""
    where, name, _, _ = metadata(doc, source, KIND, namespaced=False)
    if not doc.get("apiVersion"):
        raise where.error("apiVersion", f"is required (served for {KIND}: {API_VERSION})")
    spec = doc.get("spec")
    levels = spec.get("levels") if isinstance(spec, Mapping) else None
    if levels is None:
        raise where.error("spec.levels", "Required value")
    if not isinstance(levels, list):
        raise where.error("spec.levels", f'Invalid value: "{type(levels).__name__}": spec.levels must be of type array')
    if not levels:
        raise where.error("spec.levels", "Invalid value: 0: spec.levels in body should have at least 1 items")
    if len(levels) > MAX_LEVELS:
        raise where.error("spec.levels", f"Too many: {len(levels)}: must have at most {MAX_LEVELS} items")
    keys: list[str] = []
    for i, level in enumerate(levels):
        path = f"spec.levels[{i}].nodeLabel"
        label = level.get("nodeLabel") if isinstance(level, Mapping) else None
        if label is None:
            raise where.error(path, "Required value")
        if not isinstance(label, str):
            raise where.error(path, f"Invalid value: {label!r}: {path} must be of type string")
        if not label:
            raise where.error(path, f'Invalid value: "": {path} in body should be at least 1 chars long')
        if len(label) > MAX_LABEL_LENGTH:
            raise where.error(path, f"Too long: may not be more than {MAX_LABEL_LENGTH} bytes")
        if not _NODE_LABEL_RE.match(label):
            raise where.error(path, f"Invalid value: \"{label}\": {path} in body should match '{NODE_LABEL_PATTERN}'")
        keys.append(label)
    if len(set(keys)) != len(keys):
        raise where.error("spec.levels", f'Invalid value: "array": {UNIQUE}')
    if HOSTNAME in keys and keys[-1] != HOSTNAME:
        raise where.error("spec.levels", f'Invalid value: "array": {HOSTNAME_LOWEST}')
    return Topology(name, tuple(keys))


def label_key_problem(key: str) -> str | None:
    """metav1validation.ValidateLabelName, as Kueue's webhook checks a requested level."""
    return rules.label_key_problem(key)


def levels_for(key: str, topologies: Iterable[Topology]) -> tuple[str, ...]:
    """The levels a request at ``key`` works within: those of the first Topology (by name) that lists it, else
    ``key`` alone. The node itself is always the innermost level, whether or not ``kubernetes.io/hostname`` is
    listed (placement.Fabric adds it)."""
    for topology in sorted(topologies, key=lambda t: t.name):
        if key in topology.levels:
            return topology.levels
    return (key,)
