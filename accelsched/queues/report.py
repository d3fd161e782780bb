"""The queue part of ``schedule``'s output: ``workloads`` and ``clusterQueues`` (design.md's CLI contract), and
the same as tables for a person."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.table import Table

from accelsched.queues import fairsharing
from accelsched.queues.admission import QueueResult
from accelsched.queues.api import ResourceQuota
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
    Kueue's status.flavorsReservation lists them: every flavor and resource of its resource groups; with fair
    sharing on, its weightedShare as Kueue's status.fairSharing reports it."""
    out = []
    for name, cq in result.objects.cluster_queues.items():
        usage: dict[str, dict[str, str]] = {}
        borrowed: dict[str, dict[str, str]] = {}
        for flavor, q, used in usage_rows(result, name):
            usage.setdefault(flavor, {})[q.name] = format_amount(q.name, used)
            borrowed.setdefault(flavor, {})[q.name] = format_amount(q.name, max(0, used - q.nominal))
        entry: dict[str, Any] = {"name": name, "cohort": cq.cohort or None, "usage": usage, "borrowed": borrowed}
        # Kueue's status.fairSharing, with fair sharing on (a queue in a cohort loop is inactive: no share)
        if result.objects.config.fair_sharing is not None and name not in result.tree.in_cycle:
            entry["fairSharing"] = {"weightedShare": fairsharing.share(result.tree.cluster_queues[name]).rounded()}
        out.append(entry)
    return out


def usage_rows(result: QueueResult, name: str) -> Iterator[tuple[str, ResourceQuota, int]]:
    """(flavor, its quota for a resource, the amount used) for every flavor and resource of a ClusterQueue."""
    node = result.tree.cluster_queues[name]
    for rg in result.objects.cluster_queues[name].resource_groups:
        for fq in rg.flavors:
            for q in fq.resources:
                yield fq.name, q, node.usage.get((fq.name, q.name), 0)


def workloads_table(result: QueueResult) -> Table:
    """The workloads for a person: where each queued, admitted or not, on which flavors, and Kueue's message."""
    table = Table(title="Workloads (Kueue)")
    for column in ("workload", "queue", "admitted", "flavors", "why not"):
        table.add_column(column, overflow="fold")
    for o in result.outcomes:
        info = o.info
        flavors = ", ".join(sorted({f for ps in o.flavors.values() for f in ps.values()})) if o.admitted else ""
        state = "yes" if o.admitted else ("preempted" if o.preempted else "no")
        table.add_row(
            f"{info.namespace}/{info.name}",
            f"{info.queue_name} -> {o.cluster_queue or '?'}",
            state,
            flavors,
            "" if o.admitted else o.held_message,
        )
    return table


def cluster_queues_table(result: QueueResult) -> Table:
    table = Table(title="ClusterQueues: used (borrowed) of nominal")
    for column in ("clusterqueue", "cohort", "flavor", "resources"):
        table.add_column(column, overflow="fold")
    for name, cq in result.objects.cluster_queues.items():
        cells: dict[str, list[str]] = {}
        for flavor, q, used in usage_rows(result, name):
            borrowed = max(0, used - q.nominal)
            shown = f"{q.name} {format_amount(q.name, used)}/{format_amount(q.name, q.nominal)}"
            cells.setdefault(flavor, []).append(
                shown + (f" ({format_amount(q.name, borrowed)} borrowed)" if borrowed else "")
            )
        for flavor, shown_cells in cells.items():
            table.add_row(name, cq.cohort or "-", flavor, ", ".join(shown_cells))
    return table
