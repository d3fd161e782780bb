"""``python -m benchmarks.simulate``: the FGD paper's experiment, timed on this machine.

    python -m benchmarks.simulate            # one experiment (FGD, seed 42) then the full 6 policies x 10 seeds
    python -m benchmarks.simulate --quick    # one experiment per policy (seed 42)
    python -m benchmarks.simulate --json out/simulate.json

Targets (the issue): one experiment (one policy, one seed, the default trace at 1.3) within 20 s, the full matrix
within 20 minutes, on the 2-core VM. Speed is reported, never asserted; the exit status is 1 only when the paper's
ordering (FGD > BestFit > DotProd at 130%) does not hold. It replays the copy of the trace inside the package
(accelsched/data), or the one $ACCELSCHED_DATA_DIR names.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from rich.console import Console
from rich.table import Table

from accelsched.sim.fragmentation import trace_typical_pods
from accelsched.sim.replay import run_experiment, run_matrix
from accelsched.sim.trace import load_nodes, load_pods, trace_paths

POLICIES = ["fgd", "bestfit", "dotprod", "packing", "clustering", "random"]
SEEDS = list(range(42, 52))
SINGLE_TARGET_S = 20.0
MATRIX_TARGET_S = 20 * 60.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.simulate", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one experiment per policy instead of the matrix")
    parser.add_argument("--jobs", type=int, default=0, help="worker processes for the matrix [one per CPU]")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON to PATH")
    args = parser.parse_args(argv)
    con = Console()
    node_path, pod_path = trace_paths("openb", "default")
    nodes, pods = load_nodes(node_path), load_pods(pod_path)
    typical = trace_typical_pods(pods, nodes.models)
    out: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"}

    singles = []
    for policy in POLICIES if args.quick else ["fgd"]:
        exp = run_experiment(nodes, pods, policy, 42, 1.3, typical)
        singles.append(
            {
                "policy": policy,
                "seed": 42,
                "wall_s": exp.seconds,
                "cpu_s": exp.cpu_seconds,
                "alloc_at_130": exp.alloc_ratio(1.3),
                "pods": len(exp.arrived),
            }
        )
    out["single"] = singles
    table = Table(title="One experiment: the default trace at 130%, seed 42", title_justify="left")
    for col in ("policy", "pods", "wall s", "CPU s", "alloc at 130%", "target"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for s in singles:
        table.add_row(
            s["policy"],
            str(s["pods"]),
            f"{s['wall_s']:.1f}",
            f"{s['cpu_s']:.1f}",
            f"{100 * s['alloc_at_130']:.2f}%",
            f"<= {SINGLE_TARGET_S:.0f} s",
        )
    con.print(table)

    ok = True
    if not args.quick:
        start = time.perf_counter()
        runs = run_matrix(str(node_path), str(pod_path), POLICIES, SEEDS, 1.3, args.jobs or None)
        wall = time.perf_counter() - start
        med = {p: statistics.median(e.alloc_ratio(1.3) for e in runs if e.policy == p) for p in POLICIES}
        unalloc = {p: statistics.median(e.unallocated_gpus for e in runs if e.policy == p) for p in POLICIES}
        out["matrix"] = {
            "wall_s": wall,
            "experiments": len(runs),
            "median_alloc_at_130": med,
            "median_unallocated_gpus": unalloc,
        }
        table = Table(
            title=f"Full matrix: {len(POLICIES)} policies x {len(SEEDS)} seeds in {wall:.0f} s wall "
            f"(target <= {MATRIX_TARGET_S / 60:.0f} min)",
            title_justify="left",
        )
        for col in ("policy", "alloc at 130% (median)", "unallocated GPUs (median)"):
            table.add_column(col, justify="left" if col == "policy" else "right")
        for p in POLICIES:
            table.add_row(p, f"{100 * med[p]:.2f}%", f"{unalloc[p]:.0f}")
        con.print(table)
        ok = med["fgd"] > med["bestfit"] > med["dotprod"]
        con.print(f"paper's ordering FGD > BestFit > DotProd at 130%: {'holds' if ok else 'DOES NOT HOLD'}")
    con.print(f"[dim]{out['machine']}; python -m benchmarks.simulate {' '.join(argv or sys.argv[1:])}[/]")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(out, handle, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
