"""NodeResourcesFit (filter + LeastAllocated/MostAllocated/RequestedToCapacityRatio) and
NodeResourcesBalancedAllocation: the plugins that read node capacity.

Filtering touches only the rows of the resources the pod asks for (design principle 3).
"""

from __future__ import annotations

import abc
import functools
import itertools
import math
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState, nonzero_requests
from accelsched.dra import extended
from accelsched.dra.model import DeviceClass
from accelsched.errors import InputError
from accelsched.framework.interface import (
    MAX_NODE_SCORE,
    PASS,
    SKIP,
    SUCCESS,
    CycleState,
    FilterResult,
    NodeExplanation,
    NodeScore,
    Status,
)

FIT_NAME = "NodeResourcesFit"
BALANCED_NAME = "NodeResourcesBalancedAllocation"
ERR_TOO_MANY_PODS = "Too many pods"
LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
DEFAULT_RESOURCES = ((quantity.CPU, 1), (quantity.MEMORY, 1))
# RequestedToCapacityRatio shapes score 0..10, scaled to 0..MAX_NODE_SCORE (MaxCustomPriorityScore).
MAX_CUSTOM_PRIORITY_SCORE = 10


def insufficient(resource: str) -> str:
    return ERR_TOO_MANY_PODS if resource == quantity.PODS else f"Insufficient {resource}"


def _order(resource: str) -> tuple[int, str]:
    """fitsRequest reports pods first, then cpu, memory, ephemeral-storage, then scalar resources by name."""
    core = {quantity.PODS: 0, quantity.CPU: 1, quantity.MEMORY: 2, quantity.EPHEMERAL_STORAGE: 3}
    return (core.get(resource, 4), resource)


def _rows(pod: Pod, cluster: ClusterState) -> list[tuple[int, int]]:
    return sorted(cluster.request_vector(pod), key=lambda ra: _order(cluster.resources[ra[0]]))


@dataclass(frozen=True)
class _Strategy:
    kind: str
    resources: tuple[tuple[str, int], ...]
    shape: tuple[tuple[int, int], ...] = ()


def parse_strategy(args: dict, where: str) -> _Strategy:
    """NodeResourcesFitArgs.scoringStrategy, validated as kube-scheduler does."""
    strategy = args.get("scoringStrategy") or {}
    if not isinstance(strategy, dict):
        raise InputError("must be a mapping", obj=where, field="scoringStrategy")
    unknown = set(strategy) - {"type", "resources", "requestedToCapacityRatio"}
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}", obj=where, field="scoringStrategy")
    kind = strategy.get("type", LEAST_ALLOCATED)
    if kind not in (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO):
        raise InputError(
            f"unknown type {kind!r} (LeastAllocated, MostAllocated, RequestedToCapacityRatio)",
            obj=where,
            field="scoringStrategy.type",
        )
    resources = parse_weighted_resources(strategy.get("resources"), where, "scoringStrategy.resources")
    shape: tuple[tuple[int, int], ...] = ()
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        raw = (strategy.get("requestedToCapacityRatio") or {}).get("shape") or []
        points = []
        for i, point in enumerate(raw):
            try:
                u, s = int(point["utilization"]), int(point["score"])
            except (KeyError, TypeError, ValueError):
                raise InputError(
                    "needs integer utilization and score",
                    obj=where,
                    field=f"scoringStrategy.requestedToCapacityRatio.shape[{i}]",
                ) from None
            if not 0 <= u <= 100 or not 0 <= s <= MAX_CUSTOM_PRIORITY_SCORE:
                raise InputError(
                    "utilization must be 0..100 and score 0..10",
                    obj=where,
                    field=f"scoringStrategy.requestedToCapacityRatio.shape[{i}]",
                )
            points.append((u, s))
        if not points or any(b[0] <= a[0] for a, b in itertools.pairwise(points)):
            raise InputError(
                "must list points with strictly increasing utilization",
                obj=where,
                field="scoringStrategy.requestedToCapacityRatio.shape",
            )
        shape = tuple(points)
    return _Strategy(kind, resources, shape)


def parse_weighted_resources(raw: object, where: str, field: str) -> tuple[tuple[str, int], ...]:
    if raw is None:
        return DEFAULT_RESOURCES
    if not isinstance(raw, list) or not raw:
        raise InputError("must be a non-empty list of {name, weight}", obj=where, field=field)
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not item.get("name"):
            raise InputError("needs a name", obj=where, field=f"{field}[{i}]")
        weight = item.get("weight", 1)
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            raise InputError(
                f"weight must be an integer in 1..100, got {weight!r}", obj=where, field=f"{field}[{i}].weight"
            )
        out.append((str(item["name"]), weight))
    return tuple(out)


def _requested_after(
    pod: Pod, cluster: ClusterState, resource: str, feasible: np.ndarray, nonzero: bool
) -> tuple[np.ndarray, np.ndarray, int]:
    """(allocatable, requested including the pod, the pod's request) on the feasible nodes for one resource."""
    row = cluster.column(resource)
    if row is None:
        zero = np.zeros(len(feasible), dtype=np.int64)
        if cluster.dra is not None:
            return _dra_usage(pod, cluster, resource, feasible, zero, zero)
        return zero, zero, 0
    alloc = cluster.allocatable[row, feasible]
    if nonzero and resource in (quantity.CPU, quantity.MEMORY):
        which = 0 if resource == quantity.CPU else 1
        req = nonzero_requests(pod)[which]
        return alloc, cluster.nonzero_requested[which, feasible] + req, req
    req = pod.requests.get(resource, 0)
    if cluster.dra is not None:
        return _dra_usage(pod, cluster, resource, feasible, alloc, cluster.requested[row, feasible] + req)
    return alloc, cluster.requested[row, feasible] + req, req


def _dra_backed(cluster: ClusterState, resource: str) -> DeviceClass | None:
    """The DeviceClass that backs ``resource`` (DRAExtendedResource), for scoring it where no device plugin does."""
    dra = cluster.dra
    if dra is None or resource in (quantity.CPU, quantity.MEMORY, quantity.EPHEMERAL_STORAGE):
        return None
    return dra.extended.get(resource)


def _dra_usage(
    pod: Pod, cluster: ClusterState, resource: str, nodes: np.ndarray, alloc: np.ndarray, requested: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """calculateResourceAllocatableRequest for a resource a DeviceClass backs: on a node whose allocatable has none
    of it, the class's devices there are its allocatable and the allocated ones its requested."""
    req = pod.requests.get(resource, 0)
    cls = _dra_backed(cluster, resource) if req else None  # an unrequested scalar resource is not scored at all
    empty = np.flatnonzero(alloc == 0) if cls is not None else ()
    if not len(empty):
        return alloc, requested, req
    alloc, requested = alloc.copy(), requested.copy()
    for k in empty.tolist():
        capacity, used = extended.device_totals(cluster.dra, cls, int(nodes[k]))
        if capacity > 0:
            alloc[k], requested[k] = capacity, used + req
    return alloc, requested, req


def _broken_linear(shape: tuple[tuple[int, int], ...], utilization: np.ndarray) -> np.ndarray:
    """helper.BuildBrokenLinearFunction with scores scaled to 0..100, integer arithmetic as in Go."""
    out = np.empty(utilization.shape, dtype=np.int64)
    scaled = [(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape]
    out[:] = scaled[-1][1]
    done = np.zeros(utilization.shape, dtype=bool)
    for i, (u, s) in enumerate(scaled):
        here = ~done & (utilization <= u)
        if i == 0:
            out[here] = s
        else:
            u0, s0 = scaled[i - 1]
            out[here] = s0 + (s - s0) * (utilization[here] - u0) // (u - u0)
        done |= here
    return out


class _ResourceScore(abc.ABC):
    """A resource score: depends only on each node's usage and the request, so it is node-local (NodeScore)."""

    name: str

    @abc.abstractmethod
    def node_score(self, state: CycleState, pod: Pod, cluster: ClusterState) -> NodeScore:
        """The plugin's NodeScore for this pod's request shape (see _node_local)."""

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray | int:
        return self.node_score(state, pod, cluster).values(cluster)[feasible]

    @abc.abstractmethod
    def _score_nodes(self, pod: Pod, cluster: ClusterState, nodes: np.ndarray) -> np.ndarray:
        """Scores of the given nodes, vectorized."""

    @abc.abstractmethod
    def _score_node(self, pod: Pod, cluster: ClusterState, i: int) -> int:
        """One node's score in plain Python, equal to the vectorized one."""


def _node_local(
    plugin: _ResourceScore,
    cluster: ClusterState,
    pod: Pod,
    config: Hashable,
    resources: tuple[tuple[str, int], ...],
    nonzero: bool,
) -> NodeScore:
    """The plugin's NodeScore for this request shape, memoized on the cluster (one per shape and config)."""
    return cluster.memoized(
        (plugin.name, config, pod.shape, pod.nonzero),
        lambda: NodeScore(
            (plugin.name, config, _request_shape(pod, resources, nonzero)),
            lambda nodes: plugin._score_nodes(pod, cluster, nodes),
            lambda i: plugin._score_node(pod, cluster, i),
        ),
    )


class NodeResourcesFit(_ResourceScore):
    name = FIT_NAME

    def __init__(
        self, strategy: _Strategy, ignored: frozenset[str] = frozenset(), ignored_groups: frozenset[str] = frozenset()
    ) -> None:
        self.strategy = strategy
        self.ignored = ignored
        self.ignored_groups = ignored_groups

    def _checked(self, resource: str) -> bool:
        """ignoredResources / ignoredResourceGroups let an extended resource be managed elsewhere (an extender)."""
        if not quantity.is_extended(resource):
            return True
        return resource not in self.ignored and resource.split("/", 1)[0] not in self.ignored_groups

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        checks = self.checks(pod, cluster)  # may add a zero row for a resource no node has: read free after it
        if cluster.dra is not None and self.dra_rows(pod, cluster):
            return self._filter_with_dra(pod, cluster, checks)
        free = cluster.free

        def fits(nodes: np.ndarray) -> np.ndarray:
            ok = np.ones(len(nodes), dtype=bool)
            for row, amount, _ in checks:
                ok &= free[row, nodes] >= amount
            return ok

        def fits_one(node: int) -> bool:
            return all(free[row, node] >= amount for row, amount, _ in checks)

        # Whether each node fits changes only where a pod was bound: kept per request shape, updated there.
        if cluster.node_values((FIT_NAME, "fits", self.ignored, self.ignored_groups, pod.shape), fits, fits_one).all():
            return PASS
        result = FilterResult()
        allocatable = cluster.allocatable
        for row, amount, reason in checks:
            short = free[row] < amount
            if row == cluster.res_index.get(quantity.PODS):
                result.reject(reason, short)  # "Too many pods" is never unresolvable
                continue
            # fitsRequest's InsufficientResource.Unresolvable: the request exceeds the node's allocatable, so no
            # eviction can make room (a node without the resource at all included): UnschedulableAndUnresolvable.
            never = allocatable[row] < amount
            result.reject(reason, short & ~never)
            result.reject(reason, never, resolvable=False)
        return result

    def dra_rows(self, pod: Pod, cluster: ClusterState) -> frozenset[int]:
        """The rows of checked resources a DeviceClass backs (DRAExtendedResource): on a node whose allocatable
        holds none of one, fitsRequest leaves it to DynamicResources (shouldDelegateResourceToDRA)."""
        dra = cluster.dra
        if dra is None:
            return frozenset()
        return cluster.memoized(
            (FIT_NAME, "dra", id(dra), self.ignored, self.ignored_groups, cluster.epoch, pod.shape),
            lambda: frozenset(
                row
                for row, _, _ in self.checks(pod, cluster)
                if cluster.resources[row] in dra.extended
                and extended.is_dra_extended_resource_name(cluster.resources[row])
            ),
        )

    def _filter_with_dra(self, pod: Pod, cluster: ClusterState, checks: list[tuple[int, int, str]]) -> FilterResult:
        """The filter for a pod with a resource DRA may serve: that resource is checked only where the node's
        allocatable lists some of it (the device plugin's), elsewhere it passes."""
        delegated = self.dra_rows(pod, cluster)
        free, allocatable = cluster.free, cluster.allocatable

        def fits(nodes: np.ndarray) -> np.ndarray:
            ok = np.ones(len(nodes), dtype=bool)
            for row, amount, _ in checks:
                here = free[row, nodes] >= amount
                ok &= here | (allocatable[row, nodes] <= 0) if row in delegated else here
            return ok

        def fits_one(node: int) -> bool:
            return all(
                free[row, node] >= amount or (row in delegated and allocatable[row, node] <= 0)
                for row, amount, _ in checks
            )

        key = (FIT_NAME, "fits", self.ignored, self.ignored_groups, pod.shape, delegated)
        if cluster.node_values(key, fits, fits_one).all():
            return PASS
        result = FilterResult()
        for row, amount, reason in checks:
            short = free[row] < amount
            if row == cluster.res_index.get(quantity.PODS):
                result.reject(reason, short)
                continue
            never = allocatable[row] < amount
            if row in delegated:
                served = allocatable[row] > 0
                short, never = short & served, never & served
            result.reject(reason, short & ~never)
            result.reject(reason, never, resolvable=False)
        return result

    def rejected_after_freeing(self, pod: Pod, cluster: ClusterState, freed: np.ndarray) -> FilterResult:
        """The filter as if ``freed`` (resource x node) were free too: nodes that would still lack room even
        with every lower-priority pod evicted, which DefaultPreemption then need not try."""
        result = FilterResult()
        delegated = self.dra_rows(pod, cluster) if cluster.dra is not None else frozenset()
        for row, amount, reason in self.checks(pod, cluster):
            short = cluster.free[row] + freed[row] < amount
            if row in delegated:
                short &= cluster.allocatable[row] > 0
            result.reject(reason, short)
        return result

    def checks(self, pod: Pod, cluster: ClusterState) -> list[tuple[int, int, str]]:
        """(row, amount, reason) per checked resource in fitsRequest order; memoized per request shape."""
        return cluster.memoized(
            (FIT_NAME, self.ignored, self.ignored_groups, cluster.epoch, pod.shape),
            lambda: [
                (row, amount, insufficient(cluster.resources[row]))
                for row, amount in _rows(pod, cluster)
                if amount > 0 and self._checked(cluster.resources[row])
            ],
        )

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        n = cluster.nodes[node].name
        out = NodeExplanation()
        delegated = self.dra_rows(pod, cluster) if cluster.dra is not None else frozenset()
        for row, amount in _rows(pod, cluster):
            free = int(cluster.free[row, node])
            if row in delegated and cluster.allocatable[row, node] <= 0:
                continue  # served by DRA devices here: DynamicResources explains it
            if amount > free:
                res = cluster.resources[row]
                alloc = int(cluster.allocatable[row, node])
                fmt = functools.partial(quantity.format_quantity, res)
                out.details.append(
                    f"{res}: the pod requests {fmt(amount)}, {n} has {fmt(free)} free of {fmt(alloc)} allocatable "
                    f"({fmt(amount - free)} short)"
                )
                if amount <= alloc:
                    out.remedies.append(f"{fmt(amount - free)} more {res} free on {n}")
                else:
                    out.details.append(f"{n} can never fit it: its {res} allocatable is {fmt(alloc)}")
        return out

    def node_score(self, state: CycleState, pod: Pod, cluster: ClusterState) -> NodeScore:
        return _node_local(self, cluster, pod, self.strategy, self.strategy.resources, nonzero=True)

    def _score_node(self, pod: Pod, cluster: ClusterState, i: int) -> int:
        """One node's score in plain Python: the same arithmetic as _score_nodes (tests hold them equal)."""
        total = weights = 0
        for (alloc, requested), weight in zip(
            _node_usage(pod, cluster, self.strategy.resources, i, True), self._weights, strict=True
        ):
            if alloc is None or alloc <= 0:
                continue
            if self.strategy.kind == LEAST_ALLOCATED:
                s = 0 if requested > alloc else (alloc - requested) * MAX_NODE_SCORE // alloc
            elif self.strategy.kind == MOST_ALLOCATED:
                s = min(requested, alloc) * MAX_NODE_SCORE // alloc
            else:
                util = np.array([min(requested, alloc) * MAX_NODE_SCORE // alloc], dtype=np.int64)
                s = int(_broken_linear(self.strategy.shape, util)[0])
                if s <= 0:
                    continue  # RequestedToCapacityRatio leaves a zero-scored resource out of the weights too
            total += s * weight
            weights += weight
        if not weights:
            return 0
        if self.strategy.kind == REQUESTED_TO_CAPACITY_RATIO:
            return (2 * total + weights) // (2 * weights)  # math.Round of the mean: half away from zero
        return total // weights

    @property
    def _weights(self) -> list[int]:
        return [w for _, w in self.strategy.resources]

    def _score_nodes(self, pod: Pod, cluster: ClusterState, nodes: np.ndarray) -> np.ndarray:
        total = np.zeros(len(nodes), dtype=np.int64)
        weights = np.zeros(len(nodes), dtype=np.int64)
        for res, weight in self.strategy.resources:
            if quantity.is_extended(res) and not pod.requests.get(res):
                continue  # scalar resources the pod does not request do not count (calculateResourceAllocatableRequest)
            alloc, requested, _ = _requested_after(pod, cluster, res, nodes, nonzero=True)
            has = alloc > 0
            safe = np.where(has, alloc, 1)
            if self.strategy.kind == LEAST_ALLOCATED:
                s = np.where(requested > alloc, 0, (alloc - requested) * MAX_NODE_SCORE // safe)
            elif self.strategy.kind == MOST_ALLOCATED:
                s = np.minimum(requested, alloc) * MAX_NODE_SCORE // safe
            else:
                s = _broken_linear(self.strategy.shape, np.minimum(requested, alloc) * MAX_NODE_SCORE // safe)
                has &= s > 0  # RequestedToCapacityRatio leaves a zero-scored resource out of the weights too
            total += np.where(has, s * weight, 0)
            weights += np.where(has, weight, 0)
        safe_weights = np.maximum(weights, 1)
        if self.strategy.kind == REQUESTED_TO_CAPACITY_RATIO:
            mean = (2 * total + safe_weights) // (2 * safe_weights)  # math.Round of the mean: half away from zero
        else:
            mean = total // safe_weights
        return np.where(weights > 0, mean, 0)


def _request_shape(pod: Pod, resources: tuple[tuple[str, int], ...], nonzero: bool) -> tuple[int, ...]:
    """What a resource score reads of the pod: its request of each scored resource."""
    cpu, mem = (
        nonzero_requests(pod)
        if nonzero
        else (pod.requests.get(quantity.CPU, 0), pod.requests.get(quantity.MEMORY, 0))
    )
    return tuple(
        cpu if res == quantity.CPU else mem if res == quantity.MEMORY else pod.requests.get(res, 0)
        for res, _ in resources
    )


def _node_usage(
    pod: Pod, cluster: ClusterState, resources: tuple[tuple[str, int], ...], i: int, nonzero: bool
) -> list[tuple[int | None, int]]:
    """Per scored resource on node i: (allocatable, requested including the pod); None where it does not count."""
    key = ("usage-plan", resources, nonzero, pod.shape, pod.nonzero, cluster.epoch)
    plan = cluster.memoized(key, lambda: _usage_plan(pod, cluster, resources, nonzero))
    usage = [
        (None, 0) if step is None else (int(cluster.allocatable[step[0], i]), int(step[1][step[2], i]) + step[3])
        for step in plan  # type: ignore[union-attr]
    ]
    if cluster.dra is not None:
        for k, (res, _) in enumerate(resources):
            cls = _dra_backed(cluster, res) if pod.requests.get(res) and not usage[k][0] else None
            if cls is not None:
                capacity, used = extended.device_totals(cluster.dra, cls, i)
                if capacity > 0:
                    usage[k] = (capacity, used + pod.requests[res])
    return usage


def _usage_plan(
    pod: Pod, cluster: ClusterState, resources: tuple[tuple[str, int], ...], nonzero: bool
) -> list[tuple[int, np.ndarray, int, int] | None]:
    """Where _node_usage reads each resource: (allocatable row, requested matrix, its row, the pod's amount)."""
    plan: list[tuple[int, np.ndarray, int, int] | None] = []
    cpu, mem = nonzero_requests(pod)
    for res, _ in resources:
        row = cluster.res_index.get(res)
        if row is None or (quantity.is_extended(res) and not pod.requests.get(res)):
            plan.append(None)
        elif nonzero and res in (quantity.CPU, quantity.MEMORY):
            which = 0 if res == quantity.CPU else 1
            plan.append((row, cluster.nonzero_requested, which, (cpu, mem)[which]))
        else:
            plan.append((row, cluster.requested, row, pod.requests.get(res, 0)))
    return plan


def _balance(fractions: list[float]) -> int:
    """balancedResourceScore: (1 - the fractions' standard deviation) x 100, truncated; two fractions take
    |a - b| / 2, as Go computes it, and fewer than two give 0 deviation."""
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        total = 0.0
        for f in fractions:
            total = total + (f - mean) * (f - mean)
        std = math.sqrt(total / len(fractions))
    else:
        std = 0.0
    return int((1 - std) * MAX_NODE_SCORE)


def _balance_nodes(fractions: np.ndarray) -> np.ndarray:
    """_balance over the columns of a (resources x nodes) matrix, NaN where a node does not count a resource."""
    valid = ~np.isnan(fractions)
    count = valid.sum(axis=0)
    std = np.zeros(fractions.shape[1])
    if fractions.shape[0] >= 2:
        ordered = np.sort(fractions, axis=0)  # NaN last: a node's counted fractions come first, in some order
        two = count == 2
        std[two] = np.abs((ordered[0, two] - ordered[1, two]) / 2)
        many = count > 2
        if many.any():
            part = np.where(valid[:, many], fractions[:, many], 0.0)
            mean = part.sum(axis=0) / count[many]
            dev = np.where(valid[:, many], (part - mean) * (part - mean), 0.0)
            std[many] = np.sqrt(dev.sum(axis=0) / count[many])
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


class NodeResourcesBalancedAllocation(_ResourceScore):
    """Prefers the nodes whose balance across resources the pod improves most (1.36's balancedResourceScorer):
    ``50 + (50 + balance with the pod - balance without it) / 2``, so a pod that keeps a node as balanced as it was
    scores about 75, one that evens it out up to 100, one that unbalances it down to 50."""

    name = BALANCED_NAME

    def __init__(self, resources: tuple[tuple[str, int], ...]) -> None:
        self.resources = resources

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> Status:
        if not any(pod.requests.get(r) for r, _ in self.resources):
            return SKIP  # isBestEffortPod: a pod that requests none of the resources is not scored
        return SUCCESS

    def node_score(self, state: CycleState, pod: Pod, cluster: ClusterState) -> NodeScore:
        return _node_local(self, cluster, pod, self.resources, self.resources, nonzero=False)

    @staticmethod
    def _improvement(with_pod: np.ndarray | int, without_pod: np.ndarray | int) -> np.ndarray | int:
        # Both balances lie in [50, 100], so the numerator is never negative and // is Go's truncating division.
        return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + with_pod - without_pod) // 2

    def _score_node(self, pod: Pod, cluster: ClusterState, i: int) -> int:
        """One node's score in plain Python: the same arithmetic as _score_nodes (tests hold them equal)."""
        usage = _node_usage(pod, cluster, self.resources, i, False)
        counted = [(a, r, r - req) for (a, r), req in zip(usage, self._pod_amounts(pod), strict=True) if a]
        with_pod = _balance([min(r / a, 1.0) for a, r, _ in counted])
        without_pod = _balance([min(before / a, 1.0) for a, _, before in counted])
        return int(self._improvement(with_pod, without_pod))

    def _pod_amounts(self, pod: Pod) -> list[int]:
        return [pod.requests.get(res, 0) for res, _ in self.resources]

    def _score_nodes(self, pod: Pod, cluster: ClusterState, nodes: np.ndarray) -> np.ndarray:
        after, before = [], []
        for res, _ in self.resources:
            if quantity.is_extended(res) and not pod.requests.get(res):
                continue  # an extended resource the pod does not request is not scored
            alloc, requested, req = _requested_after(pod, cluster, res, nodes, nonzero=False)
            counted = alloc > 0
            scale = np.maximum(alloc, 1)
            after.append(np.where(counted, np.minimum(requested / scale, 1.0), np.nan))
            before.append(np.where(counted, np.minimum((requested - req) / scale, 1.0), np.nan))
        if not after:
            return np.full(len(nodes), self._improvement(MAX_NODE_SCORE, MAX_NODE_SCORE), dtype=np.int64)
        return self._improvement(_balance_nodes(np.vstack(after)), _balance_nodes(np.vstack(before)))


def new_fit(args: dict, handle: object) -> NodeResourcesFit:
    unknown = set(args) - {"scoringStrategy", "ignoredResources", "ignoredResourceGroups"}
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}", obj=f"pluginConfig {FIT_NAME}", field="args")
    ignored = args.get("ignoredResources") or []
    groups = args.get("ignoredResourceGroups") or []
    for field, value in (("ignoredResources", ignored), ("ignoredResourceGroups", groups)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InputError("must be a list of strings", obj=f"pluginConfig {FIT_NAME}", field=f"args.{field}")
    return NodeResourcesFit(parse_strategy(args, f"pluginConfig {FIT_NAME}"), frozenset(ignored), frozenset(groups))


def new_balanced(args: dict, handle: object) -> NodeResourcesBalancedAllocation:
    unknown = set(args) - {"resources"}
    if unknown:
        raise InputError(
            f"unknown field(s) {', '.join(sorted(unknown))}", obj=f"pluginConfig {BALANCED_NAME}", field="args"
        )
    return NodeResourcesBalancedAllocation(
        parse_weighted_resources(args.get("resources"), f"pluginConfig {BALANCED_NAME}", "resources")
    )
