"""Columnar cluster state: arrays over nodes, kept up to date in place as pods are assumed and forgotten.

Everything a filter or score plugin needs is an array indexed by node: free and requested capacity per
resource, label codes per label key, taint masks, and counts of bound pods matching a label selector.
After a bind only one node changes, so every cached array is updated at that one index, never rebuilt:
the work per pod does not grow with the number of pods already bound (design principle 3).

What a scheduling cycle reads and changes is here; beside it, cluster/nodecache.py keeps node_values' caches and
the change log, cluster/podmatch.py the rules for which bound pods a selector or affinity term counts, and
cluster/nodeset.py takes a node changing, joining or leaving (and copies a state).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import DEFAULT_BIND_ALL_HOST_IP, HostPort, Namespace, Node, Pod, PodAffinityTerm
from accelsched.api.pod_objects import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST
from accelsched.api.selectors import (
    NO_EXECUTE,
    NO_SCHEDULE,
    LabelSelector,
    NodeSelectorTerm,
    Requirement,
    Taint,
    Toleration,
)
from accelsched.cluster import nodeset
from accelsched.cluster.devices import NodeDevices
from accelsched.cluster.nodecache import (
    NODE_CACHE_SIZE,
    SCALAR_UPDATE_LIMIT,
    BestNodes,
    ChangeLog,
    NodeCache,
    NodeFunction,
)
from accelsched.cluster.nodeset import NO_PODS_PRIORITY
from accelsched.cluster.podmatch import (
    ALL_NAMESPACES,
    Conditions,
    NamespaceFilter,
    TermGroup,
    index_key,
    pod_matches_all,
)

_MISSING = object()
CORE_RESOURCES = (quantity.CPU, quantity.MEMORY, quantity.EPHEMERAL_STORAGE, quantity.PODS)


@dataclass(frozen=True)
class LabelColumn:
    """One label key over all nodes: codes[i] indexes values, -1 where the node lacks the key."""

    codes: np.ndarray
    values: tuple[str, ...]

    @property
    def present(self) -> np.ndarray:
        return self.codes >= 0


# Caches keyed by what pending pods asked (selectors, tolerations, request shapes) grow with the shapes seen, not
# with the cluster: past this many entries they are dropped at a safe point and rebuilt on demand (trim_caches).
SHAPE_CACHE_LIMIT = 4096


def nonzero_requests(pod: Pod) -> tuple[int, int]:
    """(cpu, memory) as kube-scheduler's scoring counts them: the pod's own (per container, pod_objects) or, for a
    pod made in code, its request with the defaults where it has none."""
    if pod.nonzero is not None:
        return pod.nonzero
    return (
        pod.requests.get(quantity.CPU) or DEFAULT_MILLI_CPU_REQUEST,
        pod.requests.get(quantity.MEMORY) or DEFAULT_MEMORY_REQUEST,
    )


class ClusterState:
    """The snapshot every plugin reads. Mutated only through assume/forget (and bind, which is assume + record)."""

    def __init__(self, nodes: Sequence[Node], namespaces: Iterable[Namespace] = ()) -> None:
        self.nodes = list(nodes)
        self.n = len(self.nodes)
        self.index = {node.name: i for i, node in enumerate(self.nodes)}
        self.names = np.array([n.name for n in self.nodes], dtype=object)
        self.namespaces: dict[str, dict[str, str]] = {ns.name: ns.label_map() for ns in namespaces}

        self.res_index = {r: i for i, r in enumerate(CORE_RESOURCES)}
        for node in self.nodes:
            for res in node.allocatable:
                self.res_index.setdefault(res, len(self.res_index))
        self.resources: list[str] = list(self.res_index)
        self.allocatable = np.zeros((len(self.resources), self.n), dtype=np.int64)
        for i, node in enumerate(self.nodes):
            for res, amount in node.allocatable.items():
                self.allocatable[self.res_index[res], i] = amount
        self.requested = np.zeros_like(self.allocatable)
        self.free = self.allocatable.copy()
        # Requested cpu and memory counting request-less pods at the kube-scheduler defaults (scoring only).
        self.nonzero_requested = np.zeros((2, self.n), dtype=np.int64)

        self.unschedulable = np.array([n.unschedulable for n in self.nodes], dtype=bool)
        self.any_unschedulable = bool(self.unschedulable.any())
        self.has_topology = any(n.layout is not None for n in self.nodes)
        # Each state gets its own copy of a node's partition ledger: sessions over the same nodes stay apart.
        self.devices = [
            NodeDevices.for_node(n.allocatable, n.device_ids, n.partition.copy() if n.partition else None)
            for n in self.nodes
        ]
        self.has_partitions = any(n.partition is not None for n in self.nodes)
        self.pods_on: list[dict[str, Pod]] = [{} for _ in self.nodes]
        self.pod_node: dict[str, int] = {}
        # The lowest priority among each node's pods (int64 max when empty): nodes at or below a preemptor's
        # priority hold no victim for it, which DefaultPreemption reads without visiting any pod.
        self.min_priority = np.full(self.n, NO_PODS_PRIORITY, dtype=np.int64)
        self._below: dict[int, np.ndarray] = {}  # requested_below, per priority asked for, kept up to date
        # Bumped whenever anything of a node changes (pods, devices): per-node memos compare it to stay exact.
        self.node_version = np.zeros(self.n, dtype=np.int64)
        # The order pods were first bound (kept across an eviction that is undone): "started earlier" for
        # preemption, which reprieves the earlier of two equally important victims.
        self.bound_seq: dict[str, int] = {}
        self._next_seq = 0
        self._label_columns: dict[str, LabelColumn] = {}
        self._requirement_masks: dict[Requirement, np.ndarray] = {}
        self._toleration_masks: dict[tuple[tuple[Toleration, ...], tuple[str, ...]], np.ndarray] = {}
        self._index_taints()
        self._selector_counts: dict[Conditions, np.ndarray] = {}
        # Bound pods by (namespace, label key, value), and the cached conditions by the one such triple every pod
        # they match must carry (see podmatch.index_key): a new selector visits only its candidates, and a bind only the
        # conditions that could count it, instead of every pod or every condition (thousands of workloads).
        self._pods_by_label: dict[tuple[str, str, str], dict[str, Pod]] = {}
        self._conditions_by_label: dict[tuple[str, str, str], list[Conditions]] = {}
        self._conditions_unindexed: list[Conditions] = []
        # Existing pods' affinity terms, by kind: required_anti, required_affinity, preferred_affinity,
        # preferred_anti. Each group counts, per node, the bound pods that carry the term.
        self.term_groups: dict[str, dict[TermGroup, np.ndarray]] = {
            k: {} for k in ("required_anti", "required_affinity", "preferred_affinity", "preferred_anti")
        }
        self.generation = 0
        # Node indices in the order they changed (assume/forget): caches catch up by recomputing only these.
        self.changes = ChangeLog(self.n)
        self.epoch = 0  # bumped when a change touches every node (a new resource row)
        self._node_caches: OrderedDict[Hashable, NodeCache] = OrderedDict()
        # Small lookups plugins derive per request shape from this cluster's layout (one entry per shape).
        self.memo: dict[Hashable, object] = {}
        self.topology_index: object | None = None  # topology.alignment.TopologyIndex, built on first use
        self.volumes: object | None = None  # cluster.volumes.VolumeState: PVs, claims, per-node volumes
        self.dra: Any = None  # dra.state.DRAState when the run has DRA objects (engine.Session.start)
        # NodePorts: host ports in use, as NodeInfo.UsedPorts (a set per node: of two pods declaring one port, the
        # first to leave frees it, as in kube-scheduler). Per (hostIP, protocol, port) the nodes holding it, and per
        # (protocol, port) how many host IPs hold it on each node (a 0.0.0.0 request conflicts with any of them).
        self._port_nodes: dict[HostPort, np.ndarray] = {}
        self._port_ips: dict[tuple[str, int], np.ndarray] = {}
        # ImageLocality: per image name its size and the nodes listing it (the scheduler cache's imageStates; the
        # size is the first listing node's). Nodes do not change within a state, so neither do these.
        self._images: dict[str, tuple[int, list[int]]] = {}
        self._index_images()
        self.nodes_added = 0  # nodes joined and left in place (add_node / remove_node), for live mode's counters
        self.nodes_removed = 0

    def _index_taints(self) -> None:
        """The taints over all nodes and the nodes carrying each; the toleration masks built from them start over."""
        self._taints: list[Taint] = sorted({t for n in self.nodes for t in n.taints}, key=str)
        self._taint_nodes = {t: np.array([t in n.taints for n in self.nodes], dtype=bool) for t in self._taints}
        self.has_hard_taints = any(t.effect in (NO_SCHEDULE, NO_EXECUTE) for t in self._taints)
        self._toleration_masks.clear()

    def _index_images(self) -> None:
        self._images.clear()
        for i, node in enumerate(self.nodes):
            for image in node.images:
                for name in image.names:
                    holders = self._images.setdefault(name, (image.size_bytes, []))[1]
                    if not holders or holders[-1] != i:
                        holders.append(i)

    # ------------------------------------------------------------------------------------ resources

    def column(self, resource: str) -> int | None:
        return self.res_index.get(resource)

    def request_vector(self, pod: Pod) -> list[tuple[int, int]]:
        """(row, amount) for each resource the pod asks for, plus one pod slot."""
        out = [(self.res_index[quantity.PODS], 1)]
        for res, amount in pod.requests.items():
            row = self.res_index.get(res)
            if row is None:
                row = self._add_resource(res)
            out.append((row, amount))
        return out

    def memoized(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """What plugins derive once per request shape from this cluster's layout (NodeScores, check lists)."""
        value = self.memo.get(key, _MISSING)
        if value is _MISSING:
            value = self.memo[key] = build()
        return value

    def best_nodes(self, key: Hashable) -> list[int]:
        """The nodes at the maximum of a cached array (call right after node_values for ``key``); kept current
        by node_values from then on."""
        cache = self._node_caches[key]
        if cache.best is None:
            cache.best = BestNodes(cache.values)
        return cache.best.members

    def node_values(
        self, key: Hashable, compute: NodeFunction, compute_one: Callable[[int], int] | None = None
    ) -> np.ndarray:
        """Per-node values (e.g. a score for one request shape), kept current by recomputing changed nodes only.

        After a bind only one node changes, so a score that depends on the node's own state and the request
        costs one node's work per bind instead of a pass over every node (design principle 3).
        """
        cache = self._node_caches.get(key)
        if cache is not None:  # first, so that a compute reading another key's values cannot push this one out
            self._node_caches.move_to_end(key)
        # Behind by the nodes changed since, not by the changes: preemption's dry runs evict and restore pods on
        # a few nodes thousands of times, and counting those would rebuild every cached shape over every node.
        dirty = sorted(set(self.changes[cache.seen :])) if cache is not None and cache.epoch == self.epoch else None
        if cache is None or dirty is None or len(dirty) > self.n // 4:
            cache = NodeCache(compute(np.arange(self.n)), len(self.changes), self.epoch)
            self._node_caches[key] = cache
            if len(self._node_caches) > NODE_CACHE_SIZE:
                self._node_caches.popitem(last=False)
        elif dirty:
            if compute_one is not None and len(dirty) <= SCALAR_UPDATE_LIMIT:
                # numpy's per-call overhead dwarfs one node's arithmetic: plain Python is ~20x faster here.
                best = cache.best
                for i in dirty:
                    value = compute_one(i)
                    cache.values[i] = value
                    if best is not None and not best.update(i, value):
                        cache.best = best = None
            else:
                index = np.array(dirty, dtype=np.int64)
                cache.values[index] = compute(index)
                cache.best = None
            cache.seen = len(self.changes)
        return cache.values

    def _add_resource(self, res: str) -> int:
        """A resource no node advertises: a zero row, so every node reports Insufficient <res>."""
        self.epoch += 1
        self.resources.append(res)
        self.res_index[res] = len(self.resources) - 1
        zero = np.zeros((1, self.n), dtype=np.int64)
        self.allocatable = np.vstack([self.allocatable, zero])
        self.requested = np.vstack([self.requested, zero])
        self.free = np.vstack([self.free, zero])
        self._below.clear()
        return self.res_index[res]

    def requested_below(self, priority: int) -> np.ndarray:
        """Per resource and node, what pods of priority lower than ``priority`` request: what evicting every one
        of them would free. Built once per priority from the pods, then kept in step by assume/forget."""
        below = self._below.get(priority)
        if below is None:
            below = np.zeros_like(self.requested)
            for node, pods in enumerate(self.pods_on):
                for pod in pods.values():
                    if pod.priority < priority:
                        for row, amount in self.request_vector(pod):
                            below[row, node] += amount
            if len(self.resources) != below.shape[0]:  # request_vector added a row: build again
                return self.requested_below(priority)
            self._below[priority] = below
        return below

    # ------------------------------------------------------------------------------------ labels

    def labels(self, key: str) -> LabelColumn:
        col = self._label_columns.get(key)
        if col is None:
            values: dict[str, int] = {}
            codes = np.full(self.n, -1, dtype=np.int32)
            for i, node in enumerate(self.nodes):
                v = node.labels.get(key)
                if v is not None:
                    codes[i] = values.setdefault(v, len(values))
            col = LabelColumn(codes, tuple(values))
            self._label_columns[key] = col
        return col

    def requirement_mask(self, req: Requirement) -> np.ndarray:
        """Nodes satisfying one node-selector requirement, evaluated once per distinct label value."""
        mask = self._requirement_masks.get(req)
        if mask is None:
            col = self.labels(req.key)
            lut = np.array(
                [req.matches_value(False, None)] + [req.matches_value(True, v) for v in col.values], dtype=bool
            )
            mask = lut[col.codes + 1]
            self._requirement_masks[req] = mask
        return mask

    def name_requirement_mask(self, req: Requirement) -> np.ndarray:
        """A matchFields requirement on metadata.name (how DaemonSet pods are pinned): In/NotIn by index lookup,
        so pinning a pod does not walk every node."""
        if req.operator in ("In", "NotIn"):
            mask = np.zeros(self.n, dtype=bool)
            mask[[self.index[v] for v in req.values if v in self.index]] = True
            return mask if req.operator == "In" else ~mask
        return np.array([req.matches({"metadata.name": n.name}) for n in self.nodes], dtype=bool)

    def term_mask(self, term: NodeSelectorTerm) -> np.ndarray:
        mask = np.ones(self.n, dtype=bool)
        if not term.match_expressions and not term.match_fields:
            return ~mask
        for req in term.match_expressions:
            mask &= self.requirement_mask(req)
        for req in term.match_fields:
            mask &= self.name_requirement_mask(req)
        return mask

    def node_selector_mask(self, selector: dict[str, str]) -> np.ndarray:
        mask = np.ones(self.n, dtype=bool)
        for key, value in selector.items():
            mask &= self.requirement_mask(Requirement(key, "In", (value,)))
        return mask

    # ------------------------------------------------------------------------------------ taints

    @property
    def taints(self) -> list[Taint]:
        return self._taints

    def untolerated_mask(
        self, tolerations: tuple[Toleration, ...], effects: tuple[str, ...] = (NO_SCHEDULE, NO_EXECUTE)
    ) -> np.ndarray:
        """Nodes carrying at least one taint with one of ``effects`` that the tolerations do not tolerate."""
        key = (tolerations, effects)
        mask = self._toleration_masks.get(key)
        if mask is None:
            mask = np.zeros(self.n, dtype=bool)
            for taint in self._taints:
                if taint.effect in effects and not any(t.tolerates(taint) for t in tolerations):
                    mask |= self._taint_nodes[taint]
            self._toleration_masks[key] = mask
        return mask

    def untolerated_count(self, tolerations: tuple[Toleration, ...], effect: str) -> np.ndarray:
        counts = np.zeros(self.n, dtype=np.int64)
        for taint in self._taints:
            if taint.effect == effect and not any(t.tolerates(taint) for t in tolerations):
                counts += self._taint_nodes[taint]
        return counts

    # ------------------------------------------------------------------------------------ namespaces

    def namespace_labels(self, name: str) -> dict[str, str]:
        labels = self.namespaces.get(name)
        if labels is None:
            labels = {"kubernetes.io/metadata.name": name}
            self.namespaces[name] = labels
        return labels

    def resolve_namespaces(self, term: PodAffinityTerm, owner_namespace: str) -> NamespaceFilter:
        """The namespaces a pod affinity term looks at: its list, its namespaceSelector, or the owner's own."""
        if term.namespace_selector is not None and term.namespace_selector.empty:
            return ALL_NAMESPACES
        names = set(term.namespaces)
        if term.namespace_selector is not None:
            # Every bound pod's namespace is registered in _count, so this sees all namespaces in play.
            names.update(n for n, lab in self.namespaces.items() if term.namespace_selector.matches(lab))
        if not term.namespaces and term.namespace_selector is None:
            names.add(owner_namespace)
        return frozenset(names)

    def group_selects(self, group: TermGroup, pod: Pod) -> bool:
        """Whether a bound pod's affinity term (its group) selects ``pod``."""
        if group.selector is None or not group.selector.matches(pod.labels):
            return False
        if group.namespaces is None or pod.namespace in group.namespaces:
            return True
        return group.namespace_selector is not None and group.namespace_selector.matches(
            self.namespace_labels(pod.namespace)
        )

    # ------------------------------------------------------------------------------------ pod counts

    def selector_counts(self, selector: LabelSelector | None, namespaces: NamespaceFilter) -> np.ndarray:
        """Bound pods per node matching ``selector`` in ``namespaces``; built once, then kept current."""
        if selector is None:
            return np.zeros(self.n, dtype=np.int32)
        return self.match_counts(((selector, namespaces),))

    def match_counts(self, conditions: Conditions) -> np.ndarray:
        """Bound pods per node matching every (selector, namespaces) condition; cached and updated on assume/forget."""
        counts = self._selector_counts.get(conditions)
        if counts is None:
            counts = np.zeros(self.n, dtype=np.int32)
            key = index_key(conditions)
            if key is None:
                for i, pods in enumerate(self.pods_on):
                    counts[i] = sum(1 for p in pods.values() if pod_matches_all(p, conditions))
                self._conditions_unindexed.append(conditions)
            else:
                for p in self._pods_by_label.get(key, {}).values():
                    if pod_matches_all(p, conditions):
                        counts[self.pod_node[p.key]] += 1
                self._conditions_by_label.setdefault(key, []).append(conditions)
            self._selector_counts[conditions] = counts
        return counts

    def domain_counts(self, topology_key: str, per_node: np.ndarray) -> tuple[np.ndarray, LabelColumn]:
        """Sum a per-node count over the topology domains of ``topology_key``: (per-domain sums, the column)."""
        col = self.labels(topology_key)
        present = col.codes >= 0
        sums = np.bincount(col.codes[present], weights=per_node[present], minlength=len(col.values))
        return sums.astype(np.int64), col

    # ------------------------------------------------------------------------------------ host ports, images

    def port_conflicts(self, ports: Sequence[HostPort]) -> np.ndarray:
        """Nodes where any of ``ports`` conflicts with a port in use (HostPortInfo.CheckConflict): a 0.0.0.0
        request with the same protocol and port on any host IP, a specific IP with the same one or 0.0.0.0."""
        mask = np.zeros(self.n, dtype=bool)
        if not self._port_nodes:
            return mask
        for ip, protocol, port in ports:
            if ip == DEFAULT_BIND_ALL_HOST_IP:
                ips = self._port_ips.get((protocol, port))
                if ips is not None:
                    mask |= ips > 0
                continue
            for key in (HostPort(DEFAULT_BIND_ALL_HOST_IP, protocol, port), HostPort(ip, protocol, port)):
                held = self._port_nodes.get(key)
                if held is not None:
                    mask |= held
        return mask

    def used_ports(self, node: int) -> list[HostPort]:
        """The host ports in use on one node (explanations)."""
        return [port for port, held in self._port_nodes.items() if held[node]]

    def _use_ports(self, pod: Pod, node: int, add: bool) -> None:
        for port in pod.host_ports:
            held = self._port_nodes.get(port)
            if add:
                if held is None:
                    held = self._port_nodes[port] = np.zeros(self.n, dtype=bool)
                if not held[node]:
                    held[node] = True
                    ips = self._port_ips.get((port.protocol, port.port))
                    if ips is None:
                        ips = self._port_ips[(port.protocol, port.port)] = np.zeros(self.n, dtype=np.int32)
                    ips[node] += 1
            elif held is not None and held[node]:
                held[node] = False
                self._port_ips[(port.protocol, port.port)][node] -= 1

    @property
    def has_images(self) -> bool:
        return bool(self._images)

    def image_nodes(self, name: str) -> list[int]:
        """The nodes whose status.images list ``name`` (empty when none does)."""
        entry = self._images.get(name)
        return entry[1] if entry is not None else []

    def scaled_image_score(self, name: str) -> int:
        """ImageLocality's scaledImageScore: the image's size scaled by the share of all nodes that have it, in
        float64 and truncated as Go's int64() conversion does."""
        size, holders = self._images[name]
        return int(float(size) * (len(holders) / self.n))

    # ------------------------------------------------------------------------------------ assume / forget

    def touch(self, node: int) -> None:
        """Record that something of ``node`` changed outside assume/forget (its devices), for the caches."""
        self.changes.append(node)
        self.node_version[node] += 1

    def assume(self, pod: Pod, node: int) -> None:
        """Account ``pod`` on ``node``: capacity, selector counts and term groups. Devices are separate."""
        if pod.key in self.pod_node:
            raise ValueError(f"pod {pod.key} is already on node {self.nodes[self.pod_node[pod.key]].name}")
        vector = self.request_vector(pod)
        for row, amount in vector:
            self.requested[row, node] += amount
            self.free[row, node] -= amount
        cpu, mem = nonzero_requests(pod)
        self.nonzero_requested[0, node] += cpu
        self.nonzero_requested[1, node] += mem
        self.pods_on[node][pod.key] = pod
        self.pod_node[pod.key] = node
        for k, v in pod.labels.items():
            self._pods_by_label.setdefault((pod.namespace, k, v), {})[pod.key] = pod
        if pod.key not in self.bound_seq:
            self.bound_seq[pod.key] = self._next_seq
            self._next_seq += 1
        if pod.priority < self.min_priority[node]:
            self.min_priority[node] = pod.priority
        if self._below:
            self._count_below(pod, vector, node, +1)
        if pod.host_ports:
            self._use_ports(pod, node, True)
        self._count(pod, node, +1)
        self.generation += 1
        self.changes.append(node)
        self.node_version[node] += 1

    def forget(self, pod: Pod, evicted: bool = False) -> None:
        """Take a pod off its node. ``evicted``: preemption, which may put it back, so it keeps its bind order."""
        node = self.pod_node.pop(pod.key)
        if not evicted:
            self.bound_seq.pop(pod.key, None)
        vector = self.request_vector(pod)
        for row, amount in vector:
            self.requested[row, node] -= amount
            self.free[row, node] += amount
        cpu, mem = nonzero_requests(pod)
        self.nonzero_requested[0, node] -= cpu
        self.nonzero_requested[1, node] -= mem
        del self.pods_on[node][pod.key]
        for k, v in pod.labels.items():
            triple = (pod.namespace, k, v)
            holders = self._pods_by_label.get(triple)
            if holders is not None:
                holders.pop(pod.key, None)
                if not holders:  # labels unique to a workload (pod-template-hash) must not outlive it
                    del self._pods_by_label[triple]
        if pod.priority == self.min_priority[node]:
            self.min_priority[node] = min((p.priority for p in self.pods_on[node].values()), default=NO_PODS_PRIORITY)
        if self._below:
            self._count_below(pod, vector, node, -1)
        if pod.host_ports:
            self._use_ports(pod, node, False)
        self._count(pod, node, -1)
        self.generation += 1
        self.changes.append(node)
        self.node_version[node] += 1

    def keep_bind_order(self, pods: Iterable[Pod]) -> None:
        """Number the binds of these accounted pods in this order (preemption's last tie-break), whatever order
        they were admitted in (a rebuild admits the pods that name their devices first)."""
        for pod in pods:
            if self.pod_node.get(pod.key) is not None:
                self.bound_seq[pod.key] = self._next_seq
                self._next_seq += 1

    # A Node changed, joined or left in place, and copies: cluster/nodeset.py (rare next to assume/forget).
    update_node = nodeset.update_node
    copy = nodeset.copy_state
    follows_node_set = nodeset.follows_node_set
    add_node = nodeset.add_node
    remove_node = nodeset.remove_node

    def trim_caches(self) -> bool:
        """Drop the per-shape caches when they hold more than SHAPE_CACHE_LIMIT entries (True when dropped).

        Call only between scheduling cycles (live mode: at the start of a round): the caches are derived from the
        nodes and pods alone and rebuilt on first use, so dropping them changes no decision, and a long-lived
        state's memory stays proportional to the cluster and the shapes in use, not to every shape ever seen."""
        sizes = (len(self._selector_counts), len(self._requirement_masks), len(self._toleration_masks), len(self.memo))
        if max(sizes) <= SHAPE_CACHE_LIMIT:
            return False
        self._selector_counts.clear()
        self._conditions_by_label.clear()
        self._conditions_unindexed.clear()
        self._requirement_masks.clear()
        self._toleration_masks.clear()
        self.memo.clear()
        self._below.clear()
        # node_values caches start over too: some are keyed by the identity of memoized objects, which new ones
        # may reuse once the old are gone.
        self.epoch += 1
        return True

    def _count_below(self, pod: Pod, vector: list[tuple[int, int]], node: int, delta: int) -> None:
        for priority, below in self._below.items():
            if pod.priority < priority:
                for row, amount in vector:
                    below[row, node] += delta * amount

    def _count(self, pod: Pod, node: int, delta: int) -> None:
        self.namespace_labels(pod.namespace)
        for conditions in self._conditions_unindexed:
            if pod_matches_all(pod, conditions):
                self._selector_counts[conditions][node] += delta
        for k, v in pod.labels.items():
            for conditions in self._conditions_by_label.get((pod.namespace, k, v), ()):
                if pod_matches_all(pod, conditions):
                    self._selector_counts[conditions][node] += delta
        if not pod.has_pod_affinity:
            return
        kinds = (
            ("required_anti", [(t, 1) for t in pod.required_anti_affinity]),
            ("required_affinity", [(t, 1) for t in pod.required_affinity]),
            ("preferred_affinity", [(w.term, w.weight) for w in pod.preferred_affinity]),
            ("preferred_anti", [(w.term, w.weight) for w in pod.preferred_anti_affinity]),
        )
        for kind, terms in kinds:
            groups = self.term_groups[kind]
            for term, weight in terms:
                selector = term.namespace_selector
                if selector is not None and selector.empty:
                    names: NamespaceFilter = ALL_NAMESPACES
                elif selector is None and not term.namespaces:
                    names = frozenset({pod.namespace})
                else:
                    names = frozenset(term.namespaces)
                group = TermGroup(
                    term.label_selector, names, term.topology_key, weight, selector if names is not None else None
                )
                counts = groups.get(group)
                if counts is None:
                    counts = groups[group] = np.zeros(self.n, dtype=np.int32)
                counts[node] += delta
                if delta < 0 and not counts.any():
                    del groups[group]
