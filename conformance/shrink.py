"""Greedy shrinking of a disagreement: drop objects, then any field, while the same kind of disagreement persists.

Every try re-runs both sides (the real scheduler through the API server, accelsched in-process), so a try costs a
scenario; ``budget`` bounds the tries. A reduction the API server refuses simply does not reproduce.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from conformance.outcome import PodOutcome
from conformance.scenario import Scenario

# Fields a valid object cannot lose (the API server would refuse it): never tried.
KEEP = {"apiVersion", "kind", "metadata", "name", "namespace", "spec", "containers", "image", "value", "key",
        "operator", "effect", "topologyKey", "maxSkew", "whenUnsatisfiable", "provisioner", "claimName",
        "persistentVolumeClaim", "accessModes", "storageClassName", "nodeSelectorTerms", "podAffinityTerm",
        "preference", "weight", "handler", "drivers", "nodeID", "capacity", "allocatable", "status", "resources"}
SHARED_KINDS = ("PriorityClass", "Namespace", "RuntimeClass", "CSIDriver")

Check = Callable[[Scenario], tuple[list[PodOutcome], list[str]] | None]


def _without_object(s: Scenario, index: int) -> Scenario:
    out = s.copy()
    gone = out.objects.pop(index)
    if gone["kind"] == "Node":  # its bound pods go with it
        name = gone["metadata"]["name"]
        out.objects = [o for o in out.objects if not (o["kind"] == "Pod" and o["spec"].get("nodeName") == name)]
    return out


def _paths(value: Any, path: tuple = ()) -> Iterator[tuple]:
    """Every dict key and list item below ``value`` that may be deleted, deepest last."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in KEEP:
                yield (*path, k)
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if len(value) > 1:
                yield (*path, i)
            yield from _paths(v, (*path, i))


def _delete(obj: Any, path: tuple) -> None:
    for p in path[:-1]:
        obj = obj[p]
    del obj[path[-1]]


def _without_objects(s: Scenario, indexes: list[int]) -> Scenario:
    out = s
    for i in sorted(indexes, reverse=True):
        out = _without_object(out, i)
    return out


def candidates(s: Scenario) -> Iterator[Scenario]:
    """Big steps first: pending pods, whole nodes (with their pods), halves then single bound pods, other
    objects; then single fields."""
    for i in range(len(s.pending) - 1, -1, -1):
        if len(s.pending) > 1:
            out = s.copy()
            out.pending.pop(i)
            yield out
    kinds = [o["kind"] for o in s.objects]
    for kind in ("Node", "Pod"):
        idx = [i for i, k in enumerate(kinds) if k == kind]
        if kind == "Pod" and len(idx) > 3:
            half = len(idx) // 2
            yield _without_objects(s, idx[:half])
            yield _without_objects(s, idx[half:])
        for i in reversed(idx):
            yield _without_object(s, i)
    for i in range(len(s.objects) - 1, -1, -1):
        if kinds[i] not in (*SHARED_KINDS, "Node", "Pod"):
            yield _without_object(s, i)
    for where, items in (("objects", s.objects), ("pending", s.pending)):
        for i, obj in enumerate(items):
            if obj["kind"] in SHARED_KINDS:
                continue
            for path in _paths(obj):
                if path[:2] == ("metadata", "labels") and len(path) == 3 and path[2] == "kubernetes.io/hostname":
                    continue
                if path[:1] == ("status",) and obj["kind"] == "Pod":
                    continue
                out = s.copy()
                try:
                    _delete(getattr(out, where)[i], path)
                except (KeyError, IndexError, TypeError):
                    continue
                yield out


def shrink(scenario: Scenario, kind: str, check: Check, budget: int = 80) -> tuple[Scenario, int]:
    """The smallest scenario found whose differences still include ``kind``; and the tries spent."""
    best = scenario
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for cand in candidates(best):
            if tries >= budget:
                break
            tries += 1
            got = check(cand)
            if got is not None and any(d.split(":", 1)[0] == kind for d in got[1]):
                best = cand
                improved = True
                break
    return best, tries


def drop_unused_shared(s: Scenario) -> Scenario:
    """Leave out the shared objects nothing refers to (the PriorityClasses no pod names, say), for readability."""
    out = s.copy()
    text = repr([o for o in [*out.objects, *out.pending] if o["kind"] not in SHARED_KINDS])
    out.objects = [o for o in out.objects
                   if o["kind"] not in SHARED_KINDS or repr(o["metadata"]["name"]) in text]
    return copy.deepcopy(out)
