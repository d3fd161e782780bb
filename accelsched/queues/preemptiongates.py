"""Kueue's Workload preemption gates: a workload's gates, whether one is closed, and Kueue's words for a workload a
closed gate keeps from preempting.

A Workload lists gates in ``spec.preemptionGates`` and their positions in ``status.preemptionGates`` (Open or
Closed); a gate without a position is closed, so that a workload can be created gated in one write
(workload.HasClosedPreemptionGate). Only with the feature gate ConcurrentAdmission or
MultiKueueOrchestratedPreemption on (both alpha, off by default) does the scheduler honour them: a head that needs
to preempt (Preempt mode with targets) while one of its gates is closed preempts nothing, reserves nothing, and is
requeued (scheduler.go processEntry, markPreemptionGated). An eviction closes every gate
(evict.closeAllPreemptionGates): the controller that opened it decides again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelsched.api.object_fields import _list, _mapping, _str
from accelsched.errors import Where
from accelsched.queues import validation as rules

# Kueue's feature gates that turn the gates on (pkg/features), and its strings (apis/kueue/v1beta2).
CONCURRENT_ADMISSION = "ConcurrentAdmission"
MULTIKUEUE_ORCHESTRATED_PREEMPTION = "MultiKueueOrchestratedPreemption"
FEATURE_GATES = (CONCURRENT_ADMISSION, MULTIKUEUE_ORCHESTRATED_PREEMPTION)
BLOCKED_ON_PREEMPTION_GATES = "BlockedOnPreemptionGates"  # kueue.WorkloadBlockedOnPreemptionGates
PREEMPTION_GATED = "PreemptionGated"  # the condition's reason (kueue.PreemptionGated)
GATED_MESSAGE = "Workload requires preemption, but it's gated"
OPEN, CLOSED = "Open", "Closed"
MAX_GATES = 8  # +kubebuilder:validation:MaxItems=8, on both lists
MAX_NAME = 63


@dataclass(frozen=True)
class Gates:
    """A workload's gates (spec order) and the positions its status gives them."""

    names: tuple[str, ...] = ()
    positions: Mapping[str, str] = field(default_factory=dict)

    def closed(self) -> list[str]:
        """The gates that keep it from preempting: every one not Open (HasClosedPreemptionGate)."""
        return [n for n in self.names if self.positions.get(n) != OPEN]

    def close_all(self) -> Gates:
        """closeAllPreemptionGates, on eviction: every position the status holds turns Closed."""
        return Gates(self.names, dict.fromkeys(self.positions, CLOSED))

    def open_all(self) -> Gates:
        """Every gate opened, as their controllers would (explain's checked change)."""
        return Gates(self.names, {**self.positions, **dict.fromkeys(self.names, OPEN)})


NONE = Gates()


def parse(where: Where, spec: Mapping[str, Any], status: Mapping[str, Any]) -> Gates:
    """spec.preemptionGates and status.preemptionGates, checked as the CRD schema checks them past its types and
    enums (which the structural schema checks): at most 8 items, names of 1 to 63 characters, each name once
    (x-kubernetes-list-type: map). Kueue's webhook adds no rule of its own for them."""
    names = [g["name"] for g in _items(where, spec.get("preemptionGates"), "spec.preemptionGates")]
    positions = {}
    for state in _items(where, status.get("preemptionGates"), "status.preemptionGates"):
        positions[state["name"]] = _str(where, state.get("position"), "", CLOSED)
    return Gates(tuple(names), positions) if names or positions else NONE


def _items(where: Where, raw: Any, path: str) -> list[Mapping[str, Any]]:
    items = [_mapping(where, item, f"{path}[{i}]") for i, item in enumerate(_list(where, raw, path))]
    rules.check_items(where, items, path, MAX_GATES)
    for i, item in enumerate(items):
        rules.check_length(where, _str(where, item.get("name"), f"{path}[{i}].name"), f"{path}[{i}].name", 1, MAX_NAME)
    rules.check_unique(where, items, path)
    return items
