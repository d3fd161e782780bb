"""Extended resources backed by DRA (DRAExtendedResource, beta and on in 1.36): a plain container request such as
``example.com/gpu: 1`` that a DeviceClass names in ``spec.extendedResourceName`` (or the implicit
``deviceclass.resource.kubernetes.io/<class>``) is served by DRA devices of that class on every node that does not
advertise the resource in its allocatable (no device plugin there).

This module holds what kube-scheduler's extendeddynamicresources.go computes, as plain functions over our model:
which of a pod's requests a class backs, on which nodes DRA serves them (and where the pod cannot fit at all), the
special in-memory claim ``<extended-resources>`` with one request ``container-<i>-request-<j>`` per container
(createRequestsAndMappings, init containers included), and the ResourceClaim PreBind creates from it. The plugins
(noderesources.py, dynamicresources.py) call these; ``DRAState`` keeps the created claims.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import Pod
from accelsched.dra.model import (
    ALLOCATION_MODE_EXACT_COUNT,
    API_VERSION,
    IMPLICIT_EXTENDED_RESOURCE_PREFIX,
    ClaimSpec,
    DeviceClass,
    DeviceID,
    DeviceRequest,
    DeviceSubRequest,
    ResourceClaim,
)

if TYPE_CHECKING:
    from accelsched.cluster.state import ClusterState

# specialClaimInMemName: deliberately not a valid object name, so it never clashes with a real claim.
SPECIAL_CLAIM_NAME = "<extended-resources>"
# resourceapi.ExtendedResourceClaimAnnotation: marks the claim kube-scheduler created for a pod's extended resources.
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# Filter's statusUnschedulable texts (extendeddynamicresources.go, filterExtendedResources).
CANNOT_SCHEDULE = "cannot schedule extended resource claim"  # a claim left from an earlier cycle
CANNOT_FIT = "cannot fit resource"  # a request neither the node's allocatable nor any class serves
# The API server's generateName: the base cut to 63 - 5 characters, then 5 random ones (names.SimpleNameGenerator).
MAX_GENERATED_BASE_LENGTH = 58
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
SUFFIX_LENGTH = 5

# Per node, which way an extended resource of the pod is served (node_groups).
NO_DRA = 0  # every mapped resource comes from the device plugin: nothing for DRA to allocate


def is_dra_extended_resource_name(name: str) -> bool:
    """schedutil.IsDRAExtendedResourceName: an extended resource name, or the implicit class form."""
    return quantity.is_extended(name) or name.startswith(IMPLICIT_EXTENDED_RESOURCE_PREFIX)


def mapped_resources(pod: Pod, extended: Mapping[str, DeviceClass]) -> tuple[str, ...]:
    """The pod's non-zero requests that a DeviceClass backs (hasDeviceClassMappedExtendedResource), sorted."""
    if not extended:
        return ()
    return tuple(sorted(r for r, v in pod.requests.items() if v and r in extended and is_dra_extended_resource_name(r)))


def pod_uid(pod: Pod) -> str:
    """The pod's metadata.uid. The API server always assigns one; offline inputs often leave it out, so such a pod
    gets a UUID derived from its namespace and name (stable across runs) wherever DRA must write it."""
    return pod.uid or str(uuid.uuid5(uuid.NAMESPACE_URL, f"accelsched:pod:{pod.namespace}/{pod.name}"))


def owned_by(pod: Pod, claim: ResourceClaim) -> bool:
    """The pod is the claim's controller: by uid; a pod without one (offline) also by name."""
    if claim.namespace != pod.namespace or claim.owner_pod_name != pod.name:
        return False
    return claim.owner_pod_uid == pod_uid(pod) or (not pod.uid and not claim.owner_pod_uid)


def is_extended_claim(claim: ResourceClaim) -> bool:
    return claim.annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"


# ---------------------------------------------------------------------------------------------- which nodes


@dataclass
class NodeGroups:
    """Per node (index), how the pod's mapped resources are served: ``code[i]`` is a bit set over ``resources``
    (bit k: resources[k] comes from DRA there; NO_DRA: all from the device plugin), or -1 where the pod requests an
    extended resource that neither the node advertises nor a class backs (``cannot fit resource``)."""

    resources: tuple[str, ...]
    code: np.ndarray

    def delegated(self, code: int) -> tuple[str, ...]:
        return tuple(r for k, r in enumerate(self.resources) if code >> k & 1)


def node_groups(pod: Pod, cluster: ClusterState, extended: Mapping[str, DeviceClass]) -> NodeGroups:
    """filterExtendedResources' per-node decision for every node at once, memoized per request shape: a backed
    resource the node's allocatable holds 0 of (or lacks) goes to DRA; an extended resource that is not backed and
    that the node does not list at all makes the pod not fit there."""
    mapped = mapped_resources(pod, extended)

    def build() -> NodeGroups:
        code = np.zeros(cluster.n, dtype=np.int64)
        unfit = np.zeros(cluster.n, dtype=bool)
        for res in sorted(r for r, v in pod.requests.items() if v and is_dra_extended_resource_name(r)):
            row = cluster.column(res)
            alloc = cluster.allocatable[row] if row is not None else np.zeros(cluster.n, dtype=np.int64)
            if res in mapped:
                code |= np.where(alloc == 0, 1 << mapped.index(res), 0)
            else:
                listed = np.fromiter((res in n.allocatable for n in cluster.nodes), dtype=bool, count=cluster.n)
                unfit |= ~listed
        code[unfit] = -1
        return NodeGroups(mapped, code)

    return cluster.memoized(("dra-extended", id(extended), cluster.epoch, pod.shape), build)


def device_totals(dra: Any, cls: DeviceClass, node: int) -> tuple[int, int]:
    """calculateDRAResourceTotals, for scoring an extended resource DRA serves (NodeResourcesFit's and
    NodeResourcesBalancedAllocation's allocatable and requested where the node's allocatable has none): the devices
    of every slice the node can see that match the class's selectors, and how many of them are allocated. A CEL
    error leaves the resource out of the node's score, as upstream (0, 0)."""
    from accelsched.dra.allocated import device_key
    from accelsched.dra.cel import CELError, compile_selector

    cluster = dra.cluster
    node_name = cluster.nodes[node].name

    def reaches(where: Any) -> bool:  # a slice or, with per-device node selection, a device
        if where.all_nodes or where.node_name == node_name:
            return True
        return where.node_selector is not None and any(bool(cluster.term_mask(t)[node]) for t in where.node_selector)

    selectors = [compile_selector(e) for e in cls.selectors]
    capacity = allocated = 0
    for s in dra.slices.values():
        if s.per_device_node_selection:
            devices = [d for d in s.devices if reaches(d)]
        elif reaches(s):
            devices = list(s.devices)
        else:
            continue
        for d in devices:
            try:
                if not all(sel.matches(d, s.driver) for sel in selectors):
                    continue
            except CELError:
                return 0, 0
            capacity += 1
            if dra.allocated.key_allocated(device_key(DeviceID(s.driver, s.pool.name, d.name))):
                allocated += 1
    return capacity, allocated


# ---------------------------------------------------------------------------------------------- the claim


def special_claim(pod: Pod) -> ResourceClaim:
    """preFilterExtendedResources' in-memory claim: no requests yet, the pod as controller owner, the
    annotation, generateName ``<pod>-extended-resources-`` and a temporary uid (upstream a random one; here derived
    from the pod so runs repeat)."""
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"accelsched:extended-resources:{pod.namespace}/{pod.name}"))
    owner = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod_uid(pod), "controller": True}
    annotations = {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
    raw = {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": pod.namespace,
            "generateName": f"{pod.name}-extended-resources-",
            "annotations": dict(annotations),
            "ownerReferences": [owner],
        },
        "spec": {},
    }
    return ResourceClaim(
        namespace=pod.namespace,
        name=SPECIAL_CLAIM_NAME,
        spec=ClaimSpec(),
        uid=uid,
        annotations=annotations,
        owner_pod_uid=pod_uid(pod),
        owner_pod_name=pod.name,
        raw=raw,
    )


def node_claim(claim: ResourceClaim, requests: tuple[DeviceRequest, ...]) -> ResourceClaim:
    """The special claim with the requests one group of nodes needs (Filter's nodeExtendedResourceClaim)."""
    raw = dict(claim.raw)
    raw["spec"] = {"devices": {"requests": [_request_dict(r) for r in requests]}} if requests else {}
    return ResourceClaim(
        namespace=claim.namespace,
        name=claim.name,
        spec=ClaimSpec(requests=requests),
        uid=claim.uid,
        annotations=dict(claim.annotations),
        owner_pod_uid=claim.owner_pod_uid,
        owner_pod_name=claim.owner_pod_name,
        raw=raw,
    )


def _request_dict(request: DeviceRequest) -> dict[str, Any]:
    exactly = request.exactly
    assert exactly is not None
    return {
        "name": request.name,
        "exactly": {
            "deviceClassName": exactly.device_class_name,
            "allocationMode": exactly.allocation_mode,
            "count": exactly.count,
        },
    }


def created_claim(claim: ResourceClaim, taken: Mapping[str, Any]) -> ResourceClaim:
    """createExtendedResourceClaimInAPI: the node's claim as the API server stores it, named from generateName
    (the suffix from a hash of the claim's temporary uid instead of at random, so runs repeat, with another
    attempt while the name is taken in ``taken``) and given its own uid."""
    base = str(claim.raw["metadata"]["generateName"])[:MAX_GENERATED_BASE_LENGTH]
    attempt = 0
    while True:
        digest = hashlib.sha256(f"{claim.namespace}/{base}/{claim.uid}/{attempt}".encode()).digest()
        name = base + "".join(SUFFIX_ALPHABET[b % len(SUFFIX_ALPHABET)] for b in digest[:SUFFIX_LENGTH])
        if f"{claim.namespace}/{name}" not in taken:
            break
        attempt += 1
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"accelsched:{claim.namespace}/{name}:{claim.uid}"))
    raw = dict(claim.raw)
    raw["metadata"] = {**claim.raw["metadata"], "name": name, "uid": uid}
    return ResourceClaim(
        namespace=claim.namespace,
        name=name,
        spec=claim.spec,
        uid=uid,
        annotations=dict(claim.annotations),
        owner_pod_uid=claim.owner_pod_uid,
        owner_pod_name=claim.owner_pod_name,
        raw=raw,
    )


# ---------------------------------------------------------------------------------------------- requests


def _containers(pod: Pod) -> tuple[list[dict[str, Any]], int]:
    spec = pod.raw.get("spec") or {}
    init = [c for c in spec.get("initContainers") or [] if isinstance(c, dict)]
    app = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    return init + app, len(init)


def _container_requests(container: Mapping[str, Any]) -> dict[str, Any]:
    """resources.requests after API defaulting: a resource with only a limit requests the limit."""
    res = container.get("resources") or {}
    return {**(res.get("limits") or {}), **(res.get("requests") or {})}


def _whole(value: Any) -> int | None:
    """Quantity.AsInt64: the amount when it is a whole number (None otherwise, as ``ok`` false). Pods repeat the
    same few texts ("1", "2"): each is parsed once."""
    if type(value) is str or type(value) is int:
        return _whole_text(value)
    return _parse_whole(value)


@functools.lru_cache(maxsize=4096)
def _whole_text(value: str | int) -> int | None:
    return _parse_whole(value)


def _parse_whole(value: Any) -> int | None:
    try:
        amount = quantity.parse_fraction(value)
    except (ValueError, TypeError):
        return None
    return int(amount) if amount.denominator == 1 else None


def _container_request(
    index: int, container: Mapping[str, Any], resource: str, class_name: str, reusable: list[DeviceRequest | None]
) -> tuple[DeviceRequest | None, list[dict[str, str]]]:
    """createResourceRequestAndMappings: this container's request for ``resource`` (None when it needs no own one:
    it asks for none, or the requests in ``reusable`` already cover it) and its request mappings."""
    requests = _container_requests(container)
    if resource not in requests:
        return None, []
    wanted = _whole(requests[resource])
    if not wanted:
        return None, []
    name = str(container.get("name", ""))
    mappings: list[dict[str, str]] = []
    total = 0
    for r in reusable:
        if r is None:
            continue
        assert r.exactly is not None
        total += r.exactly.count
        mappings.append({"containerName": name, "resourceName": resource, "requestName": r.name})
        if total >= wanted:
            return None, mappings
    # The request's index: the resource's place among the container's request names, sorted.
    request_name = f"container-{index}-request-{sorted(requests).index(resource)}"
    sub = DeviceSubRequest(request_name, class_name, allocation_mode=ALLOCATION_MODE_EXACT_COUNT, count=wanted - total)
    mappings.append({"containerName": name, "resourceName": resource, "requestName": request_name})
    return DeviceRequest(request_name, exactly=sub), mappings


def requests_and_mappings(
    pod: Pod, resources: tuple[str, ...], extended: Mapping[str, DeviceClass]
) -> tuple[tuple[DeviceRequest, ...], list[dict[str, str]]]:
    """createRequestsAndMappings: per resource served by DRA, one request per long-lived container (app containers
    and sidecars) and one for the largest of the regular init containers, which reuse the requests of the
    long-lived containers after them first; requests sorted by name, mappings per resource (long-lived first)."""
    containers, n_init = _containers(pod)
    long_lived = [i for i, c in enumerate(containers) if i >= n_init or c.get("restartPolicy") == "Always"]
    short_lived = [i for i in range(n_init) if containers[i].get("restartPolicy") != "Always"]
    requests: list[DeviceRequest] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(resources):
        cls = extended.get(resource)
        if cls is None:
            continue
        long_requests: list[DeviceRequest | None] = [None] * len(containers)
        long_mappings: list[dict[str, str]] = []
        for i in long_lived:
            request, found = _container_request(i, containers[i], resource, cls.name, [])
            long_requests[i] = request
            long_mappings += found
        biggest: DeviceRequest | None = None
        short_names: set[str] = set()
        short_mappings: list[dict[str, str]] = []
        for i in short_lived:
            request, found = _container_request(i, containers[i], resource, cls.name, long_requests[i:])
            if request is not None:
                short_names.add(request.name)
                assert request.exactly is not None
                if biggest is None or biggest.exactly.count < request.exactly.count:  # type: ignore[union-attr]
                    biggest = request
            short_mappings += found
        if biggest is not None and len(short_names) > 1:
            short_names.discard(biggest.name)
            short_mappings = [
                {**m, "requestName": biggest.name} if m["requestName"] in short_names else m for m in short_mappings
            ]
        if biggest is not None:
            requests.append(biggest)
        requests += [r for r in long_requests if r is not None]
        mappings += long_mappings + short_mappings
    requests.sort(key=lambda r: r.name)
    return tuple(requests), mappings


def claim_status(claim_name: str, mappings: Any) -> dict[str, Any]:
    """A pod's status.extendedResourceClaimStatus (PodExtendedResourceClaimStatus): its claim and which container
    request each device request serves."""
    return {"requestMappings": [dict(m) for m in mappings], "resourceClaimName": claim_name}


def empty_mappings_error(pod: Pod) -> str:
    """patchPodExtendedResourceClaimStatus' error when the node's claim maps no container request."""
    return f"nil or empty request mappings, no update of pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus"


__all__ = [
    "CANNOT_FIT",
    "CANNOT_SCHEDULE",
    "EXTENDED_RESOURCE_CLAIM_ANNOTATION",
    "SPECIAL_CLAIM_NAME",
    "NodeGroups",
    "claim_status",
    "created_claim",
    "is_dra_extended_resource_name",
    "mapped_resources",
    "node_claim",
    "node_groups",
    "pod_uid",
    "requests_and_mappings",
    "special_claim",
]
