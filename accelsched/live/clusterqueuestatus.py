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
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from accelsched.live.kube import JSON
from accelsched.live.workloadstatus import ours
from accelsched.queues.admission import Outcome, QueueResult
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


class Counts:
    """Per ClusterQueue, its workloads pending and reserving (the queue manager's Pending, the cache's reserving),
    kept from round to round: a round followed in place (live/workloaddeltas.py) recounts the outcomes it can have
    changed and drops those it forgot, instead of counting every outcome again (thousands waiting in Kueue's
    performance harness: summed each round, the counts grew the round with the backlog)."""

    def __init__(self, outcomes: Iterable[Outcome] = ()) -> None:
        self._counts: dict[str, list[int]] = {}  # ClusterQueue -> [pending, reserving]
        self._counted: dict[int, tuple[Outcome, str, bool]] = {}  # by id: the outcome, as counted
        self._by_key: dict[str, Outcome] = {}  # namespace/name -> the outcome last counted under it
        for o in outcomes:
            self._count(o)

    def of(self, cluster_queue: str) -> tuple[int, int]:
        """(pending, reserving) of a ClusterQueue."""
        pending, reserving = self._counts.get(cluster_queue, (0, 0))
        return pending, reserving

    def update(self, changed: Iterable[Outcome], keys: Iterable[str], current: Mapping[str, Outcome]) -> set[str]:
        """After a round: ``changed``, the outcomes it can have changed, counted as they are now; of ``keys`` (the
        Workloads its events named), those whose outcome is no longer the one ``current`` (the admission's by
        namespace/name) holds, forgotten. The ClusterQueues these were in, before and after: the only ones whose
        counts or usage the round can have changed."""
        touched: set[str] = set()
        for key in keys:
            counted = self._by_key.get(key)
            if counted is not None and current.get(key) is not counted:
                touched.add(self._uncount(counted))
                del self._by_key[key]
        for o in changed:
            touched.add(self._uncount(o))
            self._count(o)
            touched.add(o.cluster_queue)
        touched.discard("")
        return touched

    def _count(self, o: Outcome) -> None:
        self._counted[id(o)] = (o, o.cluster_queue, o.admitted)
        self._by_key[o.info.key] = o
        self._counts.setdefault(o.cluster_queue, [0, 0])[1 if o.admitted else 0] += 1

    def _uncount(self, o: Outcome) -> str:
        """The outcome no longer counted; the ClusterQueue it was counted in ("" if none)."""
        counted = self._counted.pop(id(o), None)
        if counted is None:
            return ""
        _, cluster_queue, admitted = counted
        self._counts[cluster_queue][1 if admitted else 0] -= 1
        return cluster_queue


def statuses(
    result: QueueResult, counts: Counts | None = None, only: Collection[str] | None = None
) -> dict[str, JSON]:
    """Each active ClusterQueue's status fields as the round decided them (the Active condition without its
    lastTransitionTime and observedGeneration). ``counts``: the workloads counted so far (Counts), else counted
    from every outcome. ``only``: the ClusterQueues whose status the round can have changed (Counts.update), else
    every one."""
    counts = Counts(result.outcomes) if counts is None else counts
    out = {}
    names = result.objects.cluster_queues if only is None else [n for n in only if n in result.objects.cluster_queues]
    for name in names:
        if not _active(result, name):
            continue
        pending, reserving = counts.of(name)
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


def same_conditions(doc: Mapping[str, Any] | None, patch: JSON) -> bool:
    """The ClusterQueue (the cache's) shows already each condition ``patch`` sets (type, status, reason, message):
    the patch changes its usage and counts alone, what Kueue's controller batches (live/queuedoor.py)."""
    shown = {c.get("type"): c for c in ((doc or {}).get("status") or {}).get("conditions") or []}
    return doc is not None and all(
        all((shown.get(c.get("type")) or {}).get(f) == c.get(f) for f in ("status", "reason", "message"))
        for c in (patch.get("status") or {}).get("conditions") or []
    )


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
    counts: Counts | None = None,
    witnesses: dict[str, str] | None = None,
    only: Collection[str] | None = None,
) -> dict[str, JSON]:
    """ClusterQueue name -> the merge patch of its status subresource, for those (in the cache, ``cluster_queues``
    by name) whose status does not say what the round decided. Only ClusterQueues holding a Workload object of
    ours (``workloads``: the cache's, by namespace/name) are written: where Kueue admits the others, its controller
    writes their queues' status. ``written``: the status last sent for each, which the cache may not show yet; it
    stands for the cache's (else a round deciding what the cache still shows, after one that decided otherwise and
    wrote it, would write nothing, and the queue would keep the older counts). ``counts``: statuses'; ``witnesses``:
    _queues_of_ours', kept by the caller from round to round; ``only``: statuses'. A round followed in place names
    the ClusterQueues it touched: at 1,000 ClusterQueues, working out every one's status each round was a third of
    the door's time (Kueue's performance harness, large-scale)."""
    now = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    differing = {}
    for name, wanted in statuses(result, counts, only).items():
        doc = cluster_queues.get(name)
        if doc is None:
            continue
        current = (written or {}).get(name) or doc.get("status") or {}
        if not _same(current, wanted):
            differing[name] = (doc, current, wanted)
    mine = _queues_of_ours(result, workloads, scheduler_names, differing, witnesses)
    out = {}
    for name, (doc, current, wanted) in differing.items():
        if name not in mine:
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


def _queues_of_ours(
    result: QueueResult,
    workloads: Mapping[str, JSON],
    scheduler_names: Collection[str],
    names: Collection[str],
    witnesses: dict[str, str] | None = None,
) -> set[str]:
    """Of the ClusterQueues ``names``, those our Workload objects' LocalQueues point at, finished ones included
    (the last one's finish must still bring its queue's counts back to zero). ``witnesses``: per ClusterQueue, the
    Workload (namespace/name) found pointing at it last time, read first: while it is there, the store is not read
    (a long history of finished Workloads, or thousands waiting); one found is noted there."""
    out: set[str] = set()
    witnesses = {} if witnesses is None else witnesses
    for name in names:
        key = witnesses.get(name)
        doc = workloads.get(key) if key is not None else None
        if key is not None and doc is not None and _cluster_queue_of(result, key, doc, scheduler_names) == name:
            out.add(name)
    left = set(names) - out
    if not left:
        return out
    for key, doc in workloads.items():
        name = _cluster_queue_of(result, key, doc, scheduler_names)
        if name in left:
            out.add(name)
            witnesses[name] = key
            left.discard(name)
            if not left:
                break  # the rest need not be read
    return out


def _cluster_queue_of(result: QueueResult, key: str, doc: JSON, scheduler_names: Collection[str]) -> str | None:
    """The ClusterQueue a Workload of ours points at through its LocalQueue (None: not ours, or none)."""
    queue_name = (doc.get("spec") or {}).get("queueName")
    local = result.objects.local_queues.get(f"{key.split('/')[0]}/{queue_name}")
    if local is None or not ours(doc, scheduler_names):
        return None
    return local.cluster_queue


def status_only(old: JSON, new: JSON) -> bool:
    """Whether a ClusterQueue event changed its status alone (what the door writes itself each round): nothing
    admission reads (its spec, labels, deletion) changed."""

    def read(doc: JSON) -> tuple[Any, ...]:
        meta = doc.get("metadata") or {}
        return doc.get("spec"), meta.get("labels"), meta.get("deletionTimestamp")

    return read(old) == read(new)
