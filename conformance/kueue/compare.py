"""accelsched's answer on a phase's objects, and its comparison with what the real Kueue left.

Per workload: admitted or not; the flavor of each pod set's resources; and the conditions Kueue writes
(QuotaReserved, Admitted, Evicted, Preempted, Requeued, BlockedOnPreemptionGates) with their status, reason and
message, byte for byte.
Earlier phases' workloads are given to accelsched with the status Kueue left them (admission and conditions); one
whose conditions Kueue did not touch in this phase is compared on admission and flavors only.
"""

from __future__ import annotations

from typing import Any

import yaml

from accelsched.api.loader import build_inputs, read_documents
from accelsched.engine import Session
from accelsched.queues.report import workloads_json
from conformance.kueue.scenario import GATE_LABEL, JSON

CONDITIONS = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Requeued", "BlockedOnPreemptionGates")
# What Kueue writes on a workload tried while its namespace was still closed by the gate (scenario.py). A workload
# it never tries again once open (behind a StrictFIFO head that does not fit) keeps it; accelsched, which has no
# gate, leaves such a workload without a condition, as Kueue does without the gate.
GATE_MESSAGE = "workload namespace doesn't match ClusterQueue selector"


def _clean(obj: JSON) -> JSON:
    """An object as a person would write it back: name, namespace, labels, uid, creation time; no server fields."""
    meta = obj.get("metadata") or {}
    keep = {k: meta[k] for k in ("name", "namespace", "labels", "uid", "creationTimestamp") if k in meta}
    out = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    out["metadata"] = keep
    status = obj.get("status") or {}
    if obj.get("kind") == "Workload" and status:
        # The gate's trace is not the workload's history (see GATE_MESSAGE).
        out["status"] = {"conditions": [c for c in status.get("conditions") or [] if c.get("message") != GATE_MESSAGE]}
        if status.get("admission"):
            out["status"]["admission"] = status["admission"]
        if status.get("preemptionGates"):
            out["status"]["preemptionGates"] = status["preemptionGates"]
    return out


def inputs(objects: list[JSON], workloads: list[JSON], phase: int) -> list[JSON]:
    """The documents accelsched reads for a phase: the open namespaces, the queue objects, the workloads."""
    docs = []
    for obj in objects:
        if obj["kind"] == "Namespace":
            if int(obj["metadata"]["name"].rsplit("-p", 1)[1]) > phase:
                continue
            name = obj["metadata"]["name"]
            docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": name, "labels": {"kubernetes.io/metadata.name": name, GATE_LABEL: name.rsplit("-p", 1)[0]}}})
        else:
            docs.append(_clean(obj))
    return docs + [_clean(w) for w in workloads]


def accelsched(docs: list[JSON]) -> dict[str, JSON]:
    """accelsched's workloads (``schedule -o json``'s ``workloads``) by namespace/name."""
    text = yaml.safe_dump_all(docs, sort_keys=False)
    session = Session.start(build_inputs(read_documents("oracle.yaml", text)))
    assert session.queues is not None
    return {f"{w['namespace']}/{w['name']}": w for w in workloads_json(session.queues)}


def kueue(workloads: list[JSON]) -> dict[str, JSON]:
    """Kueue's workloads in the same shape."""
    out = {}
    for wl in workloads:
        status = wl.get("status") or {}
        admission = status.get("admission")
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        if (conditions.get("QuotaReserved") or {}).get("message") == GATE_MESSAGE:
            del conditions["QuotaReserved"]  # the gate's trace: Kueue never tried it once open (see GATE_MESSAGE)
        admitted = bool(admission) and (conditions.get("Admitted") or {}).get("status") == "True"
        flavors = {ps["name"]: dict(ps.get("flavors") or {}) for ps in (admission or {}).get("podSetAssignments") or []}
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        out[key] = {"admitted": admitted, "flavors": flavors if admitted else {},
                    "conditions": [conditions[t] for t in CONDITIONS if t in conditions]}
    return out


def _conds(conditions: list[dict[str, Any]]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in conditions if c["type"] in CONDITIONS}


def unchanged(before: list[JSON], real: dict[str, JSON]) -> list[str]:
    """The earlier workloads whose conditions Kueue left as they were in this phase."""
    out = []
    for w in before:
        key = f"{w['metadata']['namespace']}/{w['metadata']['name']}"
        if key in real and _conds((w.get("status") or {}).get("conditions") or []) == _conds(real[key]["conditions"]):
            out.append(key)
    return out


def diff(real: dict[str, JSON], ours: dict[str, JSON], untouched: list[str]) -> list[str]:
    """The disagreements, one line each, ``kind: workload: detail`` (kind is what the shrinker keeps)."""
    out = []
    for key in sorted(set(real) | set(ours)):
        r, o = real.get(key), ours.get(key)
        if r is None or o is None:
            out.append(f"missing: {key}: {'accelsched' if o is None else 'Kueue'} has no such workload")
            continue
        if r["admitted"] != o["admitted"]:
            out.append(f"admitted: {key}: Kueue {r['admitted']}, accelsched {o['admitted']}")
            continue
        if r["admitted"] and r["flavors"] != o["flavors"]:
            out.append(f"flavors: {key}: Kueue {r['flavors']}, accelsched {o['flavors']}")
        if key in untouched:
            continue  # Kueue left it as it was; accelsched does not carry a workload's history
        rc, oc = _conds(r["conditions"]), _conds(o["conditions"])
        for kind in CONDITIONS:
            if rc.get(kind) != oc.get(kind):
                out.append(f"condition-{kind}: {key}: Kueue {rc.get(kind)}, accelsched {oc.get(kind)}")
    return out
