"""The live scheduler's loop: each round takes the due pods, runs the engine over them and hands decisions on."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from accelsched.api import objects
from accelsched.api.objects import DEVICES_ANNOTATION, Pod
from accelsched.framework import gang
from accelsched.framework.queue import SchedulingQueue
from accelsched.framework.scheduler import ScheduleResult
from accelsched.live import convert as live_convert
from accelsched.live import metrics as queue_metrics
from accelsched.live.events import (
    FAILED_SCHEDULING,
)
from accelsched.live.kube import JSON
from accelsched.live.nominator import Nomination, Nominator
from accelsched.live.podjson import (
    gang_key,
    nominated,
    write_key,
)
from accelsched.live.writes import Decision
from accelsched.topology import allocator

log = logging.getLogger("accelsched.live")

UNSCHEDULABLE_FLUSH = 300.0  # kube-scheduler's podMaxInUnschedulablePodsDuration
BIND_ANNOTATIONS = (DEVICES_ANNOTATION, allocator.NUMA_ANNOTATION, allocator.NIC_ANNOTATION)


class SchedulingLoop:
    """LiveScheduler's scheduling loop: wake, sync the session, take the due pods (a gang whole), run the engine
    with a binder that only records decisions, and dispatch them (live.writes)."""

    def _loop(self) -> None:
        held = True
        while not self.stopped.is_set():
            self._beat = time.monotonic()
            self.wake.wait(timeout=self._next_wake())
            self.wake.clear()
            if self.stopped.is_set():
                return
            self._drain_outcomes()
            if not self.synced or not self.watching or not self.leading:
                held = True
                continue
            if held:  # every cache relisted after an outage: rebuild from it before deciding anything
                held = False
                with self.lock:
                    self._invalidate("caches relisted" if self.session is not None else "start")
            try:
                self.schedule_pending()
            except Exception:  # a bug must not kill the loop silently: log it, rebuild, go on
                log.exception("scheduling loop failed; rebuilding from the cache")
                with self.lock:
                    self._invalidate("scheduling loop failed")
                time.sleep(0.5)

    def _next_wake(self) -> float:
        with self.lock:
            if not self.backing_off:
                return 1.0
            if self.backing_off.changed:
                return 0.01  # a pod entered the pool since the last round: the round looks through it
            ready = self._next_ready
        return max(0.01, min(1.0, ready - time.monotonic()))

    def _due_from_backoff(self, now: float) -> dict[str, JSON]:
        """The pods whose backoff is over; the pool is looked through only when a pod entered it or the earliest
        backoff seen last time is over (BackoffPool), and that earliest one is noted again."""
        pool = self.backing_off
        if not pool.changed and now < self._next_ready:
            return {}
        pool.changed = False
        due: dict[str, JSON] = {}
        upcoming = math.inf
        for key, obj in pool.items():
            ready = self.backoff.ready_at(str((obj.get("metadata") or {}).get("uid")))
            if ready <= now:
                due[key] = obj
            elif ready < upcoming:
                upcoming = ready
        self._next_ready = upcoming
        return due

    def schedule_pending(self) -> int:
        """One round: rebuild the session if needed, try every pod that is due, dispatch the bindings."""
        now = time.monotonic()
        with self.lock:
            if now - self._last_flush > UNSCHEDULABLE_FLUSH:
                self._count_moves(self.unschedulable, queue_metrics.UNSCHEDULABLE_TIMEOUT)
                self.backing_off.update(self.unschedulable)
                self.unschedulable.clear()
                self._last_flush = now
            due = dict(self.new_pending)
            self._round_claim_events = self._claim_events
            due.update(self._due_from_backoff(now))
            # A gang leaves the queue whole: every pending member of a due member's gang comes along, backoff or
            # not (upstream's podGroupInfoForPod pops them all), so it is never tried with part of its pods.
            gangs = {gang_key(obj) for obj in due.values()} - {None}
            for pool in (self.backing_off, self.unschedulable) if gangs else ():
                due.update({key: obj for key, obj in pool.items() if gang_key(obj) in gangs})
            for key, obj in due.items():
                self.new_pending.pop(key, None)
                self.backing_off.pop(key, None)
                self.unschedulable.pop(key, None)
                self.metrics.queue.due(str((obj.get("metadata") or {}).get("uid")))  # BackoffComplete if it waited
        self._pending_gauge()
        rebuilt = self.sync_session()
        if not due:
            return 0
        assert self.session is not None
        pods = self._pods_for(due, rebuilt=rebuilt)
        results = self._run(pods, self._nominations())
        self._dispatch(results)
        return len(results)

    def _pods_for(self, due: dict[str, JSON], rebuilt: bool) -> list[Pod]:
        """The engine's Pods for the due keys: from the rebuilt session's inputs, or parsed now."""
        pods: list[Pod] = []
        self._known_signatures = known = {}
        terminating = self._terminating_nodes() if any(nominated(o) for o in due.values()) else set()
        for key, obj in due.items():
            uid = str((obj.get("metadata") or {}).get("uid"))
            with self.lock:
                if uid in self.in_flight or self._assumed(key, uid) is not None:
                    continue
            if nominated(obj) in terminating:
                # kube-scheduler's PodEligibleToPreemptOthers: its victims are still terminating; their
                # deletion (a cluster event) brings it back, and it must not pick more victims meanwhile.
                with self.lock:
                    self.unschedulable[key] = obj
                    self.rejected_by.pop(key, None)
                continue
            if key in self.waiting:
                if not (obj.get("spec") or {}).get("schedulingGroup"):  # upstream's PreEnqueue writes nothing
                    self.writes.submit(write_key(obj), self.recorder.unschedulable, obj, self.waiting[key])
                with self.lock:
                    self.unschedulable[key] = obj
                    self.rejected_by.pop(key, None)
                continue
            if self._held_by_queue(key, obj, rebuilt):
                continue
            pod = self.pending_by_key.get(key) if rebuilt else None
            if pod is None:
                try:
                    pod, known[key] = self.parsed.parse(obj)  # a copy when an equivalent pod was parsed
                except live_convert.UNUSABLE as exc:  # not only InputError: an odd object must not stop the loop
                    message = live_convert.unusable_message(exc)
                    log.warning("object left out", extra={"object": key, "error": message})
                    self.writes.submit(write_key(obj), self.recorder.event, obj, FAILED_SCHEDULING, message)
                    continue
                if gang.group_key(pod) is not None and not rebuilt:
                    with self.lock:  # gang pods are taken from a rebuilt session (their gang's member count)
                        self._invalidate("gang member to schedule")
                        self.new_pending[key] = obj
                        self.wake.set()
                    continue
            pods.append(pod)
        return pods

    def _terminating_nodes(self) -> set[str]:
        """Nodes with a pod being deleted (graceful termination in progress)."""
        with self.lock:
            return set(self._terminating.values())

    def _nominations(self) -> list[Nomination]:
        """The pending pods of ours nominated to a node (preemptors waiting for their victims to go), each
        parsed afresh: they hold their nominated node's room in this run (``live.nominator``)."""
        assert self.session is not None
        index = self.session.cluster.index
        out: list[Nomination] = []
        with self.lock:
            for key, obj in self._nominated_pods.items():
                meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
                node = nominated(obj)
                if not node or node not in index or spec.get("nodeName") or meta.get("deletionTimestamp"):
                    continue
                if spec.get("schedulerName") not in self.scheduler_names or key in self.assumed:
                    continue
                try:
                    out.append(Nomination(objects.parse_pod(obj, live_convert.SOURCE), index[node]))
                except live_convert.UNUSABLE:
                    continue  # reported when the pod itself is tried (_pods_for)
        return out

    def _run(self, pods: list[Pod], nominations: list[Nomination] | None = None) -> list[ScheduleResult]:
        """The engine's run over the due pods; the binder only records decisions (bound after the run).
        Nominated pods hold their room for the cycles of pods of lower or equal priority."""
        assert self.session is not None
        scheduler = self.session.scheduler
        self._decided = []
        self._attempt_started = {}
        self._nominator = nominator = Nominator(scheduler, nominations or [])
        scheduler.observer = self._observe
        run_gang = type(scheduler).schedule_gang

        def schedule_gang(group: gang.PodGroup, members: list[Pod]) -> list[ScheduleResult]:
            nominator.before_cycle(min(m.priority for m in members), {m.uid for m in members})
            return run_gang(scheduler, group, members)

        scheduler.schedule_gang = schedule_gang  # type: ignore[method-assign]
        # Pods not due must not be woken inside this run by a queueing hint: a fresh queue per round.
        sort_key = next(iter(self.config.profiles.values())).at("queueSort")[0].sort_key
        scheduler.queue = SchedulingQueue(sort_key, scheduler.hints)
        scheduler.failures.known = self._known_signatures  # the copied pods' signatures (live.podreuse)
        try:
            return scheduler.run(pods)
        finally:
            nominator.clear()  # between runs the session holds bound and assumed pods only
            scheduler.failures.known = {}
            self._nominator = None

    def _observe(self, pod: Pod) -> None:
        self._attempt_started[pod.key] = time.monotonic()
        if self._nominator is not None:
            self._nominator.before_cycle(pod.priority, {pod.uid})

    def _decide(self, pod: Pod, node: str) -> str | None:
        """DefaultBinder's binder in live mode: record the decision; the API call happens after the run."""
        pod.node_name = node
        if self._nominator is not None:
            self._nominator.decided_pod(pod.uid)
        annotations = (pod.raw.get("metadata") or {}).get("annotations") or {}
        decision = Decision(
            pod,
            node,
            self._attempt_started.get(pod.key, time.monotonic()),
            {a: annotations[a] for a in BIND_ANNOTATIONS if a in annotations},
            self._volume_plans.pop(pod.uid, None),
            self.claim_writer.take(pod.uid),
        )
        self._decided.append(decision)
        return None

    def volume_prebind(self, pod: Pod, node: str, plan: Any, timeout: float) -> str | None:
        """VolumeBinding's PreBind in live mode (its handle is this scheduler): keep the plan for the binding
        cycle, which writes it through the API before the Binding (``_bind``)."""
        self._volume_plans[pod.uid] = (plan, timeout)
        return None

    def _wake_hinted(self, bound: list[Pod]) -> None:
        """kube-scheduler's AssignedPodAdd: a pod we just placed may let a waiting pod in (required pod
        affinity, topology spread); the rejecting plugins' queueing hints decide, as in the offline queue."""
        if not bound or not self.hinted:
            return
        hints = self.session.scheduler.hints if self.session else {}
        with self.lock:
            for key, (waiting, plugins) in list(self.hinted.items()):
                if key not in self.unschedulable:
                    del self.hinted[key]
                    continue
                if any(name in hints and hints[name](waiting, b) for name in plugins for b in bound):
                    del self.hinted[key]
                    self._count_moves({key: self.unschedulable[key]}, queue_metrics.ASSIGNED_POD_ADD)
                    self.backing_off[key] = self.unschedulable.pop(key)
                    self.wake.set()

    def _pending_gauge(self) -> None:
        with self.lock:
            # Gang members waiting for their gang (Coscheduling's PreEnqueue) are gated, as scheduling-gated pods
            # are, and counted there only.
            # Pods waiting for their workload's quota are gated too (Kueue holds them with a scheduling gate).
            waiting = len((self.waiting.keys() | self.queue_held.keys()) & self.unschedulable.keys())
            self.metrics.pending_pods.labels("active").set(len(self.new_pending))
            self.metrics.pending_pods.labels("backoff").set(len(self.backing_off))
            self.metrics.pending_pods.labels("unschedulable").set(len(self.unschedulable) - waiting)
            self.metrics.pending_pods.labels("gated").set(len(self.gated) + waiting)
