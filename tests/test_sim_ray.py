"""``simulate --executor ray``: the same bytes as the local pool, on a real Ray cluster (a head and a worker on
loopback, started here), and bad executor input as one line with exit 2, in bounded time."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from sim_traces import trace_folder

from accelsched.cli import main
from accelsched.sim.executor import CONNECT_TIMEOUT_S, INSTALL_HINT

HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason=f"Ray is not installed ({INSTALL_HINT}; make test installs it)")
BIN = Path(sys.executable).parent
# Nothing here reports usage statistics anywhere; the cluster binds loopback (Ray itself advertises the host's
# own interface address for 127.0.0.1, which stays on this machine).
RAY_ENV = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
TASK_MARK = ":task_name:_experiment_on_worker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def simulate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "accelsched"), "simulate", *args], env=RAY_ENV, capture_output=True, text=True, timeout=600
    )


class LoopbackCluster:
    """``ray start --block`` for a head and one worker, each in its own session (process group) and temp dir, so
    stopping kills exactly these processes and nothing else of Ray's on the machine."""

    def __init__(self) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # Short: Ray's unix sockets live under the temp dir and a socket path has ~107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="asray-", dir="/tmp"))
        self.procs: list[subprocess.Popen] = []

    def start_node(self, name: str, *args: str) -> None:
        log = self.root / f"{name}.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [str(BIN / "ray"), "start", "--block", "--num-cpus=1", "--disable-usage-stats", *args,
                 f"--temp-dir={self.root / name}"],
                env=RAY_ENV, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray start {name} failed:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)

    def start(self) -> None:
        self.start_node(
            "head", "--head", "--node-ip-address=127.0.0.1", f"--port={self.port}", "--include-dashboard=false"
        )
        self.start_node("worker", f"--address={self.address}", "--node-ip-address=127.0.0.1")

    def tasks_run_by(self, name: str) -> int:
        logs = self.root / name / "session_latest" / "logs"
        return sum(p.read_text().count(TASK_MARK) for p in logs.glob("worker-*.out"))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group of our own `ray start`: gcs, raylet, workers
            proc.wait(30)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_cluster():
    if not HAVE_RAY:
        pytest.skip(f"Ray is not installed ({INSTALL_HINT}; make test installs it)")
    cluster = LoopbackCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("kind", "tasks", "args"),
    [
        # Every policy; tasks of milliseconds, so Ray may well keep them all on the driver's node.
        ("synthetic", 18, ("--policy", "all", "--seeds", "1-3")),
        # The real trace: FGD (~7 s) and Random (~3 s) run side by side on the two nodes, and the second task
        # finishes first.
        ("openb", 2, ("--pods", "gpushare40", "--policy", "fgd,random", "--seeds", "42")),
    ],
    ids=["synthetic", "openb-gpushare40"],
)
def test_ray_sweep_writes_the_local_bytes(ray_cluster, tmp_path, kind, tasks, args):
    args = list(args)
    if kind == "synthetic":
        args = ["--data-dir", str(tmp_path), "--pods", str(trace_folder(tmp_path, 5, 30, 300)), *args]
    before = {node: ray_cluster.tasks_run_by(node) for node in ("head", "worker")}
    local = simulate(*args, "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    remote = simulate(*args, "--executor", f"ray:{ray_cluster.address}", "--out", str(tmp_path / "ray"))
    assert remote.returncode == 0, remote.stderr
    for name in ("summary.csv", "curves.csv"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name
    # Every experiment ran as a Ray task (the marks are Ray's per-task log lines).
    deadline = time.monotonic() + 10  # the workers' log files are written asynchronously
    while sum((ran := {node: ray_cluster.tasks_run_by(node) - n for node, n in before.items()}).values()) < tasks:
        assert time.monotonic() < deadline, f"only {ran} of {tasks} Ray tasks left a trace in the nodes' logs"
        time.sleep(0.2)
    if kind == "openb":  # tasks of seconds: both nodes took one
        assert ran["head"] > 0 and ran["worker"] > 0, ran


@pytest.mark.integration
def test_ray_refuses_timeline_mode(ray_cluster, tmp_path):
    pods = trace_folder(tmp_path, 6)
    run = simulate("--data-dir", str(tmp_path), "--pods", str(pods), "--mode", "timeline",
                   "--executor", f"ray:{ray_cluster.address}")  # fmt: skip
    assert run.returncode == 2 and run.stderr.strip().splitlines() == [
        "accelsched: error: --executor: runs the inflation mode's experiments; --mode timeline runs here"
    ]


def cli(tmp_path, *executor: str):
    pods = trace_folder(tmp_path, 7)
    return CliRunner().invoke(main, ["simulate", "--data-dir", str(tmp_path), "--pods", str(pods), *executor])


def assert_one_line(result, text: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelsched: error: ") and text in lines[0], result.output


@pytest.mark.parametrize(
    ("executor", "text"),
    [
        ("bogus", "--executor: 'bogus' is not local, ray or ray:HOST:PORT"),
        ("local:4", "'local:4' is not local, ray or ray:HOST:PORT"),
        ("ray:nonsense", "--executor: 'nonsense' is not HOST:PORT"),
        ("ray:127.0.0.1:0", "'127.0.0.1:0' is not HOST:PORT"),
        ("ray:127.0.0.1:65536", "'127.0.0.1:65536' is not HOST:PORT"),
        ("ray:127.0.0.1:+80", "'127.0.0.1:+80' is not HOST:PORT"),
        ("ray:a/b:80", "'a/b:80' is not HOST:PORT"),
        ("ray:[::zz]:80", "'::zz' is not a host name or IP address"),
    ],
)
@needs_ray
def test_malformed_executor_is_bad_input(tmp_path, executor, text):
    assert_one_line(cli(tmp_path, "--executor", executor), text)


@needs_ray
def test_ray_without_an_address_says_how_to_name_one(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert_one_line(cli(tmp_path, "--executor", "ray"), "--executor: name the cluster: ray:HOST:PORT")


@needs_ray
def test_jobs_with_ray_is_bad_input(tmp_path):
    assert_one_line(cli(tmp_path, "--executor", "ray:127.0.0.1:6379", "--jobs", "2"), "--jobs: counts local")


@needs_ray
def test_nothing_listening_fails_fast(tmp_path, monkeypatch):
    port = free_port()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")  # $RAY_ADDRESS is what plain `ray` reads
    started = time.monotonic()
    assert_one_line(cli(tmp_path, "--executor", "ray"), f"--executor: no Ray cluster answers at 127.0.0.1:{port}")
    assert time.monotonic() - started < CONNECT_TIMEOUT_S + 5


@pytest.mark.integration
@needs_ray
def test_silent_listener_fails_within_the_timeout(tmp_path):
    """A port that accepts and never speaks: ray.init alone would wait for minutes."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        accepted: list[socket.socket] = []
        thread = threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True)
        thread.start()
        started = time.monotonic()
        result = cli(tmp_path, "--executor", f"ray:127.0.0.1:{server.getsockname()[1]}")
        elapsed = time.monotonic() - started
        for conn in accepted:
            conn.close()
    assert_one_line(result, "no Ray cluster answers")
    assert elapsed < CONNECT_TIMEOUT_S + 5


def test_without_ray_the_message_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets where the extra is not installed
    assert_one_line(cli(tmp_path, "--executor", "ray:127.0.0.1:6379"), f"Ray is not installed: {INSTALL_HINT}")
