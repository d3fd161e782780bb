"""The package works anywhere: the openb trace and the demo's YAML ship inside it, ``--data-dir`` and
``$ACCELSCHED_DATA_DIR`` point elsewhere, and (integration) the wheel and the sdist that ``python -m build`` makes
install in a fresh venv and run ``simulate --trace openb`` and ``demo`` in an empty folder."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import lzma
import os
import subprocess
import sys
import time
import tomllib
import urllib.request
import venv
from pathlib import Path

import pytest
from click.testing import CliRunner
from sim_traces import trace_folder

from accelsched import demo
from accelsched.cli import main
from accelsched.sim.trace import BUNDLED_DIR, DATA_DIR_ENV, NODE_LIST, pod_lists, trace_paths

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "accelsched"


def package_data_patterns() -> list[str]:
    with (REPO / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)["tool"]["setuptools"]["package-data"]["accelsched"]


def shipped(path: Path) -> bool:
    """Whether pyproject's package-data puts ``path`` (under accelsched/) into the sdist and the wheel."""
    name = path.relative_to(PACKAGE).as_posix()
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in package_data_patterns())


# ------------------------------------------------------------------------------------------- the bundled data


def test_the_bundled_trace_is_the_published_one_byte_for_byte():
    sums = dict(reversed(line.split("  ")) for line in (BUNDLED_DIR / "SHA256SUMS").read_text().splitlines())
    assert len(sums) == 26  # 2 node lists, 24 pod lists
    assert sorted(p.name for p in BUNDLED_DIR.glob("*.csv.xz")) == sorted(f"{n}.xz" for n in sums)
    for name, digest in sums.items():
        with lzma.open(BUNDLED_DIR / f"{name}.xz") as handle:
            assert hashlib.sha256(handle.read()).hexdigest() == digest, name
    assert "research or study" in (BUNDLED_DIR / "LICENSE-NOTE.md").read_text()
    assert "clusterdata" in (BUNDLED_DIR / "README.md").read_text()


def test_package_data_ships_every_file_the_package_reads():
    bundled = [p for p in BUNDLED_DIR.iterdir() if p.is_file()]
    assert len(bundled) == 29 and all(shipped(p) for p in bundled), [p.name for p in bundled if not shipped(p)]
    lab = [demo.ROOT / name for step in demo.LAB_STEPS for name in step.files]
    assert lab and all(p.is_file() and shipped(p) for p in lab), [str(p) for p in lab if not shipped(p)]
    assert not any(shipped(p) for p in PACKAGE.rglob("*.py"))  # modules travel as packages, not data


def test_without_flag_or_environment_the_bundled_copy_is_read(monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert trace_paths("openb", "gpushare40") == (
        BUNDLED_DIR / f"{NODE_LIST}.csv.xz",
        BUNDLED_DIR / "openb_pod_list_gpushare40.csv.xz",
    )
    assert len(pod_lists(BUNDLED_DIR)) == 24


# ------------------------------------------------------------------------------------ other copies, other traces


def simulate_json(*args: str) -> dict:
    result = CliRunner().invoke(
        main, ["simulate", "--policy", "fgd", "--seeds", "1", "--jobs", "1", "-o", "json", *args]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_data_dir_flag_its_old_spelling_and_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    for folder, seed in ((first, 11), (second, 12)):
        (folder / "openb_pod_list_default.csv").write_text(trace_folder(folder, seed, nodes=10, pods=60).read_text())
    assert simulate_json("--data-dir", str(first))["trace"]["nodes"] == str(first / f"{NODE_LIST}.csv")
    assert simulate_json("--data", str(first))["trace"]["pods"] == str(first / "openb_pod_list_default.csv")
    monkeypatch.setenv(DATA_DIR_ENV, str(second))
    assert simulate_json()["trace"]["nodes"] == str(second / f"{NODE_LIST}.csv")
    assert simulate_json("--data-dir", str(first))["trace"]["nodes"] == str(first / f"{NODE_LIST}.csv")  # flag wins


def test_a_compressed_copy_replays_exactly_like_the_plain_one(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    plain.mkdir()
    packed.mkdir()
    pods = trace_folder(plain, 13, nodes=12, pods=120)
    for path in (plain / f"{NODE_LIST}.csv", pods):
        (packed / f"{path.name}.xz").write_bytes(lzma.compress(path.read_bytes()))
    want = simulate_json("--data-dir", str(plain), "--pods", str(pods))
    got = simulate_json("--data-dir", str(packed), "--pods", str(packed / f"{pods.name}.xz"))
    assert got["trace"]["nodes"] == str(packed / f"{NODE_LIST}.csv.xz")
    for run in (want, got):
        for policy in run["policies"]:
            del policy["seconds"], policy["cpu_seconds"]
    assert got["policies"] == want["policies"] and want["policies"][0]["alloc"]


POD_HEADER = b"name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
BAD_XZ = {
    "not-xz": POD_HEADER,
    "truncated-xz": lzma.compress(POD_HEADER * 50)[:-20],
    "latin1-in-xz": lzma.compress("name,cpu_mi\xe9lli\n".encode("latin-1")),
}


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--data-dir", "{tmp}/nope"], None, "--data-dir: '{tmp}/nope' is not a folder"),
        ([], "{tmp}/nope", "ACCELSCHED_DATA_DIR: '{tmp}/nope' is not a folder"),
        (["--data-dir", "{tmp}/file.txt"], None, "--data-dir: '{tmp}/file.txt' is not a folder"),
        (["--data-dir", "{tmp}", "--pods", "cpu0"], None, "--data-dir: no node list openb_node_list_gpu_node.csv (or "),
        (["--pods", "{tmp}/gone.csv.xz"], None, "{tmp}/gone.csv.xz: cannot read: No such file or directory"),
        (["--pods", "{tmp}/not-xz.csv.xz"], None, "{tmp}/not-xz.csv.xz: not a valid xz file: Input format not"),
        (["--pods", "{tmp}/truncated-xz.csv.xz"], None, "{tmp}/truncated-xz.csv.xz: not a valid xz file: Compressed"),
        (["--pods", "{tmp}/latin1-in-xz.csv.xz"], None, "{tmp}/latin1-in-xz.csv.xz: byte 11: not UTF-8 text"),
    ],
)
def test_a_bad_data_location_or_file_is_one_line_and_exit_2(tmp_path, monkeypatch, args, env, expected):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "openb_pod_list_cpu0.csv").write_text("name\n")
    for name, body in BAD_XZ.items():
        (tmp_path / f"{name}.csv.xz").write_bytes(body)
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    if env:
        monkeypatch.setenv(DATA_DIR_ENV, env.format(tmp=tmp_path))
    result = CliRunner().invoke(main, ["simulate", "--seeds", "1", *(a.format(tmp=tmp_path) for a in args)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("accelsched: error: " + expected.format(tmp=tmp_path)), result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output


# ------------------------------------------------------------------------- the wheel and the sdist, installed


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def check_installed(bin_dir: Path, empty: Path, env: dict[str, str]) -> None:
    """In an empty folder, the installed ``accelsched`` replays the bundled trace and plays the demo."""
    where = run([str(bin_dir / "python"), "-c", "import accelsched; print(accelsched.__file__)"], empty, env)
    site = Path(where.stdout.strip()).parent
    assert site.is_relative_to(bin_dir.parent), site  # the installed copy, not the checkout
    cli = str(bin_dir / "accelsched")
    sim = run(
        [cli, "simulate", "--trace", "openb", "--policy", "fgd", "--seeds", "42", "--jobs", "1", "-o", "json"],
        empty,
        env,
    )
    got = json.loads(sim.stdout)
    assert got["trace"]["nodes"] == str(site / "data" / "alibaba-gpu-v2023" / f"{NODE_LIST}.csv.xz")
    assert got["trace"]["gpus"] == 6212
    (fgd,) = got["policies"]
    assert abs(fgd["final_alloc"] - 0.9546) < 0.002, fgd  # FGD at 130% on seed 42 (the paper: 95.4% median)
    shown = run([cli, "demo"], empty, env).stdout
    for step in demo.LAB_STEPS:
        assert step.title.split(":")[0] in shown
    assert "Summary" in shown and "accelsched: error" not in shown
    check_ui_serves(cli, empty, env)
    assert not any(empty.iterdir()), list(empty.iterdir())  # nothing written where it ran


def check_ui_serves(cli: str, cwd: Path, env: dict[str, str]) -> None:
    """``accelsched ui`` from the installed copy serves its page, its modules and the lab's state: the assets are
    package data and its server's dependencies come with the wheel."""
    command = [cli, "ui", "--demo", "--port", "0"]
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "accelsched ui: serving http://127.0.0.1:PORT/ (read-only; ...)"
        assert "serving http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        url = line.split("serving ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=30) as page:
            assert b'type="module"' in page.read()
        with urllib.request.urlopen(url + "static/app.js", timeout=30) as module:
            assert module.headers["Content-Type"].startswith("text/javascript")
        with urllib.request.urlopen(url + "api/state", timeout=60) as state:
            assert {n["name"] for n in json.load(state)["nodes"]} >= {"node-a", "node-d"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.integration
def test_the_wheel_and_the_sdist_install_in_a_fresh_venv_and_run_in_an_empty_folder(tmp_path):
    """``python -m build`` builds the sdist, then the wheel from that sdist (so the sdist must carry the data);
    the wheel goes into a fresh venv with its dependencies (from the index, through pip's cache), then the sdist
    over it. Each runs ``simulate --trace openb`` and ``demo`` in an empty folder."""
    pytest.importorskip("build", reason="the dev extra installs build: pip install -e '.[dev]'")
    env = {k: v for k, v in os.environ.items() if k not in (DATA_DIR_ENV, "PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    started = time.perf_counter()
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)], tmp_path, env)
    (wheel,) = dist.glob("accelsched-*.whl")
    (sdist,) = dist.glob("accelsched-*.tar.gz")
    built = time.perf_counter()

    home = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(home)
    bin_dir = home / "bin"
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    empty = tmp_path / "empty"
    empty.mkdir()
    run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)], tmp_path, env)
    installed = time.perf_counter()
    check_installed(bin_dir, empty, env)

    run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(sdist)],
        tmp_path,
        env,
    )
    check_installed(bin_dir, empty, env)
    print(
        f"build {built - started:.1f} s, venv + wheel install {installed - built:.1f} s, "
        f"all {time.perf_counter() - started:.1f} s"
    )
