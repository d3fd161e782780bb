"""``python -m benchmarks.kueueperf``: Kueue's own performance harness, run against minimalkueue and ``accelsched run``.

    python -m benchmarks.kueueperf --config baseline               # 5 cohorts x 6 ClusterQueues, 15,000 Workloads
    python -m benchmarks.kueueperf --config baseline --scale 0.02  # the same shape, 2% of each workload set
    python -m benchmarks.kueueperf --config large-scale --only accelsched

The harness is Kueue v0.19.2's test/performance/scheduler, from its Go module: the runner and minimalkueue are built
and cached by ``hack/build-controlplane.sh kueue-perf`` (here on demand, about 30 s once Kueue's packages are in the
Go build cache); the generator configs and thresholds are read from the module. Each system gets a fresh test
control plane (tests/live/controlplane.py: the cached etcd and kube-apiserver v1.36.3, with the request limits
Kueue's runner gives its envtest one, ``--max-requests-inflight=5000 --max-mutating-requests-inflight=2500``, and
etcd compacted every 5 minutes, the API server's default that envtest keeps, not the test suite's 5 seconds) with
Kueue's CRDs (config/components/crd/bases, as envtest installs them); the system is started and ready first, then
Kueue's runner runs against the cluster (its in-cluster mode, client QPS 1000 and burst 2000 as envtest's): it
creates the config's ResourceFlavor, ClusterQueues (a namespace and LocalQueue each, a cohort per cohort) and
Workloads (one pod set of one pod asking for CPU, at each workload set's creation interval), finishes each admitted
Workload after its class's runtime (``Finished=True``; an evicted one has its reservation unset), and records every
Workload's and ClusterQueue's events until the generation is done and no active ClusterQueue has pending or
reserving workloads. Then the system is stopped with SIGINT, as the runner stops minimalkueue. The two systems:

- ``minimalkueue``: Kueue's core controllers and scheduler (test/performance/scheduler/minimalkueue);
- ``accelsched``: ``accelsched run`` (this checkout), serving ``default-scheduler`` so that the runner's Workloads
  (no schedulerName in their pod template) are its own: the Workload door (live/workloadstatus.py) writes their
  admission, and live/clusterqueuestatus.py the ClusterQueues' status the runner reads.

Why not the runner's own ``--minimalKueue`` mode (it starts envtest and the system, and starts generating at once):
at a reduced ``--scale`` the generation lasts seconds, and a system still starting (a Python process takes a few)
is not yet writing ClusterQueue status when it ends, so the recorder, seeing no active queue with pending work,
stops at once. Here both systems are ready before the first object is created. The wall time is still the
system's process lifetime, start to exit after SIGINT (Kueue's cmd wallMs).

Reported per system, as Kueue's checker (test/performance/scheduler/checker) computes them: the wall time of the
system's process, the ``cq`` class's usage (CPU used over nominal quota times the recorded time), and the average
time to admission per workload class. A workload never admitted counts 0 in Kueue's average; the table says how
many of each class were admitted, and the average is over those. Kueue's thresholds for the full-size config
(configs/<name>/rangespec.yaml, about +20% over its own measured averages) are printed beside them. ``--scale``
multiplies each workload set's count (at least 1): fewer workloads, the same queues, classes and intervals; the
thresholds then only give the order of magnitude. ``--deadline`` bounds each system's run: at the deadline the
runner is interrupted and writes the summary of what it recorded (not every Workload admitted).
Exit status: 0 when each system admitted every Workload, 1 when one did not, 2 when something is missing.
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks import kueuetimeline
from benchmarks.live import start_scheduler

REPO = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO / "hack" / "build-controlplane.sh"
KUEUE = "sigs.k8s.io/kueue@v0.19.2"
HARNESS = "test/performance/scheduler"
SYSTEMS = ("minimalkueue", "accelsched")
CLASSES = ("small", "medium", "large")
CQ_CLASS = "cq"  # the ClusterQueue class of every shipped config


class Unavailable(RuntimeError):
    """Something the harness needs is not built or not in the Go module cache."""


@dataclass
class Result:
    system: str
    wall_ms: int
    usage_pct: float | None
    admitted: dict[str, tuple[int, int]]  # class -> (admitted, created)
    avg_admission_ms: dict[str, float | None]  # class -> average over the admitted ones
    evictions: dict[str, int] = field(default_factory=dict)
    completed: bool = True  # the runner ended by itself (not at the deadline)


def _build(args: list[str]) -> Path:
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), *args], capture_output=True, check=False)
    if proc.returncode != 0:
        what = " ".join(args) or "the control plane"
        raise Unavailable(f"{BUILD_SCRIPT} {what}: {proc.stderr.decode(errors='replace')[-1500:]}")
    return Path(proc.stdout.decode().strip().splitlines()[-1])


def kueue_module() -> Path:
    """Kueue's module in the Go module cache (the harness, its configs and its CRDs)."""
    try:
        out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, check=True).stdout.decode().strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise Unavailable(f"no Go toolchain to find Kueue's module: {exc}") from exc
    path = Path(out) / KUEUE
    if not (path / HARNESS).is_dir():
        raise Unavailable(f"Kueue's module is not in the Go module cache: {path} (hack/build-controlplane.sh kueue)")
    return path


def scaled_config(source: Path, scale: float) -> dict[str, Any]:
    """The generator config with each workload set's count times ``scale`` (rounded, at least 1)."""
    doc = yaml.safe_load(source.read_text())
    for cohort_set in doc.get("cohorts") or []:
        for queue_set in cohort_set.get("queuesSets") or []:
            for workload_set in queue_set.get("workloadsSets") or []:
                workload_set["count"] = max(1, round(workload_set["count"] * scale))
    return doc


def workload_count(doc: dict[str, Any]) -> int:
    return sum(
        cs["count"] * qs["count"] * ws["count"] * len(ws["workloads"])
        for cs in doc["cohorts"]
        for qs in cs["queuesSets"]
        for ws in qs["workloadsSets"]
    )


# accelsched run's client throttle here (clientConnection qps and burst): the runner's own, envtest's. minimalkueue
# is built with 50 and 100 (its main.go), for each kind it writes apart (controller-runtime makes a REST client,
# and so a throttle, per kind), and accelsched throttles Kueue's kinds the same way (live/kube.py Kube.throttle).
# --client-qps 50 --client-burst 100 runs accelsched as throttled as minimalkueue (docs/queues.md has both).
RUNNER_CLIENT = (1000.0, 2000)


def accelsched_config(workdir: Path, client: tuple[float, int] = RUNNER_CLIENT) -> Path:
    """``accelsched run``'s KubeSchedulerConfiguration: one profile, default-scheduler (the runner's Workloads name
    no schedulerName, so they are default-scheduler's, and the Workload door admits those of its profiles), and
    ``client``'s qps and burst."""
    config = workdir / "accelsched-config.yaml"
    profile = {"schedulerName": "default-scheduler"}
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": client[0], "burst": client[1]},
        "profiles": [profile],
    }
    config.write_text(yaml.safe_dump(doc))
    return config


class System:
    """The system under test as its own process, started (and ready) before the runner creates anything, stopped
    with SIGINT as the runner stops minimalkueue; ``wall_s`` is its process's lifetime, Kueue's cmd wallMs."""

    def __init__(
        self, name: str, harness: Path, kubeconfig: Path, out: Path, client: tuple[float, int] = RUNNER_CLIENT
    ) -> None:
        self.name, self.harness, self.kubeconfig, self.out, self.client = name, harness, kubeconfig, out, client
        self.started = self.wall_s = 0.0

    def start(self, timeout: float = 120.0) -> None:
        self.started = time.monotonic()
        if self.name == "accelsched":
            extra = [f"--config={accelsched_config(self.out, self.client)}", "--metrics-address=127.0.0.1"]
            self.proc, _ = start_scheduler(str(self.kubeconfig), self.out / "accelsched.log", timeout, extra)
            return
        log = self.out / "minimalkueue.log"
        args = [str(self.harness / "minimalkueue"), f"--kubeconfig={self.kubeconfig}", "--zap-log-level=2"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("wb"), start_new_session=True)
        deadline = time.monotonic() + timeout
        # Ready once its controllers run (the runner's own mode starts generating at once; here both systems get
        # the same head start).
        while not all(f"{c}-reconciler" in _starting_workers(log) for c in ("clusterqueue", "workload")):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"minimalkueue did not start; log:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.wall_s = time.monotonic() - self.started


def _starting_workers(log: Path) -> str:
    return "\n".join(line for line in log.read_text(errors="replace").splitlines() if "Starting workers" in line)


def run_system(
    system: str,
    harness: Path,
    module: Path,
    assets: Path,
    config: Path,
    out: Path,
    deadline: float,
    timeline: bool = False,
    client: tuple[float, int] = RUNNER_CLIENT,
) -> Result:
    """One run: a fresh control plane with Kueue's CRDs (the API server's request limits raised as Kueue's runner
    raises envtest's), the system started, then Kueue's runner against it (client QPS and burst as envtest's,
    1000 and 2000), interrupted at ``deadline`` seconds (it then writes what it recorded). ``timeline``: the
    Workloads' events are recorded too (benchmarks/kueuetimeline.py: ``timeline.jsonl``, summed up on stdout)."""
    from controlplane import ControlPlane, apply_crds

    from accelsched.live import kube as k

    out.mkdir(parents=True)
    limits = ("--max-requests-inflight=5000", "--max-mutating-requests-inflight=2500")
    # envtest leaves --etcd-compaction-interval at its 5m default. The tests' 5 s made the API server's watch cache
    # fall behind compaction under the runner's load ("required revision has been compacted"): it then closed
    # every ClusterQueue and Workload watch and answered 429 "storage is (re)initializing" for seconds.
    cp = ControlPlane(out / "controlplane", assets, compaction_interval="5m", extra_apiserver_args=limits).start()
    try:
        apply_crds(k.api_client(str(cp.kubeconfig)), module / "config/components/crd/bases")
        sut = System(system, harness, cp.kubeconfig, out, client)
        sut.start()
        recorder = kueuetimeline.Recorder(cp.kubeconfig, out / "timeline.jsonl").start() if timeline else None
        try:
            completed = _run_runner(harness / "runner", cp.kubeconfig, module, config, out, deadline)
        finally:
            sut.stop()
            if recorder is not None:
                recorder.stop()
                print(f"{system}: {kueuetimeline.summary((out / 'timeline.jsonl').read_text().splitlines())}")
                print(kueuetimeline.api_requests(cp.kubeconfig))
    finally:
        cp.stop()
    summary_file = out / "summary.yaml"
    if not summary_file.exists():
        tail = "\n".join((out / "runner.log").read_text(errors="replace").splitlines()[-25:])
        raise RuntimeError(f"Kueue's runner wrote no summary for {system}:\n{tail}")
    summary = yaml.safe_load(summary_file.read_text())
    return summarize(system, sut.wall_s, summary, out / "wlStates.csv", completed)


def _run_runner(runner: Path, kubeconfig: Path, module: Path, config: Path, out: Path, deadline: float) -> bool:
    """Kueue's runner against the cluster; True when it ended by itself (the recorder saw everything done)."""
    args = [str(runner), f"--o={out}", f"--generatorConfig={config}", "--qps=1000", "--burst=2000",
            f"--timeout={int(deadline) + 600}s"]  # fmt: skip
    # test/util (linked into the runner) finds Kueue's project dir at init: PROJECT_DIR's parent.
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PROJECT_DIR": str(module / "Makefile")}
    with (out / "runner.log").open("wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            proc.wait(timeout=deadline)
            return True
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)  # the runner stops recording and writes its summary
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return False
        except BaseException:  # interrupted (Ctrl-C): the runner runs in its own session, it must not outlive us
            proc.kill()
            proc.wait()
            raise


def summarize(system: str, wall_s: float, summary: dict[str, Any], wl_csv: Path, completed: bool) -> Result:
    """Kueue's checker's figures (test/performance/scheduler/checker): wall time, the cq class's usage; and the
    average time to admission per class over the admitted workloads. In wlStates.csv 0 ms to admitted is never
    admitted, or admitted already when the recorder first saw the Workload (its recorder measures from its first
    event): one that finished was admitted (the runner finishes admitted Workloads only) and counts, at 0 ms."""
    usage = None
    cq = (summary.get("clusterQueueClasses") or {}).get(CQ_CLASS)
    if cq:
        first, last = (_time(cq[k]) for k in ("firstEventTime", "lastEventTime"))
        elapsed_ms = (last - first) * 1000
        if cq.get("nominalQuota") and elapsed_ms > 0:
            usage = cq["cpuUsed"] * 100 / (cq["nominalQuota"] * elapsed_ms)
    waits: dict[str, list[int]] = {}
    created: dict[str, int] = {}
    evictions: dict[str, int] = {}
    with wl_csv.open() as f:
        for row in csv.DictReader(f):
            cls = row["class name"]
            created[cls] = created.get(cls, 0) + 1
            evictions[cls] = evictions.get(cls, 0) + int(row["num evictions"])
            if int(row["ms to admitted"]) > 0:
                waits.setdefault(cls, []).append(int(row["ms to admitted"]))
            elif int(row["ms to finish"]) > 0:  # admitted at the recorder's first sight of it (0 ms, as "never"
                # reads): the runner finishes only admitted Workloads
                waits.setdefault(cls, []).append(0)
    return Result(
        system,
        round(wall_s * 1000),
        usage,
        {c: (len(waits.get(c, [])), created.get(c, 0)) for c in created},
        {c: (sum(waits[c]) / len(waits[c]) if waits.get(c) else None) for c in created},
        evictions,
        completed,
    )


def _time(value: Any) -> float:
    """An RFC 3339 time (nanoseconds allowed, as the recorder writes) as epoch seconds."""
    from datetime import datetime

    if isinstance(value, datetime):
        return value.timestamp()
    text = str(value).replace("Z", "+00:00")
    head, _, tail = text.partition(".")
    if tail:  # Python reads at most microseconds
        digits = "".join(ch for ch in tail if ch.isdigit())
        text = f"{head}.{digits[:6]}{tail[len(digits) :]}"
    return datetime.fromisoformat(text).timestamp()


def table(results: list[Result], thresholds: dict[str, Any]) -> str:
    """One row per figure, a column per system and one for Kueue's threshold."""
    cmd = thresholds.get("cmd") or {}
    usage_min = (thresholds.get("clusterQueueClassesMinUsage") or {}).get(CQ_CLASS)
    max_wait = thresholds.get("wlClassesMaxAvgTimeToAdmissionMs") or {}
    rows: list[list[str]] = [["", *(r.system for r in results), "Kueue's threshold (full size)"]]
    rows.append(["wall time (s)", *(f"{r.wall_ms / 1000:.1f}" for r in results), _limit("<=", cmd.get("maxWallMs"))])
    rows.append(["usage, cq (%)", *(_num(r.usage_pct, "{:.1f}") for r in results), _limit(">=", usage_min, 1)])
    for cls in CLASSES:
        rows.append([f"avg time to admission, {cls} (s)",
                     *(_num(r.avg_admission_ms.get(cls), "{:.2f}", 1000) for r in results),
                     _limit("<=", max_wait.get(cls))])  # fmt: skip
    for cls in CLASSES:
        rows.append([f"admitted, {cls}", *(_count(r.admitted.get(cls)) for r in results), ""])
    rows.append(["evictions", *(str(sum(r.evictions.values())) for r in results), ""])
    rows.append(["ended by itself", *("yes" if r.completed else "no (deadline)" for r in results), ""])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]  # fmt: skip
    return "\n".join(lines)


def _num(value: float | None, fmt: str, divide: float = 1) -> str:
    return "-" if value is None else fmt.format(value / divide)


def _count(pair: tuple[int, int] | None) -> str:
    return "-" if pair is None else f"{pair[0]}/{pair[1]}"


def _limit(op: str, value: Any, unit: float = 1000) -> str:
    if value is None:
        return ""
    return f"{op} {value / unit:g}" if unit != 1 else f"{op} {value:g}"


def run(
    config_name: str,
    scale: float,
    systems: tuple[str, ...],
    workdir: Path,
    deadline: float,
    timeline: bool = False,
    client: tuple[float, int] = RUNNER_CLIENT,
) -> tuple[list[Result], dict[str, Any], int]:
    """Both systems through the harness in turn: (results, Kueue's thresholds, workloads per run)."""
    module = kueue_module()
    configs = module / HARNESS / "configs" / config_name
    if not (configs / "generator.yaml").is_file():
        known = sorted(p.name for p in (module / HARNESS / "configs").iterdir() if p.is_dir())
        raise Unavailable(f"no config {config_name!r} in {module / HARNESS / 'configs'} (known: {', '.join(known)})")
    if (configs / "generator.yaml").read_text().find("topology:") >= 0:
        raise Unavailable(f"config {config_name!r} needs TAS (topology-aware scheduling), not run here")
    try:
        assets = _build(["--check"])
    except Unavailable as exc:
        raise Unavailable("the test control plane is not built (hack/build-controlplane.sh)") from exc
    harness = _build(["kueue-perf"])
    doc = scaled_config(configs / "generator.yaml", scale)
    generator = workdir / "generator.yaml"
    generator.write_text(yaml.safe_dump(doc, sort_keys=False))
    thresholds = yaml.safe_load((configs / "rangespec.yaml").read_text()) or {}
    sys.path.insert(0, str(REPO / "tests" / "live"))  # the test control plane (controlplane.py)
    results = [
        run_system(s, harness, module, assets, generator, workdir / s, deadline, timeline, client) for s in systems
    ]
    return results, thresholds, workload_count(doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kueueperf", description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="baseline", help="a config of Kueue's harness (baseline, large-scale)")
    parser.add_argument("--scale", type=float, default=1.0, help="times each workload set's count (default 1)")
    parser.add_argument("--only", choices=SYSTEMS)
    parser.add_argument("--deadline", type=float, default=1800.0, help="seconds each system's run may take")
    parser.add_argument("--keep", type=Path, help="keep the runs' artifacts (summaries, CSVs, logs) in this dir")
    parser.add_argument("--timeline", action="store_true", help="record the Workloads' events and sum them up")
    qps, burst = RUNNER_CLIENT
    parser.add_argument("--client-qps", type=float, default=qps, help="accelsched run's clientConnection qps")
    parser.add_argument("--client-burst", type=int, default=burst, help="accelsched run's clientConnection burst")
    args = parser.parse_args(argv)
    client = (args.client_qps, args.client_burst)
    if args.scale <= 0:
        parser.error("--scale must be more than 0")
    systems = (args.only,) if args.only else SYSTEMS
    try:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            results, thresholds, count = run(
                args.config, args.scale, systems, args.keep, args.deadline, args.timeline, client
            )
        else:
            with tempfile.TemporaryDirectory(prefix="kueueperf-") as tmp:
                results, thresholds, count = run(
                    args.config, args.scale, systems, Path(tmp), args.deadline, args.timeline, client
                )
    except Unavailable as exc:
        print(f"benchmarks.kueueperf: {exc}", file=sys.stderr)
        return 2
    print(f"Kueue's performance harness, config {args.config}, scale {args.scale:g}: {count} Workloads per system")
    print(table(results, thresholds))
    return 0 if all(a == n for r in results for a, n in r.admitted.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
