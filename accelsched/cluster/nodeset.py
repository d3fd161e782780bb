"""The node set changing under a ClusterState: a Node changed, joined or left, taken in place, and copies.

Live mode applies every cluster change to one long-lived state; a node event is rare next to pod churn, so each
of these rewrites every per-node array at one index and lets what is derived over all nodes (label columns,
masks, per-shape caches) be built again on first use. Kept apart from cluster/state.py, which is what a
scheduling cycle reads and changes (assume/forget), so that each module reads as one job. ClusterState takes
these functions as its methods (``state.add_node(node)``).
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from accelsched.api.objects import Node
from accelsched.cluster.devices import NodeDevices, is_device_resource

if TYPE_CHECKING:
    from accelsched.cluster.state import ClusterState

NO_PODS_PRIORITY = np.iinfo(np.int64).max  # min_priority of a node without pods

# The labels the scheduler's zone order is made of (framework.scheduler.zone_key): a change there reorders nodes.
ZONE_KEYS = (
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/region",
)


def update_node(state: ClusterState, node: Node) -> bool:
    """Take a changed Node (labels, taints, cordon, allocatable amounts) in place at its index; False when the
    change is one this cannot follow (then the state is rebuilt): a new resource, another device inventory
    (device resources, named devices, partitions, topology layout), other images, another zone.

    The base arrays change at that one node. What is derived from node labels and taints over all nodes
    (label columns, requirement and toleration masks, per-shape memos, node_values caches) is dropped for the
    keys that changed and rebuilt on first use: a vectorized pass per shape, once per node update, which is
    rare next to pod churn (heartbeats and conditions never get here)."""
    i = state.index.get(node.name)
    if i is None:
        return False
    old = state.nodes[i]
    if (
        set(node.allocatable) - set(state.res_index)
        or any(
            is_device_resource(r) and old.allocatable.get(r) != node.allocatable.get(r)
            for r in set(old.allocatable) | set(node.allocatable)
        )
        or old.device_ids != node.device_ids
        or old.layout is not None
        or node.layout is not None
        or old.partition is not None
        or node.partition is not None
        or old.images != node.images
        or any(old.labels.get(k) != node.labels.get(k) for k in ZONE_KEYS)
    ):
        return False
    state.nodes[i] = node
    column = np.zeros(len(state.resources), dtype=np.int64)
    for res, amount in node.allocatable.items():
        column[state.res_index[res]] = amount
    state.allocatable[:, i] = column
    state.free[:, i] = column - state.requested[:, i]
    state.unschedulable[i] = node.unschedulable
    state.any_unschedulable = bool(state.unschedulable.any())
    changed = {k for k in set(old.labels) | set(node.labels) if old.labels.get(k) != node.labels.get(k)}
    for key in changed:
        state._label_columns.pop(key, None)
    for req in [r for r in state._requirement_masks if r.key in changed]:
        del state._requirement_masks[req]
    if old.taints != node.taints:
        state._index_taints()
    state.memo.clear()
    state.epoch += 1  # node_values caches (scores per shape) start over: they may read labels or allocatable
    state.generation += 1
    state.touch(i)
    return True


def copy_state(state: ClusterState) -> ClusterState:
    """ClusterState.copy: a state that changes apart from this one. The web view's incremental what-if
    (ui/incremental.py) copies the state a run starts from (its bound pods admitted) instead of building it again
    from every object.

    Only what follows_node_set() allows is copied (no CPU/NUMA topology, partitions, DRA or storage objects:
    ValueError otherwise). The per-node arrays, the pods per node and the counts kept as pods come and go are
    copied; what is derived from them per request shape (label columns, masks, selector counts, node_values
    caches, memos) is left out and built again on first use, as trim_caches drops it (no decision changes).
    The Pod objects are shared: a caller that may change one (a re-admission) puts a copy in its place."""
    if not follows_node_set(state):
        raise ValueError("this cluster state keeps per-node state outside its arrays: it cannot be copied")
    new = copy.copy(state)
    new.nodes = list(state.nodes)
    new.index = dict(state.index)
    new.namespaces = dict(state.namespaces)
    new.res_index = dict(state.res_index)
    new.resources = list(state.resources)
    for name in ("names", "allocatable", "requested", "free", "nonzero_requested", "unschedulable",
                 "min_priority", "node_version"):  # fmt: skip
        setattr(new, name, getattr(state, name).copy())
    new.devices = [d.copy() for d in state.devices]
    new.pods_on = [dict(pods) for pods in state.pods_on]
    new.pod_node = dict(state.pod_node)
    new.bound_seq = dict(state.bound_seq)
    new._pods_by_label = {triple: dict(pods) for triple, pods in state._pods_by_label.items()}
    new.term_groups = {kind: {g: a.copy() for g, a in groups.items()} for kind, groups in state.term_groups.items()}
    new._port_nodes = {port: a.copy() for port, a in state._port_nodes.items()}
    new._port_ips = {port: a.copy() for port, a in state._port_ips.items()}
    new._images = dict(state._images)
    new._taint_nodes = dict(state._taint_nodes)
    new._taints = list(state._taints)
    new._label_columns, new._requirement_masks, new._toleration_masks = {}, {}, {}
    new._selector_counts, new._conditions_by_label, new._conditions_unindexed = {}, {}, []
    new._below, new.memo = {}, {}
    new._node_caches = OrderedDict()
    new.changes = state.changes.restarted(state.n)
    if state.volumes is not None:  # no storage objects: its per-node indexes start over, as _node_set_changed
        new.volumes = type(state.volumes)(state.volumes.storage, new)  # type: ignore[attr-defined]
    new.epoch += 1
    return new


def follows_node_set(state: ClusterState, node: Node | None = None) -> bool:
    """Whether a node joining or leaving can be taken in place (add_node, remove_node). Not with what keeps
    its own per-node state outside these arrays: a CPU/NUMA topology, device partitions, DRA objects, storage
    objects (their node masks); then the state is rebuilt."""
    storage = getattr(state.volumes, "storage", None)
    return (
        not state.has_topology
        and state.topology_index is None
        and not state.has_partitions
        and state.dra is None
        and (storage is None or not any(vars(storage).values()))
        and (node is None or (node.layout is None and node.partition is None))
    )


def add_node(state: ClusterState, node: Node, at: int | None = None) -> bool:
    """A node joined: inserted at index ``at`` (default n, where a rebuild from the cache, whose store appends
    it, puts it; a node replaced in place keeps its index), every per-node array given an empty column there.
    False when it cannot be taken in place (follows_node_set) or the name is known already."""
    if node.name in state.index or not follows_node_set(state, node):
        return False
    i = state.n if at is None else at
    for res in node.allocatable:
        if res not in state.res_index:
            state._add_resource(res)
    column = np.zeros(len(state.resources), dtype=np.int64)
    for res, amount in node.allocatable.items():
        column[state.res_index[res]] = amount
    state.nodes.insert(i, node)
    state.names = np.insert(state.names, i, np.array([node.name], dtype=object))
    state.allocatable = np.insert(state.allocatable, i, column, axis=1)
    state.requested = np.insert(state.requested, i, 0, axis=1)
    state.free = np.insert(state.free, i, column, axis=1)
    state.nonzero_requested = np.insert(state.nonzero_requested, i, 0, axis=1)
    state.unschedulable = np.insert(state.unschedulable, i, node.unschedulable)
    state.devices.insert(i, NodeDevices.for_node(node.allocatable, node.device_ids, None))
    state.pods_on.insert(i, {})
    state.min_priority = np.insert(state.min_priority, i, NO_PODS_PRIORITY)
    state.node_version = np.insert(state.node_version, i, 0)
    for priority, below in state._below.items():
        state._below[priority] = np.insert(below, i, 0, axis=1)
    _per_node_counts(state, lambda a: np.insert(a, i, 0))
    if i < state.n:
        for key, k in state.pod_node.items():
            if k >= i:
                state.pod_node[key] = k + 1
    state.nodes_added += 1
    _node_set_changed(state)
    return True


def remove_node(state: ClusterState, name: str) -> bool:
    """A node left: its column taken out of every per-node array, the nodes after it one index lower (their
    order kept, as in a rebuild). Its pods must have been taken off first (Scheduler.evict): a rebuild does
    not count pods bound to a node it does not have. False when it cannot be taken in place."""
    i = state.index.get(name)
    if i is None or state.pods_on[i] or not follows_node_set(state):
        return False
    del state.nodes[i]
    state.names = np.delete(state.names, i)
    state.allocatable = np.delete(state.allocatable, i, axis=1)
    state.requested = np.delete(state.requested, i, axis=1)
    state.free = np.delete(state.free, i, axis=1)
    state.nonzero_requested = np.delete(state.nonzero_requested, i, axis=1)
    state.unschedulable = np.delete(state.unschedulable, i)
    del state.devices[i]
    del state.pods_on[i]
    state.min_priority = np.delete(state.min_priority, i)
    state.node_version = np.delete(state.node_version, i)
    for priority, below in state._below.items():
        state._below[priority] = np.delete(below, i, axis=1)
    _per_node_counts(state, lambda a: np.delete(a, i))
    for key, node in state.pod_node.items():
        if node > i:
            state.pod_node[key] = node - 1
    state.nodes_removed += 1
    _node_set_changed(state)
    return True


def _per_node_counts(state: ClusterState, resize: Callable[[np.ndarray], np.ndarray]) -> None:
    """The counts kept per node as pods are assumed and forgotten (selector matches, affinity terms, host
    ports), resized to the new node set; the column a node leaves holds zeros (its pods are gone)."""
    for table in (state._selector_counts, *state.term_groups.values(), state._port_nodes, state._port_ips):
        for key, values in table.items():
            table[key] = resize(values)


def _node_set_changed(state: ClusterState) -> None:
    """What is derived from every node (label columns, taint and requirement masks, images, per-shape memos,
    node_values caches, the change log's indices) starts over, built again on first use."""
    state.n = len(state.nodes)
    state.index = {node.name: k for k, node in enumerate(state.nodes)}
    state.any_unschedulable = bool(state.unschedulable.any())
    state._label_columns.clear()
    state._requirement_masks.clear()
    state._index_taints()
    state._index_images()
    state.memo.clear()
    state._node_caches.clear()
    # Readers behind the new log's start see every node (ChangeLog.__getitem__); the indices before it are void.
    state.changes = state.changes.restarted(state.n)
    if state.volumes is not None:  # no storage objects (follows_node_set): its per-node indexes start over
        state.volumes = type(state.volumes)(state.volumes.storage, state)  # type: ignore[attr-defined]
    state.epoch += 1
    state.generation += 1
