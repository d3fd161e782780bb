"""The incremental what-if: today's cluster as its run began, copied and edited, instead of a session built anew.

A full what-if (``state.execute`` over the changed state) parses every node and pod again and admits every bound
pod again: at 5,000 nodes most of its time, though a one-node action changes one node and the pods on it. This
path keeps, per published run, a copy of the cluster state as that run began (its bound pods admitted, before any
Pending pod was tried: ``Base``). A what-if copies it (arrays and per-node ledgers: ClusterState.copy), and takes
in only what the action changed, exactly as a new session would have it:

- a node the action edited (cordon, uncordon, a taint) is parsed again and updated in place (update_node); a node
  it added is appended (add_node), where the full run puts it (after the last node);
- a node a pod left (drained, evicted by a NoExecute taint) has its pods admitted again from scratch, in the order
  Session.start admits them (the pods that name their devices first): a pod that took devices by the admission
  order gets those it would get in a new session; the pods a copy's DaemonSets put on it are admitted there;
- the bind order (preemption's last tie-break) is numbered again in input order, as Session.start does.

The queue is then run as the full run runs it: every Pending pod, in queue order, from a fresh copy of each as it
was parsed. A pod left Pending by today's run may fit now (a drain frees room for pods its evicted ones take,
an add brings a node), and each Pending pod's message counts the nodes by reason, which a cordon changes, so the
Pending pods are tried again, not copied: their attempts (one filter pass over the nodes each) are what is left.

The answer equals the full run's: ``tests/test_ui_incremental.py`` compares both on random clusters and actions.
Where this cannot follow the state, the full run is used (``rerun`` returns None): a CPU/NUMA topology, device
partitions, DRA or storage objects (their per-node state lives outside the arrays), Kueue, gangs, workload objects
the loader expands, or a bound pod the admission refused. The bound pods are today's objects, shared; those a
Pending pod could preempt (preemption edits its victims) are copied first.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from accelsched.api import objects
from accelsched.api.loader import Inputs
from accelsched.api.objects import DEVICES_ANNOTATION, Pod
from accelsched.cluster.devices import NodeDevices
from accelsched.cluster.state import ClusterState
from accelsched.config import default_config
from accelsched.engine import Session
from accelsched.errors import InputError, Where
from accelsched.framework import gang
from accelsched.framework.profile import SchedulerConfig
from accelsched.framework.scheduler import Scheduler
from accelsched.ui.state import RawState, Run, checked, fresh, object_key, scheduled

CACHE_KEY = "incremental.base"  # where a run keeps its Base (Run.cache)


@dataclass
class Base:
    """A run's cluster as it began (bound pods admitted, no Pending pod tried), and what its session was made of."""

    cluster: ClusterState
    inputs: Inputs
    pending: dict[str, Pod]  # key -> each Pending pod as it was before its run wrote to it
    warnings: list[str]
    topologies: tuple


def execute(
    state: RawState, config: SchedulerConfig | None = None, seed: int = 0, check: Callable[[], None] | None = None
) -> Run:
    """``state.execute`` that also keeps the run's Base (when ``capture`` can): what the Hub publishes."""
    session, warnings = state.start(config, seed)
    base = capture(state, session, warnings)  # before the run: it writes to the cluster and to the pending pods
    run = scheduled(state, session, warnings, check)
    if base is not None:
        run.cache[CACHE_KEY] = base
    return run


def capture(state: RawState, session: Session, warnings: list[str]) -> Base | None:
    """The Base of a session not yet scheduled, or None when an incremental what-if could not follow it."""
    inputs, cluster, scheduler = session.inputs, session.cluster, session.scheduler
    if (
        session.rejected
        or session.queues is not None
        or state.changed_gangs
        or not cluster.follows_node_set()
        or inputs.pod_groups
        or scheduler.groups
        or scheduler.gang_gates
        or getattr(state, "pod_cache", None) is None
    ):
        return None
    documents = {object_key(d) for d in state.pods()}
    for pod in inputs.pods:
        if pod.key not in documents or gang.group_key(pod) is not None or pod.scheduling_group:
            return None  # a pod the loader made (a workload's), or a gang's
    copied = cluster.copy()
    pods = list(inputs.pods)
    _own_victims(copied, pods, inputs.pending)  # today's run may preempt them: it edits its own objects
    kept = copy.copy(inputs)
    kept.pods = pods
    pending = {p.key: fresh(p) for p in inputs.pending}
    return Base(copied, kept, pending, list(warnings), scheduler.topologies)


def rerun(
    run: Run,
    state: RawState,
    config: SchedulerConfig | None = None,
    seed: int = 0,
    check: Callable[[], None] | None = None,
) -> Run | None:
    """``execute(state)`` for ``state``, a what-if's change of ``run.state`` (copy on write: the dicts it did not
    change are the same objects), from ``run``'s Base; None when it cannot be followed (then run the full one)."""
    base: Base | None = run.cache.get(CACHE_KEY)
    if base is None or state.changed_gangs:
        return None
    cluster = base.cluster.copy()
    added = _take_nodes(run.state, state, cluster)
    if added is None:
        return None
    pods = _pods(run, state, base)
    if pods is None:
        return None
    bound = [p for p in pods if p.node_name and not p.terminal]
    pending = [p for p in pods if not p.node_name and not p.terminal]
    scheduler = Scheduler(cluster, config or default_config(), seed)
    scheduler.topologies = base.topologies
    if not _admit_again(run, state, cluster, scheduler, pods, added):
        return None
    cluster.keep_bind_order(bound)
    _own_victims(cluster, pods, pending)
    inputs = copy.copy(base.inputs)
    inputs.pods = pods
    inputs.nodes = list(cluster.nodes)
    session = Session(inputs, cluster, scheduler)
    if check is not None:
        check()
        checked(session, check)
    return Run(state, session, session.schedule(pending), list(base.warnings))


def _take_nodes(before: RawState, after: RawState, cluster: ClusterState) -> set[str] | None:
    """The nodes ``after`` edited, updated in ``cluster``, and those it added, appended; the added names, or None
    when one cannot be taken in place (or a node is gone: no action removes one)."""
    known = {id(d) for d in before.nodes()}
    docs = after.nodes()
    added: set[str] = set()
    for doc in docs:
        if id(doc) in known:
            continue
        name = (doc.get("metadata") or {}).get("name")
        i = cluster.index.get(name) if isinstance(name, str) else None
        if i is not None:
            if not cluster.update_node(objects.parse_node(doc, cluster.nodes[i].source)):
                return None
        elif isinstance(name, str) and cluster.add_node(objects.parse_node(doc, after.new_source)):
            added.add(name)
        else:
            return None
    return added if len(docs) == cluster.n else None


def _pods(run: Run, state: RawState, base: Base) -> list[Pod] | None:
    """The what-if's pods, as its session would list them: today's where their documents are the same (the bound
    ones shared, a Pending one a fresh copy), the documents the action made parsed (``state.parse_new_pod``)."""
    before = {id(d) for d in run.state.pods()}
    known = {p.key: p for p in base.inputs.pods}
    out = []
    for doc in state.pods():
        key = object_key(doc)
        if id(doc) in before:
            pod = known.get(key)
            if pod is None:
                continue  # left out of today's session too (live: a finished pod, or one convert refused)
            out.append(fresh(base.pending[key]) if key in base.pending else pod)
            continue
        try:
            pod = state.parse_new_pod(doc, base.inputs, known.get(key))
        except (InputError, ValueError, TypeError, KeyError, AttributeError, IndexError, ArithmeticError):
            return None  # whatever the full run makes of it (an error, or live: the pod left out), it says
        if pod is None:
            return None  # the state cannot parse a pod as its start would: the full run
        if (pod.raw.get("spec") or {}).get("resourceClaims") or gang.group_key(pod) is not None:
            return None
        out.append(pod)
    return state.run_order(out)


def _admit_again(
    run: Run, state: RawState, cluster: ClusterState, scheduler: Scheduler, pods: list[Pod], added: set[str]
) -> bool:
    """Admit again the bound pods of every node a pod left, and admit those on the added nodes, as Session.start
    admits them (the pods that name their devices first, then the others in input order, each node's devices
    taken from none); False when a bound pod the action made is on another node, or the admission refuses one."""
    now = {id(d) for d in state.pods()}
    left = {object_key(d) for d in run.state.pods() if id(d) not in now}
    nodes = {cluster.pod_node[key] for key in left if key in cluster.pod_node}
    names = {cluster.nodes[i].name for i in nodes} | added
    shared = {id(p) for i in nodes for p in cluster.pods_on[i].values()}
    for i in nodes:
        for pod in list(cluster.pods_on[i].values()):
            cluster.forget(pod)
        node = cluster.nodes[i]
        cluster.devices[i] = NodeDevices.for_node(node.allocatable, node.device_ids, None)
    again = []
    for k, pod in enumerate(pods):
        if not pod.node_name or pod.terminal:
            continue
        if pod.node_name not in names:
            if pod.key not in cluster.pod_node:
                return False  # a bound pod the action made, on a node whose pods are not admitted again
            continue
        if id(pod) in shared:  # today's object, its devices given by today's admission: a copy takes new ones
            pod = fresh(pod)
            if not _names_devices(pod):
                pod.devices = {}
            pods[k] = pod
        again.append(pod)
    return all(scheduler.admit_bound(pod) is None for pod in sorted(again, key=lambda p: not p.devices))


def _own_victims(cluster: ClusterState, pods: list[Pod], pending: list[Pod]) -> None:
    """Preemption edits its victims (node_name), and the bound pods are today's objects: every bound pod a Pending
    one could preempt (of a lower priority) is a copy of its own here. Most clusters have none (one priority)."""
    top = max((p.priority for p in pending if p.preemption_policy != "Never"), default=None)
    if top is None:
        return
    at = None
    for i in np.flatnonzero(cluster.min_priority < top).tolist():
        on = cluster.pods_on[i]
        for key, pod in list(on.items()):
            if pod.priority < top:
                if at is None:
                    at = {p.key: k for k, p in enumerate(pods)}
                on[key] = pods[at[key]] = fresh(pod)


def _names_devices(pod: Pod) -> bool:
    """Whether the pod names its devices (our bind's annotation), as parse_pod read it."""
    text = pod.annotations.get(DEVICES_ANNOTATION)
    if text is None:
        return False
    where = Where(pod.source, objects.describe("Pod", pod.namespace, pod.name))
    return bool(objects.parse_devices_annotation(where, text, f"metadata.annotations[{DEVICES_ANNOTATION}]"))
