"""Why-Pending explanations: kube-scheduler's message, then for every node the first failing filter, the facts
behind it, every other filter that also fails there, and what change would make the node feasible.

The explanation is taken at the pod's own scheduling attempt (the cluster exactly as the pod saw it), through
the same plugins, so it can never disagree with the FailedScheduling message.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.dra import explain as dra_explain
from accelsched.framework.interface import Code, CycleState, NodeExplanation, PluginError
from accelsched.framework.profile import Profile
from accelsched.framework.scheduler import Scheduler, ScheduleResult
from accelsched.queues import explain as queue_explain
from accelsched.topology.allocator import NIC_ANNOTATION, NUMA_ANNOTATION

DYNAMIC_RESOURCES = "DynamicResources"


@dataclass
class NodeVerdict:
    node: str
    feasible: bool
    reasons: list[str] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)  # every filter that rejects the node, in order
    details: list[str] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)
    score: int | None = None
    scores: dict[str, int] = field(default_factory=dict)
    claims: list[dict[str, Any]] = field(default_factory=list)  # per DRA request: its device funnel on the node

    @property
    def first_filter(self) -> str | None:
        return self.failing[0] if self.failing else None

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "feasible": self.feasible,
            "filter": self.first_filter,
            "reasons": self.reasons,
            "failingFilters": self.failing,
            "details": self.details,
            "remedies": self.remedies,
            "score": self.score,
            "scores": self.scores,
            **({"claims": self.claims} if self.claims else {}),
        }


@dataclass
class Explanation:
    pod: Pod
    result: ScheduleResult | None = None
    nodes: list[NodeVerdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # about the pod as a whole (unadvertised_notes)
    queue: Any = None  # queues.explain.QueueExplanation: why its Kueue workload is not admitted, and what would

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "namespace": self.pod.namespace,
            "name": self.pod.name,
            "node": r.node if r else self.pod.node_name or None,
            "devices": dict(r.devices) if r else {},
            "alignment": self.alignment,
            "message": r.message if r else "",
            "notes": self.notes,
            "nodes": [v.to_json() for v in self.nodes],
            **({"queue": self.queue.to_json()} if self.queue is not None else {}),
        }

    @property
    def alignment(self) -> dict[str, str]:
        """The NUMA nodes and NIC the topology-aware allocation chose (empty off topology-aware nodes)."""
        annotations = self.pod.raw.get("metadata", {}).get("annotations") or {}
        keys = {NUMA_ANNOTATION: "numaNodes", NIC_ANNOTATION: "nic"}
        return {name: annotations[key] for key, name in keys.items() if annotations.get(key)}


def explain_attempt(scheduler: Scheduler, profile: Profile, pod: Pod) -> list[NodeVerdict]:
    """Evaluate every filter on every node (no short-circuit) and the scores of the feasible nodes."""
    cluster: ClusterState = scheduler.cluster
    state = CycleState()
    for plugin in profile.at("preFilter"):
        if plugin.pre_filter(state, pod, cluster).code == Code.SKIP:
            state.skip_filter.add(plugin.name)
    verdicts = [NodeVerdict(node.name, True) for node in cluster.nodes]
    per_node: list[list[tuple[Any, list[str]]]] = [[] for _ in cluster.nodes]
    for plugin in profile.at("filter"):
        if plugin.name in state.skip_filter:
            continue
        try:
            result = plugin.filter(state, pod, cluster)
        except PluginError as exc:
            # A Filter's Error status ends the attempt (the pod's message is ``running "<plugin>" filter plugin:
            # ...``): the nodes no earlier filter rejected fail there, with the error; later filters never ran.
            for failing in per_node:
                if not failing:
                    failing.append((plugin, [exc.status.message]))
            break
        for i in np.flatnonzero(result.rejected(cluster.n)):
            reasons = [r.reason for r in result.rejections if r.nodes[i]]
            per_node[int(i)].append((plugin, reasons))
    devices = dra_explain.ClusterView(pod, cluster) if dra_explain.has_claims(pod, cluster) else None
    for i, verdict in enumerate(verdicts):
        failing = per_node[i]
        if not failing:
            continue
        verdict.feasible = False
        verdict.reasons = failing[0][1]
        verdict.failing = [p.name for p, _ in failing]
        for plugin, _ in failing:
            if devices is not None and plugin.name == DYNAMIC_RESOURCES:  # device by device (dra/explain.py)
                claims = devices.node(i)
                verdict.claims = claims.to_json()
                why = NodeExplanation(claims.details, claims.remedies)
            else:
                why = plugin.explain(state, pod, cluster, i)
            verdict.details.extend(why.details)
            if len(failing) == 1:
                verdict.remedies.extend(f"{r} would make {verdict.node} feasible" for r in why.remedies)
            else:
                others = ", ".join(p.name for p, _ in failing if p is not plugin)
                verdict.remedies.extend(f"{r} (still blocked by {others})" for r in why.remedies)
    feasible = np.array([i for i, v in enumerate(verdicts) if v.feasible], dtype=np.int64)
    if feasible.size:
        total, parts = scheduler.score(profile, state, pod, feasible, breakdown=True)
        for k, i in enumerate(feasible):
            v = verdicts[int(i)]
            v.score = int(total[k])
            v.scores = {name: int(s if isinstance(s, int) else s[k]) for name, s in parts.items()}
    return verdicts


def unadvertised_notes(pod: Pod, cluster: ClusterState) -> list[str]:
    """For each resource the pod requests that no node advertises at all (kube-scheduler: ``Insufficient <res>`` on
    every node, nothing more), the advertised names closest to it: most often a typo in the resource name."""
    advertised = {res for node in cluster.nodes for res in node.allocatable}
    notes = []
    for res in sorted(r for r, amount in pod.requests.items() if amount and r not in advertised):
        same_kind = sorted(a for a in advertised if quantity.is_extended(a) == quantity.is_extended(res))
        closest = difflib.get_close_matches(res, same_kind, n=3, cutoff=0.6)
        if closest:
            notes.append(f"no node advertises {res}; nodes advertise {', '.join(closest)}")
        elif same_kind and quantity.is_extended(res):
            notes.append(f"no node advertises {res}; nodes advertise {', '.join(same_kind)}")
        else:
            notes.append(f"no node advertises {res}")
    return notes


def find_pod(pods: list[Pod], name: str) -> Pod | None:
    """``ns/name`` or a bare name (unique across namespaces)."""
    if "/" in name:
        return next((p for p in pods if p.key == name), None)
    matches = [p for p in pods if p.name == name]
    return matches[0] if len(matches) == 1 else None


def explain_pod(session: Any, name: str, prepare: Callable[[Any], None] | None = None) -> Explanation | None:
    """``accelsched explain NAME`` on a started Session (engine.Session): schedule its pending pods with an
    Explainer watching NAME (``ns/name`` or a unique bare name); None when there is no such pod. The one way the
    CLI, the web view and the kubectl plugin explain a pod. ``prepare`` sees the session before it schedules (the
    web view hooks its cancellation check there)."""
    target = find_pod(session.inputs.pods, name)
    if target is None:
        return None
    explainer = Explainer(session.scheduler, {target.key})
    if prepare is not None:
        prepare(session)
    results = session.rejected + session.schedule()
    result = next((r for r in results if r.pod is target), None)
    explanation = explainer.explanation(target, result)
    if session.queues is not None and result is not None and result.gated is not None:  # held by Kueue
        inputs = session.inputs
        explanation.queue = queue_explain.for_pod(session.queues, target, inputs.pods, inputs.namespaces, inputs.nodes)
    return explanation


class Explainer:
    """Records, at each attempt of the watched pods, the node-by-node verdicts (the last attempt wins)."""

    def __init__(self, scheduler: Scheduler, targets: set[str] | None = None) -> None:
        self.scheduler = scheduler
        self.targets = targets
        self.verdicts: dict[str, list[NodeVerdict]] = {}
        self.notes: dict[str, list[str]] = {}
        scheduler.observer = self.observe

    def observe(self, pod: Pod) -> None:
        if self.targets is not None and pod.key not in self.targets:
            return
        profile = self.scheduler.profile_for(pod)
        if profile is not None and self.scheduler.cluster.n:
            self.verdicts[pod.key] = explain_attempt(self.scheduler, profile, pod)
        cluster = self.scheduler.cluster
        notes = unadvertised_notes(pod, cluster)
        if dra_explain.has_claims(pod, cluster):  # the pod's claims across the cluster come first
            notes = [*dra_explain.ClusterView(pod, cluster).summary(), *notes]
        self.notes[pod.key] = notes

    def explanation(self, pod: Pod, result: ScheduleResult | None) -> Explanation:
        """What was recorded for ``pod`` at its last attempt, with its result."""
        notes = self.notes.get(pod.key, [])
        if result is not None and result.diagnosis is not None:  # a gang on a fabric: what fits in each domain
            notes = [*result.diagnosis.notes, *notes]
        if result is not None and result.gated is not None:  # PreEnqueue kept it out of the queue: say which gates
            cluster = self.scheduler.cluster
            if pod.key not in self.notes and dra_explain.has_claims(pod, cluster):  # e.g. which claim is missing
                notes = dra_explain.ClusterView(pod, cluster).summary()
            notes = [f"{result.gated.plugin}: {result.gated.message}", *notes]
        return Explanation(pod, result, self.verdicts.get(pod.key, []), notes)
