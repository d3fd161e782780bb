"""``accelsched run``: a secondary scheduler against a real API server, with the engine of every other mode.

Shape (kube-scheduler's, in small):
- informers (``live.informer``) keep nodes, pods (all non-terminal ones: pending pods of our schedulerName to
  schedule, bound pods for accounting), namespaces, PodGroups and NodeResourceTopologies;
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
"""

from __future__ import annotations

import concurrent.futures
import gc
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelsched.api import objects
from accelsched.api.objects import DEVICES_ANNOTATION, Pod
from accelsched.cluster.devices import first_free
from accelsched.cluster.volumes import claim_volumes
from accelsched.config import default_config, load_config
from accelsched.engine import Session
from accelsched.framework import gang
from accelsched.framework.profile import SchedulerConfig
from accelsched.framework.queue import SchedulingQueue
from accelsched.framework.scheduler import ScheduleResult
from accelsched.live import convert as live_convert
from accelsched.live import dra as live_dra
from accelsched.live import kube as k
from accelsched.live import metrics as queue_metrics
from accelsched.live import podgroups
from accelsched.live import volumes as live_volumes
from accelsched.live.backoff import Backoff, PodBackoff
from accelsched.live.events import (
    FAILED_SCHEDULING,
    PREEMPTED,
    SCHEDULED,
    Recorder,
    disruption_patch,
    preempted_message,
    scheduled_message,
)
from accelsched.live.informer import Informer, object_key
from accelsched.live.kube import JSON, ApiError, Kube
from accelsched.live.leaderelection import ElectionConfig, LeaderElector
from accelsched.live.metrics import Metrics
from accelsched.live.nominator import Nomination, Nominator
from accelsched.live.writer import OrderedWriter
from accelsched.topology import allocator

log = logging.getLogger("accelsched.live")

NON_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"
UNSCHEDULABLE_FLUSH = 300.0  # kube-scheduler's podMaxInUnschedulablePodsDuration
LOOP_STALLED = 120.0  # /healthz fails when the loop has not turned for this long
FREEZE_EVERY = 30.0  # seconds between freezes of the young survivors (_tend_heap)
FULL_COLLECT_EVERY = 600.0  # seconds between full collections (cyclic garbage frozen meanwhile is freed then)
BIND_ANNOTATIONS = (DEVICES_ANNOTATION, allocator.NUMA_ANNOTATION, allocator.NIC_ANNOTATION)


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


class LiveScheduler:
    """Schedules the pods of its profiles' schedulerNames on the cluster behind ``kube``."""

    def __init__(
        self,
        kube: Kube,
        config: str | Path | None = None,
        seed: int = 0,
        identity: str = "accelsched",
        election: ElectionConfig | None = None,
        bind_workers: int = 16,
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
        self.seed = seed
        self.identity = identity
        self.metrics = Metrics()
        self.recorder = Recorder(kube)
        self.backoff = PodBackoff(self.config.pod_initial_backoff_seconds, self.config.pod_max_backoff_seconds)
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self.before_bind: Callable[[Pod, str], None] | None = None  # called right before each bind POST

        common = {"watch_timeout": watch_timeout, "on_relist": self.metrics.relists.inc}
        self.nodes = Informer(kube, k.NODES, self._on_node, self.lock, **common)
        self.pods = Informer(kube, k.PODS, self._on_pod, self.lock, field_selector=NON_TERMINAL, **common)
        self.namespaces = Informer(kube, k.NAMESPACES, self._on_other, self.lock, **common)
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
        self.informers = [self.nodes, self.pods, self.namespaces, self.pod_groups, self.topologies]
        self.informers.append(self.workload_pod_groups)
        self.informers += self.storage.values()
        self.informers += self.dra.values()
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

        self.elector = LeaderElector(kube, election, on_stopped=self._lost_lease) if election else None
        self.lost_lease = False

        # Guarded by self.lock (informer handlers and the loop):
        self.dirty = True  # the cluster changed in a way the session cannot follow in place: rebuild it
        self.rebuild_reason = "start"  # why (logged with the rebuild)
        self.rebuilds = 0
        # Pods whose accounting in the session must be brought up to date with the cache (deleted, bound by others,
        # changed, assumed and then undone): applied in place at the start of the next round (_apply_pod_changes).
        # Keyed by namespace/name, so a burst of changes to one pod is applied once and memory stays bounded.
        self._changed_pods: dict[str, None] = {}
        self._changed_nodes: dict[str, None] = {}  # nodes changed (not added or removed), applied the same way
        # Pod and node changes applied in place, beside ``rebuilds`` (tests and the churn benchmark read them).
        self.pods_applied = 0
        self.nodes_applied = 0
        self._nominated_pods: dict[str, JSON] = {}  # pending pods with status.nominatedNodeName (_index_pod)
        self._terminating: dict[str, str] = {}  # bound pods being deleted -> their node
        self._gangs_in_progress: set[str] = set()  # gangs with pending members in the session (scheduled or waiting)
        self._frozen_at = self._collected_at = time.monotonic()  # heap tending (_tend_heap)
        self.new_pending: dict[str, JSON] = {}  # pending pods not tried since they arrived or changed
        self.unschedulable: dict[str, JSON] = {}  # tried, failed, waiting for a cluster event
        self.backing_off: dict[str, JSON] = {}  # failed, woken by an event, waiting out their backoff
        self.gated: dict[str, JSON] = {}  # pending pods with spec.schedulingGates: not tried until they have none
        self.assumed: dict[str, Decision] = {}  # decided (binding or bound) but not yet seen bound in the cache
        self.in_flight: set[str] = set()  # uids of the pods binding now
        # Unschedulable pods rejected by a plugin with a queueing hint: a bind of ours may make them fit.
        self.hinted: dict[str, tuple[Pod, frozenset[str]]] = {}

        self.session: Session | None = None
        self.waiting: dict[str, str] = {}  # gang members held back (too few members yet) -> why
        self.errors: dict[str, str] = {}  # objects the parsers rejected -> the error
        self.pending_by_key: dict[str, Pod] = {}
        self._decided: list[Decision] = []
        self._nominator: Nominator | None = None
        self._attempt_started: dict[str, float] = {}
        self._outcomes: queue.SimpleQueue[list[BindOutcome]] = queue.SimpleQueue()
        self._pool = concurrent.futures.ThreadPoolExecutor(bind_workers, thread_name_prefix="bind")
        # Binds, events and status patches: concurrent across pods, in order per pod or gang (live.writer).
        self.writes = OrderedWriter(self._pool)
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
        self._pool.shutdown(wait=True, cancel_futures=True)

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

    # ------------------------------------------------------------------------------------ cache events

    def _on_node(self, kind: str, obj: JSON, old: JSON | None) -> None:
        if kind == "MODIFIED" and old is not None and not _node_changed(old, obj):
            return  # heartbeats and condition updates do not move a pod
        self._event = queue_metrics.node_event(kind, old, obj)  # the label of the pods it wakes (metrics)
        if kind == "MODIFIED" and old is not None:
            # Labels, taints, a cordon, allocatable: taken in place at that node next round (_apply_changes).
            self._changed_nodes[str((obj.get("metadata") or {}).get("name"))] = None
            self._wake_unschedulable()
            return
        self._cluster_event(f"node {kind.lower()}")  # the node set changed: rebuilt (see docs/live.md)

    def _on_other(self, kind: str, obj: JSON, old: JSON | None) -> None:
        if kind == "MODIFIED" and old is not None and _same_content(old, obj):
            return
        self._event = queue_metrics.resource_event(kind, obj)
        self._cluster_event(f"{obj.get('kind') or 'object'} {kind.lower()}")

    def _on_claim(self, kind: str, obj: JSON, old: JSON | None) -> None:
        """A ResourceClaim changed: the session follows it in place next round (allocations and reservations
        change on every pod with claims), and the unschedulable pods with claims it may help are woken
        (DynamicResources' queueing hint: a claim of theirs created or its status changed, or any deallocated)."""
        key = object_key(obj)
        self.assumed_claims.observed(key, None if kind == "DELETED" else obj)
        self._changed_claims[key] = None  # every update: a deletionTimestamp or a finalizer is metadata too
        self._claim_events += 1
        self._event = queue_metrics.resource_event(kind, obj)
        if kind == "DELETED":  # DynamicResources registers claim Add and Update only (its deallocation came first)
            return
        woken = {
            pod_key: pod
            for pod_key, pod in self.unschedulable.items()
            if live_dra.has_claims(pod) and live_dra.claim_event_wakes(pod, old, obj)
        }
        self._count_moves(woken, self._event)
        for pod_key in woken:
            self.backing_off[pod_key] = self.unschedulable.pop(pod_key)
        if woken:
            self.wake.set()

    def _cluster_event(self, reason: str) -> None:
        """Something the session cannot follow in place happened (a node, a topology, a storage object, a gang's
        PodGroup): rebuild, and wake the unschedulable pods."""
        self._invalidate(reason)
        self._wake_unschedulable()

    def _invalidate(self, reason: str) -> None:
        """Rebuild the session from the cache before the next decision (the first reason is the one logged)."""
        if not self.dirty:
            self.rebuild_reason = reason
        self.dirty = True

    def _wake_unschedulable(self) -> None:
        self._count_moves(self.unschedulable, getattr(self, "_event", queue_metrics.ASSIGNED_POD_DELETE))
        self.backing_off.update(self.unschedulable)
        self.unschedulable.clear()
        self.wake.set()

    def _count_moves(self, pods: dict[str, JSON], event: str) -> None:
        """queue_incoming_pods_total for unschedulable pods moved by ``event``: to backoff, or active once their
        backoff is over (movePodsToActiveOrBackoffQueue). Called under self.lock."""
        if not pods:
            return
        now, ready_at = time.monotonic(), self.backoff.ready_at
        uids = [str((obj.get("metadata") or {}).get("uid")) for obj in pods.values()]
        self.metrics.queue.woken_all(event, [(uid, ready_at(uid) <= now) for uid in uids])

    def _on_pod(self, kind: str, obj: JSON, old: JSON | None) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        node = (obj.get("spec") or {}).get("nodeName")
        uid = str(meta.get("uid"))
        self._index_pod(kind, key, obj)
        self._event = queue_metrics.pod_event(kind, obj, old)  # the label of the pods it wakes (metrics)
        if kind == "DELETED":
            for pool in (self.new_pending, self.unschedulable, self.backing_off, self.gated):
                pool.pop(key, None)
            self.backoff.forget(uid)
            self.metrics.queue.forget(uid)
            decision = self.assumed.get(key)
            if decision is not None and decision.pod.uid == uid:
                del self.assumed[key]
                self._pod_changed(key, obj)  # its reservation is free again
            if node or uid in self.in_flight:
                self._pod_changed(key, obj)  # its capacity is free again
            elif _nominated(obj):
                self._wake_unschedulable()  # the room its nomination held
            elif _gang_member(obj):
                self._invalidate("pending gang member deleted")
            return
        if node:
            for pool in (self.new_pending, self.unschedulable, self.backing_off):
                pool.pop(key, None)
            decision = self._assumed(key, uid)
            if decision is None and uid not in self.in_flight:
                self.metrics.queue.forget(uid)  # bound by another scheduler: it left our queue
            if decision is not None and decision.node == node:
                del self.assumed[key]  # our own bind, confirmed: the session has it already
                return
            if old is None or (old.get("spec") or {}) != (obj.get("spec") or {}) or _labels(old) != _labels(obj):
                self.assumed.pop(key, None)
                self._pod_changed(key, obj, wake=False)  # bound by someone else, or a bound pod changed
                self.wake.set()
            return
        self._assumed(key, uid)  # a decision for an earlier pod of this name is stale
        if (obj.get("spec") or {}).get("schedulerName") not in self.scheduler_names:
            return
        if (obj.get("spec") or {}).get("schedulingGates"):
            # kube-scheduler's SchedulingGates PreEnqueue: not queued (nor reported) until every gate is removed,
            # which is a spec update that brings it back here.
            for pool in (self.new_pending, self.unschedulable, self.backing_off):
                pool.pop(key, None)
            if key not in self.gated:  # kube-scheduler keeps a gated pod in unschedulablePods
                self.metrics.queue.moved(uid, queue_metrics.UNSCHEDULABLE, self._event)
            self.gated[key] = obj
            return
        was_gated = self.gated.pop(key, None) is not None
        if old is not None and (old.get("spec") or {}) == obj.get("spec") and _labels(old) == _labels(obj):
            # Our own condition or annotation update: keep the pod in its pool, with the newest object.
            for pool in (self.new_pending, self.unschedulable, self.backing_off):
                if key in pool:
                    pool[key] = obj
            if live_dra.generated_claims_changed(old, obj):
                # The resourceclaim controller named the claims it made for the pod: DynamicResources' hint.
                self._claims_named[key] = None
                self._claim_events += 1
                if key in self.unschedulable:
                    self._count_moves({key: obj}, self._event)
                    self.backing_off[key] = self.unschedulable.pop(key)
                self.wake.set()
            if _nominated(old) not in ("", _nominated(obj)):
                self._wake_unschedulable()  # the room its nomination held is free for others again
            return
        for pool in (self.unschedulable, self.backing_off):
            pool.pop(key, None)
        self.new_pending[key] = obj
        event = queue_metrics.GATES_ELIMINATED if was_gated else self._event
        self.metrics.queue.moved(uid, queue_metrics.ACTIVE, event)
        if _gang_member(obj):
            self._cluster_event("gang member added")  # a new member: its waiting gang may now have minMember pods
        self.wake.set()

    def _index_pod(self, kind: str, key: str, obj: JSON) -> None:
        """The two sets a round reads besides the due pods, kept by the events rather than found by a scan of
        every pod each round (30,000 pods made that scan most of a round's time): pending pods carrying a
        nomination, and the nodes of pods being deleted (graceful termination)."""
        node = (obj.get("spec") or {}).get("nodeName")
        if kind != "DELETED" and not node and _nominated(obj):
            self._nominated_pods[key] = obj
        else:
            self._nominated_pods.pop(key, None)
        if kind != "DELETED" and node and (obj.get("metadata") or {}).get("deletionTimestamp"):
            self._terminating[key] = str(node)
        else:
            self._terminating.pop(key, None)

    def _assumed(self, key: str, uid: str) -> Decision | None:
        """The assumed decision for this very pod: matched by uid, since a pod deleted and recreated under the
        same name (a StatefulSet's) is another pod. A decision for an earlier pod of the name is stale: it is
        dropped and its reservation freed (rebuild), and the new pod is scheduled on its own."""
        decision = self.assumed.get(key)
        if decision is not None and decision.pod.uid != uid:
            del self.assumed[key]
            self._pod_changed(key, decision.pod.raw)
            return None
        return decision

    # ------------------------------------------------------------------------------------ incremental state

    def _pod_changed(self, key: str, obj: JSON, wake: bool = True) -> None:
        """A pod's accounting changed (deleted, bound by others, updated, a reservation undone): the session
        follows at the start of the next round, at that pod's node only. A member of a gang that is being
        scheduled (pending members, or held back waiting for more) changes its gang's member count, which
        the session takes from a rebuild."""
        gang_key = _gang_key(obj)
        if gang_key is not None and gang_key in self._gangs_in_progress:
            self._invalidate("member of a gang in progress changed")
        else:
            self._changed_pods[key] = None
        if wake:
            self._wake_unschedulable()

    def _desired(self, key: str) -> JSON | None:
        """The pod as the session must account it (as a rebuild would: the cache, with assumed pods shown
        bound), or None when it holds no room (gone, pending, or a stale decision)."""
        obj = self.pods.store.get(key)
        if obj is None:
            return None
        if not (obj.get("spec") or {}).get("nodeName"):
            decision = self._assumed(key, str((obj.get("metadata") or {}).get("uid")))
            if decision is None:
                return None
            obj = _as_bound(obj, decision)
        return obj

    def _apply_pod_changes(self) -> bool:
        """Bring the session up to date with the pods changed since the last round, in place (what
        kube-scheduler's cache does on each pod event). False when one cannot be (the session must be rebuilt)."""
        if not self._apply_node_changes() or not self._apply_claim_changes():
            return False
        with self.lock:
            if not self._changed_pods or self.session is None:
                return True
            keys = list(self._changed_pods)
            self._changed_pods.clear()
            changes = [(key, self._desired(key)) for key in keys]  # a stale decision found here comes next round
        for key, obj in changes:
            if not self._sync_pod(key, obj):
                with self.lock:
                    self._invalidate("a pod with volumes reserved by us was undone")
                return False
        self.pods_applied += len(changes)
        return True

    def _apply_claim_changes(self) -> bool:
        """Claims changed since the last round, taken into the session's DRA state in place, each as the cache
        shows it with our writes in flight applied (AssumedClaims). False when one cannot be (rebuild)."""
        with self.lock:
            if self.session is not None and self._claims_named:
                live_dra.forget_pods(self.session.cluster, self._claims_named)
                self._claims_named.clear()
            if not self._changed_claims or self.session is None:
                return True
            keys = list(self._changed_claims)
            self._changed_claims.clear()
            store = self.dra["ResourceClaim"].store
            docs = {
                key: self.assumed_claims.overlay(key, store[key]) if key in store else None for key in keys
            }  # fmt: skip
        applied, error = live_dra.apply_claims(self.session.cluster, docs, live_convert.SOURCE)
        if error:
            with self.lock:
                self._invalidate(error)
            return False
        self.claims_applied += applied
        return True

    def _apply_node_changes(self) -> bool:
        """Nodes changed by others (labels, taints, cordon, allocatable) taken in place: ClusterState.update_node.
        False when one cannot be (a new resource, another device inventory or zone, a topology, storage objects
        whose node masks read the labels): the session is rebuilt."""
        with self.lock:
            if not self._changed_nodes or self.session is None:
                return True
            names = list(self._changed_nodes)
            self._changed_nodes.clear()
            objs = [self.nodes.store.get(name) for name in names]
            storage = any(informer.store for informer in self.storage.values())
        for name, obj in zip(names, objs, strict=True):
            node = live_convert.one_node(obj) if obj is not None and not storage else None
            if node is None or not self.session.cluster.update_node(node):
                with self.lock:
                    self._invalidate(f"node {name} changed in a way not followed in place")
                return False
            self.nodes_applied += 1
        return True

    def _sync_pod(self, key: str, obj: JSON | None) -> bool:
        """The session's accounting of one pod made equal to ``obj`` (None: holds nothing): taken off its node
        (capacity, devices, exclusive CPUs, counts) and put on the new one, as admit_bound does in a rebuild."""
        assert self.session is not None
        cluster, scheduler = self.session.cluster, self.session.scheduler
        node = cluster.pod_node.get(key)
        if node is not None:
            current = cluster.pods_on[node][key]
            if obj is not None and _same_placement(current, obj, cluster.nodes[node].name):
                return True
            if not (current.raw.get("spec") or {}).get("nodeName") and any(claim_volumes(current)):
                return False  # our decision, undone: its claims' assumed bindings live in the volume state
            scheduler.evict(current)
            cluster.bound_seq.pop(key, None)
        if obj is None or (obj.get("spec") or {}).get("nodeName") not in cluster.index:
            return True  # gone, or on a node we do not have (an orphan, as in a rebuild)
        try:
            pod = live_convert.parse_pod(obj, live_convert.SOURCE)
        except live_convert.UNUSABLE as exc:
            log.warning("object left out", extra={"object": key, "error": live_convert.unusable_message(exc)})
            return True
        if pod.terminal:
            return True
        rejected = scheduler.admit_bound(pod)
        if (
            rejected is not None
            and pod.devices
            and (rejected.explicit_reasons or {}).get(pod.node_name) == ["UnexpectedAdmissionError"]
        ):
            rejected = self._admit_named_devices(pod)
        if rejected is not None:
            log.warning("bound pod does not fit its node", extra={"pod": key, "error": rejected.message})
        return True

    def _admit_named_devices(self, pod: Pod) -> ScheduleResult | None:
        """A bound pod naming devices that pods bound by others hold: those pods' devices were only guessed (the
        first free ones; nothing says which the kubelet gave them), so they let go of them, the pod is admitted,
        and they take free ones again, as a rebuild admits the pods naming their devices first."""
        assert self.session is not None
        cluster = self.session.cluster
        node = cluster.index[str(pod.node_name)]
        pools = cluster.devices[node].pools
        guessed = [p for p in cluster.pods_on[node].values() if _devices_guessed(p) and set(p.devices) & set(pools)]
        for other in guessed:
            for res, ids in other.devices.items():
                if res in pools:
                    pools[res].release(ids)
        rejected = self.session.scheduler.admit_bound(pod)
        for other in guessed:
            for res, ids in other.devices.items():
                if res in pools:
                    pool = pools[res]
                    other.devices[res] = pool.take(first_free(pool, len(ids)))
        cluster.touch(node)
        return rejected

    # ------------------------------------------------------------------------------------ the loop

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
            ready = [
                self.backoff.ready_at(str((p.get("metadata") or {}).get("uid"))) for p in self.backing_off.values()
            ]
        if not ready:
            return 1.0
        return max(0.01, min(1.0, min(ready) - time.monotonic()))

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
            for key, obj in self.backing_off.items():
                if self.backoff.ready_at(str((obj.get("metadata") or {}).get("uid"))) <= now:
                    due[key] = obj
            # A gang leaves the queue whole: every pending member of a due member's gang comes along, backoff or
            # not (upstream's podGroupInfoForPod pops them all), so it is never tried with part of its pods.
            gangs = {_gang_key(obj) for obj in due.values()} - {None}
            for pool in (self.backing_off, self.unschedulable) if gangs else ():
                due.update({key: obj for key, obj in pool.items() if _gang_key(obj) in gangs})
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

    def sync_session(self) -> bool:
        """Make the session current with the cache before deciding: the pod changes applied in place (the
        steady state), or a rebuild when something the session cannot follow in place changed (a node, a
        topology, a storage object, a gang in progress, a relist after an outage). True when it rebuilt."""
        with self.lock:
            rebuild = self.dirty or self.session is None
            if rebuild:
                snapshot, reason, self.dirty = self._snapshot(), self.rebuild_reason, False
                self._changed_pods.clear()  # the snapshot has them
                self._changed_nodes.clear()
                self._changed_claims.clear()
        if not rebuild and not self._apply_pod_changes():
            with self.lock:
                snapshot, reason, self.dirty = self._snapshot(), self.rebuild_reason, False
                self._changed_pods.clear()
                self._changed_nodes.clear()
                self._changed_claims.clear()
            rebuild = True
        if rebuild:
            self._rebuild(snapshot, reason)
        elif self.session is not None:
            self.session.cluster.trim_caches()  # a session that lives for days keeps only the shapes in use
            if self.tend_heap:
                self._tend_heap()
        return rebuild

    def _tend_heap(self) -> None:
        """Keep CPython's full collections short (see _freeze_heap): every FREEZE_EVERY seconds what survived the
        young generations is frozen too, so a full collection only walks what was allocated since; every
        FULL_COLLECT_EVERY seconds one full pass over everything frees the cycles frozen meanwhile (a pause of
        about 0.5 s per million objects, where kube-scheduler's Go collector runs concurrently)."""
        now = time.monotonic()
        if now - self._collected_at > FULL_COLLECT_EVERY:
            gc.unfreeze()
            _freeze_heap()
            self._frozen_at = self._collected_at = now
        elif now - self._frozen_at > FREEZE_EVERY:
            gc.collect(1)
            gc.freeze()
            self._frozen_at = now

    def _snapshot(self) -> live_convert.Snapshot:
        """The cache's objects, with the assumed pods shown bound (their bind may not be visible yet)."""
        pods = []
        for key, obj in self.pods.store.items():
            decision = self._assumed(key, str((obj.get("metadata") or {}).get("uid")))
            if decision is not None and not (obj.get("spec") or {}).get("nodeName"):
                obj = _as_bound(obj, decision)
            pods.append(obj)
        return live_convert.Snapshot(
            nodes=list(self.nodes.store.values()),
            pods=pods,
            namespaces=list(self.namespaces.store.values()),
            pod_groups=list(self.pod_groups.store.values())
            + [{**o, "apiVersion": gang.WORKLOAD_API} for o in self.workload_pod_groups.store.values()],
            topologies=list(self.topologies.store.values()),
            storage={kind: list(informer.store.values()) for kind, informer in self.storage.items()},
            dra={
                kind: [self.assumed_claims.overlay(key, obj) for key, obj in informer.store.items()]
                for kind, informer in self.dra.items()
            },
        )

    def _rebuild(self, snapshot: live_convert.Snapshot, reason: str = "") -> None:
        started = time.monotonic()
        if self.tend_heap:
            gc.unfreeze()  # the old session's cycles (cluster <-> volume state) must be collectable
        converted = live_convert.convert(snapshot, self.scheduler_names)
        for obj, error in converted.errors.items():
            log.warning("object left out", extra={"object": obj, "error": error})
        session = Session.start(converted.inputs, self.config, self.seed)
        session.scheduler.groups = converted.groups
        session.scheduler.score_all_nodes = self.score_all_nodes
        if session.cluster.dra is not None:  # DynamicResources' PreBind writes the claims from the bind worker
            session.cluster.dra.writer = self.claim_writer
        for rejected in session.rejected:
            log.warning("bound pod does not fit its node", extra={"pod": rejected.pod.key, "error": rejected.message})
        self.session = session
        self.pending_by_key = {p.key: p for p in converted.inputs.pending}
        # The bound pods live on in the cluster state (pods_on), which follows every change in place; the list they
        # came in would keep each deleted pod alive until the next rebuild (memory growing with history).
        session.inputs.pods = list(self.pending_by_key.values())
        session.rejected = []
        self.waiting = converted.waiting
        self.errors = converted.errors
        with self.lock:
            waiting_gangs = {_gang_key(self.pods.store.get(key) or {}) for key in converted.waiting}
        self._gangs_in_progress = (set(converted.groups) | waiting_gangs) - {None}  # type: ignore[operator]
        self.rebuilds += 1
        if self.tend_heap:
            _freeze_heap()
            self._frozen_at = self._collected_at = time.monotonic()
        log.info(
            "session rebuilt",
            extra={
                "reason": reason,
                "nodes": len(snapshot.nodes),
                "pods": len(snapshot.pods),
                "seconds": round(time.monotonic() - started, 3),
            },
        )

    def _pods_for(self, due: dict[str, JSON], rebuilt: bool) -> list[Pod]:
        """The engine's Pods for the due keys: from the rebuilt session's inputs, or parsed now."""
        pods: list[Pod] = []
        terminating = self._terminating_nodes() if any(_nominated(o) for o in due.values()) else set()
        for key, obj in due.items():
            uid = str((obj.get("metadata") or {}).get("uid"))
            with self.lock:
                if uid in self.in_flight or self._assumed(key, uid) is not None:
                    continue
            if _nominated(obj) in terminating:
                # kube-scheduler's PodEligibleToPreemptOthers: its victims are still terminating; their
                # deletion (a cluster event) brings it back, and it must not pick more victims meanwhile.
                with self.lock:
                    self.unschedulable[key] = obj
                continue
            if key in self.waiting:
                if not (obj.get("spec") or {}).get("schedulingGroup"):  # upstream's PreEnqueue writes nothing
                    self.writes.submit(_write_key(obj), self.recorder.unschedulable, obj, self.waiting[key])
                with self.lock:
                    self.unschedulable[key] = obj
                continue
            pod = self.pending_by_key.get(key) if rebuilt else None
            if pod is None:
                try:
                    pod = live_convert.parse_pod(obj, live_convert.SOURCE)
                except live_convert.UNUSABLE as exc:  # not only InputError: an odd object must not stop the loop
                    message = live_convert.unusable_message(exc)
                    log.warning("object left out", extra={"object": key, "error": message})
                    self.writes.submit(_write_key(obj), self.recorder.event, obj, FAILED_SCHEDULING, message)
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
                node = _nominated(obj)
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
        try:
            return scheduler.run(pods)
        finally:
            nominator.clear()  # between runs the session holds bound and assumed pods only
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
            self.writes.submit((_write_key(unit[0].pod.raw), *nodes), self._bind_unit, unit)
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
                        self.wake.set()
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
                    self.metrics.queue.failed(
                        r.pod.uid, queue_metrics.BACKOFF if missed else queue_metrics.UNSCHEDULABLE, r.message
                    )
                    if plugins & set(self.session.scheduler.hints):
                        self.hinted[r.pod.key] = (r.pod, plugins)
            if obj is not None:
                self.writes.submit(_write_key(obj), self._record_failure, obj, r.message, r.reason)
                if _nominated(obj):  # it gave up its nominated node: PostFilter found no room (kube-scheduler's
                    # NominatedNodeName "" in ModeOverride)
                    self.writes.submit(_write_key(obj), self._nominate, obj, None)

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
            self.writes.submit(_write_key(victim.raw), self._evict, victim, by.pod, str(by.node))
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
                    self.metrics.queue.failed(d.pod.uid, queue_metrics.UNSCHEDULABLE, result.message)
                    self.writes.submit(_write_key(obj), self._nominate, obj, d.node)
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
        if _nominated(obj) not in ("", d.node):
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

    def _pending_gauge(self) -> None:
        with self.lock:
            # Gang members waiting for their gang (Coscheduling's PreEnqueue) are gated, as scheduling-gated pods
            # are, and counted there only.
            waiting = len(self.waiting.keys() & self.unschedulable.keys())
            self.metrics.pending_pods.labels("active").set(len(self.new_pending))
            self.metrics.pending_pods.labels("backoff").set(len(self.backing_off))
            self.metrics.pending_pods.labels("unschedulable").set(len(self.unschedulable) - waiting)
            self.metrics.pending_pods.labels("gated").set(len(self.gated) + waiting)


# ---------------------------------------------------------------------------------------------- helpers


def _freeze_heap() -> None:
    """Collect once, then move every object alive into the collector's permanent generation (gc.freeze).

    The caches and the session of a 30,000-pod cluster are millions of objects, and CPython's full collection
    walks all of them (about 0.5 s per million here): under churn that ran every minute or so and stalled the
    loop (the p99 latency). Frozen objects are still freed by reference counting when dropped (pods deleted);
    only cycles among them would wait for the next rebuild, which unfreezes first."""
    gc.collect()
    gc.freeze()


_gang_key = gang.group_key_of  # the gang a pod's object belongs to, as gang.group_key reads a Pod


def _write_key(obj: JSON) -> str:
    """What API writes are ordered by: the gang (bound as one unit), else the pod."""
    meta = obj.get("metadata") or {}
    return _gang_key(obj) or f"{meta.get('namespace')}/{meta.get('name')}"


def _gang_member(obj: JSON) -> bool:
    return _gang_key(obj) is not None


def _same_placement(current: Pod, obj: JSON, node: str) -> bool:
    """Whether the session's pod already accounts ``obj``: the same pod on the same node, with the same spec
    and labels (what the accounting reads; the status and most metadata do not move it)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    if str(meta.get("uid")) != current.uid or spec.get("nodeName") != node:
        return False
    held = current.raw.get("spec") or {}
    return _labels(current.raw) == _labels(obj) and {**held, "nodeName": node} == spec


def _devices_guessed(pod: Pod) -> bool:
    """Bound by another scheduler without the devices annotation: its devices are the first free ones, a guess."""
    return bool((pod.raw.get("spec") or {}).get("nodeName")) and DEVICES_ANNOTATION not in (
        (pod.raw.get("metadata") or {}).get("annotations") or {}
    )


def _nominated(obj: JSON) -> str:
    return str((obj.get("status") or {}).get("nominatedNodeName") or "")


def _labels(obj: JSON) -> dict:
    return (obj.get("metadata") or {}).get("labels") or {}


def _same_content(old: JSON, new: JSON) -> bool:
    return (
        {k: v for k, v in old.items() if k not in ("metadata", "status")}
        == {k: v for k, v in new.items() if k not in ("metadata", "status")}
        and _labels(old) == _labels(new)
        and (old.get("metadata") or {}).get("annotations") == (new.get("metadata") or {}).get("annotations")
        and old.get("status") == new.get("status")
    )


def _node_changed(old: JSON, new: JSON) -> bool:
    """What scheduling reads of a node: spec, labels, annotations, capacity and allocatable."""
    o_meta, n_meta = old.get("metadata") or {}, new.get("metadata") or {}
    o_status, n_status = old.get("status") or {}, new.get("status") or {}
    return (
        old.get("spec") != new.get("spec")
        or o_meta.get("labels") != n_meta.get("labels")
        or o_meta.get("annotations") != n_meta.get("annotations")
        or o_status.get("allocatable") != n_status.get("allocatable")
        or o_status.get("capacity") != n_status.get("capacity")
    )


def _as_bound(obj: JSON, decision: Decision) -> JSON:
    """A pending pod's object as it will be once bound: nodeName and the chosen devices."""
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), **decision.annotations}
    return {**obj, "metadata": meta, "spec": {**(obj.get("spec") or {}), "nodeName": decision.node}}
