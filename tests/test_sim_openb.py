"""The paper's check on the real trace (integration: it replays the Alibaba openb default trace): at 130% arrived
GPU demand FGD allocates more GPUs than BestFit, which allocates more than DotProd (median over seeds)."""

from __future__ import annotations

import statistics

import pytest

from accelsched.sim.replay import run_matrix
from accelsched.sim.trace import DATA_DIR, trace_paths

pytestmark = pytest.mark.integration


def test_fgd_beats_bestfit_beats_dotprod_on_the_default_trace():
    assert DATA_DIR.is_dir(), f"the trace is expected at {DATA_DIR} (../shared/data beside the repo)"
    nodes, pods = trace_paths("openb", "default")
    runs = run_matrix(str(nodes), str(pods), ["fgd", "bestfit", "dotprod"], [42, 43, 44], 1.3)
    alloc = {
        p: statistics.median(e.alloc_ratio(1.3) for e in runs if e.policy == p) for p in ("fgd", "bestfit", "dotprod")
    }
    assert alloc["fgd"] > alloc["bestfit"] > alloc["dotprod"], alloc
    # The paper's artifact reports about 95.3% for FGD on this trace; this replay lands within a point of it.
    assert abs(alloc["fgd"] - 0.953) < 0.01, alloc
    unallocated = {p: statistics.median(e.unallocated_gpus for e in runs if e.policy == p) for p in alloc}
    assert unallocated["fgd"] < unallocated["bestfit"] < unallocated["dotprod"]
