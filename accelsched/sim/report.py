"""What a simulation run writes: per-policy figures (median over seeds), CSV of the full curves, PNG plots
(matplotlib, Agg backend: no display needed) and an HTML page with the plots and the table."""

from __future__ import annotations

import csv
import html
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from accelsched.sim.replay import Experiment
from accelsched.sim.timeline import Timeline

CHECKPOINTS = tuple(round(0.1 * k, 1) for k in range(1, 14))  # 10%, 20%, ... 130% of GPU capacity arrived
# The paper's headline on this cluster (Weng et al., ATC 2023): FGD leaves up to 49% fewer GPUs unallocated than
# the baselines, about 290 more GPUs in use.
PAPER_FEWER_UNALLOCATED = 0.49
PAPER_MORE_GPUS = 290


@dataclass
class PolicySummary:
    """One policy over its seeds: medians."""

    policy: str
    seeds: list[int]
    alloc: dict[float, float]  # arrived share -> allocation ratio
    final_alloc: float
    unallocated_gpus: float
    frag_gpus: float
    frag_ratio: float
    failed_pods: float
    failed_gpu_pods: float
    seconds: float
    cpu_seconds: float
    arrived: float
    extra: dict[str, float] = field(default_factory=dict)


def summarize(experiments: Sequence[Experiment]) -> list[PolicySummary]:
    by: dict[str, list[Experiment]] = {}
    for exp in experiments:
        by.setdefault(exp.policy, []).append(exp)
    out = []
    for policy, runs in by.items():
        med = statistics.median
        top = min(e.arrived_share for e in runs)
        frag_end = [e.frag_at(e.arrived_share) for e in runs]
        out.append(
            PolicySummary(
                policy,
                [e.seed for e in runs],
                # The last copy stops short of crossing the target: 130% means "all of the inflated workload".
                {c: med(e.alloc_ratio(c) for e in runs) for c in CHECKPOINTS if c <= top + 0.005},
                med(e.alloc_ratio(e.arrived_share) for e in runs),
                med(e.unallocated_gpus for e in runs),
                med(f / 1000 for f, _ in frag_end),
                med(r for _, r in frag_end),
                med(int(e.failed.sum()) for e in runs),
                med(e.gpu_failed for e in runs),
                statistics.fmean(e.seconds for e in runs),
                statistics.fmean(e.cpu_seconds for e in runs),
                med(e.arrived_share for e in runs),
            )
        )
    return out


def headline(summaries: Sequence[PolicySummary]) -> str | None:
    """FGD against each other policy, in the paper's terms: how many fewer GPUs it leaves unallocated."""
    fgd = next((s for s in summaries if s.policy == "fgd"), None)
    others = sorted((s for s in summaries if s.policy != "fgd"), key=lambda s: s.unallocated_gpus)
    if fgd is None or not others:
        return None
    parts = []
    for other in others:
        gained = other.unallocated_gpus - fgd.unallocated_gpus
        change = abs(gained) / other.unallocated_gpus if other.unallocated_gpus else 0.0
        side = "fewer" if gained >= 0 else "more"
        parts.append(f"{change:.0%} {side} than {other.policy} ({gained:+.0f} GPUs in use)")
    return (
        f"FGD leaves {fgd.unallocated_gpus:.0f} GPUs unallocated: " + ", ".join(parts) + ". "
        f"Paper: up to {PAPER_FEWER_UNALLOCATED:.0%} fewer unallocated GPUs, about {PAPER_MORE_GPUS} more GPUs in use."
    )


# ------------------------------------------------------------------------------------------------ files


def _grid(experiments: Sequence[Experiment]) -> np.ndarray:
    top = max(e.arrived_share for e in experiments)
    return np.round(np.arange(0, int(top * 100) + 1) / 100, 2)


def write_curves(path: Path, experiments: Sequence[Experiment]) -> None:
    """Every policy and seed at every 1% of arrived GPU demand: allocation and fragmentation."""
    grid = _grid(experiments)
    with path.open("w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(["policy", "seed", "arrived_pct", "alloc_ratio", "frag_milli", "frag_ratio", "failed_pods"])
        for e in experiments:
            for share in grid:
                if share > e.arrived_share + 1e-9:
                    break
                i = e.at(share)
                frag, ratio = e.frag_at(share)
                failed = int(e.failed[: i + 1].sum()) if i >= 0 else 0
                w.writerow(
                    [
                        e.policy,
                        e.seed,
                        round(share * 100),
                        f"{e.alloc_ratio(share):.6f}",
                        f"{frag:.1f}",
                        f"{ratio:.6f}",
                        failed,
                    ]
                )


def write_summary(path: Path, summaries: Sequence[PolicySummary]) -> None:
    """The table as CSV: results only (timing goes to the table and index.html), so runs of the same input and
    seeds, local or on Ray, write the same bytes."""
    with path.open("w", newline="") as handle:
        w = csv.writer(handle)
        points = sorted({c for s in summaries for c in s.alloc})
        w.writerow(
            [
                "policy",
                "seeds",
                *[f"alloc_at_{round(c * 100)}pct" for c in points],
                "final_alloc",
                "unallocated_gpus",
                "frag_gpus",
                "frag_ratio",
                "failed_pods",
                "failed_gpu_pods",
            ]
        )
        for s in summaries:
            w.writerow(
                [
                    s.policy,
                    len(s.seeds),
                    *[f"{s.alloc.get(c, float('nan')):.4f}" for c in points],
                    f"{s.final_alloc:.4f}",
                    f"{s.unallocated_gpus:.1f}",
                    f"{s.frag_gpus:.1f}",
                    f"{s.frag_ratio:.4f}",
                    s.failed_pods,
                    s.failed_gpu_pods,
                ]
            )


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def plot_inflation(out: Path, experiments: Sequence[Experiment]) -> list[Path]:
    """Allocation ratio and fragmentation vs arrived workload, one line per policy (median over seeds)."""
    plt = _pyplot()
    grid = _grid(experiments)
    by: dict[str, list[Experiment]] = {}
    for e in experiments:
        by.setdefault(e.policy, []).append(e)
    paths = []
    for name, ylabel, value, start in (
        ("allocation.png", "GPU allocation ratio (%)", lambda e, x: 100 * e.alloc_ratio(x), 0.0),
        # Where the policies part ways: the paper's figure zooms the same way.
        ("allocation_zoom.png", "GPU allocation ratio (%)", lambda e, x: 100 * e.alloc_ratio(x), 0.7),
        ("fragmentation.png", "fragmented GPUs", lambda e, x: e.frag_at(x)[0] / 1000, 0.0),
        ("fragmentation_ratio.png", "fragmented share of free GPU milli (%)", lambda e, x: 100 * e.frag_at(x)[1], 0.0),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for policy, runs in by.items():
            top = min(e.arrived_share for e in runs)
            xs = [x for x in grid if start - 1e-9 <= x <= top + 1e-9]
            ys = [float(np.median([value(e, x) for e in runs])) for x in xs]
            ax.plot([100 * x for x in xs], ys, label=policy)
        paths.append(_save(plt, fig, ax, out / name, "arrived workload (% of GPU capacity)", ylabel))
    return paths


def _save(plt, fig, ax, path: Path, xlabel: str, ylabel: str) -> Path:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_timeline(out: Path, timelines: Sequence[Timeline]) -> list[Path]:
    plt = _pyplot()
    paths = []
    for name, ylabel, value in (
        ("timeline_allocation.png", "GPU allocation (%)", lambda t: 100 * t.allocated / t.capacity),
        ("timeline_fragmentation.png", "fragmented GPUs", lambda t: t.frag / 1000),
        ("timeline_waiting.png", "pods waiting", lambda t: t.waiting),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for t in timelines:
            if t.seed == timelines[0].seed:  # one seed per policy: the lines are time series, not medians
                ax.step((t.times - t.times[0]) / 3600, value(t), where="post", label=t.policy, linewidth=0.8)
        paths.append(_save(plt, fig, ax, out / name, "hours since the first arrival", ylabel))
    return paths


def write_timeline_csv(path: Path, timelines: Sequence[Timeline]) -> None:
    with path.open("w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(["policy", "seed", "time_s", "allocated_milli", "frag_milli", "waiting_pods"])
        for t in timelines:
            for row in zip(t.times.tolist(), t.allocated.tolist(), t.frag.tolist(), t.waiting.tolist(), strict=True):
                w.writerow([t.policy, t.seed, row[0], row[1], f"{row[2]:.1f}", row[3]])


def write_html(
    path: Path,
    title: str,
    command: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    images: Sequence[Path],
    notes: Sequence[str],
) -> None:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    figures = "".join(f'<figure><img src="{html.escape(p.name)}" alt="{html.escape(p.stem)}"></figure>' for p in images)
    paragraphs = "".join(f"<p>{html.escape(n)}</p>" for n in notes)
    path.write_text(
        f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:70em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:right}} th{{background:#f4f4f4}}
figure{{display:inline-block;margin:.5em}} img{{max-width:34em}} code{{background:#f4f4f4}}</style></head>
<body><h1>{html.escape(title)}</h1><p><code>{html.escape(command)}</code></p>{paragraphs}
<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>{figures}</body></html>
"""
    )
