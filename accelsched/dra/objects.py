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
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from accelsched.api import quantity
from accelsched.api import validation as rules
from accelsched.api.objects import _list, _mapping, _str, _string_map, metadata, parse_node_selector_terms
from accelsched.api.selectors import NodeSelectorTerm
from accelsched.dra import cel
from accelsched.dra.model import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    ALLOCATION_RESULTS_MAX,
    DEVICE_REQUESTS_MAX,
    FIRST_AVAILABLE_MAX,
    RESERVED_FOR_MAX,
    RESOURCE_SLICE_MAX_DEVICES,
    RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS_OR_COUNTERS,
    RESOURCE_SLICE_MAX_SHARED_COUNTERS,
    AllocatedConfig,
    AllocationResult,
    CapacityRequestPolicy,
    CapacityRequestPolicyRange,
    ClaimSpec,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceCounterConsumption,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    OpaqueConfig,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimTemplate,
    ResourcePool,
    ResourceSlice,
    Version,
)
from accelsched.errors import InputError, Where

KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
V1BETA1 = "resource.k8s.io/v1beta1"
# Limits of pkg/apis/resource/types.go not in model.py.
SELECTORS_MAX = 32  # DeviceSelectorsMaxSize
CONSTRAINTS_MAX = 32  # DeviceConstraintsMaxSize
CONFIG_MAX = 32  # DeviceConfigMaxSize
TOLERATIONS_MAX = 16  # DeviceTolerationsMaxLength
TAINTS_MAX = 16  # DeviceTaintsMaxLength
ATTRIBUTES_AND_CAPACITIES_MAX = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
COUNTERS_PER_SET_MAX = 32  # ResourceSliceMaxCountersPerCounterSet, ...PerDeviceCounterConsumption
COUNTER_CONSUMPTIONS_MAX = 2  # ResourceSliceMaxDeviceCounterConsumptionsPerDevice
BINDING_CONDITIONS_MAX = 4
ATTRIBUTE_VALUE_MAX_LENGTH = 64  # DeviceAttributeMaxValueLength
DEVICE_MAX_ID_LENGTH = 32  # DeviceMaxIDLength
DRIVER_NAME_MAX_LENGTH = 63
POOL_NAME_MAX_LENGTH = 253
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024
VALID_VALUES_MAX = 10  # CapacityRequestPolicyDiscreteMaxOptions
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")  # sorted, as sets.List prints them
TOLERATION_OPERATORS = ("Equal", "Exists")
CONFIG_SOURCES = ("FromClaim", "FromClass")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is "
    "'[A-Za-z_][A-Za-z0-9_]*')"
)
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?"
)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


# ---------------------------------------------------------------------------------------------- field errors
# The bodies of apimachinery's field.Error (util/validation/field/errors.go), as kube-apiserver prints them.


SHOWN_LIMIT = 1000  # characters of a bad value an error quotes: a value may be huge, or lists shared many times over


def _shown(value: Any) -> str:
    """The value as the error quotes it (JSON), cut after SHOWN_LIMIT characters. Encoded lazily, so a value whose
    JSON would not fit in memory (a list shared at every level of a deep tree) costs no more than the limit."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    out: list[str] = []
    size = 0
    try:
        encoder = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"), check_circular=False)
        for chunk in encoder.iterencode(value):
            out.append(chunk)
            size += len(chunk)
            if size > SHOWN_LIMIT:
                return "".join(out)[:SHOWN_LIMIT] + "..."
    except (ValueError, RecursionError):  # an integer past Python's digit limit, or nesting past the stack
        return f"<{type(value).__name__}>"
    return "".join(out)


def invalid(value: Any, detail: str) -> str:
    return f"Invalid value: {_shown(value)}: {detail}"


def required(detail: str = "") -> str:
    return "Required value" + (f": {detail}" if detail else "")


def forbidden(detail: str) -> str:
    return f"Forbidden: {detail}"


def too_many(actual: int, maximum: int) -> str:
    return f"Too many: {actual}: must have at most {maximum} {'item' if maximum == 1 else 'items'}"


def too_long(maximum: int) -> str:
    return f"Too long: may not be more than {maximum} bytes"


def duplicate(value: Any) -> str:
    return f"Duplicate value: {_shown(value)}"


def not_supported(value: Any, allowed: tuple[str, ...]) -> str:
    return f"Unsupported value: {_shown(value)}: supported values: " + ", ".join(f'"{a}"' for a in allowed)


def not_found(value: Any) -> str:
    return f"Not found: {_shown(value)}"


# ---------------------------------------------------------------------------------------------- name formats


@functools.lru_cache(maxsize=4096)
def driver_name_problem(name: str) -> str | None:
    """corevalidation.ValidateCSIDriverName: required, at most 63 bytes, a DNS subdomain once lowercased."""
    if not name:
        return required()
    if len(name) > DRIVER_NAME_MAX_LENGTH:
        return too_long(DRIVER_NAME_MAX_LENGTH)
    problem = rules.dns1123_subdomain_problem(name.lower())
    return invalid(name, problem) if problem else None


def _c_identifier_problem(ident: str) -> str | None:
    if len(ident) > DEVICE_MAX_ID_LENGTH:
        return too_long(DEVICE_MAX_ID_LENGTH)
    return None if _C_IDENTIFIER.fullmatch(ident) else invalid(ident, _C_IDENTIFIER_MSG)


@functools.lru_cache(maxsize=4096)
def qualified_name_problem(name: str) -> str | None:
    """validateQualifiedName: a C identifier, optionally after a driver-name domain and '/'."""
    parts = name.split("/")
    if len(parts) == 1:
        return _c_identifier_problem(name)
    if len(parts) == 2:
        domain, ident = parts
        if not domain:
            return invalid("", "the domain must not be empty")
        problem = driver_name_problem(domain)
        if problem:
            return problem
        if not ident:
            return invalid("", "the name must not be empty")
        return _c_identifier_problem(ident)
    return None  # more than one '/': upstream accepts it (a TODO in validation.go)


def fully_qualified_name_problem(name: str) -> str | None:
    problem = qualified_name_problem(name)
    if problem:
        return problem
    if "/" not in name:
        return invalid(name, "a fully qualified name must be a domain and a name separated by a slash")
    return None


def qualify(name: str, driver: str) -> str:
    """An attribute or capacity name with its domain: an unqualified one belongs to the slice's driver."""
    return name if "/" in name else f"{driver}/{name}"


def _checked(where: Where, value: Any, path: str, problem_of: Callable[[str], str | None]) -> str:
    """A string field that ``problem_of`` accepts, else the API server's Invalid value error for it."""
    text = _str(where, value, path)
    problem = problem_of(text)
    if problem:
        raise where.error(path, invalid(text, problem))
    return text


def _label(where: Where, value: Any, path: str) -> str:
    return _checked(where, value, path, rules.dns1123_label_problem)


def _subdomain(where: Where, value: Any, path: str, needed: bool = True) -> str:
    text = _str(where, value, path)
    if not text and needed:
        raise where.error(path, required())
    problem = rules.dns1123_subdomain_problem(text) if text else None
    if problem:
        raise where.error(path, invalid(text, problem))
    return text


def _driver(where: Where, value: Any, path: str) -> str:
    text = _str(where, value, path)
    problem = driver_name_problem(text)
    if problem:
        raise where.error(path, problem)
    return text


def _pool_name(where: Where, value: Any, path: str) -> str:
    name = _str(where, value, path)
    if not name:
        raise where.error(path, required())
    if len(name) > POOL_NAME_MAX_LENGTH:
        raise where.error(path, too_long(POOL_NAME_MAX_LENGTH))
    for part in name.split("/"):
        problem = rules.dns1123_subdomain_problem(part)
        if problem:
            raise where.error(path, invalid(part, problem))
    return name


def _qualified_label_key(where: Where, value: Any, path: str) -> str:
    """metav1validation.ValidateLabelName: a qualified name (taint keys, binding conditions)."""
    return _checked(where, value, path, rules.label_key_problem)


def _label_value(where: Where, value: Any, path: str) -> str:
    return _checked(where, value, path, rules.label_value_problem)


def _uid(where: Where, value: Any, path: str) -> str:
    text = _str(where, value, path)
    if not _UUID.fullmatch(text.lower()) or len(text) != 36:
        raise where.error(path, invalid(text, f"error validating uid: invalid UUID format: {text!r}"))
    if text != text.lower():
        raise where.error(
            path,
            invalid(
                text,
                "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase "
                "hexadecimal characters",
            ),
        )
    return text


# ---------------------------------------------------------------------------------------------- small pieces


def _bool(where: Where, value: Any, path: str) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, bool):
        raise where.error(path, f"must be true or false, got {_shown(value)}")
    return value


def _integer(where: Where, value: Any, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(path, f"must be an integer, got {_shown(value)}")
    return value


_FRACTIONS: dict[tuple[type, Any], Fraction] = {}


def _quantity(where: Where, value: Any, path: str) -> Fraction:
    """An exact quantity; the same few texts repeat across thousands of devices, so each is parsed once."""
    key = (type(value), value)
    try:
        return _FRACTIONS[key]
    except (KeyError, TypeError):
        pass
    if value is None:
        raise where.error(path, required())
    try:
        amount = quantity.parse_fraction(value)
    except ValueError as exc:
        raise where.error(path, str(exc)) from None
    if len(_FRACTIONS) < 65_536:
        _FRACTIONS[key] = amount
    return amount


def _sized(where: Where, value: Any, path: str, maximum: int) -> list[Any]:
    items = _list(where, value, path)
    if len(items) > maximum:
        raise where.error(path, too_many(len(items), maximum))
    return items


def _check_unique(where: Where, keys: list[Any], path: str) -> None:
    """validateSet's uniqueness: the second of two equal keys is a Duplicate at its index."""
    seen: set[Any] = set()
    for i, key in enumerate(keys):
        if key in seen:
            raise where.error(f"{path}[{i}]", duplicate(key))
        seen.add(key)


def _counters(where: Where, value: Any, path: str) -> dict[str, Fraction]:
    """A counters map (a CounterSet's or a device's consumption): DNS-label names, at most 32, any quantity."""
    counters = _mapping(where, value, path)
    if not counters:
        raise where.error(path, required())
    if len(counters) > COUNTERS_PER_SET_MAX:
        raise where.error(path, too_many(len(counters), COUNTERS_PER_SET_MAX))
    out: dict[str, Fraction] = {}
    for name, counter in counters.items():
        name = str(name)
        if not _label_ok(name):
            raise where.error(path, invalid(name, rules.dns1123_label_problem(name) or ""))
        # validateDeviceCounter: "Any parsed quantity is valid" (a negative one too).
        raw = counter.get("value") if type(counter) is dict else None
        try:
            amount = _FRACTIONS.get((type(raw), raw))
        except TypeError:
            amount = None
        if amount is None:
            p = f"{path}[{name}]"
            amount = _quantity(where, _mapping(where, counter, p).get("value"), f"{p}.value")
        out[name] = amount
    return out


_NODE_SELECTORS: dict[tuple[NodeSelectorTerm, ...], tuple[NodeSelectorTerm, ...]] = {}


def _node_selector(where: Where, value: Any, path: str) -> tuple[NodeSelectorTerm, ...]:
    selector = _mapping(where, value, path)
    terms = parse_node_selector_terms(where, selector.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms")
    if not terms:
        raise where.error(f"{path}.nodeSelectorTerms", required("must have at least one node selector term"))
    # Interned: the slices of one driver repeat one selector, so matching it can be cached per object (pools.py).
    terms = tuple(terms)
    if len(_NODE_SELECTORS) >= _CACHE_MAX:
        _NODE_SELECTORS.clear()
    return _NODE_SELECTORS.setdefault(terms, terms)


def _node_name(where: Where, value: Any, path: str) -> str:
    name = _str(where, value, path)
    problem = rules.dns1123_subdomain_problem(name)
    if problem:
        raise where.error(path, invalid(name, problem))
    return name


def _opaque(where: Where, value: Any, path: str, requests: tuple[str, ...] = ()) -> OpaqueConfig:
    """validateDeviceConfiguration: ``opaque`` is required, with a driver and a JSON object of parameters."""
    if value is None:
        raise where.error(f"{path}.opaque", required())
    opaque = _mapping(where, value, f"{path}.opaque")
    driver = _driver(where, opaque.get("driver"), f"{path}.opaque.driver")
    p = f"{path}.opaque.parameters"
    parameters = opaque.get("parameters")
    if parameters is None:
        raise where.error(p, required())
    size = len(json.dumps(parameters, separators=(",", ":"), default=str).encode())
    if size > OPAQUE_PARAMETERS_MAX_LENGTH:
        raise where.error(p, too_long(OPAQUE_PARAMETERS_MAX_LENGTH))
    if not isinstance(parameters, Mapping):
        raise where.error(p, invalid("<value omitted>", "must be a valid JSON object"))
    return OpaqueConfig(driver, parameters, requests)


def _selectors(where: Where, value: Any, path: str) -> tuple[str, ...]:
    """DeviceSelector list: each needs ``cel.expression``, at most 10Ki, that compiles (once per expression)."""
    out = []
    for i, selector in enumerate(_sized(where, value, path, SELECTORS_MAX)):
        p = f"{path}[{i}].cel"
        sel = _mapping(where, selector, f"{path}[{i}]")
        if sel.get("cel") is None:
            raise where.error(p, required())
        expression = _str(where, _mapping(where, sel["cel"], p).get("expression"), f"{p}.expression")
        if len(expression.encode()) > cel.MAX_EXPRESSION_LENGTH:
            raise where.error(f"{p}.expression", too_long(cel.MAX_EXPRESSION_LENGTH))
        problem = cel.compile_error(expression)
        if problem:
            raise where.error(f"{p}.expression", invalid(expression, problem))
        out.append(expression)
    return tuple(out)


def _tolerations(where: Where, value: Any, path: str) -> tuple[DeviceToleration, ...]:
    out = []
    for i, item in enumerate(_sized(where, value, path, TOLERATIONS_MAX)):
        p = f"{path}[{i}]"
        item = _mapping(where, item, p)
        key = _str(where, item.get("key"), f"{p}.key")
        if key:
            _qualified_label_key(where, key, f"{p}.key")
        operator = _str(where, item.get("operator"), f"{p}.operator") or "Equal"  # +default="Equal"
        tol_value = _str(where, item.get("value"), f"{p}.value")
        if operator == "Exists":
            if tol_value:
                raise where.error(f"{p}.value", invalid(tol_value, "must be empty for operator `Exists`"))
        elif operator == "Equal":
            _label_value(where, tol_value, f"{p}.value")
        else:
            raise where.error(f"{p}.operator", not_supported(operator, TOLERATION_OPERATORS))
        effect = _str(where, item.get("effect"), f"{p}.effect")
        if effect and effect not in TAINT_EFFECTS:
            raise where.error(f"{p}.effect", not_supported(effect, TAINT_EFFECTS))
        seconds = _integer(where, item.get("tolerationSeconds"), f"{p}.tolerationSeconds")
        out.append(DeviceToleration(key, operator, tol_value, effect, seconds))
    return tuple(out)


def _binding_conditions(where: Where, item: Mapping[str, Any], path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """validateDeviceBindingParameters: at most 4 each, qualified names, no duplicates or overlap, both or none."""
    lists = []
    for key in ("bindingConditions", "bindingFailureConditions"):
        p = f"{path}.{key}" if path else key
        names = [
            _qualified_label_key(where, c, f"{p}[{i}]")
            for i, c in enumerate(_sized(where, item.get(key), p, BINDING_CONDITIONS_MAX))
        ]
        _check_unique(where, names, p)
        lists.append(tuple(names))
    conditions, failures = lists
    prefix = f"{path}." if path else ""
    for i, name in enumerate(failures):
        if name in conditions:
            raise where.error(
                f"{prefix}bindingFailureConditions[{i}]",
                invalid(name, "bindingFailureConditions must not overlap with bindingConditions"),
            )
    if failures and not conditions:
        detail = "bindingConditions are required to use bindingFailureConditions"
        raise where.error(f"{prefix}bindingConditions", invalid(None, detail))
    if conditions and not failures:
        raise where.error(
            f"{prefix}bindingFailureConditions",
            invalid(None, "bindingFailureConditions are required to use bindingConditions"),
        )
    return conditions, failures


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


def parse_resource_slice(doc: Mapping[str, Any], source: str = "") -> ResourceSlice:
    """A ResourceSlice (validateResourceSliceSpec), its devices' names fully qualified with the driver."""
    where, name, _, _ = metadata(doc, source, "ResourceSlice", namespaced=False)
    spec = _mapping(where, doc.get("spec"), "spec")
    driver = _driver(where, spec.get("driver"), "spec.driver")
    pool_doc = _mapping(where, spec.get("pool"), "spec.pool")
    pool_name = _pool_name(where, pool_doc.get("name"), "spec.pool.name")
    count = _integer(where, pool_doc.get("resourceSliceCount"), "spec.pool.resourceSliceCount") or 0
    if count <= 0:
        raise where.error("spec.pool.resourceSliceCount", invalid(count, "must be greater than zero"))
    generation = _integer(where, pool_doc.get("generation"), "spec.pool.generation") or 0
    if generation < 0:
        raise where.error("spec.pool.generation", invalid(generation, "must be greater than or equal to zero"))

    set_fields = []
    node_name = node_selector = None
    if spec.get("nodeName") is not None:
        node_name = _str(where, spec["nodeName"], "spec.nodeName")
        if not node_name:
            raise where.error("spec.nodeName", invalid("", "must be either unset or set to a non-empty string"))
        set_fields.append("`nodeName`")
        _node_name(where, node_name, "spec.nodeName")
    if spec.get("nodeSelector") is not None:
        set_fields.append("`nodeSelector`")
        node_selector = _node_selector(where, spec["nodeSelector"], "spec.nodeSelector")
        if len(node_selector) != 1:
            raw_terms = _mapping(where, spec["nodeSelector"], "spec.nodeSelector").get("nodeSelectorTerms")
            raise where.error(
                "spec.nodeSelector.nodeSelectorTerms",
                invalid(_go_node_selector_terms(raw_terms), "must have exactly one node selector term"),
            )
    flags = {}
    for key in ("allNodes", "perDeviceNodeSelection"):
        flag = _bool(where, spec.get(key), f"spec.{key}")
        if flag is False:
            raise where.error(f"spec.{key}", invalid(False, "must be either unset or set to true"))
        if flag:
            set_fields.append(f"`{key}`")
        flags[key] = bool(flag)
    one_of = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not set_fields:
        raise where.error("spec", required(one_of))
    if len(set_fields) > 1:
        raise where.error("spec", invalid("{" + ", ".join(set_fields) + "}", one_of + ", but multiple fields are set"))

    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        # 1.35+ (KEP-4815): counters live in slices of their own.
        raise where.error("spec", invalid("", "only one of `sharedCounters` or `devices` is allowed"))

    raw_devices = _list(where, spec.get("devices"), "spec.devices")
    beta1 = doc.get("apiVersion") == V1BETA1
    device_docs = [_device_doc(where, d, f"spec.devices[{i}]", beta1) for i, d in enumerate(raw_devices)]
    advanced = any(d.get("taints") or d.get("consumesCounters") for _, d in device_docs)
    maximum = RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS_OR_COUNTERS if advanced else RESOURCE_SLICE_MAX_DEVICES
    if len(raw_devices) > maximum:
        raise where.error("spec.devices", too_many(len(raw_devices), maximum))
    per_device = flags["perDeviceNodeSelection"]
    devices = tuple(_device(where, d, p, driver, per_device) for p, d in device_docs)
    _check_unique(where, [d.name for d in devices], "spec.devices")

    counter_sets = []
    raw_sets = _sized(where, spec.get("sharedCounters"), "spec.sharedCounters", RESOURCE_SLICE_MAX_SHARED_COUNTERS)
    for i, item in enumerate(raw_sets):
        p = f"spec.sharedCounters[{i}]"
        item = _mapping(where, item, p)
        set_name = _str(where, item.get("name"), f"{p}.name")
        if not set_name:
            raise where.error(f"{p}.name", required())
        _label(where, set_name, f"{p}.name")
        counter_sets.append(CounterSet(set_name, _counters(where, item.get("counters"), f"{p}.counters")))
    _check_unique(where, [c.name for c in counter_sets], "spec.sharedCounters")

    return ResourceSlice(
        name=name,
        driver=driver,
        pool=ResourcePool(pool_name, generation, count),
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=flags["allNodes"],
        per_device_node_selection=per_device,
        devices=devices,
        shared_counters=tuple(counter_sets),
        source=source,
        raw=dict(doc),
    )


def _device_doc(where: Where, value: Any, path: str, beta1: bool) -> tuple[str, Mapping[str, Any]]:
    """A device's fields and the path errors name (v1beta1 wraps them in ``basic``; the internal type does not)."""
    device = _mapping(where, value, path)
    if beta1 and device.get("basic") is not None:
        return path, {"name": device.get("name"), **_mapping(where, device["basic"], f"{path}.basic")}
    return path, device


@functools.lru_cache(maxsize=65536)
def _label_ok(name: str) -> bool:
    return rules.dns1123_label_problem(name) is None


# Qualified attribute and capacity names, and plain capacities, already seen: a slice repeats the same few.
_QUALIFIED: dict[tuple[str, str], str] = {}
_CAPACITIES: dict[tuple[type, Any], DeviceCapacity] = {}
_CACHE_MAX = 65_536


def _qualified(where: Where, key: Any, driver: str, path: str, what: str) -> str:
    """``key`` checked (validateQualifiedName, reported at the map's path) and qualified with the driver."""
    try:
        return _QUALIFIED[(key, driver)]
    except (KeyError, TypeError):
        pass
    key = str(key)
    problem = qualified_name_problem(key)
    if problem:
        raise where.error(f"{path}.{what}", problem)
    name = qualify(key, driver)
    if len(_QUALIFIED) < _CACHE_MAX:
        _QUALIFIED[(key, driver)] = name
    return name


def _plain_attribute(attr: Any) -> Any:
    """The value of a well-formed one-value int, bool or short ASCII string attribute, else None (then the full
    check runs): most attributes, read without building a path."""
    if type(attr) is not dict or len(attr) != 1:
        return None
    ((kind, raw),) = attr.items()
    t = type(raw)
    if (kind == "int" and t is int) or (kind == "bool" and t is bool):
        return raw
    if kind == "string" and t is str and len(raw) <= ATTRIBUTE_VALUE_MAX_LENGTH and raw.isascii():
        return raw
    return None


def _device(where: Where, dev: Mapping[str, Any], path: str, driver: str, per_device: bool) -> Device:
    """One device (validateDevice). Paths are built only for what is wrong: a slice may hold 128 devices and a
    cluster thousands of slices."""
    name = dev.get("name")
    if type(name) is not str or not _label_ok(name):
        name = _label(where, name, f"{path}.name")
    raw_attrs = dev.get("attributes")
    if type(raw_attrs) is not dict:
        raw_attrs = _mapping(where, raw_attrs, f"{path}.attributes")
    raw_caps = dev.get("capacity")
    if type(raw_caps) is not dict:
        raw_caps = _mapping(where, raw_caps, f"{path}.capacity")
    total = len(raw_attrs) + len(raw_caps)
    if total > ATTRIBUTES_AND_CAPACITIES_MAX:
        raise where.error(
            path,
            invalid(
                total, f"the total number of attributes and capacities must not exceed {ATTRIBUTES_AND_CAPACITIES_MAX}"
            ),
        )
    attributes = {}
    for key, attr in raw_attrs.items():
        qualified = _qualified(where, key, driver, path, "attributes")
        value = _plain_attribute(attr)
        attributes[qualified] = _attribute(where, attr, f"{path}.attributes[{key}]") if value is None else value
    multiple = dev.get("allowMultipleAllocations")
    if multiple is not None:
        multiple = _bool(where, multiple, f"{path}.allowMultipleAllocations")
    multiple = bool(multiple)
    capacity = {}
    for key, cap in raw_caps.items():
        _qualified(where, key, driver, path, "capacity")  # validated; stored as written (see the module docstring)
        written = str(key)
        simple = type(cap) is dict and len(cap) == 1 and type(cap.get("value")) in (str, int)
        plain = _CAPACITIES.get((type(cap["value"]), cap["value"])) if simple else None
        if plain is None:
            plain = _capacity(where, cap, f"{path}.capacity[{key}]", multiple)
            if simple and len(_CAPACITIES) < _CACHE_MAX:
                _CAPACITIES[(type(cap["value"]), cap["value"])] = plain
        capacity[written] = plain

    taints = []
    for i, item in enumerate(
        _sized(where, dev.get("taints"), f"{path}.taints", TAINTS_MAX) if dev.get("taints") else ()
    ):
        p = f"{path}.taints[{i}]"
        item = _mapping(where, item, p)
        key = _str(where, item.get("key"), f"{p}.key")
        if not key:
            raise where.error(f"{p}.key", required())
        _qualified_label_key(where, key, f"{p}.key")
        value = _str(where, item.get("value"), f"{p}.value")
        if value:
            _label_value(where, value, f"{p}.value")
        effect = _str(where, item.get("effect"), f"{p}.effect")
        if not effect:
            raise where.error(f"{p}.effect", required())
        if effect not in TAINT_EFFECTS:
            raise where.error(f"{p}.effect", not_supported(effect, TAINT_EFFECTS))
        taints.append(DeviceTaint(key, value, effect, _str(where, item.get("timeAdded"), f"{p}.timeAdded")))

    consumes = []
    p = f"{path}.consumesCounters"
    raw_consumes = dev.get("consumesCounters")
    for i, item in enumerate(_sized(where, raw_consumes, p, COUNTER_CONSUMPTIONS_MAX) if raw_consumes else ()):
        item = _mapping(where, item, f"{p}[{i}]")
        counter_set = _str(where, item.get("counterSet"), f"{p}[{i}].counterSet")
        if not counter_set:
            raise where.error(f"{p}[{i}].counterSet", required())
        _label(where, counter_set, f"{p}[{i}].counterSet")
        consumes.append(
            DeviceCounterConsumption(counter_set, _counters(where, item.get("counters"), f"{p}[{i}].counters"))
        )
    if len(consumes) > 1:
        _check_unique(where, [c.counter_set for c in consumes], p)

    node_name = node_selector = all_nodes = None
    placed = [k for k in ("nodeName", "nodeSelector", "allNodes") if dev.get(k) is not None]
    if per_device:
        set_fields = []
        if dev.get("nodeName") is not None:
            node_name = _str(where, dev["nodeName"], f"{path}.nodeName")
            if not node_name:
                raise where.error(f"{path}.nodeName", invalid("", "must not be empty"))
            set_fields.append("`nodeName`")
            _node_name(where, node_name, f"{path}.nodeName")
        if dev.get("nodeSelector") is not None:
            set_fields.append("`nodeSelector`")
            node_selector = _node_selector(where, dev["nodeSelector"], f"{path}.nodeSelector")
        if dev.get("allNodes") is not None:
            all_nodes = _bool(where, dev["allNodes"], f"{path}.allNodes")
            if not all_nodes:
                raise where.error(f"{path}.allNodes", invalid(False, "must be either unset or set to true"))
            set_fields.append("`allNodes`")
        one_of = (
            "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"
        )
        if not set_fields:
            raise where.error(path, required(one_of))
        if len(set_fields) > 1:
            raise where.error(path, invalid("{" + ", ".join(set_fields) + "}", one_of))
    elif placed:
        raise where.error(
            path,
            invalid(
                None,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` "
                "is set to true in the ResourceSlice spec",
            ),
        )

    conditions = failures = ()
    if dev.get("bindingConditions") or dev.get("bindingFailureConditions"):
        conditions, failures = _binding_conditions(where, dev, path)
    return Device(
        name=name,
        attributes=attributes,
        capacity=capacity,
        consumes_counters=tuple(consumes),
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=all_nodes,
        taints=tuple(taints),
        binds_to_node=dev.get("bindsToNode") is not None
        and bool(_bool(where, dev["bindsToNode"], f"{path}.bindsToNode")),
        binding_conditions=conditions,
        binding_failure_conditions=failures,
        allow_multiple_allocations=multiple,
    )


def _attribute(where: Where, value: Any, path: str) -> Any:
    """validateDeviceAttribute: exactly one of bool, int, string (<= 64 bytes), version (semver 2.0.0).

    The list forms (bools, ints, strings, versions) sit behind the alpha gate DRAListTypeAttributes, off in 1.36:
    the API server drops them before validating, so they count as not set."""
    attr = _mapping(where, value, path)
    present = [k for k in ("bool", "int", "string", "version") if attr.get(k) is not None]
    if not present:
        raise where.error(path, invalid("", "exactly one value must be specified"))
    if len(present) > 1:
        raise where.error(path, invalid(_go_attribute(attr), "exactly one value must be specified"))
    kind = present[0]
    raw = attr[kind]
    if kind == "bool":
        return _bool(where, raw, f"{path}.bool")
    if kind == "int":
        return _integer(where, raw, f"{path}.int")
    text = _str(where, raw, f"{path}.{kind}")
    if kind == "version" and not _SEMVER.fullmatch(text):
        raise where.error(f"{path}.version", invalid(text, "must be a string compatible with semver.org spec 2.0.0"))
    if len(text.encode()) > ATTRIBUTE_VALUE_MAX_LENGTH:
        raise where.error(f"{path}.{kind}", too_long(ATTRIBUTE_VALUE_MAX_LENGTH))
    return Version(text) if kind == "version" else text


def _go_attribute(attr: Mapping[str, Any]) -> dict[str, Any]:
    """The attribute as the API server shows a bad one: its internal struct, Go field names, unset fields null
    (confirmed against kube-apiserver 1.36.3)."""
    return {
        go: attr.get(key) if key in ("int", "bool", "string", "version") else None
        for go, key in (("IntValue", "int"), ("BoolValue", "bool"), ("StringValue", "string"),
                        ("VersionValue", "version"), ("IntValues", ""), ("BoolValues", ""), ("StringValues", ""),
                        ("VersionValues", ""))
    }  # fmt: skip


def _go_node_selector_terms(terms: Any) -> Any:
    """Node selector terms as the API server shows them in an error: the internal structs, Go field names."""

    def requirements(reqs: Any) -> Any:
        if not isinstance(reqs, list):
            return None
        return [
            {"Key": r.get("key", ""), "Operator": r.get("operator", ""), "Values": r.get("values")}
            for r in reqs
            if isinstance(r, Mapping)
        ]

    if not isinstance(terms, list):
        return terms
    return [
        {"MatchExpressions": requirements(t.get("matchExpressions")), "MatchFields": requirements(t.get("matchFields"))}
        for t in terms
        if isinstance(t, Mapping)
    ]


def _capacity(where: Where, value: Any, path: str, multiple: bool) -> DeviceCapacity:
    cap = _mapping(where, value, path)
    raw_value = cap.get("value")
    amount = _quantity(where, raw_value, f"{path}.value")
    if cap.get("requestPolicy") is None:
        return DeviceCapacity(amount)
    p = f"{path}.requestPolicy"
    if not multiple:
        raise where.error(p, forbidden("allowMultipleAllocations must be true"))
    return DeviceCapacity(
        amount, _request_policy(where, _mapping(where, cap["requestPolicy"], p), p, amount, str(raw_value))
    )


def _request_policy(
    where: Where, policy: Mapping[str, Any], path: str, maximum: Fraction, maximum_text: str
) -> CapacityRequestPolicy:
    """validateRequestPolicy: validValues or validRange (not both), each needing a default inside it."""
    default_raw = policy.get("default")
    default = None if default_raw is None else _quantity(where, default_raw, f"{path}.default")
    raw_values = _list(where, policy.get("validValues"), f"{path}.validValues")
    values = tuple(_quantity(where, v, f"{path}.validValues[{i}]") for i, v in enumerate(raw_values))
    raw_range = policy.get("validRange")
    if values and raw_range is not None:
        raise where.error(
            path,
            forbidden(
                'exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time'
            ),
        )
    valid_range = None
    if values:
        vp = f"{path}.validValues"
        if default is None:
            raise where.error(f"{path}.default", required("required when validValues is defined"))
        for i in range(len(values) - 1):
            if values[i] > values[i + 1]:
                raise where.error(
                    f"{vp}[{i + 1}]", invalid(str(raw_values[i + 1]), "values must be sorted in ascending order")
                )
        if len(values) > VALID_VALUES_MAX:
            raise where.error(vp, too_many(len(values), VALID_VALUES_MAX))
        for i, v in enumerate(values):
            if v > maximum:
                raise where.error(
                    f"{vp}[{i}]", invalid(str(raw_values[i]), f"option is larger than capacity value: {maximum_text}")
                )
        _check_unique(where, list(values), vp)
        if default not in values:
            raise where.error(
                vp, invalid(str(default_raw), "default value is not valid according to the requestPolicy")
            )
    elif raw_range is not None:
        rp = f"{path}.validRange"
        rng = _mapping(where, raw_range, rp)
        if default is None:
            raise where.error(f"{path}.default", required("required when validRange is defined"))
        if rng.get("min") is None:
            raise where.error(f"{rp}.min", required("required when validRange is defined"))
        texts = {k: str(rng[k]) for k in ("min", "max", "step") if rng.get(k) is not None}
        low = _quantity(where, rng["min"], f"{rp}.min")
        high = None if rng.get("max") is None else _quantity(where, rng["max"], f"{rp}.max")
        step = None if rng.get("step") is None else _quantity(where, rng["step"], f"{rp}.step")
        checks = [
            (low > maximum, "min", texts["min"], f"min is larger than capacity value: {maximum_text}"),
            (default < low, "min", str(default_raw), f"default is less than min: {texts['min']}"),
        ]
        if high is not None:
            checks += [
                (low > high, "max", texts["min"], f"min is larger than max: {texts['max']}"),
                (high > maximum, "max", texts["max"], f"max is larger than capacity value: {maximum_text}"),
                (default > high, "max", str(default_raw), f"default is more than max: {texts['max']}"),
            ]
        if step is not None:
            checks.append(
                (
                    low + step > maximum,
                    "step",
                    texts["step"],
                    f"one step {_fraction_text(low + step)} is larger than capacity value: {maximum_text}",
                )
            )
            # validateRequestPolicyRangeStep works on Quantity.Value(): integers, rounded up.
            multiple_of = f"value is not a multiple of a given step ({texts['step']}) from ({texts['min']})"
            step_int = _ceil(step)
            for value, text in ((default, str(default_raw)), (high, texts.get("max"))):
                if value is not None and step_int and (_ceil(value) - _ceil(low)) % step_int:
                    checks.append((True, "step", text, multiple_of))
        for failed, key, shown, detail in checks:
            if failed:
                raise where.error(f"{rp}.{key}", invalid(shown, detail))
        valid_range = CapacityRequestPolicyRange(low, high, step)
    return CapacityRequestPolicy(default, values, valid_range)


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def _fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))


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
    "InputError",
    "parse",
    "parse_claim_spec",
    "parse_device_class",
    "parse_resource_claim",
    "parse_resource_claim_template",
    "parse_resource_slice",
    "qualify",
]
