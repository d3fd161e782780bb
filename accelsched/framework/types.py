"""What a scheduling cycle produces: the Diagnosis of a pod that fits nowhere, its FitError message, and the
ScheduleResult (kube-scheduler's framework/types.go).

Apart from the cycle (framework/scheduler.py) so that the gang path (framework/coscheduling.py), which the cycle
calls, builds the same results without importing the cycle back.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from accelsched.api.objects import Pod
from accelsched.framework.interface import CycleState, FilterResult, Status
from accelsched.framework.profile import Profile

NO_NODES_AVAILABLE = "no nodes available to schedule pods"
SCHEDULER_ERROR = "SchedulerError"  # v1.PodReasonSchedulerError

FilterLog = list[tuple[str, FilterResult, np.ndarray]]  # (plugin, its result, the nodes it was first to reject)


@dataclass
class Diagnosis:
    """Why a pod fits nowhere: the filters' masks, kept as arrays. The message needs only counts per reason
    (one count_nonzero each); per-node reasons are built only when someone asks for them (explain, JSON)."""

    log: FilterLog = field(default_factory=list)
    plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    # A PreFilter rejection is every node's status: Unschedulable leaves every node to preemption, unresolvable none.
    pre_filter_resolvable: bool = False
    post_filter_msg: str = ""
    notes: list[str] = field(default_factory=list)  # a gang on a fabric: per domain, what fits (fabric.explain)

    def histogram(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for _, result, newly in self.log:
            for rejection in result.rejections:
                hit = int(np.count_nonzero(rejection.nodes & newly))
                if hit:
                    counts[rejection.reason] += hit
        return counts

    @functools.cached_property
    def node_reasons(self) -> dict[int, list[str]]:
        """Each rejected node's reasons, from the first filter that rejected it."""
        out: dict[int, list[str]] = {}
        for _, result, newly in self.log:
            for rejection in result.rejections:
                for i in np.flatnonzero(rejection.nodes & newly):
                    out.setdefault(int(i), []).append(rejection.reason)
        return dict(sorted(out.items()))


def fit_error_message(num_nodes: int, diagnosis: Diagnosis) -> str:
    """FitError.Error() (framework/types.go): ``0/N nodes are available: <PreFilterMsg>.`` or the sorted
    ``<count> <reason>`` list and ``.``, then a space and the PostFilter message as it is, with no period added.

    The PostFilter message joins the Unschedulable PostFilter plugins' reasons with ``, `` (RunPostFilterPlugins):
    by default DynamicResources' ``no new claims to deallocate`` and DefaultPreemption's ``preemption: `` + its own
    FitError message, which ends with the period."""
    if num_nodes == 0:
        return NO_NODES_AVAILABLE
    msg = f"0/{num_nodes} nodes are available:"
    if diagnosis.pre_filter_msg:
        msg += f" {diagnosis.pre_filter_msg}."
    else:
        msg += _histogram(diagnosis.histogram())
    if diagnosis.post_filter_msg:
        msg += f" {diagnosis.post_filter_msg}"
    return msg


def _histogram(counts: Counter[str]) -> str:
    """`` 3 Insufficient cpu, 10 node(s) were unschedulable.``: sorted as plain strings, as kube-scheduler does."""
    entries = sorted(f"{count} {reason}" for reason, count in counts.items() if count)
    return f" {', '.join(entries)}." if entries else ""


@dataclass
class Held:
    """A decision taken up to Permit, waiting for its gang: bound with it or rolled back with it."""

    pod: Pod
    profile: Profile
    state: CycleState
    node: int
    feasible: int


@dataclass
class ScheduleResult:
    pod: Pod
    node: str | None = None
    devices: dict[str, list[str]] = field(default_factory=dict)
    message: str = ""
    explicit_reasons: dict[str, list[str]] | None = None  # set directly when not from filters (kubelet admission)
    diagnosis: Diagnosis | None = None
    feasible: int = 0
    node_names: list[str] | None = field(default=None, repr=False)
    preempted: list[Pod] = field(default_factory=list)  # the pods evicted to make room for this one
    preempted_by: str = ""  # set on an evicted pod: the preemptor's namespace/name
    nominated: int | None = field(default=None, repr=False)  # the node DefaultPreemption made room on
    gated: Status | None = None  # a PreEnqueue plugin's rejection: the pod never entered the queue (PORTS)
    # The PodScheduled condition's reason when it is not Unschedulable: kube-scheduler's handleSchedulingFailure
    # writes SchedulerError when the attempt failed with an Error status (a Filter's error, a PreBind or Bind
    # failure) rather than a fit error.
    reason: str = ""

    @property
    def scheduled(self) -> bool:
        return self.node is not None

    def forget_nodes(self) -> None:
        """Drop what this result holds per node (the diagnosis' filter masks) once its cycle is over: the message,
        the rejecting plugins (the queue's hints) and the PostFilter message stay."""
        if self.diagnosis is not None and self.diagnosis.log:
            self.diagnosis = dataclasses.replace(self.diagnosis, log=[])
        self.node_names = None

    @property
    def reasons(self) -> dict[str, list[str]]:
        """Per rejected node its reasons (the contract's ``reasons``), built from the diagnosis on demand: empty
        once the scheduler forgot them (``Scheduler.keep_diagnosis`` off, the default)."""
        if self.explicit_reasons is not None:
            return self.explicit_reasons
        if self.diagnosis is None or self.node_names is None:
            return {}
        return {self.node_names[i]: r for i, r in self.diagnosis.node_reasons.items()}
