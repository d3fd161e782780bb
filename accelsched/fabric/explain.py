"""Why a gang does not fit the fabric, domain by domain: how many of its pods (or slices) each domain of the
requested level holds now, why the rest do not, and the smallest change that would fit it ("2 more free nodes in
rack r7 would fit the gang")."""

from __future__ import annotations

import numpy as np

from accelsched.fabric import placement

SHOWN = 5  # domains listed, most room first


def domain_notes(
    tree: placement.Tree, capacity: np.ndarray, full: np.ndarray, count: int, ask: placement.Ask
) -> list[str]:
    """One line per domain of the requested level (the best ``SHOWN``), then the smallest change found."""
    level, slice_level, slice_size = ask.level, ask.slice_level, ask.size
    if level >= len(tree.keys) or not tree.names[level]:  # the node level, or no domain: the message says it all
        return []
    key = tree.keys[level]
    ids = tree.ids[level]
    leaf = capacity[tree.nodes]
    pods = np.bincount(ids, weights=leaf, minlength=len(tree.names[level])).astype(np.int64)
    slices = _slices(tree, capacity, level, slice_level, slice_size)
    order = sorted(range(len(tree.names[level])), key=lambda d: (-slices[d], -pods[d], tree.names[level][d]))
    unit = f"slices of {slice_size}" if slice_level is not None and slice_size > 1 else "pods"
    need = count // slice_size if unit != "pods" else count
    notes = []
    for d in order[:SHOWN]:
        members = ids == d
        empty = int(np.count_nonzero(leaf[members] == 0))
        why = f"; {empty} of {int(members.sum())} nodes take none" if empty else ""
        have = slices[d] if unit != "pods" else pods[d]
        notes.append(f"{key} {tree.names[level][d]}: {int(have)} of {need} {unit} fit{why}")
    change = smallest_change(tree, capacity, full, count, ask, order[:SHOWN])
    if change:
        notes.append(change)
    return notes


def _slices(
    tree: placement.Tree, capacity: np.ndarray, level: int, slice_level: int | None, slice_size: int
) -> np.ndarray:
    """Whole slices per domain of ``level``: slices are counted at the slice level and summed upward."""
    depth = len(tree.ids)
    at = depth - 1 if slice_level is None else slice_level
    size = slice_size if slice_level is not None else 1
    per = np.bincount(tree.ids[at], weights=capacity[tree.nodes], minlength=len(tree.names[at])).astype(np.int64)
    per //= max(size, 1)
    for lv in range(at, level, -1):
        per = np.bincount(tree.parent[lv], weights=per, minlength=len(tree.names[lv - 1])).astype(np.int64)
    return per


def smallest_change(
    tree: placement.Tree, capacity: np.ndarray, full: np.ndarray, count: int, ask: placement.Ask, candidates: list[int]
) -> str:
    """The fewest nodes to free in one domain so that the gang fits there: in each candidate domain, nodes are
    freed most gain first until the placement succeeds (a greedy bound; exact for pods without slices)."""
    level = ask.level
    key = tree.keys[level]
    best: tuple[int, str, list[str]] | None = None
    for d in candidates:
        members = tree.nodes[tree.ids[level] == d]
        gain = full[members] - capacity[members]
        order = members[np.argsort(-gain, kind="stable")]
        trial = capacity.copy()
        for k, node in enumerate(order, start=1):
            if best is not None and k >= best[0]:
                break
            if full[node] <= trial[node]:
                break  # nothing more to gain in this domain
            trial[node] = full[node]
            if ask.place(tree, trial, count, True).fits:
                names = [tree.names[-1][int(np.flatnonzero(tree.nodes == n)[0])] for n in order[:k]]
                best = (k, tree.names[level][d], names)
                break
    if best is None:
        return f"no {key} domain would fit the gang even with all its nodes free"
    k, domain, names = best
    return f"{k} more free node{'s' if k > 1 else ''} in {key} {domain} would fit the gang (free {', '.join(names)})"
