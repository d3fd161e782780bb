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


def test_every_pod_list_of_the_folder_loads_and_replays():
    from accelsched.sim.replay import run_experiment
    from accelsched.sim.trace import load_nodes, load_pods

    nodes = load_nodes(DATA_DIR / "openb_node_list_gpu_node.csv")
    assert nodes.n == 1213 and int(nodes.gpus.sum()) == 6212
    assert load_nodes(DATA_DIR / "openb_node_list_all_node.csv").n == 1523
    lists = sorted(DATA_DIR.glob("openb_pod_list_*.csv"))
    assert len(lists) >= 20
    for path in lists:
        pods = load_pods(path)
        assert pods.n > 7000 and (pods.creation is None) == ("multigpu" in path.name), path
    for variant in ("gpuspec33", "multigpu50"):  # GPU-model constraints; a list already above 130% of capacity
        exp = run_experiment(nodes, load_pods(DATA_DIR / f"openb_pod_list_{variant}.csv"), "fgd", 42, 1.3)
        assert 0.8 < exp.alloc_ratio(exp.arrived_share) <= 1.0
