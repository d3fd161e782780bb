"""Kueue's admission fair sharing: a ClusterQueue's pending workloads ordered by their LocalQueue's decayed usage.

With ``admissionFairSharing`` in Kueue's Configuration (queues.config; the AdmissionFairSharing gate, beta and on
by default) and ``spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing`` on a ClusterQueue, Kueue
v0.19.2 orders that ClusterQueue's queue by (pkg/cache/queue/cluster_queue.go queueOrderingFunc):

1. the LocalQueue's usage (pkg/util/admissionfairsharing CalculateUsage): its decayed consumed resources plus
   the entry penalties not yet settled, each resource times its ``resourceWeights`` entry (1 when absent),
   summed, over the LocalQueue's ``spec.fairSharing.weight`` (+Inf for a weight of 0 or less): lower first;
2. then the base order: the workload waiting for its preemptions (sticky), higher priority, earlier creation.

Preemption reads the same usage (preemption/common CandidatesOrdering): among candidates in the preemptor's
ClusterQueue, those of the LocalQueue that used more go first.

The usage is kept per LocalQueue as Kueue's ledger keeps it (pkg/cache/queue/afs, the LocalQueue and Workload
controllers): it starts from ``status.fairSharing.admissionFairSharingStatus.consumedResources`` (seeded with
lastUpdate = now, as initializeAfsIfNeeded does: the time before is not decayed); each admission pushes an entry
penalty, ``alpha * requests`` with ``alpha = 1 - 0.5^(usageSamplingInterval / usageHalfLifeTime)``
(CalculateEntryPenalty), which counts at once in the order; the Workload controller settles it when the workload
turns Admitted, and the LocalQueue controller samples every ``usageSamplingInterval``, both decaying the consumed
resources toward the LocalQueue's admitted usage: ``(1 - alpha(elapsed)) * consumed + alpha(elapsed) * admitted``
(CalculateDecayedConsumed). A half-life of 0 resets the consumed resources to nothing at each sample.

On a still input (``schedule``, ``explain``) no time passes: the order reads the status plus this run's
penalties. ``simulate --queues`` moves the clock (``advance``), and so does live mode (``accelsched run``), which
keeps one ledger for the process as Kueue's queue manager does (``carried``: each session's admission goes on from
the last one's) and writes the sampled usage to the LocalQueues' status (live/localqueuestatus.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from accelsched.api import quantity
from accelsched.queues import api
from accelsched.queues.config import AdmissionFairSharing, KueueConfig
from accelsched.queues.workloads import Info


def alpha(elapsed: float, half_life: float) -> float:
    """calculateAlphaRate: the weight the new sample gets after ``elapsed`` seconds (0 with no half-life)."""
    if half_life == 0:
        return 0.0
    return 1.0 - math.pow(0.5, elapsed / half_life)


def _merge(a: Mapping[str, float], b: Mapping[str, float], fa: float = 1.0, fb: float = 1.0) -> dict[str, float]:
    """MergeResourceListKeepSum of ``a * fa`` and ``b * fb``."""
    out = {k: v * fa for k, v in a.items()}
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + v * fb
    return out


def entry_penalty(requests: Mapping[str, float], afs: AdmissionFairSharing) -> dict[str, float]:
    """CalculateEntryPenalty: what one admission adds to its LocalQueue's usage until it is settled."""
    a = alpha(afs.usage_sampling_interval, afs.usage_half_life)
    return {k: v * a for k, v in requests.items()}


def decayed(old: Mapping[str, float], new: Mapping[str, float], elapsed: float, half_life: float) -> dict[str, float]:
    """CalculateDecayedConsumed: ``old`` moved toward the usage ``new`` by ``alpha(elapsed)``."""
    a = alpha(elapsed, half_life)
    return _merge(old, new, 1 - a, a)


def usage(
    consumed: Mapping[str, float], penalty: Mapping[str, float], weight: float, resource_weights: Mapping[str, float]
) -> float:
    """CalculateUsage: the weighted sum of consumed plus penalty, over the LocalQueue's weight (+Inf for 0 or
    less: such a queue sorts last, never first)."""
    total = sum(resource_weights.get(k, 1.0) * v for k, v in sorted(_merge(consumed, penalty).items()))
    if weight <= 0:
        return math.inf
    return total / weight


def kueue_amount(name: str, amount: int) -> float:
    """An accelsched amount (Kueue's int64: millicores for cpu) as Kueue's AsApproximateFloat64 reads it."""
    return amount / 1000 if name == quantity.CPU else float(amount)


def total_requests(info: Info) -> dict[str, float]:
    """Workload.SumTotalRequests: every pod set's requests times its count."""
    out: dict[str, float] = {}
    for ps in info.pod_sets:
        for name, amount in ps.requests.items():
            out[name] = out.get(name, 0.0) + kueue_amount(name, amount * ps.count)
    return out


def enabled(config: KueueConfig, cq: api.ClusterQueue) -> bool:
    """afs.ResourceWeights: the Configuration has admissionFairSharing and the ClusterQueue asks for it."""
    return config.admission_fair_sharing is not None and cq.admission_mode == api.USAGE_BASED_AFS


@dataclass
class _Entry:
    """UsageLedgerEntry: the decayed consumed resources, the penalties not yet settled, and the decay's clock."""

    consumed: dict[str, float]
    last_update: float
    penalty: dict[str, float] = field(default_factory=dict)


class _Queued(Protocol):
    info: Info


Q = TypeVar("Q", bound=_Queued)


class Ledger:
    """AfsUsageLedger with its controllers: per LocalQueue (namespace/name), what its usage is computed from."""

    def __init__(self, afs: AdmissionFairSharing, local_queues: Mapping[str, api.LocalQueue], now: float = 0.0):
        self.afs = afs
        self.local_queues = local_queues
        self.now = now  # seconds on the caller's clock (still for schedule)
        self.entries: dict[str, _Entry] = {}
        # LocalQueues whose consumed resources the LocalQueue controller sampled since the caller last took them
        # (its first reconcile, then each usageSamplingInterval): what it wrote to their status, and when
        self.sampled: dict[str, tuple[dict[str, float], float]] = {}
        # Workloads (namespace/name) whose penalty was pushed for the quota they hold since: Kueue pushes one per
        # reservation (shouldApplyEntryPenalty: not for a workload that has one). A new session of live mode admits
        # from scratch what the last one admitted and did not place yet: the same reservation, not pushed again.
        self.reserved: set[str] = set()
        self._reserved_before: set[str] = set()  # the last session's, until admitted again in this one

    def _entry(self, key: str) -> _Entry:
        """initializeAfsIfNeeded: seeded from the LocalQueue's status, its clock starting now."""
        entry = self.entries.get(key)
        if entry is None:
            local = self.local_queues.get(key)
            entry = _Entry(dict(local.consumed) if local is not None else {}, self.now)
            self.entries[key] = entry
            self.sampled[key] = (dict(entry.consumed), entry.last_update)
        return entry

    def renew(self, afs: AdmissionFairSharing, local_queues: Mapping[str, api.LocalQueue], now: float) -> None:
        """Go on in a new session (live mode's rebuild) as Kueue's ledger outlives its cycles: the Configuration
        and LocalQueues as they are now; a LocalQueue gone loses its entry (its controller's Delete), one not seen
        yet is seeded from its status when first read."""
        self.afs, self.local_queues, self.now = afs, local_queues, max(self.now, now)
        self._reserved_before, self.reserved = self.reserved, set()
        for key in [k for k in self.entries if k not in local_queues]:
            del self.entries[key]
            self.sampled.pop(key, None)

    def take_sampled(self) -> list[tuple[str, dict[str, float], float]]:
        """The LocalQueues sampled since the last call, each with its last sample: the consumed resources and the
        time (what reconcileConsumedUsage writes to the status: consumedResources, lastUpdate)."""
        out = [(key, consumed, at) for key, (consumed, at) in self.sampled.items()]
        self.sampled.clear()
        return out

    def usage(self, key: str) -> float:
        """CalcLocalQueueFSUsage; a LocalQueue not in the input weighs 1 (ResolveLQWeight)."""
        entry = self._entry(key)
        local = self.local_queues.get(key)
        weight = float(local.fair_weight) if local is not None else 1.0
        return usage(entry.consumed, entry.penalty, weight, self.afs.resource_weights)

    def preemption_usage(self, config: KueueConfig) -> Callable[[Info, api.ClusterQueue], float | None]:
        """LocalQueueFSUsage as the snapshot gives it to preemption: a workload's LocalQueue usage, None in a
        ClusterQueue without admission fair sharing."""

        def usage_of(info: Info, cq: api.ClusterQueue) -> float | None:
            return self.usage(f"{info.namespace}/{info.queue_name}") if enabled(config, cq) else None

        return usage_of

    def push_penalty(self, info: Info) -> None:
        """updateEntryPenalty on assume: the workload's entry penalty joins its LocalQueue's pending ones (but for
        the last session's reservation, admitted again)."""
        self.reserved.add(info.key)
        if info.key in self._reserved_before:
            self._reserved_before.discard(info.key)
            return
        entry = self._entry(f"{info.namespace}/{info.queue_name}")
        entry.penalty = _merge(entry.penalty, entry_penalty(total_requests(info), self.afs))

    def released(self, info: Info) -> None:
        """The workload gave its quota back (evicted, finished, gone): its next admission pushes a penalty."""
        self.reserved.discard(info.key)

    def settle(self, key: str, admitted: Mapping[str, float]) -> None:
        """updateAfsConsumedUsage: decayed toward the admitted usage since the last update, the penalties folded."""
        entry = self._entry(key)
        elapsed = max(0.0, self.now - entry.last_update)
        entry.consumed = _merge(decayed(entry.consumed, admitted, elapsed, self.afs.usage_half_life), entry.penalty)
        entry.penalty, entry.last_update = {}, max(self.now, entry.last_update)

    def pending(self) -> list[str]:
        """The LocalQueues with penalties not yet settled."""
        return [key for key, e in self.entries.items() if e.penalty]

    def advance(self, now: float, keys: Iterable[str], admitted: Callable[[str], Mapping[str, float]]) -> None:
        """The clock moves to ``now``: each LocalQueue's sampling ticks (every usageSamplingInterval after its
        last update) decay its consumed resources toward its admitted usage, constant since the last call (so the
        ticks in between compose to one step to the last tick)."""
        interval, half_life = self.afs.usage_sampling_interval, self.afs.usage_half_life
        self.now = now  # a LocalQueue first seen now starts its clock now
        for key in keys:
            entry = self._entry(key)
            ticks = math.floor((now - entry.last_update) / interval)
            if ticks <= 0:
                continue
            tick = entry.last_update + ticks * interval
            if half_life == 0:
                entry.consumed = {}  # reconcileConsumedUsage: no half-life, no history
            else:
                entry.consumed = decayed(entry.consumed, admitted(key), tick - entry.last_update, half_life)
            entry.last_update = tick
            self.sampled[key] = (dict(entry.consumed), tick)

    def head(self, pending: Iterable[Q], sticky: Q | None, lanes: int | None = None) -> Q:
        """The queue's head: the lowest LocalQueue usage, then the base order (``pending`` comes in it, not empty;
        the sticky workload first among its LocalQueue's, as baseCompareFunc puts it). Only each LocalQueue's first
        can be the head, or the sticky one, whose place in the order decides nothing (no other is sticky): with
        ``lanes`` (how many LocalQueues feed the queue) the reading stops once each has shown its first, instead of
        going through the whole backlog for each head (thousands waiting)."""
        usages: dict[str, float] = {}
        best: tuple[float, bool, int] | None = None
        chosen: Q | None = None
        for position, item in enumerate(pending):
            key = _local_queue(item)
            if key in usages:
                continue  # a later workload of a LocalQueue already seen loses on the base order
            usages[key] = self.usage(key)
            rank = (usages[key], True, position)
            if best is None or rank < best:
                best, chosen = rank, item
            if lanes is not None and len(usages) >= lanes:
                break
        if sticky is not None:
            key = _local_queue(sticky)
            usage = usages[key] if key in usages else self.usage(key)
            if best is None or (usage, False, -1) < best:
                chosen = sticky
        if chosen is None:
            raise ValueError("no workload pending")
        return chosen


def _local_queue(item: _Queued) -> str:
    return f"{item.info.namespace}/{item.info.queue_name}"


def _wanted(objects: api.QueueObjects) -> AdmissionFairSharing | None:
    """The Configuration's admissionFairSharing when a ClusterQueue of the input asks for it, else None."""
    afs = objects.config.admission_fair_sharing
    if afs is None or not any(enabled(objects.config, cq) for cq in objects.cluster_queues.values()):
        return None
    return afs


def ledger(objects: api.QueueObjects) -> Ledger | None:
    """The input's ledger (the one live mode carries in ``objects.afs_ledger``, else a new one seeded from the
    LocalQueues' status), or None when admission fair sharing is off (or no ClusterQueue asks for it)."""
    afs = _wanted(objects)
    if afs is None:
        return None
    return objects.afs_ledger if isinstance(objects.afs_ledger, Ledger) else Ledger(afs, objects.local_queues)


def carried(objects: api.QueueObjects, previous: Ledger | None, now: float) -> Ledger | None:
    """The ledger a new session of live mode goes on with (``previous``, renewed for ``objects``; a new one with its
    clock at ``now`` the first time), or None when admission fair sharing is off: set it as ``objects.afs_ledger``.
    Kueue keeps its ledger for the life of the process; a session rebuilt from the cache seeding it again from
    the LocalQueues' status would forget every penalty and decay since the status was written."""
    afs = _wanted(objects)
    if afs is None:
        return None
    if previous is None:
        return Ledger(afs, objects.local_queues, now)
    previous.renew(afs, objects.local_queues, now)
    return previous
