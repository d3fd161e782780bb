"""The live scheduler's cache event handlers: what each informer event does to the queue pools and the session."""

from __future__ import annotations

import logging
import time

from accelsched.api.objects import Node
from accelsched.live import convert as live_convert
from accelsched.live import dra as live_dra
from accelsched.live import metrics as queue_metrics
from accelsched.live import nodehint
from accelsched.live.informer import object_key
from accelsched.live.kube import JSON
from accelsched.live.podjson import (
    gang_member,
    labels,
    node_changed,
    nominated,
    same_content,
)
from accelsched.live.writes import Decision

log = logging.getLogger("accelsched.live")


class EventHandlers:
    """LiveScheduler's informer callbacks (called under its lock by the informers' threads): they sort pods into the
    queue pools (new, unschedulable, backing off, gated), mark what the session must follow in place or rebuild,
    and wake the loop."""

    def _on_node(self, kind: str, obj: JSON, old: JSON | None) -> None:
        if kind == "MODIFIED" and old is not None and not node_changed(old, obj):
            return  # heartbeats and condition updates do not move a pod
        self._event = queue_metrics.node_event(kind, old, obj)  # the label of the pods it wakes (metrics)
        name = str((obj.get("metadata") or {}).get("name"))
        if kind == "MODIFIED" and old is not None:
            # Labels, taints, a cordon, allocatable: taken in place at that node next round (_apply_node_changes).
            self._changed_nodes.setdefault(name, False)
        else:
            # Joined or left: taken in place too (ClusterState.add_node / remove_node), at the end of the order,
            # where the informer's store puts it.
            self._changed_nodes.pop(name, None)
            self._changed_nodes[name] = True
        self._wake_unschedulable(node_event=True, node=None if kind == "DELETED" else live_convert.one_node(obj))

    def _on_other(self, kind: str, obj: JSON, old: JSON | None, why: str = "") -> None:
        """An object changed that the session does not follow in place: rebuilt (``why``: what the rebuild's log
        line adds to the kind and the change)."""
        if kind == "MODIFIED" and old is not None and same_content(old, obj):
            return
        self._event = queue_metrics.resource_event(kind, obj)
        self._cluster_event(f"{obj.get('kind') or 'object'} {kind.lower()}" + (f": {why}" if why else ""))

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

    def _wake_unschedulable(
        self, pod_deleted: bool = False, node_event: bool = False, node: Node | None = None
    ) -> None:
        """Move the unschedulable pods to backoff; after a pod's deletion (``pod_deleted``) only those it may help:
        not a pod that every filter that rejected it rejects by the node object alone (the offline queue's
        hint, Scheduler.pod_delete_may_help), which would fail again the same way. After a node event
        (``node_event``; ``node``: the node as it is now, None when it left or cannot be read) not a pod whose
        node-object filters that node does not pass either (live.nodehint)."""
        self._room_freed()
        woken = self.unschedulable
        if pod_deleted and self.rejected_by and self.session is not None:
            may_help = self.session.scheduler.pod_delete_may_help
            woken = {key: obj for key, obj in woken.items() if may_help(*self._rejection(key, obj)[:2])}
        elif node_event and self.rejected_by and self.session is not None:
            static = self.session.scheduler.static_filters
            woken = {}
            for key, obj in self.unschedulable.items():
                name, plugins, signature = self._rejection(key, obj)
                if nodehint.may_help(plugins, static.get(name, frozenset()), signature, node):
                    woken[key] = obj
        self._count_moves(woken, getattr(self, "_event", queue_metrics.ASSIGNED_POD_DELETE))
        self.backing_off.update(woken)
        if woken is self.unschedulable:
            self.unschedulable.clear()
        else:
            for key in woken:
                del self.unschedulable[key]
        self.wake.set()

    def _rejection(self, key: str, obj: JSON) -> tuple[str, frozenset[str], nodehint.Signature | None]:
        """(schedulerName, the plugins that rejected it, what it needs of a node) of an unschedulable pod; no
        plugins when unknown."""
        uid, plugins, signature = self.rejected_by.get(key, ("", frozenset(), None))
        if uid != str((obj.get("metadata") or {}).get("uid")):
            plugins = frozenset()
        return str((obj.get("spec") or {}).get("schedulerName") or ""), plugins, signature

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
            self.rejected_by.pop(key, None)
            self.backoff.forget(uid)
            self.parsed.forget(uid)
            self.metrics.queue.forget(uid)
            decision = self.assumed.get(key)
            freed = False
            if decision is not None and decision.pod.uid == uid:
                del self.assumed[key]
                self._pod_changed(key, obj, wake=False)  # its reservation is free again
                freed = True
            if node or uid in self.in_flight:
                self._pod_changed(key, obj, wake=False)  # its capacity is free again
                freed = True
            if freed:
                self._wake_unschedulable(pod_deleted=True)  # kube-scheduler's AssignedPodDelete, with its hint
            elif nominated(obj):
                self._wake_unschedulable()  # the room its nomination held
            elif gang_member(obj):
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
            if old is None or (old.get("spec") or {}) != (obj.get("spec") or {}) or labels(old) != labels(obj):
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
        if old is not None and (old.get("spec") or {}) == obj.get("spec") and labels(old) == labels(obj):
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
            if nominated(old) not in ("", nominated(obj)):
                self._wake_unschedulable()  # the room its nomination held is free for others again
            return
        for pool in (self.unschedulable, self.backing_off):
            pool.pop(key, None)
        self.new_pending[key] = obj
        event = queue_metrics.GATES_ELIMINATED if was_gated else self._event
        self.metrics.queue.moved(uid, queue_metrics.ACTIVE, event)
        if gang_member(obj):
            self._cluster_event("gang member added")  # a new member: its waiting gang may now have minMember pods
        self.wake.set()

    def _index_pod(self, kind: str, key: str, obj: JSON) -> None:
        """The two sets a round reads besides the due pods, kept by the events rather than found by a scan of
        every pod each round (30,000 pods made that scan most of a round's time): pending pods carrying a
        nomination, and the nodes of pods being deleted (graceful termination)."""
        node = (obj.get("spec") or {}).get("nodeName")
        if kind != "DELETED" and not node and nominated(obj):
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
