"""Results as the CLI contract's JSON, as YAML objects, and as tables a person reads (rich)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from accelsched.api import quantity
from accelsched.api.objects import SCHEDULING_GATED_REASON
from accelsched.cluster.state import ClusterState
from accelsched.devices import partition as partitioning
from accelsched.dra.model import DeviceID
from accelsched.framework.scheduler import ScheduleResult
from accelsched.queues import report as queue_report

if TYPE_CHECKING:
    from accelsched.explain import Explanation


def pod_json(r: ScheduleResult, dra: Any = None, reasons: bool = False) -> dict[str, Any]:
    """The contract's pod entry; ``preempted`` (the evicted pods, ``namespace/name``) only when it preempted, and
    ``claims`` (design.md: per pod claim, the ResourceClaim and its allocated devices) only for a pod with claims,
    from the cluster's DRA state ``dra`` (dra/state.py). ``reasons`` (``schedule --reasons``) adds each rejected
    node's reasons, which the scheduler keeps only when asked (``Scheduler.keep_diagnosis``)."""
    out: dict[str, Any] = {
        "namespace": r.pod.namespace,
        "name": r.pod.name,
        "node": r.node,
        "devices": {k: list(v) for k, v in r.devices.items()},
        "message": r.message,
    }
    if reasons:
        out["reasons"] = {node: list(why) for node, why in r.reasons.items()}
    if r.preempted:
        out["preempted"] = [v.key for v in r.preempted]
    if dra is not None and (_has_claims(r.pod) or dra.extended_claim_key(r.pod)):
        out["claims"] = dra.pod_claim_results(r.pod)
    return out


def _has_claims(pod: Any) -> bool:
    return bool((pod.raw.get("spec") or {}).get("resourceClaims"))


def node_json(cluster: ClusterState, i: int) -> dict[str, Any]:
    def fmt(matrix: Any) -> dict[str, str]:
        return {
            res: quantity.format_quantity(res, int(matrix[row, i]))
            for row, res in enumerate(cluster.resources)
            if cluster.allocatable[row, i] or cluster.requested[row, i]
        }

    return {"name": cluster.nodes[i].name, "allocatable": fmt(cluster.allocatable), "requested": fmt(cluster.requested)}


def to_json(results: list[ScheduleResult], cluster: ClusterState, reasons: bool = False) -> dict[str, Any]:
    """The design.md contract: pods in the order they were scheduled, then every node's capacity; with
    ``reasons``, each pod's per-node reasons too."""
    dra = getattr(cluster, "dra", None)
    pods = [pod_json(r, dra, reasons) for r in results]
    return {"pods": pods, "nodes": [node_json(cluster, i) for i in range(cluster.n)]}


def queues_json(queues: Any) -> dict[str, Any]:
    """The contract's ``workloads`` and ``clusterQueues``, when the input had Kueue's objects (queues/report.py)."""
    if queues is None:
        return {}
    return {
        "workloads": queue_report.workloads_json(queues),
        "clusterQueues": queue_report.cluster_queues_json(queues),
    }


def print_queue_tables(console: Console, queues: Any) -> None:
    """The workloads and ClusterQueues, when the input had Kueue's objects (queues/report.py)."""
    if queues is not None:
        console.print(queue_report.workloads_table(queues))
        console.print(queue_report.cluster_queues_table(queues))


def to_objects(results: list[ScheduleResult], cluster: ClusterState | None = None) -> dict[str, Any]:
    """The pods as a ``kind: List`` with spec.nodeName, the devices annotation and PodScheduled condition set; with
    DRA, a pod's ``status.resourceClaimStatuses`` for claims made from its templates (the resourceclaim controller's),
    then every ResourceClaim with ``status.allocation`` and ``status.reservedFor`` as the API holds them after
    kube-scheduler's PreBind."""
    dra = getattr(cluster, "dra", None)
    items = []
    for r in results:
        pod = dict(r.pod.raw)
        status = dict(pod.get("status") or {})
        condition = {"type": "PodScheduled", "status": "True" if r.scheduled else "False"}
        if r.preempted_by:  # kube-scheduler marks a victim before deleting it
            condition = {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": f"{r.pod.scheduler_name}: {r.message}",
            }
        elif not r.scheduled:
            gated = r.gated is not None and r.pod.scheduling_gates  # the condition the API server set at creation
            condition.update(
                reason=SCHEDULING_GATED_REASON if gated else r.reason or "Unschedulable", message=r.message
            )
        kept = [c for c in status.get("conditions") or [] if c.get("type") != condition["type"]]
        status["conditions"] = [*kept, condition]
        status.setdefault("phase", "Pending")
        if dra is not None and _has_claims(r.pod):
            _claim_statuses(status, r.pod, dra)
        pod["status"] = status
        items.append(pod)
    if dra is not None:
        items.extend(dra.claims_out())
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _claim_statuses(status: dict[str, Any], pod: Any, dra: Any) -> None:
    """status.resourceClaimStatuses: the claim made for each template claim (name, resourceClaimName)."""
    made = [
        {"name": name, "resourceClaimName": key.split("/", 1)[1]}
        for name, key, from_template in dra.pod_claims(pod)
        if from_template and key
    ]
    if made:
        status["resourceClaimStatuses"] = made


def pods_table(results: list[ScheduleResult], title: str = "Pods", why: bool = True, dra: Any = None) -> Table:
    """One row per pod; ``dra`` (cluster.dra) adds each pod's allocated claim devices to its devices."""
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("pod")
    table.add_column("priority", justify="right")
    table.add_column("node")
    table.add_column("devices")
    if why:
        table.add_column("why not", overflow="fold")
    for r in results:
        parts = [f"{res}: {compact_ids(ids)}" for res, ids in r.devices.items()]
        if dra is not None and _has_claims(r.pod):
            for entry in dra.pod_claim_results(r.pod):
                if entry["results"]:
                    parts.append(f"claim {entry['name']}: {compact_ids([x['device'] for x in entry['results']])}")
        devices = "; ".join(parts)
        where = f"[green]{r.node}[/]" if r.node else "[yellow]Preempted[/]" if r.preempted_by else "[red]Pending[/]"
        cells = [r.pod.key, str(r.pod.priority), where, devices]
        table.add_row(*cells, *([r.message] if why else []))
    return table


def nodes_table(
    cluster: ClusterState, title: str = "Nodes: requested / allocatable", typical: list[dict[str, int]] | None = None
) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("node")
    table.add_column("state")
    shown = [r for r in cluster.resources if cluster.allocatable[cluster.res_index[r]].any()]
    for res in shown:
        table.add_column(res.rsplit("/", 1)[-1] if "/" in res else res, justify="right")
    table.add_column("free devices")
    split = cluster.has_partitions
    if split:
        table.add_column("split devices: used, fragmented")
    for i, node in enumerate(cluster.nodes):
        flags = []
        if node.unschedulable:
            flags.append("cordoned")
        flags.extend(str(t) for t in node.taints)
        cells = []
        for res in shown:
            row = cluster.res_index[res]
            req, alloc = int(cluster.requested[row, i]), int(cluster.allocatable[row, i])
            cells.append(f"{quantity.format_quantity(res, req)}/{quantity.format_quantity(res, alloc)}")
        free = "; ".join(compact_ids(p.free_ids()) for p in cluster.devices[i].pools.values())
        if getattr(cluster, "dra", None) is not None:
            free = "; ".join(x for x in (free, dra_free_cell(cluster, node.name)) if x)
        extra = [partition_cell(cluster.devices[i].partition, typical or [])] if split else []
        table.add_row(node.name, ", ".join(flags) or "ready", *cells, free, *extra)
    return table


def dra_free_cell(cluster: ClusterState, node: str) -> str:
    """``DRA 2/5 free``: the node's DRA devices (its pools' devices it can use) not allocated to any claim."""
    dra = cluster.dra
    devices = dra.devices_for_node(node)
    if not devices:
        return ""
    taken = dra.allocated
    free = sum(1 for s, d in devices if not taken.is_allocated(DeviceID(s.driver, s.pool.name, d.name)))
    return f"DRA {free}/{len(devices)} free"


def partition_cell(part: Any, typical: list[dict[str, int]]) -> str:
    if part is None:
        return ""
    unit = partitioning.UNIT_NAMES[part.mode]
    used, total = part.used_units(), part.total_units
    return f"{part.mode}: {used}/{total} {unit} used, {part.fragmentation(typical)} fragmented"


def partitions_by_mode(cluster: ClusterState) -> dict[str, list[Any]]:
    """The nodes' partition ledgers by mode (mig, slices, ...), sorted by mode: what fragmentation is summed over."""
    by_mode: dict[str, list[Any]] = {}
    for d in cluster.devices:
        if d.partition is not None:
            by_mode.setdefault(d.partition.mode, []).append(d.partition)
    return dict(sorted(by_mode.items()))


def fragmentation_line(cluster: ClusterState, typical: list[dict[str, int]]) -> str | None:
    """``Fragmentation: mig 12 of 40 free slices (30%), ...: free capacity that none of the requests seen can
    use`` (None without split devices)."""
    by_mode = partitions_by_mode(cluster)
    if not by_mode:
        return None
    parts = []
    for mode, group in by_mode.items():
        frag, free = partitioning.cluster_fragmentation(group, typical)
        share = f" ({100 * frag // free}%)" if free else ""
        parts.append(f"{mode} {frag} of {free} free {partitioning.UNIT_NAMES[mode]}{share}")
    return "Fragmentation: " + ", ".join(parts) + ": free capacity none of the requests seen can use"


def compact_ids(ids: list[str]) -> str:
    """``ai-accelerator-{1,2,3}`` rather than three long IDs; ``-`` for none."""
    if not ids:
        return "-"
    if len(ids) == 1:
        return ids[0]
    prefix = ids[0][: len(ids[0].rstrip("0123456789"))]
    if all(d.startswith(prefix) and d[len(prefix) :].isdigit() for d in ids):
        return f"{prefix}{{{','.join(d[len(prefix) :] for d in ids)}}}"
    return ",".join(ids)


def print_tables(console: Console, results: list[ScheduleResult], cluster: ClusterState) -> None:
    typical = [r.pod.requests for r in results]
    console.print(pods_table(results, dra=getattr(cluster, "dra", None)))
    console.print(nodes_table(cluster, typical=typical))
    line = fragmentation_line(cluster, typical)
    if line:
        console.print(line)


def print_explanation(console: Console, explanation: Explanation) -> None:
    r = explanation.result
    pod = explanation.pod
    if r is None:
        console.print(f"{pod.key} is already bound to {pod.node_name}; nothing to schedule.")
        return
    if r.node:
        console.print(
            f"[green]{pod.key} is scheduled on {r.node}[/]" + (f" with devices {r.devices}" if r.devices else "")
        )
        if explanation.alignment:
            aligned = explanation.alignment
            nic = f", beside {aligned['nic']}" if "nic" in aligned else ""
            console.print(f"aligned to NUMA node(s) {aligned.get('numaNodes', '?')}{nic}")
    elif r.preempted_by:
        console.print(f"[yellow]{pod.key} was preempted[/]")
        console.print(f"Normal  Preempted  {r.message}", soft_wrap=True)
    elif r.gated is not None:
        console.print(f"[yellow]{pod.key} is gated: it is not tried until every scheduling gate is removed[/]")
        console.print(f"PodScheduled=False  {SCHEDULING_GATED_REASON}  {r.message}", soft_wrap=True)
    else:
        console.print(f"[red]{pod.key} stays Pending[/]")
        console.print(f"Warning  FailedScheduling  {r.message}", soft_wrap=True)
    for note in explanation.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    if explanation.queue is not None:
        for line in explanation.queue.lines():
            console.print(f"[cyan]queue:[/] {escape(line)}", soft_wrap=True, highlight=False)
    if r.gated is not None:
        return  # never tried: no node was looked at
    table = Table(title="Node by node", title_justify="left", show_lines=True)
    for col in ("node", "verdict", "why", "what would help"):
        table.add_column(col, overflow="fold")
    for v in explanation.nodes:
        if v.feasible:
            parts = ", ".join(f"{k} {s}" for k, s in v.scores.items())
            table.add_row(v.node, f"[green]feasible[/] score {v.score}", parts, "")
        else:
            why = "\n".join([f"{v.first_filter}: {', '.join(v.reasons)}", *v.details])
            table.add_row(v.node, "[red]rejected[/]", why, "\n".join(v.remedies))
    console.print(table)
