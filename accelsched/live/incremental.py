"""The live scheduler's session kept current with the cache: changes applied in place, or a rebuild."""

from __future__ import annotations

import gc
import logging
import time

from accelsched.api import reader
from accelsched.api.objects import Pod
from accelsched.cluster.devices import first_free
from accelsched.cluster.volumes import claim_volumes
from accelsched.framework import gang
from accelsched.framework.scheduler import ScheduleResult
from accelsched.live import convert as live_convert
from accelsched.live import dra as live_dra
from accelsched.live.kube import JSON
from accelsched.live.podjson import (
    as_bound,
    devices_guessed,
    gang_key,
    same_placement,
)

log = logging.getLogger("accelsched.live")

FREEZE_EVERY = 30.0  # seconds between freezes of the young survivors (_tend_heap)
FULL_COLLECT_EVERY = 600.0  # seconds between full collections (cyclic garbage frozen meanwhile is freed then)
# Seconds after a full collection within which a rebuild skips its own: queued workloads rebuild the session once
# per admission round (a deep queue: several a second), and a full collection each time took most of the loop.
REBUILD_COLLECT_GAP = 5.0


class IncrementalState:
    """LiveScheduler's session upkeep: pod, node and claim changes taken into the session in place (as
    kube-scheduler's cache follows each event), and the rebuild from a snapshot of the cache when they cannot be."""

    def _pod_changed(self, key: str, obj: JSON, wake: bool = True) -> None:
        """A pod's accounting changed (deleted, bound by others, updated, a reservation undone): the session
        follows at the start of the next round, at that pod's node only. A member of a gang that is being
        scheduled (pending members, or held back waiting for more) changes its gang's member count, which
        the session takes from a rebuild."""
        group = gang_key(obj)
        if group is not None and group in self._gangs_in_progress:
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
            obj = as_bound(obj, decision)
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
        """Nodes changed by others taken in place: edits (labels, taints, cordon, allocatable) by
        ClusterState.update_node, nodes joining and leaving by add_node and remove_node, with the pods the cache
        has on a joined node accounted. False when one cannot be (a new resource or another device inventory or
        zone on an edit; a topology, partitions, DRA or storage objects, whose node masks read the labels): the
        session is rebuilt (counted in ``rebuilds``)."""
        with self.lock:
            if not self._changed_nodes or self.session is None:
                return True
            changes = [(name, joined, self.nodes.store.get(name)) for name, joined in self._changed_nodes.items()]
            self._changed_nodes.clear()
            storage = any(informer.store for informer in self.storage.values())
        session = self.session
        cluster = session.cluster
        node_set = [name for name, joined, _ in changes if joined]
        if node_set and (storage or session.scheduler.topologies or not cluster.follows_node_set()):
            with self.lock:
                self._invalidate(f"node {node_set[0]} joined or left with state not followed in place")
            return False
        joined: set[str] = set()
        for name, moved, obj in changes:
            node = live_convert.one_node(obj) if obj is not None and not storage else None
            if moved:
                ok = self._node_left(name) is not None and (
                    obj is None or (node is not None and cluster.add_node(node))
                )
                if ok and obj is not None:
                    joined.add(name)
            else:
                ok = node is not None and cluster.update_node(node)
                if not ok and node is not None and not storage and cluster.follows_node_set(node):
                    # What update_node does not follow (a new resource, another device inventory, images or
                    # zone): the node replaced at its own index, its pods taken off and accounted again.
                    at = self._node_left(name)
                    ok = at is not None and cluster.add_node(node, at if at >= 0 else None)
                    node_set.append(name)
                    joined.add(name)
            if not ok:
                with self.lock:
                    self._invalidate(f"node {name} changed in a way not followed in place")
                return False
            self.nodes_applied += 1
        if node_set:
            session.scheduler.nodes_changed()
            self.nodes_joined += len(joined)
        if joined:
            self._account_pods_on(joined)
        return True

    def _node_left(self, name: str) -> int | None:
        """Take a node out of the session: its pods off first, as a rebuild does not count pods bound to a node
        it does not have (they come back if it does, _account_pods_on). Its index (-1 when the session did not
        have it), or None when it cannot be taken out in place."""
        assert self.session is not None
        cluster, scheduler = self.session.cluster, self.session.scheduler
        i = cluster.index.get(name)
        if i is None:
            return -1
        for pod in list(cluster.pods_on[i].values()):
            scheduler.evict(pod)
            cluster.bound_seq.pop(pod.key, None)
        if not cluster.remove_node(name):
            return None
        self.nodes_left += 1
        return i

    def _account_pods_on(self, names: set[str]) -> None:
        """The cache's pods on nodes that just joined (bound before the node was seen, or ours, assumed there),
        accounted as a rebuild does: in the cache's order."""
        with self.lock:
            bound = {key for key, obj in self.pods.store.items() if (obj.get("spec") or {}).get("nodeName") in names}
            bound.update(key for key, decision in self.assumed.items() if decision.node in names)
            keys = [key for key in self.pods.store if key in bound] if len(bound) > 1 else list(bound)
            changes = [(key, self._desired(key)) for key in keys]
        for key, obj in changes:
            if obj is not None and key not in self.session.cluster.pod_node:  # type: ignore[union-attr]
                self._sync_pod(key, obj)

    def _sync_pod(self, key: str, obj: JSON | None) -> bool:
        """The session's accounting of one pod made equal to ``obj`` (None: holds nothing): taken off its node
        (capacity, devices, exclusive CPUs, counts) and put on the new one, as admit_bound does in a rebuild."""
        assert self.session is not None
        cluster, scheduler = self.session.cluster, self.session.scheduler
        node = cluster.pod_node.get(key)
        if node is not None:
            current = cluster.pods_on[node][key]
            if obj is not None and same_placement(current, obj, cluster.nodes[node].name):
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
        guessed = [p for p in cluster.pods_on[node].values() if devices_guessed(p) and set(p.devices) & set(pools)]
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

    def sync_session(self) -> bool:
        """Make the session current with the cache before deciding: the pod changes applied in place (the
        steady state), or a rebuild when something the session cannot follow in place changed (a node, a
        topology, a storage object, a gang in progress, a relist after an outage). True when it rebuilt."""
        self._sample_usage()  # admission fair sharing's clock moves on (live.queuedoor)
        with self.lock:
            rebuild = self.dirty or self.session is None
            if rebuild:
                snapshot, reason, self.dirty = self._snapshot(), self.rebuild_reason, False
                self._changed_pods.clear()  # the snapshot has them
                self._changed_nodes.clear()
                self._changed_claims.clear()
                self._additions.clear()
        if not rebuild and not (
            self._take_additions() and self._apply_pod_changes() and self._follow_workloads()
        ):
            with self.lock:
                snapshot, reason, self.dirty = self._snapshot(), self.rebuild_reason, False
                self._changed_pods.clear()
                self._changed_nodes.clear()
                self._changed_claims.clear()
                self._additions.clear()
            rebuild = True
        if rebuild:
            self._rebuild(snapshot, reason)
        elif self.session is not None:
            self.session.cluster.trim_caches()  # a session that lives for days keeps only the shapes in use
            if self.tend_heap:
                self._tend_heap()
        self._write_usage()  # the LocalQueues sampled get their status (live.queuedoor)
        return rebuild

    def _tend_heap(self) -> None:
        """Keep CPython's full collections short (api/reader.freeze_heap: under churn a full collection ran every
        minute or so and stalled the loop, the p99 latency): every FREEZE_EVERY seconds what survived the
        young generations is frozen too, so a full collection only walks what was allocated since; every
        FULL_COLLECT_EVERY seconds one full pass over everything frees the cycles frozen meanwhile (a pause of
        about 0.5 s per million objects, where kube-scheduler's Go collector runs concurrently)."""
        now = time.monotonic()
        if now - self._collected_at > FULL_COLLECT_EVERY:
            reader.freeze_heap()
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
                obj = as_bound(obj, decision)
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
                + (self.assumed_claims.unseen(informer.store) if kind == "ResourceClaim" else [])
                for kind, informer in self.dra.items()
            },
            kueue={
                kind: self._assumed_workloads() if kind == "Workload" else list(informer.store.values())
                for kind, informer in self.kueue.items()
            },
        )

    def _rebuild(self, snapshot: live_convert.Snapshot, reason: str = "") -> None:
        started = time.monotonic()
        # Back-to-back rebuilds leave the frozen heap as it is: the sessions built since the last freeze are young
        # and the collector's generations free them; the one frozen session waits for the next collecting rebuild.
        collect = self.tend_heap and (not self.rebuilds or started - self._collected_at > REBUILD_COLLECT_GAP)
        if collect:
            gc.unfreeze()  # the old session's cycles (cluster <-> volume state) must be collectable
        converted = live_convert.convert(snapshot, self.scheduler_names, workloads=self.workload_reads)
        self._with_door_state(converted.inputs)
        session = live_convert.start_session(converted, self.config, self.seed)
        self._admit_queues(session)  # before the pending pods are taken: it puts stopped pods back on their nodes
        for obj, error in converted.errors.items():  # after the session: admission may leave the queues out
            log.warning("object left out", extra={"object": obj, "error": error})
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
            waiting_gangs = {gang_key(self.pods.store.get(key) or {}) for key in converted.waiting}
        self._gangs_in_progress = (set(converted.groups) | waiting_gangs) - {None}  # type: ignore[operator]
        self.rebuilds += 1
        if collect:
            reader.freeze_heap()
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
