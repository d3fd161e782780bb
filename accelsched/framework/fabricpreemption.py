"""Topology-aware preemption for a gang on a fabric: victims chosen so that what is freed is one domain (of the
level the gang asks for) that then holds the whole gang, with the fewest evicted GPU-hours.

What per-pod preemption gets wrong for big gangs (kueue#10815, kueue#12478): each member frees room for itself,
wherever DefaultPreemption finds it, so the freed capacity is scattered over domains and the gang still does not
fit in any one of them. Here, for each domain of the requested level:
1. the lower-priority pods inside it (a running gang counts whole) are the candidates; if evicting all of them
   would not let the gang fit there, the domain is passed over: nothing is ever evicted for a gang that would
   still not fit;
2. two greedy passes, the cheaper kept: candidates one at a time cheapest first, and whole nodes at a time (all
   candidates on a node) cheapest node first, each until the gang fits, then any taken one that is not needed is
   put back (most expensive first). Cost is GPU-hours: device count x hours since ``status.startTime``, measured
   up to the latest start time in the cluster so a run is reproducible (one hour without a start time);
3. the domain whose victims cost least wins (then fewest devices, fewest pods, its name).
The victims are evicted, the gang placed as without preemption (fabric plan, full cycles on the planned nodes),
and the evictions stand only if the whole gang is then held; otherwise everything is put back.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import Pod
from accelsched.fabric import placement
from accelsched.framework import fabric, gang
from accelsched.framework.types import ScheduleResult

if TYPE_CHECKING:
    from accelsched.framework.coscheduling import Coscheduler
    from accelsched.framework.scheduler import Scheduler

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Unit:
    """What is evicted together: one pod, or a running gang whole."""

    pods: tuple[Pod, ...]
    nodes: np.ndarray
    cost: tuple[float, int, int]  # (GPU-hours, devices, pods)


def units(sched: Scheduler, priority: int, exclude: frozenset[str]) -> list[Unit]:
    """Bound pods of lower priority than ``priority``, grouped by running gang, with their cost."""
    cluster = sched.cluster
    bound = [p for pods in cluster.pods_on for p in pods.values() if p.key not in exclude]
    starts = [p.start_time for p in bound if p.start_time is not None]
    now = max(starts) if starts else None
    groups: dict[str, list[Pod]] = {}
    for pod in bound:
        groups.setdefault(gang.group_key(pod) or pod.key, []).append(pod)
    out = []
    for pods in groups.values():
        if any(p.priority >= priority for p in pods):
            continue  # a gang is evicted whole or not at all
        devices = hours = 0.0
        for p in pods:
            count = sum(a for r, a in p.requests.items() if quantity.is_extended(r))
            ran = (now - p.start_time) / SECONDS_PER_HOUR if now is not None and p.start_time is not None else 1.0
            devices += count
            hours += count * ran
        nodes = np.array([cluster.pod_node[p.key] for p in pods])
        out.append(Unit(tuple(pods), nodes, (round(hours, 6), int(devices), len(pods))))
    return out


def _fits(
    sched: Scheduler,
    taken: list[Unit],
    *,
    mask: np.ndarray,
    tree: placement.Tree,
    at: placement.Ask,
    first: Pod,
    count: int,
) -> bool:
    """Would ``count`` pods fit inside ``mask`` with ``taken`` evicted? The cluster is left as it was."""
    evicted = [(p, sched.evict(p)) for u in taken for p in u.pods]
    try:
        caps = np.where(mask, fabric.capacity(sched, first), 0)
        return at.place(tree, caps, count, True).fits
    finally:
        for pod, node in reversed(evicted):
            sched.restore(pod, node)


def choose(sched: Scheduler, group: gang.PodGroup, members: list[Pod], planned: fabric.Plan) -> list[Unit] | None:
    """The cheapest set of victims that frees one domain for the gang, or None when no domain can be freed."""
    keys = planned.keys
    at = fabric.levels_of(sched, planned.request, keys)
    if at.level >= len(keys):
        return None  # a one-node gang: DefaultPreemption's own business
    tree = fabric.tree_for(sched, keys)
    first = planned.members[0]
    count = fabric.counts(group, members, at.size)[-1]
    candidates = units(sched, min(p.priority for p in members), frozenset(p.key for p in members))
    best: tuple[tuple, list[Unit]] | None = None
    for d, name in enumerate(tree.names[at.level]):
        mask = np.zeros(sched.cluster.n, dtype=bool)
        mask[tree.nodes[tree.ids[at.level] == d]] = True
        inside = sorted((u for u in candidates if mask[u.nodes].any()), key=lambda u: u.cost)
        if not inside or not _fits(sched, inside, mask=mask, tree=tree, at=at, first=first, count=count):
            continue
        fits = functools.partial(_fits, sched, mask=mask, tree=tree, at=at, first=first, count=count)
        for batches in (_by_unit(inside), _by_node(inside, mask)):
            taken = _greedy(batches, fits)
            total = (*(sum(u.cost[i] for u in taken) for i in range(3)), name)
            if best is None or total < best[0]:
                best = (total, taken)
    return None if best is None else best[1]


def _by_unit(units: list[Unit]) -> list[list[Unit]]:
    """One unit at a time, cheapest first."""
    return [[u] for u in units]


def _by_node(units: list[Unit], mask: np.ndarray) -> list[list[Unit]]:
    """Whole nodes at a time (every candidate on it), cheapest node first: exact when the gang needs whole nodes."""
    per_node: dict[int, list[Unit]] = {}
    for unit in units:
        for node in {int(n) for n in unit.nodes if mask[n]}:
            per_node.setdefault(node, []).append(unit)
    return sorted(per_node.values(), key=lambda batch: tuple(sum(u.cost[i] for u in batch) for i in range(3)))


def _greedy(batches: list[list[Unit]], fits: Callable[[list[Unit]], bool]) -> list[Unit]:
    """Batches taken in order until the gang fits, then each taken unit not needed put back, most costly first."""
    taken: list[Unit] = []
    for batch in batches:
        taken += [u for u in batch if all(u is not t for t in taken)]
        if fits(taken):
            break
    for unit in sorted(taken, key=lambda u: u.cost, reverse=True):
        rest = [u for u in taken if u is not unit]
        if fits(rest):
            taken = rest
    return taken


def preempt(
    cos: Coscheduler, group: gang.PodGroup, members: list[Pod], planned: fabric.Plan
) -> list[ScheduleResult] | None:
    """Evict the chosen victims and place the gang; undone unless the whole gang is held."""
    sched = cos.scheduler
    victims = choose(sched, group, members, planned)
    if not victims:
        return None
    evicted = [(p, sched.evict(p, delete=True)) for u in victims for p in u.pods]
    again = fabric.plan(sched, group, members, planned.request)
    if again.nodes:
        results, held = cos.attempt_planned(again)
        if len(held) >= group.min_member:
            by_node = {h.node: h.pod for h in held}
            for victim, node in evicted:
                sched.preempt([victim], by_node.get(node, held[0].pod), node)
            out = cos.bind(members, results, held)
            for result in out:
                result.preempted = [v for v, node in evicted if by_node.get(node, held[0].pod) is result.pod]
            return out
        for h in reversed(held):
            sched.release(h)
    for pod, node in reversed(evicted):
        sched.restore(pod, node)
    return None
