"""``python -m benchmarks.doorrebuild``: what one rebuild of the Workload door's session costs, step by step.

    python -m benchmarks.doorrebuild                  # 30 ClusterQueues / 1,500 Workloads, then 1,000 / 10,000
    python -m benchmarks.doorrebuild --cluster-queues 1000 --cohorts 10 --workloads 10000 --admitted 0.4
    python -m benchmarks.doorrebuild --cluster-queues 1000 --cohorts 10 --workloads 10000 --profile 30

In ``accelsched run`` the Workload door rebuilds its whole session when a change cannot be followed in place
(live/incremental.py ``_rebuild``): the cache's Workloads converted (live/convert.py, each read once per
resourceVersion: live/workloadcache.py), admission over all of them (engine Session.start with the queues open),
then the door's writes worked out from every outcome (live/queuedoor.py ``_admit_queues``). At 20% of Kueue's
performance harness config ``large-scale`` (1,000 ClusterQueues in 10 cohorts, 10,000 Workloads) one took seconds.

Without an API server: a live scheduler (live/scheduler.LiveScheduler) whose informer stores are filled with what
Kueue's runner creates (test/performance/scheduler/runner/generator/generator.go), as the API server serves it:
ResourceFlavor ``rf``; ClusterQueues ``cq-0-{i}-cohort-{c}`` of 20 cpu nominal, borrowing limit 100,
reclaimWithinCohort Any, withinClusterQueue LowerPriority; a Namespace and a LocalQueue per ClusterQueue; small,
medium and large Workloads (1, 5 and 20 cpu at priorities 50, 100 and 200; 70/20/10) with one pod set ``main`` of
count 1, a fraction of them admitted within their ClusterQueue's nominal quota and a few of those Finished. The
real ``_rebuild`` runs over them, each of its steps timed (CPU time of this thread: the machine is shared). The
first rebuild reads every Workload; its status writes are then applied to the store as the API server applies them
(a new resourceVersion each), and the second rebuild reads from the parsed-Workload cache but those.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s

from accelsched.api import reader
from accelsched.live import convert as live_convert
from accelsched.live.kube import Kube
from accelsched.live.scheduler import LiveScheduler
from benchmarks import doorround
from benchmarks.doorround import API, FLAVOR, NOMINAL, cluster_queue, workload

CLASSES = {name: (cpu, priority) for name, cpu, priority in doorround.CLASSES}
MIX = (("small", 7), ("medium", 2), ("large", 1))  # large-scale's 35 : 11 : 4 per ClusterQueue, as near as 10 go
SET = {name: i for i, (name, _) in enumerate(MIX)}  # the workloadsSets' index in large-scale's config
SIZES = ((30, 5, 1_500), (1_000, 10, 10_000))  # ClusterQueues, cohorts, Workloads
STEPS = ("snapshot", "convert", "door state", "start_session", "_admit_queues", "collect", "rebuild")


def admit(doc: dict[str, Any], cluster_queue: str, finished: bool = False) -> None:
    """Kueue's admission of ``doc`` in ``cluster_queue`` (status.admission, QuotaReserved and Admitted), or its end."""
    cpu = doc["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    at = doc["metadata"]["creationTimestamp"]
    assignment = {"name": "main", "flavors": {"cpu": FLAVOR}, "resourceUsage": {"cpu": cpu}, "count": 1}
    conditions = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": at,
         "message": f"Quota reserved in ClusterQueue {cluster_queue}"},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": at,
         "message": "The workload is admitted"},
    ]  # fmt: skip
    if finished:
        conditions.append({"type": "Finished", "status": "True", "reason": "ByTest", "message": "By test runner",
                           "lastTransitionTime": at})  # fmt: skip
    doc["status"] = {"admission": {"clusterQueue": cluster_queue, "podSetAssignments": [assignment]},
                     "conditions": conditions}  # fmt: skip


def harness(cluster_queues: int, cohorts: int, workloads: int, admitted: float) -> dict[str, list[dict[str, Any]]]:
    """The runner's objects: per ClusterQueue a Namespace and LocalQueue of its name, its Workloads in the mix
    (the ClusterQueues in turn), the first ``admitted`` of each that fit its nominal quota admitted, one in a
    hundred of those Finished."""
    per_cohort = max(1, cluster_queues // cohorts)
    cohort_of = {f"cq-0-{i % per_cohort}-cohort-{i // per_cohort}": f"cohort-{i // per_cohort}"
                 for i in range(cluster_queues)}  # fmt: skip
    queues = list(cohort_of)
    out: dict[str, list[dict[str, Any]]] = {
        "ResourceFlavor": [{"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}],
        "ClusterQueue": [cluster_queue(q, cohort) for q, cohort in cohort_of.items()],
        "Namespace": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": q}} for q in queues],
        "LocalQueue": [{"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": q, "namespace": q},
                        "spec": {"clusterQueue": q}} for q in queues],
        "Workload": [],
    }  # fmt: skip
    used = dict.fromkeys(queues, 0)
    taken = dict.fromkeys(queues, 0)
    per_queue = workloads / max(1, cluster_queues)
    mix = [name for name, n in MIX for _ in range(n)]
    for seq in range(workloads):
        queue = queues[seq % len(queues)]
        turn = seq // len(queues)
        cls = mix[turn % len(mix)]
        doc = workload(f"{cls}-{SET[cls]}-{turn}-0", queue, cls, seq)  # the runner's class-set-index-0
        cpu = CLASSES[cls][0]
        if taken[queue] < admitted * per_queue and used[queue] + cpu <= NOMINAL:
            used[queue] += cpu
            taken[queue] += 1
            admit(doc, queue, finished=seq % 100 == 7)
        out["Workload"].append(doc)
    return out


class Rebuilds:
    """A live scheduler over the harness's objects whose rebuilds are timed step by step; its writes recorded."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.live = LiveScheduler(Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))))
        self.live.tend_heap = True  # as `accelsched run` has it (live/app.py)
        self.sent: list[tuple[str, Any]] = []
        self.live._submit_latest = self._record  # type: ignore[method-assign]
        self.version = 10**7
        for kind, docs in objects.items():
            store = self.live.namespaces.store if kind == "Namespace" else self.live.kueue[kind].store
            for doc in docs:
                meta = doc["metadata"]
                store[f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]] = doc
        self.times: dict[str, float] = {}

    def _record(self, key: str, fn: Any, *args: Any, **_lane: Any) -> None:
        self.sent.append((key, args))

    def rebuild(self) -> dict[str, float]:
        """One real ``_rebuild`` (with the snapshot sync_session takes for it), CPU seconds per step."""
        self.times = dict.fromkeys(STEPS, 0.0)
        live = self.live
        saved = (live_convert.convert, live_convert.start_session, reader.freeze_heap)
        live_convert.convert = self._timed("convert", saved[0])
        live_convert.start_session = self._timed("start_session", saved[1])
        reader.freeze_heap = self._timed("collect", saved[2])
        live._with_door_state = self._timed("door state", live._with_door_state)  # type: ignore[method-assign]
        live._admit_queues = self._timed("_admit_queues", live._admit_queues)  # type: ignore[method-assign]
        try:
            started = time.thread_time()
            with live.lock:
                snapshot = live._snapshot()
            self.times["snapshot"] = time.thread_time() - started
            started = time.thread_time()
            live._rebuild(snapshot, "benchmark")
            self.times["rebuild"] = time.thread_time() - started + self.times["snapshot"]
        finally:
            live_convert.convert, live_convert.start_session, reader.freeze_heap = saved
            del live._with_door_state, live._admit_queues
        return self.times

    def _timed(self, step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.times[step] += time.thread_time() - started

        return timed

    def apply_writes(self) -> int:
        """The rebuild's Workload status writes as the API server applies them (a merge patch of the status, a new
        resourceVersion); the queues' status writes likewise. The number of writes."""
        sent, self.sent = self.sent, []
        live, store = self.live, self.live.kueue["Workload"].store
        for key, args in sent:
            if doorround.apply_queue_write(live, key, args):
                continue
            write = args[0]  # a Pending condition carries its spare-token deadline after it
            old = store[f"{write.namespace}/{write.name}"]
            self.version += 1
            meta = {**old["metadata"], "resourceVersion": str(self.version)}
            store[f"{write.namespace}/{write.name}"] = {
                **old, "metadata": meta, "status": {**(old.get("status") or {}), **write.patch["status"]}
            }  # fmt: skip
        return len(sent)


def measure(cluster_queues: int, cohorts: int, workloads: int, admitted: float, profile: int = 0) -> list[dict]:
    """Two rebuilds (the parsed-Workload cache cold, then warm), each step's CPU seconds and the writes."""
    door = Rebuilds(harness(cluster_queues, cohorts, workloads, admitted))
    profiler = cProfile.Profile() if profile else None
    rows = []
    for run in ("first", "second"):
        if profiler is not None:
            profiler.enable()
        times = door.rebuild()
        if profiler is not None:
            profiler.disable()
        outcomes = door.live.session.queues.outcomes if door.live.session and door.live.session.queues else []
        rows.append({"run": run, **times, "outcomes": len(outcomes), "admitted": sum(o.admitted for o in outcomes),
                     "writes": door.apply_writes()})  # fmt: skip
    if profiler is not None:
        for order in ("cumulative", "tottime"):
            pstats.Stats(profiler).sort_stats(order).print_stats(profile)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.doorrebuild", description=__doc__.split("\n")[0])
    parser.add_argument("--cluster-queues", type=int)
    parser.add_argument("--cohorts", type=int, default=10)
    parser.add_argument("--workloads", type=int)
    parser.add_argument("--admitted", type=float, default=0.4, help="fraction of each ClusterQueue's admitted")
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N (cumulative, tottime)")
    args = parser.parse_args(argv)
    sizes = SIZES
    if args.cluster_queues or args.workloads:
        cqs = args.cluster_queues or 1_000
        sizes = ((cqs, min(args.cohorts, cqs), args.workloads or 10 * cqs),)
    header = ("CQs", "workloads", "run", *(s[:13] for s in STEPS), "outcomes", "admitted", "writes")
    print(("{:>6} {:>9} {:>6}" + " {:>13}" * len(STEPS) + " {:>8} {:>8} {:>6}").format(*header))
    for cqs, cohorts, n in sizes:
        for r in measure(cqs, cohorts, n, args.admitted, args.profile):
            row = (cqs, n, r["run"], *(r[s] for s in STEPS), r["outcomes"], r["admitted"], r["writes"])
            print(("{:>6} {:>9} {:>6}" + " {:>13.3f}" * len(STEPS) + " {:>8} {:>8} {:>6}").format(*row))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
