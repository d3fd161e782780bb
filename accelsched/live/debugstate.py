"""``/debug/state``: what the live scheduler holds, as JSON, to compare with ``kubectl describe node`` and the pods.

``?node=NAME`` dumps that node's columnar row as the filters and scores read it: allocatable, requested (what
kubectl calls "Allocated resources": the requests of the pods on it, assumed ones included), the non-zero requests
the scores use, free, labels and taints as decoded, the cordon, devices free and held (and by which pod), and the
pods accounted on it. Always: the queue (active, backoff, unschedulable, gated, as scheduler_pending_pods counts
them) with each pod's attempts and last failure, and the decisions whose binding is not confirmed yet (assumed).

Quantities are printed as kubectl prints them (``format_quantity``: 1500m, 4Gi). The row is read while the loop
may be scheduling: each read copies what it needs and a read that races a change is retried, so an answer is a
consistent-enough view for a human, not a transaction.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from accelsched.api.quantity import format_quantity
from accelsched.live.metrics import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, DebugStateError

if TYPE_CHECKING:
    from accelsched.cluster.state import ClusterState
    from accelsched.live.scheduler import LiveScheduler

PARAMETERS = ("node",)
RETRIES = 5  # a read that races the loop's change of a dict is retried this often


def parse_query(params: dict[str, list[str]]) -> str | None:
    """The node asked for (None: the queue only). A bad query raises DebugStateError(400)."""
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise DebugStateError(400, f"unknown query parameter {unknown[0]!r} (known: {', '.join(PARAMETERS)})")
    nodes = params.get("node")
    if nodes is None:
        return None
    if len(nodes) != 1:
        raise DebugStateError(400, "node: give one node name")
    if not nodes[0]:
        raise DebugStateError(400, "node: empty name")
    return nodes[0]


def _quantities(resources: list[str], column: Any) -> dict[str, str]:
    return {res: format_quantity(res, int(amount)) for res, amount in zip(resources, column, strict=True) if amount}


def node_row(cluster: ClusterState, name: str) -> dict[str, Any]:
    """One node's row of the columnar state (404 if the session has no such node)."""
    i = cluster.index.get(name)
    if i is None:
        raise DebugStateError(404, f"node {name!r} not found")
    node = cluster.nodes[i]
    resources = list(cluster.resources)
    pods = list(cluster.pods_on[i].values())
    held: dict[str, dict[str, str]] = {}
    for pod in pods:
        for res, ids in pod.devices.items():
            for device in ids:
                held.setdefault(res, {})[device] = pod.key
    devices: dict[str, Any] = {
        res: {"free": pool.free_ids(), "held": held.get(res, {})} for res, pool in cluster.devices[i].pools.items()
    }
    partition = cluster.devices[i].partition
    row: dict[str, Any] = {
        "name": node.name,
        "unschedulable": bool(cluster.unschedulable[i]),
        "labels": dict(node.labels),
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints],
        "allocatable": _quantities(resources, cluster.allocatable[:, i]),
        "requested": _quantities(resources, cluster.requested[:, i]),
        "nonzeroRequested": _quantities(resources[:2], cluster.nonzero_requested[:, i]),
        "free": _quantities(resources, cluster.free[:, i]),
        "devices": devices,
        "pods": [
            {
                "pod": pod.key,
                "uid": pod.uid,
                "priority": pod.priority,
                "requests": {r: format_quantity(r, a) for r, a in sorted(pod.requests.items()) if a},
                **({"devices": pod.devices} if pod.devices else {}),
            }
            for pod in sorted(pods, key=lambda p: p.key)
        ],
    }
    if partition is not None:
        row["partition"] = partition.describe_instances()
    return row


def queue_state(scheduler: LiveScheduler) -> dict[str, Any]:
    """The pending pods by kube-scheduler's queue (counted as scheduler_pending_pods counts them: gang members
    held back for their gang are gated), each with its attempts and last failure, and the assumed decisions."""
    now = time.monotonic()
    with scheduler.lock:
        pools = {
            ACTIVE: dict(scheduler.new_pending),
            BACKOFF: dict(scheduler.backing_off),
            UNSCHEDULABLE: dict(scheduler.unschedulable),
            GATED: dict(scheduler.gated),
        }
        waiting = dict(scheduler.waiting)
        assumed = [(key, d.node, d.pod.uid in scheduler.in_flight) for key, d in scheduler.assumed.items()]
        ready_at = {key: scheduler.backoff.ready_at(_uid(obj)) for key, obj in pools[BACKOFF].items()}
    for key in list(pools[UNSCHEDULABLE]):
        if key in waiting:
            pools[GATED][key] = pools[UNSCHEDULABLE].pop(key)
    out: dict[str, Any] = {}
    for queue, pool in pools.items():
        entries = []
        for key, obj in sorted(pool.items()):
            entry: dict[str, Any] = {"pod": key, "uid": _uid(obj)}
            info = scheduler.metrics.queue.info(_uid(obj))
            if info is not None:
                entry["attempts"] = info.attempts
                if info.initial is not None:
                    entry["queuedSeconds"] = round(now - info.initial, 3)
                if info.last_failure:
                    entry["lastFailure"] = info.last_failure
            if key in waiting:
                entry["waiting"] = waiting[key]
            if (obj.get("spec") or {}).get("schedulingGates"):
                entry["schedulingGates"] = [g.get("name") for g in obj["spec"]["schedulingGates"]]
            if queue == BACKOFF:
                entry["backoffRemainingSeconds"] = round(max(0.0, ready_at[key] - now), 3)
            entries.append(entry)
        out[queue] = entries
    out["assumed"] = [{"pod": key, "node": node, "binding": flight} for key, node, flight in sorted(assumed)]
    return out


def state(scheduler: LiveScheduler, params: dict[str, list[str]]) -> dict[str, Any]:
    """The /debug/state body for ``params`` (the parsed query string)."""
    name = parse_query(params)
    session = scheduler.session
    if session is None:
        raise DebugStateError(503, "no scheduling state yet (caches not synced, or not leading)")
    body: dict[str, Any] = {"nodes": session.cluster.n, "rebuilds": scheduler.rebuilds}
    for attempt in range(RETRIES):
        try:
            if name is not None:
                body["node"] = node_row(session.cluster, name)
            body["queue"] = queue_state(scheduler)
            return body
        except RuntimeError:  # a dict changed size under the read (the loop scheduling): read again
            if attempt == RETRIES - 1:
                raise DebugStateError(503, "state kept changing while read; retry") from None
            time.sleep(0.01)
    return body


def for_scheduler(scheduler: LiveScheduler) -> Any:
    """The HealthServer's ``debug_state`` callback for one scheduler."""
    return lambda params: state(scheduler, params)


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid"))
