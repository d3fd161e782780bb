"""Reclaim up to the fair share, and converge (issue 23, beyond Kueue): three equal tenants, one borrowing the whole
cluster first, end within one gang of a third each, with no gang preempted twice and nothing moving afterwards.
The scenario and its driver are benchmarks/fairshare.py's (OpenAdmission with fair sharing, placement on nodes)."""

from __future__ import annotations

import pytest

from benchmarks.fairshare import TENANTS, Case, accelsched


@pytest.mark.parametrize(
    "case",
    [
        Case(nodes=6, guarantee=0, pods=2, gpus=2),  # no guarantee: all 48 GPUs lent by the Cohort
        Case(nodes=6, guarantee=4, pods=2, gpus=2),  # a guarantee below the fair share (KAI-Scheduler#1934)
        Case(nodes=4, guarantee=0, pods=1, gpus=4),  # 32 GPUs: a third is no whole number of gangs
    ],
    ids=["no-guarantee", "guarantee-below-share", "uneven"],
)
def test_three_tenants_converge_to_a_third(case: Case) -> None:
    result = accelsched(case)
    third = case.capacity / len(TENANTS)
    for tenant, gpus in result.gpus.items():
        assert abs(gpus - third) <= case.gang_gpus, (tenant, result.gpus)
    assert sum(result.gpus.values()) == case.capacity  # saturated: nothing left idle
    # the borrower loses exactly what it holds above its final share, each victim once: no oscillation
    assert result.preempted == (case.capacity - result.gpus["team-a"]) // case.gang_gpus
    assert result.preempted_twice == 0
    assert result.moved_after == 0  # more cycles with every queue woken change nothing
    assert result.unplaced == 0
    # the borrower's GPUs only go down while the others' only go up, round after round
    a = [s["team-a"] for s in result.series]
    assert a == sorted(a, reverse=True)
    for tenant in TENANTS[1:]:
        others = [s[tenant] for s in result.series]
        assert others == sorted(others)
