"""What the page shows: a raw state (files, the demo, a live cluster) and one run of the engine over it.

The engine mutates the objects a run is built from (pod.devices, pod.raw annotations), so a state is kept as raw
Kubernetes dicts and every run parses a deep copy: runs never see each other's objects, and a what-if can change a
copy of the dicts without touching what the page shows. hub.py holds the current run and its view.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelsched.api import memory, objects
from accelsched.api.loader import Document, Inputs, admit_priority, build_inputs, read_documents
from accelsched.engine import Session
from accelsched.errors import InputError
from accelsched.framework import gang
from accelsched.framework.profile import SchedulerConfig
from accelsched.framework.scheduler import ScheduleResult

WHATIF_COPY_ANNOTATION = "accelsched.io/whatif-copy-of"  # set by whatif's add on each copy: the node it copies


def clone(value: Any) -> Any:
    """A deep copy of parsed YAML/JSON (dicts, lists, scalars): several times faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clone(v) for v in value)
    return value


def object_key(doc: dict[str, Any]) -> str:
    """``namespace/name`` of a namespaced object (``name`` for a cluster-scoped one, such as a Node)."""
    meta = doc.get("metadata") or {}
    namespace = meta.get("namespace") or ("default" if doc.get("kind") == "Pod" else "")
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


class RawState(ABC):
    """The objects one run is made from, as raw Kubernetes dicts. Subclass contract (LiveState, FilesState, ...):

    - ``description`` (for the page's status line) and ``mode`` ("offline" | "demo" | "live") attributes;
    - ``nodes()``: the raw Node dicts of this state, in cluster order; ``pods()``: the raw Pod dicts, bound
      (spec.nodeName) or pending as given. Callers mutate only the dicts of a ``copy()``;
    - ``replace(nodes, pods)``: a new state of the same class with exactly these nodes and pods (new ones
      appended, missing ones gone), everything else shared. A node dict annotated ``accelsched.io/whatif-copy-of``
      is a what-if copy of that node: a subclass may copy the node's companion objects (topology) for it;
    - ``copy()``: a deep copy (what-if works on one);
    - ``start(config, seed)``: parse a deep copy and ``Session.start`` it; returns ``(session, warnings)``
      (warnings: one line each, e.g. objects left out). May raise InputError. It must not mutate this state;
    - ``pod_groups()``: the raw PodGroup dicts (both APIs), read only, for whatif's notes (default: none known);
    - ``changed_gangs``: the gangs (namespace/name) a what-if drain took members from. They are the cluster's
      now, not input: a gang left with fewer pods than minMember is no error (kubectl drain deletes bare pods and
      nothing refuses that), and its bound members count toward minMember, as in a cluster (live mode's
      convert.gang_view does this for every gang; a subclass built on it needs nothing more).

    - optional, for the incremental what-if (ui/incremental.py; the full run serves a state without them):
      ``parse_new_pod(doc, inputs, was)`` (a Pod document a what-if made, parsed and admitted as ``start`` would),
      ``run_order(pods)`` (the session's order of its pods) and ``new_source`` (the source of what a what-if made),
      and a ``pod_cache`` (PodCache) that today's run filled.

    Nothing else is used by Run, Hub or whatif.
    """

    description: str = ""
    mode: str = "offline"
    changed_gangs: frozenset[str] = frozenset()

    @abstractmethod
    def nodes(self) -> list[dict[str, Any]]: ...

    @abstractmethod
    def pods(self) -> list[dict[str, Any]]: ...

    @abstractmethod
    def replace(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> RawState: ...

    @abstractmethod
    def copy(self) -> RawState: ...

    @abstractmethod
    def start(self, config: SchedulerConfig | None = None, seed: int = 0) -> tuple[Session, list[str]]: ...

    # The incremental what-if (ui/incremental.py): a state that can parse one Pod as its start would says so here.
    new_source = "what-if"  # the source of an object a what-if made

    def parse_new_pod(self, doc: dict[str, Any], inputs: Inputs, was: objects.Pod | None) -> objects.Pod | None:
        """A Pod document a what-if made or changed (``was``: today's pod of that key), as ``start`` would parse and
        admit it into ``inputs``; None where this state cannot (the default: the what-if then runs in full)."""
        return None

    def run_order(self, pods: list[objects.Pod]) -> list[objects.Pod]:
        """The session's order of these pods (listed in the order of ``pods()``), as ``start`` lists them."""
        return pods

    def pod_groups(self) -> list[dict[str, Any]]:
        """The raw PodGroups. The default serves a state over a live/convert Snapshot (``self.snapshot``, as
        LiveState keeps one) and is empty for any other; a subclass may say it outright."""
        groups = getattr(getattr(self, "snapshot", None), "pod_groups", None)
        return list(groups) if isinstance(groups, list) else []


# Kinds a run only reads: the loader parses a Pod into a writable copy of its own (api/objects.writable_copy, where
# the scheduler writes) and a Node into a shallow copy it never edits, as live mode relies on. Cloning them was a
# third of a what-if at 5,000 nodes; every other kind (claims, volumes, ...) is still cloned.
_READ_ONLY_KINDS = frozenset({"Pod", "Node"})


class PodCache:
    """The Pods a state's first run parsed, by document identity, each kept as parsed (before the run wrote to it):
    a what-if copies on write, so every Pod document it did not touch is the same dict, and its run starts from a
    fresh copy of the parsed Pod instead of parsing it again (most of a one-node what-if's time at 5,000 nodes).

    Filled by the first run only (today's): a what-if's own documents are parsed each time, so the cache never
    outgrows the state it was made for."""

    def __init__(self, parse: Callable[[dict[str, Any], str], objects.Pod] = objects.parse_pod) -> None:
        self.pods: dict[int, tuple[dict[str, Any], objects.Pod]] = {}
        self.filling = True
        self._parse = parse  # live mode's checks its claims too (live/convert.parse_pod)

    def parse(self, doc: dict[str, Any], source: str) -> objects.Pod:
        hit = self.pods.get(id(doc))
        if hit is not None and hit[0] is doc:
            return fresh(hit[1])
        pod = self._parse(doc, source)
        if self.filling:
            self.pods[id(doc)] = (doc, fresh(pod))
        return pod


def fresh(pod: objects.Pod) -> objects.Pod:
    """A copy of a parsed Pod that a run may write to without touching ``pod``: what the engine reassigns (node
    name, devices, priority, ...) is per copy already; the dicts it may change in place are copied, and the raw
    dict where the scheduler writes (objects.writable_copy); the rest (containers, affinity, ...) is only read."""
    out = copy.copy(pod)
    out.raw = objects.writable_copy(pod.raw)
    out.labels = dict(pod.labels)
    out.annotations = dict(pod.annotations)
    out.requests = dict(pod.requests)
    out.node_selector = dict(pod.node_selector)
    out.devices = {k: list(v) for k, v in pod.devices.items()}
    out.exclusive_cpus = dict(pod.exclusive_cpus)
    return out


class DocumentState(RawState):
    """A state made of documents, built as ``accelsched schedule -f`` builds its files (api/loader.build_inputs).

    Workloads (Deployments, DaemonSets, ...) stay documents and are expanded at each start, so a DaemonSet lands
    on nodes a what-if adds, as the loader expands it onto the nodes of the input."""

    def __init__(self, docs: list[Document], description: str, mode: str) -> None:
        self.docs = docs
        self.description = description
        self.mode = mode
        self.pod_cache = PodCache()  # shared with the states made from this one (_like): what-ifs, copies

    def nodes(self) -> list[dict[str, Any]]:
        return [d.doc for d in self.docs if d.kind == "Node"]  # type: ignore[misc]

    def pods(self) -> list[dict[str, Any]]:
        return [d.doc for d in self.docs if d.kind == "Pod"]  # type: ignore[misc]

    def pod_groups(self) -> list[dict[str, Any]]:
        return [d.doc for d in self.docs if d.kind == "PodGroup"]  # type: ignore[misc]

    def parse_new_pod(self, doc: dict[str, Any], inputs: Inputs, was: objects.Pod | None) -> objects.Pod:
        """As build_inputs: parsed (from the document's source: a changed pod keeps its place), then its priority."""
        pod = self.pod_cache.parse(doc, was.source if was is not None else self.new_source)
        admit_priority(pod, inputs)
        return pod

    def _like(self, docs: list[Document]) -> DocumentState:
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.docs = docs
        return new

    def copy(self) -> DocumentState:
        return self._like([Document(clone(d.doc), d.source, d.kind) for d in self.docs])

    def replace(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> DocumentState:
        """Nodes and pods keep their places among the documents (the order is the cluster's and the queue's);
        new nodes follow the last node, new pods the last document, a what-if copy brings its topology along."""
        # A dict this state holds is kept by identity (a what-if copies on write: most are); only the others are
        # matched by key, which at 5,000 nodes and 20,000 pods was most of this method's time.
        kept = {id(d) for d in nodes} | {id(p) for p in pods}
        mine = {id(d.doc) for d in self.docs}
        new_nodes = {object_key(n): n for n in nodes if id(n) not in mine}
        new_pods = {object_key(p): p for p in pods if id(p) not in mine}
        docs: list[Document] = []
        last_node = -1
        for d in self.docs:
            if d.kind in ("Node", "Pod") and id(d.doc) not in kept:
                table = new_nodes if d.kind == "Node" else new_pods
                doc = table.pop(object_key(d.doc), None)  # type: ignore[arg-type]
                if doc is None:
                    continue
                d = Document(doc, d.source, d.kind)
            docs.append(d)
            if d.kind == "Node":
                last_node = len(docs) - 1
        added = [Document(n, "what-if", "Node") for n in new_nodes.values()]
        docs[last_node + 1 : last_node + 1] = added
        docs += [Document(p, "what-if", "Pod") for p in new_pods.values()]
        docs += self._companions(added)
        return self._like(docs)

    def _companions(self, added: list[Document]) -> list[Document]:
        """For each what-if copy, its original's NodeResourceTopology and accelsched topology slices, renamed."""
        copies = []
        for d in added:
            original = ((d.doc.get("metadata") or {}).get("annotations") or {}).get(WHATIF_COPY_ANNOTATION)
            if isinstance(original, str) and original:
                copies.append((d.doc["metadata"]["name"], original))
        if not copies:
            return []
        # The originals' companions in one pass over the documents (an add of 1,000 copies would scan them 1,000x).
        of: dict[str, list[Document]] = {original: [] for _, original in copies}
        for c in self.docs:
            meta = c.doc.get("metadata") or {}
            if c.kind == "NodeResourceTopology":
                owner = meta.get("name")
            elif c.kind == "ResourceSlice" and str(meta.get("name", "")).startswith("accelsched"):
                owner = (c.doc.get("spec") or {}).get("nodeName")
            else:
                continue
            if isinstance(owner, str) and owner in of:
                of[owner].append(c)
        out = []
        for name, original in copies:
            for c in of[original]:
                doc = clone(c.doc)
                if c.kind == "NodeResourceTopology":
                    doc["metadata"]["name"] = name
                else:
                    doc["metadata"]["name"] = f"{c.doc['metadata']['name']}-{name}"
                    doc["spec"]["nodeName"] = name
                    if isinstance(doc["spec"].get("pool"), dict):
                        doc["spec"]["pool"]["name"] = name
                out.append(Document(doc, "what-if", c.kind))
        return out

    def inputs(self) -> Inputs:
        """The documents built into Inputs, from a deep copy of every kind a run may write to (this state's dicts are
        never changed by a run: tests/test_ui_state.py holds that on the lab's every feature).

        The PodGroups of ``changed_gangs`` are parsed first and handed to build_inputs as its base, the objects
        it does not check again (as each demo step applies on the last): the minMember check is for input a user
        wrote, and stays whole for every other gang and for every state that no what-if changed."""
        docs = [Document(d.doc if d.kind in _READ_ONLY_KINDS else clone(d.doc), d.source, d.kind) for d in self.docs]
        parse = self.pod_cache.parse
        if not self.changed_gangs:
            inputs = build_inputs(docs, parse_pod=parse)
            self.pod_cache.filling = False
            return inputs
        base = Inputs()
        rest = []
        for d in docs:
            group = gang.parse_pod_group(d.doc, d.source) if d.kind == "PodGroup" else None
            if group is not None and group.key in self.changed_gangs:
                base.pod_groups[group.key] = group
            else:
                rest.append(d)
        return build_inputs(rest, base=base, parse_pod=parse)

    def start(self, config: SchedulerConfig | None = None, seed: int = 0) -> tuple[Session, list[str]]:
        inputs = self.inputs()
        warnings = []
        if inputs.ignored:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(inputs.ignored.items()))
            warnings.append(f"ignored objects that do not affect placement: {kinds}")
        session = Session.start(inputs, config, seed)
        if self.changed_gangs:
            cluster_gangs(session, self.changed_gangs)
        return session, warnings


class FilesState(DocumentState):
    """``accelsched ui -f FILE ...``: the files as ``schedule -f`` reads them."""

    @classmethod
    def load(cls, paths: Iterable[str | Path]) -> FilesState:
        """Read and validate every file (api/loader: as the API server would, duplicates refused), and build
        once, so bad input fails here, before anything is served."""
        paths = [str(p) for p in paths]
        if not paths:
            raise InputError("no input: give -f FILE (repeatable)", field="-f")
        docs = [d for p in paths for d in read_documents(p)]
        memory.check_documents(docs)  # as schedule -f: too big for the machine is refused before it is built
        state = cls(docs, "files: " + ", ".join(paths), "offline")
        state.inputs()  # raises InputError for what build_inputs refuses (duplicates, unknown nodes, ...)
        return state


class DemoState(DocumentState):
    """``accelsched ui --demo [--step N]``: the demo's cluster as it is when step N schedules (accelsched/demo.py).

    The steps before N are played as the demo plays them (each applied on top of the last, then scheduled), and
    their pods kept as the objects they became (bound where that run bound them, DaemonSet pods on the nodes of
    their day); step N's files stay documents. A run over this state is the demo's step N."""

    @classmethod
    def lab(cls, step: int | None = None, seed: int = 0) -> DemoState:
        from accelsched import demo

        steps = demo.LAB_STEPS if step is None else demo.LAB_STEPS[:step]
        if not steps or (step is not None and step > len(demo.LAB_STEPS)):
            raise InputError(f"the demo has steps 1 to {len(demo.LAB_STEPS)}", field="--step")
        inputs = Inputs()
        others: dict[tuple[str, str], Document] = {}  # every non-pod object applied so far, kubectl-apply style
        for n, s in enumerate(steps, start=1):
            docs = [d for f in s.files for d in read_documents(demo.ROOT / f)]
            for d in docs:
                d.source = str(Path(d.source).relative_to(demo.ROOT))
            for d in docs:
                if d.kind != "Pod" and not _is_workload(d.kind):  # workloads: expanded into the pods kept below
                    others[(d.kind, object_key(d.doc))] = d  # type: ignore[arg-type]
            if n == len(steps):
                break
            inputs = build_inputs(docs, base=inputs)
            Session.start(inputs, seed=seed).schedule()  # binds: the next step sees these pods where they went
        pods: dict[str, Document] = {}
        for pod in inputs.pods:
            raw = clone(pod.raw)
            spec = raw.setdefault("spec", {})
            if pod.node_name:
                spec["nodeName"] = pod.node_name
            else:
                spec.pop("nodeName", None)  # e.g. preempted: the victim is Pending again
            pods[pod.key] = Document(raw, pod.source or "demo", "Pod")
        tail = []
        for d in docs:
            if d.kind == "Pod" and object_key(d.doc) in pods:  # type: ignore[arg-type]
                pods[object_key(d.doc)] = d  # type: ignore[arg-type]
            elif d.kind == "Pod" or _is_workload(d.kind):
                tail.append(d)
        where = f"step {len(steps)}" if step is not None else "all steps"
        return cls([*others.values(), *pods.values(), *tail], f"demo: the lab after {where}", "demo")


def cluster_gangs(session: Session, keys: frozenset[str]) -> None:
    """The gangs ``keys`` scheduled as a cluster schedules them (live/convert.gang_view, as live mode does): the
    members still bound count toward minMember, so members recreated Pending are placed together to complete
    the gang; while fewer pods than minMember exist, the pending ones wait (Gated, with the reason) instead of
    being tried. Offline input keeps the engine's reading (every member placed in one decision)."""
    from accelsched.live.convert import gang_view  # the live package (and its client) only when a what-if needs it

    inputs, scheduler = session.inputs, session.scheduler
    pending = [p for p in inputs.pending if gang.group_key(p) in keys]
    groups, waiting, _ = gang_view(inputs.pod_groups, inputs.bound, pending, session.cluster.n)
    scheduler.groups.update((key, group) for key, group in groups.items() if key in keys)
    scheduler.gang_gates.update((p.key, waiting[p.key]) for p in pending if p.key in waiting)


def _is_workload(kind: str) -> bool:
    from accelsched.api import workloads

    return kind in workloads.WORKLOAD_KINDS


@dataclass
class Run:
    """One run of the engine over a state: its session (the cluster after the run) and all its results."""

    state: RawState
    session: Session
    results: list[ScheduleResult]
    warnings: list[str] = field(default_factory=list)
    _by_key: dict[str, ScheduleResult] | None = field(default=None, repr=False)
    # What is derived from the finished run once and asked again (view.py's node signatures, per what-if).
    cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def result(self, key: str) -> ScheduleResult | None:
        """The pod's last result in this run (a pod placed, then preempted, is preempted); None for a pod bound
        in the input and admitted, or no such pod."""
        if self._by_key is None:
            self._by_key = {r.pod.key: r for r in self.results}
        return self._by_key.get(key)

    def placements(self) -> dict[str, str | None]:
        """Every pod of the input -> the node it holds after this run (bound in the input or placed), or None."""
        out: dict[str, str | None] = {}
        for pod in self.session.inputs.pods:
            if pod.terminal:
                continue
            r = self.result(pod.key)
            out[pod.key] = r.node if r is not None else (pod.node_name or None)
        return out


def checked(session: Session, check: Callable[[], None]) -> None:
    """Call ``check`` before each pod's attempt of ``session`` (chained with an observer already set, such as an
    Explainer's): a superseded request raises there and stops its run."""
    scheduler = session.scheduler
    observer = scheduler.observer

    def observe(pod: Any) -> None:
        check()
        if observer is not None:
            observer(pod)

    scheduler.observer = observe


def execute(
    state: RawState, config: SchedulerConfig | None = None, seed: int = 0, check: Callable[[], None] | None = None
) -> Run:
    """Start a session over (a deep copy of) ``state`` and schedule every pending pod, as ``schedule`` does.
    ``check``: called before each pod's attempt (and once the session is built); it may raise to stop the run."""
    session, warnings = state.start(config, seed)
    return scheduled(state, session, warnings, check)


def scheduled(state: RawState, session: Session, warnings: list[str], check: Callable[[], None] | None = None) -> Run:
    """The Run of ``session`` (started from ``state``) once its pending pods are scheduled (``check``: see execute)."""
    if check is not None:
        check()
        checked(session, check)
    results = session.rejected + session.schedule()
    return Run(state, session, results, list(warnings))
