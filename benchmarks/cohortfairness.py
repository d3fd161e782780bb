"""``python -m benchmarks.cohortfairness``: fairness over time across a cohort, with and without accelsched's extension.

    python -m benchmarks.cohortfairness                              # openb default list, inflated 1.3, FGD, seed 42
    python -m benchmarks.cohortfairness --pods 3000 --half-life 30m  # the first 3,000 pods only
    python -m benchmarks.cohortfairness --out docs/img               # also cohort-fairness.png
    python -m benchmarks.cohortfairness --bursts 6 --inflation 1.0   # bursty tenants (below), not the qos ones
    python -m benchmarks.cohortfairness --bursts 6 --inflation 1.0 --cohort-quota 800   # a quota that binds
    python -m benchmarks.cohortfairness --synthetic --gpus 64 --half-life 2h   # a late tenant (below)

The replay of ``simulate --queues`` (sim/queues.py) on ``examples/queues/openb-cohort-fairness.yaml``: three
tenants by the trace's qos in one cohort that holds every GPU, equal weights, fair sharing on, no preemption, so
Kueue's fair-sharing tournament alone decides which tenant gets a GPU as it frees. It runs twice on the same pods:
as Kueue does it, and with queues/cohortusage's history (the annotation on the Cohort, ``--half-life``).
``--bursts N`` draws the tenants from the trace's arrivals instead: the arrival span cut in N windows, each
window's pods in one of the file's LocalQueues in turn (bursty demand: one tenant's backlog meets the next burst).
``--queues`` takes another file; ``--cohort-quota N`` sets the root Cohorts' GPU nominalQuota to N GPUs (a quota
small enough to bind: then the tournament decides who runs at every departure).
``--synthetic`` replaces the trace by the case the extension is for: a cluster of ``--gpus`` GPUs whose Cohort
holds them all, tenant A (the file's first LocalQueue) alone from time 0, tenant B (the second, of another
ClusterQueue) from ``--arrive``, each submitting one-GPU jobs of ``--run`` at twice the rate the cohort runs them
(a backlog each), until ``--span``: A has held the whole cohort when B comes.

Reported per tenant, over the replay's clock (arrivals compressed, run times kept, as ``simulate --queues``):

- GPU-hours it ran, and the weighted ideal of those GPU-hours: the GPU-hours the cluster delivered so far,
  water-filled by weight and capped at what each tenant asked so far (the GPU-hours of its running and waiting
  pods); the gap, time-weighted over the busy window, as a share of what was delivered;
- the instantaneous gap (``simulate --queues``'s: its GPU share against the weighted DRF ideal at each moment).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from accelsched.queues.api import QueueObjects, ResourceQuota, map_quotas
from accelsched.sim import queues
from accelsched.sim.fragmentation import trace_typical_pods
from accelsched.sim.tenants import workload
from accelsched.sim.trace import MILLI, Nodes, Pods, load_nodes, load_pods, trace_paths

REPO = Path(__file__).resolve().parents[1]
QUEUES = REPO / "examples/queues/openb-cohort-fairness.yaml"


def with_history(objects: QueueObjects, half_life: float) -> QueueObjects:
    """The same objects with the extension on: the half-life on every root Cohort (the annotation's effect)."""
    out = dataclasses.replace(objects)
    out.cohorts = {
        name: dataclasses.replace(c, usage_half_life=None if c.parent else half_life)
        for name, c in objects.cohorts.items()
    }
    return out


def with_cohort_quota(objects: QueueObjects, gpus: int) -> QueueObjects:
    """The same objects with every root Cohort's GPU nominalQuota set to ``gpus`` GPUs (milli, as load_queues)."""

    def change(_flavor: str, q: ResourceQuota) -> ResourceQuota:
        return dataclasses.replace(q, nominal=gpus * MILLI) if q.name == queues.GPU else q

    out = dataclasses.replace(objects)
    out.cohorts = {
        name: c if c.parent else dataclasses.replace(c, resource_groups=map_quotas(c.resource_groups, change))
        for name, c in objects.cohorts.items()
    }
    return out


def cumulative(run: queues.QueueTimeline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(span per sample, GPU-hours run so far per tenant, their weighted ideal so far per tenant)."""
    assert run.demands is not None
    span = run._span()
    hours = np.cumsum(run.shares * span[:, None], axis=0) / MILLI / 3600
    asked = np.cumsum(run.demands * span[:, None], axis=0) / MILLI / 3600
    weights = np.array([float(t.weight) for t in run.tenants])
    ideal = np.array([queues.water_fill(h.sum(), weights, a) for h, a in zip(hours, asked, strict=True)])
    return span, hours, ideal


def report(label: str, run: queues.QueueTimeline) -> dict[str, dict[str, float]]:
    span, hours, ideal = cumulative(run)
    delivered = hours.sum(axis=1)
    busy = (span > 0) & (delivered > 0)
    out = {}
    print(f"\n{label}: allocation {run.mean_allocation():.2%}, {run.seconds:.0f} s")
    print(f"  {'tenant':8} {'GPU-hours':>10} {'ideal':>10} {'ratio':>6} {'gap over time':>14} {'instant gap':>12}")
    for t, stats in enumerate(run.tenants):
        gap = float((np.abs(hours[busy, t] - ideal[busy, t]) / delivered[busy] * span[busy]).sum() / span[busy].sum())
        final, want = hours[-1, t], ideal[-1, t]
        ratio = final / want if want else float("nan")
        print(f"  {stats.cluster_queue:8} {final:10.0f} {want:10.0f} {ratio:6.2f} {gap:14.2%} {stats.gap:12.2%}")
        out[stats.cluster_queue] = {"hours": final, "ideal": want, "gap": gap, "instant": stats.gap}
    return out


def plot(path: Path, runs: dict[str, queues.QueueTimeline]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4), sharey=True)
    for ax, (label, run) in zip(np.atleast_1d(axes), runs.items(), strict=True):
        _, hours, ideal = cumulative(run)
        hours_axis = (run.times - run.times[0]) / 3600
        for t, stats in enumerate(run.tenants):
            (line,) = ax.plot(hours_axis, hours[:, t], label=f"{stats.cluster_queue}")
            ax.plot(hours_axis, ideal[:, t], linestyle="--", color=line.get_color())
        ax.set_title(label)
        ax.set_xlabel("replay clock (hours)")
        ax.legend(title="GPU-hours (dashed: weighted ideal)")
    np.atleast_1d(axes)[0].set_ylabel("GPU-hours so far")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"\nwrote {path}")


def first_pods(pods: Pods, n: int | None) -> Pods:
    if n is None or n >= pods.n:
        return pods
    assert pods.creation is not None
    return pods.take(np.sort(np.argsort(pods.creation, kind="stable")[:n]))


def bursts(pods: Pods, objects: QueueObjects, windows: int) -> list[str]:
    """Bursty tenants drawn from the trace's own arrivals: the arrival span cut in ``windows`` equal windows,
    window k's pods all in the k-th LocalQueue of the file (in turn): each tenant asks in bursts, and the backlog
    of one burst meets the next tenant's."""
    assert pods.creation is not None
    keys = list(objects.local_queues)
    lo, hi = float(pods.creation.min()), float(pods.creation.max())
    width = max((hi - lo) / windows, 1.0)
    return [keys[min(int((c - lo) // width), windows - 1) % len(keys)] for c in pods.creation.tolist()]


def synthetic(gpus: int, run: int, arrive: int, span: int, tenants: int = 2) -> tuple[Nodes, Pods, list[int]]:
    """The late-tenant case: ``gpus`` GPUs on 8-GPU nodes; tenant k submits a one-GPU job of ``run`` seconds every
    ``run / (2 gpus)`` seconds from ``k * arrive`` to ``span`` (twice what the cohort runs: its backlog grows).
    Returns the nodes, the pods (arrival order) and each pod's tenant."""
    per_node = 8
    sizes = [per_node] * (gpus // per_node) + ([gpus % per_node] if gpus % per_node else [])
    nodes = Nodes(
        [f"node-{i}" for i in range(len(sizes))],
        np.full(len(sizes), 128_000, np.int64),
        np.full(len(sizes), 1 << 20, np.int64),
        np.array(sizes, np.int64),
        np.zeros(len(sizes), np.int64),
        ["V100M32"],
        "synthetic",
    )
    every = max(run // (2 * gpus), 1)
    arrivals = sorted((t, k) for k in range(tenants) for t in range(k * arrive, span, every))
    n = len(arrivals)
    created = np.array([t for t, _ in arrivals], np.int64)
    pods = Pods(
        [f"job-{i}" for i in range(n)],
        np.full(n, 4000, np.int64),
        np.full(n, 16_384, np.int64),
        np.ones(n, np.int64),
        np.full(n, MILLI, np.int64),
        np.zeros(n, np.int64),
        [frozenset()],
        created,
        created + run,
        "synthetic",
    )
    return nodes, pods, [k for _, k in arrivals]


def tenant_queues(objects: QueueObjects, tenants: int) -> list[str]:
    """The first LocalQueue of each of the file's first ``tenants`` ClusterQueues (one tenant per ClusterQueue)."""
    firsts: dict[str, str] = {}
    for key, lq in objects.local_queues.items():
        firsts.setdefault(lq.cluster_queue, key)
    keys = list(firsts.values())
    if len(keys) < tenants:
        raise SystemExit(f"--synthetic needs {tenants} ClusterQueues with a LocalQueue, the file has {len(keys)}")
    return keys[:tenants]


def compare(
    nodes: Nodes, pods: Pods, objects: QueueObjects, queue_of: list[str], args: argparse.Namespace, half_life: float
) -> dict[str, queues.QueueTimeline]:
    """The replay as Kueue orders it, then with the history; each reported."""
    typical = trace_typical_pods(pods, nodes.models)
    runs = {}
    for label, objs in (
        ("Kueue", objects),
        (f"with history (half-life {args.half_life})", with_history(objects, half_life)),
    ):
        started = time.perf_counter()
        runs[label] = queues.replay(
            nodes, pods, objs, queue_of, args.policy, args.seed, typical, "paper", args.compress
        )
        runs[label].seconds = time.perf_counter() - started
        report(label, runs[label])
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=None, help="the first N pods of the list (default: all)")
    parser.add_argument("--half-life", default="1h", help="the extension's half-life (a Go duration)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--policy", default="fgd")
    parser.add_argument("--inflation", type=float, default=1.3)
    parser.add_argument("--compress", type=float, default=None, help="arrivals compressed (30000; --synthetic: 1)")
    parser.add_argument("--queues", type=Path, default=QUEUES)
    parser.add_argument("--out", type=Path, default=None, help="write cohort-fairness.png here")
    parser.add_argument(
        "--bursts", type=int, default=0, help="tenants in N bursts of arrivals instead of by qos (0: by qos)"
    )
    parser.add_argument(
        "--cohort-quota", type=int, default=None, help="root Cohorts' GPU nominalQuota, GPUs (default: the file's)"
    )
    parser.add_argument("--synthetic", action="store_true", help="the late-tenant case instead of the trace")
    parser.add_argument("--gpus", type=int, default=64, help="--synthetic: the cluster's and the Cohort's GPUs")
    parser.add_argument("--run", default="1h", help="--synthetic: each job's run time (a Go duration)")
    parser.add_argument("--arrive", default="8h", help="--synthetic: when tenant B starts submitting")
    parser.add_argument("--span", default="24h", help="--synthetic: when both stop submitting")
    args = parser.parse_args(argv)
    from accelsched.config.fields import Fields

    def seconds(flag: str, text: str) -> float:
        return Fields(flag, {"h": text}, "", {"h"}).duration("h", 0.0)

    half_life = seconds("--half-life", args.half_life)
    if args.compress is None:
        args.compress = 1.0 if args.synthetic else 30000.0
    if args.synthetic:
        nodes, pods, tenant = synthetic(
            args.gpus, int(seconds("--run", args.run)), int(seconds("--arrive", args.arrive)),
            int(seconds("--span", args.span)),
        )  # fmt: skip
        objects = with_cohort_quota(queues.load_queues(args.queues), args.gpus)
        keys = tenant_queues(objects, 2)
        print(
            f"synthetic: {args.gpus} GPUs, Cohort quota {args.gpus} GPUs; {pods.n} one-GPU jobs of {args.run}: "
            f"{keys[0]} from 0, {keys[1]} from {args.arrive}, both until {args.span}; {args.policy}"
        )
        runs = compare(nodes, pods, objects, [keys[k] for k in tenant], args, half_life)
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            plot(args.out / "cohort-fairness-synthetic.png", runs)
        return 0
    node_path, pod_path = trace_paths("openb", "default")
    nodes, pods = load_nodes(node_path), first_pods(load_pods(pod_path), args.pods)
    objects = queues.load_queues(args.queues)
    if args.cohort_quota is not None:
        objects = with_cohort_quota(objects, args.cohort_quota)
    queue_of = bursts(pods, objects, args.bursts) if args.bursts else queues.tenants(pods, objects, "qos")
    replayed, of = workload(nodes, pods, queue_of, args.inflation, args.seed)
    quota = f", Cohort quota {args.cohort_quota} GPUs" if args.cohort_quota is not None else ""
    print(
        f"{replayed.n} pods ({pods.n} of the trace, inflated to {args.inflation}), {args.policy}, seed {args.seed}"
        f"{quota}"
    )
    runs = compare(nodes, replayed, objects, of, args, half_life)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        plot(args.out / "cohort-fairness.png", runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
