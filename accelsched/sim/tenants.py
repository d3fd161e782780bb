"""``accelsched simulate --queues FILE``'s run and report: the replay with tenants (sim/queues.py) against the same
policy without quotas (sim/timeline.py), on the same pods, per seed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from accelsched.errors import InputError
from accelsched.sim import queues, timeline
from accelsched.sim.fragmentation import trace_typical_pods
from accelsched.sim.policies import POLICIES
from accelsched.sim.replay import check_inflatable, inflate
from accelsched.sim.trace import Nodes, Pods


def workload(nodes: Nodes, pods: Pods, queue_of: list[str], inflation: float, seed: int) -> tuple[Pods, list[str]]:
    """The trace's pods with random copies added until their GPU requests reach ``inflation`` x capacity (the
    paper's protocol: the openb lists ask less than the cluster has, so tenants never contend without it); each
    copy in its original's queue, arriving at its original's time."""
    if inflation <= 1.0:
        return pods, queue_of
    check_inflatable(pods)
    order = inflate(pods, nodes.gpu_milli_capacity, inflation, seed)
    return pods.take(order), [queue_of[i] for i in order]


def run(
    con: Console,
    nodes: Nodes,
    pods: Pods,
    policies: list[str],
    seeds: list[int],
    tie_break: str,
    compress: float,
    inflation: float,
    queues_path: str,
    tenant_mode: str,
    output: str,
    command: str,
) -> dict[str, Any]:
    """Replay with and without quotas for each policy and seed; print (or echo as JSON) the comparison."""
    if any(p not in POLICIES for p in policies):
        raise InputError("--queues runs the built-in policies only", field="--policy")
    objects = queues.load_queues(queues_path)
    queue_of = queues.tenants(pods, objects, tenant_mode)
    typical = trace_typical_pods(pods, nodes.models)
    started = time.perf_counter()
    body: dict[str, Any] = {"command": command, "queues": queues_path, "tenants": tenant_mode, "runs": []}
    for policy in policies:
        for seed in seeds:
            replayed, of = workload(nodes, pods, queue_of, inflation, seed)
            with_quotas = queues.replay(nodes, replayed, objects, of, policy, seed, typical, tie_break, compress)
            without = timeline.replay(nodes, replayed, policy, seed, typical, tie_break, compress)
            body["runs"].append(summary(with_quotas, without))
    body["wall_seconds"] = time.perf_counter() - started
    if output == "json":
        click.echo(json.dumps(body, indent=2))
    else:
        print_runs(con, body, pods.n, compress, inflation)
    return body


def summary(with_quotas: queues.QueueTimeline, without: timeline.Timeline) -> dict[str, Any]:
    quota_alloc, free_alloc = with_quotas.mean_allocation(), without.mean_allocation()
    return {
        "policy": with_quotas.policy,
        "seed": with_quotas.seed,
        "allocation": {
            "withQuotas": round(quota_alloc, 4),
            "withoutQuotas": round(free_alloc, 4),
            "differencePoints": round(100 * (quota_alloc - free_alloc), 2),
        },
        "peakAllocation": round(float(with_quotas.allocated.max() / with_quotas.capacity), 4)
        if with_quotas.allocated.size
        else 0.0,
        "placementWaits": with_quotas.placement_waits,
        "unschedulable": with_quotas.unschedulable,
        "withoutQuotasWait": {
            "p50": queues.percentile(without.delays, 50),
            "p95": queues.percentile(without.delays, 95),
        },
        "tenants": [
            {
                "clusterQueue": t.cluster_queue,
                "weight": str(t.weight),
                "pods": t.pods,
                "share": round(t.share, 4),
                "drfIdeal": round(t.ideal, 4),
                "meanGap": round(t.gap, 4),
                "waitP50": queues.percentile(t.waits, 50),
                "waitP95": queues.percentile(t.waits, 95),
                "waited": int(sum(1 for w in t.waits if w > 0)),
                "preempted": t.preempted,
                "neverRan": t.never,
            }
            for t in with_quotas.tenants
        ],
        "seconds": round(with_quotas.seconds, 1),
    }


def print_runs(con: Console, body: dict[str, Any], n_pods: int, compress: float, inflation: float) -> None:
    for r in body["runs"]:
        a = r["allocation"]
        table = Table(
            title=f"{r['policy']}, seed {r['seed']}: {n_pods} pods inflated to {inflation:.0%} of GPU capacity, "
            f"arrivals compressed x{compress:g}; GPU share per tenant (time-weighted mean) against the weighted "
            "DRF ideal",
            title_justify="left",
        )
        header = ["clusterqueue", "weight", "pods", "share", "DRF ideal", "mean |gap|", "waited", "p50 wait s"]
        for h in [*header, "p95 wait s", "preempted", "never ran"]:
            table.add_column(h, justify="left" if h == "clusterqueue" else "right")
        for t in r["tenants"]:
            table.add_row(
                t["clusterQueue"],
                t["weight"],
                str(t["pods"]),
                f"{t['share']:.1%}",
                f"{t['drfIdeal']:.1%}",
                f"{t['meanGap']:.1%}",
                str(t["waited"]),
                t["waitP50"],
                t["waitP95"],
                str(t["preempted"]),
                str(t["neverRan"]),
            )
        con.print(table)
        con.print(
            f"allocation rate: {a['withQuotas']:.2%} with quotas, {a['withoutQuotas']:.2%} without "
            f"({a['differencePoints']:+.2f} points); admitted but not placeable (quota given back, waited): "
            f"{r['placementWaits']}; {r['seconds']} s"
        )
    con.print(f"[dim]{body['command']}[/]")


def check_path(path: str) -> None:
    if not Path(path).is_file():
        raise InputError(f"no such file {path!r}", field="--queues")
