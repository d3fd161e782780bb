"""Recorded cases: a scenario as plain Kubernetes YAML plus, as its last document, what the real kube-scheduler did.

The last document is ``kind: ConformanceOutcome`` (no Kubernetes kind; it is never given to accelsched): the
config group, the recording scheduler's version and one outcome per pending pod (``node`` where it was bound, or
``reason`` and ``message`` of PodScheduled=False, or ``nominated`` and ``victims``). Pending pods are the Pods
without ``spec.nodeName``, scheduled in file order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from conformance.outcome import PodOutcome
from conformance.scenario import JSON, Scenario

OUTCOME_KIND = "ConformanceOutcome"
RECORDED_BY = "kube-scheduler v1.36.3"
NAMESPACED = ("Pod", "PersistentVolumeClaim", "CSIStorageCapacity")


def read(path: Path | str) -> tuple[Scenario, list[PodOutcome] | None, JSON]:
    """The scenario of a case file, its recorded outcomes (None when not recorded yet) and the outcome doc."""
    docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
    items: list[JSON] = []
    for d in docs:
        items.extend(d.get("items") or [] if d.get("kind") == "List" else [d])
    header: JSON = next((d for d in items if d.get("kind") == OUTCOME_KIND), {})
    objects, pending = [], []
    for d in items:
        if d.get("kind") == OUTCOME_KIND:
            continue
        if d.get("kind") in NAMESPACED:
            d.setdefault("metadata", {}).setdefault("namespace", "default")
        if d.get("kind") == "Pod" and not (d.get("spec") or {}).get("nodeName"):
            pending.append(d)
        else:
            objects.append(d)
    scenario = Scenario(str(header.get("class") or Path(path).stem), str(header.get("config") or "default"),
                        objects, pending)
    outcomes = [PodOutcome.from_json(o) for o in header["outcomes"]] if "outcomes" in header else None
    return scenario, outcomes, header


def outcome_doc(scenario: Scenario, outcomes: list[PodOutcome], **extra: Any) -> JSON:
    doc: JSON = {"kind": OUTCOME_KIND, "class": scenario.klass, "config": scenario.config,
                 "recordedBy": RECORDED_BY}
    doc.update({k: v for k, v in extra.items() if v})
    doc["outcomes"] = [o.to_json() for o in outcomes]
    return doc


def write(path: Path, scenario: Scenario, outcomes: list[PodOutcome], **extra: Any) -> None:
    docs = [*scenario.documents(), outcome_doc(scenario, outcomes, **extra)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False, width=120))


def rewrite_outcome(path: Path, scenario: Scenario, outcomes: list[PodOutcome], header: JSON) -> None:
    """Replace (or append) the outcome document of an existing file, keeping its other documents as written."""
    text = Path(path).read_text()
    parts = text.split("\n---")
    kept = [p for p in parts if f"kind: {OUTCOME_KIND}" not in p]
    extra = {k: v for k, v in header.items() if k not in ("kind", "class", "config", "recordedBy", "outcomes")}
    doc = yaml.safe_dump(outcome_doc(scenario, outcomes, **extra), sort_keys=False, width=120)
    body = "\n---".join(kept).rstrip("\n")
    Path(path).write_text(f"{body}\n---\n{doc}")
