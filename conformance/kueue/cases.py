"""Recorded cases of the Kueue oracle: what accelsched reads for one phase, and what the real Kueue answered.

A case file is the phase's documents (namespaces, queue objects, workloads: earlier ones with the status Kueue
gave them) followed by one ``kind: KueueOracleOutcome`` document (no Kubernetes kind; never given to accelsched):
the class, the recording Kueue's version, each workload's outcome (admitted, flavors, conditions) and the earlier
workloads whose conditions Kueue left untouched in the phase. ``xfail: <reason>`` marks a deliberate difference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from conformance.kueue.runner import Case
from conformance.kueue.scenario import JSON

OUTCOME_KIND = "KueueOracleOutcome"
RECORDED_BY = "Kueue v0.19.2"
CASES_DIR = Path(__file__).resolve().parents[2] / "tests" / "kueue_cases"


def write(path: Path, klass: str, case: Case, **extra: Any) -> None:
    doc: JSON = {"kind": OUTCOME_KIND, "class": klass, "recordedBy": RECORDED_BY}
    doc.update({k: v for k, v in extra.items() if v})
    doc["untouched"] = case.untouched
    doc["workloads"] = case.real
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all([*case.docs, doc], sort_keys=False, width=120))


def read(path: Path | str) -> tuple[Case, JSON]:
    docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
    header = next(d for d in docs if d.get("kind") == OUTCOME_KIND)
    case = Case([d for d in docs if d.get("kind") != OUTCOME_KIND], header["workloads"], header.get("untouched") or [])
    return case, header
