"""``python -m benchmarks.simulate``: the FGD paper's experiment, timed on this machine.

    python -m benchmarks.simulate            # one experiment (FGD, seed 42) then the full 6 policies x 10 seeds
    python -m benchmarks.simulate --quick    # one experiment per policy (seed 42)
    python -m benchmarks.simulate --json out/simulate.json
    python -m benchmarks.simulate --scale 1000,5000,15000   # the timeline replay on the trace copied to N nodes

Targets (the issue): one experiment (one policy, one seed, the default trace at 1.3) within 20 s, the full matrix
within 20 minutes, on the 2-core VM. Speed is reported, never asserted; the exit status is 1 only when the paper's
ordering (FGD > BestFit > DotProd at 130%) does not hold. It replays the copy of the trace inside the package
(accelsched/data), or the one $ACCELSCHED_DATA_DIR names.

``--scale N,N`` runs instead ``accelsched simulate --mode timeline`` on the trace copied to each N nodes and
``--pods-per-node`` x N pods (``--scale-nodes``/``--scale-pods``), arrivals compressed x3,000,000 (about a third of
the pods Pending at the peak at 10.5 pods per node), FGD, seed 42, each in a fresh process: wall, CPU, peak RSS,
and the growth exponent of CPU and memory in the nodes (docs/performance.md).
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
from benchmarks.scale import exponent, run_measured

POLICIES = ["fgd", "bestfit", "dotprod", "packing", "clustering", "random"]
SEEDS = list(range(42, 52))
SINGLE_TARGET_S = 20.0
MATRIX_TARGET_S = 20 * 60.0
SCALE_PODS_PER_NODE = 10.5  # with SCALE_COMPRESS: about a third of the pods Pending at the peak (openb has 6.7)
SCALE_COMPRESS = 3_000_000  # the month of arrivals within a second or so: every pod's run overlaps the others'


def scale_rows(sizes: list[int], pods_per_node: float, timeout: float | None) -> list[dict]:
    """The timeline replay of the trace copied to each size, as a user runs it."""
    rows = []
    for n in sizes:
        pods = round(n * pods_per_node)
        cmd = [sys.executable, "-m", "accelsched.cli", "simulate", "--mode", "timeline", "--policy", "fgd"]
        cmd += ["--seeds", "42", "--compress", str(SCALE_COMPRESS), "--scale-nodes", str(n), "--scale-pods", str(pods)]
        result, body = run_measured([*cmd, "-o", "json"], timeout)
        row = {"nodes": n, "pods": pods, **result}
        if body:
            out = json.loads(body)
            figures = dict(zip(out["header"], out["rows"][0], strict=True))
            row["peak_waiting"] = int(figures["peak waiting"])
            row["waited"] = int(figures["pods that waited"])
            row["pods_per_s"] = round(pods / result["wall_s"], 1)
        rows.append(row)
    return rows


def print_scale(con: Console, rows: list[dict]) -> dict:
    table = Table(title="simulate --mode timeline on the trace copied to N nodes (FGD, seed 42)", title_justify="left")
    for col in ("nodes", "pods", "Pending at peak", "wall s", "CPU s", "pods/s", "peak RSS MiB"):
        table.add_column(col, justify="right")
    for r in rows:
        if "error" in r:
            table.add_row(f"{r['nodes']:,}", f"{r['pods']:,}", "failed", "", "", "", r["error"][-60:])
            continue
        share = r["peak_waiting"] / r["pods"]
        table.add_row(
            f"{r['nodes']:,}",
            f"{r['pods']:,}",
            f"{r['peak_waiting']:,} ({share:.0%})",
            f"{r['wall_s']:.1f}",
            f"{r['cpu_s']:.1f}",
            f"{r['pods_per_s']:,.0f}",
            f"{r['peak_rss_mib']:,.0f}",
        )
    con.print(table)
    good = [r for r in rows if "error" not in r]
    growth = {
        "cpu": exponent([r["nodes"] for r in good], [r["cpu_s"] for r in good]),
        "rss": exponent([r["nodes"] for r in good], [r["peak_rss_mib"] for r in good]),
    }
    shown = ", ".join(f"{k} ~ nodes^{v:.2f}" for k, v in growth.items() if v is not None)
    if shown:
        con.print(f"growth (nodes and pods together): {shown}")
    return growth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.simulate", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one experiment per policy instead of the matrix")
    parser.add_argument("--jobs", type=int, default=0, help="worker processes for the matrix [one per CPU]")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON to PATH")
    parser.add_argument("--scale", metavar="N,N", help="instead: the timeline replay at these node counts")
    parser.add_argument("--pods-per-node", type=float, default=SCALE_PODS_PER_NODE, help="--scale: [10.5]")
    parser.add_argument("--timeout", type=float, default=None, metavar="S", help="--scale: per-run limit")
    args = parser.parse_args(argv)
    con = Console()
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    if args.scale:
        rows = scale_rows([int(x) for x in args.scale.split(",")], args.pods_per_node, args.timeout)
        growth = print_scale(con, rows)
        con.print(f"[dim]{machine}; python -m benchmarks.simulate {' '.join(argv or sys.argv[1:])}[/]")
        if args.json:
            with open(args.json, "w") as handle:
                json.dump({"machine": machine, "scale": rows, "growth": growth}, handle, indent=2)
        return 1 if any("error" in r for r in rows) else 0
    node_path, pod_path = trace_paths("openb", "default")
    nodes, pods = load_nodes(node_path), load_pods(pod_path)
    typical = trace_typical_pods(pods, nodes.models)
    out: dict = {"machine": machine}

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
