"""benchmarks/kueuetimeline.py: the summary of a run's Workload events (what explains Kueue's harness figures)."""

from __future__ import annotations

import json

from benchmarks import kueuetimeline


def _line(t: float, name: str, cls: str, a: bool = False, e: bool = False, f: bool = False, why: str = "") -> str:
    return json.dumps({"t": t, "ns": "cq-0", "name": name, "class": cls, "a": a, "e": e, "f": f, "why": why, "msg": ""})


def test_the_summary_reads_first_admissions_readmissions_evictions_and_quota_reuse() -> None:
    lines = [
        _line(100.0, "s1", "small"),
        _line(100.5, "l1", "large"),
        _line(101.0, "s1", "small", a=True),  # 1 s to its first admission
        _line(102.5, "l1", "large", a=True),  # 2 s
        _line(103.0, "s1", "small", a=True, e=True, why="InCohortReclamation"),  # evicted 3 s in
        _line(103.5, "s1", "small"),  # released by the runner
        _line(104.0, "l1", "large", a=True, f=True),  # finished: its quota free
        _line(104.25, "s1", "small", a=True),  # readmitted 1.25 s after its eviction, 0.25 s after l1's finish
    ]
    text = kueuetimeline.summary(lines)
    assert "2 Workloads, 8 events over 4.2 s" in text
    assert "first admission after creation, large (s): n=1 avg=2.00" in text
    assert "first admission after creation, small (s): n=1 avg=1.00" in text
    assert "readmission after eviction, small (s): n=1 avg=1.25" in text
    assert "evictions: 1; by second: {3: 1}" in text
    assert "{'small InCohortReclamation': 1}" in text
    assert "finish to the next admission in its ClusterQueue (s): n=1 avg=0.25" in text


def test_an_empty_timeline_says_so() -> None:
    assert kueuetimeline.summary([]) == "timeline: no events"
