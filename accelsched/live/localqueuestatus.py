"""Live mode's LocalQueue admission fair sharing status, as Kueue's LocalQueue controller writes it.

With admission fair sharing on (queues/admissionfairsharing.py), Kueue's LocalQueue controller reconciles each
LocalQueue of a ClusterQueue that asks for it when it first sees it and then every ``usageSamplingInterval``
(pkg/controller/core/localqueue_controller.go: initializeAfsIfNeeded, reconcileConsumedUsage): it decays the
LocalQueue's consumed resources toward its admitted usage and writes them to
``status.fairSharing.admissionFairSharingStatus`` with the time (``consumedResources``, ``lastUpdate``). That status
is what a restarted Kueue seeds its ledger from, and what ``kubectl get localqueues -o yaml`` and dashboards show.

Where ``accelsched run`` admits in Kueue's place (Workload objects of ours, or queued pods and Jobs with no Kueue
installed), nothing else writes it, so the door writes it for the LocalQueues holding a workload of ours, as
live/clusterqueuestatus.py writes their ClusterQueues' status. The values are the process's ledger (kept across
sessions, on wall time: the door's clock), each sample once:

- ``consumedResources``: per resource, as Kueue prints its decimals (DecimalSI at nano precision, rounded down:
  ``1500m``, ``687527n``; cpu in cores, memory in bytes); a resource that left the ledger (a half-life of 0 resets
  it) is removed (the write is a merge patch: a null takes it out);
- ``lastUpdate``: the sample's time, RFC 3339 in seconds (metav1.Time);
- ``weightedShare`` (required beside it by the CRD) is kept as it is, 0 when the status has none yet (the zero
  value Kueue's controller writes with it).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from accelsched.live.kube import JSON
from accelsched.live.workloadstatus import ours
from accelsched.queues.admission import QueueResult
from accelsched.queues.resources import format_scaled


def timestamp(seconds: float) -> str:
    """metav1.Time as JSON: RFC 3339 in UTC, whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def status(consumed: Mapping[str, float], last_update: float) -> JSON:
    """status.fairSharing.admissionFairSharingStatus of one sample."""
    return {
        "consumedResources": {name: format_scaled(amount) for name, amount in sorted(consumed.items())},
        "lastUpdate": timestamp(last_update),
    }


def status_patch(doc: Mapping[str, Any], consumed: Mapping[str, float], last_update: float) -> JSON:
    """The merge patch of the LocalQueue ``doc``'s status subresource for one sample."""
    fair = (doc.get("status") or {}).get("fairSharing") or {}
    wanted = status(consumed, last_update)
    before = (fair.get("admissionFairSharingStatus") or {}).get("consumedResources") or {}
    removed: dict[str, Any] = {name: None for name in before if name not in wanted["consumedResources"]}
    wanted["consumedResources"] = {**removed, **wanted["consumedResources"]}
    return {
        "status": {"fairSharing": {"weightedShare": fair.get("weightedShare", 0), "admissionFairSharingStatus": wanted}}
    }


def status_patches(
    samples: Iterable[tuple[str, Mapping[str, float], float]], local_queues: Mapping[str, JSON], mine: Collection[str]
) -> dict[str, JSON]:
    """LocalQueue (namespace/name) -> the merge patch of its status, for each sample (the ledger's ``take_sampled``)
    of a LocalQueue in the cache (``local_queues``) that is ours (``mine``: local_queues_of_ours)."""
    out = {}
    for key, consumed, last_update in samples:
        doc = local_queues.get(key)
        if doc is not None and key in mine:
            out[key] = status_patch(doc, consumed, last_update)
    return out


def local_queues_of_ours(
    result: QueueResult, workloads: Mapping[str, JSON], scheduler_names: Collection[str]
) -> set[str]:
    """The LocalQueues (namespace/name) holding a workload accelsched admits: a Workload object of ours
    (``workloads``: the cache's, by namespace/name, finished ones included: its queue's usage still decays), or a
    workload made from queued pods asking for one of ``scheduler_names`` (the second door: no Kueue installed)."""
    out: set[str] = set()
    for key, doc in workloads.items():
        queue_name = (doc.get("spec") or {}).get("queueName")
        if queue_name and ours(doc, scheduler_names):
            out.add(f"{key.split('/')[0]}/{queue_name}")
    objects = result.objects.workloads
    for o in result.outcomes:
        info = o.info
        if info.key not in objects and any(p.scheduler_name in scheduler_names for p in info.pods):
            out.add(f"{info.namespace}/{info.queue_name}")
    return out
