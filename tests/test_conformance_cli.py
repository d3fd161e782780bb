"""conformance/cli.py: the report and progress lines both oracles print, from their real tallies."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # conformance/ is not an installed package
    sys.path.insert(0, str(REPO))

from conformance import cli  # noqa: E402
from conformance.kueue import generator, runner  # noqa: E402


def _tally() -> runner.Tally:
    quota, cohort, other = generator.generate(3, seed=4)
    return runner.Tally([runner.Verdict(quota), runner.Verdict(cohort, diffs=["condition-QuotaReserved: w1 ..."]),
                         runner.Verdict(other, error="Kueue did not settle: w2 changed 30 times\nmore")], 12.0)


def test_the_report_has_each_class_the_kinds_errors_extra_lines_saved_cases_and_wall(capsys) -> None:
    cli.print_report("title line", _tally(), 3, [Path("saved.yaml")], 8, ["live sample: agree 1/1"])
    assert capsys.readouterr().out.splitlines() == [
        "title line",
        "  cohort       0/1        0.0%",
        "  quota        1/1      100.0%",
        "  disagreement condition-QuotaReserved: 1",
        "  oracle errors (not counted): 1; first: Kueue did not settle: w2 changed 30 times",
        "  live sample: agree 1/1",
        "  saved saved.yaml",
        "wall 12.0 s, 4000 ms per scenario (both sides; control plane start not counted)",
    ]


def test_progress_prints_disagreements_when_verbose_and_a_line_every_hundred(capsys) -> None:
    verdicts = _tally().verdicts
    quiet = cli.progress(200, False, lambda v: v.scenario.klass)
    for n in range(200):
        quiet(n, verdicts[1])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" in ")[0] for line in lines] == ["  ... 100/200", "  ... 200/200"]
    loud = cli.progress(200, True, lambda v: f"{v.scenario.klass} {v.scenario.seed}")
    loud(0, verdicts[1])
    loud(1, verdicts[2])
    other = verdicts[2].scenario
    assert capsys.readouterr().out.splitlines() == [
        f"  [cohort {verdicts[1].scenario.seed}] condition-QuotaReserved: w1 ...",
        f"  [{other.klass} {other.seed}] error: Kueue did not settle: w2 changed 30 times",
    ]
