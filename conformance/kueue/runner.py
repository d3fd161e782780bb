"""Both sides on every scenario, in batches, and the tally: a verdict per scenario (agree, or its differences)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from conformance.kueue import compare
from conformance.kueue.real import KueueCluster, OracleError, RealResult
from conformance.kueue.scenario import JSON, Scenario

BATCH = 100  # scenarios side by side on one Kueue: the waits (a second per wave, the settling) are paid once


@dataclass
class Case:
    """One phase as a recorded case holds it: accelsched's documents, Kueue's answer, what Kueue left untouched."""

    docs: list[JSON]
    real: dict[str, JSON]
    untouched: list[str]

    def diffs(self) -> list[str]:
        try:
            ours = compare.accelsched(self.docs)
        except (Exception, SystemExit) as exc:  # accelsched refused the input or crashed: a disagreement too
            return [f"accelsched-error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"]
        return compare.diff(self.real, ours, self.untouched)


@dataclass
class Verdict:
    scenario: Scenario
    cases: list[Case] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def agree(self) -> bool:
        return not self.error and not self.diffs


def cases_of(result: RealResult, config: list[JSON] | None = None) -> list[Case]:
    """Each phase as a case; ``config``: Kueue's Configuration document, given to accelsched too."""
    out = []
    for phase, pr in enumerate(result.phases):
        real = compare.kueue(pr.outcome)
        before = [w for w in pr.inputs if w.get("status")]
        docs = (config or []) + compare.inputs(result.objects, pr.inputs, phase)
        out.append(Case(docs, real, compare.unchanged(before, real)))
    return out


def configuration(cluster: KueueCluster) -> list[JSON]:
    """The Configuration document accelsched reads for what the cluster's Kueue was started with."""
    if not cluster.fair_sharing:
        return []
    return [{"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
             "fairSharing": {"preemptionStrategies": cluster.fair_sharing}}]


def judge_all(cluster: KueueCluster, scenarios: list[Scenario]) -> list[Verdict]:
    """Verdicts in the scenarios' order (one batch run on Kueue per ``BATCH`` scenarios)."""
    out = []
    for start in range(0, len(scenarios), BATCH):
        chunk = scenarios[start:start + BATCH]
        try:
            results = cluster.run(chunk)
        except OracleError as exc:
            out += [Verdict(s, error=str(exc)) for s in chunk]
            continue
        for s, result in zip(chunk, results, strict=True):
            if result.error:
                out.append(Verdict(s, error=result.error))
                continue
            cases = cases_of(result, configuration(cluster))
            out.append(Verdict(s, cases, [d for c in cases for d in c.diffs()]))
    return out


@dataclass
class Tally:
    verdicts: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def decided(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.error]

    def rate(self) -> float:
        decided = self.decided
        return sum(v.agree for v in decided) / len(decided) if decided else 1.0

    def by_class(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for v in self.decided:
            agree, of = out.get(v.scenario.klass, (0, 0))
            out[v.scenario.klass] = (agree + v.agree, of + 1)
        return dict(sorted(out.items()))

    def kinds(self) -> Counter[str]:
        return Counter(d.split(":", 1)[0] for v in self.decided for d in v.diffs[:1])

    def workloads(self) -> tuple[int, int]:
        """Workloads compared (last phase of each scenario) and how many of them Kueue admitted."""
        n = admitted = 0
        for v in self.decided:
            if v.cases:
                n += len(v.cases[-1].real)
                admitted += sum(w["admitted"] for w in v.cases[-1].real.values())
        return n, admitted

    def summary_line(self) -> str:
        decided = self.decided
        n, admitted = self.workloads()
        return (f"kueue-conformance: agree {sum(v.agree for v in decided)}/{len(decided)} "
                f"({100 * self.rate():.1f}%; {n} workloads, {admitted} admitted by Kueue)")


def run_all(cluster: KueueCluster, scenarios: list[Scenario],
            progress: Callable[[int, Verdict], None] | None = None) -> Tally:
    started = time.monotonic()
    tally = Tally()
    for start in range(0, len(scenarios), BATCH):
        for v in judge_all(cluster, scenarios[start:start + BATCH]):
            tally.verdicts.append(v)
            if progress:
                progress(len(tally.verdicts) - 1, v)
    tally.seconds = time.monotonic() - started
    return tally
