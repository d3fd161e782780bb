"""Kueue's BestFit placement on a multi-level fabric (fabric.placement), checked by properties and against the
optimum found by exhaustive search on small fabrics (up to 64 nodes): a required level is never left, a slice is
never split, ranks are laid out domain by domain, the placement never fails when some domain can hold the gang,
and it never uses more domains at the level below the required one than the fewest that could hold it there."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsched.fabric import placement
from accelsched.fabric.placement import Level, build_tree, place


def fabric(blocks: int, racks: int, hosts: int) -> placement.Tree:
    """blocks x racks x hosts nodes, labelled block and rack (the node is the innermost level)."""
    n = blocks * racks * hosts
    index = np.arange(n)
    block = index // (racks * hosts)
    rack = index // hosts
    names = [f"b{b}-r{r % racks}-h{i % hosts}" for i, (b, r) in enumerate(zip(block, rack, strict=True))]
    levels = [
        Level("block", block.astype(np.int32), tuple(f"b{b}" for b in range(blocks))),
        Level("rack", rack.astype(np.int32), tuple(f"b{r // racks}-r{r % racks}" for r in range(blocks * racks))),
    ]
    return build_tree(levels, names)


def domain_of(tree: placement.Tree, level: int, node: int) -> int:
    """The domain at ``level`` of a cluster node (level len(keys): the node itself)."""
    return int(tree.ids[level][int(np.flatnonzero(tree.nodes == node)[0])])


@st.composite
def cases(draw):
    blocks = draw(st.integers(1, 3))
    racks = draw(st.integers(1, 4))
    hosts = draw(st.integers(1, 5))
    tree = fabric(blocks, racks, hosts)
    caps = np.array(draw(st.lists(st.integers(0, 3), min_size=tree.nodes.size, max_size=tree.nodes.size)))
    level = draw(st.sampled_from([0, 1]))
    sliced = draw(st.booleans())
    slice_level = draw(st.integers(level, 2)) if sliced else None
    size = draw(st.integers(1, 4)) if sliced else 1
    count = size * draw(st.integers(1, 3 if sliced else 6))
    required = draw(st.booleans())
    return tree, caps, count, level, required, slice_level, size


def slices_in(tree, caps, level, domain, slice_level, size):
    """Whole slices domain ``domain`` of ``level`` holds: counted per slice-level domain, independently of
    placement's own bookkeeping."""
    depth = len(tree.ids)
    at = depth - 1 if slice_level is None else slice_level
    total = 0
    for d in set(tree.ids[at][tree.ids[level] == domain].tolist()):
        total += int(caps[tree.nodes][tree.ids[at] == d].sum()) // size
    return total


@settings(max_examples=300, deadline=None)
@given(cases())
def test_placement_properties(case):
    tree, caps, count, level, required, slice_level, size = case
    result = place(tree, caps, count, level, required, slice_level, size)
    needed = count // size
    feasible = [
        d for d in range(len(tree.names[level])) if slices_in(tree, caps, level, d, slice_level, size) >= needed
    ]
    if required:
        assert result.fits == bool(feasible), result.reason  # never fails when a domain can hold the gang
    if not result.fits:
        return
    nodes = result.nodes
    assert len(nodes) == count
    assert all(nodes.count(n) <= caps[n] for n in set(nodes))  # no node takes more than it can
    if required:  # the required level is never left
        assert len({domain_of(tree, level, n) for n in nodes}) == 1
    if slice_level is not None:  # a slice (consecutive ranks) is never split
        for k in range(0, count, size):
            assert len({domain_of(tree, slice_level, n) for n in nodes[k : k + size]}) == 1
    for lv in range(len(tree.ids)):  # rank order: each domain's ranks are consecutive, at every level
        runs = [domain_of(tree, lv, n) for n in nodes]
        changes = [a for a, b in itertools.pairwise(runs) if a != b]
        assert len(changes) + 1 == len(set(runs)), (lv, runs)


def fewest_children(tree, caps, level, domain, needed, slice_level, size):
    """Exhaustive: the fewest domains one level below ``level``, inside ``domain``, that hold ``needed`` slices."""
    children = [c for c in range(len(tree.names[level + 1])) if tree.parent[level + 1][c] == domain]
    counts = [slices_in(tree, caps, level + 1, c, slice_level, size) for c in children]
    for k in range(1, len(children) + 1):
        if any(sum(combo) >= needed for combo in itertools.combinations(counts, k)):
            return k
    return None


@settings(max_examples=300, deadline=None)
@given(cases())
def test_required_placement_uses_the_fewest_domains_below_the_required_level(case):
    tree, caps, count, level, _, slice_level, size = case
    result = place(tree, caps, count, level, True, slice_level, size)
    if not result.fits or level + 1 >= len(tree.ids) or (slice_level is not None and slice_level <= level):
        return
    domain = domain_of(tree, level, result.nodes[0])
    optimum = fewest_children(tree, caps, level, domain, count // size, slice_level, size)
    used = len({domain_of(tree, level + 1, n) for n in result.nodes})
    assert used == optimum  # extra domains over the minimum: 0


def test_best_fit_takes_the_tightest_domain_that_holds_the_gang():
    tree = fabric(1, 3, 4)
    caps = np.array([1] * 4 + [1, 1, 1, 0] + [1, 1, 0, 0])  # racks hold 4, 3 and 2 pods
    result = place(tree, caps, 3, 1, True)
    assert {domain_of(tree, 1, n) for n in result.nodes} == {1}  # rack r1: 3 free, the tightest that fits


def test_a_required_level_that_does_not_fit_says_how_many_do():
    tree = fabric(1, 2, 2)
    result = place(tree, np.array([1, 1, 1, 0]), 3, 1, True, topology="default")
    assert result.reason == 'topology "default" allows to fit only 2 out of 3 pod(s)'
    result = place(tree, np.zeros(4, dtype=int), 4, 1, True, 1, 2, topology="default")
    assert result.reason == 'topology "default" doesn\'t allow to fit any of 2 slice(s)'


def test_a_preferred_level_climbs_to_the_next_level_up():
    tree = fabric(2, 2, 2)
    caps = np.array([1, 1, 1, 1, 2, 2, 2, 2])
    result = place(tree, caps, 5, 1, False)  # no rack holds 5: block b1 (4 + 4) does, block b0 (2 + 2) not
    assert result.fits and result.level == 0
    assert {domain_of(tree, 0, n) for n in result.nodes} == {1}
    result = place(tree, caps, 11, 1, False)  # nor any block: spread over both, the fewest racks
    assert result.fits and len(result.nodes) == 11 and result.used[0] == 2


def test_slices_fill_whole_slice_domains_and_consecutive_ranks_share_a_host():
    tree = fabric(1, 2, 3)
    caps = np.array([2, 2, 2, 2, 2, 0])  # rack r0 holds 6 pods (1 slice of 4), rack r1 holds 4 (1 slice)
    result = place(tree, caps, 8, 0, True, 1, 4)
    assert result.fits
    racks = [domain_of(tree, 1, n) for n in result.nodes]
    assert racks[:4] == [racks[0]] * 4 and racks[4:] == [racks[4]] * 4 and racks[0] != racks[4]
    assert result.nodes[0] == result.nodes[1]  # two ranks per host, side by side


def test_nodes_without_a_level_label_are_not_in_the_fabric():
    levels = [Level("rack", np.array([0, -1, 0], dtype=np.int32), ("r0",))]
    tree = build_tree(levels, ["a", "b", "c"])
    assert tree.nodes.tolist() == [0, 2]
    assert place(tree, np.array([1, 5, 1]), 3, 0, True).reason.endswith("2 out of 3 pod(s)")
