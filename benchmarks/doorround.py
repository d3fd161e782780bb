"""``python -m benchmarks.doorround``: what one round of the Workload door costs with N Workloads waiting.

    python -m benchmarks.doorround                    # N = 1,000, 5,000 and 15,000
    python -m benchmarks.doorround --waiting 5000 --profile 25   # cProfile of the timed rounds, top 25

Kueue's performance harness (benchmarks/kueueperf.py, its baseline config) keeps thousands of Workloads waiting
while hundreds arrive and finish each second: a round of ``accelsched run``'s Workload door
(live/workloaddeltas.py) must cost what the round changed, not what waits. Without an API server: a live
scheduler (live/scheduler.LiveScheduler) whose informer stores are filled as the API server would have them
(the harness's objects: 30 ClusterQueues of 20 cpu nominal, borrowing limit 100, reclaimWithinCohort Any,
withinClusterQueue LowerPriority, 6 to a cohort, 5 cohorts; small, medium and large Workloads of 1, 5 and 20 cpu
at priorities 50, 100 and 200), one rebuild over them, its status writes applied to the store as their events
would bring them. Then each timed round is the door's own: one admitted Workload finishes and one new arrives
(their events through ``_on_workload``), and ``sync_session`` takes them in place (workloaddeltas.apply, the
cycles, round_outcomes, the Workload status writes and the ClusterQueue patches); its writes are applied
before the next round, untimed (and an eviction finished as the harness's runner finishes it).

Printed per N: the median and p90 round time (CPU time of the round's thread: the machine is shared, and wall
time moved with its load), the workloads the round's cycles looked at (OpenAdmission.touched: the heads tried
and the victims, which depend on the queues' state, e.g. how many of a cohort's queues retry after a finish,
not on how many wait), the time per workload looked at, and the writes per round.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import pstats
import statistics
import sys
import time
from typing import Any

from kubernetes import client as k8s

from accelsched.live.kube import Kube
from accelsched.live.scheduler import LiveScheduler

API = "kueue.x-k8s.io/v1beta2"
SCHEDULER = "accelsched"
FLAVOR = "rf"  # the runner's ResourceFlavor (its generator's defaultResourceFlavorName)
COHORTS, QUEUES_PER_COHORT = 5, 6
NOMINAL, BORROWING_LIMIT = 20, 100
CLASSES = (("small", 1, 50), ("medium", 5, 100), ("large", 20, 200))  # name, cpu, priority
MIX = (("small", 7), ("medium", 2), ("large", 1))  # the harness's 350 : 100 : 50 per ClusterQueue


def cluster_queue(name: str, cohort: str) -> dict[str, Any]:
    quota = {"name": "cpu", "nominalQuota": str(NOMINAL), "borrowingLimit": str(BORROWING_LIMIT)}
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "uid": f"u-{name}", "generation": 1, "resourceVersion": "1"},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": FLAVOR, "resources": [quota]}]}],
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        },
    }


def workload(name: str, namespace: str, cls: str, seq: int) -> dict[str, Any]:
    """A Workload as Kueue's harness creates it (utiltesting MakeWorkload ... Request(cpu)), as the API server
    serves it: a creation time (one per second of ``seq``) and a resourceVersion."""
    cpu, priority = next((c, p) for n, c, p in CLASSES if n == cls)
    container = {"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}
    template = {"spec": {"schedulerName": SCHEDULER, "restartPolicy": "Never", "containers": [container]}}
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_700_000_000 + seq))
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"u-{namespace}-{name}",
            "generation": 1,
            "resourceVersion": str(seq + 10),
            "creationTimestamp": created,
            "labels": {"kueue.x-k8s.io/performance-scheduler-class": cls},
        },
        "spec": {
            "queueName": namespace,
            "priority": priority,
            "podSets": [{"name": "main", "count": 1, "template": template}],
        },
    }


def apply_queue_write(live: LiveScheduler, key: str, args: tuple[Any, ...]) -> bool:
    """A ClusterQueue's or LocalQueue's status write (recorded under ``key`` by _submit_latest) as the API server
    applies it: the status replaced. False for a write of another kind."""
    if not key.startswith(("clusterqueue:", "localqueue:")):
        return False
    kind, name, patch = args
    queues = live.kueue[kind].store
    queues[name] = {**queues[name], "status": patch["status"]}
    return True


class Door:
    """A live scheduler's Workload door over the harness's objects, its writes recorded and applied by hand."""

    def __init__(self, workloads: int, cohorts: int = COHORTS, per_cohort: int = QUEUES_PER_COHORT) -> None:
        self.live = LiveScheduler(Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))))
        self.live.tend_heap = True  # as `accelsched run` has it (live/app.py): the heap frozen after a rebuild
        self.sent: list[tuple[str, Any]] = []
        self.live._submit_latest = self._record  # type: ignore[method-assign]
        self.version = 10**7
        self.queues = [f"cq-0-{q}-cohort-{c}" for c in range(cohorts) for q in range(per_cohort)]
        kueue = self.live.kueue
        flavor = {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}
        kueue["ResourceFlavor"].store[FLAVOR] = flavor
        for i, name in enumerate(self.queues):
            kueue["ClusterQueue"].store[name] = cluster_queue(name, f"cohort-{i // per_cohort}")
            self.live.namespaces.store[name] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            local = {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": name}}
            kueue["LocalQueue"].store[f"{name}/{name}"] = {**local, "spec": {"clusterQueue": name}}
        self.seq = self.rounds = 0
        for _ in range(workloads):
            doc = self.new()
            kueue["Workload"].store[_key(doc)] = doc
        self.live.dirty = True
        self.live.sync_session()  # the rebuild, untimed
        self.apply_writes()

    def new(self, cls: str | None = None, namespace: str | None = None) -> dict[str, Any]:
        """The next Workload: by default the harness's mix, the ClusterQueues in turn."""
        i = self.seq
        self.seq += 1
        namespace = namespace or self.queues[i % len(self.queues)]
        turn = (i // len(self.queues)) % sum(n for _, n in MIX)
        for name, n in MIX:
            if turn < n:
                cls = cls or name
                break
            turn -= n
        return workload(f"{cls}-{i}", namespace, cls or MIX[0][0], i)

    def _record(self, key: str, fn: Any, *args: Any, **_lane: Any) -> None:
        self.sent.append((key, args))

    def apply_writes(self) -> int:
        """The round's writes as the API server applies them (a merge patch of the status, a new resourceVersion),
        their events fed to the door as the informer would (our own writes coming back); an eviction is then
        finished as Kueue's harness runner finishes it (its reservation unset, "Evicted by the test runner")."""
        sent, self.sent = self.sent, []
        live, store = self.live, self.live.kueue["Workload"].store
        written = []
        for key, args in sent:
            if apply_queue_write(live, key, args):
                continue
            write = args[0]  # a Pending condition carries its spare-token deadline after it
            old = store.get(f"{write.namespace}/{write.name}")
            if old is not None and old["metadata"]["resourceVersion"] == write.patch["metadata"]["resourceVersion"]:
                self.event("MODIFIED", self._changed(old, write.patch["status"]), old)
                written.append(f"{write.namespace}/{write.name}")
        for key in written:  # an eviction among them: the runner finishes it
            old = store[key]
            conditions = (old.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Evicted" and c["status"] == "True" for c in conditions) and _reserved(old):
                status = {k: v for k, v in old["status"].items() if k != "admission"}
                status["conditions"] = [c for c in conditions if c["type"] not in ("QuotaReserved", "Admitted")] + [
                    {"type": "QuotaReserved", "status": "False", "reason": "Pending"},
                    {"type": "Admitted", "status": "False", "reason": "NoReservation"},
                ]
                status["conditions"][-2]["message"] = "Evicted by the test runner"
                status["conditions"][-1]["message"] = "The workload has no reservation"
                self.event("MODIFIED", self._changed({**old, "status": {}}, status), old)
        return len(sent)

    def _changed(self, old: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        new = copy.deepcopy(old)
        self.version += 1
        new["metadata"]["resourceVersion"] = str(self.version)
        new["status"] = {**(new.get("status") or {}), **copy.deepcopy(status)}
        return new

    def event(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A Workload event as the informer delivers it: the handler, then the store."""
        store = self.live.kueue["Workload"].store
        with self.live.lock:
            self.live._on_workload(kind, new, old)
            if kind == "DELETED":
                store.pop(_key(new), None)
            else:
                store[_key(new)] = new

    def finish(self, key: str) -> None:
        """Kueue's harness runner finishes an admitted Workload (Finished=True), then it is deleted."""
        old = self.live.kueue["Workload"].store[key]
        finished = {"type": "Finished", "status": "True", "reason": "ByTest", "message": "By test runner"}
        done = self._changed(old, {"conditions": [*old["status"].get("conditions", []), finished]})
        self.event("MODIFIED", done, old)
        self.event("DELETED", done, None)

    def admitted(self) -> list[str]:
        return [k for k, d in self.live.kueue["Workload"].store.items() if _reserved(d)]

    def waiting(self) -> int:
        return sum(1 for d in self.live.kueue["Workload"].store.values() if not _reserved(d))

    def round(self) -> tuple[float, int, int]:
        """One admitted Workload finishes and one arrives; the door's round over them, timed: (CPU seconds of the
        round, the workloads its cycles looked at, its writes)."""
        store = self.live.kueue["Workload"].store
        key = next(k for k, d in store.items() if _reserved(d))
        self.finish(key)
        # the newcomer's class in the harness's mix by round, not by how many came before: the same rounds for any N
        turn = self.rounds % sum(n for _, n in MIX)
        self.rounds += 1
        cls = next(name for i, (name, _) in enumerate(MIX) if turn < sum(n for _, n in MIX[: i + 1]))
        self.event("ADDED", self.new(cls, key.split("/")[0]), None)
        started = time.thread_time()
        rebuilt = self.live.sync_session()
        took = time.thread_time() - started
        if rebuilt:
            raise RuntimeError(f"the round rebuilt the session ({self.live.rebuild_reason}): not a round in place")
        looked_at = len(self.live._open.touched) if self.live._open is not None else 0
        return took, looked_at, self.apply_writes()


def measure(waiting: int, rounds: int, profile: int = 0) -> dict[str, Any]:
    door = Door(waiting)
    for _ in range(5):  # warm: the first rounds after the rebuild write what the rebuild left in flight
        door.round()
    profiler = cProfile.Profile() if profile else None
    times, looked, writes = [], [], []
    for _ in range(rounds):
        if profiler is not None:
            profiler.enable()
        took, looked_at, sent = door.round()
        if profiler is not None:
            profiler.disable()
        times.append(took)
        looked.append(looked_at)
        writes.append(sent)
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(profile)
    per_look = sum(times) / max(1, sum(looked))
    times.sort()
    return {
        "workloads": waiting,
        "waiting": door.waiting(),
        "median_ms": statistics.median(times) * 1000,
        "p90_ms": times[int(0.9 * (len(times) - 1))] * 1000,
        "looked_at": statistics.mean(looked),
        "ms_per_look": per_look * 1000,
        "writes": statistics.mean(writes),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.doorround", description=__doc__.split("\n")[0])
    parser.add_argument("--waiting", type=int, action="append", help="Workloads in the store (repeatable)")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N of the timed rounds")
    args = parser.parse_args(argv)
    header = ("workloads", "waiting", "median ms", "p90 ms", "looked at", "ms per look", "writes")
    print("{:>10} {:>8} {:>10} {:>8} {:>10} {:>12} {:>7}".format(*header))
    for n in args.waiting or (1_000, 5_000, 15_000):
        r = measure(n, args.rounds, args.profile)
        row = (r["workloads"], r["waiting"], r["median_ms"], r["p90_ms"], r["looked_at"], r["ms_per_look"], r["writes"])
        print("{:>10} {:>8} {:>10.2f} {:>8.2f} {:>10.1f} {:>12.3f} {:>7.1f}".format(*row))
        sys.stdout.flush()
    return 0


def _key(doc: dict[str, Any]) -> str:
    return f"{doc['metadata']['namespace']}/{doc['metadata']['name']}"


def _reserved(doc: dict[str, Any]) -> bool:
    conditions = (doc.get("status") or {}).get("conditions") or []
    return any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in conditions)


if __name__ == "__main__":
    sys.exit(main())
