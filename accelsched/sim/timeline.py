"""Time-based replay, a mode the paper's simulator does not have: pods arrive at their creation time and leave
after their run time (deletion - creation), so capacity frees up and pods that found no room wait and retry.

One event loop over the trace's clock (SimPy-style, nothing else). The queue rule, applied at every instant:

1. The pods that end leave.
2. If something left, the waiting pods are retried in arrival order (within one pass, a request shape that did not
   fit is not tried again: nothing has left since, so it still cannot fit).
3. Every pod arriving now is tried at once, whether or not others wait (as kube-scheduler tries a new pod while
   unschedulable ones sit aside until a cluster event); one that does not fit joins the waiting pods.

A pod that does not fit even the empty cluster (more CPU, memory or GPUs than any node it accepts has) is rejected
at arrival and counted as unschedulable: no departure can ever make room for it, so it never waits. Recorded over
time: GPU allocation, fragmentation, and how many pods wait; per pod that had to wait, its queueing delay.

What arrives together is an ``Arrivals``: by default each pod alone, placed by the policy; ``simulate --fabric``
(sim/fabric.py) makes some of them gangs that start all or nothing. The rule above holds for either.
"""

from __future__ import annotations

import functools
import heapq
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from accelsched.errors import InputError
from accelsched.sim.cluster import SimCluster
from accelsched.sim.fragmentation import TypicalPods, trace_typical_pods
from accelsched.sim.policies import PodShape
from accelsched.sim.replay import FastEngine, shapes_of
from accelsched.sim.trace import Nodes, Pods

Placed = list[tuple[int, tuple[int, ...]]]  # per pod of a group: (node, GPU indices taken)


class Arrivals:
    """What arrives and starts together, and how it is placed: here each pod alone, by the policy."""

    def groups(self, pods: Pods) -> list[list[int]]:
        return [[i] for i in range(pods.n)]

    def fits_empty(self, engine: FastEngine, shapes: list[PodShape], specs: list[int], group: list[int]) -> bool:
        return engine.cluster.fits_empty(shapes[group[0]], specs[group[0]])

    def start(
        self, engine: FastEngine, shapes: list[PodShape], specs: list[int], group: list[int], now: int
    ) -> Placed | None:
        """Where each pod of ``group`` went, or None (nothing placed) when they do not all fit now."""
        placed = engine.schedule(shapes[group[0]], specs[group[0]])
        return None if placed is None else [placed]

    def may_start(
        self, engine: FastEngine, shapes: list[PodShape], specs: list[int], group: list[int], changed: np.ndarray
    ) -> bool:
        """False when ``group`` surely cannot start, knowing that it fit nowhere before the nodes ``changed`` did:
        then only those can have room (a queueing hint). A single pod fits on one of them or nowhere; a gang is
        always tried (a failed try may have effects, such as random draws)."""
        return len(group) != 1 or engine.cluster.fits_any(shapes[group[0]], specs[group[0]], changed)

    def instant(self, now: int, engine: FastEngine, waiting: Waiting) -> None:
        """Called once per instant, after its arrivals and departures (measures over time)."""


class Waiting:
    """The groups that found no room, queued by request (pod count, shape, GPU models), each queue in arrival
    order, with ``len(cluster.changes)`` when that request last fit nowhere. A retry pass then costs the number
    of distinct requests plus the groups it starts, not the number of groups waiting: kube-scheduler's cost, which
    grows with the cluster, never with Pending pods x nodes."""

    def __init__(self, groups: list[list[int]], shapes: list[PodShape], specs: list[int]) -> None:
        self.groups, self.shapes, self.specs = groups, shapes, specs
        self.queues: dict[tuple, deque[tuple[int, int]]] = {}  # request -> (arrival rank, group)
        self.failed_at: dict[tuple, int] = {}
        self.pods = 0  # pods waiting, all groups together
        self._rank = 0

    def request(self, g: int) -> tuple:
        first = self.groups[g][0]
        return len(self.groups[g]), self.shapes[first], self.specs[first]

    def add(self, g: int) -> None:
        self.queues.setdefault(self.request(g), deque()).append((self._rank, g))
        self._rank += 1
        self.pods += len(self.groups[g])

    def __bool__(self) -> bool:
        return bool(self.queues)

    def __len__(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def in_order(self, more_than: int = 0) -> list[list[int]]:
        """The waiting groups of more than ``more_than`` pods, in arrival order (for measures over them)."""
        queues = [queue for key, queue in self.queues.items() if key[0] > more_than]
        return [self.groups[g] for _, g in heapq.merge(*queues)]

    def retry(self, start: Callable[[int], bool], may_start: Callable[[int, int], bool], changes: list[int]) -> None:
        """One pass in arrival order; a request that does not fit is not tried again in the pass (nothing has
        left since, so it still cannot fit). ``may_start(g, since)`` answers first for a request known to fit
        nowhere at ``changes[since]``."""
        heads = [(queue[0][0], key) for key, queue in self.queues.items()]
        heapq.heapify(heads)
        while heads:
            _, key = heapq.heappop(heads)
            queue = self.queues[key]
            g = queue[0][1]
            since = self.failed_at.get(key)
            if (since is not None and not may_start(g, since)) or not start(g):
                self.failed_at[key] = len(changes)
                continue
            queue.popleft()
            self.pods -= len(self.groups[g])
            if queue:
                heapq.heappush(heads, (queue[0][0], key))
            else:
                del self.queues[key]


@dataclass
class Timeline:
    policy: str
    seed: int
    capacity: int
    times: np.ndarray  # seconds, one sample per instant something happened
    allocated: np.ndarray  # GPU milli in use
    frag: np.ndarray  # fragmented milli
    waiting: np.ndarray  # pods waiting
    delays: np.ndarray  # queueing delay (s) of each pod that waited and then ran
    never: int  # pods still waiting at the end of the trace
    pods: int
    seconds: float
    window: tuple[int, int] = (0, 0)  # from the 1st to the 99th percentile of arrivals: when the trace is busy
    unschedulable: int = 0  # pods rejected at arrival: they fit no node even of the empty cluster

    def _weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Which samples fall in the window, and how long each one lasted there."""
        lo, hi = self.window
        ends = np.minimum(np.append(self.times[1:], hi), hi)
        starts = np.maximum(self.times, lo)
        span = np.clip(ends - starts, 0, None).astype(np.float64)
        return span, span > 0

    def mean_allocation(self) -> float:
        """Time-weighted mean share of GPU milli in use while the pods arrive (a few very long pods would
        otherwise make the idle tail of the trace dominate)."""
        span, inside = self._weights()
        return float((self.allocated * span).sum() / span.sum() / self.capacity) if inside.any() else 0.0

    def mean_fragmentation(self) -> float:
        """Time-weighted mean fragmented share of the free GPU milli, over the same window."""
        span, inside = self._weights()
        free = np.maximum(self.capacity - self.allocated, 1)
        return float((self.frag / free * span).sum() / span.sum()) if inside.any() else 0.0


def next_instant(created: list[int], order: list[int], k: int, leaving: list[tuple]) -> int:
    """The next time something happens: the next arrival (``order[k]``) or the next departure (heap ``leaving``)."""
    return min(
        created[order[k]] if k < len(order) else np.iinfo(np.int64).max,
        leaving[0][0] if leaving else np.iinfo(np.int64).max,
    )


def replay(
    nodes: Nodes,
    pods: Pods,
    policy: str,
    seed: int,
    typical: TypicalPods | None = None,
    tie_break: str = "paper",
    compress: float = 1.0,
    observe: Callable[[int, SimCluster], None] | None = None,
    arrivals: Arrivals | None = None,
) -> Timeline:
    """Replay ``pods`` on their own clock. ``compress`` > 1 brings arrivals closer (creation times divided by it)
    while each pod keeps its run time: the openb trace's own clock never has more than ~1% of the GPUs asked for at
    once, so contention only appears compressed. ``observe`` (tests, tools) sees the cluster after every instant.
    ``arrivals`` groups pods that start together (default: each pod alone)."""
    if pods.creation is None or pods.deletion is None:
        raise InputError(
            "has no creation_time/deletion_time columns; the time-based replay needs them (use the inflation mode)",
            source=pods.source,
        )
    if compress <= 0:
        raise InputError(f"must be > 0, got {compress}", field="--compress")
    start = time.perf_counter()
    typical = typical or trace_typical_pods(pods, nodes.models)
    engine = FastEngine(nodes, typical, pods.specs, policy, seed, tie_break)
    cluster = engine.cluster
    shapes = shapes_of(pods)
    specs = pods.spec.tolist()
    created = (pods.creation / compress).astype(np.int64).tolist()
    duration = np.where(pods.deletion >= 0, pods.deletion - pods.creation, -1).tolist()
    arrivals = arrivals or Arrivals()
    groups = arrivals.groups(pods)
    group_created = [created[group[0]] for group in groups]  # a group arrives with its first pod
    order = sorted(range(len(groups)), key=lambda g: (group_created[g], groups[g][0]))
    window = (int(np.percentile(created, 1)), int(np.percentile(created, 99)))
    leaving: list[tuple[int, int, int, tuple[int, ...]]] = []  # (time, pod, node, GPUs)
    waiting = Waiting(groups, shapes, specs)
    delays: list[int] = []
    samples: list[tuple[int, int, float, int]] = []

    def start_group(g: int, now: int) -> bool:
        placed = arrivals.start(engine, shapes, specs, groups[g], now)
        if placed is None:
            return False
        for i, (node, gpus) in zip(groups[g], placed, strict=True):
            if duration[i] >= 0:
                heapq.heappush(leaving, (now + duration[i], i, node, gpus))
            if now > created[i]:
                delays.append(now - created[i])
        return True

    def may_start(g: int, since: int) -> bool:
        changed = np.unique(np.array(cluster.changes[since:], dtype=np.int64))
        return arrivals.may_start(engine, shapes, specs, groups[g], changed)

    unschedulable = 0
    k = 0
    while k < len(order) or leaving:
        now = next_instant(group_created, order, k, leaving)
        left = False
        while leaving and leaving[0][0] == now:
            _, i, node, gpus = heapq.heappop(leaving)
            cluster.remove(node, shapes[i], gpus)
            left = True
        if left and waiting:
            waiting.retry(functools.partial(start_group, now=now), may_start, cluster.changes)
        while k < len(order) and created[groups[order[k]][0]] == now:
            g = order[k]
            k += 1
            if not arrivals.fits_empty(engine, shapes, specs, groups[g]):
                unschedulable += len(groups[g])
            elif not start_group(g, now):
                waiting.failed_at[waiting.request(g)] = len(cluster.changes)
                waiting.add(g)
        arrivals.instant(now, engine, waiting)
        samples.append((now, cluster.allocated, cluster.fragmentation_milli, waiting.pods))
        if observe is not None:
            observe(now, cluster)
    t, alloc, frag, wait = (np.array(c) for c in zip(*samples, strict=True)) if samples else [np.zeros(0)] * 4
    return Timeline(
        policy,
        seed,
        nodes.gpu_milli_capacity,
        t,
        alloc,
        frag,
        wait,
        np.array(delays, dtype=np.int64),
        waiting.pods,
        pods.n,
        time.perf_counter() - start,
        window,
        unschedulable,
    )
