"""The field checks every DRA object parser (dra/objects.py) shares: the API server's limits and field-error texts,
name formats (driver, pool, qualified and C-identifier names), quantities, counters, node selectors, opaque config,
CEL selectors, tolerations and binding conditions, as pkg/apis/resource/validation/validation.go checks them.
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
from accelsched.api.object_fields import _list, _mapping, _str
from accelsched.api.objects import parse_node_selector_terms
from accelsched.api.selectors import NodeSelectorTerm
from accelsched.dra import cel
from accelsched.dra.model import (
    DeviceToleration,
    OpaqueConfig,
)
from accelsched.errors import Where

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


@functools.lru_cache(maxsize=65536)
def _label_ok(name: str) -> bool:
    return rules.dns1123_label_problem(name) is None


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


_CACHE_MAX = 65_536
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
