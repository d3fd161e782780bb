"""A Pod, parsed and checked once from its YAML dict: its effective requests, affinity and spread constraints, host
ports, images, scheduling gates and group, and the accelsched devices annotation. The public entry point is
api/objects.py's parse_pod.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from accelsched.api import quantity, validation
from accelsched.api.object_fields import (
    DEFAULT_SCHEDULER,
    DEVICES_ANNOTATION,
    DO_NOT_SCHEDULE,
    SCHEDULE_ANYWAY,
    _choice,
    _int,
    _list,
    _mapping,
    _str,
    _string_map,
    metadata,
    parse_label_selector,
    parse_node_selector_terms,
    parse_quantity,
    parse_resources,
    parse_tolerations,
)
from accelsched.api.selectors import (
    LabelSelector,
    NodeSelectorTerm,
    Requirement,
    Toleration,
)
from accelsched.api.volumes import PodVolume, parse_volumes
from accelsched.errors import Where, clipped, quoted

# ---------------------------------------------------------------------------------------------- pods


@dataclass(frozen=True)
class PodAffinityTerm:
    label_selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class WeightedNodeSelectorTerm:
    weight: int
    term: NodeSelectorTerm


# Slots: a Pod has more fields than an instance dict shares its keys for (30 in CPython 3.11), so each held its
# own dict, about 1.5 KB, for every pod a live session keeps (30,000 and more); slots are 8 bytes a field.
@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    source: str = ""
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    scheduler_name: str = DEFAULT_SCHEDULER
    node_name: str = ""
    phase: str = "Pending"
    # status.startTime in seconds since the epoch (None: not started): preemption's MoreImportantPod ranks by it.
    start_time: float | None = None
    priority: int = 0
    priority_class_name: str = ""
    preemption_policy: str = "PreemptLowerPriority"
    requests: dict[str, int] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    preferred_node_affinity: tuple[WeightedNodeSelectorTerm, ...] = ()
    required_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    required_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    owner_kind: str = ""
    owner_name: str = ""
    devices: dict[str, list[str]] = field(default_factory=dict)
    # Exclusive CPUs DeviceAllocation took per NUMA zone index (static CPU manager): given back on eviction.
    exclusive_cpus: dict[int, int] = field(default_factory=dict)
    # Per app container requests (Topology Manager's container scope aligns each container on its own).
    container_requests: tuple[dict[str, int], ...] = ()
    # QoS class Guaranteed: only such pods with whole CPUs get exclusive, NUMA-aligned CPUs (static CPU manager).
    guaranteed: bool = False
    # spec.volumes as the volume plugins read them (claims, in-tree disks): api/volumes.py.
    volumes: tuple[PodVolume, ...] = ()
    # The host ports the pod holds on its node (util.GetHostPorts: sidecars, then app containers): NodePorts.
    host_ports: tuple[HostPort, ...] = ()
    # Normalized image names of init and app containers and image volumes, and the containers counted: ImageLocality.
    images: tuple[str, ...] = ()
    container_count: int = 1
    scheduling_gates: tuple[str, ...] = ()  # spec.schedulingGates names: SchedulingGates keeps the pod from the queue
    scheduling_group: str = ""  # spec.schedulingGroup.podGroupName: its scheduling.k8s.io/v1alpha2 PodGroup (gang)
    # (cpu, memory) as kube-scheduler's scoring counts them (PodInfo.CalculateResource's Non0CPU/Non0Mem): each
    # container missing a cpu or memory request counted at 100m / 200Mi. None: derived from ``requests``.
    nonzero: tuple[int, int] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    # Memos of what is derived from the fields above (slots have no instance dict to cache in): the request as a
    # hashable value, and spec.resourceClaims validated (dra.claims). Not compared, not copied by replace().
    _shape: tuple[tuple[str, int], ...] | None = field(default=None, init=False, repr=False, compare=False)
    resource_claims_memo: tuple[Any, ...] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def shape(self) -> tuple[tuple[str, int], ...]:
        """The request as a hashable value: pods of one shape share cached per-node fits and scores."""
        shape = self._shape
        if shape is None:
            self._shape = shape = tuple(sorted(self.requests.items()))
        return shape

    @property
    def has_pod_affinity(self) -> bool:
        return bool(
            self.required_affinity
            or self.preferred_affinity
            or self.required_anti_affinity
            or self.preferred_anti_affinity
        )

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


def _container_requests(where: Where, containers: list[Any], path: str) -> list[tuple[dict[str, int], bool]]:
    """Per container: (requests, is_sidecar). Limits stand in for missing requests, as API defaulting does."""
    out = []
    for i, c in enumerate(containers):
        p = f"{path}[{i}]"
        c = _mapping(where, c, p)
        res = _mapping(where, c.get("resources"), f"{p}.resources")
        limits = parse_resources(where, res.get("limits"), f"{p}.resources.limits")
        requests = parse_resources(where, res.get("requests"), f"{p}.resources.requests")
        merged = {**limits, **requests}
        for name, amount in requests.items():
            if quantity.is_extended(name) and name in limits and limits[name] != amount:
                raise where.error(
                    f"{p}.resources.requests[{name}]", "extended resources must have requests equal to limits"
                )
            if name in limits and amount > limits[name]:
                raise where.error(f"{p}.resources.requests[{name}]", f"must be <= the limit {limits[name]}")
        out.append((merged, c.get("restartPolicy") == "Always"))
    return out


def _is_guaranteed(containers: list[Any]) -> bool:
    """QoS Guaranteed: every container limits cpu and memory, with requests (if given) equal to the limits."""
    for c in containers:
        res = (c or {}).get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        for name in (quantity.CPU, quantity.MEMORY):
            if name not in limits:
                return False
            if name in requests and parse_quantity(name, requests[name]) != parse_quantity(name, limits[name]):
                return False
    return True


# kube-scheduler scores a container without a cpu or memory request as if it asked for these
# (schedutil.DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def nonzero_requests_of(
    app: list[dict[str, int]], init: list[tuple[dict[str, int], bool]], overhead: dict[str, int]
) -> tuple[int, int]:
    """(cpu, memory) for scoring: resourcehelper.PodRequests with NonMissingContainerRequests, i.e. the defaults
    filled in per container where the key is missing (a request of 0 stays 0), then summed as any request."""
    defaults = {quantity.CPU: DEFAULT_MILLI_CPU_REQUEST, quantity.MEMORY: DEFAULT_MEMORY_REQUEST}
    total = effective_requests(
        [{**defaults, **r} for r in app], [({**defaults, **r}, sidecar) for r, sidecar in init], overhead
    )
    return total.get(quantity.CPU, 0), total.get(quantity.MEMORY, 0)


def effective_requests(
    app: list[dict[str, int]], init: list[tuple[dict[str, int], bool]], overhead: dict[str, int]
) -> dict[str, int]:
    """The pod's request: max(app containers + sidecars, each init container over earlier sidecars) + overhead.

    This is resourcehelper.PodRequests: sidecar init containers (restartPolicy Always) keep running and add to
    the app containers' sum; a regular init container runs alone with the sidecars started before it.
    """
    total: dict[str, int] = {}
    for req in app:
        for name, amount in req.items():
            total[name] = total.get(name, 0) + amount
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for req, is_sidecar in init:
        if is_sidecar:
            for name, amount in req.items():
                sidecars[name] = sidecars.get(name, 0) + amount
                total[name] = total.get(name, 0) + amount
            current = dict(sidecars)
        else:
            current = dict(sidecars)
            for name, amount in req.items():
                current[name] = current.get(name, 0) + amount
        for name, amount in current.items():
            init_peak[name] = max(init_peak.get(name, 0), amount)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    for name, amount in overhead.items():
        total[name] = total.get(name, 0) + amount
    return {k: v for k, v in total.items() if v}


# ---------------------------------------------------------------------------------------------- ports, images, gates

DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"  # kube-scheduler's DefaultBindAllHostIP: an empty hostIP binds every address
PORT_PROTOCOLS = ("SCTP", "TCP", "UDP")
# What the API server writes into the PodScheduled condition of a pod created with scheduling gates (pod strategy).
SCHEDULING_GATED_REASON = "SchedulingGated"
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


class HostPort(NamedTuple):
    """A host port as kube-scheduler's HostPortInfo keys it: an empty hostIP is 0.0.0.0, an empty protocol TCP."""

    host_ip: str
    protocol: str
    port: int


class NodeImage(NamedTuple):
    names: tuple[str, ...]
    size_bytes: int


def _container_ports(where: Where, c: Mapping[str, Any], path: str, host_network: bool) -> list[tuple[str, str, int]]:
    """(raw hostIP, protocol, hostPort) of one container's ports with a host port, as defaulted and validated by
    the API server: protocol TCP when empty, hostPort = containerPort under hostNetwork."""
    out = []
    for j, port in enumerate(_list(where, c.get("ports"), f"{path}.ports")):
        p = f"{path}.ports[{j}]"
        port = _mapping(where, port, p)
        container_port = _int(where, port.get("containerPort"), f"{p}.containerPort")
        host_port = _int(where, port.get("hostPort"), f"{p}.hostPort", default=0)
        if host_network and host_port == 0:
            host_port = container_port
        for name, value in (("containerPort", container_port), ("hostPort", host_port)):
            if (value or name == "containerPort") and not 1 <= value <= 65535:
                raise where.error(f"{p}.{name}", f"Invalid value: {value}: must be between 1 and 65535, inclusive")
        if host_network and host_port != container_port:
            raise where.error(
                f"{p}.hostPort", f"Invalid value: {host_port}: must match `containerPort` when `hostNetwork` is true"
            )
        protocol = _choice(
            where, _str(where, port.get("protocol"), f"{p}.protocol") or "TCP", f"{p}.protocol", PORT_PROTOCOLS
        )
        if host_port:
            out.append((_str(where, port.get("hostIP"), f"{p}.hostIP"), protocol, host_port))
    return out


def parse_host_ports(where: Where, spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """util.GetHostPorts: the host ports of sidecar init containers (restartPolicy Always), then of app containers.
    A port listed twice across the app containers, or twice in one init container, is refused as the API server's
    checkHostPortConflicts does."""
    host_network = spec.get("hostNetwork") is True
    ports: list[tuple[str, str, int]] = []
    app_seen: set[str] = set()
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(_list(where, spec.get(kind), f"spec.{kind}")):
            path = f"spec.{kind}[{i}]"
            c = _mapping(where, c, path)
            own = _container_ports(where, c, path, host_network)
            seen = app_seen if kind == "containers" else set()
            for k, (ip, protocol, port) in enumerate(own):
                text = f"{protocol}/{ip}/{port}"
                if text in seen:
                    raise where.error(f"{path}.ports[{k}].hostPort", f'Duplicate value: "{clipped(text)}"')
                seen.add(text)
            if kind == "containers" or c.get("restartPolicy") == "Always":
                ports.extend(own)
    return tuple(HostPort(ip or DEFAULT_BIND_ALL_HOST_IP, protocol, port) for ip, protocol, port in ports)


def normalized_image_name(name: str) -> str:
    """ImageLocality's normalizedImageName: a name without a tag gets ``:latest`` (a digest keeps its ``:``)."""
    return name if name.rfind(":") > name.rfind("/") else name + ":latest"


def pod_images(where: Where, spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The images ImageLocality looks up on a node: init containers, app containers, then image volumes."""
    out = []
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(_list(where, spec.get(kind), f"spec.{kind}")):
            c = _mapping(where, c, f"spec.{kind}[{i}]")
            out.append(normalized_image_name(_str(where, c.get("image"), f"spec.{kind}[{i}].image")))
    for i, v in enumerate(_list(where, spec.get("volumes"), "spec.volumes")):
        image = _mapping(where, _mapping(where, v, f"spec.volumes[{i}]").get("image"), f"spec.volumes[{i}].image")
        if image:
            out.append(normalized_image_name(_str(where, image.get("reference"), f"spec.volumes[{i}].image.reference")))
    return tuple(out)


def parse_node_images(where: Where, status: Mapping[str, Any]) -> tuple[NodeImage, ...]:
    out = []
    for i, image in enumerate(_list(where, status.get("images"), "status.images")):
        p = f"status.images[{i}]"
        image = _mapping(where, image, p)
        names = _list(where, image.get("names"), f"{p}.names")
        names = tuple(_str(where, n, f"{p}.names[{j}]") for j, n in enumerate(names))
        out.append(NodeImage(names, _int(where, image.get("sizeBytes"), f"{p}.sizeBytes", default=0, minimum=0)))
    return tuple(out)


def parse_scheduling_group(where: Where, spec: Mapping[str, Any]) -> str:
    """spec.schedulingGroup (core/v1 1.36, feature gate GenericWorkload): the name of the pod's
    scheduling.k8s.io/v1alpha2 PodGroup, checked as validateSchedulingGroup does (a one-of with one member)."""
    group = spec.get("schedulingGroup")
    if group is None:
        return ""
    group = _mapping(where, group, "spec.schedulingGroup")
    name = group.get("podGroupName")
    if name is None:
        raise where.error(
            "spec.schedulingGroup.podGroupName", "Invalid value: null: must specify one of: `podGroupName`"
        )
    name = _str(where, name, "spec.schedulingGroup.podGroupName")
    problem = validation.dns1123_subdomain_problem(name)
    if problem:
        raise where.error("spec.schedulingGroup.podGroupName", f"Invalid value: {quoted(name)}: {problem}")
    return name


def parse_scheduling_gates(where: Where, spec: Mapping[str, Any]) -> tuple[str, ...]:
    """spec.schedulingGates, validated as the API server does on create: qualified names, no duplicates, and no
    nodeName while any gate remains."""
    from accelsched.api.validation import label_key_problem  # a qualified name is a label key's syntax

    gates: list[str] = []
    for i, gate in enumerate(_list(where, spec.get("schedulingGates"), "spec.schedulingGates")):
        p = f"spec.schedulingGates[{i}]"
        name = _str(where, _mapping(where, gate, p).get("name"), f"{p}.name")
        problem = label_key_problem(name)
        if problem:
            raise where.error(p, f'Invalid value: "{clipped(name)}": {problem}')
        if name in gates:
            raise where.error(p, f'Duplicate value: "{clipped(name)}"')
        gates.append(name)
    if gates and spec.get("nodeName"):
        raise where.error("spec.nodeName", "Forbidden: cannot be set until all schedulingGates have been cleared")
    return tuple(gates)


def _pod_affinity_terms(where: Where, value: Any, path: str) -> tuple[PodAffinityTerm, ...]:
    terms = []
    for i, t in enumerate(_list(where, value, path)):
        terms.append(_pod_affinity_term(where, t, f"{path}[{i}]"))
    return tuple(terms)


def _pod_affinity_term(where: Where, t: Any, p: str) -> PodAffinityTerm:
    t = _mapping(where, t, p)
    key = _str(where, t.get("topologyKey"), f"{p}.topologyKey")
    if not key:
        raise where.error(f"{p}.topologyKey", "is required")
    return PodAffinityTerm(
        label_selector=parse_label_selector(where, t.get("labelSelector"), f"{p}.labelSelector"),
        topology_key=key,
        namespaces=tuple(
            _str(where, n, f"{p}.namespaces[{j}]")
            for j, n in enumerate(_list(where, t.get("namespaces"), f"{p}.namespaces"))
        ),
        namespace_selector=parse_label_selector(where, t.get("namespaceSelector"), f"{p}.namespaceSelector"),
        match_label_keys=tuple(
            _str(where, n, f"{p}.matchLabelKeys") for n in _list(where, t.get("matchLabelKeys"), f"{p}.matchLabelKeys")
        ),
        mismatch_label_keys=tuple(
            _str(where, n, f"{p}.mismatchLabelKeys")
            for n in _list(where, t.get("mismatchLabelKeys"), f"{p}.mismatchLabelKeys")
        ),
    )


def _weighted_pod_affinity_terms(where: Where, value: Any, path: str) -> tuple[WeightedPodAffinityTerm, ...]:
    out = []
    for i, item in enumerate(_list(where, value, path)):
        p = f"{path}[{i}]"
        item = _mapping(where, item, p)
        weight = _int(where, item.get("weight"), f"{p}.weight", minimum=1)
        if weight > 100:
            raise where.error(f"{p}.weight", f"must be in 1..100, got {weight}")
        out.append(
            WeightedPodAffinityTerm(
                weight, _pod_affinity_term(where, item.get("podAffinityTerm"), f"{p}.podAffinityTerm")
            )
        )
    return tuple(out)


def parse_spread_constraints(where: Where, value: Any, path: str) -> tuple[TopologySpreadConstraint, ...]:
    out = []
    for i, c in enumerate(_list(where, value, path)):
        p = f"{path}[{i}]"
        c = _mapping(where, c, p)
        when = _choice(
            where,
            _str(where, c.get("whenUnsatisfiable"), f"{p}.whenUnsatisfiable"),
            f"{p}.whenUnsatisfiable",
            (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY),
        )
        key = _str(where, c.get("topologyKey"), f"{p}.topologyKey")
        if not key:
            raise where.error(f"{p}.topologyKey", "is required")
        min_domains = c.get("minDomains")
        if min_domains is not None:
            min_domains = _int(where, min_domains, f"{p}.minDomains", minimum=1)
            if when != DO_NOT_SCHEDULE:
                raise where.error(f"{p}.minDomains", "may only be set when whenUnsatisfiable is DoNotSchedule")
        out.append(
            TopologySpreadConstraint(
                max_skew=_int(where, c.get("maxSkew"), f"{p}.maxSkew", minimum=1),
                topology_key=key,
                when_unsatisfiable=when,
                label_selector=parse_label_selector(where, c.get("labelSelector"), f"{p}.labelSelector"),
                min_domains=min_domains,
                node_affinity_policy=_choice(
                    where,
                    _str(where, c.get("nodeAffinityPolicy"), f"{p}.nodeAffinityPolicy", "Honor"),
                    f"{p}.nodeAffinityPolicy",
                    ("Honor", "Ignore"),
                ),
                node_taints_policy=_choice(
                    where,
                    _str(where, c.get("nodeTaintsPolicy"), f"{p}.nodeTaintsPolicy", "Ignore"),
                    f"{p}.nodeTaintsPolicy",
                    ("Honor", "Ignore"),
                ),
                match_label_keys=tuple(
                    _str(where, k, f"{p}.matchLabelKeys")
                    for k in _list(where, c.get("matchLabelKeys"), f"{p}.matchLabelKeys")
                ),
            )
        )
    return tuple(out)


def _timestamp(where: Where, value: Any, path: str) -> float | None:
    """A metav1.Time (RFC 3339, as the API server writes it) in seconds since the epoch; None when absent."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.datetime.fromisoformat(value)
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise where.error(path, f"{quoted(value)} is not an RFC 3339 time such as 2026-01-02T15:04:05Z")
    else:
        raise where.error(path, f"must be an RFC 3339 time string, got {type(value).__name__}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def parse_pod(doc: Mapping[str, Any], source: str = "") -> Pod:
    where, name, namespace, meta = metadata(doc, source, "Pod", namespaced=True)
    spec = _mapping(where, doc.get("spec"), "spec")
    status = _mapping(where, doc.get("status"), "status")
    containers = _list(where, spec.get("containers"), "spec.containers")
    if not containers:
        raise where.error("spec.containers", "must list at least one container")
    app = [req for req, _ in _container_requests(where, containers, "spec.containers")]
    init = _container_requests(
        where, _list(where, spec.get("initContainers"), "spec.initContainers"), "spec.initContainers"
    )
    overhead = parse_resources(where, spec.get("overhead"), "spec.overhead")

    affinity = _mapping(where, spec.get("affinity"), "spec.affinity")
    node_aff = _mapping(where, affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    required_node = None
    req_block = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req_block is not None:
        p = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        req_block = _mapping(where, req_block, p)
        required_node = parse_node_selector_terms(where, req_block.get("nodeSelectorTerms"), f"{p}.nodeSelectorTerms")
        if not required_node:
            raise where.error(f"{p}.nodeSelectorTerms", "must have at least one term")
    preferred_node = []
    p = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    for i, item in enumerate(_list(where, node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"), p)):
        item = _mapping(where, item, f"{p}[{i}]")
        weight = _int(where, item.get("weight"), f"{p}[{i}].weight", minimum=1)
        if weight > 100:
            raise where.error(f"{p}[{i}].weight", f"must be in 1..100, got {weight}")
        (term,) = parse_node_selector_terms(where, [item.get("preference") or {}], f"{p}[{i}].preference")
        preferred_node.append(WeightedNodeSelectorTerm(weight, term))

    pa = _mapping(where, affinity.get("podAffinity"), "spec.affinity.podAffinity")
    paa = _mapping(where, affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    req_key, pref_key = (
        "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
    )

    owner_kind = owner_name = ""
    for i, ref in enumerate(_list(where, meta.get("ownerReferences"), "metadata.ownerReferences")):
        ref = _mapping(where, ref, f"metadata.ownerReferences[{i}]")
        if ref.get("controller"):
            owner_kind, owner_name = _str(where, ref.get("kind"), "kind"), _str(where, ref.get("name"), "name")

    devices: dict[str, list[str]] = {}
    annotations = _string_map(where, meta.get("annotations"), "metadata.annotations")
    if DEVICES_ANNOTATION in annotations:
        devices = parse_devices_annotation(
            where, annotations[DEVICES_ANNOTATION], f"metadata.annotations[{DEVICES_ANNOTATION}]"
        )

    priority = spec.get("priority")
    pod = Pod(
        namespace=namespace,
        name=name,
        source=source,
        uid=_str(where, meta.get("uid"), "metadata.uid"),
        labels=_string_map(where, meta.get("labels"), "metadata.labels"),
        annotations=annotations,
        scheduler_name=_str(where, spec.get("schedulerName"), "spec.schedulerName", DEFAULT_SCHEDULER),
        node_name=_str(where, spec.get("nodeName"), "spec.nodeName"),
        phase=_str(where, status.get("phase"), "status.phase", "Pending"),
        start_time=_timestamp(where, status.get("startTime"), "status.startTime"),
        priority=_int(where, priority, "spec.priority", default=0) if priority is not None else 0,
        priority_class_name=_str(where, spec.get("priorityClassName"), "spec.priorityClassName"),
        preemption_policy=_choice(
            where,
            _str(where, spec.get("preemptionPolicy"), "spec.preemptionPolicy", "PreemptLowerPriority"),
            "spec.preemptionPolicy",
            ("PreemptLowerPriority", "Never"),
        ),
        requests=effective_requests(app, init, overhead),
        nonzero=nonzero_requests_of(app, init, overhead),
        node_selector=_string_map(where, spec.get("nodeSelector"), "spec.nodeSelector"),
        required_node_affinity=required_node,
        preferred_node_affinity=tuple(preferred_node),
        required_affinity=_pod_affinity_terms(where, pa.get(req_key), f"spec.affinity.podAffinity.{req_key}"),
        preferred_affinity=_weighted_pod_affinity_terms(
            where, pa.get(pref_key), f"spec.affinity.podAffinity.{pref_key}"
        ),
        required_anti_affinity=_pod_affinity_terms(where, paa.get(req_key), f"spec.affinity.podAntiAffinity.{req_key}"),
        preferred_anti_affinity=_weighted_pod_affinity_terms(
            where, paa.get(pref_key), f"spec.affinity.podAntiAffinity.{pref_key}"
        ),
        tolerations=parse_tolerations(where, spec.get("tolerations"), "spec.tolerations"),
        topology_spread_constraints=parse_spread_constraints(
            where, spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints"
        ),
        owner_kind=owner_kind,
        owner_name=owner_name,
        devices=devices,
        container_requests=tuple({k: v for k, v in req.items() if v} for req in app),
        guaranteed=_is_guaranteed(containers + _list(where, spec.get("initContainers"), "spec.initContainers")),
        volumes=parse_volumes(where, spec.get("volumes"), "spec.volumes"),
        host_ports=parse_host_ports(where, spec),
        images=pod_images(where, spec),
        container_count=len(containers) + len(_list(where, spec.get("initContainers"), "spec.initContainers")),
        scheduling_gates=parse_scheduling_gates(where, spec),
        scheduling_group=parse_scheduling_group(where, spec),
        raw=writable_copy(doc),
    )
    return _merge_label_keys(pod)


def writable_copy(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The pod's raw dict, copied only where the scheduler writes (spec.nodeName, metadata.annotations, status):
    a deep copy of every pod cost more than parsing it, and the rest is only read."""
    raw = dict(doc)
    meta = raw.get("metadata")
    if isinstance(meta, Mapping):
        raw["metadata"] = meta = dict(meta)
        if isinstance(meta.get("annotations"), Mapping):
            meta["annotations"] = dict(meta["annotations"])
    for key in ("spec", "status"):
        if isinstance(raw.get(key), Mapping):
            raw[key] = dict(raw[key])
    return raw


def _merged_term(term: PodAffinityTerm, labels: Mapping[str, str]) -> PodAffinityTerm:
    """matchLabelKeys / mismatchLabelKeys become ``key In/NotIn (the pod's value)`` in the labelSelector, as the
    API server merges them when the pod is created; keys the pod lacks are ignored."""
    if term.label_selector is None or not (term.match_label_keys or term.mismatch_label_keys):
        return term
    extra = tuple(Requirement(k, "In", (labels[k],)) for k in term.match_label_keys if k in labels) + tuple(
        Requirement(k, "NotIn", (labels[k],)) for k in term.mismatch_label_keys if k in labels
    )
    selector = LabelSelector(term.label_selector.match_labels, term.label_selector.match_expressions + extra)
    return dataclasses.replace(term, label_selector=selector, match_label_keys=(), mismatch_label_keys=())


def _merge_label_keys(pod: Pod) -> Pod:
    def weighted(terms: tuple[WeightedPodAffinityTerm, ...]) -> tuple[WeightedPodAffinityTerm, ...]:
        return tuple(WeightedPodAffinityTerm(w.weight, _merged_term(w.term, pod.labels)) for w in terms)

    pod.required_affinity = tuple(_merged_term(t, pod.labels) for t in pod.required_affinity)
    pod.required_anti_affinity = tuple(_merged_term(t, pod.labels) for t in pod.required_anti_affinity)
    pod.preferred_affinity = weighted(pod.preferred_affinity)
    pod.preferred_anti_affinity = weighted(pod.preferred_anti_affinity)
    return pod


def parse_devices_annotation(where: Where, text: str, path: str) -> dict[str, list[str]]:
    """``accelsched.io/devices``: JSON ``{"<resource>": ["<id>", ...]}``: the device IDs a pod holds or a node has."""
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise where.error(path, f"is not valid JSON ({exc.msg})") from None
    except RecursionError:  # nested past the interpreter's limit: an annotation never needs that
        raise where.error(path, "is nested too deeply to be a device list") from None
    if not isinstance(value, dict) or not all(
        isinstance(v, list) and all(isinstance(x, str) and x for x in v) for v in value.values()
    ):
        raise where.error(path, 'must be a JSON object {"<resource>": ["<device id>", ...]}')
    for res, ids in value.items():
        if len(set(ids)) != len(ids):
            raise where.error(path, f"lists a device of {res} twice")
    return {str(k): list(v) for k, v in value.items()}
