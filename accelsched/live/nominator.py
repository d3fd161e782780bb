"""Nominated pods hold their room (kube-scheduler's nominator and RunFilterPluginsWithNominatedPods).

Live, a preemptor is not bound when its victims are deleted: it gets ``status.nominatedNodeName`` and waits for
them to be gone. Without a reservation the room they free goes to whichever pod is tried first, often a
lower-priority one, which the preemptor then preempts again: a cascade. kube-scheduler prevents it by adding,
while filtering a pod, the nominated pods of equal or higher priority to their nominated nodes. Here those pods
are assumed on their nodes before each cycle (a gang's: its lowest-priority member's) and taken off again for the
pods they must not affect (higher priority, or the nominated pod itself), and all of them after the run, so the
session between runs holds only bound and assumed pods.

Adding pods is only ever more restrictive for resources and devices; kube-scheduler's second filter pass without
them (for inter-pod affinity to a nominated pod) is not made.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from accelsched.api.objects import Pod
from accelsched.framework.scheduler import Scheduler


@dataclass
class Nomination:
    pod: Pod  # a copy parsed for the reservation: the pod itself may be scheduled in the same run
    node: int


class Nominator:
    """The nominated pods of one run, assumed on their nodes for the cycles they must affect."""

    def __init__(self, scheduler: Scheduler, nominations: Iterable[Nomination]) -> None:
        self.scheduler = scheduler
        self.nominations = {n.pod.uid: n for n in nominations}
        self.applied: set[str] = set()
        self.decided: set[str] = set()  # nominated pods placed in this run: they hold their room themselves

    def before_cycle(self, priority: int, uids: set[str]) -> None:
        """For a cycle of pods of ``priority`` (``uids``: the pods themselves): only the nominated pods of
        equal or higher priority, other than these, are on their nodes."""
        want = {
            uid
            for uid, n in self.nominations.items()
            if uid not in uids and uid not in self.decided and n.pod.priority >= priority
        }
        for uid in self.applied - want:
            self._remove(uid)
        for uid in want - self.applied:
            self._add(uid)

    def decided_pod(self, uid: str) -> None:
        if uid in self.nominations:
            self.decided.add(uid)
            if uid in self.applied:
                self._remove(uid)

    def clear(self) -> None:
        for uid in list(self.applied):
            self._remove(uid)

    def _add(self, uid: str) -> None:
        n = self.nominations[uid]
        cluster = self.scheduler.cluster
        if n.pod.key in cluster.pod_node:
            return  # the pod itself is on a node in this session (decided): nothing to hold
        try:
            n.pod.devices = cluster.devices[n.node].allocate(n.pod.requests, owner=n.pod.key)
        except ValueError:
            n.pod.devices = {}  # its room is not free yet (victims terminating): the counts alone still hold it
        cluster.assume(n.pod, n.node)
        self.applied.add(uid)

    def _remove(self, uid: str) -> None:
        n = self.nominations[uid]
        cluster = self.scheduler.cluster
        cluster.devices[n.node].release(n.pod.devices)
        n.pod.devices = {}
        cluster.forget(n.pod)
        self.applied.discard(uid)
