"""The field checks every object parser of api/objects.py shares, and those of dra/ and the other kinds reuse: typed
fields with a path in their errors, quantities and resource lists, label and node selectors, taints, tolerations,
and an object's metadata (name, namespace, the Where its errors name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelsched.api import quantity
from accelsched.api.selectors import (
    LABEL_SELECTOR_OPERATORS,
    NODE_SELECTOR_OPERATORS,
    TAINT_EFFECTS,
    LabelSelector,
    NodeSelectorTerm,
    Requirement,
    Taint,
    Toleration,
    parse_int64,
)
from accelsched.errors import Where, quoted

DEFAULT_SCHEDULER = "default-scheduler"
DEVICES_ANNOTATION = "accelsched.io/devices"
HOSTNAME_LABEL = "kubernetes.io/hostname"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"


# ---------------------------------------------------------------------------------------------- helpers


# The fast paths (``type(value) is dict``/``str``) skip the ABC checks for what parsed JSON and YAML hold; the
# outcome is the same, they only run hundreds of thousands of times on a large dump.


def _mapping(where: Where, value: Any, path: str) -> Mapping[str, Any]:
    if type(value) is dict:
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise where.error(path, f"must be a mapping, got {type(value).__name__}")
    return value


def _list(where: Where, value: Any, path: str) -> list[Any]:
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        raise where.error(path, f"must be a list, got {type(value).__name__}")
    return value


def _str(where: Where, value: Any, path: str, default: str = "") -> str:
    if type(value) is str:
        return value
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise where.error(path, f"must be a string, got {type(value).__name__}")
    return str(value)


def _int(where: Where, value: Any, path: str, default: int | None = None, minimum: int | None = None) -> int:
    if value is None:
        if default is None:
            raise where.error(path, "is required")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(path, f"must be an integer, got {quoted(value)}")
    if minimum is not None and value < minimum:
        raise where.error(path, f"must be >= {minimum}, got {value}")
    return value


def _string_map(where: Where, value: Any, path: str) -> dict[str, str]:
    mapping = _mapping(where, value, path)
    if all(type(k) is str and type(v) is str for k, v in mapping.items()):
        return dict(mapping)
    return {str(k): _str(where, v, f"{path}.{k}") for k, v in mapping.items()}


def _choice(where: Where, value: str, path: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise where.error(path, f"unknown value {quoted(value)} (expected one of {', '.join(allowed)})")
    return value


_QUANTITIES: dict[tuple[str, type, Any], int] = {}


def parse_quantity(name: str, amount: Any) -> int:
    """``quantity.parse``, remembered: thousands of objects repeat the same few quantities ("64", "1Gi").
    The type is part of the key, so ``True`` and ``1`` stay apart; errors are not remembered."""
    key = (name, type(amount), amount)
    try:
        return _QUANTITIES[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable value (a list): the parser words the error
        return quantity.parse(name, amount)
    parsed = quantity.parse(name, amount)
    if len(_QUANTITIES) < 65_536:
        _QUANTITIES[key] = parsed
    return parsed


def parse_resources(where: Where, value: Any, path: str) -> dict[str, int]:
    """A ResourceList (requests, limits, allocatable) into canonical integers."""
    out: dict[str, int] = {}
    for name, amount in _mapping(where, value, path).items():
        try:
            out[str(name)] = parse_quantity(str(name), amount)
        except ValueError as exc:
            raise where.error(f"{path}[{name}]", str(exc)) from None
    return out


def parse_requirements(where: Where, value: Any, path: str, operators: tuple[str, ...]) -> tuple[Requirement, ...]:
    reqs = []
    for i, item in enumerate(_list(where, value, path)):
        p = f"{path}[{i}]"
        item = _mapping(where, item, p)
        key = _str(where, item.get("key"), f"{p}.key")
        if not key:
            raise where.error(f"{p}.key", "is required")
        op = _choice(where, _str(where, item.get("operator"), f"{p}.operator"), f"{p}.operator", operators)
        values = tuple(
            _str(where, v, f"{p}.values[{j}]") for j, v in enumerate(_list(where, item.get("values"), f"{p}.values"))
        )
        if op in ("In", "NotIn") and not values:
            raise where.error(f"{p}.values", f"must be non-empty for operator {op}")
        if op in ("Exists", "DoesNotExist") and values:
            raise where.error(f"{p}.values", f"must be empty for operator {op}")
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                raise where.error(f"{p}.values", f"must hold exactly one integer for operator {op}")
            if parse_int64(values[0]) is None:
                raise where.error(f"{p}.values[0]", f"{quoted(values[0])} is not an integer")
        reqs.append(Requirement(key, op, values))
    return tuple(reqs)


def parse_label_selector(where: Where, value: Any, path: str) -> LabelSelector | None:
    """None stays None: a nil selector matches nothing, an empty one matches everything."""
    if value is None:
        return None
    value = _mapping(where, value, path)
    labels = _string_map(where, value.get("matchLabels"), f"{path}.matchLabels")
    exprs = parse_requirements(
        where, value.get("matchExpressions"), f"{path}.matchExpressions", LABEL_SELECTOR_OPERATORS
    )
    return LabelSelector(tuple(sorted(labels.items())), exprs)


def parse_node_selector_terms(where: Where, value: Any, path: str) -> tuple[NodeSelectorTerm, ...]:
    terms = []
    for i, term in enumerate(_list(where, value, path)):
        p = f"{path}[{i}]"
        term = _mapping(where, term, p)
        exprs = parse_requirements(
            where, term.get("matchExpressions"), f"{p}.matchExpressions", NODE_SELECTOR_OPERATORS
        )
        fields = parse_requirements(where, term.get("matchFields"), f"{p}.matchFields", NODE_SELECTOR_OPERATORS)
        for j, req in enumerate(fields):
            if req.key != "metadata.name":
                raise where.error(
                    f"{p}.matchFields[{j}].key", f"unsupported field {quoted(req.key)} (only metadata.name)"
                )
        terms.append(NodeSelectorTerm(exprs, fields))
    return tuple(terms)


def parse_taints(where: Where, value: Any, path: str) -> tuple[Taint, ...]:
    taints = []
    for i, item in enumerate(_list(where, value, path)):
        p = f"{path}[{i}]"
        item = _mapping(where, item, p)
        key = _str(where, item.get("key"), f"{p}.key")
        if not key:
            raise where.error(f"{p}.key", "is required")
        effect = _choice(where, _str(where, item.get("effect"), f"{p}.effect"), f"{p}.effect", TAINT_EFFECTS)
        taints.append(Taint(key, _str(where, item.get("value"), f"{p}.value"), effect))
    return tuple(taints)


def parse_tolerations(where: Where, value: Any, path: str) -> tuple[Toleration, ...]:
    out = []
    for i, item in enumerate(_list(where, value, path)):
        p = f"{path}[{i}]"
        item = _mapping(where, item, p)
        key = _str(where, item.get("key"), f"{p}.key")
        op = _choice(
            where, _str(where, item.get("operator"), f"{p}.operator", "Equal"), f"{p}.operator", ("Equal", "Exists")
        )
        value_ = _str(where, item.get("value"), f"{p}.value")
        effect = _str(where, item.get("effect"), f"{p}.effect")
        if effect:
            _choice(where, effect, f"{p}.effect", TAINT_EFFECTS)
        if op == "Exists" and value_:
            raise where.error(f"{p}.value", "must be empty when operator is Exists")
        if not key and op != "Exists":
            raise where.error(f"{p}.operator", "must be Exists when key is empty")
        seconds = item.get("tolerationSeconds")
        out.append(
            Toleration(
                key, op, value_, effect, None if seconds is None else _int(where, seconds, f"{p}.tolerationSeconds")
            )
        )
    return tuple(out)


def describe(kind: str, meta_ns: str, name: str) -> str:
    return f"{kind} {meta_ns}/{name}" if meta_ns else f"{kind} {name}"


def metadata(
    doc: Mapping[str, Any], source: str, kind: str, namespaced: bool
) -> tuple[Where, str, str, Mapping[str, Any]]:
    """The object's name/namespace and a Where for its errors. Missing names are errors."""
    pre = Where(source, kind)
    meta = _mapping(pre, doc.get("metadata"), "metadata")
    name = _str(pre, meta.get("name"), "metadata.name")
    if not name:
        raise pre.error("metadata.name", "is required")
    namespace = _str(pre, meta.get("namespace"), "metadata.namespace", "default") if namespaced else ""
    return Where(source, describe(kind, namespace, name)), name, namespace, meta
