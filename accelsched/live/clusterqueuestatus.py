"""Live mode's ClusterQueue status, as Kueue's ClusterQueue controller writes it, for the Workload door.

Where ``accelsched run`` admits Workload objects in Kueue's place (live/workloadstatus.py), nothing else writes the
ClusterQueues' status, and what reads it (``kubectl get clusterqueues``, dashboards, Kueue's own performance runner,
benchmarks/kueueperf.py, which measures usage from it and stops when no active queue has pending or reserving
workloads) would see none. After each admission round, each ClusterQueue whose status differs from what the round
decided gets it, as pkg/controller/core ClusterQueueReconciler.updateCqStatusIfChanged writes it:

- ``pendingWorkloads``: its workloads not admitted (the queue manager's Pending);
- ``reservingWorkloads`` and ``admittedWorkloads``: its workloads holding quota (without admission checks, every
  reservation is an admission);
- ``flavorsReservation`` and ``flavorsUsage``: per flavor of its resource groups, in their order, each covered
  resource's usage (``total``) and what of it is borrowed past the nominal quota (``borrowed``, only under a
  cohort, left out when zero), the cache's getUsage;
Only ClusterQueues holding a Workload object of ours are written (where Kueue's controller runs, it writes the
others'):

- the ``Active`` condition: True, ``Ready``, ``Can admit new workloads`` (ClusterQueueReadiness); a ClusterQueue
  admission found inactive (stopped, missing flavors, a cohort loop) is left as it is.

Fair sharing's ``fairSharing.weightedShare`` is not written. The write is a merge patch of the status subresource:
the round's view wins, and the next round corrects one made stale meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Any

from accelsched.live.kube import JSON
from accelsched.live.workloadstatus import ours
from accelsched.queues.admission import QueueResult
from accelsched.queues.api import STOP_NONE
from accelsched.queues.resources import format_amount

ACTIVE = "Active"  # kueue.ClusterQueueActive
READY = {"type": ACTIVE, "status": "True", "reason": "Ready", "message": "Can admit new workloads"}


def _flavor_usage(result: QueueResult, name: str) -> list[JSON]:
    cq = result.objects.cluster_queues[name]
    node = result.tree.cluster_queues.get(name)
    usage = node.usage if node is not None else {}
    out = []
    for rg in cq.resource_groups:
        for fq in rg.flavors:
            quotas = {q.name: q.nominal for q in fq.resources}
            resources = []
            for resource in sorted(rg.covered):
                used = usage.get((fq.name, resource), 0)
                entry = {"name": resource, "total": format_amount(resource, used)}
                borrowed = used - quotas.get(resource, 0)
                if cq.cohort and borrowed > 0:
                    entry["borrowed"] = format_amount(resource, borrowed)
                resources.append(entry)
            out.append({"name": fq.name, "resources": resources})
    return out


def _active(result: QueueResult, name: str) -> bool:
    """ClusterQueueReadiness's active: not stopped, every flavor there, not in a cohort loop (admission's own)."""
    cq = result.objects.cluster_queues[name]
    flavors = {fq.name for rg in cq.resource_groups for fq in rg.flavors}
    return cq.stop_policy == STOP_NONE and flavors <= set(result.objects.flavors) and name not in result.tree.in_cycle


def statuses(result: QueueResult) -> dict[str, JSON]:
    """Each active ClusterQueue's status fields as the round decided them (the Active condition without its
    lastTransitionTime and observedGeneration)."""
    counts: dict[str, list[int]] = {name: [0, 0] for name in result.objects.cluster_queues}
    for o in result.outcomes:
        if o.cluster_queue in counts:
            counts[o.cluster_queue][1 if o.admitted else 0] += 1
    out = {}
    for name, (pending, reserving) in counts.items():
        if not _active(result, name):
            continue
        usage = _flavor_usage(result, name)
        out[name] = {
            "pendingWorkloads": pending,
            "reservingWorkloads": reserving,
            "admittedWorkloads": reserving,
            "flavorsReservation": usage,
            "flavorsUsage": usage,
            "conditions": [READY],
        }
    return out


def _same(current: Mapping[str, Any], wanted: JSON) -> bool:
    for key, value in wanted.items():
        if key == "conditions":
            active = next((c for c in current.get("conditions") or [] if c.get("type") == ACTIVE), {})
            if any(active.get(f) != READY[f] for f in READY):
                return False
        elif (current.get(key) or ([] if isinstance(value, list) else 0)) != value:
            return False
    return True


def status_patches(
    result: QueueResult,
    cluster_queues: Mapping[str, JSON],
    workloads: Mapping[str, JSON],
    scheduler_names: Collection[str],
    now: str | None = None,
    written: Mapping[str, JSON] | None = None,
) -> dict[str, JSON]:
    """ClusterQueue name -> the merge patch of its status subresource, for those (in the cache, ``cluster_queues``
    by name) whose status does not say what the round decided. Only ClusterQueues holding a Workload object of
    ours (``workloads``: the cache's, by namespace/name) are written: where Kueue admits the others, its controller
    writes their queues' status. ``written``: the status last sent for each, which the cache may not show yet; it
    stands for the cache's (else a round deciding what the cache still shows, after one that decided otherwise and
    wrote it, would write nothing, and the queue would keep the older counts)."""
    now = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    mine = _queues_of_ours(result, workloads, scheduler_names)
    out = {}
    for name, wanted in statuses(result).items():
        doc = cluster_queues.get(name)
        if doc is None or name not in mine:
            continue
        current = (written or {}).get(name) or doc.get("status") or {}
        if _same(current, wanted):
            continue
        conditions = [dict(c) for c in current.get("conditions") or [] if c.get("type") != ACTIVE]
        before = next((c for c in current.get("conditions") or [] if c.get("type") == ACTIVE), {})
        since = before.get("lastTransitionTime") if before.get("status") == "True" else None
        active = {**READY, "lastTransitionTime": since or now}
        generation = (doc.get("metadata") or {}).get("generation")
        if isinstance(generation, int):
            active["observedGeneration"] = generation
        out[name] = {"status": {**wanted, "conditions": [*conditions, active]}}
    return out


def _queues_of_ours(result: QueueResult, workloads: Mapping[str, JSON], scheduler_names: Collection[str]) -> set[str]:
    """The ClusterQueues our Workload objects' LocalQueues point at, finished ones included (the last one's finish
    must still bring its queue's counts back to zero)."""
    out: set[str] = set()
    every = len(result.objects.cluster_queues)
    for key, doc in workloads.items():
        queue_name = (doc.get("spec") or {}).get("queueName")
        local = result.objects.local_queues.get(f"{key.split('/')[0]}/{queue_name}")
        if local is not None and local.cluster_queue not in out and ours(doc, scheduler_names):
            out.add(local.cluster_queue)
            if len(out) >= every:
                break  # every queue is ours: the rest need not be read (a long history of finished Workloads)
    return out


def status_only(old: JSON, new: JSON) -> bool:
    """Whether a ClusterQueue event changed its status alone (what the door writes itself each round): nothing
    admission reads (its spec, labels, deletion) changed."""

    def read(doc: JSON) -> tuple[Any, ...]:
        meta = doc.get("metadata") or {}
        return doc.get("spec"), meta.get("labels"), meta.get("deletionTimestamp")

    return read(old) == read(new)
