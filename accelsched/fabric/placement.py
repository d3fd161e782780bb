"""Where a gang's pods go on a multi-level fabric: Kueue's Topology Aware Scheduling (BestFit), on arrays.

The same two phases as Kueue's findTopologyAssignment (pkg/cache/scheduler/tas_flavor_snapshot.go):
1. find the level and domains that hold every pod (or slice): at the requested level the tightest domain that
   fits (findBestFitDomain); a required level fails there, a preferred one climbs a level at a time, and above
   the top the widest domains are taken greedily (findLevelWithFitDomains);
2. descend level by level, taking the fewest domains at each (widest first, the last one the tightest that fits:
   updateCountsToMinimum); at and below the slice level each domain hands its own pods to its children.
Then ranks are laid out: leaves ordered by the path of domains they belong to, so consecutive ranks share the
innermost domain and a slice (consecutive ranks, whole slices per slice domain) is never split.

Capacities are pods per node (how many of the gang's identical pods each node can take now); nodes missing any
level's label are not in the fabric, as Kueue leaves them out of its topology snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Level:
    key: str
    codes: np.ndarray  # per node: index into values, -1 where the node lacks the label
    values: tuple[str, ...]


@dataclass
class Tree:
    """Domains per level over the fabric's nodes; level ``len(keys)`` is the nodes themselves."""

    keys: tuple[str, ...]
    nodes: np.ndarray  # the nodes in the fabric (every level labelled)
    ids: list[np.ndarray]  # per level: domain id of each fabric node
    parent: list[np.ndarray]  # per level: parent domain id of each domain (level 0: zeros)
    names: list[list[str]]  # per level: each domain's label value (the node name at the node level)
    paths: list[list[tuple[str, ...]]]  # per level: each domain's values from the top (Kueue's levelValues)


def build_tree(levels: list[Level], node_names: list[str]) -> Tree:
    n = len(node_names)
    codes = np.stack([lv.codes for lv in levels]) if levels else np.zeros((0, n), dtype=np.int32)
    nodes = np.flatnonzero((codes >= 0).all(axis=0)) if levels else np.arange(n)
    ids: list[np.ndarray] = []
    parent: list[np.ndarray] = []
    names: list[list[str]] = []
    paths: list[list[tuple[str, ...]]] = []
    prev = np.zeros(nodes.size, dtype=np.int64)
    prev_paths: list[tuple[str, ...]] = [()]
    for depth in range(len(levels) + 1):
        if depth < len(levels):
            own = codes[depth, nodes].astype(np.int64)
            pairs = np.stack([prev, own], axis=1)
            uniq, inverse = np.unique(pairs, axis=0, return_inverse=True) if nodes.size else (pairs, prev)
            level_names = [levels[depth].values[c] for c in uniq[:, 1]]
        else:
            uniq = np.stack([prev, np.arange(nodes.size)], axis=1)
            inverse = np.arange(nodes.size)
            level_names = [node_names[i] for i in nodes]
        inverse = np.asarray(inverse).reshape(-1)
        ids.append(inverse)
        parent.append(uniq[:, 0] if uniq.size else np.zeros(0, dtype=np.int64))
        names.append(level_names)
        paths.append([(*prev_paths[p], name) for p, name in zip(uniq[:, 0], level_names, strict=True)])
        prev, prev_paths = inverse, paths[-1]
    return Tree(tuple(lv.key for lv in levels), nodes, ids, parent, names, paths)


@dataclass
class Placement:
    """The outcome: nodes in rank order (one per pod), or why not (Kueue's message)."""

    nodes: list[int] = field(default_factory=list)
    reason: str = ""
    level: int = -1  # the level whose domain(s) hold the gang (a preferred request may climb)
    used: list[int] = field(default_factory=list)  # domains used at each level, widest first, nodes last

    @property
    def fits(self) -> bool:
        return not self.reason


@dataclass(frozen=True)
class Ask:
    """Where a request sits in a tree: its level, its slice level (None: single pods at the lowest) and size."""

    level: int
    slice_level: int | None = None
    size: int = 1
    topology: str = ""

    def place(self, tree: Tree, capacity: np.ndarray, count: int, required: bool) -> Placement:
        return place(tree, capacity, count, self.level, required, self.slice_level, self.size, self.topology)


def _key(tree: Tree, level: int) -> str:
    return tree.keys[level] if level < len(tree.keys) else "kubernetes.io/hostname"


def not_fit_message(topology: str, fit: int, total: int, slice_size: int) -> str:
    """notFitMessage, verbatim."""
    unit = "slice" if slice_size > 1 else "pod"
    if fit == 0:
        return f'topology "{topology}" doesn\'t allow to fit any of {total} {unit}(s)'
    return f'topology "{topology}" allows to fit only {fit} out of {total} {unit}(s)'


class _State:
    """podCount and sliceCount of every domain of every level (Kueue's domainState), changed as pods are given."""

    def __init__(self, tree: Tree, capacity: np.ndarray, slice_level: int, slice_size: int) -> None:
        self.tree = tree
        depth = len(tree.ids)
        self.pods: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * depth
        self.slices: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * depth
        leaf = capacity[tree.nodes].astype(np.int64)
        for lv in range(depth - 1, -1, -1):
            size = len(tree.names[lv])
            if lv == depth - 1:
                self.pods[lv] = leaf.copy()
            else:
                self.pods[lv] = np.bincount(tree.parent[lv + 1], weights=self.pods[lv + 1], minlength=size).astype(
                    np.int64
                )
            if lv > slice_level:
                self.slices[lv] = self.pods[lv].copy()
            elif lv == slice_level:
                self.slices[lv] = self.pods[lv] // slice_size
            else:
                self.slices[lv] = np.bincount(tree.parent[lv + 1], weights=self.slices[lv + 1], minlength=size).astype(
                    np.int64
                )

    def sorted(self, lv: int, domains: list[int]) -> list[int]:
        """sortedDomains (BestFit): most slices first, then fewest pods, then by values."""
        slices, pods, paths = self.slices[lv], self.pods[lv], self.tree.paths[lv]
        return sorted(domains, key=lambda d: (-slices[d], pods[d], paths[d]))

    def best_fit(self, lv: int, domains: list[int], needed: int, by_slices: bool) -> int:
        """findBestFitDomain: the first domain with the smallest count >= needed (else the first)."""
        counts = self.slices[lv] if by_slices else self.pods[lv]
        fitting = [d for d in domains if counts[d] >= needed]
        return min(fitting, key=lambda d: counts[d]) if fitting else domains[0]

    def to_minimum(self, lv: int, domains: list[int], count: int, slice_size: int, slices: bool) -> list[int]:
        """updateCountsToMinimum: take domains in order until ``count`` pods are given, the last one best fit."""
        remaining = count // slice_size if slices else count
        counts = self.slices[lv] if slices else self.pods[lv]
        out: list[int] = []
        for i, dom in enumerate(domains):
            if counts[dom] >= remaining:
                dom = self.best_fit(lv, domains[i:], remaining, slices)
                self.pods[lv][dom] = remaining * slice_size if slices else remaining
                out.append(dom)
                return out
            self.pods[lv][dom] = counts[dom] * slice_size if slices else counts[dom]
            remaining -= int(counts[dom])
            out.append(dom)
        return out


def place(
    tree: Tree,
    capacity: np.ndarray,
    count: int,
    level: int,
    required: bool,
    slice_level: int | None = None,
    slice_size: int = 1,
    topology: str = "",
) -> Placement:
    """Kueue's findTopologyAssignment (BestFit, no leader pod set) for ``count`` pods at ``level`` (an index
    into tree.keys). ``slice_level`` defaults to the lowest level with slices of one pod."""
    depth = len(tree.ids)
    slice_level = depth - 1 if slice_level is None else slice_level
    slice_size = max(slice_size, 1)
    if slice_level < level:
        return Placement(reason=f"podset slice topology {_key(tree, slice_level)} is above the podset topology "
                         f"{_key(tree, level)}")  # fmt: skip
    if count % slice_size:
        return Placement(reason=f"pod count {count} is not a multiple of the slice size {slice_size}")
    state = _State(tree, capacity, slice_level, slice_size)
    name = topology or "/".join(tree.keys)
    fit_level, chosen, reason = _fit_level(state, level, count // slice_size, required, slice_size, name)
    if reason:
        return Placement(reason=reason)
    chosen = state.to_minimum(fit_level, chosen, count, slice_size, True)
    lv = fit_level
    while lv < min(depth - 1, slice_level):
        children = [c for c in range(len(tree.names[lv + 1])) if tree.parent[lv + 1][c] in set(chosen)]
        chosen = state.to_minimum(lv + 1, state.sorted(lv + 1, children), count, slice_size, True)
        lv += 1
    while lv < depth - 1:
        by_parent: dict[int, list[int]] = {}
        for c in range(len(tree.names[lv + 1])):
            by_parent.setdefault(int(tree.parent[lv + 1][c]), []).append(c)
        nxt: list[int] = []
        for dom in chosen:
            kids = state.sorted(lv + 1, by_parent.get(dom, []))
            nxt += state.to_minimum(lv + 1, kids, int(state.pods[lv][dom]), 1, False)
        chosen = nxt
        lv += 1
    return _layout(tree, state, chosen, fit_level)


def _fit_level(
    state: _State, level: int, needed: int, required: bool, slice_size: int, name: str
) -> tuple[int, list[int], str]:
    """findLevelWithFitDomains."""
    slices = state.slices[level]
    if slices.size == 0:
        return 0, [], f"no topology domains at level: {_key(state.tree, level)}"
    ordered = state.sorted(level, list(range(slices.size)))
    top = ordered[0]
    if slices[top] >= needed:
        return level, [state.best_fit(level, ordered, needed, True)], ""
    if required:
        return 0, [], not_fit_message(name, int(slices[top]), needed, slice_size)
    if level > 0:
        return _fit_level(state, level - 1, needed, required, slice_size, name)
    out: list[int] = []
    remaining = needed
    for i, dom in enumerate(ordered):
        if remaining <= 0:
            break
        if slices[dom] >= remaining:
            dom = state.best_fit(level, ordered[i:], remaining, True)
        out.append(dom)
        remaining -= int(slices[dom])
    if remaining > 0:
        return 0, [], not_fit_message(name, needed - remaining, needed, slice_size)
    return level, out, ""


def _layout(tree: Tree, state: _State, leaves: list[int], fit_level: int) -> Placement:
    """Ranks in order: leaves grouped by their domain at every level, in the order the descent chose them."""
    depth = len(tree.ids)
    first_seen: list[dict[int, int]] = [{} for _ in range(depth)]
    keyed = []
    for leaf in leaves:
        if state.pods[depth - 1][leaf] <= 0:
            continue
        chain = [leaf]
        for lv in range(depth - 1, 0, -1):
            chain.append(int(tree.parent[lv][chain[-1]]))
        chain.reverse()  # widest first
        key = tuple(first_seen[lv].setdefault(d, len(first_seen[lv])) for lv, d in enumerate(chain))
        keyed.append((key, leaf, chain))
    keyed.sort()
    nodes: list[int] = []
    used: list[set[int]] = [set() for _ in range(depth)]
    for _, leaf, chain in keyed:
        nodes += [int(tree.nodes[leaf])] * int(state.pods[depth - 1][leaf])
        for lv, d in enumerate(chain):
            used[lv].add(d)
    return Placement(nodes=nodes, level=fit_level, used=[len(u) for u in used])
