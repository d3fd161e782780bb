"""SchedulingGates: a pod with spec.schedulingGates never enters the active queue (kube-scheduler 1.36).

A PreEnqueue plugin: the pod waits, untried, until every gate is removed (a pod update; the API server allows only
removing gates). It is never scheduled nor given a FailedScheduling event; its PodScheduled condition is the one the
API server set at creation (reason SchedulingGated). The status names the gates, for ``explain``.
"""

from __future__ import annotations

from accelsched.api.objects import Pod
from accelsched.framework.interface import SUCCESS, Status, unschedulable

NAME = "SchedulingGates"


def gates_message(gates: tuple[str, ...]) -> str:
    """The PreEnqueue status: Go's ``%v`` of the gate names, ``[a b]``."""
    return f"waiting for scheduling gates: [{' '.join(gates)}]"


class SchedulingGates:
    name = NAME

    def pre_enqueue(self, pod: Pod) -> Status:
        if not pod.scheduling_gates:
            return SUCCESS
        return unschedulable(NAME, gates_message(pod.scheduling_gates), resolvable=False)


def new(args: dict, handle: object) -> SchedulingGates:
    return SchedulingGates()
