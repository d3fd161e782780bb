"""Kueue's objects (kueue.x-k8s.io/v1beta2) read from manifests: ResourceFlavor, ClusterQueue, LocalQueue, Cohort,
WorkloadPriorityClass and Workload, each checked as the CRD schema and Kueue's webhooks check it.

Fields and defaults are those of apis/kueue/v1beta2 in sigs.k8s.io/kueue v0.19.2 (the CRDs' ``default:`` markers:
BestEffortFIFO, stopPolicy None, whenCanBorrow MayStopSearch, whenCanPreempt TryNextFlavor, preemption Never, a
fair-sharing weight of 1). Amounts are Kueue's int64 units (queues.resources).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from accelsched.api import objects, quantity
from accelsched.api.object_fields import _int, _list, _mapping, _str, _string_map
from accelsched.api.selectors import LabelSelector, Taint, Toleration
from accelsched.config.fields import Fields
from accelsched.errors import InputError, Where
from accelsched.queues import preemptiongates, resources
from accelsched.queues import validation as rules
from accelsched.queues.config import KueueConfig

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass", "Workload")
CLUSTER_SCOPED = ("ResourceFlavor", "ClusterQueue", "Cohort", "WorkloadPriorityClass")

# Labels and annotations Kueue's integrations read (pkg/controller/constants, pkg/controller/jobs/pod/constants).
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
POD_GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
DEFAULT_POD_SET_NAME = "main"

# Enum values (the CRDs' enums and defaults).
STRICT_FIFO, BEST_EFFORT_FIFO = "StrictFIFO", "BestEffortFIFO"
STOP_NONE, HOLD, HOLD_AND_DRAIN = "None", "Hold", "HoldAndDrain"
MAY_STOP_SEARCH, TRY_NEXT_FLAVOR = "MayStopSearch", "TryNextFlavor"
NEVER, ANY = "Never", "Any"
USAGE_BASED_AFS, NO_AFS = "UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"  # spec.admissionScope
# accelsched's own, on a root Cohort: fairness over time across its ClusterQueues (queues.cohortusage)
USAGE_HALF_LIFE_ANNOTATION = "accelsched.io/fair-sharing-usage-half-life"


def is_kueue(doc: Mapping[str, Any]) -> bool:
    """One of the Kueue kinds read here (any version: the schema refuses those not served). Kueue's other kinds
    (AdmissionCheck, MultiKueue's) are read past, as other kinds that do not change placement; Topology is
    accelsched/fabric's (gang placement by topology level)."""
    api_version = doc.get("apiVersion")
    return doc.get("kind") in KINDS and isinstance(api_version, str) and api_version.split("/", 1)[0] == GROUP


@dataclass(frozen=True)
class ResourceQuota:
    name: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class FlavorQuotas:
    name: str
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


def map_quotas(
    groups: tuple[ResourceGroup, ...], change: Callable[[str, ResourceQuota], ResourceQuota]
) -> tuple[ResourceGroup, ...]:
    """The resource groups with each (flavor, quota) passed through ``change`` (what-ifs: explain, simulate)."""
    return tuple(
        replace(
            rg,
            flavors=tuple(replace(fq, resources=tuple(change(fq.name, q) for q in fq.resources)) for fq in rg.flavors),
        )
        for rg in groups
    )


@dataclass(frozen=True)
class FlavorFungibility:
    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR
    preference: str | None = None


@dataclass(frozen=True)
class Preemption:
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort: str = NEVER
    max_priority_threshold: int | None = None
    within_cluster_queue: str = NEVER


@dataclass
class ResourceFlavor:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str = ""
    source: str = ""


@dataclass
class ClusterQueue:
    name: str
    cohort: str = ""
    resource_groups: tuple[ResourceGroup, ...] = ()
    namespace_selector: LabelSelector | None = None  # None matches nothing (Kueue: a nil selector), {} all
    queueing_strategy: str = BEST_EFFORT_FIFO
    stop_policy: str = STOP_NONE
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    preemption: Preemption = field(default_factory=Preemption)
    fair_weight: Fraction = Fraction(1)
    source: str = ""
    admission_mode: str = ""  # spec.admissionScope.admissionMode ("" without one): queues.admissionfairsharing


@dataclass
class Cohort:
    name: str
    parent: str = ""
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: Fraction = Fraction(1)
    source: str = ""
    usage_half_life: float | None = None  # accelsched's annotation (queues.cohortusage): fairness over time


@dataclass
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = STOP_NONE
    source: str = ""
    fair_weight: Fraction = Fraction(1)  # spec.fairSharing.weight: admission fair sharing divides usage by it
    # status.fairSharing.admissionFairSharingStatus.consumedResources as Kueue's floats (Quantity
    # AsApproximateFloat64: cpu in cores): the decayed usage admission fair sharing starts from
    consumed: dict[str, float] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class WorkloadPriorityClass:
    name: str
    value: int
    source: str = ""


@dataclass
class PodSetSpec:
    """One spec.podSets[] of a Workload: a name, a count and a pod template."""

    name: str
    count: int
    template: Mapping[str, Any]
    min_count: int | None = None


@dataclass
class WorkloadObject:
    """A Workload as written (the spec and, for one already admitted, status.admission and conditions)."""

    namespace: str
    name: str
    queue_name: str
    pod_sets: list[PodSetSpec]
    uid: str = ""
    priority: int | None = None
    priority_class_ref: tuple[str, str, str] | None = None  # (group, kind, name)
    active: bool = True
    created: str = ""  # metadata.creationTimestamp (RFC 3339), Kueue's queue order tie-break
    admission: Mapping[str, Any] | None = None
    conditions: list[Mapping[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    source: str = ""
    preemption_gates: preemptiongates.Gates = preemptiongates.NONE  # spec and status.preemptionGates
    # Its pod sets' templates as read (queues.workloads), kept with it: live mode keeps a Workload parsed until its
    # resourceVersion changes (live/workloadcache.py), so admission reads each template once, not every round.
    template_pod_sets: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)


@dataclass
class QueueObjects:
    """Every Kueue object of the input, by name (namespace/name for the namespaced ones)."""

    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    local_queues: dict[str, LocalQueue] = field(default_factory=dict)
    priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)
    workloads: dict[str, WorkloadObject] = field(default_factory=dict)
    # Jobs carrying the queue-name label, by namespace/name: their labels (the pods they make do not carry them).
    jobs: dict[str, dict[str, str]] = field(default_factory=dict)
    # ... and their pod count as Kueue's job integration counts it (podsCount: min(parallelism, completions)): in a
    # cluster the Job controller makes the pods one by one, and the workload is the Job's whole count.
    job_pods: dict[str, int] = field(default_factory=dict)
    config: KueueConfig = field(default_factory=KueueConfig)  # Kueue's Configuration (fair sharing), queues.config
    # Workloads (namespace/name) quota admitted and the engine could not place, waiting for room with this message
    # (queues/room.py): admission leaves them out of their queues. Set by live mode's second door only; empty, the
    # admission is Kueue's (the Kueue oracle, the first door).
    room_waits: dict[str, str] = field(default_factory=dict)
    # Admission fair sharing's usage ledger kept from the last session (queues.admissionfairsharing.carried): set by
    # live mode only, which keeps it for the life of the process as Kueue does; None, each admission starts its own
    # from the LocalQueues' status.
    afs_ledger: Any = None
    # The cohort history of accelsched's extension kept from the last session (queues.cohortusage.carried), likewise
    # set by live mode only; None, each admission starts an empty one.
    cohort_history: Any = None

    def __bool__(self) -> bool:
        """Whether Kueue is in play: without any of its objects a queue-name label is inert (no Kueue to read it)."""
        return bool(self.cluster_queues or self.local_queues or self.workloads or self.flavors or self.cohorts)

    def add(self, kind: str, doc: Mapping[str, Any], source: str) -> Any:
        """Parse one Kueue object into its map; returns it (namespace and name for the loader's identity)."""
        obj = PARSERS[kind](doc, source)
        target = {
            "ResourceFlavor": self.flavors,
            "ClusterQueue": self.cluster_queues,
            "Cohort": self.cohorts,
            "LocalQueue": self.local_queues,
            "WorkloadPriorityClass": self.priority_classes,
            "Workload": self.workloads,
        }[kind]
        namespace = getattr(obj, "namespace", "")
        target[f"{namespace}/{obj.name}" if namespace else obj.name] = obj
        return obj

    def note_job(self, doc: Mapping[str, Any], source: str) -> None:
        """A Job with the queue-name label: Kueue makes its Workload from the Job, whose labels the pods lack."""
        where, name, namespace, meta = objects.metadata(doc, source, "Job", namespaced=True)
        self.jobs[f"{namespace}/{name}"] = _string_map(where, meta.get("labels"), "metadata.labels")
        spec = _mapping(where, doc.get("spec"), "spec")
        count = _int(where, spec.get("parallelism"), "spec.parallelism", 1)
        if spec.get("completions") is not None:
            count = min(count, _int(where, spec.get("completions"), "spec.completions", 1))
        self.job_pods[f"{namespace}/{name}"] = count


def queue_name(doc: Mapping[str, Any]) -> str:
    """The kueue.x-k8s.io/queue-name label of a manifest ('' without one)."""
    meta = doc.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    name = labels.get(QUEUE_NAME_LABEL) if isinstance(labels, Mapping) else None
    return name if isinstance(name, str) else ""


def unsuspended(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """A queued Job as it will run once admitted: Kueue suspends it while it waits and lifts ``suspend`` when it
    admits it; the queue layer holds its pods back until then, so they are made here whatever ``suspend`` says."""
    spec = doc.get("spec")
    if not queue_name(doc) or not isinstance(spec, Mapping) or not spec.get("suspend"):
        return doc
    return {**doc, "spec": {**spec, "suspend": False}}


# ---------------------------------------------------------------------------------------------- parsers


def _where(doc: Mapping[str, Any], source: str, kind: str) -> tuple[Where, str, str, Mapping[str, Any]]:
    return objects.metadata(doc, source, kind, namespaced=kind not in CLUSTER_SCOPED)


def _amount(where: Where, name: str, value: Any, path: str) -> int:
    try:
        amount = resources.value(name, value)
    except ValueError as exc:
        raise where.error(path, str(exc)) from None
    if amount < 0:
        raise rules.invalid(where, path, str(value), rules.IS_NEGATIVE)
    return amount


def _weight(where: Where, spec: Mapping[str, Any], path: str) -> Fraction:
    """spec.fairSharing.weight (validateFairSharing): not negative, and 0 or more than 1n."""
    fair = _mapping(where, spec.get("fairSharing"), path)
    if fair.get("weight") is None:
        return Fraction(1)
    try:
        weight = quantity.parse_fraction(fair["weight"])
    except ValueError as exc:
        raise where.error(f"{path}.weight", str(exc)) from None
    if weight < 0:
        raise rules.invalid(where, path, str(fair["weight"]), rules.IS_NEGATIVE)
    if 0 < weight <= Fraction(1, 10**9):
        raise rules.invalid(where, path, str(fair["weight"]), "When not 0, weight must be > 10e-9")
    return weight


def _resource_groups(
    where: Where, spec: Mapping[str, Any], has_parent: bool, cohort: bool
) -> tuple[ResourceGroup, ...]:
    """spec.resourceGroups, as the CRD (sizes, the coveredResources CEL rule) and validateResourceGroups check it."""
    path = "spec.resourceGroups"
    groups = _list(where, spec.get("resourceGroups"), path)
    rules.check_items(where, groups, path, 16)
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    out = []
    for i, raw in enumerate(groups):
        p = f"{path}[{i}]"
        raw = _mapping(where, raw, p)
        covered = [
            _str(where, c, f"{p}.coveredResources[{j}]")
            for j, c in enumerate(_list(where, raw.get("coveredResources"), f"{p}.coveredResources"))
        ]
        flavors = _list(where, raw.get("flavors"), f"{p}.flavors")
        rules.check_items(where, covered, f"{p}.coveredResources", 64, 1)
        rules.check_items(where, flavors, f"{p}.flavors", 64, 1)
        rules.check_unique(where, flavors, f"{p}.flavors")
        for f, fq in enumerate(flavors):
            if len(_list(where, fq.get("resources"), f"{p}.flavors[{f}].resources")) != len(covered):
                raise rules.invalid(
                    where, p, "object", "flavors must have the same number of resources as the coveredResources"
                )
        for j, name in enumerate(covered):
            rules.check_resource_name(where, name, f"{p}.coveredResources[{j}]")
            if name in seen_resources:
                raise where.error(f"{p}.coveredResources[{j}]", f"Duplicate value: {rules.shown(name)}")
            seen_resources.add(name)
        parsed_flavors = []
        for f, fq in enumerate(flavors):
            fp = f"{p}.flavors[{f}]"
            name = rules.check_name(where, fq.get("name"), f"{fp}.name")
            if name in seen_flavors:
                raise where.error(f"{fp}.name", f"Duplicate value: {rules.shown(name)}")
            seen_flavors.add(name)
            quotas = _list(where, fq.get("resources"), f"{fp}.resources")
            rules.check_items(where, quotas, f"{fp}.resources", 64, 1)
            rules.check_unique(where, quotas, f"{fp}.resources")
            parsed_flavors.append(
                FlavorQuotas(
                    name,
                    tuple(
                        _quota(where, q, covered[k], f"{fp}.resources[{k}]", has_parent, cohort)
                        for k, q in enumerate(quotas)
                    ),
                )
            )
        out.append(ResourceGroup(tuple(covered), tuple(parsed_flavors)))
    return tuple(out)


def _quota(where: Where, raw: Any, covered: str, path: str, has_parent: bool, cohort: bool) -> ResourceQuota:
    """validateFlavorQuotas: the name matches coveredResources in order; quantities not negative; limits only
    with a parent; a ClusterQueue's lendingLimit at most its nominalQuota."""
    raw = _mapping(where, raw, path)
    name = _str(where, raw.get("name"), f"{path}.name")
    if name != covered:
        raise rules.invalid(where, f"{path}.name", name, rules.MUST_MATCH_COVERED)
    nominal = _amount(where, name, raw.get("nominalQuota"), f"{path}.nominalQuota")
    limits: list[int | None] = []
    for key in ("borrowingLimit", "lendingLimit"):
        if raw.get(key) is None:
            limits.append(None)
            continue
        if not has_parent:
            parent = "parent" if cohort else "cohort"
            raise rules.invalid(where, f"{path}.{key}", str(raw[key]), rules.LIMIT_IS_EMPTY.format(parent))
        limits.append(_amount(where, name, raw[key], f"{path}.{key}"))
    if not cohort and limits[1] is not None and limits[1] > nominal:
        raise rules.invalid(where, f"{path}.lendingLimit", str(raw["lendingLimit"]), rules.LENDING_LIMIT)
    return ResourceQuota(name, nominal, limits[0], limits[1])


def parse_resource_flavor(doc: Mapping[str, Any], source: str = "") -> ResourceFlavor:
    where, name, _, _ = _where(doc, source, "ResourceFlavor")
    spec = _mapping(where, doc.get("spec"), "spec")
    labels = _string_map(where, spec.get("nodeLabels"), "spec.nodeLabels")
    if len(labels) > 8:
        raise where.error("spec.nodeLabels", f"Too many: {len(labels)}: must have at most 8 items")
    rules.check_label_map(where, labels, "spec.nodeLabels")
    raw_taints = _list(where, spec.get("nodeTaints"), "spec.nodeTaints")
    rules.check_items(where, raw_taints, "spec.nodeTaints", 8)
    if any(
        _mapping(where, t, "spec.nodeTaints").get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute")
        for t in raw_taints
    ):
        raise rules.invalid(
            where,
            "spec.nodeTaints",
            "array",
            "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
        )
    taints = objects.parse_taints(where, raw_taints, "spec.nodeTaints")
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):  # validateNodeTaints
        if (taint.key, taint.effect) in seen:
            raise where.error(f"spec.nodeTaints[{i}]", "Duplicate value: taints must be unique by key and effect pair")
        seen.add((taint.key, taint.effect))
    raw_tolerations = _list(where, spec.get("tolerations"), "spec.tolerations")
    rules.check_items(where, raw_tolerations, "spec.tolerations", 8)
    tolerations = objects.parse_tolerations(where, raw_tolerations, "spec.tolerations")
    topology = rules.check_name(where, spec.get("topologyName"), "spec.topologyName")
    if topology and not labels:
        raise rules.invalid(where, "spec", "object", "at least one nodeLabel is required when topology is set")
    return ResourceFlavor(name, labels, taints, tolerations, topology, source)


def parse_cluster_queue(doc: Mapping[str, Any], source: str = "") -> ClusterQueue:
    where, name, _, _ = _where(doc, source, "ClusterQueue")
    spec = _mapping(where, doc.get("spec"), "spec")
    cohort = rules.check_name(where, spec.get("cohortName"), "spec.cohortName")
    if not cohort and any(
        isinstance(r, Mapping) and r.get("borrowingLimit") is not None
        for rg in _list(where, spec.get("resourceGroups"), "spec.resourceGroups")
        if isinstance(rg, Mapping)
        for fq in _list(where, rg.get("flavors"), "spec.resourceGroups")
        if isinstance(fq, Mapping)
        for r in _list(where, fq.get("resources"), "spec.resourceGroups")
    ):
        raise rules.invalid(where, "spec", "object", "borrowingLimit must be nil when cohort is empty")
    groups = _resource_groups(where, spec, bool(cohort), cohort=False)
    fungibility = _mapping(where, spec.get("flavorFungibility"), "spec.flavorFungibility")
    flavor_fungibility = FlavorFungibility(
        _str(where, fungibility.get("whenCanBorrow"), "", MAY_STOP_SEARCH),
        _str(where, fungibility.get("whenCanPreempt"), "", TRY_NEXT_FLAVOR),
        fungibility.get("preference"),
    )
    if flavor_fungibility.preference is not None and TRY_NEXT_FLAVOR not in {flavor_fungibility.when_can_borrow} & {
        flavor_fungibility.when_can_preempt
    }:
        raise rules.invalid(
            where, "spec.flavorFungibility", "object",
            "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
        )  # fmt: skip
    raw_preemption = _mapping(where, spec.get("preemption"), "spec.preemption")
    borrow = _mapping(where, raw_preemption.get("borrowWithinCohort"), "spec.preemption.borrowWithinCohort")
    preemption = Preemption(
        _str(where, raw_preemption.get("reclaimWithinCohort"), "", NEVER),
        _str(where, borrow.get("policy"), "", NEVER),
        borrow.get("maxPriorityThreshold"),
        _str(where, raw_preemption.get("withinClusterQueue"), "", NEVER),
    )
    if preemption.reclaim_within_cohort == NEVER and preemption.borrow_within_cohort != NEVER:
        raise rules.invalid(
            where, "spec.preemption", "object", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
        )
    selector = spec.get("namespaceSelector")
    if selector is not None:
        for key, _ in (_mapping(where, selector, "spec.namespaceSelector").get("matchLabels") or {}).items():
            rules.check_resource_name(where, str(key), "spec.namespaceSelector.matchLabels")
    return ClusterQueue(
        name,
        cohort,
        groups,
        objects.parse_label_selector(where, selector, "spec.namespaceSelector"),
        _str(where, spec.get("queueingStrategy"), "spec.queueingStrategy", BEST_EFFORT_FIFO),
        _str(where, spec.get("stopPolicy"), "spec.stopPolicy", STOP_NONE),
        flavor_fungibility,
        preemption,
        _weight(where, spec, "spec.fairSharing"),
        source,
        _admission_mode(where, spec),
    )


def _admission_mode(where: Where, spec: Mapping[str, Any]) -> str:
    """spec.admissionScope (the CRD: admissionMode required, one of two values)."""
    scope = spec.get("admissionScope")
    if scope is None:
        return ""
    mode = _str(where, _mapping(where, scope, "spec.admissionScope").get("admissionMode"), "")
    path = "spec.admissionScope.admissionMode"
    if not mode:
        raise where.error(path, "Required value")
    if mode not in (USAGE_BASED_AFS, NO_AFS):
        raise where.error(path, f'Unsupported value: "{mode}": supported values: "{USAGE_BASED_AFS}", "{NO_AFS}"')
    return mode


def _consumed(where: Where, doc: Mapping[str, Any]) -> dict[str, float]:
    """status.fairSharing.admissionFairSharingStatus.consumedResources, as Kueue's floats."""
    path = "status.fairSharing.admissionFairSharingStatus"
    status = _mapping(where, doc.get("status"), "status")
    fair = _mapping(where, status.get("fairSharing"), "status.fairSharing")
    afs = _mapping(where, fair.get("admissionFairSharingStatus"), path)
    out = {}
    for name, value in _mapping(where, afs.get("consumedResources"), f"{path}.consumedResources").items():
        try:
            out[str(name)] = float(quantity.parse_fraction(value))
        except ValueError as exc:
            raise where.error(f"{path}.consumedResources[{name}]", str(exc)) from None
    return out


def parse_cohort(doc: Mapping[str, Any], source: str = "") -> Cohort:
    where, name, _, meta = _where(doc, source, "Cohort")
    spec = _mapping(where, doc.get("spec"), "spec")
    parent = rules.check_name(where, spec.get("parentName"), "spec.parentName")
    groups = _resource_groups(where, spec, bool(parent), cohort=True)
    half_life = _usage_half_life(where, _string_map(where, meta.get("annotations"), "metadata.annotations"))
    return Cohort(name, parent, groups, _weight(where, spec, "spec.fairSharing"), source, half_life)


def _usage_half_life(where: Where, annotations: Mapping[str, str]) -> float | None:
    """accelsched's USAGE_HALF_LIFE_ANNOTATION in seconds (None without it; queues.cohortusage reads it)."""
    if USAGE_HALF_LIFE_ANNOTATION not in annotations:
        return None
    path = f"metadata.annotations[{USAGE_HALF_LIFE_ANNOTATION}]"
    try:
        fields = Fields(where.source, annotations, "", {USAGE_HALF_LIFE_ANNOTATION})
        seconds = fields.duration(USAGE_HALF_LIFE_ANNOTATION, 0.0)
    except InputError as exc:
        raise where.error(path, exc.message) from None
    if seconds <= 0:
        raise where.error(path, f"Invalid value: {annotations[USAGE_HALF_LIFE_ANNOTATION]!r}: must be greater than 0")
    return seconds


def parse_local_queue(doc: Mapping[str, Any], source: str = "") -> LocalQueue:
    where, name, namespace, _ = _where(doc, source, "LocalQueue")
    spec = _mapping(where, doc.get("spec"), "spec")
    cluster_queue = rules.check_name(where, spec.get("clusterQueue"), "spec.clusterQueue")
    weight = _weight(where, spec, "spec.fairSharing")
    stop = _str(where, spec.get("stopPolicy"), "", STOP_NONE)
    return LocalQueue(namespace, name, cluster_queue, stop, source, weight, _consumed(where, doc))


def parse_workload_priority_class(doc: Mapping[str, Any], source: str = "") -> WorkloadPriorityClass:
    where, name, _, _ = _where(doc, source, "WorkloadPriorityClass")
    return WorkloadPriorityClass(name, _int(where, doc.get("value"), "value"), source)


def parse_workload(doc: Mapping[str, Any], source: str = "") -> WorkloadObject:
    where, name, namespace, meta = _where(doc, source, "Workload")
    spec = _mapping(where, doc.get("spec"), "spec")
    raw_sets = _list(where, spec.get("podSets"), "spec.podSets")
    rules.check_items(where, raw_sets, "spec.podSets", 18, 1)
    pod_sets = []
    for i, raw in enumerate(raw_sets):
        p = f"spec.podSets[{i}]"
        raw = _mapping(where, raw, p)
        set_name = rules.check_pod_set_name(where, raw.get("name", DEFAULT_POD_SET_NAME), f"{p}.name")
        count = _int(where, raw.get("count"), f"{p}.count", 1)
        if count < 0:
            raise rules.invalid(where, f"{p}.count", count, f"{p}.count in body should be greater than or equal to 0")
        min_count = raw.get("minCount")
        if min_count is not None and min_count > count:
            raise rules.invalid(where, p, "object", "minCount should be positive and less or equal to count")
        template = _mapping(where, raw.get("template"), f"{p}.template")
        _check_template(where, template, f"{p}.template")
        pod_sets.append(PodSetSpec(set_name, count, template, None))  # minCount dropped: PartialAdmission is off
    for i, ps in enumerate(pod_sets):
        if any(other.name == ps.name for other in pod_sets[:i]):
            raise where.error(f"spec.podSets[{i}]", f'Duplicate value: {{"name":{rules.shown(ps.name)}}}')
    ref = spec.get("priorityClassRef")
    priority_class_ref = None
    if ref is not None:
        ref = _mapping(where, ref, "spec.priorityClassRef")
        group, kind = _str(where, ref.get("group"), ""), _str(where, ref.get("kind"), "")
        if (group == "scheduling.k8s.io") != (kind == "PriorityClass"):
            message = (
                "only the PriorityClass kind is allowed for the scheduling.k8s.io group"
                if group == "scheduling.k8s.io"
                else "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group"
            )
            raise rules.invalid(where, "spec.priorityClassRef", "object", message)
        priority_class_ref = (group, kind, rules.check_name(where, ref.get("name"), "spec.priorityClassRef.name"))
        if spec.get("priority") is None:
            raise rules.invalid(where, "spec", "object", "priority should not be nil when priorityClassRef is set")
    status = _mapping(where, doc.get("status"), "status")
    return WorkloadObject(
        namespace,
        name,
        rules.check_name(where, spec.get("queueName"), "spec.queueName"),
        pod_sets,
        _str(where, meta.get("uid"), "metadata.uid"),
        spec.get("priority"),
        priority_class_ref,
        spec.get("active", True) is not False,
        _str(where, meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        status.get("admission"),
        list(_list(where, status.get("conditions"), "status.conditions")),
        _string_map(where, meta.get("labels"), "metadata.labels"),
        source,
        preemptiongates.parse(where, spec, status),
    )


def _check_template(where: Where, template: Mapping[str, Any], path: str) -> None:
    """validatePodSet: the ``pods`` key is Kueue's own (requests and limits of every container)."""
    spec = _mapping(where, template.get("spec"), f"{path}.spec")
    for group in ("initContainers", "containers"):
        for c, container in enumerate(_list(where, spec.get(group), f"{path}.spec.{group}")):
            res = _mapping(where, _mapping(where, container, f"{path}.spec.{group}[{c}]").get("resources"), "")
            for kind in ("requests", "limits"):
                if "pods" in (res.get(kind) or {}):
                    rp = f"{path}.spec.{group}[{c}].resources.{kind}[pods]"
                    raise rules.invalid(where, rp, "pods", "the key is reserved for internal kueue use")


PARSERS = {
    "ResourceFlavor": parse_resource_flavor,
    "ClusterQueue": parse_cluster_queue,
    "Cohort": parse_cohort,
    "LocalQueue": parse_local_queue,
    "WorkloadPriorityClass": parse_workload_priority_class,
    "Workload": parse_workload,
}
