"""Read a ``accelsched simulate --out DIR`` folder into the JSON the results page (static/sim.html) draws.

The page reads the CSVs ``simulate`` writes (accelsched/sim/report.py), not its PNGs: the same numbers, but
interactive. The inflation mode's curves are reduced here the way report.plot_inflation reduces them (median over
seeds at every arrived percentage every seed reached), so the browser draws what the PNGs show without shipping
every seed's rows. The timeline mode writes no summary.csv; its table is derived here from timeline.csv.
"""

from __future__ import annotations

import csv
import html.parser
import math
import statistics
from pathlib import Path
from typing import Any

from accelsched.errors import InputError

MAX_CSV_BYTES = 200 * 1024 * 1024  # a full openb replay's curves.csv is a few MB; refuse anything absurd
MAX_TIMELINE_POINTS = 4000  # per policy: a browser line of more points than pixels only costs time
MAX_INTEGER = 2**53  # the largest integer a browser's JSON.parse holds exactly

CURVE_COLUMNS = ("policy", "seed", "arrived_pct", "alloc_ratio", "frag_milli", "frag_ratio", "failed_pods")
TIMELINE_COLUMNS = ("policy", "seed", "time_s", "allocated_milli", "frag_milli", "waiting_pods")
CURVE_VALUES = ("alloc_ratio", "frag_milli", "frag_ratio", "failed_pods")
TIMELINE_VALUES = ("allocated_milli", "frag_milli", "waiting_pods")
TITLES = {
    "inflation": "accelsched simulate: policies on a GPU trace",
    "timeline": "accelsched simulate --mode timeline",
}


def load(directory: str | Path) -> dict[str, Any]:
    """The folder as ``{"dir", "kind", "title", "command", "notes", "columns", "summary", "curves", "timeline"}``.

    ``kind`` is "inflation" when curves.csv is there, else "timeline". A folder with neither curves.csv nor
    timeline.csv raises InputError naming the folder; a malformed CSV raises InputError naming the file and line.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder", field="--sim")
    curves_path, summary_path, timeline_path = (folder / n for n in ("curves.csv", "summary.csv", "timeline.csv"))
    if not curves_path.is_file() and not timeline_path.is_file():
        raise InputError(
            f"{folder} holds no curves.csv or timeline.csv: not an `accelsched simulate --out` folder", field="--sim"
        )
    kind = "inflation" if curves_path.is_file() else "timeline"
    curves = _curves(curves_path) if curves_path.is_file() else {}
    series = _timeline_series(timeline_path) if timeline_path.is_file() else {}
    if summary_path.is_file():
        columns, summary = _summary(summary_path)
    elif series:
        columns, summary = _timeline_summary(timeline_path, series)
    else:
        columns, summary = [], []
    title, command, notes = _index(folder / "index.html")
    return {
        "dir": str(folder.resolve()),
        "kind": kind,
        "title": title or TITLES[kind],
        "command": command,
        "notes": notes,
        "columns": columns,
        "summary": summary,
        "curves": curves,
        "timeline": _timeline(series),
    }


# ------------------------------------------------------------------------------------------------ CSV reading


def _open(path: Path):
    size = path.stat().st_size
    if size > MAX_CSV_BYTES:
        raise InputError(
            f"{size} bytes: larger than the {MAX_CSV_BYTES} bytes a results CSV may hold", source=str(path)
        )
    return path.open(newline="", encoding="utf-8", errors="strict")


def _number(path: Path, line: int, column: str, text: str, integer: bool = False) -> float | int | None:
    """A CSV cell as a number; "nan" (report.write_summary's missing checkpoint) as None, since JSON has no NaN.
    Infinity, and integers past what the page's JSON.parse holds, are refused: JSON cannot carry the one, the
    browser would round the other."""
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise InputError(f"{text[:40]!r} is not a number", source=f"{path}:{line}", field=column) from None
    if isinstance(value, float) and math.isinf(value):
        raise InputError(f"{text[:40]!r} is not a finite number", source=f"{path}:{line}", field=column)
    if isinstance(value, int) and abs(value) > MAX_INTEGER:
        raise InputError(f"{text[:40]}: larger than {MAX_INTEGER}", source=f"{path}:{line}", field=column)
    return None if isinstance(value, float) and math.isnan(value) else value


def _finite(path: Path, column: str, what: str, value: float) -> float:
    """A number derived from the file's (a median, a mean, a sum): values near the float maximum that each read
    fine can overflow to Infinity here, which JSON cannot carry."""
    if not math.isfinite(value):
        raise InputError(f"{what}: overflows to infinity (values too large to combine)", source=str(path), field=column)
    return value


def _rows(path: Path, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) for every data row; the header must hold ``columns`` and every row the header's width."""
    return _table(path, columns)[1]


def _table(path: Path, columns: tuple[str, ...]) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """The header and ``_rows``, from one read of the file."""
    try:
        with _open(path) as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise InputError("empty file: no header line", source=f"{path}:1")
            missing = [c for c in columns if c not in header]
            if missing:
                raise InputError(f"no column {', '.join(missing)} in the header", source=f"{path}:1")
            out = []
            for row in reader:
                if not row:
                    continue
                if len(row) != len(header):
                    raise InputError(
                        f"{len(row)} fields, the header has {len(header)}", source=f"{path}:{reader.line_num}"
                    )
                out.append((reader.line_num, dict(zip(header, row, strict=True))))
            return header, out
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", source=str(path)) from None
    except csv.Error as exc:
        raise InputError(f"not a CSV file ({exc})", source=str(path)) from None


def _curves(path: Path) -> dict[str, dict[str, list]]:
    """policy -> arrived_pct and the medians over seeds of every value, at the percentages all its seeds reached
    (as report.plot_inflation draws them: a seed's run ends where its inflated workload ran out)."""
    by: dict[str, dict[int, dict[int, dict[str, float]]]] = {}  # policy -> seed -> pct -> values
    for line, row in _rows(path, CURVE_COLUMNS):
        policy = row["policy"]
        if not policy:
            raise InputError("empty policy", source=f"{path}:{line}", field="policy")
        seed = _number(path, line, "seed", row["seed"], integer=True)
        pct = _number(path, line, "arrived_pct", row["arrived_pct"], integer=True)
        values = {}
        for column in CURVE_VALUES:
            value = _number(path, line, column, row[column], integer=column == "failed_pods")
            if value is None:
                raise InputError("nan where a number belongs", source=f"{path}:{line}", field=column)
            values[column] = value
        by.setdefault(policy, {}).setdefault(seed, {})[pct] = values
    out = {}
    for policy, seeds in by.items():
        common = sorted(set.intersection(*(set(points) for points in seeds.values())))
        curve: dict[str, list] = {"arrived_pct": common, "seeds": sorted(seeds)}
        for column in CURVE_VALUES:
            medians = [statistics.median(seeds[s][pct][column] for s in seeds) for pct in common]
            curve[column] = [_finite(path, column, f"policy {policy}: the median over seeds", m) for m in medians]
        out[policy] = curve
    return out


def _summary(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """summary.csv's rows, numbers as numbers (policy stays text)."""
    columns, rows = _table(path, ("policy", "seeds"))
    summary = []
    for line, row in rows:
        summary.append(
            {c: row[c] if c == "policy" else _number(path, line, c, row[c], integer=c == "seeds") for c in columns}
        )
    return columns, summary


def _timeline_series(path: Path) -> dict[str, dict[int, dict[str, list]]]:
    """policy -> seed -> time_s and the values, in file order (report.write_timeline_csv writes them in time order)."""
    by: dict[str, dict[int, dict[str, list]]] = {}
    for line, row in _rows(path, TIMELINE_COLUMNS):
        if not row["policy"]:
            raise InputError("empty policy", source=f"{path}:{line}", field="policy")
        seed = _number(path, line, "seed", row["seed"], integer=True)
        series = by.setdefault(row["policy"], {}).setdefault(seed, {c: [] for c in ("time_s", *TIMELINE_VALUES)})
        for column in ("time_s", *TIMELINE_VALUES):
            value = _number(path, line, column, row[column])
            if value is None:
                raise InputError("nan where a number belongs", source=f"{path}:{line}", field=column)
            series[column].append(value)
    return by


def _timeline(by: dict[str, dict[int, dict[str, list]]]) -> dict[str, dict[str, Any]]:
    """policy -> its first seed's time series (as report.plot_timeline draws them: time series, not medians),
    thinned to MAX_TIMELINE_POINTS evenly spaced rows plus the last."""
    out = {}
    for policy, seeds in by.items():
        series = seeds[next(iter(seeds))]
        n = len(series["time_s"])
        step = max(1, math.ceil(n / MAX_TIMELINE_POINTS))
        keep = list(range(0, n, step))
        if keep and keep[-1] != n - 1:
            keep.append(n - 1)
        out[policy] = {c: [series[c][i] for i in keep] for c in series}
        out[policy]["seed"] = next(iter(seeds))
    return out


def _timeline_summary(path: Path, by: dict[str, dict[int, dict[str, list]]]) -> tuple[list[str], list[dict[str, Any]]]:
    """The timeline mode's table from timeline.csv alone (its summary lives only in index.html): per policy, medians
    over seeds of the time-weighted mean and the peak of allocated GPUs, fragmented GPUs and waiting pods."""
    columns = [
        "policy",
        "seeds",
        "mean_allocated_gpus",
        "peak_allocated_gpus",
        "mean_frag_gpus",
        "peak_waiting_pods",
        "hours",
    ]
    summary = []
    for policy, seeds in by.items():
        stats: dict[str, list[float]] = {c: [] for c in columns[2:]}
        for series in seeds.values():
            t = series["time_s"]
            span = t[-1] - t[0]
            stats["mean_allocated_gpus"].append(_time_mean(t, series["allocated_milli"]) / 1000)
            stats["peak_allocated_gpus"].append(max(series["allocated_milli"]) / 1000)
            stats["mean_frag_gpus"].append(_time_mean(t, series["frag_milli"]) / 1000)
            stats["peak_waiting_pods"].append(int(max(series["waiting_pods"])))
            stats["hours"].append(span / 3600)
        row: dict[str, Any] = {"policy": policy, "seeds": len(seeds)}
        for column, values in stats.items():
            for value in values:
                _finite(path, column, f"policy {policy}", value)
            row[column] = round(
                _finite(path, column, f"policy {policy}: the median over seeds", statistics.median(values)), 4
            )
        summary.append(row)
    return columns, summary


def _time_mean(times: list[float], values: list[float]) -> float:
    """Mean of a step function (each value holds until the next time)."""
    span = times[-1] - times[0]
    if span <= 0:
        return statistics.fmean(values)
    return sum(v * (t1 - t0) for v, t0, t1 in zip(values, times, times[1:], strict=False)) / span


# ------------------------------------------------------------------------------------------------ index.html


class _IndexParser(html.parser.HTMLParser):
    """report.write_html's <title>, its first <code> (the command line that made the folder) and its other <p>
    paragraphs (the notes: the trace and its inflation, FGD's headline against the paper, the timing)."""

    def __init__(self) -> None:
        super().__init__()
        self.title = ""
        self.command = ""
        self.notes: list[str] = []
        self._in: str | None = None
        self._done: set[str] = set()
        self._para: list[str] | None = None
        self._para_code = False

    def handle_starttag(self, tag, attrs):
        if tag in ("title", "code") and tag not in self._done:
            self._in = tag
        if tag == "code" and self._para is not None:
            self._para_code = True
        if tag == "p":
            self._para, self._para_code = [], False

    def handle_endtag(self, tag):
        if tag == self._in:
            self._done.add(tag)
            self._in = None
        if tag == "p" and self._para is not None:
            text = "".join(self._para).strip()
            if text and not self._para_code and len(self.notes) < 20:
                self.notes.append(text[:2000])
            self._para = None

    def handle_data(self, data):
        if self._in == "title":
            self.title += data
        elif self._in == "code":
            self.command += data
        if self._para is not None:
            self._para.append(data)


def _index(path: Path) -> tuple[str, str | None, list[str]]:
    """What index.html adds to the CSVs; nothing when it is missing (the CSVs alone are enough)."""
    if not path.is_file() or path.stat().st_size > 10 * 2**20:
        return "", None, []
    parser = _IndexParser()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser.title.strip(), parser.command.strip() or None, parser.notes
