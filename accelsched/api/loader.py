"""Read Kubernetes YAML the way kubectl prints and applies it: many documents, ``kind: List``, workloads.

Nodes, Namespaces and PriorityClasses are read first, so workloads can be expanded against the nodes
(DaemonSets) and pods get their priority from their PriorityClass, as admission does. Everything is
validated before anything is scheduled: bad input stops the run with one line, nothing half-applied.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from accelsched.api import limits, memory, objects, quantity, reader, validate_aside, validation, workloads
from accelsched.api import storage as storage_objects
from accelsched.api.objects import Namespace, Node, Pod, PriorityClass
from accelsched.devices import partition as partitioning
from accelsched.dra import claims as dra_claims
from accelsched.dra import objects as dra_objects
from accelsched.dra.model import DRAInputs
from accelsched.errors import InputError, Where, quoted
from accelsched.fabric import hypernode as fabric_hypernode
from accelsched.fabric import levels as fabric_levels
from accelsched.fabric import request as fabric_request
from accelsched.framework import gang
from accelsched.queues import api as queue_api
from accelsched.queues import config as queue_config
from accelsched.topology import layout as topology_layout

# Kinds that exist in clusters but do not change placement: read past without a word.
QUIET_KINDS = {
    "Service",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "Endpoints",
    "EndpointSlice",
    "Event",
    "Lease",
    "CustomResourceDefinition",
    "PodDisruptionBudget",
    "Ingress",
    "NetworkPolicy",
    "HorizontalPodAutoscaler",
    "LimitRange",
    "ResourceQuota",
    "ControllerRevision",
    "RuntimeClass",
    "KubeSchedulerConfiguration",
    "CronJob",
}


# Kinds the first pass reads (with the nodes), so the pod pass passes them by.
_READ_FIRST = (
    "Node", "Namespace", "PriorityClass", "NodeResourceTopology", "PodGroup", "Workload",
    *storage_objects.KINDS, *dra_objects.KINDS, *queue_api.KINDS, queue_config.KIND,
)  # fmt: skip
_READ_FIRST += (fabric_levels.KIND, fabric_hypernode.KIND)  # Kueue's Topology, Volcano's HyperNode (fabric/)


@dataclass
class Document:
    doc: Mapping[str, Any]
    source: str
    kind: str


@dataclass
class Inputs:
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    pod_groups: dict[str, Any] = field(default_factory=dict)  # framework.gang.PodGroup by namespace/name
    topologies: list[fabric_levels.Topology] = field(default_factory=list)  # Kueue's Topology objects (fabric/)
    hypernodes: dict[str, Any] = field(default_factory=dict)  # Volcano's HyperNodes by name (fabric/hypernode.py)
    storage: storage_objects.Storage = field(default_factory=storage_objects.Storage)  # PVs, claims, CSI
    dra: DRAInputs = field(default_factory=DRAInputs)  # DeviceClasses, ResourceSlices, ResourceClaims, templates
    ignored: Counter[str] = field(default_factory=Counter)
    queues: queue_api.QueueObjects = field(default_factory=queue_api.QueueObjects)  # Kueue's objects (queues/)

    @property
    def pending(self) -> list[Pod]:
        return [p for p in self.pods if not p.node_name and not p.terminal]

    @property
    def bound(self) -> list[Pod]:
        return [p for p in self.pods if p.node_name and not p.terminal]


def read_documents(path: str | Path, text: str | None = None) -> list[Document]:
    """All objects of one file, ``kind: List`` expanded, with their file for error messages.

    The bytes are decoded and parsed by api/reader.py (UTF-8 or UTF-16 with a BOM, JSON or YAML, duplicate keys
    and alias bombs refused), bounded by the ``input_bytes`` and ``objects`` limits (api/limits.py).
    """
    source = str(path)
    if text is None:
        text = reader.decode(_read_bytes(path, source), source)
    else:
        reader.check_size(len(text), source)
    with reader.paused_gc():
        return _documents(text, source)


def _documents(text: str, source: str, validate: bool = True) -> list[Document]:
    try:
        raw = reader.parse(text, source)
    except RecursionError:
        raise InputError("is nested too deeply to read", source=source) from None
    count = len(raw) + sum(len(d["items"]) for d in raw if isinstance(d, dict) and isinstance(d.get("items"), list))
    too_many = limits.exceeded("objects", count, "objects")
    if too_many:
        raise InputError(too_many, source=source)
    out: list[Document] = []
    for i, doc in enumerate(raw):
        kind = objects.check_kind(doc, source, i)
        if kind == "List" or (kind.endswith("List") and "items" in doc):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError("must be a list", source=source, obj=f"document {i + 1} (List)", field="items")
            for j, item in enumerate(items):
                out.append(Document(item, source, objects.check_kind(item, f"{source} (items[{j}])", j)))
        else:
            out.append(Document(doc, source, kind))
    if validate:
        validation.validate_documents(out)  # as the API server would (api/validation.py)
    return out


def _read_bytes(path: str | Path, source: str) -> bytes:
    """The file's bytes (``-``: standard input), bounded by size and memory (reader.read_input)."""
    return reader.read_input(path, source)


def load(paths: Iterable[str | Path]) -> Inputs:
    """Every file read, validated and built. A large JSON input is validated in a second process while this one
    builds (api/validate_aside.py); either way nothing is returned before all of it was validated."""
    blobs = [(str(path), _read_bytes(path, str(path))) for path in paths]

    def documents(validate: bool) -> list[Document]:
        with reader.paused_gc():
            return [d for source, data in blobs for d in _documents(reader.decode(data, source), source, validate)]

    def validate_all() -> None:
        documents(validate=True)

    enabled = validate_aside.worthwhile([data for _, data in blobs])
    with validate_aside.aside(validate_all, enabled) as validated_aside:
        docs = documents(validate=not validated_aside)
        memory.check_documents(docs)  # before the objects are built: an input too big for the machine is refused
        return build_inputs(docs)


def build_inputs(
    docs: list[Document],
    base: Inputs | None = None,
    make_template_claims: bool = True,
    parse_pod: Callable[[dict[str, Any], str], Pod] = objects.parse_pod,
) -> Inputs:
    """Parse documents into Inputs. With ``base``, objects replace same-named ones there (kubectl apply).

    ``make_template_claims`` stands in for the resourceclaim controller (offline there is none); a live cluster's
    snapshot, where the real controller makes the claims, can turn it off. ``parse_pod`` parses a Pod document
    (the web view's what-if passes one that reuses the pods it parsed before: ui/state.py's PodCache)."""
    with reader.paused_gc():
        return _build_inputs(docs, base, make_template_claims, parse_pod)


def _build_inputs(
    docs: list[Document],
    base: Inputs | None,
    make_template_claims: bool = True,
    parse_pod: Callable[[dict[str, Any], str], Pod] = objects.parse_pod,
) -> Inputs:
    inputs = base or Inputs()
    seen: dict[tuple[str, str, str, str], str] = {}

    def claim(kind: str, namespace: str, name: str, source: str, api_group: str = "") -> None:
        key = (api_group, kind, namespace, name)  # an object's identity: two API groups' PodGroups g are two objects
        if key in seen:
            raise InputError(
                f"duplicate object: also defined in {seen[key]}",
                source=source,
                obj=objects.describe(kind, namespace, name),
                field="metadata.name",
            )
        seen[key] = source

    nodes = {n.name: n for n in inputs.nodes}
    namespaces = {n.name: n for n in inputs.namespaces}
    for d in docs:
        if queue_config.is_config(d.doc):  # Kueue's own Configuration: fair sharing (accelsched/queues/config)
            inputs.queues.config = queue_config.parse(d.doc, d.source)
            claim(d.kind, "", "", d.source, queue_config.GROUP)  # one Kueue, one configuration
            continue
        if queue_api.is_kueue(d.doc):  # kueue.x-k8s.io objects: read by accelsched/queues
            obj = inputs.queues.add(d.kind, d.doc, d.source)
            claim(d.kind, getattr(obj, "namespace", ""), obj.name, d.source, queue_api.GROUP)
            continue
        if d.kind == "Job" and queue_api.queue_name(d.doc):
            inputs.queues.note_job(d.doc, d.source)
        if d.kind == "Node":
            node = objects.parse_node(d.doc, d.source)
            claim("Node", "", node.name, d.source)
            nodes[node.name] = node
        elif d.kind == "Namespace":
            ns = objects.parse_namespace(d.doc, d.source)
            claim("Namespace", "", ns.name, d.source)
            namespaces[ns.name] = ns
        elif d.kind == "PriorityClass":
            pc = objects.parse_priority_class(d.doc, d.source)
            claim("PriorityClass", "", pc.name, d.source)
            inputs.priority_classes[pc.name] = pc
        elif d.kind == "PodGroup":
            group = gang.parse_pod_group(d.doc, d.source)
            claim("PodGroup", group.namespace, group.name, d.source, gang.WORKLOAD_GROUP if group.upstream else "")
            inputs.pod_groups[group.key] = group
        elif d.kind == "Workload":  # checked, then only the PodGroups made from it matter (framework.gang)
            _, name, namespace, _ = objects.metadata(d.doc, d.source, "Workload", namespaced=True)
            gang.parse_workload(d.doc, d.source)
            claim("Workload", namespace, name, d.source)
        elif fabric_levels.is_topology(d.doc):
            topology = fabric_levels.parse_topology(d.doc, d.source)
            claim(fabric_levels.KIND, "", topology.name, d.source, fabric_levels.GROUP)
            inputs.topologies = [t for t in inputs.topologies if t.name != topology.name] + [topology]
        elif fabric_hypernode.is_hypernode(d.doc):
            hypernode = fabric_hypernode.parse_hypernode(d.doc, d.source)
            claim(fabric_hypernode.KIND, "", hypernode.name, d.source, fabric_hypernode.GROUP)
            inputs.hypernodes[hypernode.name] = hypernode
        elif d.kind in storage_objects.KINDS:
            obj = storage_objects.parse(d.kind, d.doc, d.source)
            claim(d.kind, getattr(obj, "namespace", ""), obj.name, d.source)
            inputs.storage.add(obj)
        elif d.kind in dra_objects.KINDS:
            _add_dra(inputs.dra, dra_objects.parse(d.kind, d.doc, d.source), d.kind, claim)
    inputs.nodes = list(nodes.values())
    _apply_topology(docs, nodes)
    _apply_hypernodes(inputs)
    inputs.namespaces = list(namespaces.values())
    defaults = [pc for pc in inputs.priority_classes.values() if pc.global_default]
    if len(defaults) > 1:
        raise InputError(
            f"more than one PriorityClass has globalDefault: {', '.join(p.name for p in defaults)}",
            field="globalDefault",
        )

    pods = {p.key: p for p in inputs.pods}
    facts = _NodeFacts(nodes)
    for d in docs:
        if d.kind == "Pod":
            new = [parse_pod(d.doc, d.source)]
        elif d.kind in workloads.WORKLOAD_KINDS:
            queued = queue_api.unsuspended(d.doc) if inputs.queues else d.doc  # Kueue in play: made, then held
            expanded = workloads.expand(queued, d.source, inputs.nodes)
            new = [objects.parse_pod(p, d.source) for p in expanded]
            _, name, namespace, _ = objects.metadata(d.doc, d.source, d.kind, namespaced=True)
            claim(d.kind, namespace, name, d.source)
        elif d.kind in _READ_FIRST:
            continue
        else:
            if d.kind not in QUIET_KINDS:
                inputs.ignored[d.kind] += 1
            continue
        for pod in new:
            claim("Pod", pod.namespace, pod.name, d.source)
            _admit(pod, inputs, facts, defaults[0] if defaults else None)
            pods[pod.key] = pod
    inputs.pods = list(pods.values())
    for pod in inputs.pods:  # Kueue's podset annotations, checked as its webhook checks them
        if any(key in pod.annotations for key in fabric_request.ANNOTATIONS):
            fabric_request.parse_annotations(pod.annotations, _where(pod))
    _make_template_claims(inputs, make_template_claims)
    return inputs


def _add_dra(dra: DRAInputs, obj: Any, kind: str, claim: Any) -> None:
    """One parsed DRA object into its map: classes and slices by name, claims and templates by namespace/name."""
    namespace = getattr(obj, "namespace", "")
    claim(kind, namespace, obj.name, obj.source)
    target = {"DeviceClass": dra.classes, "ResourceSlice": dra.slices, "ResourceClaim": dra.claims}.get(kind)
    (dra.templates if target is None else target)[f"{namespace}/{obj.name}" if namespace else obj.name] = obj


def _make_template_claims(inputs: Inputs, make: bool = True) -> None:
    """What the resourceclaim controller does before kube-scheduler sees a pod: each pending pod's claim from a
    template is created (dra/claims.py) unless it exists, and the pod's status.resourceClaimStatuses names it.

    Every pod's spec.resourceClaims is checked as pod validation does. A missing template or claim is no error:
    kube-scheduler keeps the pod Pending and says why (plugins/dynamicresources)."""
    dra = inputs.dra
    owners: dra_claims.OwnerIndex | None = None
    for pod in inputs.pods:
        pod_claims = dra_claims.pod_resource_claims(pod)
        if not make or not pod_claims or pod.node_name or pod.terminal:
            continue
        for pod_claim in pod_claims:
            template_name = pod_claim.resource_claim_template_name
            if template_name is None:
                continue
            entry = dra_claims.status_entry(pod, pod_claim)
            if entry is not None and not entry.get("resourceClaimName"):
                continue  # the controller recorded that no claim is needed
            name = dra_claims.resolved_claim_name(pod, pod_claim)
            existing = dra.claims.get(f"{pod.namespace}/{name}") if name else None
            if existing is not None and dra_claims.is_for_pod(pod, existing):
                continue
            if owners is None:
                owners = dra_claims.owner_index(dra.claims)
            made = dra_claims.owned_claim(pod, pod_claim, owners)
            if made is None:
                template = dra.templates.get(f"{pod.namespace}/{template_name}")
                if template is None:
                    continue
                made = _new_claim(dra, pod, pod_claim, template)
                if made is None:
                    continue
                owners[(pod.namespace, pod.uid, pod_claim.name)] = made
            dra_claims.set_claim_status(pod, pod_claim, made.name)


def _new_claim(dra: DRAInputs, pod: Pod, pod_claim: Any, template: Any) -> Any:
    """The claim made from ``template``, under a generated name no claim holds yet (the API server would retry);
    None when the API server would refuse the name (the controller's proportional cut can leave a leading '-')."""
    attempt = 0
    while True:
        name = dra_claims.generated_name(pod, pod_claim, attempt)
        if f"{pod.namespace}/{name}" not in dra.claims:
            break
        attempt += 1
    if validation.dns1123_subdomain_problem(name):
        return None
    made = dra_claims.claim_from_template(pod, pod_claim, template, name)
    dra.claims[made.key] = made
    return made


def _apply_hypernodes(inputs: Inputs) -> None:
    """Volcano's HyperNode tree as node labels and one Topology (fabric/hypernode.py); the PodGroups whose
    ``networkTopology`` named the lowest or highest tier get the tree's own."""
    if not inputs.hypernodes:
        return
    tree = fabric_hypernode.build_tree(inputs.hypernodes.values(), inputs.nodes)
    fabric_hypernode.label_nodes(tree, inputs.nodes)
    topology = tree.topology()
    inputs.topologies = [t for t in inputs.topologies if t.name != topology.name] + [topology]
    for key, group in inputs.pod_groups.items():
        required = fabric_hypernode.resolve(group.required_topology, tree)
        preferred = fabric_hypernode.resolve(group.preferred_topology, tree)
        if (required, preferred) != (group.required_topology, group.preferred_topology):
            inputs.pod_groups[key] = replace(group, required_topology=required, preferred_topology=preferred)


def _apply_topology(docs: list[Document], nodes: Mapping[str, Node]) -> None:
    """NodeResourceTopology objects (named after their node) and ResourceSlices (spec.nodeName) describe where
    each node's devices and CPUs sit; fold them into the nodes' layouts."""
    touched: dict[str, Where] = {}
    # Slices first: their named devices win over the per-zone counts of a NodeResourceTopology. Only accelsched's
    # own slices (driver accelsched.io, from `accelsched topology`) describe topology; every slice is DRA input.
    slices = [d for d in docs if d.kind == "ResourceSlice" and topology_layout.is_topology_slice(d.doc)]
    ordered = slices + [d for d in docs if d.kind == "NodeResourceTopology"]
    for d in ordered:
        where, name, _, _ = objects.metadata(d.doc, d.source, d.kind, namespaced=False)
        node_name = name if d.kind == "NodeResourceTopology" else str((d.doc.get("spec") or {}).get("nodeName") or "")
        node = nodes.get(node_name)
        if node is None:
            field = "metadata.name" if d.kind == "NodeResourceTopology" else "spec.nodeName"
            raise where.error(field, f"node {quoted(node_name)} does not exist in the input")
        node.layout = node.layout or topology_layout.NodeLayout()
        if d.kind == "NodeResourceTopology":
            devices = {r for r in node.allocatable if quantity.is_extended(r)}
            topology_layout.apply_nrt(node.layout, where, d.doc, devices)
        else:
            topology_layout.apply_resource_slice(node.layout, where, d.doc)
        touched[node.name] = where
    for node in nodes.values():
        topology_layout.finish(node, touched.get(node.name) or Where(node.source, f"Node {node.name}"))


class _NodeFacts:
    """What admission checks every pod against, from the nodes once (not once per pod): the partitioned
    nodes and each (resource, amount) verdict already given."""

    def __init__(self, nodes: Mapping[str, Node]) -> None:
        self.nodes = nodes
        self.partitions = [n.partition for n in nodes.values() if n.partition is not None]
        self._verdicts: dict[tuple[str, int], str | None] = {}

    def partition_problem(self, res: str, amount: int) -> str | None:
        """Why no partitioned node could serve ``amount`` of ``res`` (a bad request, not a busy cluster)."""
        key = (res, amount)
        if key not in self._verdicts:
            self._verdicts[key] = partitioning.request_problem(self.partitions, res, amount)
        return self._verdicts[key]


def admit_priority(pod: Pod, inputs: Inputs) -> None:
    """The Priority admission plugin on one pod of ``inputs``' (its class's value, or the global default's): what
    the web view's what-if does for a pod it makes (ui/incremental.py)."""
    defaults = [pc for pc in inputs.priority_classes.values() if pc.global_default]
    _priority(pod, inputs, defaults[0] if defaults else None)


def _admit(pod: Pod, inputs: Inputs, facts: _NodeFacts, default: PriorityClass | None) -> None:
    """What admission does before a pod reaches the scheduler: priority from its class, and sanity checks."""
    _priority(pod, inputs, default)
    if pod.node_name and not pod.terminal and pod.node_name not in facts.nodes:
        raise _where(pod).error("spec.nodeName", f"node {quoted(pod.node_name)} does not exist in the input")
    if facts.nodes:
        for res, amount in pod.requests.items():
            problem = facts.partition_problem(res, amount)
            if problem:
                raise _where(pod).error(request_path(pod, res), problem)
        # A resource no node advertises is no error: kube-scheduler keeps the pod Pending with "Insufficient <res>"
        # on every node, and `accelsched explain` names the advertised resources closest to it.


def _priority(pod: Pod, inputs: Inputs, default: PriorityClass | None) -> None:
    name = pod.priority_class_name
    if name:
        pc = inputs.priority_classes.get(name) or objects.SYSTEM_PRIORITY_CLASSES.get(name)
        if pc is None:
            raise _where(pod).error("spec.priorityClassName", f"no PriorityClass with name {name} was found")
    else:
        pc = default
    if pc is not None:
        pod.priority = pc.value
        if "preemptionPolicy" not in (pod.raw.get("spec") or {}):
            pod.preemption_policy = pc.preemption_policy


def _where(pod: Pod) -> Where:
    return Where(pod.source, objects.describe("Pod", pod.namespace, pod.name))


def request_path(pod: Pod, resource: str) -> str:
    """The field path of the first container asking for ``resource``, for error messages."""
    spec = pod.raw.get("spec") or {}
    for group in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(group) or []):
            res = (c or {}).get("resources") or {}
            for kind in ("requests", "limits"):
                if resource in (res.get(kind) or {}):
                    return f"spec.{group}[{i}].resources.{kind}[{resource}]"
    return f"spec.overhead[{resource}]"
