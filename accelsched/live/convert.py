"""The live cluster's objects -> the engine's Inputs, through the same parsers as the offline modes.

The API server's JSON is what ``kubectl get -o json`` prints, so nodes, namespaces, NodeResourceTopologies, storage,
DRA and Kueue's objects (live/kueue.py) go through ``loader.build_inputs`` and pods and PodGroups through their own
parsers: live and offline modes are one
engine. Two things differ from reading files, because a cluster is never all-or-nothing input:

- One bad object must not stop the scheduler. An object the parsers reject is left out and reported (its error
  names the object and the field, as offline); everything else is scheduled.
- Pods arrive one by one. A gang whose PodGroup asks for more members than exist yet waits, untried, with the
  Coscheduling plugin's PreFilter message (as offline), and members already bound count toward minMember, so a
  gang that was partly bound is completed rather than asked for minMember more pods.
- Admission already ran in the API server (priority from the PriorityClass), so pods are taken as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from accelsched.api import objects
from accelsched.api.loader import Document, Inputs, build_inputs
from accelsched.api.objects import Pod
from accelsched.dra import claims as dra_claims
from accelsched.engine import Session
from accelsched.errors import InputError
from accelsched.framework import gang
from accelsched.framework.types import Diagnosis, fit_error_message
from accelsched.live import kueue as live_kueue
from accelsched.live import workloadstatus
from accelsched.live.kube import JSON
from accelsched.live.workloadcache import ParsedByVersion
from accelsched.queues import api as queue_api
from accelsched.queues import workloads as queue_workloads

SOURCE = "cluster"
WORKLOAD = "Workload"  # Kueue's
# A Workload as read (live/workloadcache.py): the object and whether it is ours to admit, or why it is left out.
WorkloadRead = tuple[queue_api.WorkloadObject, bool] | str
T = TypeVar("T")
# What parsing one odd object can raise. The API server validates built-in fields, but not annotations, nor CRDs
# (NodeResourceTopology, PodGroup) whose schema preserves unknown fields: a list where a string belongs, a huge
# quantity, a bad annotation can reach a parser that was written for files and raise more than InputError there.
# Any of these leaves that one object out (logged, named); scheduling goes on with the rest.
UNUSABLE: tuple[type[Exception], ...] = (
    InputError, ValueError, TypeError, KeyError, AttributeError, IndexError, ArithmeticError, RecursionError,
)  # fmt: skip


def unusable_message(exc: Exception) -> str:
    """The error to log and report for an object left out: InputError's own line, else the exception named."""
    if isinstance(exc, InputError):
        return str(exc)
    return f"cannot be used ({type(exc).__name__}: {str(exc)[:200]})"


@dataclass
class Snapshot:
    """The objects the scheduler reads, as the API server serves them."""

    nodes: list[JSON] = field(default_factory=list)
    pods: list[JSON] = field(default_factory=list)
    namespaces: list[JSON] = field(default_factory=list)
    pod_groups: list[JSON] = field(default_factory=list)
    topologies: list[JSON] = field(default_factory=list)
    storage: dict[str, list[JSON]] = field(default_factory=dict)  # kind -> PVs, claims, classes, CSI objects
    dra: dict[str, list[JSON]] = field(default_factory=dict)  # kind -> DeviceClasses, ResourceSlices, claims, templates
    kueue: dict[str, list[JSON]] = field(default_factory=dict)  # kind -> Kueue's objects, HyperNodes, queued Jobs


@dataclass
class Converted:
    inputs: Inputs
    groups: dict[str, gang.PodGroup]  # the gangs to schedule, minMember less the members already bound
    waiting: dict[str, str] = field(default_factory=dict)  # pending pod key -> why it is not tried yet
    errors: dict[str, str] = field(default_factory=dict)  # object -> the error that left it out
    orphans: list[str] = field(default_factory=list)  # bound pods whose node is gone (not accounted)


def _parsed(docs: list[JSON], parse: Callable[[JSON, str], T], kind: str, errors: dict[str, str]) -> Iterator[T]:
    """Each object parsed; one the parser rejects is left out and its error kept."""
    for doc in docs:
        try:
            yield parse(doc, SOURCE)
        except UNUSABLE as exc:
            errors[_describe(doc, kind)] = unusable_message(exc)


def _build_cluster(docs: list[Document], errors: dict[str, str]) -> Inputs:
    """``build_inputs`` leaving out each object it rejects (one retry per bad object; usually none)."""
    docs = list(docs)
    while True:
        try:
            return build_inputs(docs)
        except UNUSABLE as exc:
            named = isinstance(exc, InputError) and exc.obj
            bad = [i for i, d in enumerate(docs) if named and _describe(d.doc, d.kind) == exc.obj]
            if not bad:
                # An error that names no object we can find (no name, or not an InputError): the objects that fail
                # the same way on their own are the culprits (a rare path: one build per object).
                bad = [i for i, d in enumerate(docs) if _same_failure(_lone_failure(d, docs), exc)]
            if not bad:
                raise
            for i in reversed(bad if not named else bad[:1]):
                errors[_describe(docs[i].doc, docs[i].kind)] = unusable_message(exc)
                del docs[i]


def _lone_failure(doc: Document, docs: list[Document]) -> Exception | None:
    """What building this one object raises (a NodeResourceTopology with its Node, which it needs), or None."""
    alone = [doc]
    if doc.kind == "NodeResourceTopology":
        name = _describe(doc.doc, "Node")
        alone = [d for d in docs if d.kind == "Node" and _describe(d.doc, "Node") == name] + alone
    try:
        build_inputs(alone)
    except UNUSABLE as exc:
        return exc
    return None


def _same_failure(a: Exception | None, b: Exception) -> bool:
    if a is None or type(a) is not type(b):
        return False
    if isinstance(a, InputError) and isinstance(b, InputError):
        return (a.field, a.message) == (b.field, b.message)
    return str(a) == str(b)


def parse_pod(doc: JSON, source: str) -> Pod:
    """A Pod with its resource claims checked now, as the loader checks them (dra/claims.py, cached on the pod):
    a pod whose claims another server version shaped differently is left out here, named, rather than failing
    the scheduling cycle that first reads them."""
    pod = objects.parse_pod(doc, source)
    dra_claims.pod_resource_claims(pod)
    return pod


def _describe(doc: JSON, kind: str) -> str:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    # A name that is not a string is shown by its type: str() of a 5,000-digit int is itself a ValueError.
    namespace, name = (
        v[:253] if isinstance(v := meta.get(k) or "", str) else f"<{type(v).__name__}>" for k in ("namespace", "name")
    )
    return objects.describe(kind, namespace, name).strip()


def convert(
    snapshot: Snapshot,
    scheduler_names: Iterable[str] | None = None,
    parse: Callable[[JSON, str], Pod] = parse_pod,
    workloads: ParsedByVersion[WorkloadRead] | None = None,
) -> Converted:
    """Inputs for a Session: every node, every bound pod (for accounting), and the pending pods whose
    ``schedulerName`` is in ``scheduler_names`` (all pending pods when None: the what-if commands). ``parse``: a
    Pod document's parser (the web view's reuses the pods it parsed before: ui/state.PodCache). ``workloads``:
    Kueue's Workloads as read in earlier rounds (``accelsched run``'s, live/workloadcache.py)."""
    errors: dict[str, str] = {}
    docs = [Document(d, SOURCE, "Node") for d in snapshot.nodes]
    docs += [Document(d, SOURCE, "Namespace") for d in snapshot.namespaces]
    docs += [Document(d, SOURCE, "NodeResourceTopology") for d in snapshot.topologies]
    docs += [Document(d, SOURCE, kind) for kind, items in snapshot.storage.items() for d in items]
    # DRA objects through the loader's parsers too (dra/objects.py); the claims of templates are the resourceclaim
    # controller's to make in a cluster, and the loader makes them only for the pods it is given (none here).
    docs += [Document(d, SOURCE, kind) for kind, items in snapshot.dra.items() for d in items]
    # Kueue's objects (live/kueue.py) as the file reader reads them: accelsched/queues and accelsched/fabric.
    kueue = snapshot.kueue if workloads is None else {k: v for k, v in snapshot.kueue.items() if k != WORKLOAD}
    docs += live_kueue.documents(kueue, SOURCE)
    inputs = _build_cluster(docs, errors)
    names = None if scheduler_names is None else set(scheduler_names)
    checked: set[str] = set()
    if workloads is not None:
        checked = _read_workloads(inputs, snapshot.kueue.get(WORKLOAD) or [], workloads, errors, names)
    _read_queues(inputs, snapshot.kueue.get(live_kueue.JOB) or [], errors, checked)
    if names is not None and workloads is None:
        _drop_others_pending(inputs, snapshot.kueue.get(WORKLOAD) or [], names)
    node_names = {n.name for n in inputs.nodes}

    bound: list[Pod] = []
    pending: list[Pod] = []
    orphans: list[str] = []
    for pod in _parsed(snapshot.pods, parse, "Pod", errors):
        if pod.terminal:
            continue
        if pod.node_name:
            if pod.node_name in node_names:
                bound.append(pod)
            else:
                orphans.append(pod.key)
        elif names is None or pod.scheduler_name in names:
            pending.append(pod)

    declared = {g.key: g for g in _parsed(snapshot.pod_groups, gang.parse_pod_group, "PodGroup", errors)}
    groups, waiting, pending = gang_view(declared, bound, pending, len(inputs.nodes))
    inputs.pods = bound + pending
    inputs.pod_groups = declared
    return Converted(inputs, groups, waiting, errors, orphans)


def start_session(converted: Converted, config: Any = None, seed: int = 0) -> Session:
    """The engine's Session over converted inputs, with their gangs. Kueue's admission runs in it (when the cluster
    has Kueue's objects); should it fail on what the cluster holds, the queues are left out and reported (the pods
    are scheduled as without Kueue) rather than failing every rebuild."""
    try:
        session = Session.start(converted.inputs, config, seed, open_queues=True)  # live/queuedoor.py goes on from it
    except UNUSABLE as exc:
        if not converted.inputs.queues:
            raise
        converted.errors["Kueue's objects"] = f"queue admission failed, queues left out: {unusable_message(exc)}"
        converted.inputs.queues = queue_api.QueueObjects()
        session = Session.start(converted.inputs, config, seed)
    session.scheduler.groups = converted.groups
    return session


def _read_queues(inputs: Inputs, jobs: list[JSON], errors: dict[str, str], checked: Collection[str] = ()) -> None:
    """The queued Jobs' labels where the queues read them (the loader's ``note_job``: their pods lack them), and
    Workload objects whose pod templates the queues cannot read left out now: the file reader refuses them when
    admission reads them, which here would fail every rebuild. Each bad one is left out with its error.
    ``checked``: Workloads whose templates were read already (_read_workloads)."""
    for doc in jobs:
        if queue_api.queue_name(doc):
            try:
                inputs.queues.note_job(doc, SOURCE)
            except UNUSABLE as exc:
                errors[_describe(doc, live_kueue.JOB)] = unusable_message(exc)
    for key, obj in list(inputs.queues.workloads.items()):
        if key in checked:
            continue
        error = _template_error(obj)
        if error:
            errors[objects.describe(WORKLOAD, obj.namespace, obj.name).strip()] = error
            del inputs.queues.workloads[key]


def _template_error(obj: queue_api.WorkloadObject) -> str:
    """Why the queues cannot read the Workload's pod templates ('' when they can)."""
    try:
        queue_workloads.find(queue_api.QueueObjects(workloads={f"{obj.namespace}/{obj.name}": obj}), [])
    except UNUSABLE as exc:
        return unusable_message(exc)
    return ""


def _read_workloads(
    inputs: Inputs,
    docs: list[JSON],
    kept: ParsedByVersion[WorkloadRead],
    errors: dict[str, str],
    names: set[str] | None,
) -> set[str]:
    """Kueue's Workloads into the inputs as the loader reads them (in the cache's order), their templates checked as
    _read_queues checks them and the pending ones of other schedulers left out as _drop_others_pending leaves them
    out, each read once per resourceVersion (live/workloadcache.py); a bad one is left out with its error. The keys
    of those read."""

    def read(doc: JSON) -> WorkloadRead:
        try:
            obj = queue_api.parse_workload(doc, SOURCE)
        except UNUSABLE as exc:
            return unusable_message(exc)
        return _template_error(obj) or (obj, names is None or workloadstatus.ours(doc, names))

    out = set()
    for doc in docs:
        reading = kept.read(doc, read)
        if isinstance(reading, str):
            errors[_describe(doc, WORKLOAD)] = reading
            continue
        obj, ours = reading
        key = f"{obj.namespace}/{obj.name}"
        out.add(key)
        if ours or obj.admission:
            inputs.queues.workloads[key] = obj
    kept.end_round()
    return out


def _drop_others_pending(inputs: Inputs, workloads: list[JSON], names: set[str]) -> None:
    """Pending Workload objects whose pods ask for another scheduler are Kueue's scheduler's to admit, not ours:
    left out, as pending pods of other schedulers are (once admitted, whoever admitted them, they hold quota)."""
    for doc in workloads:
        meta = doc.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        obj = inputs.queues.workloads.get(key)
        if obj is not None and not obj.admission and not workloadstatus.ours(doc, names):
            del inputs.queues.workloads[key]


def _too_few(pod: Pod, count: int, min_member: int, num_nodes: int) -> str:
    reason = gang.NOT_ENOUGH_SIBLINGS.format(pod=pod.name, count=count, min_member=min_member)
    return fit_error_message(num_nodes, Diagnosis(pre_filter_msg=reason))


def one_node(doc: JSON) -> objects.Node | None:
    """A Node as a rebuild's ``build_inputs`` makes it, from its object alone (no NodeResourceTopology: a node
    that has one is rebuilt, not updated in place); None when it is unusable (the rebuild reports why)."""
    try:
        (node,) = build_inputs([Document(doc, SOURCE, "Node")]).nodes
    except (*UNUSABLE, ValueError):
        return None
    return node


def gang_view(
    declared: dict[str, gang.PodGroup], bound: list[Pod], pending: list[Pod], num_nodes: int
) -> tuple[dict[str, gang.PodGroup], dict[str, str], list[Pod]]:
    """The gangs to try now: a PodGroup with fewer pods than minMember waits (its pending members are held
    back with Coscheduling's PreFilter message, as a FitError over ``num_nodes``); members already bound count,
    so minMember drops by them."""
    bound_members: dict[str, int] = {}
    for pod in bound:
        if (key := gang.group_key(pod)) is not None:
            bound_members[key] = bound_members.get(key, 0) + 1
    pending_members: dict[str, int] = {}
    for pod in pending:
        if (key := gang.group_key(pod)) is not None:
            pending_members[key] = pending_members.get(key, 0) + 1
    groups: dict[str, gang.PodGroup] = {}
    waiting: dict[str, tuple[int, int]] = {}  # gang -> (its pods, minMember)
    # The upstream API (scheduling.k8s.io/v1alpha2): GangScheduling's PreEnqueue, in its own words.
    gated = gang.pre_enqueue(pending, declared, bound_members)
    upstream = {str(gang.group_key(p)) for p in pending if p.scheduling_group}
    for key in pending_members:
        have_bound, have_pending = bound_members.get(key, 0), pending_members[key]
        group = declared.get(key)
        if key in upstream:
            if (
                group is not None
                and group.upstream
                and group.gang
                and not any(gated.get(p.key) for p in pending if gang.group_key(p) == key)
            ):
                groups[key] = dataclasses.replace(group, min_member=max(1, group.min_member - have_bound))
            continue
        if group is None:  # labelled pods without a PodGroup (a Job): a gang of all of them
            namespace, name = gang.key_parts(key)
            group = gang.PodGroup(namespace, name, have_bound + have_pending)
        if have_bound + have_pending < group.min_member:
            waiting[key] = (have_bound + have_pending, group.min_member)
            continue
        groups[key] = dataclasses.replace(group, min_member=max(1, group.min_member - have_bound))
    held = [p for p in pending if gang.group_key(p) in waiting]
    out_waiting = {p.key: _too_few(p, *waiting[str(gang.group_key(p))], num_nodes) for p in held} | gated
    return groups, out_waiting, [p for p in pending if gang.group_key(p) not in waiting and p.key not in gated]
