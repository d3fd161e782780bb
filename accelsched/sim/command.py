"""``accelsched simulate``: the FGD paper's policy comparison on a real trace, and a time-based replay."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from accelsched.config import load_config
from accelsched.errors import InputError
from accelsched.sim import fabriccli, generic, report, scale, timeline
from accelsched.sim.executor import make_executor
from accelsched.sim.fragmentation import trace_typical_pods
from accelsched.sim.policies import PLUGIN_KEYS, POLICIES
from accelsched.sim.replay import TIE_BREAKS, Experiment, check_inflatable, inflate
from accelsched.sim.trace import MILLI, load_nodes, load_pods, trace_paths
from accelsched.terminal import bad_input_exits, console

DEFAULT_POLICIES = ("fgd", "bestfit", "dotprod", "packing", "clustering", "random")


def parse_policies(values: tuple[str, ...]) -> list[str]:
    """``fgd,bestfit`` (or repeated), plugin names (FGDScore), ``all``, or a KubeSchedulerConfiguration file."""
    out: list[str] = []
    for value in values or ("all",):
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            if item == "all":
                out.extend(p for p in DEFAULT_POLICIES if p not in out)
            elif item.lower() in POLICIES:
                out.append(item.lower())
            elif item in PLUGIN_KEYS:
                out.append(PLUGIN_KEYS[item])
            elif item.endswith((".yaml", ".yml")) or Path(item).is_file():
                if not Path(item).is_file():
                    raise InputError(f"no such KubeSchedulerConfiguration file {item!r}", field="--policy")
                out.append(item)
            else:
                known = ", ".join(DEFAULT_POLICIES)
                raise InputError(
                    f"unknown policy {item!r} (known: {known}, all, or a KubeSchedulerConfiguration file)",
                    field="--policy",
                )
    return out


# Bounds on the options that multiply the work, checked before anything is expanded or run: a seed list like
# 0-4294967295 would otherwise be built in memory, and --inflation inf (or nan) never reaches its target.
MAX_SEEDS = 1000
MAX_SEED = 2**32 - 1  # numpy's legacy seed range, what the paper's seeds (42..51) live in
MAX_INFLATION = 10.0  # ten times the cluster's GPU capacity in requests; the paper goes to 1.3
MAX_COMPRESS = 1e9
_SEED_RANGE_RE = re.compile(r"([0-9]{1,10})(?:-([0-9]{1,10}))?")


def parse_seeds(text: str) -> list[int]:
    """``42-51`` or ``42,43,50-52``: at most MAX_SEEDS distinct seeds in 0..MAX_SEED, in the order given."""
    seeds: dict[int, None] = {}
    for part in text.split(","):
        m = _SEED_RANGE_RE.fullmatch(part.strip())
        if not m:
            raise InputError(f"{text[:60]!r} is not a seed list like 42-51 or 42,43", field="--seeds")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else first
        if last < first or last > MAX_SEED:
            raise InputError(f"{part.strip()!r}: seeds go from 0 to {MAX_SEED}, low-high", field="--seeds")
        if len(seeds) + (last - first + 1) > MAX_SEEDS:
            raise InputError(f"more than {MAX_SEEDS} seeds in {text[:60]!r}", field="--seeds")
        seeds.update(dict.fromkeys(range(first, last + 1)))
    return list(seeds)


def worker_count(jobs: int | None, tasks: int) -> int | None:
    """``--jobs``, capped at the number of experiments and of CPUs: more workers would only cost forks and memory,
    and the results are the same. None (one per CPU) stays None."""
    return None if jobs is None else max(1, min(jobs, tasks, os.cpu_count() or 1))


def _profile_experiment(
    nodes, pods, path: str, seed: int, inflation: float, tie_break: str, devices: str = "device-plugin"
) -> Experiment:
    """A whole KubeSchedulerConfiguration profile, pod by pod through the framework's Scheduler (slower); the GPUs
    as extended resources or (``devices="dra"``) as DRA devices and claims."""
    start, cpu_start = time.perf_counter(), time.process_time()
    config = load_config(path)
    typical = trace_typical_pods(pods, nodes.models)
    order = inflate(pods, nodes.gpu_milli_capacity, inflation, seed)
    workload = pods.take(order)
    sharing = bool(((workload.num_gpu == 1) & (workload.gpu_milli < MILLI)).any())
    engine = generic.GenericEngine(nodes, config, seed, tie_break, devices, sharing)
    # The trace's pods name no scheduler: they go to the config's first profile.
    profile = next(iter(config.profiles))
    n = workload.n
    allocated, frag = np.zeros(n, np.int64), np.zeros(n)
    failed = np.zeros(n, dtype=bool)
    for i in range(n):
        pod = engine.pod(workload, i, f"{workload.names[i]}-{i}")
        pod.scheduler_name = profile
        failed[i] = engine.schedule(pod, int(workload.gpu_request[i])) is None
        allocated[i] = engine.allocated
        if i % 50 == 49 or i == n - 1:  # fragmentation from scratch is costly: sample it
            frag[i] = engine.fragmentation(typical)
        else:
            frag[i] = np.nan
    idx = np.arange(n)
    known = ~np.isnan(frag)
    frag = np.interp(idx, idx[known], frag[known])
    gpu_failed = int((failed & (workload.gpu_request > 0)).sum())
    return Experiment(
        Path(path).stem,
        seed,
        nodes.gpu_milli_capacity,
        np.cumsum(workload.gpu_request),
        allocated,
        frag,
        failed,
        gpu_failed,
        time.perf_counter() - start,
        time.process_time() - cpu_start,
    )


@click.command()
@click.option("--trace", default="openb", show_default=True, help="The trace (the Alibaba GPU trace 2023: openb).")
@click.option(
    "--pods",
    "pod_list",
    default="default",
    show_default=True,
    help="Pod list: default, gpushare40, multigpu50, gpuspec33, cpu050, ... or a path to a pod CSV.",
)
@click.option(
    "--data-dir",
    "--data",
    "data_dir",
    default=None,
    metavar="DIR",
    help="Folder of trace CSVs (.csv or .csv.xz): another copy or another trace [default: $ACCELSCHED_DATA_DIR, "
    "else the openb copy inside the package].",
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    help="fgd, bestfit, dotprod, packing, clustering, random (comma list or repeated; default all), a "
    "plugin name (FGDScore), or a KubeSchedulerConfiguration file (run through the full Scheduler).",
)
@click.option("--seeds", default="42-51", show_default=True, help="Seeds: shuffle, inflation copies, random choices.")
@click.option(
    "--inflation",
    type=float,
    default=1.3,
    show_default=True,
    help="Tune the workload to this share of GPU capacity (the paper: 1.3).",
)
@click.option(
    "--mode",
    type=click.Choice(["inflation", "timeline"]),
    default="inflation",
    show_default=True,
    help="inflation: the paper's protocol, nothing leaves; timeline: pods arrive and leave on the trace's "
    "clock and wait when they do not fit.",
)
@click.option(
    "--compress",
    type=float,
    default=1.0,
    show_default=True,
    help="timeline: divide creation times by this (denser arrivals, same run times).",
)
@click.option(
    "--scale-nodes",
    type=int,
    default=None,
    metavar="N",
    help="timeline: copy the trace's nodes and pods to N nodes, same mix and pods per node (copies arrive "
    "jittered by the seed; docs/simulate.md).",
)
@click.option(
    "--scale-pods",
    type=int,
    default=None,
    metavar="P",
    help="timeline: copy the trace's pods to P pods, same mix [default: as many per node as the trace].",
)
@click.option(
    "--tie-break",
    type=click.Choice(TIE_BREAKS),
    default="paper",
    show_default=True,
    help="Among equally scored nodes: paper: the smallest of the names the paper's simulator gives the nodes "
    "(a random node order fixed by the seed); name: the smallest trace name; random: a seeded random one per pod "
    "(stock kube-scheduler).",
)
@click.option(
    "--devices",
    type=click.Choice(generic.DEVICE_MODELS),
    default="device-plugin",
    show_default=True,
    help="How a KubeSchedulerConfiguration profile (--policy FILE) sees the GPUs: device-plugin: extended "
    "resources and the milli partition; dra: ResourceSlices of the gpu.accelsched.io driver, one ResourceClaim "
    "per GPU pod (docs/simulate.md).",
)
@click.option("--jobs", type=int, default=None, help="Worker processes, at least 1 [default: one per CPU].")
@click.option(
    "--executor",
    default="local",
    show_default=True,
    metavar="local|ray[:ADDRESS]",
    help="Where the experiments run: local processes (--jobs), or one Ray task each on the cluster at ADDRESS "
    "(HOST:PORT of its head, ray://HOST:PORT for Ray Client; default $RAY_ADDRESS). Needs accelsched[ray].",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write curves.csv, summary.csv, PNG plots and index.html here.",
)
@click.option(
    "--queues",
    "queues_path",
    default=None,
    metavar="FILE",
    help="Kueue ClusterQueues and LocalQueues: replay on the trace's clock with tenants admitted by them, against "
    "the same policy without quotas (docs/queues.md).",
)
@click.option(
    "--tenants",
    type=click.Choice(["qos", "localqueues"]),
    default="qos",
    show_default=True,
    help="--queues: qos: a pod goes to the LocalQueue named by its qos column, lowercased; localqueues: the file's "
    "LocalQueues in turn.",
)
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@fabriccli.options
def simulate(
    trace: str,
    pod_list: str,
    data_dir: str | None,
    policies: tuple[str, ...],
    seeds: str,
    inflation: float,
    mode: str,
    compress: float,
    scale_nodes: int | None,
    scale_pods: int | None,
    tie_break: str,
    devices: str,
    jobs: int | None,
    executor: str,
    out_dir: str | None,
    queues_path: str | None,
    tenants: str,
    output: str,
    **fabric_opts: Any,
) -> None:
    """Compare placement policies on a GPU cluster trace (the FGD paper's experiment, in seconds)."""

    @bad_input_exits
    def run() -> None:
        chosen = parse_policies(policies)
        seed_list = parse_seeds(seeds)
        # Every option is checked before anything is loaded or built.
        for name, value, most in (("--inflation", inflation, MAX_INFLATION), ("--compress", compress, MAX_COMPRESS)):
            if not value > 0:  # also nan
                raise InputError(f"must be > 0, got {value}", field=name)
            if value > most:
                raise InputError(f"must be at most {most:g}, got {value}", field=name)
        if jobs is not None and jobs < 1:
            raise InputError(f"must be at least 1, got {jobs}", field="--jobs")
        if scale_nodes is not None or scale_pods is not None:
            scale.check_targets(scale_nodes, scale_pods)
            if mode != "timeline" or fabric_opts["fabric"] or queues_path is not None:
                field = "--scale-nodes" if scale_nodes is not None else "--scale-pods"
                raise InputError("scales the time-based replay (--mode timeline) only", field=field)
        if fabric_opts["fabric"]:
            fabriccli.parse_topologies(fabric_opts["gang_topology"])
            if queues_path is not None:
                raise InputError("--fabric and --queues are separate experiments; give one", field="--queues")
        if devices == "dra":
            # The built-in policies' scores and the fast path read the device-plugin model's GPU ledger.
            builtin = [p for p in chosen if p in POLICIES]
            if builtin or mode == "timeline" or fabric_opts["fabric"]:
                mode_shown = "--fabric" if fabric_opts["fabric"] else "--mode timeline"
                what = f"policy {builtin[0]!r}" if builtin else mode_shown
                raise InputError(
                    f"dra runs KubeSchedulerConfiguration profiles (--policy FILE) in the inflation mode; {what} "
                    "runs on the device-plugin model only",
                    field="--devices",
                )
        sweep = make_executor(executor, worker_count(jobs, len(chosen) * len(seed_list)))
        if sweep.remote and (mode == "timeline" or fabric_opts["fabric"]):
            raise InputError("runs the inflation mode's experiments; --mode timeline runs here", field="--executor")
        node_path, pod_path = trace_paths(trace, pod_list, data_dir)
        nodes, pods = load_nodes(node_path), load_pods(pod_path)  # errors name file:line before any work starts
        command = "accelsched simulate " + shlex.join(sys.argv[2:]) if len(sys.argv) > 1 else "accelsched simulate"
        out = Path(out_dir) if out_dir else None
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
        con = console() if output == "table" else Console(stderr=True)
        if fabric_opts["fabric"]:
            _fabric(con, nodes, pods, chosen, seed_list, tie_break, compress, out, command, output, fabric_opts)
            return
        if queues_path is not None:  # sim/tenants.py: the timeline with Kueue's admission, inflated as the paper's
            from accelsched.sim import tenants as tenant_run

            tenant_run.check_path(queues_path)
            args = (nodes, pods, chosen, seed_list, tie_break, compress, inflation, queues_path, tenants, output)
            tenant_run.run(con, *args, command)
            return
        if mode == "inflation":
            check_inflatable(pods)
        if mode == "timeline":
            targets = (scale_nodes, scale_pods)
            _timeline(con, nodes, pods, chosen, seed_list, tie_break, compress, out, command, output, targets)
        else:
            _inflation(
                con,
                nodes,
                pods,
                node_path,
                pod_path,
                chosen,
                seed_list,
                inflation,
                tie_break,
                sweep,
                out,
                command,
                output,
                devices,
            )

    run()


def _progress(con: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )


def _inflation(
    con, nodes, pods, node_path, pod_path, chosen, seeds, inflation, tie_break, sweep, out, command, output, devices
) -> None:
    fast = [p for p in chosen if p in POLICIES]
    profiles = [p for p in chosen if p not in POLICIES]
    started = time.perf_counter()
    experiments: list[Experiment] = []
    with _progress(con) as progress:
        task = progress.add_task("replaying", total=len(chosen) * len(seeds))
        if fast:
            experiments += sweep.run_matrix(
                str(node_path),
                str(pod_path),
                fast,
                seeds,
                inflation,
                lambda _: progress.advance(task),
                tie_break,
            )
        for path in profiles:
            for seed in seeds:
                experiments.append(_profile_experiment(nodes, pods, path, seed, inflation, tie_break, devices))
                progress.advance(task)
    wall = time.perf_counter() - started
    summaries = report.summarize(experiments)
    line = report.headline(summaries)
    timing = (
        f"{len(experiments)} experiments in {wall:.1f} s wall; "
        f"{np.mean([e.seconds for e in experiments]):.2f} s wall and "
        f"{np.mean([e.cpu_seconds for e in experiments]):.2f} s CPU per experiment on average"
    )
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "command": command,
                    "trace": {"nodes": str(node_path), "pods": str(pod_path), "gpus": int(nodes.gpus.sum())},
                    "policies": [
                        s.__dict__ | {"alloc": {f"{round(k * 100)}": v for k, v in s.alloc.items()}} for s in summaries
                    ],
                    "headline": line,
                    "wall_seconds": wall,
                },
                indent=2,
            )
        )
    else:
        _print_inflation(con, summaries, nodes, pods, inflation, len(seeds), tie_break)
        if line:
            con.print(line)
        con.print(timing)
        con.print(f"[dim]{command}[/]")
    if out is not None:
        report.write_curves(out / "curves.csv", experiments)
        report.write_summary(out / "summary.csv", summaries)
        images = report.plot_inflation(out, experiments)
        header, rows = _rows(summaries)
        notes = [
            f"{pods.n} pods of {Path(pods.source).name} on {nodes.n} nodes ({int(nodes.gpus.sum())} GPUs), "
            f"inflated to {inflation:.0%} of GPU capacity; medians over seeds {seeds[0]}..{seeds[-1]}; "
            f"tie-break {tie_break}.",
            *([line] if line else []),
            timing,
        ]
        report.write_html(
            out / "index.html", "accelsched simulate: policies on a GPU trace", command, header, rows, images, notes
        )
        if output == "table":
            con.print(f"wrote {out}/index.html, curves.csv, summary.csv and {len(images)} plots")


def _rows(summaries: list[report.PolicySummary]) -> tuple[list[str], list[list[str]]]:
    points = [c for c in report.CHECKPOINTS if all(c in s.alloc for s in summaries)]
    header = [
        "policy",
        *[f"{round(c * 100)}%" for c in points],
        "unallocated GPUs",
        "frag GPUs",
        "frag ratio",
        "failed pods",
        "s/run",
    ]
    rows = [
        [
            s.policy,
            *[f"{100 * s.alloc[c]:.1f}" for c in points],
            f"{s.unallocated_gpus:.0f}",
            f"{s.frag_gpus:.0f}",
            f"{s.frag_ratio:.0%}",
            f"{s.failed_pods:.0f}",
            f"{s.seconds:.1f}",
        ]
        for s in summaries
    ]
    return header, rows


def _print_inflation(con, summaries, nodes, pods, inflation, n_seeds, tie_break) -> None:
    header, rows = _rows(summaries)
    title = (
        f"GPU allocation ratio (%) as arrived demand grows, median of {n_seeds} seed(s): "
        f"{pods.n} pods on {nodes.n} nodes / {int(nodes.gpus.sum())} GPUs, tie-break {tie_break}"
    )
    _print_table(con, title, header, rows)


def _print_table(con: Console, title: str, header: list[str], rows: list[list[str]]) -> None:
    table = Table(title=title, title_justify="left")
    for h in header:
        table.add_column(h, justify="left" if h == "policy" else "right")
    for row in rows:
        table.add_row(*row)
    con.print(table)


def _percentile(delays: np.ndarray, q: float) -> str:
    return f"{np.percentile(delays, q):.0f}" if delays.size else "-"


def _timeline(con, nodes, pods, chosen, seeds, tie_break, compress, out, command, output, targets) -> None:
    if any(p not in POLICIES for p in chosen):
        raise InputError("the time-based replay runs the built-in policies only", field="--policy")
    if pods.creation is None:  # before scaling: the replay says so, naming the file
        timeline.replay(nodes, pods, chosen[0], seeds[0], tie_break=tie_break, compress=compress)
    runs: list[timeline.Timeline] = []
    typical = trace_typical_pods(pods, nodes.models)
    started = time.perf_counter()
    with _progress(con) as progress:
        task = progress.add_task("replaying on the trace's clock", total=len(chosen) * len(seeds))
        for seed in seeds:
            nodes_run, pods_run = scale.scale_trace(nodes, pods, *targets, seed)  # copies jittered by the seed
            if pods_run is not pods:  # a part copy shifts the mix a little: the typical pods of what runs
                typical = trace_typical_pods(pods_run, nodes.models)
            for policy in chosen:
                runs.append(timeline.replay(nodes_run, pods_run, policy, seed, typical, tie_break, compress))
                progress.advance(task)
    wall = time.perf_counter() - started
    header = [
        "policy",
        "mean alloc",
        "peak alloc",
        "mean frag ratio",
        "pods that waited",
        "peak waiting",
        "median wait s",
        "p95 wait s",
        "max wait s",
        "never ran",
        "unschedulable",
        "s/run",
    ]
    rows = []
    for policy in chosen:
        mine = [t for t in runs if t.policy == policy]
        delays = np.concatenate([t.delays for t in mine]) if mine else np.zeros(0)
        rows.append(
            [
                policy,
                f"{np.median([t.mean_allocation() for t in mine]):.1%}",
                f"{np.median([t.allocated.max() / t.capacity for t in mine]):.1%}",
                f"{np.median([t.mean_fragmentation() for t in mine]):.0%}",
                f"{np.median([len(t.delays) for t in mine]):.0f}",
                f"{np.median([t.waiting.max(initial=0) for t in mine]):.0f}",
                _percentile(delays, 50),
                _percentile(delays, 95),
                _percentile(delays, 100),
                f"{np.median([t.never for t in mine]):.0f}",
                f"{np.median([t.unschedulable for t in mine]):.0f}",
                f"{np.mean([t.seconds for t in mine]):.1f}",
            ]
        )
    if output == "json":
        size = {"nodes": nodes_run.n, "pods": pods_run.n}
        click.echo(
            json.dumps({"command": command, **size, "header": header, "rows": rows, "wall_seconds": wall}, indent=2)
        )
    else:
        title = (
            f"Time-based replay of {pods_run.n} pods on {nodes_run.n} nodes (arrivals compressed x{compress:g}), "
            f"median of {len(seeds)} seed(s)"
        )
        _print_table(con, title, header, rows)
        con.print(f"{len(runs)} replays in {wall:.1f} s")
        con.print(f"[dim]{command}[/]")
    if out is not None:
        report.write_timeline_csv(out / "timeline.csv", runs)
        images = report.plot_timeline(out, runs)
        report.write_html(
            out / "index.html",
            "accelsched simulate --mode timeline",
            command,
            header,
            rows,
            images,
            [
                f"{pods_run.n} pods of {Path(pods.source).name}"
                + (f" copied to {nodes_run.n} nodes" if pods_run is not pods else "")
                + f", arrivals compressed x{compress:g}."
            ],
        )


def _fabric(con, nodes, pods, chosen, seeds, tie_break, compress, out, command, output, opts) -> None:
    if any(p not in POLICIES for p in chosen):
        raise InputError("--fabric runs the built-in policies only", field="--policy")
    started = time.perf_counter()
    runs = len(chosen) * len(seeds) * len(fabriccli.parse_topologies(opts["gang_topology"]))
    with _progress(con) as progress:
        task = progress.add_task("replaying gangs on the fabric", total=runs)
        layout, figures = fabriccli.run(
            nodes, pods, chosen, seeds, tie_break, compress, opts, lambda: progress.advance(task)
        )
    wall = time.perf_counter() - started
    about = fabriccli.describe(layout, nodes, opts)
    rows = fabriccli.table(figures)
    notes = [fabriccli.note(about, pods, compress, seeds)]
    if output == "json":
        click.echo(json.dumps({"command": command, "fabric": about, "rows": figures, "wall_seconds": wall}, indent=2))
    else:
        _print_table(con, "Big gangs on blocks of NVLink domains", fabriccli.HEADER, rows)
        for note in notes:
            con.print(note)
        con.print(f"{runs} replays in {wall:.1f} s")
        con.print(f"[dim]{command}[/]")
    if out is not None:
        title = "accelsched simulate --fabric"
        report.write_html(out / "index.html", title, command, fabriccli.HEADER, rows, [], notes)
