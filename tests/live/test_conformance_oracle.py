"""The differential oracle end to end: the real kube-scheduler v1.36.3 and accelsched on the same generated
scenarios must agree fully on the classes accelsched implements today; ``accelsched run`` agrees with accelsched
offline on a sample; and the recorder round-trips a case file."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # conformance/ is not an installed package: import it from the checkout
    sys.path.insert(0, str(REPO))

from conformance import cases, generator, live, offline, runner  # noqa: E402
from conformance.outcome import differences  # noqa: E402
from conformance.real import RealCluster  # noqa: E402

pytestmark = pytest.mark.integration

IMPLEMENTED = ["resources", "taints", "cordon", "nodeaffinity", "podaffinity", "spread", "preemption"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with RealCluster(tmp_path_factory.mktemp("conformance")) as c:
        yield c


def test_a_fixed_seed_run_agrees_on_the_implemented_classes(cluster: RealCluster) -> None:
    scenarios = generator.generate(40, seed=12, classes=IMPLEMENTED)
    tally = runner.run_all(cluster, scenarios)
    problems = [(v.scenario.klass, v.scenario.seed, v.diffs or v.error) for v in tally.verdicts if not v.agree]
    assert problems == []


def test_two_clusters_side_by_side_give_one_clusters_verdicts_in_its_order(
    cluster: RealCluster, tmp_path: Path
) -> None:
    # `python -m conformance` deals the scenarios out to clusters run side by side (runner.run_all): the tally must
    # be the one a single cluster gives, in the same order, whichever cluster answered which scenario.
    scenarios = generator.generate(12, seed=31, classes=["resources", "taints", "preemption"])
    alone = runner.run_all(cluster, scenarios)
    seen: list[int] = []
    with RealCluster(tmp_path / "second") as second:
        both = runner.run_all([cluster, second], scenarios, lambda n, _: seen.append(n))
        assert next(second.counter) == len(scenarios) // 2  # it ran its share (counter: scenarios it has run)
    assert seen == list(range(len(scenarios)))
    assert [v.scenario.seed for v in both.verdicts] == [v.scenario.seed for v in alone.verdicts]
    real = [[o.to_json() for o in v.real] for v in both.verdicts]
    assert real == [[o.to_json() for o in v.real] for v in alone.verdicts]
    assert all(v.agree for v in both.verdicts)


def test_accelsched_run_agrees_with_offline_on_a_sample(cluster: RealCluster) -> None:
    scenarios = [s for s in generator.generate(10, seed=5, classes=["resources"]) if s.config == "default"][:1]
    result = live.sample(cluster, scenarios)
    assert result == {"agree": 1, "of": 1, "diffs": []}


def test_record_round_trips_a_case(cluster: RealCluster, tmp_path: Path) -> None:
    scenario = generator.generate(1, seed=3, classes=["resources"])[0]
    path = tmp_path / "case.yaml"
    real = cluster.run(scenario)
    cases.write(path, scenario, real)
    copy = tmp_path / "copy.yaml"
    shutil.copy(path, copy)
    again, recorded, header = cases.read(copy)
    assert [o.to_json() for o in recorded or []] == [o.to_json() for o in real]
    cases.rewrite_outcome(copy, again, cluster.run(again), header)
    rerecorded = cases.read(copy)[1] or []
    assert [o.kind for o in rerecorded] == [o.kind for o in real]
    assert differences(rerecorded, offline.run(again, {o.pod: o.node for o in rerecorded if o.node})) == []
