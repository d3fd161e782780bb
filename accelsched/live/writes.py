"""The live scheduler's write pipeline: decisions bound (a gang as one unit), victims evicted, failures reported."""

from __future__ import annotations

import logging
import queue
import time
from dataclasses import dataclass, field
from typing import Any

from accelsched.api.objects import Pod
from accelsched.framework import gang
from accelsched.framework.scheduler import ScheduleResult
from accelsched.live import dra as live_dra
from accelsched.live import kube as k
from accelsched.live import metrics as queue_metrics
from accelsched.live import podgroups
from accelsched.live import volumes as live_volumes
from accelsched.live.backoff import Backoff
from accelsched.live.events import (
    FAILED_SCHEDULING,
    PREEMPTED,
    SCHEDULED,
    disruption_patch,
    preempted_message,
    scheduled_message,
)
from accelsched.live.kube import JSON, ApiError
from accelsched.live.podjson import (
    nominated,
    write_key,
)

log = logging.getLogger("accelsched.live")


@dataclass
class Decision:
    pod: Pod
    node: str
    started: float  # when its scheduling attempt began (for the attempt duration)
    annotations: dict[str, str] = field(default_factory=dict)
    volumes: tuple[Any, float] | None = None  # VolumeBinding's plan and bind timeout, for PreBind (live.volumes)
    claims: tuple[live_dra.ClaimWrite, ...] = ()  # DynamicResources' PreBind writes (live.dra)


@dataclass
class BindOutcome:
    decision: Decision
    error: ApiError | None = None
    reason: str = ""  # why it was not bound: "gone", "conflict", "node-gone", "error"


class WritePipeline:
    """LiveScheduler's API writes, done by the pool in order per pod or gang (live.writer): Bindings with their
    PreBind writes, preemption's evictions and nominations, FailedScheduling events and conditions; finished
    bindings come back through ``_outcomes`` and are applied by the loop (``_drain_outcomes``)."""

    def _dispatch(self, results: list[ScheduleResult]) -> None:
        """Bindings (a gang as one unit) to the pool; Pending pods get their event and condition."""
        ended = time.monotonic()
        self.metrics.queue.attempted(r.pod.uid for r in results if r.gated is None)  # before _preemption requeues
        bind, victims = self._preemption(results)
        units: dict[str, list[Decision]] = {}
        for d in bind:
            units.setdefault(gang.group_key(d.pod) or d.pod.key, []).append(d)
        with self.lock:
            for d in bind:
                self.assumed[d.pod.key] = d
                self.in_flight.add(d.pod.uid)
                self.assumed_claims.assume(d.pod, d.claims)
        for unit in units.values():
            # A pod given devices is also ordered by its node: the kubelet hands a node's devices out in the order
            # the Bindings arrive, so they must arrive in the order they were decided (live.writer).
            nodes = tuple(f"node:{d.node}" for d in unit if d.pod.devices)
            self.writes.submit((write_key(unit[0].pod.raw), *nodes), self._bind_unit, unit)
        self._wake_hinted([d.pod for d in bind])
        for key, placed in podgroups.outcomes(results, self.session.scheduler.groups).items():
            namespace, name = gang.key_parts(key)
            self.writes.submit(f"podgroup:{key}", podgroups.set_condition, self.kube, namespace, name, placed)
        for r in results:
            if r.scheduled or r.pod.key in victims:
                continue
            obj = self.pods.store.get(r.pod.key)
            with self.lock:  # a DRA event arrived while it was tried: it may have missed it, so it backs off
                missed = self._claim_events != self._round_claim_events and obj is not None and live_dra.has_claims(obj)
            pool = self.backing_off if missed else self.unschedulable
            if r.gated is not None:
                # Rejected at PreEnqueue (DynamicResources: a claim not created yet): never tried, so nothing is
                # written, as kube-scheduler keeps such a pod in unschedulablePods; an event brings it back.
                with self.lock:
                    if obj is not None and (obj.get("metadata") or {}).get("uid") == r.pod.uid:
                        pool[r.pod.key] = obj
                        self.rejected_by.pop(r.pod.key, None)
                        self.wake.set()
                continue
            if self._wait_for_room(r):  # a queued workload not placeable: held, its quota given back (queuedoor)
                continue
            started = self._attempt_started.get(r.pod.key, ended)
            name = r.pod.scheduler_name
            self.metrics.schedule_attempts.labels("unschedulable", name).inc()
            self.metrics.attempt_duration.labels("unschedulable", name).observe(max(0.0, ended - started))
            plugins = frozenset(r.diagnosis.plugins) if r.diagnosis else frozenset()
            with self.lock:
                self.backoff.failed(r.pod.uid, time.monotonic())
                if obj is not None and (obj.get("metadata") or {}).get("uid") == r.pod.uid:
                    pool[r.pod.key] = obj
                    self.rejected_by[r.pod.key] = (r.pod.uid, plugins, self.signatures.of(r.pod))
                    queue = queue_metrics.BACKOFF if missed else queue_metrics.UNSCHEDULABLE
                    self.metrics.queue.failed(r.pod.uid, queue, r.message, plugins, name)
                    if plugins & set(self.session.scheduler.hints):
                        self.hinted[r.pod.key] = (r.pod, plugins)
            if obj is not None:
                self.writes.report(
                    write_key(obj), self._record_failure, obj, r.message, r.reason, subject=r.pod.key
                )
                if nominated(obj):  # it gave up its nominated node: PostFilter found no room (kube-scheduler's
                    # NominatedNodeName "" in ModeOverride)
                    self.writes.submit(write_key(obj), self._nominate, obj, None)

    def _preemption(self, results: list[ScheduleResult]) -> tuple[list[Decision], set[str]]:
        """Preemption as kube-scheduler does it live: the victims are deleted through the API and the preemptor
        is *not* bound yet; it gets ``status.nominatedNodeName`` and is retried when the victims are gone (their
        deletion is a cluster event). Offline the engine evicts in memory and places the preemptor at once, so
        every decision from the first preemptor's on rested on room that is still taken: those are not bound
        (a gang as a whole) and go back to the queue. Returns the decisions to bind and the victims' keys."""
        preemptors = {r.pod.key: r for r in results if r.preempted}
        if not preemptors:
            return self._decided, set()
        victims = {v.key: (v, r) for r in preemptors.values() for v in r.preempted}  # victim -> its preemptor
        cut = next((i for i, d in enumerate(self._decided) if d.pod.key in preemptors), len(self._decided))
        unit = gang.group_key(self._decided[cut].pod) if cut < len(self._decided) else None
        while unit is not None and cut > 0 and gang.group_key(self._decided[cut - 1].pod) == unit:
            cut -= 1
        keep, later = self._decided[:cut], self._decided[cut:]
        for victim, by in victims.values():
            self.writes.submit(write_key(victim.raw), self._evict, victim, by.pod, str(by.node))
        now = time.monotonic()
        with self.lock:
            # The session evicted in memory what still runs, and placed pods that are not bound: both are put
            # back as the cache shows them, in place, before the next round.
            for victim, _by in victims.values():
                self._pod_changed(victim.key, victim.raw, wake=False)
            for d in later:
                self._pod_changed(d.pod.key, d.pod.raw, wake=False)
            # Allocations of decisions not bound, and victims' claims released in memory (the resourceclaim
            # controller releases them in the API once the victims are gone): both undone by a rebuild.
            if any(d.claims for d in later) or any(live_dra.has_claims(v.raw) for v, _by in victims.values()):
                self._invalidate("decisions or victims with claims undone")
            for d in later:
                obj = self.pods.store.get(d.pod.key)
                if obj is None:
                    continue
                result = preemptors.get(d.pod.key)
                if result is not None:
                    self.backoff.failed(d.pod.uid, now)
                    self.unschedulable[d.pod.key] = obj
                    self.rejected_by.pop(d.pod.key, None)
                    self.metrics.queue.failed(d.pod.uid, queue_metrics.UNSCHEDULABLE, result.message)
                    self.writes.submit(write_key(obj), self._nominate, obj, d.node)
                else:
                    self.new_pending[d.pod.key] = obj
            self.wake.set()
        log.info(
            "preemption: victims deleted, preemptors nominated",
            extra={"victims": sorted(victims), "preemptors": sorted(preemptors), "deferred": len(later)},
        )
        return keep, set(victims)

    def _evict(self, pod: Pod, preemptor: Pod, node: str) -> None:
        """Mark the victim (DisruptionTarget), then DELETE it, only if it is still the same pod (uid precondition);
        its graceful termination is the kubelet's. Condition and Preempted event are worded as kube-scheduler's
        (preemption.prepareCandidate), reported by the preemptor's profile with the preemptor as related."""
        obj = self.pods.store.get(pod.key) or pod.raw
        try:
            patch = disruption_patch(preemptor.scheduler_name)
            self.kube.patch(k.PODS, pod.name, patch, pod.namespace, "status")
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.uid}}
            self.kube.request("DELETE", k.PODS.path(pod.namespace, pod.name), body=body)
        except ApiError as exc:
            if exc.status not in (404, 409):
                log.warning("cannot delete victim", extra={"pod": pod.key, "error": exc.message})
            return
        note = preempted_message(preemptor.uid, node)
        self.recorder.event(obj, PREEMPTED, note, related=preemptor.raw, controller=preemptor.scheduler_name)

    def _nominate(self, obj: JSON, node: str | None) -> None:
        """Set (or with None clear) ``status.nominatedNodeName``, as kube-scheduler's updatePod does."""
        meta = obj.get("metadata") or {}
        try:
            self.kube.patch(
                k.PODS, meta["name"], {"status": {"nominatedNodeName": node}}, meta.get("namespace"), "status"
            )
        except ApiError as exc:
            log.warning("cannot set nominatedNodeName", extra={"pod": meta.get("name"), "error": exc.message})

    def _record_failure(self, obj: JSON, message: str, reason: str = "") -> None:
        self.recorder.event(obj, FAILED_SCHEDULING, message)
        self.recorder.unschedulable(obj, message, reason)

    # ------------------------------------------------------------------------------------ binding

    def _check(self, d: Decision) -> str:
        """Against the cache, right before binding: '' if the pod and its node are still there."""
        with self.lock:
            obj = self.pods.store.get(d.pod.key)
            if obj is None or (obj.get("metadata") or {}).get("uid") != d.pod.uid:
                return "gone"
            if (obj.get("spec") or {}).get("nodeName"):
                return "conflict"
            if d.node not in self.nodes.store:
                return "node-gone"
        return ""

    def _bind_unit(self, unit: list[Decision]) -> None:
        outcomes: list[BindOutcome] = []
        try:
            while not self.watching and not self.stopped.is_set():
                self.stopped.wait(0.05)  # the check below needs a current cache: wait for the relist
            problems = {d.pod.key: self._check(d) for d in unit}
            if any(problems.values()):  # all or nothing: one member gone and the unit is not bound at all
                outcomes = [BindOutcome(d, None, problems[d.pod.key] or "gang-member-gone") for d in unit]
                return
            for d in unit:
                outcomes.append(self._bind(d))
        except Exception as exc:  # never lose a decision: anything unexpected is a failed bind
            log.exception("bind failed unexpectedly")
            done = {o.decision.pod.key for o in outcomes}
            outcomes += [BindOutcome(d, ApiError(0, str(exc)), "error") for d in unit if d.pod.key not in done]
        finally:
            self._outcomes.put(outcomes)
            self.wake.set()

    def _bind(self, d: Decision) -> BindOutcome:
        pod = d.pod
        if self.before_bind is not None:
            self.before_bind(pod, d.node)
        if self._check(d) == "node-gone":
            return BindOutcome(d, None, "node-gone")
        if d.volumes is not None:  # VolumeBinding's PreBind: PVs and claims updated, waited for until bound
            error = live_volumes.bind_pod_volumes(self.kube, pod, d.node, d.volumes[0], d.volumes[1], self.stopped)
            if error:
                return BindOutcome(d, ApiError(0, error), "error")
        written: list[JSON] = []
        if d.claims:  # DynamicResources' PreBind: allocations and reservations written to the claims (live.dra)
            written, error = live_dra.write_claims(self._claim_api, d.claims, pod)
            if error:
                live_dra.unreserve_claims(self._claim_api, written, pod)  # its Unreserve
                return BindOutcome(d, ApiError(0, error), "error")
        try:
            # The devices chosen at Reserve travel on the Binding (for the device plugin and later accounting).
            self.kube.bind(pod.namespace, pod.name, d.node, pod.uid, d.annotations)
        except ApiError as exc:
            outcome = self._confirm(d, exc) if exc.status == 0 or exc.status >= 500 else None
            if outcome is None:
                reason = {404: "gone", 409: "conflict"}.get(exc.status, "error")
                if exc.status == 409 and "uid" in exc.message.lower():
                    reason = "gone"  # precondition failed: a different pod now has this name
                outcome = BindOutcome(d, exc, reason)
            if outcome.reason:  # not bound: DynamicResources' Unreserve takes the pod off its claims
                live_dra.unreserve_claims(self._claim_api, written, pod)
            return outcome
        obj = self.pods.store.get(pod.key) or pod.raw
        self.recorder.event(obj, SCHEDULED, scheduled_message(pod.namespace, pod.name, d.node))
        if nominated(obj) not in ("", d.node):
            self._nominate(obj, None)  # landed elsewhere: it no longer holds room on its nominated node
        return BindOutcome(d)

    def _confirm(self, d: Decision, error: ApiError) -> BindOutcome:
        """A bind answered with a transport error or a 5xx may have been done (the answer lost): forgetting the
        reservation could give its room to another pod while this one is bound there. The pod stays assumed (in
        flight) until the server says which, by GETting it with a backoff until it answers."""
        pod = d.pod
        backoff = Backoff(0.2, 5.0)
        while not self.stopped.is_set():
            try:
                obj = self.kube.get(k.PODS, pod.name, pod.namespace)
            except ApiError as exc:
                if exc.status == 404:
                    return BindOutcome(d, exc, "gone")
                if exc.status not in (0, 429) and exc.status < 500:
                    log.warning("cannot confirm a bind", extra={"pod": pod.key, "error": exc.message})
                    return BindOutcome(d, exc, "error")  # refused (403): nothing to wait for
                self.stopped.wait(backoff.next())
                continue
            if (obj.get("metadata") or {}).get("uid") != pod.uid:
                return BindOutcome(d, error, "gone")
            node = (obj.get("spec") or {}).get("nodeName")
            if node == d.node:  # our bind went through
                self.recorder.event(obj, SCHEDULED, scheduled_message(pod.namespace, pod.name, d.node))
                return BindOutcome(d)
            return BindOutcome(d, error, "conflict" if node else "error")
        return BindOutcome(d, error, "unconfirmed")  # stopping: the reservation dies with the process

    def _drain_outcomes(self) -> None:
        """Apply finished bindings: successes counted; failures undo the reservation (rebuild) and retry."""
        while True:
            try:
                outcomes = self._outcomes.get_nowait()
            except queue.Empty:
                return
            now = time.monotonic()
            for o in outcomes:
                pod = o.decision.pod
                name = pod.scheduler_name
                with self.lock:
                    self.in_flight.discard(pod.uid)
                if not o.reason:
                    self.bound_total += 1
                    self.metrics.binds.labels("bound").inc()
                    self.metrics.schedule_attempts.labels("scheduled", name).inc()
                    self.metrics.attempt_duration.labels("scheduled", name).observe(max(0.0, now - o.decision.started))
                    with self.lock:
                        self.backoff.forget(pod.uid)
                        self.parsed.forget(pod.uid)
                    self.metrics.queue.scheduled(pod.uid)  # pod_scheduling_sli_duration_seconds
                    continue
                self.metrics.binds.labels(o.reason).inc()
                self.metrics.schedule_attempts.labels("error", name).inc()
                log.warning(
                    "binding not done; reservation undone",
                    extra={
                        "pod": pod.key,
                        "node": o.decision.node,
                        "reason": o.reason,
                        "error": o.error.message if o.error else "",
                    },
                )
                with self.lock:
                    if self.assumed.get(pod.key) is o.decision:
                        del self.assumed[pod.key]
                    self._pod_changed(pod.key, pod.raw, wake=False)  # its reservation undone, in place
                    if o.decision.claims:  # its claims' allocations, held in the DRA state, go with a rebuild
                        self.assumed_claims.forget(pod.uid)
                        self._invalidate("claim writes undone")
                    obj = self.pods.store.get(pod.key)
                    if o.reason in ("gone", "conflict") or obj is None or (obj.get("spec") or {}).get("nodeName"):
                        self.metrics.queue.forget(pod.uid)  # gone, or bound by another: out of our queue
                        continue
                    self.backoff.failed(pod.uid, now)
                    self.backing_off[pod.key] = obj
                    self.metrics.queue.failed(pod.uid, queue_metrics.BACKOFF, o.error.message if o.error else o.reason)
                    self.wake.set()
