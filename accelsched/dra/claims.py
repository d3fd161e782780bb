"""A pod's ResourceClaims: ``spec.resourceClaims`` as pod validation checks it, the claim kube-controller-manager's
resourceclaim controller makes from a template, and the claim name kube-scheduler looks up.

Offline there is no controller: the loader makes each pending pod's missing claims from their templates here, before
scheduling, as the controller would have done before the scheduler saw the pod (pkg/controller/resourceclaim,
handleClaim). The name is the controller's ``generateName`` (``<pod>-<pod claim>-``, both parts cut in proportion
past 57 characters) plus the 5 characters the API server would pick at random; offline they come from a hash of the
pod's namespace, name and uid, so a run repeats exactly. The pod's ``status.resourceClaimStatuses`` is what the
scheduler reads the name back from (dynamic-resource-allocation/resourceclaim.Name), so it is written too.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

from accelsched.api import validation as rules
from accelsched.api.object_fields import _list, _mapping, _str
from accelsched.api.objects import Pod, describe
from accelsched.dra.model import (
    API_VERSION,
    POD_CLAIM_NAME_ANNOTATION,
    PodResourceClaim,
    ResourceClaim,
    ResourceClaimTemplate,
)
from accelsched.dra.object_fields import duplicate, invalid, required
from accelsched.errors import Where

# The controller leaves room for a hyphen and 5 random characters in a 63-character name (maxBaseLen).
MAX_BASE_LENGTH = 57
# The API server's generateName: the base cut to 63 - 5 characters, then 5 of utilrand's alphanumerics.
MAX_GENERATED_BASE_LENGTH = 58
SUFFIX_LENGTH = 5
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3


def _where(pod: Pod) -> Where:
    return Where(pod.source, describe("Pod", pod.namespace, pod.name))


def pod_resource_claims(pod: Pod) -> tuple[PodResourceClaim, ...]:
    """spec.resourceClaims, validated as validatePodResourceClaims and validateResourceClaimNames do (each
    container's ``resources.claims`` must name one of them). Read once per pod; a pod without claims costs two
    dict lookups and a loop over its containers."""
    cached = pod.resource_claims_memo
    if cached is not None:
        return cached
    raw_spec = pod.raw.get("spec")
    if type(raw_spec) is dict and _without_claims(raw_spec):
        pod.resource_claims_memo = ()
        return ()
    where = _where(pod)
    spec = _mapping(where, pod.raw.get("spec"), "spec")
    claims = []
    names: set[str] = set()
    for i, item in enumerate(_list(where, spec.get("resourceClaims"), "spec.resourceClaims")):
        p = f"spec.resourceClaims[{i}]"
        item = _mapping(where, item, p)
        name = _str(where, item.get("name"), f"{p}.name")
        if not name:
            raise where.error(f"{p}.name", required())
        if name in names:
            raise where.error(f"{p}.name", duplicate(name))
        problem = rules.dns1123_label_problem(name)
        if problem:
            raise where.error(f"{p}.name", invalid(name, problem))
        names.add(name)
        claim_name = item.get("resourceClaimName")
        template_name = item.get("resourceClaimTemplateName")
        shown: dict[str, str] = {}
        for key, value in (("resourceClaimName", claim_name), ("resourceClaimTemplateName", template_name)):
            if value is not None:
                shown[key] = _str(where, value, f"{p}.{key}")
        # The API server shows the claim as its internal struct: Go field names, unset ones null.
        go = {"Name": name, "ResourceClaimName": shown.get("resourceClaimName"),
              "ResourceClaimTemplateName": shown.get("resourceClaimTemplateName")}  # fmt: skip
        if claim_name is not None and template_name is not None:
            raise where.error(
                p, invalid(go, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified")
            )
        if claim_name is None and template_name is None:
            raise where.error(p, invalid(go, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
        for key in ("resourceClaimName", "resourceClaimTemplateName"):
            if key in shown:
                problem = rules.dns1123_subdomain_problem(shown[key])
                if problem:
                    raise where.error(f"{p}.{key}", invalid(shown[key], problem))
        claims.append(PodResourceClaim(name, shown.get("resourceClaimName"), shown.get("resourceClaimTemplateName")))
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(_list(where, spec.get(group), f"spec.{group}")):
            resources = _mapping(where, _mapping(where, container, f"spec.{group}[{i}]").get("resources"), "")
            if resources.get("claims"):
                _container_claims(where, resources["claims"], f"spec.{group}[{i}].resources.claims", names)
    result = tuple(claims)
    pod.resource_claims_memo = result
    return result


def _without_claims(spec: Mapping[str, Any]) -> bool:
    """No spec.resourceClaims and no container naming one (the common pod: a few lookups, nothing built)."""
    if spec.get("resourceClaims"):
        return False
    for group in ("initContainers", "containers", "ephemeralContainers"):
        items = spec.get(group)
        if not items:
            continue
        if type(items) is not list:
            return False
        for c in items:
            if type(c) is not dict:
                return False
            resources = c.get("resources")
            if resources and (type(resources) is not dict or resources.get("claims")):
                return False
    return True


def _container_claims(where: Where, value: Any, path: str, pod_claims: set[str]) -> None:
    """validateResourceClaimNames: each entry names a pod claim, optionally one request of it, once."""
    seen: set[str] = set()
    for i, item in enumerate(_list(where, value, path)):
        p = f"{path}[{i}]"
        item = _mapping(where, item, p)
        name = _str(where, item.get("name"), f"{p}.name")
        if not name:
            raise where.error(p, required())
        if name in seen:
            raise where.error(p, duplicate(name))  # all requests of that claim already referenced
        request = _str(where, item.get("request"), f"{p}.request")
        key = name
        if request:
            problem = rules.dns1123_label_problem(request)
            if problem:
                raise where.error(f"{p}.request", invalid(request, problem))
            key = f"{name}/{request}"
        if key in seen:
            raise where.error(p, duplicate(key))
        if not request and any(k.startswith(name + "/") for k in seen):
            raise where.error(p, duplicate(name))
        seen.add(key)
        if name not in pod_claims:
            listed = ", ".join(sorted(pod_claims))
            detail = "must be one of the names in pod.spec.resourceClaims" + (
                f": {listed}" if listed else " which is empty"
            )
            raise where.error(p, f"Not found: {json.dumps(name)}: {detail}")


def _statuses(pod: Pod) -> list[Any]:
    status = pod.raw.get("status")
    return list((status or {}).get("resourceClaimStatuses") or []) if isinstance(status, Mapping) else []


def status_entry(pod: Pod, pod_claim: PodResourceClaim) -> Mapping[str, Any] | None:
    """The pod's status.resourceClaimStatuses entry for ``pod_claim``, or None when the controller made none yet."""
    for entry in _statuses(pod):
        if isinstance(entry, Mapping) and entry.get("name") == pod_claim.name:
            return entry
    return None


def resolved_claim_name(
    pod: Pod, pod_claim: PodResourceClaim, claims: Mapping[str, ResourceClaim] | None = None
) -> str | None:
    """The claim name kube-scheduler looks up (resourceclaim.Name): ``resourceClaimName``, or for a template the
    name the pod's status records; None while the claim is not created (or the status says none is needed).
    ``claims`` is not needed for the lookup (the scheduler reads only the pod); callers may pass theirs."""
    if pod_claim.resource_claim_name is not None:
        return pod_claim.resource_claim_name
    entry = status_entry(pod, pod_claim)
    if entry is None:
        return None
    name = entry.get("resourceClaimName")
    return name if isinstance(name, str) and name else None


def is_for_pod(pod: Pod, claim: ResourceClaim) -> bool:
    """resourceclaim.IsForPod: same namespace, and the pod is the claim's controller (by uid, as IsControlledBy;
    offline pods often have no uid, then by name too)."""
    if claim.namespace != pod.namespace or claim.owner_pod_uid != pod.uid:
        return False
    return bool(pod.uid) or claim.owner_pod_name == pod.name


def generate_name(pod_name: str, pod_claim_name: str) -> str:
    """The controller's generateName for a pod's claim: ``<pod>-<claim>-``, or both cut in proportion (then with
    no trailing hyphen) when that passes 57 characters."""
    base = f"{pod_name}-{pod_claim_name}-"
    if len(base) > MAX_BASE_LENGTH:
        total = len(base)
        base = pod_name[: len(pod_name) * MAX_BASE_LENGTH // total] + "-"
        base += pod_claim_name[: len(pod_claim_name) * MAX_BASE_LENGTH // total]
    return base


def generated_name(pod: Pod, pod_claim: PodResourceClaim, attempt: int = 0) -> str:
    """generateName plus 5 characters from the API server's alphabet, chosen by a hash of the pod (and
    ``attempt``, for the rare name already taken) instead of at random, so runs repeat."""
    base = generate_name(pod.name, pod_claim.name)[:MAX_GENERATED_BASE_LENGTH]
    digest = hashlib.sha256(f"{pod.namespace}/{pod.name}/{pod.uid}/{pod_claim.name}/{attempt}".encode()).digest()
    return base + "".join(SUFFIX_ALPHABET[b % len(SUFFIX_ALPHABET)] for b in digest[:SUFFIX_LENGTH])


def claim_from_template(
    pod: Pod, pod_claim: PodResourceClaim, template: ResourceClaimTemplate, name: str | None = None
) -> ResourceClaim:
    """The ResourceClaim the resourceclaim controller creates for ``pod_claim``: the template's spec, labels and
    annotations (plus resource.kubernetes.io/pod-claim-name), the pod as controller owner, a generated name
    (``name`` overrides it when the caller had to pick another)."""
    name = name or generated_name(pod, pod_claim)
    annotations = {**template.annotations, POD_CLAIM_NAME_ANNOTATION: pod_claim.name}
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"accelsched:{pod.namespace}/{name}:{pod.uid}"))
    metadata: dict[str, Any] = {
        "name": name,
        "generateName": generate_name(pod.name, pod_claim.name),
        "namespace": pod.namespace,
        "uid": uid,
        "annotations": dict(annotations),
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}],
    }
    if template.labels:
        metadata["labels"] = dict(template.labels)
    spec = (template.raw.get("spec") or {}).get("spec") or {}
    raw = {"apiVersion": API_VERSION, "kind": "ResourceClaim", "metadata": metadata, "spec": copy.deepcopy(spec)}
    return ResourceClaim(
        namespace=pod.namespace,
        name=name,
        spec=template.spec,
        uid=uid,
        annotations=annotations,
        owner_pod_uid=pod.uid,
        owner_pod_name=pod.name,
        source=template.source,
        raw=raw,
    )


OwnerIndex = dict[tuple[str, str, str], ResourceClaim]


def owner_index(claims: Mapping[str, ResourceClaim]) -> OwnerIndex:
    """Claims made from templates by (namespace, owner pod uid, pod claim name): findPodResourceClaim's index
    (claimPodOwnerIndex), built once so finding a pod's claims does not scan every claim."""
    index: OwnerIndex = {}
    for claim in claims.values():
        pod_claim = claim.annotations.get(POD_CLAIM_NAME_ANNOTATION)
        if pod_claim is not None and (claim.owner_pod_uid or claim.owner_pod_name):
            index.setdefault((claim.namespace, claim.owner_pod_uid, pod_claim), claim)
    return index


def owned_claim(pod: Pod, pod_claim: PodResourceClaim, index: OwnerIndex) -> ResourceClaim | None:
    """findPodResourceClaim: a claim the controller already made for this pod claim (owned by the pod, with the
    pod-claim-name annotation), e.g. one whose name the pod's status does not record yet."""
    claim = index.get((pod.namespace, pod.uid, pod_claim.name))
    return claim if claim is not None and is_for_pod(pod, claim) else None


def set_claim_status(pod: Pod, pod_claim: PodResourceClaim, claim_name: str) -> None:
    """Record ``claim_name`` in the pod's raw status.resourceClaimStatuses, as the controller's status update."""
    entries = [e for e in _statuses(pod) if not (isinstance(e, Mapping) and e.get("name") == pod_claim.name)]
    entries.append({"name": pod_claim.name, "resourceClaimName": claim_name})
    status = pod.raw.get("status")
    status = dict(status) if isinstance(status, Mapping) else {}
    status["resourceClaimStatuses"] = entries
    pod.raw["status"] = status
