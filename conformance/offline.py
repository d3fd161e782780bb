"""accelsched's side of the oracle: the same objects scheduled in-process, one pending pod after another.

kube-scheduler picks at random among its best-scored nodes, so a scenario can only be replayed if accelsched binds
where kube-scheduler did whenever that node is among accelsched's best: ``follow`` names those nodes (pod ->
node), and the scheduler here records its best-scored set per pod. Nothing else differs from ``accelsched
schedule``: the documents go through api.loader and the config through accelsched.config.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelsched.api.loader import Document, build_inputs
from accelsched.cluster.state import ClusterState
from accelsched.cluster.volumes import VolumeState
from accelsched.engine import Session
from accelsched.errors import InputError
from accelsched.framework import gang
from accelsched.framework.scheduler import Scheduler
from conformance import configs
from conformance.outcome import PodOutcome
from conformance.scenario import JSON, Scenario, key


class FollowingScheduler(Scheduler):
    """A Scheduler that notes its best-scored nodes per pod and, among them, takes the one it is told to follow."""

    def __init__(self, *args: Any, follow: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.follow = follow or {}
        self.best: dict[str, list[str]] = {}

    def select_host(self, profile: Any, state: Any, pod: Any, feasible: np.ndarray) -> int:
        total, _ = self.score(profile, state, pod, feasible)
        if state.best_nodes is not None:
            best = [int(i) for i in state.best_nodes]
        else:
            best = [int(feasible[i]) for i in np.flatnonzero(total == total.max())]
        names = [self.node_names[i] for i in best]
        self.best[pod.key] = names
        wanted = self.follow.get(pod.key)
        if wanted in names:
            return best[names.index(wanted)]
        # Not among the best (a score disagreement, already recorded): still follow a feasible real choice, so
        # the next pods see the cluster kube-scheduler saw and the difference is not counted twice.
        index = self.cluster.index.get(wanted) if wanted else None
        if index is not None and bool(np.any(feasible == index)):
            return int(index)
        return best[self.rng.randrange(len(best))]


class AccelschedError(Exception):
    """accelsched refused the scenario's input (the real API server took it): a disagreement of its own."""


def start(
    scenario: Scenario, follow: dict[str, str] | None = None, seed: int = 0, config: JSON | None = None
) -> tuple[Session, Any]:
    docs = [Document(d, f"scenario {scenario.digest()}", d["kind"]) for d in scenario.documents()]
    from accelsched.config import parse_config

    try:
        inputs = build_inputs(docs)
        doc = config or configs.scheduler_config(scenario.config)
        parsed = parse_config(doc, f"config {scenario.config}")
    except InputError as exc:
        raise AccelschedError(str(exc)) from None
    cluster = ClusterState(inputs.nodes, inputs.namespaces)
    cluster.volumes = VolumeState(inputs.storage, cluster)  # PVs, claims, classes: the volume plugins
    if getattr(inputs, "dra", None):  # as engine.Session.start: DRA state only when there are DRA objects
        from accelsched.dra.state import DRAState

        cluster.dra = DRAState(inputs.dra, cluster)
    scheduler = FollowingScheduler(cluster, parsed, seed, follow=follow)
    scheduler.groups = gang.implicit_groups(inputs.pods, inputs.pod_groups)
    rejected = [r for pod in inputs.bound if (r := scheduler.admit_bound(pod)) is not None]
    if rejected:
        raise AccelschedError(f"bound pod rejected at admission: {rejected[0].pod.key}: {rejected[0].message}")
    return Session(inputs, cluster, scheduler, rejected), inputs


def run(
    scenario: Scenario, follow: dict[str, str] | None = None, seed: int = 0, config: JSON | None = None
) -> list[PodOutcome]:
    """Each pending pod's first decision, scheduled in the scenario's order as the real run creates them."""
    session, inputs = start(scenario, follow, seed, config)
    scheduler: FollowingScheduler = session.scheduler  # type: ignore[assignment]
    by_key = {p.key: p for p in inputs.pending}
    outcomes = []
    for doc in scenario.pending:
        pod_key = key(doc)
        pod = by_key.get(pod_key)
        if pod is None:  # the loader kept it out of the pending set (e.g. a terminal phase)
            outcomes.append(PodOutcome(pod_key, message="accelsched: not pending"))
            continue
        results = scheduler.run([pod])
        mine = [r for r in results if r.pod.key == pod_key]
        result = mine[0] if mine else None
        out = PodOutcome(pod_key)
        if result is None:
            out.message = "accelsched: no result"
        else:
            out.node = result.node or ""
            out.message = "" if result.node else result.message
            out.reason = "" if result.node else _reason(result)
            victims = sorted(r.pod.key for r in results if r.preempted_by == pod_key)
            victims = victims or sorted(v.key for v in result.preempted)
            if victims:
                out.victims = victims
                out.message = out.reason = ""
                out.nominated = result.node or _nominated(scheduler, result)
            out.best = scheduler.best.get(pod_key, [])
            if out.node:
                out.claims = pod_claims(scheduler.cluster, pod)
        outcomes.append(out)
    return outcomes


def pod_claims(cluster: ClusterState, pod: Any) -> list[JSON]:
    """A bound pod's claims as PodOutcome.claims: per pod claim (and the extended-resource claim, if any) the
    devices accelsched allocated; the claim's own name is left out (the generated ones differ from the real)."""
    state = getattr(cluster, "dra", None)
    if state is None:
        return []
    out = [{"name": c["name"], "results": list(c["results"])} for c in state.pod_claim_results(pod)]
    extended = getattr(state, "extended_claim_results", None)  # the plugin's "<extended-resources>" claim
    if extended is not None:
        results = extended(pod)
        if results:
            out.append({"name": "<extended-resources>", "results": list(results)})
    return out


def _reason(result: Any) -> str:
    reason = getattr(result, "reason", "")
    if reason:
        return str(reason)
    return "SchedulingGated" if result.message.startswith("Scheduling is blocked") else "Unschedulable"


def _nominated(scheduler: Scheduler, result: Any) -> str:
    return scheduler.node_names[result.nominated] if result.nominated is not None else ""

