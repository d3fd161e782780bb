"""What a what-if's view takes from today's: the nodes provably unchanged, the label counts, the map's order.

A what-if changes a few nodes of 5,000. Its run (ui/incremental.py) shares today's Node objects, and the pods it
did not move; these helpers compare by identity first and look at values only where identity differs, so the
view of a what-if is built in time proportional to what changed, and equals the one built from scratch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

RESCAN_ABOVE = 64  # nodes changed past which the label counts are made again from every node


def same_nodes(before: Any, after: Any, nic: Callable[[Any], Any]) -> list[bool]:
    """For each node of cluster ``after``: True when its view provably equals ``before``'s node at the same index
    (view.node_signature's parts): the same Node object, the same allocatable and requested amounts, the same pods
    in the same order holding the same devices and NIC (``nic``: a pod's NIC annotation), no split devices. False
    means "compare the signatures"."""
    same = [False] * after.n
    m = min(before.n, after.n)
    if before.resources != after.resources or not m:
        return same
    equal = (before.allocatable[:, :m] == after.allocatable[:, :m]).all(axis=0)
    equal &= (before.requested[:, :m] == after.requested[:, :m]).all(axis=0)
    for i in np.flatnonzero(equal).tolist():
        if after.nodes[i] is not before.nodes[i]:
            continue
        if before.devices[i].partition is not None or after.devices[i].partition is not None:
            continue
        was, now = before.pods_on[i], after.pods_on[i]
        if list(was) != list(now):
            continue
        pairs = zip(was.values(), now.values(), strict=True)
        same[i] = all(p is q or (p.devices == q.devices and nic(p) == nic(q)) for p, q in pairs)
    return same


def _counted(nodes: list[Any]) -> dict[str, Counter[str]]:
    values: dict[str, Counter[str]] = {}
    for node in nodes:
        for k, v in node.labels.items():
            values.setdefault(k, Counter())[v] += 1
    return values


def label_counts(nodes: list[Any], today: Any = None) -> dict[str, Counter[str]]:
    """Label key -> value -> how many of ``nodes`` carry it. With ``today`` (today's run, where its own are kept):
    today's counts, less the labels of today's nodes that are not among ``nodes`` at their index (by identity),
    plus theirs."""
    if today is None:
        return _counted(nodes)
    old = today.session.cluster.nodes
    counts = today.cache.get("label_counts")
    if counts is None:
        counts = today.cache["label_counts"] = _counted(old)
    shared = min(len(old), len(nodes))
    changed = [i for i in range(shared) if old[i] is not nodes[i]] + list(range(shared, max(len(old), len(nodes))))
    if len(changed) > RESCAN_ABOVE:
        return _counted(nodes)
    values = {k: Counter(c) for k, c in counts.items()} if changed else counts
    for i in changed:
        if i < len(old):
            for k, v in old[i].labels.items():
                values[k][v] -= 1
                if not values[k][v]:
                    del values[k][v]
                if not values[k]:
                    del values[k]
        if i < len(nodes):
            for k, v in nodes[i].labels.items():
                values.setdefault(k, Counter())[v] += 1
    return values


def same_order(nodes: list[Any], group_by: str, today: Any, order: Callable[[list[Any], str], list[str]]) -> list[str]:
    """``order(nodes, group_by)``, or today's (``today``: its run, where it is kept) when ``nodes`` are today's by
    name and group value at every index: the order depends on nothing else."""
    if today is None:
        return order(nodes, group_by)
    old = today.session.cluster.nodes
    kept = today.cache.setdefault("node_order", {})
    names = kept.get(group_by)
    if names is None:
        names = kept[group_by] = order(old, group_by)
    if len(old) == len(nodes) and all(
        a is b or (a.name == b.name and a.labels.get(group_by) == b.labels.get(group_by))
        for a, b in zip(old, nodes, strict=True)
    ):
        return list(names)
    return order(nodes, group_by)
