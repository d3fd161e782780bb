"""A ResourceClaim and a ResourceClaimTemplate (``resource.k8s.io/v1``, v1beta2 and v1beta1) parsed and checked as
validateResourceClaimSpec does: requests and firstAvailable subrequests, constraints, config and a claim's
allocation status. The public entry points are dra/objects.py's parse_resource_claim, parse_resource_claim_template
and parse_claim_spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelsched.api import validation as rules
from accelsched.api.object_fields import _list, _mapping, _str, _string_map
from accelsched.api.objects import metadata
from accelsched.api.selectors import NodeSelectorTerm
from accelsched.dra.model import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    ALLOCATION_RESULTS_MAX,
    DEVICE_REQUESTS_MAX,
    FIRST_AVAILABLE_MAX,
    RESERVED_FOR_MAX,
    AllocatedConfig,
    AllocationResult,
    ClaimSpec,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimTemplate,
)
from accelsched.dra.object_fields import (
    CONFIG_MAX,
    CONFIG_SOURCES,
    CONSTRAINTS_MAX,
    V1BETA1,
    _binding_conditions,
    _bool,
    _check_unique,
    _driver,
    _integer,
    _label,
    _node_selector,
    _opaque,
    _pool_name,
    _quantity,
    _selectors,
    _sized,
    _subdomain,
    _tolerations,
    _uid,
    forbidden,
    fully_qualified_name_problem,
    invalid,
    not_supported,
    required,
    too_many,
)
from accelsched.errors import Where

# ---------------------------------------------------------------------------------------------- claims


class _RequestNames:
    """gatherRequestNames: each request, with its subrequests' names when it has a firstAvailable list."""

    def __init__(self, requests: tuple[DeviceRequest, ...]) -> None:
        self.names = {r.name: {s.name for s in r.first_available} if r.first_available else None for r in requests}

    def has(self, ref: str) -> bool:
        parts = ref.split("/")
        if len(parts) > 2 or parts[0] not in self.names:
            return False
        return len(parts) == 1 or parts[1] in (self.names[parts[0]] or ())


_REF_DETAIL = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"


def _request_refs(where: Where, value: Any, path: str, names: _RequestNames) -> tuple[str, ...]:
    """validateRequestNameRef over a list of references, unique, at most 32."""
    refs = []
    for i, item in enumerate(_sized(where, value, path, DEVICE_REQUESTS_MAX)):
        p = f"{path}[{i}]"
        ref = _str(where, item, p)
        segments = ref.split("/")
        if len(segments) > 2:
            raise where.error(p, invalid(ref, _REF_DETAIL))
        for segment in segments:
            problem = rules.dns1123_label_problem(segment)
            if problem:
                raise where.error(p, invalid(segment, problem))
        if not names.has(ref):
            raise where.error(p, invalid(ref, _REF_DETAIL))
        refs.append(ref)
    _check_unique(where, refs, path)
    return tuple(refs)


def parse_claim_spec(where: Where, value: Any, path: str, beta1: bool = False) -> ClaimSpec:
    """A ResourceClaimSpec at ``path`` (``spec`` of a claim, ``spec.spec`` of a template): validateDeviceClaim."""
    spec = _mapping(where, value, path)
    dp = f"{path}.devices"
    devices = _mapping(where, spec.get("devices"), dp)
    rp = f"{dp}.requests"
    requests = tuple(
        _request(where, _mapping(where, r, f"{rp}[{i}]"), f"{rp}[{i}]", beta1)
        for i, r in enumerate(_sized(where, devices.get("requests"), rp, DEVICE_REQUESTS_MAX))
    )
    _check_unique(where, [r.name for r in requests], rp)
    names = _RequestNames(requests)
    constraints = []
    cp = f"{dp}.constraints"
    for i, item in enumerate(_sized(where, devices.get("constraints"), cp, CONSTRAINTS_MAX)):
        p = f"{cp}[{i}]"
        item = _mapping(where, item, p)
        refs = _request_refs(where, item.get("requests"), f"{p}.requests", names)
        match = distinct = None
        if item.get("matchAttribute") is not None:
            match = _fully_qualified(where, item["matchAttribute"], f"{p}.matchAttribute")
        elif item.get("distinctAttribute") is not None:
            distinct = _fully_qualified(where, item["distinctAttribute"], f"{p}.distinctAttribute")
        else:
            # DRAConsumableCapacity is on (beta) in 1.36; the message is upstream's, "multiple" and all.
            raise where.error(
                p,
                required(
                    'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set'
                ),
            )
        constraints.append(DeviceConstraint(refs, match, distinct))
    config = []
    fp = f"{dp}.config"
    for i, item in enumerate(_sized(where, devices.get("config"), fp, CONFIG_MAX)):
        p = f"{fp}[{i}]"
        item = _mapping(where, item, p)
        refs = _request_refs(where, item.get("requests"), f"{p}.requests", names)
        config.append(_opaque(where, item.get("opaque"), p, refs))
    return ClaimSpec(requests, tuple(constraints), tuple(config))


def _fully_qualified(where: Where, value: Any, path: str) -> str:
    name = _str(where, value, path)
    problem = fully_qualified_name_problem(name)
    if problem:
        raise where.error(path, problem)
    return name


_EXACT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity")


def _request(where: Where, req: Mapping[str, Any], path: str, beta1: bool) -> DeviceRequest:
    """validateDeviceRequest: a DNS-label name and exactly one of ``exactly`` and ``firstAvailable``."""
    name = _label(where, req.get("name"), f"{path}.name")
    exactly = req.get("exactly")
    exact_path = f"{path}.exactly"
    if beta1 and exactly is None and not req.get("firstAvailable"):
        exactly = {k: req[k] for k in _EXACT_FIELDS if k in req}  # v1beta1: flattened fields
    first = _list(where, req.get("firstAvailable"), f"{path}.firstAvailable")
    one_of = "exactly one of `exactly` or `firstAvailable` is required"
    if exactly is None and not first:
        raise where.error(path, required(one_of))
    if exactly is not None and first:
        raise where.error(path, invalid(None, one_of + ", but multiple fields are set"))
    if exactly is not None:
        sub = _subrequest(where, _mapping(where, exactly, exact_path), exact_path, name, admin=True)
        return DeviceRequest(name, exactly=sub)
    fp = f"{path}.firstAvailable"
    if len(first) > FIRST_AVAILABLE_MAX:
        raise where.error(fp, too_many(len(first), FIRST_AVAILABLE_MAX))
    subs = []
    for i, item in enumerate(first):
        p = f"{fp}[{i}]"
        item = _mapping(where, item, p)
        subs.append(_subrequest(where, item, p, _label(where, item.get("name"), f"{p}.name"), admin=False))
    _check_unique(where, [s.name for s in subs], fp)
    return DeviceRequest(name, first_available=tuple(subs))


def _subrequest(where: Where, req: Mapping[str, Any], path: str, name: str, admin: bool) -> DeviceSubRequest:
    """validateExactDeviceRequest / validateDeviceSubRequest, after SetDefaults (ExactCount, count 1)."""
    class_name = _subdomain(where, req.get("deviceClassName"), f"{path}.deviceClassName")
    selectors = _selectors(where, req.get("selectors"), f"{path}.selectors")
    mode = _str(where, req.get("allocationMode"), f"{path}.allocationMode") or ALLOCATION_MODE_EXACT_COUNT
    count = _integer(where, req.get("count"), f"{path}.count") or 0
    if mode == ALLOCATION_MODE_EXACT_COUNT:
        count = count or 1
        if count <= 0:
            raise where.error(f"{path}.count", invalid(count, "must be greater than zero"))
    elif mode == ALLOCATION_MODE_ALL:
        if count != 0:
            raise where.error(f"{path}.count", invalid(count, f"must not be specified when allocationMode is '{mode}'"))
    else:
        raise where.error(
            f"{path}.allocationMode", not_supported(mode, (ALLOCATION_MODE_ALL, ALLOCATION_MODE_EXACT_COUNT))
        )
    tolerations = _tolerations(where, req.get("tolerations"), f"{path}.tolerations")
    cp = f"{path}.capacity.requests"
    capacity_doc = _mapping(where, req.get("capacity"), f"{path}.capacity")
    capacity = {
        str(k): _quantity(where, v, f"{cp}[{k}]") for k, v in _mapping(where, capacity_doc.get("requests"), cp).items()
    }
    return DeviceSubRequest(
        name=name,
        device_class_name=class_name,
        selectors=selectors,
        allocation_mode=mode,
        count=count,
        admin_access=_bool(where, req.get("adminAccess"), f"{path}.adminAccess") if admin else None,
        tolerations=tolerations,
        capacity_requests=capacity,
    )


def parse_resource_claim(doc: Mapping[str, Any], source: str = "") -> ResourceClaim:
    """A ResourceClaim: its spec (ValidateResourceClaim) and, from a cluster dump, its allocation and reservations
    (validateResourceClaimStatusUpdate's rules for a new allocation)."""
    where, name, namespace, meta = metadata(doc, source, "ResourceClaim", namespaced=True)
    beta1 = doc.get("apiVersion") == V1BETA1
    spec = parse_claim_spec(where, doc.get("spec"), "spec", beta1)
    status = _mapping(where, doc.get("status"), "status")
    reserved = []
    rp = "status.reservedFor"
    for i, item in enumerate(_sized(where, status.get("reservedFor"), rp, RESERVED_FOR_MAX)):
        p = f"{rp}[{i}]"
        item = _mapping(where, item, p)
        fields = {k: _str(where, item.get(k), f"{p}.{k}") for k in ("apiGroup", "resource", "name", "uid")}
        for k in ("resource", "name", "uid"):
            if not fields[k]:
                raise where.error(f"{p}.{k}", required())
        reserved.append(
            ResourceClaimConsumerReference(fields["resource"], fields["name"], fields["uid"], fields["apiGroup"])
        )
    _check_unique(where, [r.uid for r in reserved], rp)
    allocation = None
    if status.get("allocation") is not None:
        allocation = _allocation(where, status["allocation"], "status.allocation", _RequestNames(spec.requests))
    elif reserved:
        raise where.error(rp, forbidden("may not be specified when `allocated` is not set"))
    owner_uid = owner_name = ""
    for i, ref in enumerate(_list(where, meta.get("ownerReferences"), "metadata.ownerReferences")):
        ref = _mapping(where, ref, f"metadata.ownerReferences[{i}]")
        if ref.get("controller") is True and ref.get("kind") == "Pod":
            owner_uid = _str(where, ref.get("uid"), f"metadata.ownerReferences[{i}].uid")
            owner_name = _str(where, ref.get("name"), f"metadata.ownerReferences[{i}].name")
    return ResourceClaim(
        namespace=namespace,
        name=name,
        spec=spec,
        uid=_str(where, meta.get("uid"), "metadata.uid"),
        annotations=_string_map(where, meta.get("annotations"), "metadata.annotations"),
        owner_pod_uid=owner_uid,
        owner_pod_name=owner_name,
        finalizers=tuple(
            _str(where, f, "metadata.finalizers") for f in _list(where, meta.get("finalizers"), "metadata.finalizers")
        ),
        deleting=meta.get("deletionTimestamp") is not None,
        allocation=allocation,
        reserved_for=reserved,
        source=source,
        raw=dict(doc),
    )


def _allocation(where: Where, value: Any, path: str, names: _RequestNames) -> AllocationResult:
    allocation = _mapping(where, value, path)
    dp = f"{path}.devices"
    devices = _mapping(where, allocation.get("devices"), dp)
    results = []
    for i, item in enumerate(_sized(where, devices.get("results"), f"{dp}.results", ALLOCATION_RESULTS_MAX)):
        p = f"{dp}.results[{i}]"
        item = _mapping(where, item, p)
        request = _str(where, item.get("request"), f"{p}.request")
        _request_refs(where, [request], f"{p}.request", names)  # one reference, checked as in a list
        share_id = item.get("shareID")
        consumed_path = f"{p}.consumedCapacity"
        conditions, failures = _binding_conditions(where, item, p)
        results.append(
            DeviceRequestAllocationResult(
                request=request,
                driver=_driver(where, item.get("driver"), f"{p}.driver"),
                pool=_pool_name(where, item.get("pool"), f"{p}.pool"),
                device=_label(where, item.get("device"), f"{p}.device"),
                admin_access=_bool(where, item.get("adminAccess"), f"{p}.adminAccess"),
                tolerations=_tolerations(where, item.get("tolerations"), f"{p}.tolerations"),
                binding_conditions=conditions,
                binding_failure_conditions=failures,
                share_id=None if share_id is None else _uid(where, share_id, f"{p}.shareID"),
                consumed_capacity={
                    str(k): _quantity(where, v, f"{consumed_path}[{k}]")
                    for k, v in _mapping(where, item.get("consumedCapacity"), consumed_path).items()
                },
            )
        )
    configs = []
    cp = f"{dp}.config"
    for i, item in enumerate(_sized(where, devices.get("config"), cp, 2 * CONFIG_MAX)):
        p = f"{cp}[{i}]"
        item = _mapping(where, item, p)
        source = _str(where, item.get("source"), f"{p}.source")
        if not source:
            raise where.error(f"{p}.source", required())
        if source not in CONFIG_SOURCES:
            raise where.error(f"{p}.source", not_supported(source, CONFIG_SOURCES))
        refs = _request_refs(where, item.get("requests"), f"{p}.requests", names)
        configs.append(AllocatedConfig(source, _opaque(where, item.get("opaque"), p, refs)))
    node_selector = node_name = None
    if allocation.get("nodeSelector") is not None:
        node_selector = _node_selector(where, allocation["nodeSelector"], f"{path}.nodeSelector")
        node_name = _selected_node(node_selector)
    return AllocationResult(
        results=tuple(results),
        config=tuple(configs),
        node_selector=node_selector,
        node_name=node_name,
        allocation_timestamp=_str(where, allocation.get("allocationTimestamp"), f"{path}.allocationTimestamp"),
    )


def _selected_node(terms: tuple[NodeSelectorTerm, ...]) -> str | None:
    """The node a node-local allocation names: one term, one ``metadata.name In [node]`` field requirement."""
    if len(terms) != 1 or terms[0].match_expressions or len(terms[0].match_fields) != 1:
        return None
    req = terms[0].match_fields[0]
    if req.key == "metadata.name" and req.operator == "In" and len(req.values) == 1:
        return req.values[0]
    return None


def parse_resource_claim_template(doc: Mapping[str, Any], source: str = "") -> ResourceClaimTemplate:
    """A ResourceClaimTemplate: the claim spec at ``spec.spec`` and the metadata each claim made from it gets."""
    where, name, namespace, _ = metadata(doc, source, "ResourceClaimTemplate", namespaced=True)
    spec = _mapping(where, doc.get("spec"), "spec")
    if spec.get("spec") is None:
        raise where.error("spec.spec", required())
    claim_spec = parse_claim_spec(where, spec["spec"], "spec.spec", doc.get("apiVersion") == V1BETA1)
    template_meta = _mapping(where, spec.get("metadata"), "spec.metadata")
    return ResourceClaimTemplate(
        namespace=namespace,
        name=name,
        spec=claim_spec,
        labels=_string_map(where, template_meta.get("labels"), "spec.metadata.labels"),
        annotations=_string_map(where, template_meta.get("annotations"), "spec.metadata.annotations"),
        source=source,
        raw=dict(doc),
    )
