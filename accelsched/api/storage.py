"""The storage objects kube-scheduler's volume plugins read: PersistentVolume, PersistentVolumeClaim, StorageClass,
CSINode, CSIDriver and CSIStorageCapacity, parsed and validated once (errors name file, object and field).

Only the fields the plugins use are kept, with the API server's defaults applied (a StorageClass without
volumeBindingMode is Immediate, a PV without volumeMode is Filesystem). A PV read without ``status`` (a manifest, not
a dump) gets the phase the PV controller would give it at once: Bound with a claimRef, else Available.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelsched.api.object_fields import _int, _list, _mapping, _str, _string_map
from accelsched.api.objects import describe, metadata, parse_label_selector, parse_node_selector_terms, parse_resources
from accelsched.api.selectors import LabelSelector, NodeSelectorTerm, Requirement
from accelsched.api.volumes import MIGRATED_INLINE
from accelsched.errors import Where, quoted

STORAGE = "storage"
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
VOLUME_MODES = ("Filesystem", "Block")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
PV_PHASES = ("Pending", "Available", "Bound", "Released", "Failed")
PVC_PHASES = ("Pending", "Bound", "Lost")
# PersistentVolumeSource: a PV names exactly one (the API server refuses none or several).
PV_SOURCES = (
    "gcePersistentDisk", "awsElasticBlockStore", "hostPath", "glusterfs", "nfs", "rbd", "iscsi", "cinder", "cephfs",
    "fc", "flocker", "flexVolume", "azureFile", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk",
    "portworxVolume", "scaleIO", "local", "storageos", "csi",
)  # fmt: skip
KINDS = ("PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode", "CSIDriver", "CSIStorageCapacity")


def _choice(where: Where, value: str, path: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise where.error(path, f"unsupported value {quoted(value)} (expected one of {', '.join(allowed)})")
    return value


def _modes(where: Where, value: Any, path: str) -> tuple[str, ...]:
    return tuple(
        _choice(where, _str(where, m, f"{path}[{i}]"), f"{path}[{i}]", ACCESS_MODES)
        for i, m in enumerate(_list(where, value, path))
    )


def _storage(where: Where, resources: Mapping[str, Any], path: str) -> int | None:
    amounts = parse_resources(where, resources, path)
    return amounts.get(STORAGE)


def _deleting(meta: Mapping[str, Any]) -> bool:
    return meta.get("deletionTimestamp") is not None


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""


@dataclass
class PersistentVolume:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    capacity: int = 0  # spec.capacity[storage] in bytes
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    storage_class_name: str = ""
    volume_attributes_class: str = ""
    claim_ref: ClaimRef | None = None
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None  # spec.nodeAffinity.required.nodeSelectorTerms
    phase: str = "Available"
    deleting: bool = False
    csi_driver: str = ""  # spec.csi.driver, or the CSI driver an in-tree source migrates to
    csi_handle: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def class_name(self) -> str:
        """GetPersistentVolumeClass: the beta annotation wins over spec.storageClassName."""
        return self.annotations.get(BETA_STORAGE_CLASS_ANNOTATION, self.storage_class_name)

    def bound_to(self, claim: PersistentVolumeClaim) -> bool:
        """IsVolumeBoundToClaim: the claimRef names the claim (and its uid, when the ref has one)."""
        ref = self.claim_ref
        if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
            return False
        return not ref.uid or ref.uid == claim.uid


@dataclass
class PersistentVolumeClaim:
    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    storage_class_name: str | None = None
    request: int | None = None  # spec.resources.requests[storage] in bytes
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    volume_attributes_class: str = ""
    selector: LabelSelector | None = None
    volume_name: str = ""
    phase: str = "Pending"
    deleting: bool = False
    controller_uid: str | None = None  # the uid of its controlling owner (an ephemeral volume's pod)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def class_name(self) -> str:
        """GetPersistentVolumeClaimClass: the beta annotation, else spec.storageClassName, else ''."""
        return self.annotations.get(BETA_STORAGE_CLASS_ANNOTATION, self.storage_class_name or "")

    @property
    def fully_bound(self) -> bool:
        """isPVCFullyBound: spec.volumeName set and the PV controller's bind-completed annotation present."""
        return bool(self.volume_name) and ANN_BIND_COMPLETED in self.annotations

    @property
    def read_write_once_pod(self) -> bool:
        return READ_WRITE_ONCE_POD in self.access_modes


@dataclass(frozen=True)
class StorageClass:
    name: str
    provisioner: str
    volume_binding_mode: str = "Immediate"
    # allowedTopologies as node selector terms (each matchLabelExpressions entry is ``key In values``).
    allowed_topologies: tuple[NodeSelectorTerm, ...] = ()

    @property
    def wait_for_first_consumer(self) -> bool:
        return self.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER


@dataclass(frozen=True)
class CSINode:
    name: str
    limits: tuple[tuple[str, int], ...] = ()  # (driver, allocatable.count) for drivers that report one
    drivers: tuple[str, ...] = ()
    migrated_plugins: tuple[str, ...] = ()


@dataclass(frozen=True)
class CSIDriver:
    name: str
    storage_capacity: bool = False


@dataclass(frozen=True)
class CSIStorageCapacity:
    namespace: str
    name: str
    storage_class_name: str
    node_topology: LabelSelector | None = None
    capacity: int | None = None
    maximum_volume_size: int | None = None

    @property
    def volume_limit(self) -> int | None:
        """volumeLimit: maximumVolumeSize when set, else capacity (None: neither, never sufficient)."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity


@dataclass
class Storage:
    """Every storage object of one input or cache, by the keys the plugins look them up with."""

    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)  # namespace/name
    classes: dict[str, StorageClass] = field(default_factory=dict)
    csi_nodes: dict[str, CSINode] = field(default_factory=dict)
    csi_drivers: dict[str, CSIDriver] = field(default_factory=dict)
    capacities: list[CSIStorageCapacity] = field(default_factory=list)

    def add(self, obj: Any) -> None:
        if isinstance(obj, PersistentVolume):
            self.volumes[obj.name] = obj
        elif isinstance(obj, PersistentVolumeClaim):
            self.claims[obj.key] = obj
        elif isinstance(obj, StorageClass):
            self.classes[obj.name] = obj
        elif isinstance(obj, CSINode):
            self.csi_nodes[obj.name] = obj
        elif isinstance(obj, CSIDriver):
            self.csi_drivers[obj.name] = obj
        elif isinstance(obj, CSIStorageCapacity):
            self.capacities = [c for c in self.capacities if (c.namespace, c.name) != (obj.namespace, obj.name)]
            self.capacities.append(obj)


# ---------------------------------------------------------------------------------------------- parsers


def _csi_source(where: Where, spec: Mapping[str, Any]) -> tuple[str, str]:
    """The PV's CSI driver and volume handle: spec.csi, or the driver an always-migrated in-tree source becomes
    (csi-translation-lib), its handle being the disk's own name."""
    csi = spec.get("csi")
    if csi is not None:
        csi = _mapping(where, csi, "spec.csi")
        driver = _str(where, csi.get("driver"), "spec.csi.driver")
        handle = _str(where, csi.get("volumeHandle"), "spec.csi.volumeHandle")
        if not driver:
            raise where.error("spec.csi.driver", "is required")
        if not handle:
            raise where.error("spec.csi.volumeHandle", "is required")
        return driver, handle
    for kind, (driver, key) in MIGRATED_INLINE.items():
        if spec.get(kind) is not None:
            return driver, _str(where, _mapping(where, spec[kind], f"spec.{kind}").get(key), f"spec.{kind}.{key}")
    return "", ""


def parse_persistent_volume(doc: Mapping[str, Any], source: str = "") -> PersistentVolume:
    where, name, _, meta = metadata(doc, source, "PersistentVolume", namespaced=False)
    spec = _mapping(where, doc.get("spec"), "spec")
    capacity = _storage(where, _mapping(where, spec.get("capacity"), "spec.capacity"), "spec.capacity")
    if capacity is None:
        raise where.error("spec.capacity[storage]", "is required")
    modes = _modes(where, spec.get("accessModes"), "spec.accessModes")
    if not modes:
        raise where.error("spec.accessModes", "is required")
    ref = None
    if spec.get("claimRef") is not None:
        raw_ref = _mapping(where, spec.get("claimRef"), "spec.claimRef")
        ref = ClaimRef(
            _str(where, raw_ref.get("namespace"), "spec.claimRef.namespace"),
            _str(where, raw_ref.get("name"), "spec.claimRef.name"),
            _str(where, raw_ref.get("uid"), "spec.claimRef.uid"),
        )
    affinity = None
    node_affinity = _mapping(where, spec.get("nodeAffinity"), "spec.nodeAffinity")
    if node_affinity.get("required") is not None:
        p = "spec.nodeAffinity.required"
        required = _mapping(where, node_affinity["required"], p)
        affinity = parse_node_selector_terms(where, required.get("nodeSelectorTerms"), f"{p}.nodeSelectorTerms")
        if not affinity:
            raise where.error(f"{p}.nodeSelectorTerms", "must have at least one term")
    status = doc.get("status")
    default_phase = "Bound" if ref is not None else "Available"
    phase = _str(where, _mapping(where, status, "status").get("phase"), "status.phase", default_phase)
    sources = [k for k in PV_SOURCES if spec.get(k) is not None]
    if not sources:
        raise where.error("spec", "must specify a volume type")
    if len(sources) > 1:
        raise where.error(f"spec.{sources[1]}", "may not specify more than 1 volume type")
    if sources[0] == "local" and affinity is None:
        raise where.error("spec.nodeAffinity", "Local volumes require node affinity")
    driver, handle = _csi_source(where, spec)
    return PersistentVolume(
        name=name,
        labels=_string_map(where, meta.get("labels"), "metadata.labels"),
        annotations=_string_map(where, meta.get("annotations"), "metadata.annotations"),
        capacity=capacity,
        access_modes=modes,
        volume_mode=_choice(
            where, _str(where, spec.get("volumeMode"), "spec.volumeMode", "Filesystem"), "spec.volumeMode", VOLUME_MODES
        ),
        storage_class_name=_str(where, spec.get("storageClassName"), "spec.storageClassName"),
        volume_attributes_class=_str(where, spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
        claim_ref=ref,
        node_affinity=affinity,
        phase=_choice(where, phase, "status.phase", PV_PHASES),
        deleting=_deleting(meta),
        csi_driver=driver,
        csi_handle=handle,
        raw=dict(doc),
    )


def parse_persistent_volume_claim(doc: Mapping[str, Any], source: str = "") -> PersistentVolumeClaim:
    where, name, namespace, meta = metadata(doc, source, "PersistentVolumeClaim", namespaced=True)
    spec = _mapping(where, doc.get("spec"), "spec")
    resources = _mapping(where, spec.get("resources"), "spec.resources")
    request = _storage(where, _mapping(where, resources.get("requests"), "spec.resources.requests"),
                       "spec.resources.requests")  # fmt: skip
    modes = _modes(where, spec.get("accessModes"), "spec.accessModes")
    if not modes:
        raise where.error("spec.accessModes", "is required")
    if READ_WRITE_ONCE_POD in modes and len(modes) > 1:
        raise where.error("spec.accessModes", "may not use ReadWriteOncePod with other access modes")
    if request is None and not spec.get("volumeName"):
        raise where.error("spec.resources.requests[storage]", "is required")
    controller: str | None = None
    for i, ref in enumerate(_list(where, meta.get("ownerReferences"), "metadata.ownerReferences")):
        ref = _mapping(where, ref, f"metadata.ownerReferences[{i}]")
        if ref.get("controller") is True:
            controller = _str(where, ref.get("uid"), f"metadata.ownerReferences[{i}].uid")
    status = _mapping(where, doc.get("status"), "status")
    class_name = spec.get("storageClassName")
    return PersistentVolumeClaim(
        namespace=namespace,
        name=name,
        uid=_str(where, meta.get("uid"), "metadata.uid"),
        labels=_string_map(where, meta.get("labels"), "metadata.labels"),
        annotations=_string_map(where, meta.get("annotations"), "metadata.annotations"),
        storage_class_name=None if class_name is None else _str(where, class_name, "spec.storageClassName"),
        request=request,
        access_modes=modes,
        volume_mode=_choice(
            where, _str(where, spec.get("volumeMode"), "spec.volumeMode", "Filesystem"), "spec.volumeMode", VOLUME_MODES
        ),
        volume_attributes_class=_str(where, spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
        selector=parse_label_selector(where, spec.get("selector"), "spec.selector"),
        volume_name=_str(where, spec.get("volumeName"), "spec.volumeName"),
        phase=_choice(where, _str(where, status.get("phase"), "status.phase", "Pending"), "status.phase", PVC_PHASES),
        deleting=_deleting(meta),
        controller_uid=controller,
        raw=dict(doc),
    )


def parse_storage_class(doc: Mapping[str, Any], source: str = "") -> StorageClass:
    where, name, _, _ = metadata(doc, source, "StorageClass", namespaced=False)
    provisioner = _str(where, doc.get("provisioner"), "provisioner")
    if not provisioner:
        raise where.error("provisioner", "is required")
    mode = _choice(
        where, _str(where, doc.get("volumeBindingMode"), "volumeBindingMode", "Immediate"), "volumeBindingMode",
        BINDING_MODES,
    )  # fmt: skip
    terms = []
    for i, term in enumerate(_list(where, doc.get("allowedTopologies"), "allowedTopologies")):
        p = f"allowedTopologies[{i}].matchLabelExpressions"
        reqs = []
        for j, expr in enumerate(_list(where, _mapping(where, term, f"allowedTopologies[{i}]").get(
                "matchLabelExpressions"), p)):  # fmt: skip
            expr = _mapping(where, expr, f"{p}[{j}]")
            key = _str(where, expr.get("key"), f"{p}[{j}].key")
            values = tuple(_str(where, v, f"{p}[{j}].values") for v in _list(where, expr.get("values"), f"{p}[{j}]"))
            if not key:
                raise where.error(f"{p}[{j}].key", "is required")
            if not values:
                raise where.error(f"{p}[{j}].values", "must have at least one value")
            reqs.append(Requirement(key, "In", values))
        terms.append(NodeSelectorTerm(tuple(reqs), ()))
    return StorageClass(name, provisioner, mode, tuple(terms))


def parse_csi_node(doc: Mapping[str, Any], source: str = "") -> CSINode:
    where, name, _, meta = metadata(doc, source, "CSINode", namespaced=False)
    spec = _mapping(where, doc.get("spec"), "spec")
    limits, drivers = [], []
    for i, d in enumerate(_list(where, spec.get("drivers"), "spec.drivers")):
        p = f"spec.drivers[{i}]"
        d = _mapping(where, d, p)
        driver = _str(where, d.get("name"), f"{p}.name")
        if not driver:
            raise where.error(f"{p}.name", "is required")
        drivers.append(driver)
        allocatable = d.get("allocatable")
        if allocatable is not None:
            count = _mapping(where, allocatable, f"{p}.allocatable").get("count")
            if count is not None:
                limits.append((driver, _int(where, count, f"{p}.allocatable.count", minimum=0)))
    annotations = _string_map(where, meta.get("annotations"), "metadata.annotations")
    migrated = tuple(p for p in annotations.get(MIGRATED_PLUGINS_ANNOTATION, "").split(",") if p)
    return CSINode(name, tuple(limits), tuple(drivers), migrated)


def parse_csi_driver(doc: Mapping[str, Any], source: str = "") -> CSIDriver:
    where, name, _, _ = metadata(doc, source, "CSIDriver", namespaced=False)
    spec = _mapping(where, doc.get("spec"), "spec")
    capacity = spec.get("storageCapacity", False)
    if capacity is not None and not isinstance(capacity, bool):
        raise where.error("spec.storageCapacity", f"must be true or false, got {quoted(capacity)}")
    return CSIDriver(name, bool(capacity))


def parse_csi_storage_capacity(doc: Mapping[str, Any], source: str = "") -> CSIStorageCapacity:
    where, name, namespace, _ = metadata(doc, source, "CSIStorageCapacity", namespaced=True)
    class_name = _str(where, doc.get("storageClassName"), "storageClassName")
    if not class_name:
        raise where.error("storageClassName", "is required")
    amounts: dict[str, int | None] = {}
    for key in ("capacity", "maximumVolumeSize"):
        amounts[key] = None
        if doc.get(key) is not None:
            amounts[key] = parse_resources(where, {STORAGE: doc[key]}, key)[STORAGE]
    return CSIStorageCapacity(
        namespace,
        name,
        class_name,
        parse_label_selector(where, doc.get("nodeTopology"), "nodeTopology"),
        amounts["capacity"],
        amounts["maximumVolumeSize"],
    )


PARSERS = {
    "PersistentVolume": parse_persistent_volume,
    "PersistentVolumeClaim": parse_persistent_volume_claim,
    "StorageClass": parse_storage_class,
    "CSINode": parse_csi_node,
    "CSIDriver": parse_csi_driver,
    "CSIStorageCapacity": parse_csi_storage_capacity,
}


def parse(kind: str, doc: Mapping[str, Any], source: str = "") -> Any:
    """One storage object of ``kind`` (one of KINDS)."""
    return PARSERS[kind](doc, source)


def object_name(obj: Any) -> str:
    """``Kind namespace/name`` of a parsed storage object, as errors name it."""
    kind = type(obj).__name__
    return describe(kind, getattr(obj, "namespace", ""), obj.name)
