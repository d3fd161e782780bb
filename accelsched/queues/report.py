"""The queue part of ``schedule -o json`` (design.md's CLI contract): ``workloads`` and ``clusterQueues``."""

from __future__ import annotations

from typing import Any

from accelsched.queues.admission import QueueResult
from accelsched.queues.resources import format_amount


def workloads_json(result: QueueResult) -> list[dict[str, Any]]:
    """Each workload as Kueue names it, where it queued, whether it was admitted, with which flavors, and its
    conditions (Kueue's types, reasons and messages)."""
    out = []
    for o in result.outcomes:
        info = o.info
        out.append(
            {
                "namespace": info.namespace,
                "name": info.name,
                "localQueue": info.queue_name,
                "clusterQueue": o.cluster_queue,
                "admitted": o.admitted,
                "preempted": o.preempted,
                "flavors": o.flavors if o.admitted else {},
                "conditions": list(o.conditions),
            }
        )
    return out


def cluster_queues_json(result: QueueResult) -> list[dict[str, Any]]:
    """Each ClusterQueue's usage and what it borrows (past its nominalQuota), per flavor and resource, as
    Kueue's status.flavorsReservation lists them: every flavor and resource of its resource groups."""
    out = []
    for name, cq in result.objects.cluster_queues.items():
        node = result.tree.cluster_queues[name]
        usage: dict[str, dict[str, str]] = {}
        borrowed: dict[str, dict[str, str]] = {}
        for rg in cq.resource_groups:
            for fq in rg.flavors:
                for q in fq.resources:
                    used = node.usage.get((fq.name, q.name), 0)
                    usage.setdefault(fq.name, {})[q.name] = format_amount(q.name, used)
                    borrowed.setdefault(fq.name, {})[q.name] = format_amount(q.name, max(0, used - q.nominal))
        out.append({"name": name, "cohort": cq.cohort or None, "usage": usage, "borrowed": borrowed})
    return out
