"""accelsched.ui.simview: a real `simulate --out` folder read back for the results page, checked against its CSVs."""

from __future__ import annotations

import csv
import json
import shutil
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner
from sim_traces import trace_folder

from accelsched.cli import main
from accelsched.errors import InputError
from accelsched.ui import simview


def _simulate(tmp: Path, *extra: str) -> Path:
    pods = trace_folder(tmp, 4, nodes=12, pods=120)
    out = tmp / "out"
    args = ["simulate", "--data", str(tmp), "--pods", str(pods), "--policy", "fgd,bestfit", "--jobs", "1"]
    result = CliRunner().invoke(main, [*args, *extra, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def inflation_dir(tmp_path_factory) -> Path:
    return _simulate(tmp_path_factory.mktemp("inflation"), "--seeds", "1-3")


@pytest.fixture(scope="module")
def timeline_dir(tmp_path_factory) -> Path:
    return _simulate(tmp_path_factory.mktemp("timeline"), "--mode", "timeline", "--seeds", "1-2", "--compress", "20")


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_inflation_curves_are_the_medians_over_seeds_of_curves_csv(inflation_dir):
    doc = simview.load(inflation_dir)
    assert doc["kind"] == "inflation" and doc["dir"] == str(inflation_dir.resolve())
    assert doc["title"] == "accelsched simulate: policies on a GPU trace"
    # index.html's paragraphs: the run, then FGD's headline against the paper (report.headline), then the timing.
    assert doc["notes"][0].startswith("120 pods of pods-4.csv on 12 nodes") and len(doc["notes"]) == 3
    assert doc["notes"][1].startswith("FGD leaves ") and "Paper: up to 49% fewer" in doc["notes"][1]
    assert list(doc["curves"]) == ["fgd", "bestfit"]
    rows = _csv(inflation_dir / "curves.csv")
    for policy, curve in doc["curves"].items():
        mine = [r for r in rows if r["policy"] == policy]
        seeds = {r["seed"] for r in mine}
        assert curve["seeds"] == sorted(int(s) for s in seeds) == [1, 2, 3]
        # Every seed's run ends where its workload ran out: the curve goes as far as all of them reached.
        top = min(max(int(r["arrived_pct"]) for r in mine if r["seed"] == s) for s in seeds)
        assert curve["arrived_pct"] == list(range(top + 1))
        for column in ("alloc_ratio", "frag_milli", "frag_ratio"):
            for k, pct in enumerate(curve["arrived_pct"]):
                want = statistics.median(float(r[column]) for r in mine if int(r["arrived_pct"]) == pct)
                assert curve[column][k] == pytest.approx(want, abs=1e-12)
        assert 0 < curve["alloc_ratio"][-1] <= 1


def test_inflation_summary_is_summary_csv(inflation_dir):
    doc = simview.load(inflation_dir)
    rows = _csv(inflation_dir / "summary.csv")
    with (inflation_dir / "summary.csv").open() as handle:
        assert doc["columns"] == next(csv.reader(handle))
    assert [r["policy"] for r in doc["summary"]] == [r["policy"] for r in rows] == ["fgd", "bestfit"]
    for got, want in zip(doc["summary"], rows, strict=True):
        assert list(got) == list(want)
        for column, text in want.items():
            if column == "policy":
                assert got[column] == text
            elif text == "nan":
                assert got[column] is None  # JSON has no NaN: the page shows a dash
            else:
                assert got[column] == pytest.approx(float(text))
    json.dumps(doc, allow_nan=False)  # what the server sends


def test_timeline_series_are_the_first_seed_of_timeline_csv(timeline_dir):
    doc = simview.load(timeline_dir)
    assert doc["kind"] == "timeline" and doc["curves"] == {}
    assert doc["notes"] == ["120 pods of pods-4.csv, arrivals compressed x20."]
    rows = _csv(timeline_dir / "timeline.csv")
    assert set(doc["timeline"]) == {"fgd", "bestfit"}
    for policy, series in doc["timeline"].items():
        first = [r for r in rows if r["policy"] == policy and r["seed"] == "1"]
        assert series["seed"] == 1 and len(first) < simview.MAX_TIMELINE_POINTS
        for column in ("time_s", "allocated_milli", "frag_milli", "waiting_pods"):
            assert series[column] == [pytest.approx(float(r[column])) for r in first]
    # No summary.csv in this mode: the table comes from timeline.csv, one row per policy over both seeds.
    assert not (timeline_dir / "summary.csv").exists()
    assert [r["policy"] for r in doc["summary"]] == ["fgd", "bestfit"]
    for row in doc["summary"]:
        mine = [r for r in rows if r["policy"] == row["policy"]]
        peaks = [max(int(r["waiting_pods"]) for r in mine if r["seed"] == s) for s in ("1", "2")]
        assert row["seeds"] == 2 and row["peak_waiting_pods"] == statistics.median(peaks)
        assert 0 < row["mean_allocated_gpus"] <= row["peak_allocated_gpus"]
    json.dumps(doc, allow_nan=False)


def test_a_long_timeline_is_thinned_keeping_its_ends(tmp_path):
    n = 3 * simview.MAX_TIMELINE_POINTS + 7
    lines = ["policy,seed,time_s,allocated_milli,frag_milli,waiting_pods"]
    lines += [f"fgd,0,{t},{t % 5000},{t % 7}.5,{t % 3}" for t in range(n)]
    (tmp_path / "timeline.csv").write_text("\n".join(lines) + "\n")
    series = simview.load(tmp_path)["timeline"]["fgd"]
    assert len(series["time_s"]) <= simview.MAX_TIMELINE_POINTS + 1
    assert series["time_s"][0] == 0 and series["time_s"][-1] == n - 1


def test_the_csvs_alone_are_enough(inflation_dir, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("curves.csv", "summary.csv"):
        shutil.copy(inflation_dir / name, bare / name)
    doc = simview.load(bare)
    assert doc["title"] == "accelsched simulate: policies on a GPU trace" and doc["command"] is None
    assert doc["notes"] == [] and doc["curves"] == simview.load(inflation_dir)["curves"]


def test_a_folder_without_results_is_refused_by_name(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(InputError, match=r"holds no curves\.csv or timeline\.csv") as err:
        simview.load(tmp_path)
    assert str(tmp_path) in str(err.value)
    with pytest.raises(InputError, match="is not a folder"):
        simview.load(tmp_path / "missing")


@pytest.mark.parametrize(
    ("line", "edit", "what"),
    [
        (5, lambda cells: [*cells[:3], "high", *cells[4:]], "curves.csv:5: alloc_ratio: 'high' is not a number"),
        (7, lambda cells: cells[:-1], "curves.csv:7: 6 fields, the header has 7"),
        (9, lambda cells: [cells[0], "x", *cells[2:]], "curves.csv:9: seed: 'x' is not a number"),
        (1, lambda cells: [c for c in cells if c != "frag_ratio"], "curves.csv:1: no column frag_ratio"),
    ],
)
def test_a_malformed_csv_names_its_file_and_line(inflation_dir, tmp_path, line, edit, what):
    bad = tmp_path / "bad"
    shutil.copytree(inflation_dir, bad)
    lines = (bad / "curves.csv").read_text().splitlines()
    lines[line - 1] = ",".join(edit(lines[line - 1].split(",")))
    (bad / "curves.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        simview.load(bad)
    assert what in str(err.value)


def test_a_malformed_summary_names_its_line(inflation_dir, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(inflation_dir, bad)
    lines = (bad / "summary.csv").read_text().splitlines()
    lines[2] = ",".join([*lines[2].split(",")[:-1], "lots"])
    (bad / "summary.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"summary\.csv:3: failed_gpu_pods: 'lots' is not a number"):
        simview.load(bad)


def test_an_oversized_csv_is_refused_before_reading(inflation_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(simview, "MAX_CSV_BYTES", 1000)
    with pytest.raises(InputError, match=r"curves\.csv: \d+ bytes: larger than"):
        simview.load(inflation_dir)


def test_infinite_values_are_refused(tmp_path):
    (tmp_path / "timeline.csv").write_text(
        "policy,seed,time_s,allocated_milli,frag_milli,waiting_pods\nfgd,0,0,inf,0,0\n"
    )
    with pytest.raises(InputError, match=r"timeline\.csv:2: allocated_milli: 'inf' is not a finite number"):
        simview.load(tmp_path)


def test_values_that_overflow_when_combined_are_refused(tmp_path):
    # 1e308 reads as a finite float, but the time-weighted mean (1e308 x 10 s) is Infinity, which JSON cannot carry.
    (tmp_path / "timeline.csv").write_text(
        "policy,seed,time_s,allocated_milli,frag_milli,waiting_pods\nfgd,0,0,1e308,0,1\nfgd,0,10,1e308,20,0\n"
    )
    with pytest.raises(InputError, match=r"timeline\.csv: mean_allocated_gpus: policy fgd: overflows to infinity"):
        simview.load(tmp_path)
    result = CliRunner().invoke(main, ["ui", "--sim", str(tmp_path), "--once"])
    assert result.exit_code == 2 and "overflows to infinity" in result.output and "Traceback" not in result.output


def test_a_median_over_seeds_that_overflows_is_refused(tmp_path):
    header = ",".join(simview.CURVE_COLUMNS)
    rows = [f"fgd,{seed},0,1.7e308,0,0,0" for seed in (1, 2)]  # the median of two is their sum halved: Infinity
    (tmp_path / "curves.csv").write_text("\n".join([header, *rows]) + "\n")
    with pytest.raises(InputError, match=r"curves\.csv: alloc_ratio: policy fgd: the median over seeds: overflows"):
        simview.load(tmp_path)


def test_an_integer_past_what_a_browser_holds_is_refused(tmp_path):
    (tmp_path / "timeline.csv").write_text(
        f"policy,seed,time_s,allocated_milli,frag_milli,waiting_pods\nfgd,{10**20},0,0,0,0\n"
    )
    with pytest.raises(InputError, match=r"timeline\.csv:2: seed: 100000000000000000000: larger than"):
        simview.load(tmp_path)


def test_once_prints_strict_json(tmp_path):
    (tmp_path / "timeline.csv").write_text(
        "policy,seed,time_s,allocated_milli,frag_milli,waiting_pods\nfgd,0,0,1e300,0,1\nfgd,0,10,1e300,20,0\n"
    )
    result = CliRunner().invoke(main, ["ui", "--sim", str(tmp_path), "--once"])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"{name} in --once output"))
