"""Measuring one workload (in a child process) and running each selected workload in its own child.

The child builds the cluster (untimed), schedules the init pods (untimed), then times ``Scheduler.run`` over
the measured pods with a wall clock. Its peak RSS (``ru_maxrss``) is therefore the workload's own. With
``heap`` the child also traces the Python heap (tracemalloc, numpy buffers included) over the measured run
only; tracing slows allocation, so the traced run's figures come from a separate child and only its heap
peak is kept.
"""

from __future__ import annotations

import cProfile
import gc
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from types import ModuleType
from typing import Any

from accelsched.cluster.state import ClusterState
from accelsched.config import default_config
from accelsched.dra.state import DRAState
from accelsched.framework import gang
from accelsched.framework.scheduler import Scheduler
from benchmarks.workloads import BY_NAME, Workload

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 10.0
MAX_PROBLEMS = 10


class Unavailable(RuntimeError):
    """What a live benchmark needs (conformance/kueue, the test control plane, the Kueue binary) is not here."""


def kueue_control_plane(workdir: Path) -> tuple[ModuleType, Any]:
    """Kueue's process module (conformance/kueue/process.py) and a test control plane (tests/live/controlplane.py)
    under ``workdir / "cp"``, not started: how every live benchmark against Kueue begins. Raises ``Unavailable``
    naming what is missing, so that the benchmark exits 2 with why instead of building for minutes."""
    live = str(ROOT / "tests" / "live")
    if live not in sys.path:
        sys.path.insert(0, live)
    try:
        from conformance.kueue import process
    except ImportError as exc:
        raise Unavailable("conformance/kueue is not in this checkout") from exc
    from controlplane import ControlPlane, find_binaries

    binaries = find_binaries()
    if binaries is None:
        raise Unavailable("the test control plane is not built (hack/build-controlplane.sh)")
    # etcd compacts every 5 minutes, as on a real cluster and in envtest; the tests' 5 s (for their 410 Gone cases)
    # lets the watch cache fall behind compaction under a benchmark's load and answer 429 while it re-initializes.
    return process, ControlPlane(workdir / "cp", binaries, compaction_interval="5m")


def kueue_binary(process: ModuleType) -> Path:
    """The cached Kueue binary (``process`` from ``kueue_control_plane``), never built here: ``Unavailable``."""
    binary = process.kueue_binary(build=False)
    if binary is None:
        raise Unavailable("the Kueue binary is not built (hack/build-controlplane.sh kueue)")
    return binary


def _mib_from_kib(kib: int) -> float:
    return kib / 1024


def peak_rss_mib() -> float:
    """This process's peak resident set size (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else _mib_from_kib(peak)


def current_rss_mib() -> float | None:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(
    workload: Workload, quick: bool, heap: bool = False, profile_top: int = 0, score_all_nodes: bool = False
) -> dict[str, Any]:
    """Build, schedule the init pods, then time the measured pods. Runs in the current process. By default as
    kube-scheduler (and scheduler_perf) runs: percentageOfNodesToScore's adaptive default; ``score_all_nodes``
    filters and scores every node for every pod."""
    sizes = workload.sizes(quick)
    t0 = time.perf_counter()
    built = workload.build(sizes)
    build_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    cluster = ClusterState(built.nodes)
    if built.dra:  # as engine.Session.start attaches the DRA objects
        cluster.dra = DRAState(built.dra, cluster)
    scheduler = Scheduler(cluster, default_config(), seed=0, score_all_nodes=score_all_nodes)
    scheduler.groups = dict(built.groups)
    if built.started is not None:
        built.started(scheduler)
    init_results = scheduler.run(built.init)
    init_s = time.perf_counter() - t0
    problems = [f"init pod {r.pod.key} not scheduled: {r.message}" for r in init_results if not r.scheduled]

    # Per-attempt latency: the observer runs right before each attempt.
    starts: list[float] = []
    scheduler.observer = lambda _pod: starts.append(time.perf_counter())
    gc.collect()
    rss_before = current_rss_mib()
    peak_before = peak_rss_mib()
    profiler = cProfile.Profile() if profile_top else None
    if heap:
        tracemalloc.start()
        tracemalloc.reset_peak()
        heap_base = tracemalloc.get_traced_memory()[0]
    if profiler is not None:
        profiler.enable()
    t0 = time.perf_counter()
    run = built.run_measured or (lambda s, pods: s.run(pods))
    results = run(scheduler, built.measured)
    seconds = time.perf_counter() - t0
    if profiler is not None:
        profiler.disable()
    heap_peak_mib = None
    if heap:
        heap_peak_mib = (tracemalloc.get_traced_memory()[1] - heap_base) / (1024 * 1024)
        tracemalloc.stop()
    scheduler.observer = None

    measured_keys = {p.key for p in built.measured}
    evicted = [r for r in results if r.pod.key not in measured_keys]  # bound pods preempted along the way
    results_all, results = results, [r for r in results if r.pod.key in measured_keys]
    scheduled = [r for r in results if r.scheduled]
    unscheduled = [r for r in results if not r.scheduled]
    if len(results) != len(built.measured):
        problems.append(f"{len(results)} results for {len(built.measured)} measured pods")
    if len(scheduled) != built.expect_scheduled:
        problems.append(f"{len(scheduled)} measured pods scheduled, expected {built.expect_scheduled}")
    if len(unscheduled) != built.expect_unschedulable:
        examples = "; ".join(f"{r.pod.key}: {r.message}" for r in unscheduled[:3])
        problems.append(
            f"{len(unscheduled)} measured pods unschedulable, expected {built.expect_unschedulable} ({examples})"
        )
    if built.verify is not None:
        problems.extend(built.verify(init_results, results_all))

    latencies = [b - a for a, b in zip(starts, [*starts[1:], t0 + seconds], strict=True)]
    pods_per_s = len(scheduled) / seconds if seconds > 0 else 0.0
    gang_keys = {gang.group_key(r.pod) for r in scheduled} - {None}
    ratio = pods_per_s / workload.threshold
    others = [
        f"scheduler_perf {workload.family}/{variant}: threshold {threshold:g} pods/s,"
        f" ratio {pods_per_s / threshold:.2f}x"
        for variant, threshold in workload.other_thresholds
    ]
    out: dict[str, Any] = {
        "workload": workload.name,
        "family": workload.family,
        "variant": workload.variant,
        "description": workload.description,
        "deviations": [*workload.deviations, *others],
        "other_thresholds": [
            {"variant": v, "kube_scheduler_pods_per_s": t, "ratio": round(pods_per_s / t, 2)}
            for v, t in workload.other_thresholds
        ],
        "quick": quick,
        "nodes_scored": "all nodes (--score-all-nodes)" if score_all_nodes else "percentageOfNodesToScore (adaptive)",
        "nodes": cluster.n,
        "init_pods": len(built.init),
        "measured_pods": len(built.measured) - built.expect_unschedulable,
        "unschedulable_pods": built.expect_unschedulable,
        "expected_scheduled": built.expect_scheduled,
        "scheduled": len(scheduled),
        "attempts": len(starts),
        "all_scheduled": len(scheduled) == built.expect_scheduled and not problems,
        "problems": problems[:MAX_PROBLEMS],
        "problem_count": len(problems),
        "build_s": round(build_s, 3),
        "init_s": round(init_s, 3),
        "seconds": round(seconds, 4),
        "pods_per_s": round(pods_per_s, 1),
        "preempted": len(evicted),
        "gangs": len(gang_keys),
        "gangs_per_s": round(len(gang_keys) / seconds, 1) if seconds > 0 else 0.0,
        "latency_ms_p50": round(_percentile(latencies, 0.50) * 1000, 3),
        "latency_ms_p99": round(_percentile(latencies, 0.99) * 1000, 3),
        "latency_ms_max": round(max(latencies, default=0.0) * 1000, 3),
        "feasible_nodes_mean": round(statistics.fmean(r.feasible for r in scheduled), 1) if scheduled else 0.0,
        "rss_before_mib": round(rss_before, 1) if rss_before is not None else None,
        "peak_rss_before_mib": round(peak_before, 1),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "heap_peak_mib": round(heap_peak_mib, 1) if heap_peak_mib is not None else None,
        "kube_scheduler_pods_per_s": workload.threshold,
        "ratio": round(ratio, 2),
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio >= TARGET_RATIO,
    }
    if profiler is not None:
        buf = io.StringIO()
        pstats.Stats(profiler, stream=buf).sort_stats("cumulative").print_stats(profile_top)
        out["profile"] = buf.getvalue()
    return out


def child_main(
    name: str, result_path: str, quick: bool, heap: bool, profile_top: int, score_all_nodes: bool = False
) -> int:
    out = measure(BY_NAME[name], quick, heap, profile_top, score_all_nodes)
    Path(result_path).write_text(json.dumps(out, indent=2))
    return 0


def run_in_child(
    workload: Workload,
    quick: bool,
    heap: bool = False,
    profile_top: int = 0,
    timeout: float | None = None,
    score_all_nodes: bool = False,
) -> dict[str, Any]:
    """Run ``measure`` in a fresh interpreter, so peak RSS and the heap are the workload's own."""
    with tempfile.TemporaryDirectory(prefix="accelsched-bench-") as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "benchmarks", "--child", workload.name, "--result", str(result)]
        if quick:
            cmd.append("--quick")
        if heap:
            cmd.append("--heap")
        if profile_top:
            cmd += ["--profile", str(profile_top)]
        if score_all_nodes:
            cmd.append("--score-all-nodes")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return failed(workload, quick, f"timed out after {timeout:g}s")
        if proc.returncode != 0 or not result.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            return failed(workload, quick, f"child exited {proc.returncode}: " + " | ".join(tail))
        return json.loads(result.read_text())


def failed(workload: Workload, quick: bool, error: str) -> dict[str, Any]:
    sizes = workload.sizes(quick)
    return {
        "workload": workload.name,
        "family": workload.family,
        "variant": workload.variant,
        "quick": quick,
        "nodes": sizes.nodes,
        "init_pods": sizes.init_pods,
        "measured_pods": sizes.measured_pods,
        "unschedulable_pods": sizes.unschedulable_pods,
        "expected_scheduled": sizes.measured_pods,
        "scheduled": 0,
        "all_scheduled": False,
        "problems": [error],
        "problem_count": 1,
        "pods_per_s": 0.0,
        "kube_scheduler_pods_per_s": workload.threshold,
        "ratio": 0.0,
        "target_ratio": TARGET_RATIO,
        "meets_target": False,
        "error": error,
    }
