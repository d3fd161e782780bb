"""A gang on the fabric: what it asks (framework.gang's PodGroup, else its pods' Kueue annotations), how many of
its pods each node takes now, and Kueue's BestFit placement (fabric.placement) turned into one node per member,
members in rank order. Coscheduling runs the members' full cycles on those nodes, all or nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from accelsched.api.objects import Pod, describe
from accelsched.errors import Where
from accelsched.fabric import explain as fabric_explain
from accelsched.fabric import levels as fabric_levels
from accelsched.fabric import placement, request
from accelsched.framework import gang

if TYPE_CHECKING:
    from accelsched.framework.scheduler import Scheduler

NO_WHOLE_SLICE = "the gang's placement left no whole slice for this pod"


@dataclass
class Plan:
    request: request.TopologyRequest
    members: list[Pod]  # rank order
    nodes: list[int] = field(default_factory=list)  # one per planned member (the first len(nodes) in rank order)
    reason: str = ""  # why no placement (Kueue's message), empty when ``nodes`` holds one
    notes: list[str] = field(default_factory=list)  # per domain: how many pods fit, the smallest change
    used: list[int] = field(default_factory=list)  # domains used per level, widest first, nodes last
    keys: tuple[str, ...] = ()


def gang_request(group: gang.PodGroup, members: list[Pod]) -> request.TopologyRequest:
    """The PodGroup's own request, else its first member's Kueue annotations (a Job's template's)."""
    if group.required_topology or group.preferred_topology or group.slice_topology:
        return request.TopologyRequest(
            required=group.required_topology,
            preferred=group.preferred_topology,
            slice_level=group.slice_topology,
            slice_size=group.slice_size,
        )
    first = members[0]
    where = Where(first.source, describe("Pod", first.namespace, first.name))
    return request.parse_annotations(first.annotations, where)


def rank_order(members: list[Pod]) -> list[Pod]:
    return sorted(members, key=lambda p: request.rank(p.labels, p.annotations, p.name))


def capacity(sched: Scheduler, pod: Pod) -> np.ndarray:
    """How many pods like ``pod`` each node takes now: its filters' verdict (one pod), then free // request for
    every resource it asks for (a pod slot included). Kueue's fillInCounts, on the scheduler's own filters."""
    cluster = sched.cluster
    feasible = sched.feasible(pod)
    counts = np.where(feasible, np.iinfo(np.int32).max, 0).astype(np.int64)
    for row, amount in cluster.request_vector(pod):
        if amount > 0:
            counts = np.minimum(counts, cluster.free[row] // amount)
    return counts


def full_capacity(sched: Scheduler, pod: Pod) -> np.ndarray:
    """The same on every node were it empty: what freeing a node would give (explain's smallest change)."""
    cluster = sched.cluster
    counts = np.full(cluster.n, np.iinfo(np.int32).max, dtype=np.int64)
    for row, amount in cluster.request_vector(pod):
        if amount > 0:
            counts = np.minimum(counts, cluster.allocatable[row] // amount)
    return counts


def tree_for(sched: Scheduler, keys: tuple[str, ...]) -> placement.Tree:
    cluster = sched.cluster
    label_levels = [k for k in keys if k != fabric_levels.HOSTNAME]  # the node is always the innermost level
    cols = [placement.Level(k, cluster.labels(k).codes, cluster.labels(k).values) for k in label_levels]
    return placement.build_tree(cols, sched.node_names)


def level_keys(req: request.TopologyRequest, topologies: tuple) -> tuple[str, ...]:
    """The levels the request works within (fabric.levels.levels_for); a slice level not among them is added below,
    as a Topology without it would be refused by Kueue ("no requested topology level for slices")."""
    key = req.level or req.slice_level
    keys = fabric_levels.levels_for(key, topologies)
    if req.slice_level and req.slice_level not in keys:
        keys = (*keys, req.slice_level)
    return tuple(k for k in keys if k != fabric_levels.HOSTNAME)


def _index(keys: tuple[str, ...], key: str) -> int:
    """A level's index in the tree: ``kubernetes.io/hostname`` is the node level, below every label level."""
    return len(keys) if key == fabric_levels.HOSTNAME else keys.index(key)


def counts(group: gang.PodGroup, members: list[Pod], size: int) -> list[int]:
    """How many pods to place: the whole gang, else minMember rounded up to whole slices."""
    out = [len(members)]
    smallest = -(-group.min_member // size) * size
    if smallest < len(members):
        out.append(smallest)
    return out


def levels_of(sched: Scheduler, req: request.TopologyRequest, keys: tuple[str, ...]) -> placement.Ask:
    # A required or preferred level sits where the request names it; a slice-only request starts at the top.
    level = _index(keys, req.level) if req.level else 0
    slice_level = _index(keys, req.slice_level) if req.slice_level else None
    named = req.level or (keys[0] if keys else "")
    topology = next((t.name for t in sched.topologies if named in t.levels), "") or "/".join(keys) or "nodes"
    return placement.Ask(level, slice_level, req.slice_size if req.slice_level else 1, topology)


def plan(sched: Scheduler, group: gang.PodGroup, members: list[Pod], req: request.TopologyRequest) -> Plan:
    ordered = rank_order(members)
    keys = level_keys(req, sched.topologies)
    out = Plan(req, ordered, keys=keys)
    tree = tree_for(sched, keys)
    caps = capacity(sched, ordered[0])
    at = levels_of(sched, req, keys)
    for count in counts(group, ordered, at.size):
        placed = at.place(tree, caps, count, bool(req.required))
        if placed.fits:
            out.nodes, out.used, out.reason = placed.nodes, placed.used, ""
            return out
        out.reason = out.reason or placed.reason
    out.notes = fabric_explain.domain_notes(tree, caps, full_capacity(sched, ordered[0]), len(ordered), at)
    return out
