"""``accelsched run``: a secondary scheduler against a real API server, with the engine of every other mode.

Shape (kube-scheduler's, in small):
- informers (``live.informer``) keep nodes, pods (all non-terminal ones: pending pods of our schedulerName to
  schedule, bound pods for accounting), namespaces, PodGroups, NodeResourceTopologies, storage, DRA and Kueue's
  objects;
- one scheduling loop owns the engine Session. It is rebuilt from the cache when the cluster changed in a way
  that is not our own doing (a node, a pod bound or deleted by others, a PodGroup, a topology); new pending pods
  alone are parsed and fed to the session as they are. Pods we decided but the cache does not show bound yet
  are *assumed* (kube-scheduler's assumed pods) and accounted in every rebuild until the watch confirms them;
- bindings go out from a pool of threads (kube-scheduler's binding cycle runs in goroutines), each checked
  first against the cache: a pod deleted or a node removed between decision and bind is not bound, and its
  reservation is undone by dropping it from the assumed pods and rebuilding. A bind answered 409 Conflict
  (bound already, e.g. by a request whose answer was lost while the server went away) is dropped and resynced;
  the Binding carries the pod's uid, so a pod recreated under the same name is never bound by mistake;
- a gang is decided whole before any member is bound (framework.gang). All members are then checked against
  the cache: if one is gone, none is bound and the gang is retried (it then waits for minMember pods). A bind
  that fails after that check cannot take back the members already bound (a Binding is final), so those stay
  and count toward minMember: the remaining members are retried as a gang of what is missing;
- Pending pods wait in an unschedulable pool until a cluster event (node added or changed, pod deleted, a
  capacity change), then are retried with kube-scheduler's backoff (1 s doubling to 10 s), and every 5 minutes
  regardless (podMaxInUnschedulablePodsDuration).

Where each part lives (each file reads top to bottom): ``live.handlers`` (cache events into the queue pools),
``live.incremental`` (the session kept current with the cache), ``live.loop`` (the rounds), ``live.writes``
(bindings, evictions and reports through the API) and ``live.queuedoor`` (Kueue's admission of queued pods). This
module composes them and owns the lifecycle.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelsched.api.objects import Pod
from accelsched.config import default_config, load_config
from accelsched.engine import Session
from accelsched.framework.profile import SchedulerConfig
from accelsched.live import clusterqueuestatus, nodehint, podreuse
from accelsched.live import dra as live_dra
from accelsched.live import kube as k
from accelsched.live import kueue as live_kueue
from accelsched.live import volumes as live_volumes
from accelsched.live.backoff import BackoffPool, PodBackoff
from accelsched.live.convert import WorkloadRead
from accelsched.live.devicemetrics import AcceleratorCollector
from accelsched.live.events import (
    Recorder,
)
from accelsched.live.handlers import EventHandlers
from accelsched.live.incremental import IncrementalState
from accelsched.live.informer import Informer
from accelsched.live.kube import JSON, Kube
from accelsched.live.leaderelection import ElectionConfig, LeaderElector
from accelsched.live.loop import SchedulingLoop
from accelsched.live.metrics import Metrics
from accelsched.live.nominator import Nominator
from accelsched.live.queuedoor import PENDING_CONDITION_DELAY, UPDATES_BATCH_PERIOD, QueueDoor
from accelsched.live.trim import trim
from accelsched.live.workloadcache import ParsedByVersion
from accelsched.live.workloadevents import EVENT_BURST, EVENT_QPS, EventSink
from accelsched.live.writer import Deferred, OrderedWriter, PriorityGate
from accelsched.live.writes import BindOutcome, Decision, WritePipeline
from accelsched.queues.admission import Outcome
from accelsched.queues.room import RoomWaits

log = logging.getLogger("accelsched.live")

NON_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"
LOOP_STALLED = 120.0  # /healthz fails when the loop has not turned for this long

__all__ = ["NON_TERMINAL", "BindOutcome", "Decision", "LiveScheduler"]


QUEUE_STATUS_WORKERS = 2  # threads writing ClusterQueue and LocalQueue status (live.queuedoor), one per queue at once
REPORT_WORKERS = 4  # threads writing FailedScheduling events and conditions (live.writer's report pool)
# Workload admissions and evictions written at once (live.queuedoor's admission lane, live.writer.PriorityGate: the
# ones waiting go highest priority first). More at once took more of the API server from Kueue's performance
# runner, whose finishes free the quota. At large-scale (20%, one run each): 16 at once gave 193.8 s and waits 72.5 /
# 39.9 / 21.0 s; 64 at once 221.5 s, 66.3 / 67.4 / 22.6 s; up to 50 a second x the latency (as Kueue's admission
# goroutines are, 16 to 256 at once) 216.5 s, 83.0 / 58.0 / 20.6 s, and after the next change (a Workload preempted
# before its admission was written gets no eviction) 195.3 s, 67.4 / 39.3 / 16.5 s against 187.1 s, 54.4 / 37.4 /
# 13.6 s with 16 at once.
WORKLOAD_WRITE_WORKERS = 16
BIND_WORKERS = 16  # threads binding pods and writing their events and conditions (live.writer's pool)
# Connections kept open to the API server: one per writing thread, and the informers' watches beside them. A smaller
# pool than its threads makes urllib3 open a connection (a TLS handshake) per request beyond it, and drop it after.
API_CONNECTIONS = BIND_WORKERS + REPORT_WORKERS + QUEUE_STATUS_WORKERS + WORKLOAD_WRITE_WORKERS + 32


class LiveScheduler(EventHandlers, IncrementalState, SchedulingLoop, WritePipeline, QueueDoor):
    """Schedules the pods of its profiles' schedulerNames on the cluster behind ``kube``."""

    def __init__(
        self,
        kube: Kube,
        config: str | Path | None = None,
        seed: int = 0,
        identity: str = "accelsched",
        election: ElectionConfig | None = None,
        bind_workers: int = BIND_WORKERS,
        watch_timeout: int = 300,
        score_all_nodes: bool = False,
        tend_heap: bool = False,
    ) -> None:
        self.kube = kube
        # The process's garbage collector frozen and collected on a schedule (_tend_heap): `accelsched run` owns
        # its process; a scheduler embedded in another one (the tests) leaves that process's collector alone.
        self.tend_heap = tend_heap
        self.score_all_nodes = score_all_nodes  # every node filtered and scored (accelsched run --score-all-nodes)
        self.binder = self._decide  # the DefaultBinder's binder (profile handle): decisions, bound afterwards
        self.config: SchedulerConfig = load_config(config, self) if config else default_config(self, ("accelsched",))
        self.scheduler_names = set(self.config.profiles)
        # clientConnection's qps and burst, as kube-scheduler's clients: its informers and writes share one throttle;
        # its events and leader election have one each (their own clients in kube-scheduler)
        qps, burst = self.config.client_qps, self.config.client_burst
        kube = self.kube = kube.throttled(qps, burst)
        self.seed = seed
        self.identity = identity
        self.metrics = Metrics()
        self.metrics.registry.register(AcceleratorCollector(lambda: self.session.cluster if self.session else None))
        self.recorder = Recorder(kube.throttled(qps, burst))
        # Kueue's events on the Workloads the queue door writes (live.workloadevents): a recorder of their own, on a
        # throttle of its own (EVENT_QPS), held back while admissions wait for their lane
        events_qps = min(qps, EVENT_QPS) if qps > 0 else EVENT_QPS
        events_burst = min(burst, EVENT_BURST) if qps > 0 else EVENT_BURST
        self.workload_events = EventSink(
            Recorder(kube.throttled(events_qps, events_burst)), busy=lambda: self.workload_writes.waiting > 0
        )
        self.backoff = PodBackoff(self.config.pod_initial_backoff_seconds, self.config.pod_max_backoff_seconds)
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self.before_bind: Callable[[Pod, str], None] | None = None  # called right before each bind POST

        common = {"watch_timeout": watch_timeout, "on_relist": self.metrics.relists.inc}
        # Nodes and pods, the bulk of the cache, are kept trimmed (live.trim: no managedFields, strings shared).
        self.nodes = Informer(kube, k.NODES, self._on_node, self.lock, transform=trim, **common)
        self.pods = Informer(
            kube, k.PODS, self._on_pod, self.lock, field_selector=NON_TERMINAL, transform=trim, **common
        )
        self.namespaces = Informer(kube, k.NAMESPACES, self._on_namespace, self.lock, **common)
        self.pod_groups = Informer(kube, k.POD_GROUPS, self._on_other, self.lock, optional=True, **common)
        # The upstream gang API (scheduling.k8s.io/v1alpha2): served only with GenericWorkload and --runtime-config.
        self.workload_pod_groups = Informer(
            kube, k.WORKLOAD_POD_GROUPS, self._on_other, self.lock, optional=True, **common
        )
        self.topologies = Informer(kube, k.NODE_RESOURCE_TOPOLOGIES, self._on_other, self.lock, optional=True, **common)
        self.storage = {
            kind: Informer(kube, resource, self._on_other, self.lock, **common)
            for kind, resource in live_volumes.RESOURCES.items()
        }
        # resource.k8s.io/v1 (GA in 1.34; optional so that an older API server is still served): claims are followed
        # in place (_on_claim), classes, slices and templates rebuild the session.
        self.dra = {
            kind: Informer(
                kube, resource, self._on_claim if kind == "ResourceClaim" else self._on_other, self.lock,
                optional=True, **common,
            )
            for kind, resource in live_dra.RESOURCES.items()
        }  # fmt: skip
        # Kueue's objects, Volcano's HyperNodes and Jobs (live/kueue.py), where served: each change rebuilds the
        # session (its queues are admitted again from the cache), but for Jobs without the queue-name label.
        handlers = {live_kueue.JOB: self._on_job, "Workload": self._on_workload}
        handlers |= {"ClusterQueue": self._on_cluster_queue, "LocalQueue": self._on_cluster_queue}
        self.kueue = {
            kind: Informer(
                kube, resource, handlers.get(kind, self._on_other), self.lock, optional=True, **common,
            )
            for kind, resource in live_kueue.RESOURCES.items()
        }  # fmt: skip
        self.informers = [self.nodes, self.pods, self.namespaces, self.pod_groups, self.topologies]
        self.informers.append(self.workload_pod_groups)
        self.informers += self.storage.values()
        self.informers += self.dra.values()
        self.informers += self.kueue.values()
        self._volume_plans: dict[str, tuple[Any, float]] = {}  # pod uid -> VolumeBinding's plan, until decided
        # DynamicResources' PreBind in live mode (each session's cluster.dra.writer, set at _rebuild): the writes
        # are recorded here and done by the bind worker before the Binding; until the cache shows them, the claims
        # are assumed.
        self.claim_writer = live_dra.DeferredClaimWriter()
        self._claim_api = live_dra.ClaimWriter(kube)
        self.assumed_claims = live_dra.AssumedClaims()
        self._changed_claims: dict[str, None] = {}  # claims changed since the last round (_apply_claim_changes)
        self._claims_named: dict[str, None] = {}  # pending pods whose resourceClaimStatuses changed (the same)
        # DRA events (a claim, a pod's claim names) counted, so that a pod with claims tried while one arrived goes
        # to backoff rather than waiting for the next (kube-scheduler's moveRequestCycle); the count at round start.
        self._claim_events = 0
        self._round_claim_events = 0
        self.claims_applied = 0

        self._lease_name = election.name if election else ""
        self.elector = (
            LeaderElector(
                kube.throttled(qps, burst), election, on_stopped=self._lost_lease, status=self._leader_status
            )
            if election
            else None
        )
        self.lost_lease = False

        # Guarded by self.lock (informer handlers and the loop):
        self.dirty = True  # the cluster changed in a way the session cannot follow in place: rebuild it
        self.rebuild_reason = "start"  # why (logged with the rebuild)
        self.rebuilds = 0
        # Pods whose accounting in the session must be brought up to date with the cache (deleted, bound by others,
        # changed, assumed and then undone): applied in place at the start of the next round (_apply_pod_changes).
        # Keyed by namespace/name, so a burst of changes to one pod is applied once and memory stays bounded.
        self._changed_pods: dict[str, None] = {}
        # Nodes changed, applied the same way; True where it joined or left (in the order of its last such event,
        # the order the informer's store, and so a rebuild, has them in).
        self._changed_nodes: dict[str, bool] = {}
        # Pod and node changes applied in place, beside ``rebuilds`` (tests and the churn benchmark read them).
        self.pods_applied = 0
        self.nodes_applied = 0
        self.nodes_joined = 0  # nodes added and removed in place, without a rebuild
        self.nodes_left = 0
        self._nominated_pods: dict[str, JSON] = {}  # pending pods with status.nominatedNodeName (_index_pod)
        self._terminating: dict[str, str] = {}  # bound pods being deleted -> their node
        self._gangs_in_progress: set[str] = set()  # gangs with pending members in the session (scheduled or waiting)
        self._frozen_at = self._collected_at = time.monotonic()  # heap tending (_tend_heap)
        self.new_pending: dict[str, JSON] = {}  # pending pods not tried since they arrived or changed
        self.unschedulable: dict[str, JSON] = {}  # tried, failed, waiting for a cluster event
        self.backing_off = BackoffPool()  # failed, woken by an event, waiting out their backoff
        self._next_ready = 0.0  # the earliest backoff over among them when the loop last looked (monotonic)
        self.gated: dict[str, JSON] = {}  # pending pods with spec.schedulingGates: not tried until they have none
        self.assumed: dict[str, Decision] = {}  # decided (binding or bound) but not yet seen bound in the cache
        self.in_flight: set[str] = set()  # uids of the pods binding now
        # Unschedulable pods rejected by a plugin with a queueing hint: a bind of ours may make them fit.
        self.hinted: dict[str, tuple[Pod, frozenset[str]]] = {}
        # Unschedulable pods tried and rejected by filters: uid and the rejecting plugins, for the queueing hint of
        # a pod deletion (_wake_unschedulable). Every other way into the unschedulable pool drops the entry.
        # And what each needs of a node, for the hint of a node event (live.nodehint).
        self.rejected_by: dict[str, tuple[str, frozenset[str], nodehint.Signature | None]] = {}
        self.signatures = nodehint.Signatures()
        self.parsed = podreuse.ParsedPods()  # Pending pods tried again are copied, not parsed again
        self._known_signatures: dict[str, tuple | None] = {}

        self.session: Session | None = None
        self.waiting: dict[str, str] = {}  # gang members held back (too few members yet) -> why
        self.queue_held: dict[str, str] = {}  # queued pods whose workload is not admitted -> why (live.queuedoor)
        self._job_unknown: dict[str, float] = {}  # pods whose Job is not in the cache yet -> since (live.queuedoor)
        self._status_in_flight: dict[str, tuple[str, tuple, float]] = {}  # status writes in flight (live.queuedoor)
        self._stale_workloads: set[str] = set()  # Workloads decided from an outdated version (live.queuedoor)
        self.own_writes_seen = 0  # Workload events that were our own status write coming back (live.queuedoor)
        self._open = None  # the last rebuild's admission, kept open (live.queuedoor, live.workloaddeltas)
        self._workload_changes: dict[str, Any] = {}
        self._additions: dict[tuple[str, str], Any] = {}  # Namespaces, LocalQueues added in place (live.queuedoor)
        self.workload_rounds = 0
        self.workload_outcomes_read = 0  # outcomes the Workload door's rounds read (live.queuedoor)
        self.stale_writes_skipped = 0  # its status writes the cache showed would be refused (live.queuedoor)
        self._carried: set[str] = set()  # Workloads each round followed in place reads again (live.queuedoor)
        self._assumed_admissions: dict[str, tuple[str, Any]] = {}  # admissions written, not seen (live.queuedoor)
        self.room_waits: RoomWaits[str] = RoomWaits()  # queued workloads not placeable: wait for room (live.queuedoor)
        self.queue_admitted: dict[str, Outcome] = {}  # pending pods of workloads the second door admitted (queuedoor)
        # Kueue's Workloads as read, kept until their resourceVersion changes (live.workloadcache)
        self.workload_reads: ParsedByVersion[WorkloadRead] = ParsedByVersion()
        self._latest: dict[str, tuple[Any, ...]] = {}  # status writes waiting for their turn (live.queuedoor)
        self._latest_lock = threading.Lock()
        self._cq_written: dict[str, Any] = {}  # ClusterQueue status last sent (live.queuedoor)
        self._afs_ledger = None  # admission fair sharing's usage, kept across sessions (live.queuedoor)
        self._cohort_history = None  # the cohort history (queues.cohortusage), kept likewise
        self.afs_clock = time.time  # their clock: wall time, as Kueue's controllers' (tests set a fake one)
        self._cq_counts = clusterqueuestatus.Counts()  # ClusterQueue counts, kept round to round (live.queuedoor)
        self._cq_witnesses: dict[str, str] = {}  # ClusterQueue -> a Workload of ours in it (live.queuedoor)
        self.errors: dict[str, str] = {}  # objects the parsers rejected -> the error
        self.pending_by_key: dict[str, Pod] = {}
        self._decided: list[Decision] = []
        self._nominator: Nominator | None = None
        self._attempt_started: dict[str, float] = {}
        self._outcomes: queue.SimpleQueue[list[BindOutcome]] = queue.SimpleQueue()
        self._pool = concurrent.futures.ThreadPoolExecutor(bind_workers, thread_name_prefix="bind")
        # FailedScheduling events and conditions on threads of their own, so a backlog's never delay a binding.
        self._report_pool = concurrent.futures.ThreadPoolExecutor(REPORT_WORKERS, thread_name_prefix="report")
        # Binds, events and status patches: concurrent across pods, in order per pod or gang (live.writer).
        self.writes = OrderedWriter(self._pool, self._report_pool)
        # The queue door's ClusterQueue and LocalQueue status (live.queuedoor): neither behind admissions nor behind
        # a backlog of Pending conditions (Kueue's performance runner reads usage and its end from them).
        self._queue_status_pool = concurrent.futures.ThreadPoolExecutor(
            QUEUE_STATUS_WORKERS, thread_name_prefix="queue-status"
        )
        self.queue_status_writes = OrderedWriter(self._queue_status_pool)
        self._workload_write_pool = concurrent.futures.ThreadPoolExecutor(
            WORKLOAD_WRITE_WORKERS, thread_name_prefix="admission"
        )
        self.workload_writes = PriorityGate(OrderedWriter(self._workload_write_pool), WORKLOAD_WRITE_WORKERS)
        # The queue door's Pending conditions, each held back a moment first (live.queuedoor._submit_latest).
        self.deferred_reports = Deferred("pending-conditions")
        self.pending_condition_delay = PENDING_CONDITION_DELAY
        # Its queues' usage, batched as Kueue's controllers batch a Workload event's (live.queuedoor).
        self.deferred_status = Deferred("queue-status-batch")
        self.queue_status_batch_period = UPDATES_BATCH_PERIOD
        self._last_flush = time.monotonic()
        self._thread: threading.Thread | None = None
        self._beat = time.monotonic()  # the loop's last turn (/healthz)
        self.bound_total = 0

    # ------------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        for informer in self.informers:
            informer.start()
        if self.elector is not None:
            self.elector.start()
        self._thread = threading.Thread(target=self._loop, name="scheduling-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.wake.set()
        for informer in self.informers:
            informer.stop()
        if self.elector is not None:
            self.elector.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.deferred_reports.stop()
        self.deferred_status.stop()
        self.workload_events.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._report_pool.shutdown(wait=True, cancel_futures=True)
        self._queue_status_pool.shutdown(wait=True, cancel_futures=True)
        self._workload_write_pool.shutdown(wait=True, cancel_futures=True)

    def _leader_status(self, leading: bool) -> None:
        self.metrics.leader.labels(self._lease_name).set(1 if leading else 0)

    def _lost_lease(self) -> None:
        self.lost_lease = True
        self.stopped.set()
        self.wake.set()

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    @property
    def watching(self) -> bool:
        """Every cache listed and watching: while one is down (relisting, server away) it may be stale, so
        nothing is decided or bound until it has relisted."""
        return all(i.watching.is_set() for i in self.informers)

    @property
    def leading(self) -> bool:
        return self.elector is None or self.elector.leading.is_set()

    def healthy(self) -> tuple[bool, str]:
        """/healthz: the scheduling loop is alive and turning (it wakes at least every second; a round of
        thousands of pods takes seconds). A stalled loop makes the kubelet restart the process."""
        if self._thread is None or self.stopped.is_set():
            return True, "ok"
        if not self._thread.is_alive():
            return False, "scheduling loop ended"
        stalled = time.monotonic() - self._beat
        if stalled > LOOP_STALLED:
            return False, f"scheduling loop stalled for {stalled:.0f}s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        """/readyz: caches synced, and the leader election state known (leading, or another holder seen)."""
        if not self.synced:
            return False, "caches not synced"
        if self.elector is not None and not self.leading and not self.elector.holder:
            return False, "leader election state not known yet"
        return True, "ok"
