"""``python -m conformance.kueue``: accelsched's queue admission against the real Kueue v0.19.2 on generated scenarios.

    python -m conformance.kueue --scenarios 1000 --seed 3
    python -m conformance.kueue --scenarios 200 --classes preemption,tree -v --shrink
    python -m conformance.kueue --scenarios 100 --seed 2 --only 2000061 --record   # keep as a case, as it is

The last line is ``kueue-conformance: agree A/N (...)``; exit 1 below 99.5% agreement. A disagreement counts once it
comes back when its scenario is run on Kueue a second time (``--confirm``, on by default; the first run's figure is
printed above it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from conformance import cli
from conformance.kueue import cases, generator, runner, shrink
from conformance.kueue.real import KueueCluster

TARGET = 0.995


def _shrink_all(cluster: KueueCluster, tally: runner.Tally, args: argparse.Namespace) -> list[Path]:
    """Shrink one disagreement per (class, kind) and save its disagreeing phase as a case."""
    seen: set[tuple[str, str]] = set()
    saved = []

    def judge(scenarios: list) -> list[list[str]]:  # type: ignore[type-arg]
        return [v.diffs if not v.error else ["error"] for v in runner.judge_all(cluster, scenarios)]

    for v in tally.decided:
        if not v.diffs:
            continue
        kind = v.diffs[0].split(":", 1)[0]
        if (v.scenario.klass, kind) in seen:
            continue
        seen.add((v.scenario.klass, kind))
        small = shrink.shrink(v.scenario, kind, judge, rounds=args.shrink_rounds)
        final = runner.judge_all(cluster, [small])[0]
        case = next((c for c in final.cases if any(d.split(":", 1)[0] == kind for d in c.diffs())), None)
        if final.error or case is None:
            continue
        path = args.cases_dir / f"{small.klass}-{small.digest()}.yaml"
        cases.write(path, small.klass, case, seed=small.seed, disagreement=case.diffs())
        saved.append(path)
    return saved


def _confirm(cluster: KueueCluster, tally: runner.Tally) -> list[str]:
    """Each disagreeing scenario run again on Kueue, once; where Kueue's second answer is accelsched's, that verdict
    takes the first one's place. Kueue's answer to one scenario varies between runs where it hangs on timing (the
    order in which separate writes land) or on UIDs, which change every run (docs/queues.md): a disagreement that
    does not come back is one of Kueue's answers; one that does is counted. A line per scenario says which."""
    again = [i for i, v in enumerate(tally.verdicts) if v.diffs and not v.error]
    lines = []
    for i, second in zip(again, runner.judge_all(cluster, [tally.verdicts[i].scenario for i in again]), strict=True):
        first = tally.verdicts[i]
        outcome = "agrees on a second run" if second.agree else "disagrees again" if second.diffs else "not settled"
        lines.append(f"{first.scenario.klass} {first.scenario.seed}: {first.diffs[0]} ({outcome})")
        if second.agree:
            tally.verdicts[i] = second
    return lines


def _record(v: runner.Verdict, cases_dir: Path) -> Path:
    path = cases_dir / f"{v.scenario.klass}-{v.scenario.digest()}.yaml"
    case = v.cases[-1]
    cases.write(path, v.scenario.klass, case, seed=v.scenario.seed, disagreement=case.diffs())
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.kueue", description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--classes", help=f"comma-separated, of: {', '.join(generator.CLASSES)} (default: all); or "
                        f"{generator.FAIR_SHARING} alone (Kueue and accelsched with fair sharing on), or "
                        f"{generator.PREEMPTION_GATES} alone (with the ConcurrentAdmission feature gate on)")
    parser.add_argument("--only", help="comma-separated scenario seeds of this run (from -v or --json)")
    parser.add_argument("--shrink", action=argparse.BooleanOptionalAction, default=False,
                        help="shrink one disagreement per class and kind into tests/kueue_cases/")
    parser.add_argument("--shrink-rounds", type=int, default=12)
    parser.add_argument("--record", action="store_true",
                        help="save every scenario run (its last phase) as a case, agreeing or not, unshrunk")
    parser.add_argument("--cases-dir", type=Path, default=cases.CASES_DIR)
    parser.add_argument("--json", type=Path, help="write the figures and disagreements here")
    parser.add_argument("--target", type=float, default=TARGET,
                        help=f"the agreement below which it exits 1 (default {TARGET}; the fairsharing class's own "
                        "in make conformance: Kueue's answer there varies between runs, docs/queues.md)")
    parser.add_argument("--confirm", action=argparse.BooleanOptionalAction, default=True,
                        help="run each disagreeing scenario again on Kueue once, counted as agreeing if Kueue's "
                        "second answer is accelsched's (Kueue's answer varies between runs; the first run's figure "
                        "is printed too)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every disagreement")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    classes = [c for c in args.classes.split(",") if c] if args.classes else None
    fair = classes == [generator.FAIR_SHARING]
    gated = classes == [generator.PREEMPTION_GATES]
    for alone, why in ((generator.FAIR_SHARING, "fair sharing"), (generator.PREEMPTION_GATES, "a feature gate")):
        if classes and alone in classes and classes != [alone]:
            parser.error(f"--classes {alone} runs alone (its Kueue has {why} on)")
    scenarios = generator.generate(args.scenarios, args.seed, classes)
    if args.only:
        wanted = {int(s) for s in args.only.split(",") if s}
        scenarios = [s for s in scenarios if s.seed in wanted]
    with tempfile.TemporaryDirectory(prefix="accelsched-kueue-oracle-") as tmp, KueueCluster(
            Path(tmp), fair_sharing=generator.FAIR_SHARING_STRATEGIES if fair else None,
            feature_gates=generator.PREEMPTION_GATES_FEATURES if gated else None) as cluster:
        progress = cli.progress(len(scenarios), args.verbose, lambda v: f"{v.scenario.klass} {v.scenario.seed}")
        tally = runner.run_all(cluster, scenarios, progress)
        first_run = sum(v.agree for v in tally.decided), len(tally.decided)
        confirmed = _confirm(cluster, tally) if args.confirm else []
        saved = _shrink_all(cluster, tally, args) if args.shrink else []
        if args.record:
            saved += [_record(v, args.cases_dir) for v in tally.decided if v.cases]
    extra = [f"first run: agree {first_run[0]}/{first_run[1]}", *confirmed] if args.confirm else []
    cli.print_report(f"accelsched vs Kueue v0.19.2: {len(scenarios)} scenarios, seed {args.seed}", tally,
                     len(scenarios), saved, 12, extra)
    errors = [v for v in tally.verdicts if v.error]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {"agree": sum(v.agree for v in tally.decided), "of": len(tally.decided),
                  "first_run_agree": first_run[0], "confirmed": confirmed,
                  "errors": len(errors), "seconds": tally.seconds, "saved_cases": [str(p) for p in saved],
                  "disagreements": [{"class": v.scenario.klass, "seed": v.scenario.seed, "diffs": v.diffs}
                                    for v in tally.decided if v.diffs]}
        args.json.write_text(json.dumps(report, indent=2))
    print(tally.summary_line())
    return 0 if tally.decided and tally.rate() >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
