"""``python -m benchmarks.fabric``: big gangs on a blocks x racks x hosts fabric, placement quality.

    python -m benchmarks.fabric                         # this checkout
    python -m benchmarks.fabric --against /work/main    # the same cases on another checkout's accelsched too

Each trial: 3 blocks x 4 racks x 4 hosts (48 nodes, 8 GPUs each), a seeded background of bound pods, then a
sequence of gangs (4 to 16 pods of 4 GPUs, Indexed Jobs) each required in one block. Every gang asks with both
``accelsched.io/required-topology`` (all that versions before the fabric read) and Kueue's annotation with a
Topology (block, rack, host), so one file serves both. Reported, per placed gang: racks and hosts used against
a lower bound (pods over what an empty rack or host holds), and rank crossings (consecutive ranks on different
racks or hosts) against the fewest possible for the domains used (domains - 1). Quality is reported, never
asserted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
from typing import Any

from accelsched.api.loader import Document, Inputs, build_inputs
from accelsched.engine import Session

GPU = "nvidia.com/gpu"
BLOCK, RACK, HOST = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"
BLOCKS, RACKS, HOSTS, GPUS, PER_POD = 3, 4, 4, 8, 4
INDEX = "batch.kubernetes.io/job-completion-index"


def indexed_job(
    name: str, pods: int, gpus: int, annotations: dict[str, str] | None = None, priority_class: str = ""
) -> dict[str, Any]:
    """An Indexed Job of ``pods`` workers of ``gpus`` GPUs each, a gang by its pod-group label."""
    res = {GPU: str(gpus)}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": res, "limits": res}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta: dict[str, Any] = {"labels": {"scheduling.x-k8s.io/pod-group": name}}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "template": {"metadata": meta, "spec": spec},
        },
    }


def case(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]},
        }
    ]
    for b in range(BLOCKS):
        for r in range(RACKS):
            for h in range(HOSTS):
                name = f"b{b}-r{r}-h{h}"
                docs.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": name, "labels": {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOST: name}},
                        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(GPUS)}},
                    }
                )
                used = rng.choice([0, 0, 0, 4, 8])
                if used:
                    res = {GPU: str(used)}
                    docs.append(
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "metadata": {"name": f"bg-{name}", "namespace": "default"},
                            "spec": {"nodeName": name, "containers": [{"name": "c", "resources": {"requests": res}}]},
                        }
                    )
    for g in range(6):
        pods = rng.choice([4, 8, 12, 16])
        annotations = {"accelsched.io/required-topology": BLOCK, "kueue.x-k8s.io/podset-required-topology": BLOCK}
        docs.append(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": f"g{g}", "namespace": "default", "annotations": annotations},
                "spec": {"minMember": pods},
            }
        )
        docs.append(indexed_job(f"g{g}", pods, PER_POD))
    return docs


def crossings(nodes: list[str], depth: int) -> int:
    doms = ["-".join(n.split("-")[:depth]) for n in nodes]
    return sum(a != b for a, b in itertools.pairwise(doms))


def trial(seed: int) -> dict[str, Any]:
    docs = case(seed)
    inputs = build_inputs([Document(d, "fabric.yaml", d["kind"]) for d in docs], base=Inputs())
    results = Session.start(inputs).schedule()
    gangs: dict[str, list] = {}
    for r in results:
        if r.pod.name.startswith("g"):
            gangs.setdefault(r.pod.labels["scheduling.x-k8s.io/pod-group"], []).append(r)
    out = {"gangs": len(gangs), "placed": 0, "extra_racks": [], "extra_hosts": [], "rack_x": [], "host_x": []}
    for members in gangs.values():
        if not all(r.node for r in members):
            continue
        out["placed"] += 1
        nodes = [r.node for r in sorted(members, key=lambda r: int(r.pod.labels[INDEX]))]
        racks, hosts = len({n.rsplit("-", 1)[0] for n in nodes}), len(set(nodes))
        out["extra_racks"].append(racks - -(-len(nodes) // (HOSTS * GPUS // PER_POD)))
        out["extra_hosts"].append(hosts - -(-len(nodes) // (GPUS // PER_POD)))
        out["rack_x"].append(crossings(nodes, 2) - (racks - 1))
        out["host_x"].append(crossings(nodes, 3) - (hosts - 1))
    return out


def big(blocks: int = 16, racks: int = 16, hosts: int = 18, pods: int = 64, repeat: int = 5) -> dict[str, Any]:
    """The placement alone (fabric.placement.place) on a large fabric: blocks x racks x hosts NVL72-like nodes,
    each taking 0 to 2 pods, a gang of ``pods`` required in one block with slices of 16 per rack."""
    import time

    import numpy as np

    from accelsched.fabric.placement import Level, build_tree, place

    rng = np.random.default_rng(0)
    n = blocks * racks * hosts
    index = np.arange(n)
    levels = [
        Level("block", (index // (racks * hosts)).astype(np.int32), tuple(str(b) for b in range(blocks))),
        Level("rack", (index // hosts).astype(np.int32), tuple(str(r) for r in range(blocks * racks))),
    ]
    start = time.perf_counter()
    tree = build_tree(levels, [f"n{i}" for i in index])
    built = time.perf_counter() - start
    caps = rng.integers(0, 3, n)  # 0-2 pods per node: about one slice of 16 per rack
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = place(tree, caps, pods, 0, True, 1, 16)
        times.append(time.perf_counter() - start)
    return {"nodes": n, "tree_ms": round(built * 1000, 1), "place_ms": round(min(times) * 1000, 1), "fits": result.fits}


def preemption_case(seed: int) -> tuple[list[dict[str, Any]], list[tuple[str, str, int, int]], int]:
    """2 racks x 3 hosts of 8 GPUs full of low-priority pods (4 or 8 GPUs, started 0-47 hours before the latest),
    and a high-priority gang of 1-3 whole-host pods required in one rack. Returns the documents, the background
    (name, host, GPUs, start hour) and the gang's size."""
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 1},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 9},
    ]
    background = []
    for r in range(2):
        for h in range(3):
            name = f"b0-r{r}-h{h}"
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": {BLOCK: "b0", RACK: f"b0-r{r}", HOST: name}},
                    "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(GPUS)}},
                }
            )
            for k, gpus in enumerate([8] if rng.random() < 0.4 else [4, 4]):
                background.append((f"bg-{name}-{k}", name, gpus, rng.randint(0, 47)))
    latest = max(hour for *_, hour in background)
    for name, host, gpus, hour in background:
        started = f"2026-01-{1 + (latest - hour) // 24:02}T{(latest - hour) % 24:02}:00:00Z"
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "nodeName": host,
                    "priorityClassName": "low",
                    "containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}],
                },
                "status": {"phase": "Running", "startTime": started},
            }
        )
    size = rng.randint(1, 3)
    docs.append(indexed_job("gang", size, GPUS, {"kueue.x-k8s.io/podset-required-topology": RACK}, "high"))
    return docs, background, size


def preemption(trials: int) -> dict[str, Any]:
    """GPU-hours the topology-aware preemption evicts against the exhaustive optimum (every subset of the
    background that leaves one rack with enough empty hosts)."""
    optimal = placed = feasible = 0
    excess = []
    for seed in range(trials):
        docs, background, size = preemption_case(seed)
        inputs = build_inputs([Document(d, "fabric.yaml", d["kind"]) for d in docs], base=Inputs())
        results = Session.start(inputs).schedule()
        evicted = {p.name for r in results for p in r.preempted}
        cost = {name: gpus * hour for name, _, gpus, hour in background}
        best = None
        for k in range(len(background) + 1):
            for subset in itertools.combinations(background, k):
                gone = {name for name, *_ in subset}
                for rack in ("b0-r0", "b0-r1"):
                    empty = sum(
                        all(name in gone for name, host, *_ in background if host == h)
                        for h in (f"{rack}-h{i}" for i in range(3))
                    )
                    if empty >= size:
                        total = sum(cost[n] for n in gone)
                        best = total if best is None else min(best, total)
        gang_placed = all(r.node for r in results if r.pod.name.startswith("gang-"))
        feasible += best is not None
        placed += gang_placed
        if gang_placed and best is not None:
            got = sum(cost[n] for n in evicted)
            optimal += got == best
            excess.append(got - best)
    return {
        "trials": trials,
        "feasible": feasible,
        "placed": placed,
        "optimal": optimal,
        "excess GPU-hours mean/max": f"{statistics.mean(excess):.1f}/{max(excess)}" if excess else "-",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fabric", description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--against", help="also run the same trials with the accelsched of this checkout")
    parser.add_argument("--big", action="store_true", help="time the placement alone on 4,608 nodes instead")
    parser.add_argument("--preemption", action="store_true", help="preemption's GPU-hours against the optimum")
    args = parser.parse_args(argv)
    if args.preemption:
        print(preemption(args.trials))
        return 0
    if args.big:
        print(big())
        return 0
    if args.against:  # this file, run by path so that only the other checkout's accelsched is importable
        env = {**os.environ, "PYTHONPATH": args.against}
        print(f"== {args.against}")
        subprocess.run([sys.executable, __file__, "--trials", str(args.trials)], env=env, check=True)
        print("== this checkout")
    runs = [trial(seed) for seed in range(args.trials)]

    def flat(key: str) -> list[int]:
        return [v for run in runs for v in run[key]]

    figures = {
        "trials": args.trials,
        "gangs": sum(r["gangs"] for r in runs),
        "placed": sum(r["placed"] for r in runs),
        **{
            f"{key} mean/max": f"{statistics.mean(flat(key)):.2f}/{max(flat(key))}" if flat(key) else "-"
            for key in ("extra_racks", "extra_hosts", "rack_x", "host_x")
        },
    }
    for key, value in figures.items():
        print(f"{key:22} {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
