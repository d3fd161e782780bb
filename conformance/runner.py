"""Run scenarios through both schedulers and tally agreement per class (and per kind of outcome)."""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance import dra, offline
from conformance.outcome import PodOutcome, differences
from conformance.real import OracleError, RealCluster
from conformance.scenario import Scenario


@dataclass
class Verdict:
    scenario: Scenario
    real: list[PodOutcome]
    ours: list[PodOutcome]
    diffs: list[str]
    error: str = ""  # the oracle could not decide (not counted either way)

    @property
    def agree(self) -> bool:
        return not self.diffs and not self.error

    @property
    def kind(self) -> str:
        """The scenario's kind by the real outcome: preempting if any pod preempted, else pending if any pod was
        left Pending, else bound."""
        kinds = {o.kind for o in self.real}
        return next((k for k in ("preempting", "pending", "bound") if k in kinds), "bound")


def compare(scenario: Scenario, real: list[PodOutcome]) -> tuple[list[PodOutcome], list[str]]:
    """accelsched on ``scenario``, following the real choices where they are among its best; the differences."""
    follow = {o.pod: o.node for o in real if o.node}
    try:
        ours = offline.run(scenario, follow)
    except offline.AccelschedError as exc:
        return [], [f"accelsched-error: {exc}"]
    except Exception as exc:  # a crash in accelsched is a finding, not the end of the run
        return [], [f"accelsched-crash: {type(exc).__name__}: {exc}"]
    diffs = differences(real, ours)
    # DRA: every allocation must be valid for its claim, the real one too (else the check or the harness is wrong).
    diffs += dra.check_allocations(scenario, real, "real") + dra.check_allocations(scenario, ours, "accelsched")
    return ours, diffs


def judge(cluster: RealCluster, scenario: Scenario) -> Verdict:
    try:
        real = cluster.run(scenario)
    except OracleError as exc:
        return Verdict(scenario, [], [], [], error=str(exc))
    ours, diffs = compare(scenario, real)
    return Verdict(scenario, real, ours, diffs)


@dataclass
class Tally:
    verdicts: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0

    def by_class(self) -> dict[str, tuple[int, int]]:
        out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for v in self.verdicts:
            if v.error:
                continue
            out[v.scenario.klass][1] += 1
            out[v.scenario.klass][0] += v.agree
        return {k: (a, n) for k, (a, n) in sorted(out.items())}

    def kinds(self) -> Counter[str]:
        return Counter(d.split(":", 1)[0] for v in self.verdicts for d in v.diffs)

    @property
    def decided(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.error]

    def summary_line(self) -> str:
        decided = self.decided
        agree = sum(v.agree for v in decided)
        counts = Counter(v.kind for v in decided)
        return (f"conformance: agree {agree}/{len(decided)} (pending {counts['pending']}, bound {counts['bound']}, "
                f"preempting {counts['preempting']})")

    def rate(self, which: Callable[[Verdict], bool] | None = None) -> float:
        decided = [v for v in self.decided if which is None or which(v)]
        return sum(v.agree for v in decided) / len(decided) if decided else 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 2),
            "scenarios": len(self.verdicts),
            "by_class": {k: {"agree": a, "of": n} for k, (a, n) in self.by_class().items()},
            "kinds": dict(self.kinds()),
            "errors": [v.error.splitlines()[0] for v in self.verdicts if v.error],
            "disagreements": [
                {"class": v.scenario.klass, "config": v.scenario.config, "seed": v.scenario.seed,
                 "digest": v.scenario.digest(), "diffs": v.diffs}
                for v in self.verdicts if v.diffs
            ],
        }


def run_all(
    cluster: RealCluster | Sequence[RealCluster],
    scenarios: list[Scenario],
    progress: Callable[[int, Verdict], None] | None = None,
) -> Tally:
    """Every scenario, grouped by config (kube-scheduler restarts once per group), in generation order within.

    With several clusters (each its own API server and kube-scheduler: a scenario must be alone with its nodes), the
    config-sorted order is dealt out to the clusters in turn (a class's scenarios cost alike, and a class keeps to one
    config) and each cluster's share runs in that order beside the others. A scenario spends most of its time
    waiting for kube-scheduler's answer, not computing, so two clusters on two cores take about two thirds of the
    time. The verdicts are kept in the one-cluster order; ``progress`` is called as they come."""
    clusters = [cluster] if isinstance(cluster, RealCluster) else list(cluster)
    tally = Tally()
    start = time.monotonic()
    order = sorted(range(len(scenarios)), key=lambda i: scenarios[i].config)
    slices = [order[j::len(clusters)] for j in range(len(clusters))]  # each in config order, of like cost
    verdicts: dict[int, Verdict] = {}
    done: queue.SimpleQueue[tuple[int, Verdict] | BaseException] = queue.SimpleQueue()

    def run_slice(c: RealCluster, indices: list[int]) -> None:
        try:
            for i in indices:
                done.put((i, judge(c, scenarios[i])))
        except BaseException as exc:  # handed to the caller's thread, which raises it
            done.put(exc)

    threads = [threading.Thread(target=run_slice, args=(c, part), name=f"conformance-{n}", daemon=True)
               for n, (c, part) in enumerate(zip(clusters, slices, strict=False))]
    for t in threads:
        t.start()
    for n in range(len(order)):
        item = done.get()
        if isinstance(item, BaseException):
            raise item
        i, verdict = item
        verdicts[i] = verdict
        if progress:
            progress(n, verdict)
    for t in threads:
        t.join()
    tally.verdicts = [verdicts[i] for i in order]
    tally.seconds = time.monotonic() - start
    return tally
