"""``simulate --queues``: the time-based replay with tenants, admitted by Kueue's rules (accelsched/queues) before
the policy places them.

Each GPU pod of the trace is a one-pod Workload in a LocalQueue of the queues file: by the trace's own ``qos``
column (``--tenants qos``: LS, BE, Burstable, Guaranteed go to the LocalQueue of that name, lowercased), or spread
over the file's LocalQueues in turn (``--tenants localqueues``). CPU-only pods ask no GPU quota and run unqueued.
The GPU quota is counted in thousandths of a GPU (the trace's ``gpu_milli``: a pod sharing 0.46 of a GPU uses 0.46
of its queue's GPUs), so the file's ``nvidia.com/gpu`` quotas are GPUs and scaled here.

At every instant: the pods that end leave and give their quota back; arrivals are submitted; Kueue's cycles
admit what fits (borrowing, preempting as the ClusterQueues say); each admitted workload is placed by the policy
at once. One the policy cannot place (fragmented or mis-shaped nodes) gives its quota back and waits for a pod to
leave: admitted means placed (accelsched's rule; Kueue would keep it admitted and Pending). Preempted workloads
leave their nodes and queue again (their run starts over when readmitted).

Recorded per ClusterQueue (a tenant): its GPU share over time against the weighted DRF ideal (the capacity
water-filled by fairSharing.weight, capped at each tenant's demand then: what runs plus what waits), the wait
from arrival to placement (p50, p95), pods preempted and pods never run; for the cluster, the allocation rate,
to compare with the same policy without quotas (timeline.replay).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import heapq
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from accelsched.api.loader import load
from accelsched.errors import InputError
from accelsched.queues.admission import Outcome
from accelsched.queues.api import QueueObjects, ResourceGroup, ResourceQuota, map_quotas
from accelsched.queues.incremental import OpenAdmission
from accelsched.queues.room import RoomWaits
from accelsched.queues.workloads import Info, PodSet
from accelsched.sim.fragmentation import TypicalPods, trace_typical_pods
from accelsched.sim.replay import FastEngine, shapes_of
from accelsched.sim.timeline import next_instant
from accelsched.sim.trace import MILLI, Nodes, Pods, open_csv

GPU = "nvidia.com/gpu"
TENANT_MODES = ("qos", "localqueues")


def load_queues(path: str | Path) -> QueueObjects:
    """The Kueue objects of a file (validated as ``schedule -f`` validates them), GPU quotas scaled to milli."""
    objects = load([path]).queues
    if not objects.cluster_queues or not objects.local_queues:
        raise InputError("needs ClusterQueues and LocalQueues (kueue.x-k8s.io/v1beta2)", source=str(path))
    for cq in objects.cluster_queues.values():
        if not any(GPU in rg.covered for rg in cq.resource_groups):
            raise InputError(f"ClusterQueue {cq.name}: spec.resourceGroups: covers no {GPU}", source=str(path))
    scaled = dataclasses.replace(objects)
    scaled.cluster_queues = {
        name: dataclasses.replace(cq, resource_groups=_scaled(cq.resource_groups))
        for name, cq in objects.cluster_queues.items()
    }
    scaled.cohorts = {
        name: dataclasses.replace(c, resource_groups=_scaled(c.resource_groups)) for name, c in objects.cohorts.items()
    }
    scaled.local_queues = {  # admission fair sharing's starting usage, in the same milli-GPUs
        key: dataclasses.replace(lq, consumed={k: v * MILLI if k == GPU else v for k, v in lq.consumed.items()})
        for key, lq in objects.local_queues.items()
    }
    return scaled


def _scaled(groups: tuple[ResourceGroup, ...]) -> tuple[ResourceGroup, ...]:
    def milli(value: int | None) -> int | None:
        return None if value is None else value * MILLI

    def change(_flavor: str, q: ResourceQuota) -> ResourceQuota:
        if q.name != GPU:
            return q
        return dataclasses.replace(
            q, nominal=q.nominal * MILLI, borrowing_limit=milli(q.borrowing_limit), lending_limit=milli(q.lending_limit)
        )

    return map_quotas(groups, change)


def qos_column(pods: Pods) -> list[str]:
    """The trace's ``qos`` column, one value per pod (in the file's order, as Pods keeps it)."""
    with open_csv(Path(pods.source)) as f:
        rows = csv.DictReader(f)
        if "qos" not in (rows.fieldnames or []):
            raise InputError("has no qos column: use --tenants localqueues", source=pods.source)
        return [row["qos"] for row in rows]


def tenants(pods: Pods, objects: QueueObjects, mode: str) -> list[str]:
    """Each pod's LocalQueue (namespace/name)."""
    locals_ = list(objects.local_queues)
    if mode == "localqueues":
        return [locals_[i % len(locals_)] for i in range(pods.n)]
    by_name: dict[str, str] = {}
    for key, lq in objects.local_queues.items():
        if lq.name in by_name:
            raise InputError(
                f"two LocalQueues named {lq.name}: --tenants qos needs one per qos value", field="--queues"
            )
        by_name[lq.name] = key
    out = []
    for value in qos_column(pods):
        key = by_name.get(value.lower())
        if key is None:
            known = ", ".join(sorted(by_name))
            raise InputError(
                f"the trace's qos {value!r} has no LocalQueue {value.lower()!r} (have: {known})", field="--queues"
            )
        out.append(key)
    return out


@dataclass
class TenantStats:
    cluster_queue: str
    weight: Fraction
    pods: int = 0
    share: float = 0.0  # time-weighted mean share of the cluster's GPU milli, in the busy window
    ideal: float = 0.0  # the same for the weighted DRF ideal
    gap: float = 0.0  # time-weighted mean |share - ideal|
    waits: list[int] = field(default_factory=list)
    preempted: int = 0
    never: int = 0


@dataclass
class QueueTimeline:
    policy: str
    seed: int
    capacity: int
    times: np.ndarray
    allocated: np.ndarray  # GPU milli in use
    shares: np.ndarray  # (samples, tenants): GPU milli in use per tenant
    ideals: np.ndarray  # (samples, tenants): weighted DRF ideal GPU milli
    tenants: list[TenantStats]
    window: tuple[int, int]
    seconds: float
    placement_waits: int = 0  # pods admitted by quota but not placeable: quota given back, waited for capacity
    unschedulable: int = 0
    demands: np.ndarray | None = None  # (samples, tenants): GPU milli running or waiting per tenant

    def _span(self) -> np.ndarray:
        lo, hi = self.window
        ends = np.minimum(np.append(self.times[1:], hi), hi)
        return np.clip(ends - np.maximum(self.times, lo), 0, None).astype(np.float64)

    def mean_allocation(self) -> float:
        span = self._span()
        return float((self.allocated * span).sum() / span.sum() / self.capacity) if span.sum() else 0.0


def water_fill(capacity: float, weights: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """Weighted max-min fair shares of one resource (DRF with GPUs dominant): each tenant gets capacity in
    proportion to its weight, never more than it demands; what a satisfied tenant leaves goes to the others."""
    out = np.zeros_like(demand, dtype=np.float64)
    active = demand > 0
    left = float(capacity)
    while active.any() and left > 1e-9:
        per = left / weights[active].sum()
        room = demand - out
        capped = active & (room <= per * weights)
        if not capped.any():
            out[active] += per * weights[active]
            break
        out[capped] = demand[capped]
        left -= room[capped].sum()
        active &= ~capped
    return out


def replay(
    nodes: Nodes,
    pods: Pods,
    objects: QueueObjects,
    queue_of: list[str],
    policy: str,
    seed: int,
    typical: TypicalPods | None = None,
    tie_break: str = "paper",
    compress: float = 1.0,
) -> QueueTimeline:
    """The replay (see the module's docstring); ``queue_of`` is each pod's LocalQueue."""
    if pods.creation is None or pods.deletion is None:
        raise InputError(
            "has no creation_time/deletion_time columns: --queues replays on the trace's clock", source=pods.source
        )
    start = time.perf_counter()
    typical = typical or trace_typical_pods(pods, nodes.models)
    engine = FastEngine(nodes, typical, pods.specs, policy, seed, tie_break)
    cluster = engine.cluster
    admission = OpenAdmission(objects)
    names = list(objects.cluster_queues)
    column = {name: k for k, name in enumerate(names)}
    weights = np.array([float(objects.cluster_queues[n].fair_weight) for n in names])
    stats = [TenantStats(n, objects.cluster_queues[n].fair_weight) for n in names]
    shapes = shapes_of(pods)
    specs = pods.spec.tolist()
    gpu = (pods.num_gpu * pods.gpu_milli).astype(np.int64).tolist()
    created = (pods.creation / compress).astype(np.int64).tolist()
    duration = np.where(pods.deletion >= 0, pods.deletion - pods.creation, -1).tolist()
    order = sorted(range(pods.n), key=lambda i: (created[i], i))
    window = (int(np.percentile(created, 1)), int(np.percentile(created, 99)))
    leaving: list[tuple[int, int, int, int, tuple[int, ...]]] = []  # (time, pod, run, node, GPUs)
    run_of = [0] * pods.n  # a preempted pod's entry in ``leaving`` is stale once it runs again
    placed: dict[int, tuple[int, tuple[int, ...]]] = {}
    outcome_of: dict[int, object] = {}
    pod_of: dict[int, int] = {}  # id(Outcome) -> pod
    parked: RoomWaits[Outcome] = RoomWaits()  # admitted, not placeable: wait for a pod to leave (queues/room.py)
    cpu_waiting: list[int] = []
    use = np.zeros(len(names), dtype=np.int64)
    outstanding = np.zeros(len(names), dtype=np.int64)
    samples: list[tuple[int, int]] = []
    share_rows: list[np.ndarray] = []
    ideal_rows: list[np.ndarray] = []
    demand_rows: list[np.ndarray] = []
    unschedulable = 0
    wait_of: dict[int, int] = {}

    def tenant(i: int) -> int:
        return column[outcome_of[i].cluster_queue]  # type: ignore[attr-defined]

    def begin(i: int, now: int) -> bool:
        got = engine.schedule(shapes[i], specs[i])
        if got is None:
            return False
        node, gpus = got
        placed[i] = (node, gpus)
        run_of[i] += 1
        if duration[i] >= 0:
            heapq.heappush(leaving, (now + duration[i], i, run_of[i], node, gpus))
        if i in outcome_of:
            use[tenant(i)] += gpu[i]
            wait_of[i] = now - created[i]  # a preempted pod's wait counts from its arrival to its last start
        return True

    def may_fit(fits: dict[tuple, bool], o: Outcome) -> bool:
        """Whether a parked workload's shape is feasible now (``fits``: per shape, for one instant)."""
        i = pod_of[id(o)]
        key = (shapes[i], specs[i])
        if key not in fits:
            fits[key] = cluster.feasible(shapes[i], specs[i]).size > 0
        return fits[key]

    def admit(now: int) -> None:
        admitted, evicted = admission.run_cycles()
        for o in evicted:
            i = pod_of[id(o)]
            if i in placed:
                node, gpus = placed.pop(i)
                cluster.remove(node, shapes[i], gpus)
                use[tenant(i)] -= gpu[i]
                wait_of.pop(i, None)  # it waits again, from its arrival
            stats[tenant(i)].preempted += 1
        for o in admitted:
            i = pod_of[id(o)]
            if not begin(i, now):
                admission.release(o)
                parked.park(str(i), o, "")

    k = 0
    while k < len(order) or leaving:
        now = next_instant(created, order, k, leaving)
        admission.advance(now)
        left = False
        while leaving and leaving[0][0] == now:
            _, i, run, node, gpus = heapq.heappop(leaving)
            if run != run_of[i] or i not in placed:
                continue  # preempted since: that run never ended here
            placed.pop(i)
            cluster.remove(node, shapes[i], gpus)
            left = True
            if i in outcome_of:
                use[tenant(i)] -= gpu[i]
                outstanding[tenant(i)] -= gpu[i]
                admission.finish(outcome_of[i])  # type: ignore[arg-type]
        if left:
            # only what could be placed now goes back to its queue: the others would be admitted and given back
            # again at every departure (a shape that fits nowhere stays parked until one that frees room for it)
            for o in parked.freed(functools.partial(may_fit, {})):
                admission.requeue(o)
            cpu_waiting[:] = [i for i in cpu_waiting if not begin(i, now)]
        while k < len(order) and created[order[k]] == now:
            i = order[k]
            k += 1
            if not cluster.fits_empty(shapes[i], specs[i]):
                unschedulable += 1
            elif gpu[i] == 0:
                if not begin(i, now):
                    cpu_waiting.append(i)
            else:
                namespace, local_queue = queue_of[i].split("/", 1)
                requests = [PodSet("main", 1, {GPU: gpu[i]})]
                info = Info(namespace, pods.names[i], local_queue, requests, 0, f"{created[i]:015d}", i)
                o = admission.submit(info)
                if not o.cluster_queue:
                    raise InputError(f"pod {pods.names[i]}: {o.held_message}", field="--queues")
                outcome_of[i], pod_of[id(o)] = o, i
                stats[column[o.cluster_queue]].pods += 1
                outstanding[column[o.cluster_queue]] += gpu[i]
        admit(now)
        demand = outstanding.astype(np.float64)  # what runs plus what waits, per tenant
        samples.append((now, cluster.allocated))
        share_rows.append(use.copy())
        ideal_rows.append(water_fill(nodes.gpu_milli_capacity, weights, demand))
        demand_rows.append(demand)
    times = np.array([t for t, _ in samples], dtype=np.int64)
    out = QueueTimeline(
        policy,
        seed,
        nodes.gpu_milli_capacity,
        times,
        np.array([a for _, a in samples], dtype=np.int64),
        np.array(share_rows, dtype=np.float64).reshape(len(samples), len(names)),
        np.array(ideal_rows, dtype=np.float64).reshape(len(samples), len(names)),
        stats,
        window,
        0.0,
        len(parked.ever),
        unschedulable,
        np.array(demand_rows, dtype=np.float64).reshape(len(samples), len(names)),
    )
    span = out._span()
    for t, s in enumerate(stats):
        if span.sum():
            s.share = float((out.shares[:, t] * span).sum() / span.sum() / out.capacity)
            s.ideal = float((out.ideals[:, t] * span).sum() / span.sum() / out.capacity)
            s.gap = float((np.abs(out.shares[:, t] - out.ideals[:, t]) * span).sum() / span.sum() / out.capacity)
    for i, wait in wait_of.items():
        stats[tenant(i)].waits.append(wait)
    for o in [*admission.waiting(), *parked]:
        stats[column[o.cluster_queue]].never += 1
    out.seconds = time.perf_counter() - start
    return out


def percentile(values: Iterable[int], q: float) -> str:
    data = np.fromiter(values, dtype=np.int64)
    return f"{np.percentile(data, q):.0f}" if data.size else "-"
