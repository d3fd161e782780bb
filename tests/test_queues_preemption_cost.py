"""What a rebuild's admission costs at large-scale's 1,000 ClusterQueues (benchmarks/doorrebuild.py): the preemption
search's shortcuts give Kueue's answer, and each head is searched once."""

from __future__ import annotations

import random

from accelsched.queues import preemption, quota
from accelsched.queues.api import ClusterQueue, FlavorQuotas, QueueObjects, ResourceGroup, ResourceQuota
from accelsched.queues.preemption import Admitted, Preemptor, Target
from accelsched.queues.workloads import Info
from benchmarks import doorrebuild

FR = ("rf", "cpu")


def _cohort(queues: int, nominal: int, lending: int | None) -> quota.QuotaTree:
    group = (ResourceGroup(("cpu",), (FlavorQuotas("rf", (ResourceQuota("cpu", nominal, None, lending),)),)),)
    objects = QueueObjects()
    objects.cluster_queues = {f"q{i}": ClusterQueue(f"q{i}", cohort="c", resource_groups=group) for i in range(queues)}
    return quota.build(objects)


def _one_at_a_time(p: Preemptor, node: quota.Node, requests: dict, chosen: list[Target], borrowing: bool) -> list:
    """fillBackWorkloads as Kueue loops it: each target given back alone, fits asked after each."""
    for i in range(len(chosen) - 2, -1, -1):
        p.add(chosen[i].workload)
        if p.fits(node, requests, borrowing):
            chosen[i] = chosen[-1]
            chosen.pop()
        else:
            p.remove(chosen[i].workload)
    return chosen


def test_fill_back_by_runs_keeps_the_targets_and_their_order_that_one_at_a_time_keeps() -> None:
    for seed in range(300):
        rng = random.Random(seed)
        queues, lending = rng.randint(2, 5), rng.choice((None, 2, 5))
        results, usages = [], []
        for fill_back in (_one_at_a_time, Preemptor.fill_back):
            tree = _cohort(queues, 10, lending)
            rng_w = random.Random(seed)  # the same workloads for both
            admitted: dict[str, list[Admitted]] = {}
            for i in range(rng_w.randint(1, 40)):
                name = f"q{rng_w.randrange(len(tree.cluster_queues))}"
                info = Info("ns", f"w{i}", "lq", [], 0, "", i, f"u{i}")
                admitted.setdefault(name, []).append(Admitted(info, name, {FR: rng_w.choice((1, 1, 2, 5))}, i))
            p = Preemptor(tree, {}, admitted)
            for ws in admitted.values():
                for w in ws:
                    p.add(w)
            chosen = [Target(w, "r") for ws in admitted.values() for w in ws]
            rng_w.shuffle(chosen)
            for t in chosen:
                p.remove(t.workload)
            node = tree.cluster_queues["q0"]
            requests = {FR: rng_w.randint(1, 20)}
            borrowing = rng_w.random() < 0.5
            if not p.fits(node, requests, borrowing):
                break  # fill_back starts from targets after which the preemptor fits
            results.append([t.workload.info.name for t in fill_back(p, node, requests, chosen, borrowing)])
            usages.append({n.name: dict(n.usage) for n in [*tree.cluster_queues.values(), *tree.cohorts.values()]})
        else:
            assert results[0] == results[1], seed
            assert usages[0] == usages[1], seed


def test_a_head_of_one_flavor_and_resource_is_searched_once_its_oracle_and_its_nomination_share_it() -> None:
    calls = {"targets": 0, "oracle": 0}
    targets, oracle = Preemptor.targets, preemption.Oracle.__call__

    def counted_targets(self, *args):  # type: ignore[no-untyped-def]
        calls["targets"] += 1
        return targets(self, *args)

    def counted_oracle(self, *args):  # type: ignore[no-untyped-def]
        calls["oracle"] += 1
        return oracle(self, *args)

    Preemptor.targets, preemption.Oracle.__call__ = counted_targets, counted_oracle  # type: ignore[method-assign]
    try:
        rows = doorrebuild.measure(6, 2, 90, 0.4)
    finally:
        Preemptor.targets, preemption.Oracle.__call__ = targets, oracle  # type: ignore[method-assign]
    assert calls["oracle"] > 0 and rows[0]["outcomes"] > 0
    assert calls["targets"] == calls["oracle"]


def test_the_benchmark_times_each_step_of_two_rebuilds_at_a_tiny_size() -> None:
    first, second = doorrebuild.measure(4, 2, 40, 0.4)
    assert (first["run"], second["run"]) == ("first", "second")
    for row in (first, second):
        assert set(doorrebuild.STEPS) <= set(row) and all(row[s] >= 0 for s in doorrebuild.STEPS)
        assert row["outcomes"] == 40 - sum(1 for i in range(40) if i % 100 == 7)  # less the Finished ones
    assert first["writes"] > 0
