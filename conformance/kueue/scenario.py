"""A Kueue oracle scenario: the queue objects, and the Workloads created in one or two phases.

Phase 1's workloads are admitted from an empty cluster; phase 2's arrive once phase 1 has settled, so they meet
running workloads (borrowed quota to reclaim, lower priorities to preempt). Names here are canonical (``cq0``,
``f1``, ``lq0``, ``w3``); ``place`` gives a scenario its slot in a run: cluster-scoped names prefixed with the
slot's tag, one namespace per phase, and the gate (below) on every ClusterQueue.

The gate: Kueue decides as objects arrive, accelsched on a still input. So that both answer the same question,
every ClusterQueue selects only namespaces labelled ``GATE_LABEL`` with its slot's tag, and a phase's namespace gets
the label once all its workloads exist (one write, and Kueue requeues a cohort tree's waiting workloads at once on
it). The value is the slot's own: opening one slot's namespace must not requeue the other slots' workloads (Kueue
requeues every ClusterQueue a namespace newly matches), or their last tries would depend on when others opened.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"
GATE_LABEL = "oracle.accelsched.io/open"
CLUSTER_KINDS = ("ResourceFlavor", "WorkloadPriorityClass", "Cohort", "ClusterQueue")


@dataclass
class Scenario:
    klass: str
    seed: int
    objects: list[JSON]  # ResourceFlavors, WorkloadPriorityClasses, Cohorts, ClusterQueues, LocalQueues
    phases: list[list[JSON]] = field(default_factory=list)  # Workloads, in creation order, per phase

    def copy(self) -> Scenario:
        return copy.deepcopy(self)

    def digest(self) -> str:
        return hashlib.sha1(json.dumps([self.objects, self.phases], sort_keys=True).encode()).hexdigest()[:10]

    def workloads(self) -> list[JSON]:
        return [w for phase in self.phases for w in phase]


def namespace(tag: str, phase: int) -> str:
    return f"{tag}-p{phase}"


def place(s: Scenario, tag: str) -> tuple[list[JSON], list[list[JSON]]]:
    """The scenario's objects and phases as created for slot ``tag``: cluster-scoped names prefixed, LocalQueues
    in every phase's namespace, workloads in their phase's, the gate on every ClusterQueue."""

    def ref(name: str) -> str:  # every cluster-scoped reference, to an object of the scenario or to none
        return f"{tag}-{name}"

    objects: list[JSON] = []
    for obj in copy.deepcopy(s.objects):
        kind, spec = obj["kind"], obj.get("spec") or {}
        if kind in CLUSTER_KINDS:
            obj["metadata"]["name"] = f"{tag}-{obj['metadata']['name']}"
        if kind == "ClusterQueue":
            if spec.get("cohortName"):
                spec["cohortName"] = ref(spec["cohortName"])
            for group in spec.get("resourceGroups") or []:
                for flavor in group.get("flavors") or []:
                    flavor["name"] = ref(flavor["name"])
            selector = obj["spec"].setdefault("namespaceSelector", {})
            selector.setdefault("matchLabels", {})[GATE_LABEL] = tag
        if kind == "Cohort" and spec.get("parentName"):
            spec["parentName"] = ref(spec["parentName"])
        if kind == "LocalQueue":
            spec["clusterQueue"] = ref(spec["clusterQueue"])
            for phase in range(len(s.phases)):
                lq = copy.deepcopy(obj)
                lq["metadata"]["namespace"] = namespace(tag, phase)
                objects.append(lq)
            continue
        objects.append(obj)
    phases = []
    for i, phase in enumerate(copy.deepcopy(s.phases)):
        for wl in phase:
            wl["metadata"]["namespace"] = namespace(tag, i)
            pref = wl["spec"].get("priorityClassRef")
            if pref:
                pref["name"] = ref(pref["name"])
        phases.append(phase)
    return objects, phases
