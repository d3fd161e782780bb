"""The ``resource.k8s.io/v1`` objects DRA scheduling reads, as typed, validated values (parsed by dra/objects.py).

They mirror the API types (staging/src/k8s.io/api/resource/v1/types.go) field for field where the scheduler or the
allocator reads a field, so code ported in meaning from the upstream allocator reads the same. Names are the Go
names in snake case. Quantities are exact ``Fraction`` values (a Kubernetes quantity is an exact decimal), attribute
names are stored fully qualified (an unqualified name takes the slice's driver as its domain, as the API defines),
capacity names as written (the allocator matches capacity requests to device capacities by the name as written,
consumable_capacity.go; CEL alone qualifies them), and every object keeps its raw dict (``raw``) so it can be
written back as the API would hold it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from accelsched.api.selectors import NodeSelectorTerm

API_VERSION = "resource.k8s.io/v1"
ALLOCATION_MODE_EXACT_COUNT = "ExactCount"
ALLOCATION_MODE_ALL = "All"
# The finalizer kube-scheduler adds before it writes an allocation (PreBind), and the annotation the resourceclaim
# controller puts on claims it makes from a pod's template (its value: the pod's claim name).
FINALIZER = "resource.kubernetes.io/delete-protection"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# DeviceClass.spec.extendedResourceName's implicit form: every class backs this one.
IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
# Limits from the API (types.go), enforced by dra/objects.py as the API server's validation does.
RESOURCE_SLICE_MAX_DEVICES = 128
RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS_OR_COUNTERS = 64
RESOURCE_SLICE_MAX_SHARED_COUNTERS = 8
DEVICE_REQUESTS_MAX = 32
FIRST_AVAILABLE_MAX = 8
RESERVED_FOR_MAX = 256
ALLOCATION_RESULTS_MAX = 32

# A device attribute value: int, bool, str, or a semantic version (Version).
Attribute = Any


@dataclass(frozen=True)
class Version:
    """A DeviceAttribute ``version`` value (semver 2.0.0, compared by CEL's semver library)."""

    text: str


@dataclass(frozen=True)
class DeviceID:
    """One device in the cluster: the allocator's DeviceID (driver, pool, device)."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


# ---------------------------------------------------------------------------------------------- ResourceSlice


@dataclass(frozen=True)
class CapacityRequestPolicyRange:
    min: Fraction
    max: Fraction | None = None
    step: Fraction | None = None


@dataclass(frozen=True)
class CapacityRequestPolicy:
    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] = ()
    valid_range: CapacityRequestPolicyRange | None = None


@dataclass(frozen=True)
class DeviceCapacity:
    value: Fraction
    request_policy: CapacityRequestPolicy | None = None


@dataclass(frozen=True)
class DeviceCounterConsumption:
    counter_set: str
    counters: Mapping[str, Fraction]


@dataclass(frozen=True)
class CounterSet:
    name: str
    counters: Mapping[str, Fraction]


@dataclass(frozen=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # None | NoSchedule | NoExecute
    time_added: str = ""


@dataclass(frozen=True)
class Device:
    name: str
    attributes: Mapping[str, Attribute] = field(default_factory=dict)  # fully qualified name -> value
    capacity: Mapping[str, DeviceCapacity] = field(default_factory=dict)  # name as written -> capacity
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    # Per-device node selection (slice.spec.perDeviceNodeSelection): exactly one of these three is set then.
    node_name: str | None = None
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool | None = None
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool = False


@dataclass(frozen=True)
class ResourcePool:
    name: str
    generation: int
    resource_slice_count: int


@dataclass
class ResourceSlice:
    name: str
    driver: str
    pool: ResourcePool
    # Exactly one of node_name, node_selector, all_nodes, per_device_node_selection (the API's one-of).
    node_name: str | None = None
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


# ---------------------------------------------------------------------------------------------- DeviceClass


@dataclass
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # spec.selectors[].cel.expression
    config: tuple[OpaqueConfig, ...] = ()
    extended_resource_name: str | None = None
    uid: str = ""
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def implicit_extended_resource_name(self) -> str:
        return IMPLICIT_EXTENDED_RESOURCE_PREFIX + self.name


@dataclass(frozen=True)
class OpaqueConfig:
    """One config entry: the driver's opaque parameters, for the requests named (empty: all of them)."""

    driver: str
    parameters: Any
    requests: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------- ResourceClaim


@dataclass(frozen=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"  # Exists | Equal
    value: str = ""
    effect: str = ""  # empty: all effects
    toleration_seconds: int | None = None


@dataclass(frozen=True)
class DeviceSubRequest:
    """An ``exactly`` request or one ``firstAvailable`` entry (then ``admin_access`` is None)."""

    name: str  # the request's name, or the subrequest's own name
    device_class_name: str
    selectors: tuple[str, ...] = ()  # CEL expressions
    allocation_mode: str = ALLOCATION_MODE_EXACT_COUNT
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity_requests: Mapping[str, Fraction] = field(default_factory=dict)  # capacity.requests, names as written


@dataclass(frozen=True)
class DeviceRequest:
    name: str
    exactly: DeviceSubRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


@dataclass(frozen=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()  # empty: all requests of the claim
    match_attribute: str | None = None  # fully qualified
    distinct_attribute: str | None = None  # fully qualified


@dataclass(frozen=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()


@dataclass(frozen=True)
class DeviceRequestAllocationResult:
    request: str  # "<request>" or "<request>/<subrequest>"
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    share_id: str | None = None
    consumed_capacity: Mapping[str, Fraction] = field(default_factory=dict)

    @property
    def device_id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)


@dataclass(frozen=True)
class AllocatedConfig:
    """status.allocation.devices.config[]: where it came from (FromClass | FromClaim), for which requests."""

    source: str
    config: OpaqueConfig


@dataclass(frozen=True)
class AllocationResult:
    results: tuple[DeviceRequestAllocationResult, ...] = ()
    config: tuple[AllocatedConfig, ...] = ()
    # Where the allocated devices are reachable: None for network-attached devices on every node; for node-local
    # devices kube-scheduler writes one term matching ``metadata.name`` of the node (matchFields).
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    node_name: str | None = None  # the node the node selector names, when it names one (for reading back)
    allocation_timestamp: str = ""


@dataclass(frozen=True)
class ResourceClaimConsumerReference:
    resource: str  # "pods" (or "podgroups")
    name: str
    uid: str
    api_group: str = ""


@dataclass
class ResourceClaim:
    namespace: str
    name: str
    spec: ClaimSpec
    uid: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    owner_pod_uid: str = ""  # the controller ownerReference when it is a Pod (a claim made from a template)
    owner_pod_name: str = ""
    finalizers: tuple[str, ...] = ()
    deleting: bool = False  # metadata.deletionTimestamp set
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = field(default_factory=list)
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec
    labels: dict[str, str] = field(default_factory=dict)  # spec.metadata: copied onto each claim made
    annotations: dict[str, str] = field(default_factory=dict)
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


# ---------------------------------------------------------------------------------------------- a pod's claims


@dataclass(frozen=True)
class PodResourceClaim:
    """pod.spec.resourceClaims[]: a claim by name, or one the resourceclaim controller makes from a template."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


@dataclass
class DRAInputs:
    """Every DRA object of one run, by key: what the loader hands the cluster state (classes and slices are
    cluster-scoped, claims and templates namespaced: ``namespace/name``)."""

    classes: dict[str, DeviceClass] = field(default_factory=dict)
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.classes or self.slices or self.claims or self.templates)
