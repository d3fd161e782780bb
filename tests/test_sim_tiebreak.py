"""Tie-breaking as the paper's simulator does it: the nodes sorted by name, each renamed with a zero-padded
prefix drawn from a seeded permutation, and the smallest (renamed) name wins a tie. So the tie order is a random
node order, fixed for one experiment and different per seed, not the trace's openb-node-XXXX order."""

from __future__ import annotations

import numpy as np
import pytest

from accelsched.sim.fragmentation import typical_pods
from accelsched.sim.policies import PodShape
from accelsched.sim.replay import FastEngine, paper_names, sim_node_names
from accelsched.sim.trace import Nodes

NAMES = [f"openb-node-{i:04d}" for i in (7, 3, 11, 0, 5, 9, 1, 2)]


def test_paper_names_prefix_the_sorted_names_with_a_permutation_of_the_seed():
    renamed = paper_names(NAMES, 42)
    assert [n.split("-", 1)[1] for n in renamed] == NAMES  # same nodes, same order, only prefixed
    prefixes = sorted(int(n.split("-", 1)[0]) for n in renamed)
    assert prefixes == list(range(len(NAMES)))  # a permutation, zero-padded to four digits
    assert all(len(n.split("-", 1)[0]) == 4 for n in renamed)
    assert paper_names(NAMES, 42) == renamed  # fixed by the seed
    orders = {tuple(np.argsort(paper_names(NAMES, seed))) for seed in range(42, 52)}
    assert len(orders) > 5  # and different per seed


def test_the_tie_breaks_choose_the_node_their_order_puts_first():
    nodes = Nodes(list(NAMES), np.full(8, 64000), np.full(8, 65536), np.full(8, 8), np.zeros(8, int), ["T4"])
    typical = typical_pods([(0, 1, 500, frozenset())], ["T4"])
    pod = PodShape(1000, 1024, 1, 1000)  # every empty node scores the same: the tie-break decides
    for tie_break in ("paper", "name"):
        for seed in (42, 43):
            engine = FastEngine(nodes, typical, [frozenset()], "bestfit", seed, tie_break)
            names = sim_node_names(NAMES, tie_break, seed)
            assert engine.schedule(pod, 0)[0] == int(np.argmin(names))
    assert int(np.argmin(NAMES)) == 3  # "name": openb-node-0000


def test_an_unknown_tie_break_is_refused():
    with pytest.raises(ValueError, match="unknown tie break"):
        sim_node_names(NAMES, "smallest", 0)
