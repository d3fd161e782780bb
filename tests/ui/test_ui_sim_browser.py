"""The `simulate --out DIR` results page (/sim) in Debian's Chromium: a real simulation, the real server, the page.

Checked against the CSVs the run wrote, not against simview's JSON: one line per policy in every chart, the hover
tooltip's values are curves.csv's medians, unticking a policy hides it everywhere, and the table is summary.csv.
"""

from __future__ import annotations

import csv
import re
import shutil
import statistics
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from sim_traces import trace_folder  # noqa: E402

from accelsched.cli import main  # noqa: E402
from accelsched.ui.server import start_in_thread  # noqa: E402

pytestmark = pytest.mark.integration

POLICIES = ["fgd", "bestfit", "dotprod"]
CURVE_CHARTS = ["#chart-alloc", "#chart-alloc-zoom", "#chart-frag", "#chart-frag-ratio"]
TIMELINE_CHARTS = ["#chart-tl-alloc", "#chart-tl-frag", "#chart-tl-waiting"]


def _simulate(tmp: Path, *extra: str) -> Path:
    pods = trace_folder(tmp, 4, nodes=12, pods=120)
    out = tmp / "out"
    args = ["simulate", "--data", str(tmp), "--pods", str(pods), "--jobs", "1", *extra, "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def inflation_dir(tmp_path_factory) -> Path:
    return _simulate(tmp_path_factory.mktemp("sim"), "--policy", ",".join(POLICIES), "--seeds", "1-2")


@pytest.fixture
def sim_server():
    stops = []

    def start(folder: Path) -> str:
        url, stop = start_in_thread(None, address="127.0.0.1", port=0, sim_dir=folder)
        stops.append(stop)
        return url.rstrip("/") + "/sim"

    yield start
    for stop in stops:
        stop()


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _open(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-ready='true']")
    assert page.evaluate("document.body.dataset.error") is None, page.locator("#sim-error").text_content()


def _lines(page, chart: str) -> list[str]:
    return page.locator(f"{chart} path.series-line").evaluate_all("els => els.map(e => e.dataset.series)")


def test_curves_hover_toggle_and_table(page, sim_server, inflation_dir, tmp_path):
    _open(page, sim_server(inflation_dir))
    assert page.locator("#sim-title").text_content() == "accelsched simulate: policies on a GPU trace"
    assert page.locator("#sim-dir").text_content() == str(inflation_dir.resolve())
    assert page.locator("#sim-timeline").is_hidden()
    notes = page.locator("#sim-notes .sentence").all_text_contents()
    assert len(notes) == 3 and notes[1].startswith("FGD leaves ")
    for chart in CURVE_CHARTS:
        assert _lines(page, chart) == POLICIES, chart

    # Hover the allocation chart: the tooltip shows the nearest arrived % and every policy's median there.
    area = page.locator("#chart-alloc rect.hover-area").bounding_box()
    page.mouse.move(area["x"] + area["width"] * 0.4, area["y"] + area["height"] / 2)
    tip = page.locator(".chart-tip")
    tip.wait_for(state="visible")
    lines = tip.inner_text().splitlines()
    pct = int(re.fullmatch(r"arrived workload \(% of GPU capacity\): (\d+)", lines[0]).group(1))
    assert pct > 0
    curves = _rows(inflation_dir / "curves.csv")
    shown = dict(line.split(": ") for line in lines[1:])
    assert list(shown) == POLICIES
    for policy in POLICIES:
        want = 100 * statistics.median(
            float(r["alloc_ratio"]) for r in curves if r["policy"] == policy and int(r["arrived_pct"]) == pct
        )
        assert float(shown[policy]) == pytest.approx(want, abs=0.006), policy
    assert page.locator("#chart-alloc circle.hover-dot[visibility='visible']").count() == len(POLICIES)
    page.screenshot(path=str(tmp_path / "sim-hover.png"))
    page.mouse.move(2, 2)
    tip.wait_for(state="hidden")

    # Untick a policy: gone from every chart and the table; tick it again: back.
    page.locator("input.policy-toggle[data-policy='bestfit']").uncheck()
    for chart in CURVE_CHARTS:
        assert _lines(page, chart) == ["fgd", "dotprod"], chart
    assert page.locator("#sim-summary tr[data-policy='bestfit']").is_hidden()
    page.locator("input.policy-toggle[data-policy='bestfit']").check()
    for chart in CURVE_CHARTS:
        assert _lines(page, chart) == POLICIES, chart
    assert page.locator("#sim-summary tr[data-policy='bestfit']").is_visible()

    # A legend entry toggles its line in that chart only.
    page.locator("#chart-frag .legend-item[data-series='fgd']").click()
    assert _lines(page, "#chart-frag") == ["bestfit", "dotprod"]
    assert page.locator("#chart-frag .legend-item[data-series='fgd']").get_attribute("data-hidden") == "true"
    assert _lines(page, "#chart-alloc") == POLICIES
    page.locator("#chart-frag .legend-item[data-series='fgd']").click()
    assert _lines(page, "#chart-frag") == POLICIES

    # The table is summary.csv: same columns, same rows, same values.
    summary = _rows(inflation_dir / "summary.csv")
    header = page.locator("#sim-summary thead th").evaluate_all("els => els.map(e => e.dataset.col)")
    assert header == list(summary[0])
    cells = page.locator("#sim-summary tbody tr").evaluate_all(
        "rows => rows.map(r => Object.fromEntries([...r.cells].map(c => [c.dataset.col, c.dataset.value])))"
    )
    assert len(cells) == len(summary)
    for got, want in zip(cells, summary, strict=True):
        for column, text in want.items():
            if column == "policy":
                assert got[column] == text
            elif text == "nan":
                assert got[column] == ""
            else:
                assert float(got[column]) == pytest.approx(float(text)), (want["policy"], column)

    # Sorting: the first click on a "more is better" column puts the best first; the second reverses.
    def order() -> list[str]:
        return page.locator("#sim-summary tbody tr").evaluate_all("rows => rows.map(r => r.dataset.policy)")

    by_final = sorted(summary, key=lambda r: float(r["final_alloc"]))
    page.locator("#sim-summary th[data-col='final_alloc'] button").click()
    assert page.locator("#sim-summary th[data-col='final_alloc']").get_attribute("aria-sort") == "descending"
    assert [float(summary[[r["policy"] for r in summary].index(p)]["final_alloc"]) for p in order()] == sorted(
        (float(r["final_alloc"]) for r in by_final), reverse=True
    )
    page.locator("#sim-summary th[data-col='final_alloc'] button").click()
    assert page.locator("#sim-summary th[data-col='final_alloc']").get_attribute("aria-sort") == "ascending"
    assert [float(summary[[r["policy"] for r in summary].index(p)]["final_alloc"]) for p in order()] == sorted(
        float(r["final_alloc"]) for r in by_final
    )
    page.locator("#sim-summary th[data-col='policy'] button").click()
    assert order() == sorted(POLICIES)
    page.screenshot(path=str(tmp_path / "sim.png"), full_page=True)


def test_timeline_results(page, sim_server, tmp_path):
    folder = _simulate(tmp_path, "--mode", "timeline", "--policy", "fgd,bestfit", "--seeds", "1", "--compress", "20")
    _open(page, sim_server(folder))
    assert page.locator("#sim-title").text_content() == "accelsched simulate --mode timeline"
    assert page.locator("#sim-curves").is_hidden() and page.locator("#sim-timeline").is_visible()
    for chart in TIMELINE_CHARTS:
        assert _lines(page, chart) == ["fgd", "bestfit"], chart
    rows = _rows(folder / "timeline.csv")
    peak = {p: max(int(r["waiting_pods"]) for r in rows if r["policy"] == p) for p in ("fgd", "bestfit")}
    shown = page.locator("#sim-summary td[data-col='peak_waiting_pods']").evaluate_all(
        "tds => tds.map(td => [td.parentElement.dataset.policy, Number(td.dataset.value)])"
    )
    assert dict(shown) == peak
    area = page.locator("#chart-tl-waiting rect.hover-area").bounding_box()
    page.mouse.move(area["x"] + area["width"] * 0.2, area["y"] + 10)
    page.locator(".chart-tip").wait_for(state="visible")
    assert re.match(
        r"hours since the first arrival: [\d.]+\nfgd: [\d,]+\nbestfit: [\d,]+$", page.locator(".chart-tip").inner_text()
    )
    page.locator("input.policy-toggle[data-policy='fgd']").uncheck()
    for chart in TIMELINE_CHARTS:
        assert _lines(page, chart) == ["bestfit"], chart
    page.screenshot(path=str(tmp_path / "sim-timeline.png"), full_page=True)


def test_a_hostile_policy_name_stays_text(page, sim_server, inflation_dir, tmp_path):
    import browserkit

    hostile = "<img src=x onerror=alert(1)>"
    folder = tmp_path / "hostile"
    shutil.copytree(inflation_dir, folder)
    for name in ("curves.csv", "summary.csv"):
        path = folder / name
        path.write_text(path.read_text().replace("\ndotprod,", f"\n{hostile},"))
    _open(page, sim_server(folder))
    assert page.locator(f".policy-item[data-policy='{hostile}']").inner_text().strip() == hostile
    assert _lines(page, "#chart-alloc") == ["fgd", "bestfit", hostile]
    assert page.locator(f"#sim-summary tr[data-policy='{hostile}'] td[data-col='policy']").text_content() == hostile
    area = page.locator("#chart-alloc rect.hover-area").bounding_box()
    page.mouse.move(area["x"] + area["width"] * 0.5, area["y"] + 10)
    assert hostile in page.locator(".chart-tip").inner_text()
    assert page.locator("img").count() == 0
    assert browserkit.xss_marks(page) == []


def test_a_malformed_folder_shows_the_error_as_text(page, page_watch, sim_server, inflation_dir, tmp_path):
    folder = tmp_path / "bad"
    shutil.copytree(inflation_dir, folder)
    lines = (folder / "curves.csv").read_text().splitlines()
    lines[3] = lines[3].replace(lines[3].split(",")[3], "<b>high</b>", 1)
    (folder / "curves.csv").write_text("\n".join(lines) + "\n")
    page_watch.allow(r"Failed to load resource: the server responded with a status of 400")
    page.goto(sim_server(folder))
    page.wait_for_selector("body[data-error='true']")
    message = page.locator("#sim-error").text_content()
    assert "curves.csv:4: alloc_ratio: '<b>high</b>' is not a number" in message
    assert page.locator("#sim-error b").count() == 0


def test_the_table_fits_its_box_and_shows_ratios_as_percent(page, sim_server, inflation_dir):
    _open(page, sim_server(inflation_dir))
    fits = page.evaluate(
        "() => { const t = document.querySelector('#sim-summary'); const box = t.closest('.table-scroll');"
        " return [t.scrollWidth, box.clientWidth]; }"
    )
    assert fits[0] <= fits[1], f"the table is {fits[0]} px wide in a {fits[1]} px box"
    summary = _rows(inflation_dir / "summary.csv")
    for want in summary:
        cell = page.locator(f"#sim-summary tr[data-policy='{want['policy']}'] td[data-col='final_alloc']")
        assert cell.inner_text() == f"{100 * float(want['final_alloc']):.1f}%", "percent, as the charts"
        assert float(cell.get_attribute("data-value")) == pytest.approx(float(want["final_alloc"]))
