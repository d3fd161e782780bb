"""``python -m benchmarks.fabric_timeline``: big gangs arriving and leaving on an NVLink-structured cluster.

    python -m benchmarks.fabric_timeline                  # 3 seeds x 300 gangs, both policies (minutes)
    python -m benchmarks.fabric_timeline --seeds 1 --gangs 40   # a smoke test

The cluster: 4 blocks x 2 NVLink domains (``nvidia.com/gpu.clique``) x 18 trays of 4 GPUs (144 nodes, GB200
NVL36x2-like), with Kueue's Topology (block, clique, host). Gangs (seeded): 2 to 36 one-tray pods, Poisson
arrivals asking for 95% of the trays on average, exponential run times (mean 1). Two policies on the same
gangs, each through the real engine (``Scheduler.run``, one Session, pods leaving with ``evict``):
- ``fabric``: a gang of up to 18 pods requires one NVLink domain; a bigger one one block, in slices of 18 per
  domain (Kueue's podset annotations);
- ``none``: the same gangs without a topology request.
Reported: p50/p95 wait of the big gangs (>= 8 pods, in mean run times), NVLink domains used over the fewest
possible (pods / 18 rounded up), and stranded trays: free trays in domains that hold fewer free trays than the
smallest waiting gang needs, as a share of free trays, time-weighted over the busy period. Reported, never
asserted. The measures are the product's (accelsched/sim/fabric.py, what ``simulate --fabric`` reports on the
openb trace); this benchmark keeps the synthetic gangs and the whole engine.
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
from typing import Any

import numpy as np

from accelsched.api.loader import Document, Inputs, build_inputs
from accelsched.engine import Session
from accelsched.framework import gang
from accelsched.sim import fabric as sim_fabric
from accelsched.sim.fabric import BLOCK, CLIQUE
from benchmarks.fabric import indexed_job

GPU = "nvidia.com/gpu"
HOST = "kubernetes.io/hostname"
BLOCKS, DOMAINS, TRAYS = 4, 2, 18
SIZES = (2, 4, 8, 9, 18, 36)
LOAD = 0.95  # of the trays asked for, on average


def cluster_docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [sim_fabric.topology_doc("nvl")]
    for b in range(BLOCKS):
        for d in range(DOMAINS):
            for t in range(TRAYS):
                name = f"b{b}-nvl{d}-t{t:02}"
                labels = {BLOCK: f"b{b}", CLIQUE: f"uuid.b{b}-nvl{d}", HOST: name}
                docs.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": name, "labels": labels},
                        "status": {"allocatable": {"cpu": "144", "memory": "900Gi", "pods": "110", GPU: "4"}},
                    }
                )
    return docs


def gang_doc(name: str, pods: int, fabric: bool) -> dict[str, Any]:
    annotations = {}
    if fabric and pods <= TRAYS:
        annotations = {"kueue.x-k8s.io/podset-required-topology": CLIQUE}
    elif fabric:
        annotations = {
            "kueue.x-k8s.io/podset-required-topology": BLOCK,
            "kueue.x-k8s.io/podset-slice-required-topology": CLIQUE,
            "kueue.x-k8s.io/podset-slice-size": str(TRAYS),
        }
    return indexed_job(name, pods, 4, annotations)


def workload(seed: int, count: int) -> list[tuple[float, str, int, float]]:
    """(arrival, name, pods, run time): run times average 1; arrivals ask for LOAD of the trays."""
    rng = random.Random(seed)
    mean_pods = statistics.mean(SIZES)
    rate = LOAD * BLOCKS * DOMAINS * TRAYS / mean_pods  # gangs per unit time
    t = 0.0
    out = []
    for i in range(count):
        t += rng.expovariate(rate)
        out.append((t, f"g{i:03}", rng.choice(SIZES), rng.expovariate(1.0)))
    return out


def run(seed: int, count: int, fabric: bool) -> dict[str, Any]:
    inputs = build_inputs([Document(d, "cluster.yaml", d["kind"]) for d in cluster_docs()], base=Inputs())
    session = Session.start(inputs)
    sched, cluster = session.scheduler, session.cluster
    clique = cluster.labels(CLIQUE)
    gangs = workload(seed, count)
    arrivals = {name: (t, pods, dur) for t, name, pods, dur in gangs}
    events: list[tuple[float, int, str]] = [(t, 1, name) for t, name, _, _ in gangs]  # 0: leave, 1: arrive
    heapq.heapify(events)
    running: dict[str, list] = {}
    waiting: dict[str, int] = {}
    waits: list[float] = []
    extra: list[int] = []
    stranded = free_time = 0.0
    last = 0.0
    while events:
        now = events[0][0]
        if waiting:  # stranded trays since the last instant: free, in domains too broken for any waiting gang
            free_nodes = (cluster.free[cluster.column(GPU)] >= 4).astype(np.int64)
            free = np.bincount(clique.codes, weights=free_nodes, minlength=len(clique.values))
            needs = [np.full(len(clique.values), min(p, TRAYS)) for p in waiting.values()]
            lost, usable = sim_fabric.stranded_free_nodes(free_nodes, clique.codes, [free] * len(needs), needs)
            stranded += (now - last) * lost
            free_time += (now - last) * usable
        last = now
        new = []
        left = False
        while events and events[0][0] == now:
            _, kind, name = heapq.heappop(events)
            if kind == 0:
                for pod in running.pop(name):
                    sched.evict(pod)
                left = True
            else:
                doc = gang_doc(name, arrivals[name][1], fabric)
                pods = build_inputs([Document(doc, "gangs.yaml", "Job")]).pods
                sched.groups.update(gang.implicit_groups(pods, {}))
                waiting[name] = len(pods)
                new += pods
        if left:
            sched.queue.requeue_unschedulable()
        placed: dict[str, list] = {}
        for result in sched.run(new):
            if result.scheduled:
                placed.setdefault(result.pod.labels["scheduling.x-k8s.io/pod-group"], []).append(result.pod)
        for name, pods in placed.items():
            arrived, size, duration = arrivals[name]
            running[name] = pods
            del waiting[name]
            heapq.heappush(events, (now + duration, 0, name))
            if size >= 8:
                waits.append(now - arrived)
            used = len({clique.codes[cluster.pod_node[p.key]] for p in pods})
            extra.append(used - sim_fabric.fewest_domains(np.full(len(clique.values), TRAYS), size))
    return {"waits": waits, "extra": extra, "stranded": stranded / free_time if free_time else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fabric_timeline", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--gangs", type=int, default=300)
    args = parser.parse_args(argv)
    for policy, fabric in (("fabric", True), ("none", False)):
        runs = [run(seed, args.gangs, fabric) for seed in range(args.seeds)]
        waits = [w for r in runs for w in r["waits"]]
        extra = [e for r in runs for e in r["extra"]]
        p50, p95 = sim_fabric.nearest_rank(waits, 0.5), sim_fabric.nearest_rank(waits, 0.95)
        # Stranded trays mean something only where gangs ask for a domain.
        stranded = f"{100 * statistics.mean(r['stranded'] for r in runs):.1f}%" if fabric else "-"
        print(
            f"{policy:7} big gangs {len(waits)}: wait p50 {p50:.2f} p95 {p95:.2f}; NVLink domains over the fewest: "
            f"mean {statistics.mean(extra):.2f} max {max(extra)}; stranded free trays {stranded}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
