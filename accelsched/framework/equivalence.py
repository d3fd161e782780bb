"""Equivalent failures: a pod whose equivalent (the same scheduling signature) already failed against the same
cluster state fails the same way, at the cost of a lookup.

A backlog's retries are mostly such pods: thousands of Pending pods of a few shapes, woken together by one event
(NodeResourcesFit queues every pod it rejected on any assigned pod's deletion), each going through every filter
and PostFilter to fail again exactly as the previous one of its shape. kube-scheduler has no such cache (its
opportunistic batching, framework/runtime/batch.go, reuses a signature's scores for the next pod only when the
previous one was placed); here a failure is reused when nothing the cycle reads can differ:

- the signature is every field of the parsed Pod a plugin reads (all but its name, uid, source and raw object;
  volumes other than claims and disks by their kind), and a pod whose cycle reads more (resource claims, a
  nominated node, an ephemeral volume's claim named after the pod, a DeviceClass-backed extended resource's claim
  found by the pod's name) has none and is always tried;
- the cluster state is the one the equivalent pod's cycle ended with: no pod assumed or forgotten, no node added,
  removed or changed since (ClusterState's change log, generation and epoch), so the filters, the scores and
  DefaultPreemption's dry runs see the same nodes and pods;
- the seeded generator draws what the cycle drew (DefaultPreemption's random offset), so every later decision
  is the one a full cycle would have left.

Only failures without side effects are kept: no nomination, no victims, no scheduler error; a cycle that gave DRA
devices back (a claim deallocated: no cluster version of its own) empties the table. The table holds the
signatures failed since the state last changed, so it is empty again after every placement.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelsched.api.objects import Pod
from accelsched.api.volumes import PodVolume
from accelsched.dra import extended
from accelsched.framework.types import Diagnosis, ScheduleResult

# Fields that name a pod rather than ask anything of a node; every other field is part of the signature.
IDENTITY = frozenset({"namespace", "name", "uid", "source", "raw", "_shape", "resource_claims_memo", "volumes"})
SIGNED = tuple(f.name for f in dataclasses.fields(Pod) if f.name not in IDENTITY)


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _volume(volume: PodVolume) -> Any:
    """A volume as the volume plugins read it: a claim or a disk whole (its name is in their messages); any other
    source by its kind alone (admission names the service account's token volume ``kube-api-access-<random>``
    in every pod, and nothing reads that name)."""
    if volume.claim_name or volume.disk or volume.monitors:
        return volume
    return (volume.kind, volume.read_only)


def signature(pod: Pod) -> tuple[Any, ...] | None:
    """What a scheduling cycle reads of ``pod``, as a hashable value; None when it reads inputs the parsed fields
    do not hold (ResourceClaims, a nominated node in the raw object) or derives them from the pod's name (an
    ephemeral volume's claim, ``<pod>-<volume>``): such a pod is always tried in full."""
    raw = pod.raw
    if (raw.get("spec") or {}).get("resourceClaims") or (raw.get("status") or {}).get("nominatedNodeName"):
        return None
    if any(v.kind == "ephemeral" for v in pod.volumes):
        return None
    signed = (_frozen(getattr(pod, name)) for name in SIGNED)
    # The namespace is read (affinity terms' namespaces, PDBs, quotas): signed, though it names nothing alone.
    return (pod.namespace, tuple(_volume(v) for v in pod.volumes), *signed)


class _Drawing:
    """The scheduler's seeded generator, recording the bounds of the draws a cycle makes."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.draws: list[int] = []

    def randrange(self, n: int) -> int:
        self.draws.append(n)
        return self.rng.randrange(n)


@dataclass(frozen=True)
class _Failure:
    message: str
    plugins: frozenset[str]
    pre_filter_msg: str
    pre_filter_resolvable: bool
    post_filter_msg: str
    draws: tuple[int, ...]

    def result(self, pod: Pod) -> ScheduleResult:
        diagnosis = Diagnosis(
            plugins=set(self.plugins),
            pre_filter_msg=self.pre_filter_msg,
            pre_filter_resolvable=self.pre_filter_resolvable,
            post_filter_msg=self.post_filter_msg,
        )
        return ScheduleResult(pod, None, {}, self.message, diagnosis=diagnosis)


def _reusable(result: ScheduleResult) -> bool:
    diagnosis = result.diagnosis
    return (
        result.node is None
        and diagnosis is not None
        and not diagnosis.notes
        and result.nominated is None
        and not result.preempted
        and not result.reason
        and result.gated is None
        and result.explicit_reasons is None
    )


class Failures:
    """The failures of the signatures tried since the cluster state last changed (see the module docstring)."""

    def __init__(self) -> None:
        self._version: tuple[int, ...] | None = None
        self._failed: dict[tuple[Any, ...], _Failure] = {}
        self.reused = 0  # cycles answered from the table (tests and benchmarks read it)
        # Signatures the caller knew already, by pod key (live mode: the pod was copied from its signature's
        # first pod, live.podreuse); the others are computed.
        self.known: dict[str, tuple[Any, ...] | None] = {}

    def clear(self) -> None:
        self._version = None
        self._failed.clear()

    def _current(self, scheduler: Any) -> tuple[int, ...]:
        cluster = scheduler.cluster
        version = (cluster.epoch, cluster.generation, len(cluster.changes), cluster.n)
        if version != self._version:  # the state changed: every kept failure may fit now
            self._failed.clear()
            self._version = version
        return version

    def schedule_one(self, scheduler: Any, pod: Pod, cycle: Callable[[Pod], ScheduleResult]) -> ScheduleResult:
        """``cycle(pod)`` (a full scheduling cycle of ``scheduler``), or the failure of an equivalent pod."""
        key = self.known[pod.key] if pod.key in self.known else signature(pod)
        dra = scheduler.cluster.dra
        if key is None or (dra is not None and extended.mapped_resources(pod, dra.extended)):
            # A DRA-backed extended resource is served through the pod's own claim (found by its name), and a
            # failed cycle may delete that claim: what the signature does not hold.
            return cycle(pod)
        self._current(scheduler)
        kept = self._failed.get(key)
        if kept is not None:
            for bound in kept.draws:  # the generator moves on as the full cycle would have moved it
                scheduler.rng.randrange(bound)
            self.reused += 1
            return kept.result(pod)
        freed = dra is not None and dra.deallocated
        drawing = _Drawing(scheduler.rng)
        scheduler.rng = drawing
        try:
            result = cycle(pod)
        finally:
            scheduler.rng = drawing.rng
        if dra is not None and dra.deallocated and not freed:
            self.clear()  # the cycle gave devices back without a version of its own: nothing kept may stand
            return result
        if _reusable(result):
            diagnosis = result.diagnosis
            assert diagnosis is not None
            # the state the cycle ended with: a failed cycle without side effects leaves it as it found it (a dry
            # run that evicts and restores pods moves the change log, not what the filters read)
            self._current(scheduler)
            self._failed[key] = _Failure(
                result.message,
                frozenset(diagnosis.plugins),
                diagnosis.pre_filter_msg,
                diagnosis.pre_filter_resolvable,
                diagnosis.post_filter_msg,
                tuple(drawing.draws),
            )
        return result
