"""Kueue's own performance harness (benchmarks/kueueperf.py) end to end at its smallest size: Kueue's runner drives
minimalkueue and ``accelsched run`` in turn, each on a fresh control plane, and every Workload is admitted by both.
Speed is reported, never asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # benchmarks/ is not an installed package: import it from the checkout
    sys.path.insert(0, str(REPO))

from benchmarks import kueueperf  # noqa: E402


@pytest.mark.integration
def test_kueues_runner_drives_minimalkueue_and_accelsched_through_every_workload(tmp_path: Path) -> None:
    try:
        results, thresholds, count = kueueperf.run("baseline", 0.001, kueueperf.SYSTEMS, tmp_path, deadline=150)
    except kueueperf.Unavailable as exc:
        pytest.skip(str(exc))
    assert count == 90  # 5 cohorts x 6 ClusterQueues x one workload of each class
    first = results[0]
    if first.completed and first.admitted != {c: (30, 30) for c in kueueperf.CLASSES}:
        # Kueue's runner stops recording once generation is done and no ClusterQueue reports pending or reserving
        # Workloads (recorder.expectMoreEvents). At this size generation ends within a second, and a minimalkueue
        # slowed by a loaded machine may not have counted its Workloads in the ClusterQueues' status by then: the
        # recorder stops early (seen: 28/23/0 of 30 admitted). A race in Kueue's own runner against Kueue: rerun that
        # side once. accelsched's side is never rerun.
        print(f"minimalkueue's run ended early ({first.admitted}): rerun once")
        (tmp_path / "again").mkdir()
        (first,), _, _ = kueueperf.run("baseline", 0.001, ("minimalkueue",), tmp_path / "again", deadline=150)
        results[0] = first
    assert thresholds["cmd"]["maxWallMs"] == 425_000  # Kueue's own rangespec, read from its module
    assert [r.system for r in results] == ["minimalkueue", "accelsched"]
    for r in results:
        assert r.admitted == {c: (30, 30) for c in kueueperf.CLASSES}, r
        assert all(r.avg_admission_ms[c] > 0 for c in kueueperf.CLASSES), r
        # Usage comes from the ClusterQueues' status: accelsched's is written by its Workload door.
        assert r.usage_pct is not None and r.usage_pct > 0, r
        assert r.wall_ms > 0
    assert results[0].completed  # Kueue's recorder saw minimalkueue's queues drained and stopped by itself
    table = kueueperf.table(results, thresholds)
    assert "avg time to admission, large (s)" in table and "<= 425" in table
