"""The web view's queue panel: Kueue's ClusterQueues by cohort, each flavor's quota, usage and borrowing per
resource, and the workloads not admitted with their QuotaReserved message.

Usage, borrowing and the workloads' conditions are ``schedule -o json``'s ``clusterQueues`` and ``workloads``
(queues/report.py) as they are: the panel adds only the quota they are measured against and each cohort's sums."""

from __future__ import annotations

from typing import Any

from accelsched.queues import report
from accelsched.queues.admission import QueueResult
from accelsched.queues.resources import format_amount

QUOTA_RESERVED = "QuotaReserved"


def queue_panel(result: QueueResult | None) -> dict[str, Any] | None:
    """The panel's data, or None when the input had no Kueue objects (the page hides the panel)."""
    if result is None:
        return None
    queues = report.cluster_queues_json(result)
    by_cohort: dict[str, list[str]] = {}
    totals: dict[str, dict[tuple[str, str], list[int]]] = {}
    for entry in queues:
        name = entry["name"]
        nominal: dict[str, dict[str, str]] = {}
        limits: dict[str, dict[str, str]] = {}
        sums = totals.setdefault(entry["cohort"], {}) if entry["cohort"] else None
        for flavor, q, used in report.usage_rows(result, name):
            nominal.setdefault(flavor, {})[q.name] = format_amount(q.name, q.nominal)
            if q.borrowing_limit is not None:
                limits.setdefault(flavor, {})[q.name] = format_amount(q.name, q.borrowing_limit)
            if sums is not None:
                pair = sums.setdefault((flavor, q.name), [0, 0])
                pair[0] += q.nominal
                pair[1] += used
        entry["nominal"] = nominal
        entry["borrowingLimit"] = limits
        if entry["cohort"]:
            by_cohort.setdefault(entry["cohort"], []).append(name)
    workloads = report.workloads_json(result)
    queued = [dict(w, message=_quota_message(w)) for w in workloads if not w["admitted"]]
    admitted: dict[str, int] = {}
    for w in workloads:
        if w["admitted"] and w["clusterQueue"]:
            admitted[w["clusterQueue"]] = admitted.get(w["clusterQueue"], 0) + 1
    cohorts = [
        {
            "name": cohort,
            "clusterQueues": names,
            "nominal": _nested({k: format_amount(k[1], v[0]) for k, v in totals[cohort].items()}),
            "usage": _nested({k: format_amount(k[1], v[1]) for k, v in totals[cohort].items()}),
        }
        for cohort, names in by_cohort.items()
    ]
    return {"clusterQueues": queues, "cohorts": cohorts, "queued": queued, "admitted": admitted}


def _quota_message(workload: dict[str, Any]) -> str:
    """Why Kueue holds the workload: its QuotaReserved condition's message (Kueue's own words)."""
    for c in workload["conditions"]:
        if c["type"] == QUOTA_RESERVED and c["status"] != "True":
            return c["message"]
    return ""


def _nested(flat: dict[tuple[str, str], str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for (flavor, resource), value in flat.items():
        out.setdefault(flavor, {})[resource] = value
    return out
