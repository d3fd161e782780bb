"""The Kueue oracle end to end on a sample: the real Kueue v0.19.2 controller on the test API server and accelsched
on the same 30 generated scenarios (every class) agree per workload (admitted, flavors, conditions) on at least
``SAMPLE_FLOOR`` of them; ``make kueue-conformance`` runs them, then the full thousand against the 99.5% target."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # conformance/ is not an installed package: import it from the checkout
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from livekit import real_kueue  # noqa: E402

from conformance.kueue import cases, generator, runner  # noqa: E402
from conformance.kueue.real import KueueCluster  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.kueue_oracle]  # make kueue-conformance


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with real_kueue(tmp_path_factory.mktemp("kueue-oracle")) as c:
        yield c


# The sample's floor, below `make kueue-conformance`'s 99.5% target: 25/30 was measured (with the full run beside
# it) before the requeue fixes and the harness's timing fixes (987 of 988 judged scenarios of the 1,000 agree since,
# docs/queues.md). Thirty scenarios are too few to hold the target itself: the floor catches a regression.
SAMPLE_FLOOR = 0.8


def test_a_fixed_seed_sample_agrees_with_the_real_kueue(cluster: KueueCluster) -> None:
    tally = runner.run_all(cluster, generator.generate(30, seed=23))
    problems = [(v.scenario.klass, v.scenario.seed, v.diffs or v.error) for v in tally.verdicts if not v.agree]
    assert len(tally.decided) >= 28, problems  # Kueue settles on (nearly) every scenario
    assert tally.rate() >= SAMPLE_FLOOR, problems
    n, admitted = tally.workloads()
    assert 0 < admitted < n  # the sample admits some workloads and keeps others waiting: both sides are exercised


def test_a_recorded_case_round_trips(cluster: KueueCluster, tmp_path: Path) -> None:
    verdict = runner.judge_all(cluster, generator.generate(1, seed=5, classes=["cohort"]))[0]
    assert not verdict.error and verdict.cases
    path = tmp_path / "case.yaml"
    cases.write(path, verdict.scenario.klass, verdict.cases[-1])
    case, header = cases.read(path)
    assert header["recordedBy"] == cases.RECORDED_BY
    assert case.real == verdict.cases[-1].real and case.diffs() == verdict.cases[-1].diffs()
