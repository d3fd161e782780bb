"""Greedy shrinking of a Kueue disagreement: drop workloads, queues, flavors and optional fields while the same kind
of disagreement persists.

A round runs every candidate of the current scenario side by side in one batch on Kueue (they are independent), and
keeps the first that still disagrees the same way; ``rounds`` bounds the batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from conformance.kueue.scenario import Scenario

# Optional fields a ClusterQueue, Cohort, quota or workload can lose and stay valid.
OPTIONAL = ("borrowingLimit", "lendingLimit", "preemption", "flavorFungibility", "queueingStrategy", "priority",
            "priorityClassRef", "nodeSelector", "tolerations", "nodeLabels", "nodeTaints", "resourceGroups",
            "parentName", "cohortName")

Judge = Callable[[list[Scenario]], list[list[str]]]  # the differences of each scenario, or ["error"]


def _without_workload(s: Scenario, phase: int, index: int) -> Scenario:
    out = s.copy()
    out.phases[phase].pop(index)
    out.phases = [p for p in out.phases if p] or [[]]
    return out


def _walk(value: object, path: tuple = ()) -> Iterator[tuple]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in OPTIONAL:
                yield (*path, k)
            yield from _walk(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if len(value) > 1 and path and path[-1] in ("podSets", "flavors", "resources", "coveredResources"):
                yield (*path, i)
            yield from _walk(v, (*path, i))


def _delete(obj: object, path: tuple) -> None:
    for p in path[:-1]:
        obj = obj[p]  # type: ignore[index]
    del obj[path[-1]]  # type: ignore[attr-defined]


def candidates(s: Scenario) -> Iterator[Scenario]:
    """Big steps first: whole workloads, whole objects, then single fields and list items."""
    for phase in range(len(s.phases) - 1, -1, -1):
        for i in range(len(s.phases[phase]) - 1, -1, -1):
            if sum(len(p) for p in s.phases) > 1:
                yield _without_workload(s, phase, i)
    if len(s.phases) > 1:  # phase 2's workloads into phase 1
        out = s.copy()
        out.phases = [out.phases[0] + out.phases[1]]
        yield out
    for i in range(len(s.objects) - 1, -1, -1):
        out = s.copy()
        out.objects.pop(i)
        yield out
    for where in ("objects", "workloads"):
        items = s.objects if where == "objects" else s.workloads()
        for i, obj in enumerate(items):
            for path in _walk(obj):
                out = s.copy()
                target = out.objects[i] if where == "objects" else out.workloads()[i]
                try:
                    _delete(target, path)
                except (KeyError, IndexError, TypeError):
                    continue
                yield out


def shrink(scenario: Scenario, kind: str, judge: Judge, rounds: int = 12) -> Scenario:
    """The smallest scenario found whose differences still include ``kind``."""
    best = scenario
    for _ in range(rounds):
        cands = list(candidates(best))
        if not cands:
            break
        found = None
        for start in range(0, len(cands), 40):
            chunk = cands[start:start + 40]
            for cand, diffs in zip(chunk, judge(chunk), strict=True):
                if any(d.split(":", 1)[0] == kind for d in diffs):
                    found = cand
                    break
            if found is not None:
                break
        if found is None:
            break
        best = found
    return best
