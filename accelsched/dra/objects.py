"""DeviceClass, ResourceSlice, ResourceClaim and ResourceClaimTemplate (``resource.k8s.io/v1``), parsed into the
typed values of dra/model.py and checked as kube-apiserver 1.36 checks them on create.

The schema (api/schema.json.gz, through api/validation.py) already refused unknown fields and wrong JSON types; what
is checked here are the rules of pkg/apis/resource/validation/validation.go: one-of fields, name formats, list and map
limits, quantities, CEL selectors that do not compile, and the 1.35+ rule that a slice holds devices or shared
counters, not both. API defaulting is applied first, as the API server does (allocationMode ExactCount with count 1,
toleration operator Equal). Each error is the API server's field error (``Invalid value: "x": ...``, ``Required
value``, ``Too many: 33: must have at most 32 items``) on the first field it would report, as one InputError naming
the file, the object and the field path.

Attribute names are stored fully qualified: an unqualified name takes the slice's driver as its domain. Capacity
names are stored as written, on devices and in claims' capacity requests and consumed capacity alike: the allocator
compares them as written (consumable_capacity.go: a request for ``memory`` matches a device capacity ``memory``, one
for ``gpu.example.com/memory`` does not), and only CEL qualifies them (dra/cel.py's device_value). CEL selectors
are compiled once per distinct expression (dra/cel.py caches them), and a slice's devices are read in one pass, so
thousands of slices cost linear time.

``resource.k8s.io/v1beta2`` reads as v1 (the same shape), and so does ``v1beta1`` once its flattened request fields
and ``basic`` device wrapper are unwrapped; errors name the v1 paths (``exactly.``, no ``basic.``), as the API server
validates the internal version whichever version was sent.

This module is the public face and parses DeviceClasses; the shared field checks are in dra/object_fields.py,
ResourceSlices in dra/slice_objects.py and ResourceClaims and their templates in dra/claim_objects.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelsched.api import validation as rules
from accelsched.api.object_fields import _mapping, _str
from accelsched.api.objects import metadata
from accelsched.dra.claim_objects import (
    parse_claim_spec,
    parse_resource_claim,
    parse_resource_claim_template,
)
from accelsched.dra.model import DeviceClass
from accelsched.dra.object_fields import (
    CONFIG_MAX,
    SHOWN_LIMIT,
    _opaque,
    _selectors,
    _sized,
    invalid,
    qualify,
)
from accelsched.dra.slice_objects import parse_resource_slice
from accelsched.errors import InputError

KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")


# ---------------------------------------------------------------------------------------------- DeviceClass


def parse_device_class(doc: Mapping[str, Any], source: str = "") -> DeviceClass:
    """A DeviceClass (ValidateDeviceClass): selectors that compile, opaque config, an extended resource name."""
    where, name, _, meta = metadata(doc, source, "DeviceClass", namespaced=False)
    spec = _mapping(where, doc.get("spec"), "spec")
    selectors = _selectors(where, spec.get("selectors"), "spec.selectors")
    config = []
    for i, item in enumerate(_sized(where, spec.get("config"), "spec.config", CONFIG_MAX)):
        p = f"spec.config[{i}]"
        config.append(_opaque(where, _mapping(where, item, p).get("opaque"), p))
    extended = spec.get("extendedResourceName")
    if extended is not None:
        extended = _str(where, extended, "spec.extendedResourceName")
        if not _is_extended_resource_name(extended):
            raise where.error("spec.extendedResourceName", invalid(extended, "must be a valid extended resource name"))
    return DeviceClass(
        name=name,
        selectors=selectors,
        config=tuple(config),
        extended_resource_name=extended,
        uid=_str(where, meta.get("uid"), "metadata.uid"),
        source=source,
        raw=dict(doc),
    )


def _is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: outside kubernetes.io, not ``requests.``, a qualified name after it."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return False
    return rules.label_key_problem("requests." + name) is None


# ---------------------------------------------------------------------------------------------- ResourceSlice


PARSERS = {
    "DeviceClass": parse_device_class,
    "ResourceSlice": parse_resource_slice,
    "ResourceClaim": parse_resource_claim,
    "ResourceClaimTemplate": parse_resource_claim_template,
}


def parse(kind: str, doc: Mapping[str, Any], source: str = "") -> Any:
    """One DRA object of ``kind`` (one of KINDS)."""
    return PARSERS[kind](doc, source)


__all__ = [
    "KINDS",
    "SHOWN_LIMIT",
    "InputError",
    "parse",
    "parse_claim_spec",
    "parse_device_class",
    "parse_resource_claim",
    "parse_resource_claim_template",
    "parse_resource_slice",
    "qualify",
]
