"""Both sides on every scenario, in batches, and the tally: a verdict per scenario (agree, or its differences)."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from conformance.kueue import compare
from conformance.kueue.real import KueueCluster, OracleError, RealResult
from conformance.kueue.scenario import JSON, Scenario

BATCH = 100  # scenarios side by side on one Kueue: the waits (a second per wave, the settling) are paid once
# Batches in flight: the next batch is created once the previous one has settled, while that one's objects are
# deleted and accelsched judges it (real.py says why never while it settles).
INFLIGHT = 2


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
    if not cluster.fair_sharing and not cluster.feature_gates:
        return []
    doc: JSON = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
    if cluster.fair_sharing:
        doc["fairSharing"] = {"preemptionStrategies": cluster.fair_sharing}
    if cluster.feature_gates:
        doc["featureGates"] = dict(cluster.feature_gates)
    return [doc]


def judge_batch(cluster: KueueCluster, chunk: list[Scenario],
                settled: Callable[[], None] | None = None) -> list[Verdict]:
    """One batch on Kueue, then accelsched on each of its scenarios' phases."""
    try:
        results = cluster.run(chunk, settled=settled)
    except OracleError as exc:
        return [Verdict(s, error=str(exc)) for s in chunk]
    out = []
    for s, result in zip(chunk, results, strict=True):
        if result.error:
            out.append(Verdict(s, error=result.error))
            continue
        cases = cases_of(result, configuration(cluster))
        out.append(Verdict(s, cases, [d for c in cases for d in c.diffs()]))
    return out


def judge_iter(cluster: KueueCluster, scenarios: list[Scenario], inflight: int = INFLIGHT) -> Iterator[Verdict]:
    """Verdicts in the scenarios' order, ``BATCH`` scenarios a batch, up to ``inflight`` batches at once."""
    chunks = [scenarios[start:start + BATCH] for start in range(0, len(scenarios), BATCH)]
    with concurrent.futures.ThreadPoolExecutor(max(1, inflight), thread_name_prefix="kueue-batch") as pool:
        futures: list[concurrent.futures.Future[list[Verdict]]] = []
        for chunk in chunks:
            while len(running := [f for f in futures if not f.done()]) >= inflight:
                concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            settled = threading.Event()
            future = pool.submit(judge_batch, cluster, chunk, settled.set)
            futures.append(future)
            while True:  # the next batch starts once this one has settled
                while futures and futures[0].done():  # what is finished is handed on in order at once
                    yield from futures.pop(0).result()
                if settled.wait(0.5) or future.done():
                    break
        for future in futures:
            yield from future.result()


def judge_all(cluster: KueueCluster, scenarios: list[Scenario]) -> list[Verdict]:
    """Verdicts in the scenarios' order."""
    return list(judge_iter(cluster, scenarios))


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
    for v in judge_iter(cluster, scenarios):
        tally.verdicts.append(v)
        if progress:
            progress(len(tally.verdicts) - 1, v)
    tally.seconds = time.monotonic() - started
    return tally
