"""The real Kueue's answers: scenarios run in batches on the test API server with the real controller.

A batch's scenarios run side by side, each in its own slot (scenario.place): their cohort trees are disjoint, so
Kueue answers each as if alone, and the batch pays the waits once. Per phase:

1. the phase's workloads are created in waves, the i-th of every scenario in the i-th wall-clock second, so that
   their creationTimestamps (whole seconds) order them as the scenario does; their namespace is still closed by the
   gate, so Kueue only finds them inadmissible (the harness waits until each carries Kueue's refusal);
2. the namespaces are opened (labelled), and Kueue admits, preempts and requeues;
3. what Kueue leaves to a Job's controller is done as that controller does it (jobframework's reconciler, step
   "handle eviction"): an evicted Workload's quota reservation is released, Requeued set, so the preemptor can go;
4. once no Workload of the batch has changed for ``QUIET`` seconds, the outcome is read.

The Workloads of each phase as created (uid, creationTimestamp) and as Kueue left them are kept for accelsched.

The harness reads the Workloads, ClusterQueues and LocalQueues from watch caches (accelsched's informers), not by
listing them: each wait looks every 0.2 s, and listing the batch's objects that often cost the API server more than
Kueue's own work. ``run`` is thread-safe: the runner creates the next batch while the last one is deleted (and
judged by accelsched), never while one settles: settling is read from the batch's own quiet, and a Kueue busy
with another batch's cycles can leave a batch untouched for longer than ``QUIET`` while it still owes it a try
(tried with three batches at once on the loaded machine: phase-2 workloads read before Kueue retried them).
"""

from __future__ import annotations

import concurrent.futures
import copy
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from accelsched.live import kube as k
from accelsched.live.informer import Informer, object_key
from accelsched.live.kube import ApiError, Kube, api_client
from conformance.kueue import process
from conformance.kueue.scenario import GATE_LABEL, JSON, Scenario, namespace, place

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "live"))  # the control plane helper lives with the live tests

from controlplane import ControlPlane, apply_crds, find_binaries  # noqa: E402

API = "/apis/kueue.x-k8s.io/v1beta2"
RESOURCES = {
    kind: k.Resource(API, plural, namespaced=kind in ("LocalQueue", "Workload"))
    for kind, plural in (("ResourceFlavor", "resourceflavors"), ("WorkloadPriorityClass", "workloadpriorityclasses"),
                         ("Cohort", "cohorts"), ("ClusterQueue", "clusterqueues"), ("LocalQueue", "localqueues"),
                         ("Workload", "workloads"))
}
CREATE_ORDER = ("ResourceFlavor", "WorkloadPriorityClass", "Cohort", "ClusterQueue", "LocalQueue")
BATCH_LABEL = "oracle.accelsched.io/batch"
# Kueue retries inadmissible workloads through a delaying workqueue (pkg/cache/queue/inadmissible_workloads.go): a
# requeue asked for by an admission, an eviction or the gate comes due a batch period later. The oracle runs Kueue
# with SchedulerLongRequeueInterval (process.py), so the period is 10 s instead of 1 s: on a loaded machine one of
# Kueue's scheduling cycles over a batch's hundreds of heads (a status write each) takes seconds, and a 1 s requeue
# would come due in the middle of the cycles the event itself started, a race a quick Kueue does not have.
REQUEUE_PERIOD = 10.0
# Seconds without a change to any Workload of the batch: no requeue is still due. The longest chain from a change
# to the retry it causes: the ClusterQueue controller's status update (UpdatesBatchPeriod, 1 s after the workload
# event), the cohort controller's requeue (REQUEUE_PERIOD), then a scheduling cycle and its status writes.
QUIET = REQUEUE_PERIOD + 5.0
SETTLE_TIMEOUT = 240.0  # a phase's settling: the gate's requeue, a few retry rounds, the quiet period
CHURN = 30  # a workload changed this often in one phase never settles (a StrictFIFO head's flavor scan wrapping)
REFUSED_WAIT = 180.0  # at most, for Kueue to refuse every workload of a phase before the gate opens
REFUSED_QUIET = 8.0  # or until no workload of the phase changed for this long: Kueue reaches no more of them
CLOSED_WAIT = 0.6  # after the last workload is refused, before opening: the refusals' own events are done
POLL = 0.2  # how often a wait looks at the watch caches
# At most, for Kueue to take in a batch's queues (and for the watches to show what was created): with batches
# created while others settle or are deleted, a loaded machine takes minutes, not seconds.
TAKE_IN_TIMEOUT = 240.0


class OracleError(RuntimeError):
    """The API server refused an object, or Kueue did not settle."""


@dataclass
class PhaseResult:
    inputs: list[JSON]  # the workloads as accelsched reads them at the phase's start (earlier ones with status)
    outcome: list[JSON]  # every workload of the scenario as Kueue left it after the phase


@dataclass
class RealResult:
    objects: list[JSON]  # the queue objects as created (renamed into the slot, namespaces included)
    phases: list[PhaseResult] = field(default_factory=list)
    error: str = ""


class KueueCluster:
    """etcd, kube-apiserver and Kueue; ``run`` answers a batch of scenarios."""

    def __init__(self, workdir: Path, workers: int = 8, fair_sharing: list[str] | None = None,
                 feature_gates: dict[str, bool] | None = None) -> None:
        self.workdir = workdir
        self.fair_sharing = fair_sharing
        self.feature_gates = feature_gates or {}
        self.cp = ControlPlane(workdir / "cp", find_binaries())
        self.kube: Kube | None = None
        self.kueue: process.KueueProcess | None = None
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="kueue-oracle")
        self.run_tag = os.urandom(2).hex()
        self._batches = itertools.count(1)
        self._lock = threading.RLock()  # the informers' stores, read by every batch's thread
        self.informers: dict[str, Informer] = {}

    def start(self) -> KueueCluster:
        self.cp.start()
        api = api_client(str(self.cp.kubeconfig), pool_size=32)
        self.kube = Kube(api)
        apply_crds(api, process.write_crds(self.workdir / "crds", storage_only=True))
        binary = process.kueue_binary()
        assert binary is not None
        self.kueue = process.KueueProcess(binary, self.cp.kubeconfig, self.kube, self.workdir,
                                          self.fair_sharing, log_level="info",
                                          feature_gates=self.feature_gates).start()
        for kind, query in (("Workload", {"label_selector": BATCH_LABEL}), ("ClusterQueue", {}), ("LocalQueue", {})):
            self.informers[kind] = Informer(self.kube, RESOURCES[kind], lambda *_: None, self._lock, **query)
            self.informers[kind].start()
        for informer in self.informers.values():
            if not informer.synced.wait(60.0):
                raise OracleError(f"the {informer.resource.plural} watch did not start in 60s")
        return self

    def stop(self) -> None:
        for informer in self.informers.values():
            informer.stop()
        if self.kueue:
            self.kueue.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.cp.stop()

    def __enter__(self) -> KueueCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------------ a batch

    def run(self, scenarios: list[Scenario], timeout: float = 60.0,
            settled: Callable[[], None] | None = None) -> list[RealResult]:
        """Kueue's answers for ``scenarios``; ``settled`` is called once Kueue has settled on the batch's last
        phase, before its objects are deleted (the runner starts the next batch then)."""
        assert self.kube is not None and self.kueue is not None
        if not self.kueue.alive():
            raise OracleError(f"kueue is not running:\n{self.kueue.log_tail()}")
        batch = f"k{self.run_tag}-{next(self._batches)}"
        slots = [f"{batch}-{i}" for i in range(len(scenarios))]
        placed = [place(s, tag) for s, tag in zip(scenarios, slots, strict=True)]
        results = [RealResult(objects=[]) for _ in scenarios]
        try:
            def create(i: int) -> None:
                try:
                    results[i].objects = self._create_queues(slots[i], *placed[i][:1], len(placed[i][1]))
                except OracleError as exc:
                    results[i].error = str(exc)

            list(self.pool.map(create, range(len(scenarios))))
            self._wait_cached([o for r in results for o in r.objects if o["kind"] in ("ClusterQueue", "LocalQueue")],
                              max(timeout, TAKE_IN_TIMEOUT))
            self._wait_queues_known(slots, max(timeout, TAKE_IN_TIMEOUT))
            live = [i for i, r in enumerate(results) if not r.error]
            phases_n = max((len(placed[i][1]) for i in live), default=0)
            for phase in range(phases_n):
                todo = [i for i in live if phase < len(placed[i][1]) and not results[i].error]
                inputs = {i: self._workloads(slots[i]) for i in todo}
                created = self._create_waves(batch, [(i, placed[i][1][phase]) for i in todo], results)
                todo = [i for i in todo if not results[i].error]
                self._wait_cached(created, max(timeout, TAKE_IN_TIMEOUT))
                self._wait_refused(batch, phase, timeout)
                list(self.pool.map(lambda i: self._open(slots[i], phase), todo))  # noqa: B023
                for slot, why in self._settle(batch, [slots[i] for i in todo], max(timeout, SETTLE_TIMEOUT)).items():
                    results[slots.index(slot)].error = why
                if not self.kueue.alive():
                    raise OracleError(f"kueue exited:\n{self.kueue.log_tail()}")
                for i in todo:
                    if results[i].error:
                        continue
                    created = [w for w in self._workloads(slots[i]) if _phase_of(w, slots[i]) == phase]
                    before = [w for w in inputs[i] if _phase_of(w, slots[i]) < phase]
                    outcome = self._workloads(slots[i])
                    results[i].phases.append(PhaseResult(before + [_fresh(w) for w in created], outcome))
            if settled is not None:
                settled()
        finally:
            self._delete(slots)
        return results

    def _create_queues(self, tag: str, objects: list[JSON], phases: int) -> list[JSON]:
        assert self.kube is not None
        made: list[JSON] = []
        for phase in range(phases):
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace(tag, phase)}}
            self._create(k.NAMESPACES, ns, None)
            made.append(ns)
        for kind in CREATE_ORDER:
            batch = [o for o in objects if o["kind"] == kind]
            for obj in batch:
                made.append(self._create(RESOURCES[kind], obj, obj["metadata"].get("namespace")))
        return made

    def _wait_queues_known(self, slots: list[str], timeout: float) -> None:
        """Until Kueue has taken in every ClusterQueue and LocalQueue of the batch (their controllers write the
        Active condition once the queue manager has them): a workload created before its queues are known is
        queued only when a later event finds it, after workloads created after it."""
        assert self.kube is not None
        deadline = time.monotonic() + timeout
        prefixes = tuple(f"{s}-" for s in slots)
        while time.monotonic() < deadline:
            with self._lock:
                items = [o for kind in ("ClusterQueue", "LocalQueue") for o in self.informers[kind].store.values()
                         if (o["metadata"].get("namespace") or o["metadata"]["name"]).startswith(prefixes)]
            if all(any(c["type"] == "Active" for c in (o.get("status") or {}).get("conditions") or [])
                   for o in items):
                return
            time.sleep(POLL)
        raise OracleError(f"Kueue did not take in the batch's queues in {timeout:.0f}s")

    def _create(self, resource: k.Resource, obj: JSON, ns: str | None) -> JSON:
        assert self.kube is not None
        try:
            return self.kube.create(resource, obj, ns)
        except ApiError as exc:
            name = obj["metadata"]["name"]
            raise OracleError(f"the API server refused {obj['kind']} {name}: {exc.message}") from None

    def _create_waves(self, batch: str, items: list[tuple[int, list[JSON]]],
                      results: list[RealResult]) -> list[JSON]:
        """The i-th workload of every scenario in a later second than its (i-1)-th (creationTimestamp has whole
        seconds): each wave starts on the second after the previous one ended. Returns the workloads created."""
        waves = max((len(w) for _, w in items), default=0)
        created: list[JSON] = []
        for wave in range(waves):
            _next_second()  # after the previous wave ended: every workload of this wave is created in a later second

            def create(item: tuple[int, list[JSON]], wave: int = wave) -> None:
                i, workloads = item
                if wave < len(workloads) and not results[i].error:
                    wl = workloads[wave]
                    wl["metadata"].setdefault("labels", {})[BATCH_LABEL] = batch
                    try:
                        made = self._create(RESOURCES["Workload"], wl, wl["metadata"]["namespace"])
                        created.append(self._write_gates(made, wl))
                    except OracleError as exc:
                        results[i].error = str(exc)

            list(self.pool.map(create, items))
        return created

    def _write_gates(self, made: JSON, wl: JSON) -> JSON:
        """status.preemptionGates as the scenario gives them (the API server drops a status sent with the object):
        written once the workload exists, as the controller owning a gate opens it. Its namespace is still closed,
        so Kueue has admitted nothing yet."""
        gates = (wl.get("status") or {}).get("preemptionGates")
        if not gates:
            return made
        assert self.kube is not None
        meta = made["metadata"]
        try:  # a merge patch: Kueue may have written the gate's refusal meanwhile (no resourceVersion to conflict)
            return self.kube.patch(RESOURCES["Workload"], meta["name"], {"status": {"preemptionGates": gates}},
                                   meta["namespace"], "status", content_type="application/merge-patch+json")
        except ApiError as exc:
            raise OracleError(f"the API server refused the status of Workload {made['metadata']['name']}: "
                              f"{exc.message}") from None

    def _wait_cached(self, objects: list[JSON], timeout: float) -> None:
        """Until the watch caches hold every one of ``objects`` as created or newer: what a wait reads next is
        complete (the created versions are the API server's; a watch event follows each within milliseconds)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                missing = [o for o in objects if object_key(o) not in self.informers[o["kind"]].store]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise OracleError(f"{len(missing)} objects created were not seen by the watch in {timeout:.0f}s, "
                                  f"e.g. {object_key(missing[0])}")
            time.sleep(0.05)

    def _batch_workloads(self, batch: str) -> list[JSON]:
        with self._lock:
            return [w for w in self.informers["Workload"].store.values()
                    if w["metadata"].get("labels", {}).get(BATCH_LABEL) == batch]

    def _wait_refused(self, batch: str, phase: int, timeout: float) -> None:
        """Until Kueue has tried, and refused, every workload of the phase (each carries a QuotaReserved condition:
        the gate's message, or the workload controller's for a missing or stopped queue), then ``CLOSED_WAIT``.
        Under load Kueue can take longer than a fixed wait to take in the last wave: a workload it first meets
        after the gate opened is tried alone, ahead of the requeue that brings back the others. A workload queued
        behind a StrictFIFO head that never fits is never tried: the wait also ends once the phase's workloads are
        quiet."""
        assert self.kube is not None
        deadline = time.monotonic() + min(timeout, REFUSED_WAIT)
        changes = _Changes()
        phase_ns = f"-p{phase}"  # earlier phases' workloads may never go quiet (a churning StrictFIFO head)
        while True:
            items = self._batch_workloads(batch)
            now = changes.see(items)
            unseen = [_key(w) for w in items
                      if w["metadata"]["namespace"].endswith(phase_ns) and not _condition(w, "QuotaReserved")]
            if not unseen or not {k_ for k_ in changes.busy(now, REFUSED_QUIET) if k_.split("/")[0].endswith(phase_ns)}:
                break
            if now > deadline:
                print(f"kueue oracle: {len(unseen)} workloads of {batch} not refused after {REFUSED_WAIT:.0f}s, "
                      f"e.g. {unseen[:3]}", file=sys.stderr)
                break
            time.sleep(POLL)
        time.sleep(CLOSED_WAIT)

    def _open(self, tag: str, phase: int) -> None:
        assert self.kube is not None
        self.kube.patch(k.NAMESPACES, namespace(tag, phase), {"metadata": {"labels": {GATE_LABEL: tag}}},
                        content_type="application/merge-patch+json")

    def _settle(self, batch: str, slots: list[str], timeout: float) -> dict[str, str]:
        """Wait until no Workload of the batch changes for ``QUIET`` seconds; the slots still changing at
        ``timeout``, or churning, are returned, each with the workloads that kept changing (they are not judged)."""
        assert self.kube is not None
        deadline = time.monotonic() + timeout
        changes = _Changes()
        while True:
            items = self._batch_workloads(batch)
            for wl in items:
                if _evicted_with_reservation(wl):
                    self._finish_eviction(wl)
                    changes.touch(_key(wl))
            now = changes.see(items)
            churning = {s: why for s, why in changes.churning.items() if s in slots}
            busy = changes.busy(now, QUIET)
            if not busy:
                return churning
            if now > deadline:
                return {s: f"Kueue did not settle in {timeout:.0f}s: {sorted(k_ for k_ in busy if k_.startswith(s))} "
                        "kept changing" for s in slots if any(k_.startswith(f"{s}-p") for k_ in busy)} | churning
            time.sleep(POLL)

    def _finish_eviction(self, wl: JSON) -> None:
        """jobframework's reconciler, "handle eviction", once the job is stopped: Requeued (True when preempted),
        the quota reservation released with the eviction's message, Admitted synced (the default feature gates)."""
        assert self.kube is not None
        wl = copy.deepcopy(wl)  # the watch cache's object stays as the API server sent it
        conditions = wl["status"]["conditions"]
        evicted = _condition(wl, "Evicted") or {}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        _set(conditions, "Requeued", "True" if evicted["reason"] == "Preempted" else "False", evicted["reason"],
             evicted["message"], now, wl)
        _set(conditions, "QuotaReserved", "False", "Pending", evicted["message"], now, wl)
        _set(conditions, "Admitted", "False", "NoReservation", "The workload has no reservation", now, wl)
        wl["status"].pop("admission", None)
        path = RESOURCES["Workload"].path(wl["metadata"]["namespace"], wl["metadata"]["name"], "status")
        try:
            self.kube.request("PUT", path, body=wl)
        except ApiError as exc:
            if exc.status != 409:  # a conflict: Kueue wrote it meanwhile; the next look tries again
                raise

    def _workloads(self, tag: str) -> list[JSON]:
        spaces = {namespace(tag, 0), namespace(tag, 1)}
        with self._lock:
            out = [w for w in self.informers["Workload"].store.values() if w["metadata"]["namespace"] in spaces]
        return sorted(out, key=lambda w: (w["metadata"]["creationTimestamp"], w["metadata"]["namespace"],
                                          int(w["metadata"]["name"][1:])))

    def _delete(self, slots: list[str]) -> None:
        """Everything of the batch, finalizers first (Kueue keeps them while an object is in use)."""
        assert self.kube is not None
        kube = self.kube

        def drop(resource: k.Resource, obj: JSON) -> None:
            ns, name = obj["metadata"].get("namespace"), obj["metadata"]["name"]
            try:
                if obj["metadata"].get("finalizers"):
                    kube.patch(resource, name, {"metadata": {"finalizers": None}}, ns,
                               content_type="application/merge-patch+json")
                kube.delete(resource, name, ns)
            except ApiError as exc:
                if exc.status != 404:
                    raise

        prefixes = tuple(f"{s}-" for s in slots)
        for kind in ("Workload", "LocalQueue", "ClusterQueue", "Cohort", "ResourceFlavor", "WorkloadPriorityClass"):
            resource = RESOURCES[kind]
            items = [o for o in kube.list(resource, None)["items"]
                     if (o["metadata"].get("namespace") or o["metadata"]["name"]).startswith(prefixes)]
            list(self.pool.map(lambda o, r=resource: drop(r, o), items))
        namespaces = [{"metadata": {"name": namespace(s, p)}} for s in slots for p in (0, 1)]
        list(self.pool.map(lambda o: drop(k.NAMESPACES, o), namespaces))


class _Changes:
    """When each Workload last changed (its resourceVersion, or a write of the harness), and the slots given up on:
    a workload of theirs changed more than ``CHURN`` times (it never settles)."""

    def __init__(self) -> None:
        self.version: dict[str, str] = {}
        self.at: dict[str, float] = {}
        self.count: dict[str, int] = {}
        self.churning: dict[str, str] = {}

    def touch(self, key: str) -> None:
        self.at[key] = time.monotonic()

    def see(self, items: list[JSON]) -> float:
        now = time.monotonic()
        for wl in items:
            key = _key(wl)
            if self.version.get(key) != wl["metadata"]["resourceVersion"]:
                self.version[key], self.at[key] = wl["metadata"]["resourceVersion"], now
                self.count[key] = self.count.get(key, 0) + 1
                if self.count[key] > CHURN:
                    self.churning.setdefault(_slot(key), f"Kueue did not settle: {key} changed {CHURN} times")
        return now

    def busy(self, now: float, quiet: float) -> set[str]:
        """The workloads (of slots not given up on) that changed less than ``quiet`` seconds ago."""
        return {key for key, at in self.at.items() if now - at < quiet and _slot(key) not in self.churning}


def _key(wl: JSON) -> str:
    return f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"


def _slot(key: str) -> str:
    return key.split("/", 1)[0].rsplit("-p", 1)[0]


def _next_second() -> None:
    time.sleep(1.0 - (time.time() % 1.0) + 0.02)


def _phase_of(wl: JSON, tag: str) -> int:
    return int(wl["metadata"]["namespace"].removeprefix(f"{tag}-p"))


def _condition(wl: JSON, kind: str) -> JSON | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def _evicted_with_reservation(wl: JSON) -> bool:
    evicted, reserved = _condition(wl, "Evicted"), _condition(wl, "QuotaReserved")
    return bool(evicted and evicted["status"] == "True" and reserved and reserved["status"] == "True")


def _set(conditions: list[JSON], kind: str, status: str, reason: str, message: str, now: str, wl: JSON) -> None:
    """apimeta.SetStatusCondition: the transition time moves only when the status does."""
    new = {"type": kind, "status": status, "reason": reason, "message": message,
           "observedGeneration": wl["metadata"].get("generation", 1), "lastTransitionTime": now}
    for i, c in enumerate(conditions):
        if c["type"] == kind:
            if c["status"] == status:
                new["lastTransitionTime"] = c["lastTransitionTime"]
            conditions[i] = new
            return
    conditions.append(new)


def _fresh(wl: JSON) -> JSON:
    """A workload as its creator wrote it, with what the API server gave it (uid, creationTimestamp), and its
    preemption gates' positions (the harness wrote them before the gate opened)."""
    meta = wl["metadata"]
    keep = {k_: meta[k_] for k_ in ("name", "namespace", "uid", "creationTimestamp", "labels") if k_ in meta}
    out = {"apiVersion": wl["apiVersion"], "kind": "Workload", "metadata": keep, "spec": wl["spec"]}
    gates = (wl.get("status") or {}).get("preemptionGates")
    if gates:
        out["status"] = {"preemptionGates": gates}
    return out
