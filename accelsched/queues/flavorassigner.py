"""Flavor assignment: for each pod set and resource group, the first flavor (in the ClusterQueue's order) that fits.

Kueue's pkg/scheduler/flavorassigner/flavorassigner.go with its default feature gates (FlavorFungibility on,
TopologyAwareScheduling off for these workloads, PartialAdmission off, quotaCheckStrategy BlockUndeclared): a
flavor is skipped when the pod set does not tolerate its taints or its node labels contradict the pod's node
affinity; otherwise each requested resource of the group is checked against the quota tree. The messages are
Kueue's, word for word (the format strings of fitsResourceQuota, findFlavorForPodSets, checkFlavorForPodSets and
Assignment.Message). Where Kueue asks its preemption oracle whether evicting others would make room, the
``oracle`` given (queues.preemption.Oracle) answers; without one the answer is "no candidates".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from accelsched.api import quantity
from accelsched.api.selectors import NodeSelectorTerm, Taint
from accelsched.queues import api
from accelsched.queues.api import ClusterQueue, ResourceFlavor, ResourceGroup
from accelsched.queues.preemption import OracleFn
from accelsched.queues.quota import Node, QuotaTree
from accelsched.queues.resources import format_amount
from accelsched.queues.workloads import Info, PodSet

_INFINITE = 1 << 62


class Mode(IntEnum):
    """preemptionMode: how a flavor can take a request, worst first."""

    NO_FIT = 0
    NO_PREEMPTION_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4


class AssignmentMode(IntEnum):
    """FlavorAssignmentMode, the coarse view the scheduler acts on."""

    NO_FIT = 0
    PREEMPT = 1
    FIT = 3


_POSSIBILITY = {"NoCandidates": Mode.NO_PREEMPTION_CANDIDATES, "Preempt": Mode.PREEMPT, "Reclaim": Mode.RECLAIM}


def _coarse(mode: Mode) -> AssignmentMode:
    if mode == Mode.FIT:
        return AssignmentMode.FIT
    return AssignmentMode.NO_FIT if mode == Mode.NO_FIT else AssignmentMode.PREEMPT


@dataclass(frozen=True)
class Granular:
    """granularMode: a preemption mode and how far up the cohort tree the request borrows."""

    mode: Mode
    borrow: int


_WORST = Granular(Mode.NO_FIT, _INFINITE)
_BEST = Granular(Mode.FIT, 0)


def _preferred(a: Granular, b: Granular, cq: ClusterQueue) -> bool:
    """isPreferred: whether ``a`` is a better way to take a flavor than ``b``."""
    if a.mode == Mode.NO_FIT:
        return False
    if b.mode == Mode.NO_FIT:
        return True
    a_none, b_none = a.mode == Mode.NO_PREEMPTION_CANDIDATES, b.mode == Mode.NO_PREEMPTION_CANDIDATES
    if a_none != b_none:
        return not a_none
    if cq.flavor_fungibility.preference == "PreemptionOverBorrowing":
        if a.borrow != b.borrow:
            return a.borrow < b.borrow
        return a.mode > b.mode
    if a.mode != b.mode:
        return a.mode > b.mode
    return a.borrow < b.borrow


def _try_next(mode: Granular, cq: ClusterQueue) -> bool:
    """shouldTryNextFlavor, from the ClusterQueue's flavorFungibility."""
    if mode.mode in (Mode.NO_FIT, Mode.NO_PREEMPTION_CANDIDATES):
        return True
    if mode.mode in (Mode.PREEMPT, Mode.RECLAIM) and cq.flavor_fungibility.when_can_preempt == api.TRY_NEXT_FLAVOR:
        return True
    return mode.borrow != 0 and cq.flavor_fungibility.when_can_borrow == api.TRY_NEXT_FLAVOR


@dataclass(frozen=True)
class Attempt:
    """FlavorAssignmentAttempt: one flavor a pod set's scan looked at, and its worst outcome over the resources it
    was looked at for. Kueue lists them in its QuotaReserved event ("Flavors considered"), all but those that fit
    without borrowing."""

    flavor: str
    mode: AssignmentMode
    borrow: int = 0
    possibility: Mode | None = None  # PreemptionPossibility: NO_PREEMPTION_CANDIDATES, PREEMPT or RECLAIM
    reasons: tuple[str, ...] = ()

    def merged(self, other: Attempt) -> Attempt:
        """mergeFlavorAttempts: the worse mode, the higher borrowing, the lesser possibility, the reasons of both."""
        possibility = self.possibility
        if other.possibility is not None and (possibility is None or other.possibility < possibility):
            possibility = other.possibility
        return Attempt(
            self.flavor, min(self.mode, other.mode), max(self.borrow, other.borrow), possibility,
            tuple(sorted({*self.reasons, *other.reasons})),
        )  # fmt: skip

    def text(self) -> str:
        """One attempt as FormatFlavorAssignmentAttemptsForEvents writes it: ``flavor(Mode;borrow=N;reasons)``."""
        if self.possibility is None:
            out = f"{self.flavor}({_MODE_NAMES[self.mode]}"
        else:
            out = f"{self.flavor}(preemptionMode={_POSSIBILITY_NAMES[self.possibility]}"
        if self.borrow > 0:
            out += f";borrow={self.borrow}"
        if self.reasons:
            out += ";" + ";".join(self.reasons)
        return out + ")"


_MODE_NAMES = {AssignmentMode.NO_FIT: "NoFit", AssignmentMode.PREEMPT: "Preempt", AssignmentMode.FIT: "Fit"}
_POSSIBILITY_NAMES = {v: k for k, v in _POSSIBILITY.items()}


def _attempt(flavor: str, mode: Granular, borrow: int, reasons: list[str]) -> Attempt:
    """AddRepresentativeModeFlavorAttempt."""
    possibility = mode.mode if mode.mode not in (Mode.FIT, Mode.NO_FIT) else None
    return Attempt(flavor, _coarse(mode.mode), borrow, possibility, tuple(sorted(reasons)))


def _merge_for_resource(
    considered: dict[str, Attempt], attempts: list[Attempt], res: str, group: ResourceGroup | None
) -> None:
    """mergeFlavorAttemptsForResource: ``attempts`` (one resource's scan) into ``considered``; a flavor of the
    resource's group considered for an earlier resource but not in this scan is marked as not providing it."""
    for a in attempts:
        considered[a.flavor] = considered[a.flavor].merged(a) if a.flavor in considered else a.merged(a)
    if not attempts or group is None:
        return
    present = {a.flavor for a in attempts}
    for flavor in [fq.name for fq in group.flavors]:
        if flavor in considered and flavor not in present:
            why = f"flavor {flavor} does not provide resource {res}"
            missing = Attempt(flavor, AssignmentMode.NO_FIT, reasons=(why,))
            considered[flavor] = considered[flavor].merged(missing)


@dataclass
class FlavorAssignment:
    name: str
    mode: AssignmentMode
    borrow: int
    tried: int = -1  # TriedFlavorIdx: where this scan stopped in the group's flavors (-1: it reached the last)


@dataclass
class PodSetAssignment:
    name: str
    flavors: dict[str, FlavorAssignment] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    count: int = 0
    attempts: list[Attempt] = field(default_factory=list)  # by flavor name (finalizeFlavorAssignmentAttempts)

    @property
    def fits(self) -> bool:
        return not self.reasons

    @property
    def mode(self) -> AssignmentMode:
        if self.fits:
            return AssignmentMode.FIT
        if not self.flavors:
            return AssignmentMode.NO_FIT
        return min(f.mode for f in self.flavors.values())


@dataclass
class Assignment:
    pod_sets: list[PodSetAssignment] = field(default_factory=list)
    usage: dict[tuple[str, str], int] = field(default_factory=dict)  # (flavor, resource) -> amount
    borrowing: int = 0

    @property
    def mode(self) -> AssignmentMode:
        """RepresentativeMode: the worst pod set's (NoFit with no pod set assigned)."""
        if not self.pod_sets:
            return AssignmentMode.NO_FIT
        return min(ps.mode for ps in self.pod_sets)

    def message(self) -> str:
        """Assignment.Message: each pod set that does not fit, its reasons sorted, joined by ', '."""
        parts = [
            f"couldn't assign flavors to pod set {ps.name}: {', '.join(sorted(ps.reasons))}"
            for ps in self.pod_sets
            if not ps.fits
        ]
        return "; ".join(parts)

    def considered(self) -> str:
        """FormatFlavorAssignmentAttemptsForEvents: per pod set, the flavors tried other than those that fit without
        borrowing, ``main: a(NoFit;reason), b(Fit;borrow=1)``, pod sets apart by `` | ``; "" when there are none."""
        parts = []
        for ps in self.pod_sets:
            texts = [a.text() for a in ps.attempts if not (a.mode == AssignmentMode.FIT and a.borrow == 0)]
            if texts:
                parts.append(f"{ps.name}: {', '.join(texts)}")
        return " | ".join(parts)

    def needs_preemption(self) -> set[tuple[str, str]]:
        """flavorResourcesNeedPreemption: the (flavor, resource) pairs assigned in Preempt mode."""
        return {(f.name, r) for ps in self.pod_sets for r, f in ps.flavors.items() if f.mode == AssignmentMode.PREEMPT}

    def flavors(self) -> dict[str, dict[str, str]]:
        return {ps.name: {r: f.name for r, f in ps.flavors.items()} for ps in self.pod_sets}

    def last_state(self) -> dict[tuple[int, str], int]:
        """LastState.LastTriedFlavorIdx: per pod set (by index) and resource, where the flavor scan stopped."""
        return {(i, r): f.tried for i, ps in enumerate(self.pod_sets) for r, f in ps.flavors.items()}


def pending_flavors(last: dict[tuple[int, str], int] | None) -> bool:
    """AssignmentClusterQueueState.PendingFlavors: some scan stopped before the last flavor of its group."""
    return any(i != -1 for i in (last or {}).values())


def _go_taint(taint: Taint) -> str:
    """A corev1.Taint value as Go's %s prints it (its String method wants a pointer): {key value effect <nil>}."""
    return f"{{{taint.key} {taint.value} {taint.effect} <nil>}}"


def _flavor_selector_matches(ps: PodSet, flavor: ResourceFlavor) -> bool:
    """flavorSelector: the pod's nodeSelector and required node affinity, cut to the flavor's label keys, against
    a node carrying only the flavor's labels."""
    keys = flavor.node_labels
    for key, value in ps.node_selector.items():
        if key in keys and keys[key] != value:
            return False
    terms = ps.required_terms
    if not terms:
        return True
    cut = []
    for term in terms:
        expressions = tuple(e for e in term.match_expressions if e.key in keys)
        if not expressions:
            return True  # a term with none of the flavor's keys: the whole affinity is dropped
        cut.append(NodeSelectorTerm(expressions))
    return any(t.matches("", flavor.node_labels) for t in cut)


class FlavorAssigner:
    """One workload's assignment in one ClusterQueue, against the tree's current usage."""

    def __init__(
        self,
        info: Info,
        cq: ClusterQueue,
        node: Node,
        tree: QuotaTree,
        flavors: dict[str, ResourceFlavor],
        oracle: OracleFn | None = None,
        resume: dict[tuple[int, str], int] | None = None,
        fair_sharing: bool = False,
    ) -> None:
        self.info, self.cq, self.node, self.tree, self.flavors = info, cq, node, tree, flavors
        self.oracle = oracle
        self.fair_sharing = fair_sharing
        # The workload's LastAssignment: each scan resumes after the flavor its previous one stopped at
        # (FlavorFungibility with FlavorFungibilityPreserveScanProgress, both on by default).
        self.resume = resume or {}
        self.groups: dict[str, ResourceGroup] = {r: rg for rg in cq.resource_groups for r in rg.covered}

    def assign(self) -> Assignment:
        assignment = Assignment()
        for index, ps in enumerate(self.info.pod_sets):
            requests = {r: v * ps.count for r, v in ps.requests.items()}
            if quantity.PODS in self.groups:
                requests[quantity.PODS] = ps.count
            psa = PodSetAssignment(ps.name, count=ps.count)
            considered: dict[str, Attempt] = {}
            failed = False
            # Kueue walks a Go map here (random order); resource names in order keep the answer stable.
            for res in sorted(requests):
                if res not in self.groups and requests[res] == 0:
                    continue
                if res in psa.flavors:
                    continue
                start = self.resume.get((index, res), -1) + 1  # NextFlavorToTryForPodSetResource
                found, reasons, ok, attempts = self._find_flavor(ps, requests, res, assignment.usage, start)
                _merge_for_resource(considered, attempts, res, self.groups.get(res))
                if not ok:
                    psa.flavors, psa.reasons, failed = {}, reasons, True
                    break
                psa.flavors.update(found)
                psa.reasons += reasons
            psa.attempts = [considered[f] for f in sorted(considered)]
            assignment.pod_sets.append(psa)
            for res, fa in psa.flavors.items():
                assignment.borrowing = max(assignment.borrowing, fa.borrow)
                fr = (fa.name, res)
                assignment.usage[fr] = assignment.usage.get(fr, 0) + requests.get(res, 0)
            if failed:
                return assignment
        return assignment

    def _find_flavor(
        self, ps: PodSet, requests: dict[str, int], res: str, usage: dict[tuple[str, str], int], start: int = 0
    ) -> tuple[dict[str, FlavorAssignment], list[str], bool, list[Attempt]]:
        """findFlavorForPodSets for the resource group covering ``res``: (flavors, reasons, found any, the flavors
        tried)."""
        group = self.groups.get(res)
        if group is None:
            return {}, [f"resource {res} unavailable in ClusterQueue"], False, []
        wanted = {r: v for r, v in requests.items() if r in group.covered}
        reasons: list[str] = []
        best: dict[str, FlavorAssignment] | None = None
        best_mode = _WORST
        attempted = -1
        attempts: list[Attempt] = []
        for idx in range(start, len(group.flavors)):
            fq = group.flavors[idx]
            attempted = idx
            problem = self._check_flavor(ps, fq.name)
            if problem:
                reasons.append(problem)
                attempts.append(Attempt(fq.name, AssignmentMode.NO_FIT, reasons=(problem,)))  # AddNoFitFlavorAttempt
                continue
            found: dict[str, FlavorAssignment] = {}
            mode = _BEST
            borrow, quota_reasons = 0, []
            for r in sorted(wanted):
                fr = (fq.name, r)
                granular, why = self._fits_quota(fr, usage.get(fr, 0), wanted[r])
                reasons += why
                quota_reasons += why
                borrow = max(borrow, granular.borrow)
                if _preferred(mode, granular, self.cq):
                    mode = granular
                if mode.mode == Mode.NO_FIT:
                    continue
                found[r] = FlavorAssignment(fq.name, _coarse(granular.mode), granular.borrow)
            attempts.append(_attempt(fq.name, mode, borrow, quota_reasons))
            if not _try_next(mode, self.cq):
                best, best_mode = found, mode
                break
            if _preferred(mode, best_mode, self.cq):
                best, best_mode = found, mode
        tried = -1 if attempted == len(group.flavors) - 1 else attempted
        for fa in (best or {}).values():
            fa.tried = tried
        if best_mode.mode == Mode.FIT:
            return best or {}, [], True, attempts
        return best or {}, reasons, bool(best), attempts

    def _check_flavor(self, ps: PodSet, name: str) -> str:
        """checkFlavorForPodSets: '' when the pod set may use the flavor, else Kueue's reason."""
        flavor = self.flavors.get(name)
        if flavor is None:
            return f"flavor {name} not found"
        tolerations = ps.tolerations + flavor.tolerations
        for taint in flavor.node_taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in tolerations):
                return f"untolerated taint {_go_taint(taint)} in flavor {name}"
        if not _flavor_selector_matches(ps, flavor):
            return f"flavor {name} doesn't match node affinity"
        return ""

    def _fits_quota(self, fr: tuple[str, str], assumed: int, request: int) -> tuple[Granular, list[str]]:
        """fitsResourceQuota: the mode, how far up it borrows, and the reasons when it does not simply fit."""
        flavor, res = fr
        available = max(0, self.node.available(fr))
        potential = self.node.potential_available(fr)
        total = assumed + request
        if total > potential:
            return Granular(Mode.NO_FIT, 0), [
                f"insufficient quota for {res} in flavor {flavor}, previously considered podsets requests "
                f"({format_amount(res, assumed)}) + current podset request ({format_amount(res, request)}) > "
                f"maximum capacity ({format_amount(res, potential)})"
            ]
        borrow, may_reclaim = self.tree.height_of_lowest_subtree_that_fits(self.node, fr, total)
        if total <= available:
            return Granular(Mode.FIT, borrow), []
        more = format_amount(res, total - available)
        reason = f"insufficient unused quota for {res} in flavor {flavor}, {more} more needed"
        quota = self.node.quotas.get(fr)
        nominal = quota.nominal if quota is not None else 0
        if nominal >= total or may_reclaim or self._can_preempt_while_borrowing():
            possibility, after = self.oracle(fr, total) if self.oracle is not None else ("NoCandidates", borrow)
            return Granular(_POSSIBILITY[possibility], after), [reason]
        return Granular(Mode.NO_FIT, borrow), [reason]

    def _can_preempt_while_borrowing(self) -> bool:
        """canPreemptWhileBorrowing: borrowWithinCohort allows it, or fair sharing with reclaimWithinCohort."""
        return self.cq.preemption.borrow_within_cohort != api.NEVER or (
            self.fair_sharing and self.cq.preemption.reclaim_within_cohort != api.NEVER
        )
