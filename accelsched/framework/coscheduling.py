"""Coscheduling: one decision for a whole gang (see framework.gang for how gangs are declared and why this
cannot deadlock).

Order of a gang's decision:
1. ``minResources``: if the cluster's free capacity cannot cover the PodGroup's declared minimum, the gang is
   not tried member by member at all (Coscheduling's PreFilter), unless it may preempt.
2. Without preemption, domain by domain (tightest first, then the whole cluster unless the topology is required):
   hold members (full cycles up to Permit) until minMember are held, then bind them all; otherwise release every
   held member and try the next domain.
3. With preemption (every member may preempt, DefaultPreemption enabled): the same, but a member that fits
   nowhere asks DefaultPreemption for victims of lower priority (never one of its own gang, and a running gang
   only whole); the evictions stand only if the whole gang is then held, and are undone otherwise.
4. Otherwise every member gets one message a person can act on: what the gang needs, where it came closest,
   what it lacks there, and why the first member that did not fit failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import Pod
from accelsched.framework import fabric, fabricpreemption, gang
from accelsched.framework.types import Diagnosis, Held, ScheduleResult, fit_error_message

if TYPE_CHECKING:
    from accelsched.framework.scheduler import Scheduler

Domain = tuple[str, np.ndarray] | None  # (label value, its nodes), or None for the whole cluster
Best = tuple[int, str | None, Any]  # (members held, in which domain, the first member's failure there)


class Coscheduler:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def schedule(self, group: gang.PodGroup, members: list[Pod]) -> list[ScheduleResult]:
        members = sorted(members, key=lambda p: p.name)
        if not group.upstream:
            siblings = len(members) + self.scheduler.gang_bound.get(group.key, 0)
            if siblings < group.min_member:  # more pods may come: the gang waits, Pending, as Coscheduling's does
                return self.too_few(group, members, siblings)
        request = fabric.gang_request(group, members)
        key = request.level
        short = self.min_resources_short(group, members)
        # On a fabric the gang is placed as Kueue's TAS would (fewest domains per level, ranks in order); the
        # domain-at-a-time attempts below stay as the fallback, except for slices, which they would split.
        planned = fabric.plan(self.scheduler, group, members, request) if request and not short else None
        domains: list[Domain] = self.domains(key, members, group) if key and not request.slice_level else []
        if not request.required and not request.slice_level:
            domains.append(None)
        preemptor = self.preemptor(members)
        best: Best = (-1, None, None)
        tried: dict[str, ScheduleResult] = {}  # each member's result in the attempt that held the most
        if planned is not None and planned.nodes:
            results, held = self.attempt_planned(planned)
            if len(held) >= group.min_member:
                return self.bind(members, results, held)
            for h in reversed(held):
                self.scheduler.release(h)
            best, tried = (len(held), None, next((r for r in results.values() if not r.scheduled), None)), results
        if not short:
            for domain in domains:
                results, held = self.attempt(members, domain)
                if len(held) >= group.min_member:
                    return self.bind(members, results, held)
                if group.upstream:
                    self.post_filter_messages(members, results, domain, preemptor)
                first_failure = next((r for r in results.values() if not r.scheduled), None)
                if len(held) > best[0]:
                    best = (len(held), None if domain is None else domain[0], first_failure)
                    tried = results
                for h in reversed(held):
                    self.scheduler.release(h)
        preempting = (
            bool(domains) and preemptor is not None and not any(f + evictable < a for _, a, f, evictable in short)
        )
        if planned is not None and not planned.nodes and preemptor is not None:
            outcome = fabricpreemption.preempt(self, group, members, planned)  # frees one domain, or nothing
            if outcome is not None:
                return outcome
        if preempting:
            for domain in domains:
                outcome = self.preempting(group, members, domain, preemptor)
                if outcome is not None:
                    return outcome
        if planned is not None and not tried and self.scheduler.observer is not None:  # no fabric domain fits:
            for pod in members:  # no member was tried, yet explain still sees each against the cluster as it is
                self.scheduler.observer(pod)
        if group.upstream:
            return self.failed_upstream(members, tried)
        return self.failed(group, members, key, best, preempting, short, planned)

    def too_few(self, group: gang.PodGroup, members: list[Pod], siblings: int) -> list[ScheduleResult]:
        """Coscheduling's PreFilter (scheduler-plugins pkg/coscheduling/core) when fewer pods carry the PodGroup's
        label than its minMember: every member is rejected before any node is tried, worded as there."""
        n = self.scheduler.cluster.n
        out = []
        for pod in members:
            reason = gang.NOT_ENOUGH_SIBLINGS.format(pod=pod.name, count=siblings, min_member=group.min_member)
            diagnosis = Diagnosis(plugins={gang.GANG}, pre_filter_msg=reason)
            out.append(ScheduleResult(pod, message=fit_error_message(n, diagnosis), diagnosis=diagnosis))
        return out

    def post_filter_messages(
        self, members: list[Pod], results: dict[str, ScheduleResult], domain: Domain, preemptor: Any
    ) -> None:
        """Upstream's pod group cycle runs PostFilter for each member, so a member that fits nowhere reports
        DynamicResources' and DefaultPreemption's parts too. Its cycle is run again with PostFilter, the held
        members still in place, where preemption would find no victims (so nothing is evicted: state unchanged)."""
        sched = self.scheduler
        allowed = None if domain is None else domain[1]
        exclude = frozenset(p.key for p in members)
        for pod in members:
            result = results[pod.key]
            if result.scheduled or result.diagnosis is None or not result.diagnosis.log:
                continue
            if preemptor is not None and preemptor.find_candidate(pod, sched, result.diagnosis, exclude, allowed)[0]:
                continue  # upstream would nominate it and wait on preemption: left to the gang's own preemption
            results[pod.key] = sched.schedule_one(pod, allowed=allowed)

    @staticmethod
    def failed_upstream(members: list[Pod], tried: dict[str, ScheduleResult]) -> list[ScheduleResult]:
        """kube-scheduler's pod group cycle (schedule_one_podgroup.go) as it reports a gang that does not fit: a
        member that found a node waited at GangScheduling's Permit and gets the group's status; one that did not
        keeps its own FitError. (The PodGroup's condition says ``pod group is unschedulable``: live.podgroups.)"""
        out = []
        for pod in members:
            result = tried.get(pod.key)
            if result is None or result.scheduled:
                out.append(
                    ScheduleResult(
                        pod, message=gang.FEASIBLE_MEMBER, diagnosis=Diagnosis(plugins={gang.GANG_SCHEDULING})
                    )
                )
            else:
                out.append(ScheduleResult(pod, message=result.message, diagnosis=result.diagnosis))
        return out

    def attempt(self, members: list[Pod], domain: Domain) -> tuple[dict[str, ScheduleResult], list[Held]]:
        """Every member through a cycle up to Permit inside ``domain``; the held ones are returned undecided."""
        sched = self.scheduler
        held: list[Held] = []
        results: dict[str, ScheduleResult] = {}
        for pod in members:
            if sched.observer is not None:
                sched.observer(pod)
            results[pod.key] = sched.schedule_one(pod, hold=held, allowed=None if domain is None else domain[1])
        return results, held

    def attempt_planned(self, planned: fabric.Plan) -> tuple[dict[str, ScheduleResult], list[Held]]:
        """Every member, in rank order, through a cycle up to Permit on the node its rank was given; members beyond
        the plan (it placed minMember of them) go wherever the plan's nodes leave room, or nowhere for slices."""
        sched = self.scheduler
        held: list[Held] = []
        results: dict[str, ScheduleResult] = {}
        used = np.zeros(sched.cluster.n, dtype=bool)
        used[planned.nodes] = True
        for i, pod in enumerate(planned.members):
            if sched.observer is not None:
                sched.observer(pod)
            if i < len(planned.nodes):
                allowed = sched.only(planned.nodes[i])
            elif planned.request.slice_level:
                results[pod.key] = ScheduleResult(pod, message=fabric.NO_WHOLE_SLICE)
                continue
            else:
                allowed = used
            results[pod.key] = sched.schedule_one(pod, hold=held, allowed=allowed)
        return results, held

    def bind(self, members: list[Pod], results: dict[str, ScheduleResult], held: list[Held]) -> list[ScheduleResult]:
        for h in held:
            results[h.pod.key] = self.scheduler.complete(h)
        return [results[p.key] for p in members]

    def min_resources_short(self, group: gang.PodGroup, members: list[Pod]) -> list[tuple[str, int, int, int]]:
        """(resource, minResources, free in the cluster, held by pods the gang may preempt) for each resource the
        free capacity cannot cover. Coscheduling's PreFilter: such a gang is not tried member by member; it may
        only preempt, and only if the pods it may evict hold enough."""
        cluster = self.scheduler.cluster
        short = []
        for res, amount in group.min_resources:
            row = cluster.column(res)
            free = int(cluster.free[row].sum()) if row is not None else 0
            if free < amount:
                priority = min(p.priority for p in members)
                evictable = int(cluster.requested_below(priority)[row].sum()) if row is not None else 0
                short.append((res, amount, free, evictable))
        return short

    def preemptor(self, members: list[Pod]) -> Any:
        """The PostFilter plugin that can pick victims for a gang (DefaultPreemption), if every member may preempt."""
        if any(p.preemption_policy == "Never" for p in members):
            return None
        profile = self.scheduler.profile_for(members[0])
        plugins = profile.at("postFilter") if profile is not None else []
        return next((p for p in plugins if hasattr(p, "find_candidate")), None)

    def preempting(
        self, group: gang.PodGroup, members: list[Pod], domain: Domain, preemptor: Any
    ) -> list[ScheduleResult] | None:
        """Place the gang in one domain, evicting lower-priority pods for each member that does not fit. The
        evictions stand only if at least minMember are then held; otherwise everything is put back as it was."""
        sched = self.scheduler
        allowed = None if domain is None else domain[1]
        exclude = frozenset(p.key for p in members)
        held: list[Held] = []
        evicted: list[tuple[Pod, int, Pod, int]] = []  # (victim, its node, the member it made room for, that node)
        results: dict[str, ScheduleResult] = {}
        for pod in members:
            result = sched.schedule_one(pod, hold=held, allowed=allowed)
            if not result.scheduled and result.diagnosis is not None and result.diagnosis.log:
                found, _ = preemptor.find_candidate(pod, sched, result.diagnosis, exclude, allowed)
                if found is not None:
                    mine = [(v, sched.evict(v, delete=True), pod, found.node) for v in found.victims]
                    result = sched.schedule_one(pod, hold=held, allowed=sched.only(found.node))
                    if result.scheduled:
                        evicted.extend(mine)
                    else:  # no use evicting for a member that still does not fit
                        for victim, node, _, _ in reversed(mine):
                            sched.restore(victim, node)
            results[pod.key] = result
        if len(held) >= group.min_member:
            for victim, _, by, node in evicted:
                sched.preempt([victim], by, node)
            out = self.bind(members, results, held)
            for result in out:
                result.preempted = [v for v, _, by, _ in evicted if by is result.pod]
            return out
        for h in reversed(held):
            sched.release(h)
        for victim, node, _, _ in reversed(evicted):
            sched.restore(victim, node)
        return None

    def domains(self, key: str, members: list[Pod], group: gang.PodGroup) -> list[Domain]:
        """The topology domains of ``key``, tightest fit first by the gang's main resource (free within)."""
        cluster = self.scheduler.cluster
        col = cluster.labels(key)
        resource, need = self.need(members, group)
        row = cluster.column(resource)
        ranked = []
        for value, mask in gang.domains(col.codes, col.values):
            free = int(cluster.free[row, mask].sum()) if row is not None else 0
            ranked.append((free < need, free, value, mask))
        ranked.sort(key=lambda t: (t[0], t[1], t[2]))
        return [(value, mask) for _, _, value, mask in ranked]

    @staticmethod
    def need(members: list[Pod], group: gang.PodGroup) -> tuple[str, int]:
        """The gang's main resource (its first device resource, else cpu) and how much minMember members need."""
        requests = members[0].requests
        devices = sorted((r, a) for r, a in requests.items() if quantity.is_extended(r))
        resource, amount = devices[0] if devices else (quantity.CPU, requests.get(quantity.CPU, 0))
        return resource, amount * group.min_member

    def failed(
        self,
        group: gang.PodGroup,
        members: list[Pod],
        key: str,
        best: Best,
        preempting: bool,
        short: list[tuple[str, int, int, int]],
        planned: fabric.Plan | None = None,
    ) -> list[ScheduleResult]:
        """``gang ns/train-a needs 8 pods x 4 qualcomm.com/ai-accelerator (minMember 8); best pdu pdu-2 fits 6;
        short 8 qualcomm.com/ai-accelerator; first member that did not fit: 0/4 nodes are available: ...``"""
        cluster = self.scheduler.cluster
        fitted, domain, failure = best
        message = f"gang {group.key} needs {gang.describe_request(members)} (minMember {group.min_member})"
        if short:
            message += "; minResources " + ", ".join(
                f"{quantity.format_quantity(r, a)} {r} but {quantity.format_quantity(r, f)} free in the cluster"
                for r, a, f, _ in short
            )
        else:
            if planned is not None and planned.reason:  # Kueue's words for the fabric, then the smallest change
                message += f"; {planned.reason}" + (f"; {planned.notes[-1]}" if planned.notes else "")
            if fitted >= 0 or planned is None or not planned.reason:
                where = f"best {key} {domain} fits {max(fitted, 0)}" if domain is not None else f"{max(fitted, 0)} fit"
                message += f"; {where}"
            resource, need = self.need(members, group)
            row = cluster.column(resource)
            if row is not None and quantity.is_extended(resource):
                col = cluster.labels(key) if domain else None
                mask = col.codes == col.values.index(domain) if col is not None else None
                free = int(cluster.free[row].sum() if mask is None else cluster.free[row, mask].sum())
                if need > free:
                    message += f"; short {need - free} {resource}"
            if group.required_topology and domain is None and fitted < 0 and planned is None:
                message += f"; no node has the {key} label"
        if preempting:
            lower = bool((cluster.min_priority < min(p.priority for p in members)).any())
            message += (
                "; preemption: evicting lower-priority pods would not make the whole gang fit"
                if lower
                else "; preemption: no running pod has a lower priority"
            )
        if failure is not None and failure.message:
            message += f"; first member that did not fit: {failure.message}"
        diagnosis = Diagnosis(plugins={gang.GANG}, notes=planned.notes if planned is not None else [])
        return [ScheduleResult(p, message=message, diagnosis=diagnosis) for p in members]
