"""Kueue's classical preemption: which admitted workloads a pending one may evict to fit.

pkg/scheduler/preemption (preemption.go, preemption_oracle.go, classical/candidate_generator.go and
hierarchical_preemption.go) with fair sharing off:

- candidates: the preemptor's own ClusterQueue under ``withinClusterQueue``, and with ``reclaimWithinCohort``
  the workloads of ClusterQueues (and cohorts) of the tree that use more than their nominal quota, nearest
  subtree first; each must use a flavor and resource the preemptor needs preempted and satisfy the policy
  (LowerPriority, LowerOrNewerEqualPriority, Any);
- a candidate in another queue is a reclaim: always allowed when the preemptor's subtree would fit within its
  quota (hierarchical advantage), otherwise only without borrowing, unless ``borrowWithinCohort`` allows
  preempting lower priorities (below ``maxPriorityThreshold``) while borrowing;
- candidates are taken, lowest priority and most recently admitted first, until the preemptor fits, then every
  one not needed after all is given back (fillBackWorkloads, newest first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

from accelsched.queues import api
from accelsched.queues.api import ClusterQueue
from accelsched.queues.quota import FlavorResource, Node, QuotaTree
from accelsched.queues.workloads import Info

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"  # fair sharing's (queues.fairsharing)
HUMAN_READABLE = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


class Variant(Enum):
    NEVER = None
    WITHIN_CQ = IN_CLUSTER_QUEUE
    HIERARCHICAL_RECLAIM = IN_COHORT_RECLAMATION
    RECLAIM_WITHOUT_BORROWING = "reclaim-without-borrowing"
    RECLAIM_WHILE_BORROWING = IN_COHORT_RECLAIM_WHILE_BORROWING

    @property
    def reason(self) -> str:
        return IN_COHORT_RECLAMATION if self is Variant.RECLAIM_WITHOUT_BORROWING else str(self.value)


@dataclass(eq=False)
class Admitted:
    """An admitted workload as the cache holds it: where it is, what it uses, when it was admitted."""

    info: Info
    cluster_queue: str
    usage: dict[FlavorResource, int]
    sequence: int  # admission order: a higher one was admitted more recently

    @cached_property
    def order(self) -> tuple[int, int, str]:
        """Kueue's candidate order past the first rules: lower priority, then admitted more recently, then UID
        (worked out once: a large cohort's candidates are sorted again for every head tried)."""
        return (self.info.priority, -self.sequence, self.info.uid)


@dataclass
class Target:
    workload: Admitted
    reason: str


TargetsFn = Callable[[Info, ClusterQueue, dict[FlavorResource, int], set[FlavorResource]], list[Target]]


@dataclass
class _Candidate:
    workload: Admitted
    lca: Node | None
    variant: Variant


def _queue_order(info: Info) -> tuple[str, int]:
    return (info.created, info.order)


def satisfies(policy: str, preemptor: Info, candidate: Info) -> bool:
    """SatisfiesPreemptionPolicy."""
    if policy == "LowerPriority":
        return preemptor.priority > candidate.priority
    if policy == "LowerOrNewerEqualPriority":
        newer = preemptor.priority == candidate.priority and _queue_order(preemptor) < _queue_order(candidate)
        return preemptor.priority > candidate.priority or newer
    return policy == "Any"


def within_nominal(node: Node, frs: Iterable[FlavorResource]) -> bool:
    """IsWithinNominalInResources: the node uses no more than its subtree quota in each of ``frs``."""
    subtree, usage = node.subtree, node.usage
    return all(subtree.get(fr, 0) >= usage.get(fr, 0) for fr in frs)


def fits_in_quota(node: Node, requests: dict[FlavorResource, int]) -> tuple[bool, dict[FlavorResource, int]]:
    """QuantitiesFitInQuota: whether the requests fit the node's subtree quota, and what is left past its local
    quota for the level above."""
    fits = all(node.subtree.get(fr, 0) >= node.usage.get(fr, 0) + v for fr, v in requests.items())
    return fits, {fr: max(0, v - node.local_available(fr)) for fr, v in requests.items()}


class Preemptor:
    """Finds targets against the tree's current usage; ``admitted`` lists each ClusterQueue's workloads."""

    def __init__(
        self, tree: QuotaTree, cluster_queues: dict[str, ClusterQueue], admitted: dict[str, list[Admitted]]
    ) -> None:
        self.tree, self.cluster_queues, self.admitted = tree, cluster_queues, admitted
        # With fair sharing on, Kueue's getTargets takes fairPreemptions instead (queues.fairsharing sets this).
        self.fair_targets: TargetsFn | None = None
        # With admission fair sharing on a ClusterQueue, its LocalQueues' usage (queues.admissionfairsharing sets
        # this): None for a ClusterQueue without it.
        self.local_queue_usage: Callable[[Info, ClusterQueue], float | None] | None = None

    # ------------------------------------------------------------------------------------ the tree's usage

    def remove(self, w: Admitted) -> None:
        node = self.tree.cluster_queues[w.cluster_queue]
        for fr, amount in w.usage.items():
            node.remove_usage(fr, amount)

    def add(self, w: Admitted) -> None:
        node = self.tree.cluster_queues[w.cluster_queue]
        for fr, amount in w.usage.items():
            node.add_usage(fr, amount)

    # ------------------------------------------------------------------------------------ targets

    def targets(
        self, info: Info, cq: ClusterQueue, requests: dict[FlavorResource, int], frs: set[FlavorResource]
    ) -> list[Target]:
        """getTargets: fairPreemptions with fair sharing on, else classicalPreemptions (the smallest set of
        candidates, in Kueue's order, after which ``requests`` fit)."""
        if self.fair_targets is not None:
            return self.fair_targets(info, cq, requests, frs)
        node = self.tree.cluster_queues[cq.name]
        same = self._same_queue(info, cq, frs)
        forbidden = cq.preemption.borrow_within_cohort == api.NEVER
        # Borrowing not allowed to preempt, and the preemptor's queue borrowing whatever of its own it takes: only the
        # attempt while borrowing can find targets, and it takes no workload of another queue reclaimed without
        # borrowing, the cohort's most: those are not collected (the heads that cannot preempt, most of a large
        # cohort's, walked all of them else).
        reclaim_only = forbidden and not self._may_stop_borrowing(node, requests, same)
        hierarchy, priority = self._hierarchical(info, cq, node, requests, frs, not reclaim_only)
        for group in (same, hierarchy, priority):
            group.sort(key=lambda c: c.workload.order)
        usage = self.local_queue_usage
        if usage is not None and usage(info, cq) is not None:
            # CandidatesOrdering with AFS: in the preemptor's ClusterQueue, the LocalQueue that used more gives
            # first (a stable sort: the order above among equal usage). Candidates of other ClusterQueues keep it.
            same.sort(key=lambda c: -(usage(c.workload.info, cq) or 0.0))
        # CandidatesOrdering's first rule: workloads already evicted (holding their quota until their jobs let go)
        # before all others, which keep the order above (a stable sort)
        candidates = sorted(hierarchy + priority + same, key=lambda c: not c.workload.info.evicted)
        if (not hierarchy and not priority) or (forbidden and not self._under_nominal(node, frs)):
            attempts = [True]
        elif forbidden and not hierarchy:
            attempts = [False, True]
        else:
            attempts = [True, False]
        for borrowing in attempts:
            if not borrowing and not self._may_stop_borrowing(node, requests, same):
                continue  # every candidate would be taken and given back (each a walk up the tree), none chosen
            chosen: list[Target] = []
            # Without borrowing nothing fits while the preemptor's queue would still borrow, which only its own
            # workloads taken change: the others are taken without asking (a walk up the tree each).
            blocked = not borrowing and self._borrows(node, requests)
            for c in _borrowing_allowed(candidates) if borrowing else candidates:
                if not self._valid(c, cq, borrowing, frs):
                    continue
                self.remove(c.workload)
                chosen.append(Target(c.workload, c.variant.reason))
                if blocked and c.workload.cluster_queue == cq.name:
                    blocked = self._borrows(node, requests)
                if not blocked and self.fits(node, requests, borrowing):
                    chosen = self.fill_back(node, requests, chosen, borrowing)
                    for t in chosen:
                        self.add(t.workload)
                    return chosen
            for t in chosen:
                self.add(t.workload)
        return []

    def _may_stop_borrowing(self, node: Node, requests: dict[FlavorResource, int], same: list[_Candidate]) -> bool:
        """Whether an attempt without borrowing can find targets at all: the preemptor's ClusterQueue must fit within
        its own quota afterwards (workloadFits), and only its own workloads taken free any of that (the other
        queues' are stored in the cohort). With all of them taken and it still borrowing, the attempt would take
        every candidate in turn and give them all back: Kueue's answer, none, without the walk."""
        for fr, amount in requests.items():
            freed = sum(c.workload.usage.get(fr, 0) for c in same)
            if node.borrowing_with(fr, amount - freed):
                return False
        return True

    def _borrows(self, node: Node, requests: dict[FlavorResource, int]) -> bool:
        """The preemptor's ClusterQueue would borrow with ``requests`` (what ``fits`` refuses without borrowing)."""
        return any(node.borrowing_with(fr, amount) for fr, amount in requests.items())

    def _under_nominal(self, node: Node, frs: set[FlavorResource]) -> bool:
        """queueUnderNominalInResourcesNeedingPreemption: usage below nominal in every resource to preempt."""
        return all((node.quotas[fr].nominal if fr in node.quotas else 0) > node.usage.get(fr, 0) for fr in frs)

    def fits(self, node: Node, requests: dict[FlavorResource, int], borrowing: bool) -> bool:
        """workloadFits."""
        for fr, amount in requests.items():
            if not borrowing and node.borrowing_with(fr, amount):
                return False
            if amount > node.available(fr):
                return False
        return True

    def fill_back(
        self, node: Node, requests: dict[FlavorResource, int], chosen: list[Target], borrowing: bool
    ) -> list[Target]:
        """fillBackWorkloads: from the second newest target back, give back each one the preemptor can do without
        (the last target taken replaces it in the list).

        Given back a run at a time, the run doubling while the preemptor still fits with all of it given back: what
        fits with more usage fits with less, so each of the run would have been given back in turn. A run that does
        not fit is taken again and its first target decided alone. (A large cohort's reclaim takes a hundred
        targets of other queues before the preemptor's own, and gives them back one by one.)"""
        i, run = len(chosen) - 2, 1
        while i >= 0:
            block = range(i, max(-1, i - run), -1)
            for j in block:
                self.add(chosen[j].workload)
            if self.fits(node, requests, borrowing):
                for j in block:
                    chosen[j] = chosen[-1]
                    chosen.pop()
                i, run = i - len(block), run * 2
                continue
            for j in block[1:]:
                self.remove(chosen[j].workload)
            if len(block) > 1 and self.fits(node, requests, borrowing):
                chosen[i] = chosen[-1]
                chosen.pop()
            else:
                self.remove(chosen[i].workload)
            i, run = i - 1, 1
        return chosen

    def _valid(self, c: _Candidate, cq: ClusterQueue, borrowing: bool, frs: set[FlavorResource]) -> bool:
        """candidateIsValid: another queue's workload only while that queue (and its cohorts below the common
        ancestor) still use more than their quota."""
        if c.workload.cluster_queue == cq.name:
            return True
        if borrowing and c.variant is Variant.RECLAIM_WITHOUT_BORROWING:
            return False
        node = self.tree.cluster_queues[c.workload.cluster_queue]
        if within_nominal(node, frs):
            return False
        for ancestor in node.ancestors():
            if ancestor is c.lca:
                break
            if within_nominal(ancestor, frs):
                return False
        return True

    def _classify(
        self, info: Info, cq: ClusterQueue, w: Admitted, advantage: bool, frs: set[FlavorResource]
    ) -> Variant:
        """classifyPreemptionVariant."""
        if not any(fr in frs for fr in w.usage):
            return Variant.NEVER
        same = w.cluster_queue == cq.name
        policy = cq.preemption.within_cluster_queue if same else cq.preemption.reclaim_within_cohort
        if not satisfies(policy, info, w.info):
            return Variant.NEVER
        fixed = _fixed_variant(cq, same, advantage)
        if fixed is not None:
            return fixed
        threshold = cq.preemption.max_priority_threshold
        if w.info.priority >= info.priority or (threshold is not None and w.info.priority > threshold):
            return Variant.RECLAIM_WITHOUT_BORROWING
        return Variant.RECLAIM_WHILE_BORROWING

    def _from_queue(
        self, info: Info, cq: ClusterQueue, name: str, lca: Node | None, advantage: bool, frs: set[FlavorResource]
    ) -> list[_Candidate]:
        """One ClusterQueue's candidates, each classified as ``_classify`` does, with what depends on the queue alone
        worked out once: every head tried classifies every admitted workload of its cohort's borrowing queues (at
        1,000 ClusterQueues, hundreds per head, thousands of heads per rebuild)."""
        admitted = self.admitted.get(name)
        if not admitted:
            return []
        same = name == cq.name
        policy = cq.preemption.within_cluster_queue if same else cq.preemption.reclaim_within_cohort
        fixed = _fixed_variant(cq, same, advantage)
        out = []
        for w in admitted:
            if frs.isdisjoint(w.usage) or not (policy == "Any" or satisfies(policy, info, w.info)):
                continue
            out.append(_Candidate(w, lca, fixed if fixed is not None else self._classify(info, cq, w, advantage, frs)))
        return out

    def _same_queue(self, info: Info, cq: ClusterQueue, frs: set[FlavorResource]) -> list[_Candidate]:
        if cq.preemption.within_cluster_queue == api.NEVER:
            return []
        return self._from_queue(info, cq, cq.name, None, False, frs)

    def _hierarchical(
        self,
        info: Info,
        cq: ClusterQueue,
        node: Node,
        requests: dict[FlavorResource, int],
        frs: set[FlavorResource],
        without_advantage: bool = True,
    ) -> tuple[list[_Candidate], list[_Candidate]]:
        """collectCandidatesForHierarchicalReclaim: (with hierarchical advantage, without; the latter left empty
        unless ``without_advantage``)."""
        hierarchy: list[_Candidate] = []
        priority: list[_Candidate] = []
        if node.parent is None or cq.preemption.reclaim_within_cohort == api.NEVER:
            return hierarchy, priority
        advantage, remaining = fits_in_quota(node, requests)
        previous: Node | None = None
        for root in node.ancestors():
            if advantage or without_advantage:
                target = hierarchy if advantage else priority
                self._collect(info, cq, node, root, root, previous, advantage, frs, target)
            fits, remaining = fits_in_quota(root, remaining)
            advantage = advantage or fits
            previous = root
        return hierarchy, priority

    def _collect(
        self,
        info: Info,
        cq: ClusterQueue,
        own: Node,
        current: Node,
        subtree_root: Node,
        skip: Node | None,
        advantage: bool,
        frs: set[FlavorResource],
        out: list[_Candidate],
    ) -> None:
        for child in current.children:
            if child is skip or child is own:
                continue
            if within_nominal(child, frs):
                continue
            if child.is_cohort:
                self._collect(info, cq, own, child, subtree_root, skip, advantage, frs, out)
            else:
                out.extend(self._from_queue(info, cq, child.name, subtree_root, advantage, frs))


def _borrowing_allowed(candidates: list[_Candidate]) -> list[_Candidate]:
    """The candidates ``_valid`` may take while the preemptor borrows (in their order): not those reclaimed only
    without borrowing, whatever the tree's usage (the most of a large cohort's, each walked again else)."""
    return [c for c in candidates if c.variant is not Variant.RECLAIM_WITHOUT_BORROWING]


def _fixed_variant(cq: ClusterQueue, same: bool, advantage: bool) -> Variant | None:
    """classifyPreemptionVariant's answer for a candidate that satisfies the policy, where it does not depend on the
    candidate's priority (None where it does)."""
    if same:
        return Variant.WITHIN_CQ
    if advantage:
        return Variant.HIERARCHICAL_RECLAIM
    if cq.preemption.borrow_within_cohort == api.NEVER:
        return Variant.RECLAIM_WITHOUT_BORROWING
    return None


@dataclass
class Oracle:
    """preemption_oracle.go: would preempting help this request of one flavor and resource, and how far up would
    it still borrow afterwards. Bound to one workload in one ClusterQueue."""

    preemptor: Preemptor
    info: Info
    cq: ClusterQueue
    # The targets found per request asked about. The tree is the same when the head is nominated right after its
    # flavor assignment (which reads the tree alone): a workload of one flavor and resource asks for the same
    # targets again then (admission's ``_nominate``), and each search walks every admitted workload of the cohort.
    found: dict[tuple[FlavorResource, int], list[Target]] = field(default_factory=dict)

    def __call__(self, fr: FlavorResource, amount: int) -> tuple[str, int]:
        """("NoCandidates" | "Preempt" | "Reclaim", borrowing height after the preemptions)."""
        node = self.preemptor.tree.cluster_queues[self.cq.name]
        chosen = self.found[fr, amount] = self.preemptor.targets(self.info, self.cq, {fr: amount}, {fr})
        if not chosen:
            return "NoCandidates", self.preemptor.tree.height_of_lowest_subtree_that_fits(node, fr, amount)[0]
        for t in chosen:
            self.preemptor.remove(t.workload)
        borrow = self.preemptor.tree.height_of_lowest_subtree_that_fits(node, fr, amount)[0]
        for t in chosen:
            self.preemptor.add(t.workload)
        same = any(t.workload.cluster_queue == self.cq.name for t in chosen)
        return ("Preempt" if same else "Reclaim"), borrow


OracleFn = Callable[[FlavorResource, int], tuple[str, int]]


def path(tree: QuotaTree, cluster_queue: str) -> str:
    """buildCQPath: ``/root/.../cohort/clusterqueue``."""
    node = tree.cluster_queues[cluster_queue]
    parts = [cluster_queue, *(a.name for a in node.ancestors())]
    return "/" + "/".join(reversed(parts))


def message(preemptor: Info, reason: str, preemptor_path: str, preemptee_path: str) -> str:
    """preemptionMessage, with the UIDs Kueue would print (``UNKNOWN`` where the input has none)."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor.uid or 'UNKNOWN'}, JobUID: "
        f"{preemptor.job_uid or 'UNKNOWN'}) due to {HUMAN_READABLE.get(reason, 'UNKNOWN')}; preemptor path: "
        f"{preemptor_path}; preemptee path: {preemptee_path}"
    )
