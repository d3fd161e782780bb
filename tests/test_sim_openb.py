"""The paper's check on the real trace (integration: it replays the Alibaba openb default trace): at 130% arrived
GPU demand FGD allocates more GPUs than BestFit, which allocates more than DotProd, median over the paper's ten
seeds 42-51."""

from __future__ import annotations

import statistics

import pytest

from accelsched.sim.replay import run_matrix
from accelsched.sim.trace import BUNDLED_DIR, NODE_LIST, POD_LIST_PREFIX, pod_lists, trace_file, trace_paths

pytestmark = pytest.mark.integration

SEEDS = list(range(42, 52))  # the paper's seeds
# The paper's FGD median at 130% over seeds 42-51: 95.4%, read from its artifact's
# experiments/analysis/expected_results/analysis_allo_discrete.csv (the data behind its Fig. 7; the range over the
# seeds is 95.3-95.5%). docs/simulate.md has our figures next to it.
PAPER_FGD_MEDIAN = 0.954


def test_fgd_beats_bestfit_beats_dotprod_on_the_default_trace_over_ten_seeds():
    nodes, pods = trace_paths("openb", "default")
    policies = ["fgd", "bestfit", "dotprod"]
    runs = run_matrix(str(nodes), str(pods), policies, SEEDS, 1.3)  # ties as the paper's simulator breaks them
    assert sorted((e.policy, e.seed) for e in runs) == sorted((p, s) for p in policies for s in SEEDS)
    alloc = {p: statistics.median(e.alloc_ratio(1.3) for e in runs if e.policy == p) for p in policies}
    assert alloc["fgd"] > alloc["bestfit"] > alloc["dotprod"], alloc
    assert abs(alloc["fgd"] - PAPER_FGD_MEDIAN) < 0.005, alloc  # within half a point of the paper's median
    unallocated = {p: statistics.median(e.unallocated_gpus for e in runs if e.policy == p) for p in policies}
    assert unallocated["fgd"] < unallocated["bestfit"] < unallocated["dotprod"], unallocated


def test_every_pod_list_of_the_folder_loads_and_replays():
    from accelsched.sim.replay import run_experiment
    from accelsched.sim.trace import load_nodes, load_pods

    nodes = load_nodes(trace_file(BUNDLED_DIR, NODE_LIST))
    assert nodes.n == 1213 and int(nodes.gpus.sum()) == 6212
    assert load_nodes(trace_file(BUNDLED_DIR, "openb_node_list_all_node")).n == 1523
    lists = pod_lists(BUNDLED_DIR)
    assert len(lists) == 24
    for name in lists:
        pods = load_pods(trace_file(BUNDLED_DIR, POD_LIST_PREFIX + name))
        assert pods.n > 7000 and (pods.creation is None) == ("multigpu" in name), name
    for variant in ("gpuspec33", "multigpu50"):  # GPU-model constraints; a list already above 130% of capacity
        exp = run_experiment(nodes, load_pods(trace_paths("openb", variant)[1]), "fgd", 42, 1.3)
        assert 0.8 < exp.alloc_ratio(exp.arrived_share) <= 1.0
