"""One engine behind every mode: inputs in, a cluster state and a scheduler out, results back.

``schedule`` is the one-shot placement behind ``accelsched schedule``, ``explain`` and the demo; the simulator
and live mode reuse ``Session`` with their own pod sources and binders.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from accelsched.api.loader import Inputs, load
from accelsched.api.objects import SCHEDULING_GATED_REASON, Pod
from accelsched.cluster.state import ClusterState
from accelsched.cluster.volumes import VolumeState
from accelsched.config import default_config, load_config
from accelsched.dra.state import DRAState
from accelsched.framework import gang
from accelsched.framework.interface import Code, Status
from accelsched.framework.profile import SchedulerConfig
from accelsched.framework.scheduler import Scheduler, ScheduleResult
from accelsched.queues import admission as queue_admission
from accelsched.queues.incremental import OpenAdmission


@dataclass
class Session:
    """A cluster state with its bound pods accounted, and a scheduler over it."""

    inputs: Inputs
    cluster: ClusterState
    scheduler: Scheduler
    rejected: list[ScheduleResult] = field(default_factory=list)
    # Kueue's admission of the input's queued workloads (accelsched/queues), when it has any: admitted first,
    # then placed; the pods of workloads not admitted are held back (``schedule``).
    queues: queue_admission.QueueResult | None = None

    @classmethod
    def start(
        cls, inputs: Inputs, config: SchedulerConfig | None = None, seed: int = 0, open_queues: bool = False
    ) -> Session:
        """``open_queues``: admission is kept open (its result's ``admission``, queues.incremental.OpenAdmission)
        for a caller that follows workloads arriving and finishing without a new Session (live mode)."""
        queues = None
        if inputs.queues and open_queues:
            queues = OpenAdmission.start(inputs.queues, inputs.pods, inputs.namespaces, inputs.nodes)
        elif inputs.queues:
            queues = queue_admission.admit(inputs.queues, inputs.pods, inputs.namespaces, inputs.nodes)
        cluster = ClusterState(inputs.nodes, inputs.namespaces)
        cluster.volumes = VolumeState(inputs.storage, cluster)
        dra = getattr(inputs, "dra", None)
        if dra:  # no DRA objects: no state, and pods without claims never look for one
            cluster.dra = DRAState(dra, cluster)
        scheduler = Scheduler(cluster, config or default_config(), seed)
        scheduler.groups = gang.implicit_groups(inputs.pods, inputs.pod_groups)
        scheduler.topologies = tuple(inputs.topologies)
        scheduler.gang_bound = gang.bound_members(inputs.bound)
        scheduler.gang_gates = gang.pre_enqueue(inputs.pending, inputs.pod_groups, scheduler.gang_bound)
        # Pods that name their devices (the devices annotation: our bind's) are admitted first: one that does not
        # is given free devices, and must not take one another pod names, whatever order the pods come in.
        bound = inputs.bound
        refused = {}
        for pod in sorted(bound, key=lambda p: not p.devices):
            if (result := scheduler.admit_bound(pod)) is not None:
                refused[id(pod)] = result
        cluster.keep_bind_order(bound)
        rejected = [refused[id(pod)] for pod in bound if id(pod) in refused]  # both in the order of the inputs
        return cls(inputs, cluster, scheduler, rejected, queues)

    def schedule(self, pods: list | None = None) -> list[ScheduleResult]:
        """The pending pods (or ``pods``) placed in queue order. Pods whose workload Kueue would not admit are
        not placed: they come last, Pending, with the workload's QuotaReserved message, and with the reason
        SchedulingGated (Kueue holds them with a scheduling gate), so they never look unschedulable."""
        pending = self.inputs.pending if pods is None else pods
        held = self.queues.held() if self.queues is not None else {}
        if not held:
            return self.scheduler.run(pending)
        results = self.scheduler.run([p for p in pending if p.key not in held])
        return results + [_held(p, *held[p.key]) for p in pending if p.key in held]


def _held(pod: Pod, message: str, why: str) -> ScheduleResult:
    """A pod Kueue has not let go: gated (never tried, as behind kueue.x-k8s.io/admission), with its workload's
    message."""
    gate = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (why,), "Kueue")
    return ScheduleResult(pod, message=message, gated=gate, reason=SCHEDULING_GATED_REASON)


def config_from(path: str | Path | None) -> SchedulerConfig | None:
    return load_config(path) if path else None


def schedule(
    paths: Iterable[str | Path], config: str | Path | None = None, seed: int = 0, reasons: bool = False
) -> tuple[Session, list[ScheduleResult]]:
    """``reasons``: keep each Pending pod's per-node reasons (``ScheduleResult.reasons``), as ``--reasons`` does."""
    session = Session.start(load(paths), config_from(config), seed)
    session.scheduler.keep_diagnosis = reasons
    return session, session.rejected + session.schedule()
