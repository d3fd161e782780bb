"""``python -m benchmarks``: scheduler_perf-like workloads, one subprocess each, figures in a table.

    python -m benchmarks                      # every workload at scheduler_perf's sizes (minutes)
    python -m benchmarks --quick              # 500-node versions, a smoke test (seconds)
    python -m benchmarks --workload NodeAffinity --json out/bench.json
    python -m benchmarks --workload PodAntiAffinity --profile 25   # cProfile of the measured run only
    python -m cProfile -s cumtime -m benchmarks --inline --workload PodAntiAffinity   # whole process

End to end (the real ``accelsched schedule`` process on generated YAML and ``kubectl get -o json`` dumps, read,
validated, admitted, scheduled and printed): ``python -m benchmarks.cli`` (benchmarks/cli.py).

The exit status is 1 when a workload failed to schedule what it must (or crashed); speed never fails it.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmarks.harness import TARGET_RATIO, child_main, measure, run_in_child
from benchmarks.workloads import WORKLOADS, select


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="scheduler_perf-like throughput benchmarks for accelsched (scheduling time only).",
    )
    parser.add_argument("--quick", action="store_true", help="scaled-down sizes (500 nodes) for a smoke test")
    parser.add_argument(
        "--workload",
        action="append",
        metavar="NAME",
        help="workload name or case-insensitive substring (repeatable, or comma-separated); default: all",
    )
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON to PATH")
    parser.add_argument(
        "--heap",
        action="store_true",
        help="also measure the Python heap peak of the measured run (tracemalloc, in an extra child per workload)",
    )
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print the top N cProfile lines of each measured run"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, metavar="N", help="run each workload N times; report the median run"
    )
    parser.add_argument(
        "--inline",
        action="store_true",
        help="run in this process (for an outer profiler; peak RSS then spans every workload run)",
    )
    parser.add_argument("--timeout", type=float, default=None, metavar="S", help="per-workload time limit (seconds)")
    parser.add_argument(
        "--score-all-nodes",
        action="store_true",
        help="filter and score every node for every pod (default: percentageOfNodesToScore as kube-scheduler)",
    )
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    parser.add_argument("--child", metavar="NAME", help=argparse.SUPPRESS)
    parser.add_argument("--result", metavar="PATH", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _fmt(value: Any, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def render(rows: list[dict[str, Any]], quick: bool, heap: bool, console: Console) -> None:
    title = "accelsched vs kube-scheduler (scheduler_perf thresholds)"
    if quick:
        title += " [--quick sizes: ratios are not comparable to the 5000-node thresholds]"
    table = Table(title=title, show_lines=False)
    table.add_column("workload", no_wrap=True)
    table.add_column("nodes", justify="right")
    table.add_column("init", justify="right")
    table.add_column("measured", justify="right", no_wrap=True)
    table.add_column("scheduled", justify="right")
    table.add_column("time s", justify="right")
    table.add_column("pods/s", justify="right")
    table.add_column("p99 ms", justify="right")
    table.add_column("feasible/pod", justify="right")
    table.add_column("peak RSS MiB", justify="right")
    if heap:
        table.add_column("heap MiB", justify="right")
    table.add_column("kube-sched pods/s", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column(f"{TARGET_RATIO:g}x target", justify="center")
    for r in rows:
        measured = str(r["measured_pods"])
        if r.get("unschedulable_pods"):
            measured += f" (+{r['unschedulable_pods']} unsched.)"
        ok = r.get("all_scheduled")
        scheduled = f"{r['scheduled']}/{r['expected_scheduled']}"
        if "error" in r:
            target = "[red]error[/]"
        elif quick:
            target = "n/a (quick)"
        else:
            target = "[green]yes[/]" if r["meets_target"] else "[red]no[/]"
        cells = [
            r["workload"],
            str(r["nodes"]),
            str(r["init_pods"]),
            measured,
            f"[green]{scheduled}[/]" if ok else f"[red]{scheduled}[/]",
            _fmt(r.get("seconds"), ".2f"),
            _fmt(r.get("pods_per_s"), ",.0f"),
            _fmt(r.get("latency_ms_p99"), ".2f"),
            _fmt(r.get("feasible_nodes_mean"), ",.0f"),
            _fmt(r.get("peak_rss_mib"), ",.0f"),
        ]
        if heap:
            cells.append(_fmt(r.get("heap_peak_mib"), ",.1f"))
        cells += [f"{r['kube_scheduler_pods_per_s']:g}", _fmt(r.get("ratio"), ".2f") + "x", target]
        table.add_row(*cells)
    console.print(table)
    for r in rows:
        for problem in r.get("problems") or []:
            console.print(f"[red]{r['workload']}[/]: {escape(problem)}")
        if r.get("problem_count", 0) > len(r.get("problems") or []):
            console.print(f"[red]{r['workload']}[/]: ... {r['problem_count'] - len(r['problems'])} more problem(s)")
    console.print(
        "pods/s: scheduled measured pods / wall time of Scheduler.run over them (objects built and init pods "
        "scheduled beforehand, untimed). feasible/pod is the mean number of feasible nodes scored per scheduled pod "
        "(kube-scheduler stops at numFeasibleNodesToFind unless --score-all-nodes). Peak RSS: ru_maxrss of the "
        "workload's own subprocess.",
        style="dim",
    )
    for r in rows:
        for note in r.get("deviations") or []:
            console.print(f"note {r['workload']}: {escape(note)}", style="dim")


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median throughput, carrying every run's pods/s; a failed run wins (it must be seen)."""
    bad = [r for r in runs if not r.get("all_scheduled")]
    ordered = sorted(runs, key=lambda r: r.get("pods_per_s", 0.0))
    row = dict(bad[0] if bad else ordered[(len(ordered) - 1) // 2])
    row["runs"] = len(runs)
    row["pods_per_s_samples"] = [r.get("pods_per_s", 0.0) for r in runs]
    return row


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(args.child, args.result, args.quick, args.heap, args.profile, args.score_all_nodes)
    workloads = select(args.workload)
    # A table of 14 columns needs room: wide when printing to a file or pipe, the terminal's width otherwise.
    console = Console() if sys.stdout.isatty() else Console(width=240)
    progress = Console(stderr=True, log_path=False)
    if args.list:
        for w in WORKLOADS:
            s = w.full
            console.print(
                f"{w.name}: {s.nodes} nodes, {s.init_pods} init, {s.measured_pods} measured"
                + (f", {s.unschedulable_pods} unschedulable" if s.unschedulable_pods else "")
                + f" (kube-scheduler {w.threshold:g} pods/s) - {w.description}",
                markup=False,
                highlight=False,
            )
        return 0

    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for w in workloads:
        s = w.sizes(args.quick)
        progress.log(f"{w.name}: {s.nodes} nodes, {s.init_pods} init, {s.measured_pods} measured ...")
        if args.inline:
            runs = [
                measure(w, args.quick, args.heap, args.profile, args.score_all_nodes)
                for _ in range(max(1, args.repeat))
            ]
        else:
            runs = [
                run_in_child(
                    w, args.quick, profile_top=args.profile, timeout=args.timeout, score_all_nodes=args.score_all_nodes
                )
                for _ in range(max(1, args.repeat))
            ]
        row = median_run(runs)
        if args.heap and not args.inline and "error" not in row:
            traced = run_in_child(w, args.quick, heap=True, timeout=args.timeout, score_all_nodes=args.score_all_nodes)
            row["heap_peak_mib"] = traced.get("heap_peak_mib")
            row["heap_traced_pods_per_s"] = traced.get("pods_per_s")
        rows.append(row)
        status = "ok" if row.get("all_scheduled") else "PROBLEMS"
        progress.log(
            f"{w.name}: {row.get('pods_per_s', 0):,.0f} pods/s"
            + (f" ({row['gangs']} gangs, {row['gangs_per_s']:,.1f} gangs/s)" if row.get("gangs") else "")
            + f", {row['scheduled']}/{row['expected_scheduled']} "
            f"scheduled, peak RSS {_fmt(row.get('peak_rss_mib'), ',.0f')} MiB [{status}]"
        )
        if row.get("profile"):
            console.print(f"cProfile of the measured run of {w.name}:")
            console.print(row["profile"], markup=False, highlight=False)
    render(rows, args.quick, args.heap, console)
    console.print(
        "nodes scored: "
        + ("every node for every pod (--score-all-nodes)" if args.score_all_nodes else
           "percentageOfNodesToScore's adaptive default, as kube-scheduler (--score-all-nodes: every node)")
    )

    if args.json:
        doc = {
            "quick": args.quick,
            "target_ratio": TARGET_RATIO,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "machine": platform.machine(),
            "elapsed_s": round(time.perf_counter() - started, 1),
            "workloads": [{k: v for k, v in r.items() if k != "profile"} for r in rows],
        }
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2) + "\n")
        progress.log(f"wrote {path}")
    return 0 if all(r.get("all_scheduled") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
