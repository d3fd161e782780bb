"""Kueue's fair sharing: dominant resource shares, the cycle's tournament, and fair-sharing preemption.

With ``fairSharing`` in Kueue's Configuration (queues.config), Kueue v0.19.2 changes three things:

- **the dominant resource share** (pkg/cache/scheduler/fair_sharing.go): a node (ClusterQueue or Cohort) that uses
  more than its subtree quota borrows; per resource, what it borrows over what its parent could ever lend
  (``potentialAvailable`` of the parent, summed over the root's flavors), times 1000; the largest such ratio, over
  the node's ``fairSharing.weight``. A node borrowing with weight 0 has an infinite share;
- **the order of a cycle's heads** (pkg/scheduler/fair_sharing_iterator.go): a tournament up each cohort tree.
  At every cohort, each child nominates its best head; the one whose subtree would not borrow on the flavors it
  asks for wins (FairSharingPrioritizeNonBorrowing), then the lowest share with the head admitted, then the higher
  priority, then the earlier creation. The winner is processed, and the tournament runs again on the new usage;
- **preemption** (pkg/scheduler/preemption/preemption.go fairPreemptions, fairsharing/): candidates are the own
  ClusterQueue's (withinClusterQueue) and those of ClusterQueues of the tree that borrow (reclaimWithinCohort),
  lowest priority and most recently admitted first; the ClusterQueues are visited from the root down, the most
  unfair first. A candidate of another ClusterQueue is preempted when the strategy holds between the preemptor's
  share (with the incoming workload) and the target's, each taken at the child of their lowest common ancestor:
  ``LessThanOrEqualToFinalShare`` (preemptor's new share <= target's share without the candidate), then
  ``LessThanInitialShare`` (preemptor's new share < target's share now) for the candidates the first one
  passed over. A preemptor within its nominal quota on the contested resources reclaims without a share test
  (FairSharingPreemptWithinNominal). Targets are then given back when not needed (fillBackWorkloads).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from accelsched.queues import api
from accelsched.queues.api import ClusterQueue
from accelsched.queues.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    Admitted,
    Preemptor,
    Target,
    satisfies,
)
from accelsched.queues.quota import FlavorResource, Node
from accelsched.queues.workloads import Info

# ---------------------------------------------------------------------------------------------- the share


@dataclass(frozen=True)
class DRS:
    """A node's dominant resource share (Kueue's DRS)."""

    weight: float
    unweighted: float = 0.0  # per mille of what the parent could lend
    dominant: str = ""
    borrowing: bool = False
    borrowed: tuple[FlavorResource, ...] = ()

    def is_zero(self) -> bool:
        return self.unweighted == 0

    def precise(self) -> float:
        """PreciseWeightedShare: 0 when not borrowing, +Inf when borrowing on weight 0."""
        if self.is_zero():
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.unweighted / self.weight

    def rounded(self) -> int:
        """roundedWeightedShare: what Kueue reports as a ClusterQueue's or Cohort's weightedShare."""
        return sys.maxsize if self.zero_weight_borrows() else math.ceil(self.precise())

    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and not self.is_zero()

    def borrowing_on(self, requested: Mapping[FlavorResource, int]) -> bool:
        """IsBorrowingOn: the node borrows on a flavor and resource the workload asks for."""
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)


NEGATIVE = DRS(1.0, -1.0)


def compare(a: DRS, b: DRS) -> int:
    """CompareDRS: nodes borrowing on weight 0 after all others, compared by their unweighted ratio."""
    if a.zero_weight_borrows() and b.zero_weight_borrows():
        return _cmp(a.unweighted, b.unweighted)
    if a.zero_weight_borrows():
        return 1
    if b.zero_weight_borrows():
        return -1
    return _cmp(a.precise(), b.precise())


def _cmp(a: float, b: float) -> int:
    return (a > b) - (a < b)


def share(node: Node) -> DRS:
    """dominantResourceShare: what the node borrows past its subtree quota, over what its parent could lend."""
    drs = DRS(node.weight)
    if node.parent is None:
        return drs
    borrowed: dict[str, int] = {}
    frs = []
    for fr, quota in node.subtree.items():
        amount = node.usage.get(fr, 0) - quota
        if amount > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + amount
            frs.append(fr)
    if not borrowed:
        return drs
    lendable = _lendable(node.parent)
    ratio, dominant = 0.0, ""
    for resource, amount in borrowed.items():
        if lendable.get(resource, 0) > 0:
            r = float(amount) * 1000.0 / float(lendable[resource])
            if r > ratio or (r == ratio and resource < dominant):
                ratio, dominant = r, resource
    return DRS(node.weight, ratio, dominant, True, tuple(frs))


def _lendable(node: Node) -> dict[str, int]:
    """calculateLendable: per resource, the most the node could use, over every flavor of the root's quota."""
    out: dict[str, int] = {}
    for fr in node.root().subtree:
        out[fr[1]] = out.get(fr[1], 0) + node.potential_available(fr)
    return out


def _with_usage(node: Node, usage: Mapping[FlavorResource, int]) -> Callable[[], None]:
    """SimulateUsageAddition: the usage added up the tree; the returned call takes it back."""
    for fr, amount in usage.items():
        node.add_usage(fr, amount)

    def revert() -> None:
        for fr, amount in usage.items():
            node.remove_usage(fr, amount)

    return revert


# ---------------------------------------------------------------------------------------------- the tournament

E = TypeVar("E")


@dataclass
class Entry:
    """What the tournament needs of a head: its ClusterQueue's node, its assignment's usage, and its queue order
    (``-priority, creation, input order``: smaller goes first)."""

    node: Node
    usage: Mapping[FlavorResource, int]
    order: tuple[int, str, int]
    preemptor: bool = False  # waiting for its victims (counts with PrioritizePreemptorWorkloads only)


def tournament(
    entries: Sequence[E],
    entry: Callable[[E], Entry],
    prioritize_preemptor: bool = False,
    history: Callable[[Node], Mapping[FlavorResource, int]] | None = None,
) -> Iterator[E]:
    """fairSharingIterator: the cycle's heads, one at a time; each pick is made on the tree's usage at that
    moment, so a head admitted earlier in the cycle counts against its cohort's next one. ``history``
    (accelsched's extension, queues.cohortusage): each ClusterQueue's decayed usage, added to the usage the
    shares are compared on (not to the no-borrowing test)."""
    remaining = list(entries)
    while remaining:
        first = entry(remaining[0]).node  # getCq: any ClusterQueue with a head (here the first in input order)
        index = 0
        if first.parent is not None:
            root = first.root()
            by_node = {id(entry(e).node): e for e in remaining}
            drs, requested = _tournament_shares(root, by_node, entry)
            over_time = None
            if history is not None:
                past = [_with_usage(cq, history(cq)) for cq in _cluster_queues(root)]
                over_time, _ = _tournament_shares(root, by_node, entry)
                for revert in reversed(past):
                    revert()
            best = _run(root, by_node, drs, requested, entry, prioritize_preemptor, over_time)
            index = next(i for i, e in enumerate(remaining) if e is best)
        chosen = remaining.pop(index)
        yield chosen


def _cluster_queues(node: Node) -> Iterator[Node]:
    for child in node.children:
        if child.is_cohort:
            yield from _cluster_queues(child)
        else:
            yield child


def _tournament_shares(
    root: Node, by_node: dict[int, E], entry: Callable[[E], Entry]
) -> tuple[dict[tuple[int, int], DRS], dict[int, Mapping[FlavorResource, int]]]:
    """computeDRS: for each head, the share of each node on its path below the root, with the head admitted,
    keyed by (the node's parent, the head's ClusterQueue)."""
    drs: dict[tuple[int, int], DRS] = {}
    requested: dict[int, Mapping[FlavorResource, int]] = {}
    for cq in _cluster_queues(root):
        if id(cq) not in by_node:
            continue
        e = entry(by_node[id(cq)])
        revert = _with_usage(cq, e.usage)
        requested[id(cq)] = e.usage
        current = share(cq)
        for ancestor in cq.ancestors():
            drs[(id(ancestor), id(cq))] = current
            current = share(ancestor)
        revert()
    return drs, requested


def _run(
    cohort: Node,
    by_node: dict[int, E],
    drs: dict[tuple[int, int], DRS],
    requested: dict[int, Mapping[FlavorResource, int]],
    entry: Callable[[E], Entry],
    prioritize_preemptor: bool,
    over_time: dict[tuple[int, int], DRS] | None = None,
) -> E | None:
    """runTournament: each child cohort's winner, then each ClusterQueue's head; the least of them wins."""
    candidates: list[E] = []
    for child in cohort.children:
        if child.is_cohort:
            won = _run(child, by_node, drs, requested, entry, prioritize_preemptor, over_time)
            if won is not None:
                candidates.append(won)
    candidates += [by_node[id(c)] for c in cohort.children if not c.is_cohort and id(c) in by_node]
    if not candidates:
        return None
    best = candidates[0]
    for current in candidates[1:]:
        if _less(entry(current), entry(best), cohort, drs, requested, prioritize_preemptor, over_time):
            best = current
    return best


def _less(
    a: Entry,
    b: Entry,
    parent: Node,
    drs: dict[tuple[int, int], DRS],
    requested: dict[int, Mapping[FlavorResource, int]],
    prioritize_preemptor: bool,
    over_time: dict[tuple[int, int], DRS] | None = None,
) -> bool:
    """entryComparer.less; with ``over_time`` (queues.cohortusage) the shares compared count the decayed usage."""
    if prioritize_preemptor and a.preemptor != b.preemptor:
        return a.preemptor
    a_drs, b_drs = drs[(id(parent), id(a.node))], drs[(id(parent), id(b.node))]
    a_borrows = a_drs.borrowing_on(requested[id(a.node)])
    b_borrows = b_drs.borrowing_on(requested[id(b.node)])
    if a_borrows != b_borrows:  # FairSharingPrioritizeNonBorrowing
        return not a_borrows
    if over_time is not None:
        a_drs, b_drs = over_time[(id(parent), id(a.node))], over_time[(id(parent), id(b.node))]
    c = compare(a_drs, b_drs)
    if c:
        return c < 0
    if a.order[0] != b.order[0]:  # PrioritySortingWithinCohort
        return a.order[0] < b.order[0]
    return a.order[1:] < b.order[1:]  # GetQueueOrderTimestamp: creation (Before; then input order here)


# ---------------------------------------------------------------------------------------------- preemption


def strategy_passes(name: str, preemptor_new: DRS, target_old: DRS, target_new: DRS) -> bool:
    """fairsharing.LessThanOrEqualToFinalShare and LessThanInitialShare."""
    if name == "LessThanOrEqualToFinalShare":
        return compare(preemptor_new, target_new) <= 0
    return compare(preemptor_new, target_old) < 0


def _almost_lca(node: Node, lca: Node) -> Node:
    """getAlmostLCA: the node's ancestor (or itself) just below ``lca``."""
    below = node
    for ancestor in node.ancestors():
        if ancestor is lca:
            return below
        below = ancestor
    raise AssertionError("serious bug: could not find AlmostLeastCommonAncestor")


class _Ordering:
    """TargetClusterQueueOrdering: the ClusterQueues to take candidates from, the most unfair first, walking
    down from the root; a ClusterQueue or cohort no longer borrowing (or out of candidates) is pruned."""

    def __init__(self, preemptor: Node, candidates: Sequence[Admitted], rank: Callable[[Admitted], Rank]) -> None:
        self.preemptor = preemptor
        self.ancestors = {id(a) for a in preemptor.ancestors()}
        self.by_cq: dict[str, list[Admitted]] = {}
        for c in candidates:
            self.by_cq.setdefault(c.cluster_queue, []).append(c)
        self.rank = rank
        self.pruned: set[int] = set()

    def __iter__(self) -> Iterator[Node]:
        if self.preemptor.parent is None:
            while id(self.preemptor) not in self.pruned and self.has(self.preemptor):
                yield self.preemptor
            return
        root = self.preemptor.root()
        while id(root) not in self.pruned:
            target = self._next(root)
            if target is not None:
                yield target

    def has(self, cq: Node) -> bool:
        return bool(self.by_cq.get(cq.name))

    def pop(self, cq: Node) -> Admitted:
        return self.by_cq[cq.name].pop(0)

    def drop(self, cq: Node) -> None:
        self.pruned.add(id(cq))

    def _next(self, cohort: Node) -> Node | None:
        best_cq, best_cq_drs = None, NEGATIVE
        for cq in (c for c in cohort.children if not c.is_cohort):
            if id(cq) in self.pruned:
                continue
            drs = share(cq)
            if (not drs.borrowing and cq is not self.preemptor) or not self.has(cq):
                self.pruned.add(id(cq))
            elif best_cq is not None and compare(drs, best_cq_drs) == 0:
                if self.rank(self.by_cq[cq.name][0]) < self.rank(self.by_cq[best_cq.name][0]):
                    best_cq = cq
            elif compare(drs, best_cq_drs) == 1:
                best_cq, best_cq_drs = cq, drs
        best_cohort, best_cohort_drs = None, NEGATIVE
        for child in (c for c in cohort.children if c.is_cohort):
            if id(child) in self.pruned:
                continue
            drs = share(child)
            if not drs.borrowing and id(child) not in self.ancestors:
                self.pruned.add(id(child))
            elif compare(drs, best_cohort_drs) >= 0:
                best_cohort, best_cohort_drs = child, drs
        if best_cohort is None and best_cq is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and compare(best_cohort_drs, best_cq_drs) >= 0:
            return self._next(best_cohort)
        return best_cq

    def shares(self, target: Node) -> tuple[DRS, DRS]:
        """ComputeShares: the preemptor's and the target's share, each at the child of their lowest common
        ancestor."""
        lca = next(a for a in target.ancestors() if id(a) in self.ancestors)
        return share(_almost_lca(self.preemptor, lca)), share(_almost_lca(target, lca))

    def target_share_without(self, target: Node, usage: Mapping[FlavorResource, int]) -> DRS:
        """ComputeTargetShareAfterRemoval."""
        for fr, amount in usage.items():
            target.remove_usage(fr, amount)
        lca = next(a for a in target.ancestors() if id(a) in self.ancestors)
        out = share(_almost_lca(target, lca))
        for fr, amount in usage.items():
            target.add_usage(fr, amount)
        return out


Reservation = tuple[int, str, int]  # (0, the input's QuotaReserved time, 0), or (1, "", admission order here)
Rank = tuple[bool, bool, float, int, tuple[int, ...], str]


def _newest_first(reserved: Reservation) -> tuple[int, ...]:
    """A sort key putting later reservations first (RFC 3339 times compare as strings; "" is the earliest)."""
    phase, time, sequence = reserved
    return (-phase, *(-ord(c) for c in time), 1, -sequence)


class FairPreemptor:
    """fairPreemptions over a Preemptor's tree and admitted workloads (``Preemptor.fair_targets`` calls it)."""

    def __init__(
        self, base: Preemptor, strategies: tuple[str, ...], reserved: Callable[[Admitted], Reservation] | None = None
    ) -> None:
        self.base, self.strategies = base, strategies
        # quotaReservationTime of an admitted workload; by default its admission order here
        self.reserved = reserved or (lambda w: (1, "", w.sequence))

    def targets(
        self, info: Info, cq: ClusterQueue, requests: dict[FlavorResource, int], frs: set[FlavorResource]
    ) -> list[Target]:
        node = self.base.tree.cluster_queues[cq.name]
        candidates = self._candidates(info, cq, node, frs)
        if not candidates:
            return []

        usage = self.base.local_queue_usage

        def rank(w: Admitted) -> Rank:
            """CandidatesOrdering: evicted already (still holding) first; other queues first; with admission fair
            sharing, in the preemptor's queue the LocalQueue that used more first; lower priority, the quota
            reserved more recently, then by UID."""
            same = w.cluster_queue == cq.name
            afs = -(usage(w.info, cq) or 0.0) if same and usage is not None else 0.0
            return (not w.info.evicted, same, afs, w.info.priority, _newest_first(self.reserved(w)), w.info.uid)

        candidates.sort(key=rank)
        revert = _with_usage(node, requests)  # the shares count the incoming workload
        run = _Run(self.base, node, requests, frs)
        done = run.first(_Ordering(node, candidates, rank), self.strategies[0])
        if not done and len(self.strategies) > 1:
            done = run.second(_Ordering(node, run.retry, rank))
        revert()
        if not done:
            for t in run.targets:
                self.base.add(t.workload)
            return []
        targets = self.base.fill_back(node, requests, run.targets, True)
        for t in targets:
            self.base.add(t.workload)
        return targets

    def _candidates(self, info: Info, cq: ClusterQueue, node: Node, frs: set[FlavorResource]) -> list[Admitted]:
        """findCandidates: the own queue's under withinClusterQueue, and with reclaimWithinCohort those of every
        ClusterQueue of the tree that borrows on a contested flavor and resource."""

        def of(name: str, policy: str) -> list[Admitted]:
            return [
                w
                for w in self.base.admitted.get(name, [])
                if satisfies(policy, info, w.info) and any(fr in frs for fr in w.usage)
            ]

        out = []
        if cq.preemption.within_cluster_queue != api.NEVER:
            out += of(cq.name, cq.preemption.within_cluster_queue)
        if node.parent is not None and cq.preemption.reclaim_within_cohort != api.NEVER:
            for other in _cluster_queues(node.root()):
                if other is not node and any(other.borrowing_with(fr, 0) for fr in frs):
                    out += of(other.name, cq.preemption.reclaim_within_cohort)
        return out


class _Run:
    """One fairPreemptions attempt: the targets taken so far (their usage out of the tree) and the candidates
    the first strategy passed over."""

    def __init__(
        self, base: Preemptor, node: Node, requests: dict[FlavorResource, int], frs: set[FlavorResource]
    ) -> None:
        self.base, self.node, self.requests, self.frs = base, node, requests, frs
        self.targets: list[Target] = []
        self.retry: list[Admitted] = []

    def _take(self, w: Admitted, reason: str) -> bool:
        """The candidate out of the tree; whether the preemptor fits now (workloadFitsForFairSharing)."""
        self.base.remove(w)
        self.targets.append(Target(w, reason))
        for fr, amount in self.requests.items():
            self.node.remove_usage(fr, amount)
        fits = self.base.fits(self.node, self.requests, True)
        for fr, amount in self.requests.items():
            self.node.add_usage(fr, amount)
        return fits

    def first(self, ordering: _Ordering, strategy: str) -> bool:
        """runFirstFsStrategy (rule S2-a)."""
        within_nominal = all(not self.node.borrowing_with(fr, 0) for fr in self.frs)
        for target in ordering:
            if target is self.node:
                if self._take(ordering.pop(target), IN_CLUSTER_QUEUE):
                    return True
                continue
            if within_nominal:  # FairSharingPreemptWithinNominal: a nominal entitlement, no share test
                if self._take(ordering.pop(target), IN_COHORT_RECLAMATION):
                    return True
                continue
            preemptor_new, target_old = ordering.shares(target)
            if math.isinf(preemptor_new.precise()) and not math.isinf(target_old.precise()):
                while ordering.has(target):  # fsStrategyUnsatisfiable: kept for rule S2-b
                    self.retry.append(ordering.pop(target))
                continue
            while ordering.has(target):
                w = ordering.pop(target)
                target_new = ordering.target_share_without(target, w.usage)
                if strategy_passes(strategy, preemptor_new, target_old, target_new):
                    if self._take(w, IN_COHORT_FAIR_SHARING):
                        return True
                    break  # the shares changed: the ordering picks again
                self.retry.append(w)
        return False

    def second(self, ordering: _Ordering) -> bool:
        """runSecondFsStrategy (rule S2-b): LessThanInitialShare, at most one candidate per ClusterQueue."""
        for target in ordering:
            preemptor_new, target_old = ordering.shares(target)
            w = ordering.pop(target)
            if compare(preemptor_new, target_old) < 0 and self._take(w, IN_COHORT_FAIR_SHARING):
                return True
            ordering.drop(target)
        return False
