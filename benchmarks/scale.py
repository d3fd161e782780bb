"""``python -m benchmarks.scale``: wall time and peak RSS of ``accelsched schedule`` as clusters and backlogs grow.

    python -m benchmarks.scale                          # 1,000 and 5,000 nodes x 0/20/50% Pending, and exponents
    python -m benchmarks.scale --nodes 15000 --pending 33 --no-exponents   # the issue's 15,000 x 100,000 case
    python -m benchmarks.scale --quick                  # small sizes, a smoke test (seconds)

Each case is one ``kind: List`` JSON file (what ``kubectl get nodes,pods -A -o json`` gives) with openb's GPU nodes
(cpu, memory, GPU count and model, cycled; their GPUs shared in thousandths, the ``milli`` partition mode) and
``--pods-per-node`` pods (openb's own ratio, 100,000 for 15,000 nodes) whose shapes are drawn from openb's default
pod list: CPU, memory, whole GPUs (``nvidia.com/gpu``) or a GPU share (``accelsched.io/gpu-milli``), and one of
50 app labels. A tenth of the pods have a higher priority, so Pending pods do go through preemption. ``--pending``
percent of the pods are Pending in the file; the others are bound (spec.nodeName, placed first-fit by the
generator). The CLI runs as a fresh process on each file (``schedule -f FILE -o json`` to a file): its wall time
and its own peak RSS (os.wait4's ru_maxrss), parsing and printing included.

The growth exponents are log-log fits: in nodes at a fixed number of pods, and in pods at a fixed number of nodes
(the 1/3 Pending mix). Speed and memory are reported, never asserted; the exit status is 1 only when a run failed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from accelsched.devices.partition import MILLI_RESOURCE
from accelsched.sim.trace import load_nodes, load_pods, trace_paths
from benchmarks.cli import _env
from benchmarks.workloads import GPU, node_doc, pod_doc

ROOT = Path(__file__).resolve().parent.parent
PODS_PER_NODE = 100_000 / 15_000  # openb: 8,152 pods on 1,213 GPU nodes, about the same
APPS = 50
HIGH_PRIORITY = 1000  # one pod in ten: it may preempt the others
NODES = (1000, 5000)
PENDING = (0, 20, 50)
EXPONENT_PENDING = 33
TARGET_RSS_MIB = 2048  # the goals at 15,000 nodes x 100,000 pods, a third Pending
TARGET_PODS_PER_S = 680.0


@dataclass(frozen=True)
class Case:
    nodes: int
    pods: int
    pending: int  # percent of the pods Pending in the file

    @property
    def name(self) -> str:
        return f"scale-{self.nodes}n-{self.pods}p-{self.pending}pct"


# ---------------------------------------------------------------------------------------------- the input


def cluster_docs(case: Case, seed: int = 1) -> tuple[list[dict[str, Any]], int]:
    """The nodes and pods of ``case``, and how many pods are Pending in them (those meant to be bound that fit
    nowhere by first fit stay Pending too)."""
    node_path, pod_path = trace_paths("openb", "default")
    trace_nodes, trace_pods = load_nodes(node_path), load_pods(pod_path)
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = []
    cpu = np.zeros(case.nodes, dtype=np.int64)
    memory = np.zeros(case.nodes, dtype=np.int64)
    devices: list[list[int]] = []  # per node, each GPU's free milli
    for i in range(case.nodes):
        k = i % trace_nodes.n
        cpu[i], memory[i] = trace_nodes.cpu[k], trace_nodes.memory[k]
        gpus = int(trace_nodes.gpus[k])
        devices.append([1000] * gpus)
        doc = node_doc(
            f"node-{i:05d}",
            {"accelerator": trace_nodes.models[int(trace_nodes.model[k])]},
            {"cpu": f"{cpu[i]}m", "memory": f"{memory[i]}Mi"},
        )
        doc["metadata"]["annotations"] = {"accelsched.io/partitioning": f"mode: milli\ndevices: {gpus}\n"}
        docs.append(doc)
    bound_count = case.pods - case.pods * case.pending // 100
    start = 0
    pending = 0
    for j in range(case.pods):
        t = rng.randrange(trace_pods.n)
        c, m = int(trace_pods.cpu[t]), int(trace_pods.memory[t])
        whole, milli = int(trace_pods.num_gpu[t]), int(trace_pods.gpu_milli[t])
        resources = {"cpu": f"{c}m", "memory": f"{m}Mi"}
        if whole and milli >= 1000:
            resources[GPU] = str(whole)
        elif whole:
            resources[MILLI_RESOURCE] = str(milli)
        doc = pod_doc(
            f"pod-{j:06d}",
            labels={"app": f"app-{j % APPS}"},
            resources=resources,
            priority=HIGH_PRIORITY if j % 10 == 0 else 0,
        )
        node = _first_fit(start, c, m, whole, milli, cpu, memory, devices) if j < bound_count else None
        if node is None:
            pending += 1
        else:
            doc["spec"]["nodeName"] = f"node-{node:05d}"
            start = node  # the next bound pod looks from here: pods spread over the nodes as they fill up
        docs.append(doc)
    return docs, pending


def _first_fit(
    start: int, cpu: int, memory: int, whole: int, milli: int, free_cpu: Any, free_memory: Any, devices: list[list[int]]
) -> int | None:
    """The first node from ``start`` (a bounded look) with room for the pod; its room is taken."""
    n = len(devices)
    for step in range(min(n, 64)):
        i = (start + step) % n
        if free_cpu[i] < cpu or free_memory[i] < memory:
            continue
        gpus = devices[i]
        if whole and milli >= 1000:
            free = [d for d, left in enumerate(gpus) if left == 1000][:whole]
            if len(free) < whole:
                continue
            for d in free:
                gpus[d] = 0
        elif whole:
            d = next((d for d, left in enumerate(gpus) if left >= milli), None)
            if d is None:
                continue
            gpus[d] -= milli
        free_cpu[i] -= cpu
        free_memory[i] -= memory
        return i
    return None


def generate(case: Case, directory: Path) -> tuple[Path, int]:
    """The case's file in ``directory`` (kept: a second run reuses it) and its Pending pod count."""
    path = directory / f"{case.name}.json"
    meta = path.with_suffix(".pending")
    if not path.exists() or not meta.exists():
        docs, pending = cluster_docs(case)
        partial = path.with_suffix(".partial")
        with partial.open("w") as f:
            json.dump({"apiVersion": "v1", "kind": "List", "items": docs, "metadata": {"resourceVersion": ""}}, f)
        partial.replace(path)
        meta.write_text(str(pending))
    return path, int(meta.read_text())


# ---------------------------------------------------------------------------------------------- a run


def run_measured(cmd: list[str], timeout: float | None) -> tuple[dict[str, Any], bytes]:
    """``cmd`` in a fresh process, its stdout to a file: wall, CPU and that process's own peak RSS, and stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=out, stderr=err)
        deadline = None if timeout is None else t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        result: dict[str, Any] = {
            "wall_s": round(wall, 2),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # KiB on Linux
            "rc": proc.returncode,
        }
        if proc.returncode != 0:
            err.seek(0)
            result["error"] = err.read().decode(errors="replace").strip()[-2000:] or f"exit {proc.returncode}"
            return result, b""
        out.seek(0)
        return result, out.read()


def run_cli(path: Path, timeout: float | None) -> dict[str, Any]:
    """``accelsched schedule -f PATH -o json`` in a fresh process: wall, CPU and that process's own peak RSS."""
    cmd = [sys.executable, "-m", "accelsched.cli", "schedule", "-f", str(path), "-o", "json"]
    result, body = run_measured(cmd, timeout)
    if "error" in result:
        return result
    pods = json.loads(body)["pods"]
    result["scheduled"] = sum(1 for p in pods if p["node"])
    result["pending_after"] = sum(1 for p in pods if not p["node"])
    # Victims of preemption: each preemption's search (DefaultPreemption's dry runs over up to 100 candidate
    # nodes) is most of a backlog's time, and their number, like the Pending pods', grows faster than the pods.
    result["preempted"] = sum(1 for p in pods if str(p.get("message") or "").startswith("Preempted by"))
    return result


def measure(case: Case, directory: Path, timeout: float | None, progress: Console) -> dict[str, Any]:
    t0 = time.perf_counter()
    path, pending = generate(case, directory)
    progress.log(
        f"{case.name}: {path.stat().st_size / 2**20:.0f} MiB, {pending} Pending (ready in "
        f"{time.perf_counter() - t0:.0f}s); running accelsched schedule ..."
    )
    row: dict[str, Any] = {
        "nodes": case.nodes,
        "pods": case.pods,
        "pending_pct": case.pending,
        "pending": pending,
        "file_mib": round(path.stat().st_size / 2**20, 1),
        **run_cli(path, timeout),
    }
    if "error" not in row:
        row["pods_per_s"] = round(case.pods / row["wall_s"], 1)
        progress.log(f"{case.name}: {row['wall_s']:.1f}s wall, peak RSS {row['peak_rss_mib']:,.0f} MiB")
    else:
        progress.log(f"{case.name}: [red]failed[/]: {row['error'][-300:]}")
    return row


def exponent(xs: list[float], ys: list[float]) -> float | None:
    """The slope of log y against log x (least squares): y grows as x to this power."""
    if len(xs) < 2 or len(set(xs)) < 2:
        return None
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


# ---------------------------------------------------------------------------------------------- the report


def render(rows: list[dict[str, Any]], title: str, console: Console) -> None:
    table = Table(title=title, title_justify="left")
    for col in ("nodes", "pods", "Pending in", "Pending after", "preempted", "file MiB", "wall s", "CPU s", "pods/s",
                "peak RSS MiB"):  # fmt: skip
        table.add_column(col, justify="right")
    for r in rows:
        failed = "error" in r
        table.add_row(
            f"{r['nodes']:,}",
            f"{r['pods']:,}",
            f"{r['pending']:,} ({r['pending_pct']}%)",
            "-" if failed else f"{r['pending_after']:,}",
            "-" if failed else f"{r['preempted']:,}",
            f"{r['file_mib']:.0f}",
            f"{r['wall_s']:.1f}",
            f"{r['cpu_s']:.1f}",
            "[red]failed[/]" if failed else f"{r['pods_per_s']:,.0f}",
            f"{r['peak_rss_mib']:,.0f}",
        )
    console.print(table)


def exponents(sweep: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for axis, rows in sweep.items():
        ok = [r for r in rows if "error" not in r]
        xs = [float(r[axis]) for r in ok]
        out[axis] = {
            "wall": exponent(xs, [r["wall_s"] for r in ok]),
            "cpu": exponent(xs, [r["cpu_s"] for r in ok]),  # steadier than the wall clock on a shared machine
            "peak_rss": exponent(xs, [r["peak_rss_mib"] for r in ok]),
            # CPU against the pods left Pending (each one's cycle and PostFilter are the backlog's work): at a
            # fixed node count those grow faster than the pods, so this says whether the cost per Pending pod does.
            "cpu_in_pending_after": exponent(
                [float(r["pending_after"]) for r in ok if r["pending_after"]],
                [r["cpu_s"] for r in ok if r["pending_after"]],
            ),
        }
    return out


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 and 300 nodes, a smoke test")
    parser.add_argument("--nodes", type=_ints, metavar="N,N", help=f"node counts [{','.join(map(str, NODES))}]")
    parser.add_argument("--pending", type=_ints, metavar="P,P", help="percent Pending [0,20,50]")
    parser.add_argument("--pods-per-node", type=float, default=PODS_PER_NODE, metavar="R", help="[100000/15000]")
    parser.add_argument("--no-exponents", action="store_true", help="skip the sweeps for the growth exponents")
    parser.add_argument("--dir", metavar="DIR", help="where generated inputs are kept [a temporary folder]")
    parser.add_argument("--timeout", type=float, default=None, metavar="S", help="per-run time limit (seconds)")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON to PATH")
    args = parser.parse_args(argv)
    nodes = args.nodes or ((100, 300) if args.quick else NODES)
    percents = args.pending or ((0, 50) if args.quick else PENDING)
    console = Console() if sys.stdout.isatty() else Console(width=200)
    progress = Console(stderr=True, log_path=False)

    def pods_for(n: int) -> int:
        return round(n * args.pods_per_node)

    grid = [Case(n, pods_for(n), p) for n in nodes for p in percents]
    base = min(nodes)
    sweep_cases: dict[str, list[Case]] = {}
    if not args.no_exponents:  # x1, x2(, x4) of one axis, the other held at the smallest grid size
        factors = (1, 2) if args.quick else (1, 2, 4)
        sweep_cases["nodes"] = [Case(base * k, pods_for(base), EXPONENT_PENDING) for k in factors]
        sweep_cases["pods"] = [Case(base, pods_for(base) * k, EXPONENT_PENDING) for k in factors]
    with tempfile.TemporaryDirectory(prefix="accelsched-bench-scale-") as tmp:
        directory = Path(args.dir) if args.dir else Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        done: dict[Case, dict[str, Any]] = {}
        for case in grid + [c for cases in sweep_cases.values() for c in cases]:
            if case not in done:
                done[case] = measure(case, directory, args.timeout, progress)
    rows = [done[c] for c in grid]
    render(rows, "accelsched schedule -f FILE -o json, openb shapes, end to end", console)
    sweeps = {axis: [done[c] for c in cases] for axis, cases in sweep_cases.items()}
    growth = exponents(sweeps)
    for axis, rows_of in sweeps.items():
        render(rows_of, f"growth in {axis} ({EXPONENT_PENDING}% Pending)", console)
        e = growth[axis]
        console.print(
            f"growth exponent in {axis}: wall {_fmt(e['wall'])}, CPU {_fmt(e['cpu'])}, peak RSS {_fmt(e['peak_rss'])} "
            f"(1.0: linear; from a log-log fit); CPU in the pods left Pending: {_fmt(e['cpu_in_pending_after'])}"
        )
    console.print(
        f"[dim]{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; wall and peak RSS of "
        "the CLI process (read, validate, admit, schedule, print); pods/s: all pods of the file / wall. Goals at "
        f"15,000 nodes x 100,000 pods, a third Pending: peak RSS < {TARGET_RSS_MIB} MiB, "
        f">= {TARGET_PODS_PER_S:g} pods/s.[/]"
    )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        doc = {"cases": rows, "sweeps": sweeps, "exponents": growth, "cpus": os.cpu_count()}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 1 if any("error" in r for r in done.values()) else 0


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    sys.exit(main())
