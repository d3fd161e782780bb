"""The ``PodGroupScheduled`` condition of upstream PodGroups (``scheduling.k8s.io/v1alpha2``), as kube-scheduler's
pod group cycle sets it (schedule_one_podgroup.go, updatePodGroupCondition):

- the gang placed: ``True``, reason ``Scheduled``, message empty;
- the gang did not fit: ``False``, reason ``Unschedulable``, message ``pod group is unschedulable``;
- a condition already ``True`` is never turned back to ``False`` (a later cycle for extra pods), and an unchanged
  condition is not written again (SetStatusCondition reports no change); ``observedGeneration`` is the PodGroup's
  generation and ``lastTransitionTime`` moves only when the status does.

Verified against the real kube-scheduler v1.36.3 (tests/live/test_live_workload_gangs.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from accelsched.framework import gang
from accelsched.framework.types import ScheduleResult
from accelsched.live import kube as k
from accelsched.live.kube import JSON, ApiError, Kube

log = logging.getLogger("accelsched.live")

CONDITION = "PodGroupScheduled"
SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"


def outcomes(results: Iterable[ScheduleResult], groups: Mapping[str, gang.PodGroup]) -> dict[str, bool]:
    """Upstream gangs decided in these results -> whether they were placed (all or nothing: any member bound).
    Members held back by PreEnqueue were not tried, so their gang has no outcome yet."""
    out: dict[str, bool] = {}
    for r in results:
        key = gang.group_key(r.pod)
        group = groups.get(key) if key else None
        if group is None or not group.upstream or r.gated is not None:
            continue
        out[str(key)] = out.get(str(key), False) or r.scheduled
    return out


def condition(scheduled: bool) -> dict[str, str]:
    if scheduled:
        return {"type": CONDITION, "status": "True", "reason": SCHEDULED, "message": ""}
    return {"type": CONDITION, "status": "False", "reason": UNSCHEDULABLE, "message": gang.POD_GROUP_UNSCHEDULABLE}


def merged(current: JSON, new: dict[str, Any], now: str) -> list[dict[str, Any]] | None:
    """The PodGroup's conditions with ``new`` set, or None when nothing is to be written."""
    conditions = [dict(c) for c in ((current.get("status") or {}).get("conditions") or [])]
    existing = next((c for c in conditions if c.get("type") == CONDITION), None)
    if existing is not None and existing.get("status") == "True" and new["status"] != "True":
        return None  # never regress a scheduled gang
    generation = (current.get("metadata") or {}).get("generation")
    wanted = {**new, **({"observedGeneration": generation} if generation is not None else {})}
    if existing is None:
        conditions.append({**wanted, "lastTransitionTime": now})
        return conditions
    if all(existing.get(key) == value for key, value in wanted.items()):
        return None
    if existing.get("status") != wanted["status"]:
        existing["lastTransitionTime"] = now
    existing.update(wanted)
    return conditions


def set_condition(kube: Kube, namespace: str, name: str, scheduled: bool) -> None:
    """Read the PodGroup, and patch its status when the condition changes (a merge patch of the list)."""
    try:
        current = kube.get(k.WORKLOAD_POD_GROUPS, name, namespace)
        conditions = merged(current, condition(scheduled), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        if conditions is None:
            return
        body = {"status": {"conditions": conditions}}
        kube.patch(k.WORKLOAD_POD_GROUPS, name, body, namespace, "status", content_type="application/merge-patch+json")
    except ApiError as exc:
        if exc.status != 404:
            log.warning(
                "cannot set the PodGroup condition", extra={"podGroup": f"{namespace}/{name}", "error": exc.message}
            )
