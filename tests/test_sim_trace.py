"""Trace loading: every variant's columns, and malformed rows reported with file and line (exit 2 on the CLI)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sim_traces import NODE_HEADER, POD_HEADER, trace_folder, write_trace

from accelsched.cli import main
from accelsched.errors import InputError
from accelsched.sim.replay import inflate
from accelsched.sim.trace import load_nodes, load_pods, trace_paths

GOOD_POD = "p0,4000,8192,1,500,T4|G2,LS,Running,10,99,10"


def write(tmp_path, name, *lines):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_loads_columns_specs_and_times(tmp_path):
    nodes = load_nodes(write(tmp_path, "n.csv", NODE_HEADER, "a,64000,262144,2,T4", "b,96000,393216,8,G2"))
    assert nodes.n == 2 and nodes.gpu_milli_capacity == 10_000 and nodes.models == ["T4", "G2"]
    pods = load_pods(write(tmp_path, "p.csv", POD_HEADER, GOOD_POD, "p1,0,1024,0,0,,BE,Running,20,,"))
    assert pods.specs[int(pods.spec[0])] == frozenset({"T4", "G2"}) and pods.specs[int(pods.spec[1])] == frozenset()
    assert pods.creation.tolist() == [10, 20] and pods.deletion.tolist() == [99, -1]  # no end: never leaves
    assert pods.gpu_request.tolist() == [500, 0]


def test_multigpu_variant_has_no_time_columns(tmp_path):
    pods = load_pods(write(tmp_path, "m.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli", "p0,1,1,8,1000"))
    assert pods.creation is None and pods.gpu_request.tolist() == [8000]


@pytest.mark.parametrize(
    ("row", "where", "what"),
    [
        ("p1,4x00,8192,1,500,,LS,Running,10,99,10", "cpu_milli", "'4x00' is not a whole number"),
        ("p1,4000,8192,9,1000,,LS,Running,10,99,10", "num_gpu", "9 must be in 0..8"),
        ("p1,4000,8192,2,500,,LS,Running,10,99,10", "gpu_milli", "a multi-GPU pod takes whole GPUs"),
        ("p1,4000,8192,1,1500,,LS,Running,10,99,10", "gpu_milli", "1500 must be in 0..1000"),
        ("p1,4000,8192,1,500,,LS,Running,10,5,10", "deletion_time", "5 is before creation_time 10"),
        ("p1,4000,8192,1", "", "has 4 fields, the header has 11"),
    ],
)
def test_malformed_row_names_file_and_line(tmp_path, row, where, what):
    path = write(tmp_path, "p.csv", POD_HEADER, GOOD_POD, row)
    with pytest.raises(InputError) as err:
        load_pods(path)
    assert f"{path}:3" in str(err.value) and what in str(err.value) and where in str(err.value)


def test_missing_column_and_empty_file(tmp_path):
    with pytest.raises(InputError, match=r"n\.csv:1: missing column\(s\) model"):
        load_nodes(write(tmp_path, "n.csv", "sn,cpu_milli,memory_mib,gpu", "a,1,1,1"))
    with pytest.raises(InputError, match="is empty"):
        load_pods(write(tmp_path, "e.csv", ""))


def test_unknown_pod_list_names_the_known_ones(tmp_path):
    write_trace(tmp_path, 1)
    (tmp_path / "openb_pod_list_default.csv").write_text((tmp_path / "pods-1.csv").read_text())
    with pytest.raises(InputError, match=r"no pod list 'nope' .*known: default"):
        trace_paths("openb", "nope", tmp_path)


def test_cli_bad_row_exits_2_with_file_and_line(tmp_path):
    trace_folder(tmp_path, 2)
    bad = write(tmp_path, "bad.csv", POD_HEADER, GOOD_POD, "p1,4000,8192,1,abc,,LS,Running,10,99,10")
    result = CliRunner().invoke(main, ["simulate", "--data", str(tmp_path), "--pods", str(bad), "--seeds", "1"])
    assert result.exit_code == 2
    assert f"accelsched: error: {bad}:3: p1: gpu_milli: 'abc' is not a whole number" in result.output


def test_cli_rejects_unknown_policy_and_bad_seeds(tmp_path):
    for args, what in ((["--policy", "worstfit"], "unknown policy 'worstfit'"), (["--seeds", "x"], "seed list")):
        result = CliRunner().invoke(main, ["simulate", "--data", str(tmp_path), *args])
        assert result.exit_code == 2 and what in result.output


def test_cli_inflation_run_writes_table_csv_plots_and_html(tmp_path):
    pod_path = trace_folder(tmp_path, 4, nodes=12, pods=120)
    out = tmp_path / "out"
    args = [
        "simulate",
        "--data",
        str(tmp_path),
        "--pods",
        str(pod_path),
        "--policy",
        "fgd,bestfit",
        "--seeds",
        "1-2",
        "--jobs",
        "1",
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "fgd" in result.output and "bestfit" in result.output and "130%" in result.output
    assert {p.name for p in out.iterdir()} >= {
        "curves.csv",
        "summary.csv",
        "allocation.png",
        "fragmentation.png",
        "index.html",
    }
    curves = (out / "curves.csv").read_text().splitlines()
    assert curves[0].startswith("policy,seed,arrived_pct,alloc_ratio") and len(curves) > 2 * 2 * 100
    assert '<img src="allocation.png"' in (out / "index.html").read_text()
    as_json = CliRunner().invoke(main, [*args[:-2], "-o", "json"])
    doc = json.loads(as_json.output)
    assert [p["policy"] for p in doc["policies"]] == ["fgd", "bestfit"]
    assert all(0 < p["final_alloc"] <= 1 for p in doc["policies"])


def test_cli_timeline_mode(tmp_path):
    pod_path = trace_folder(tmp_path, 5, nodes=6, pods=150)
    args = [
        "simulate",
        "--mode",
        "timeline",
        "--data",
        str(tmp_path),
        "--pods",
        str(pod_path),
        "--policy",
        "fgd",
        "--seeds",
        "1",
        "--compress",
        "20",
        "-o",
        "json",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["rows"][0][0] == "fgd" and doc["header"][4] == "pods that waited"
    assert int(doc["rows"][0][4]) > 0  # compressed, the little cluster makes pods wait


def test_cli_timeline_needs_time_columns(tmp_path):
    trace_folder(tmp_path, 7)
    pods = write(tmp_path, "multigpu.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli", "p0,1000,1024,2,1000")
    args = ["simulate", "--mode", "timeline", "--data", str(tmp_path), "--pods", str(pods), "--seeds", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "has no creation_time/deletion_time columns" in result.output


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["--jobs", "0"], "--jobs: must be at least 1, got 0"),
        (["--jobs", "-2"], "--jobs: must be at least 1, got -2"),
        (["--mode", "timeline", "--compress", "0"], "--compress: must be > 0, got 0.0"),
        (["--compress", "-1"], "--compress: must be > 0, got -1.0"),
    ],
)
def test_cli_checks_jobs_and_compress_before_loading_anything(tmp_path, args, what):
    # The data folder is empty: a message about the option (not the missing trace) shows it was checked first.
    result = CliRunner().invoke(main, ["simulate", "--data", str(tmp_path), *args])
    assert result.exit_code == 2 and f"accelsched: error: {what}" in result.output, result.output


def test_inflation_of_a_pod_list_without_gpu_requests_is_an_input_error(tmp_path):
    trace_folder(tmp_path, 8)
    cpu_only = write(tmp_path, "cpu.csv", POD_HEADER, "c0,1000,1024,0,0,,LS,Running,0,9,0")
    with pytest.raises(InputError, match=r"--pods: no pod of this list requests a GPU"):
        inflate(load_pods(cpu_only), 8000, 1.3, 42)
    result = CliRunner().invoke(main, ["simulate", "--data", str(tmp_path), "--pods", str(cpu_only), "--seeds", "1"])
    assert result.exit_code == 2 and f"{cpu_only}: --pods: no pod of this list requests a GPU" in result.output
