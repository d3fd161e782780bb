"""CEL device selectors as Kubernetes evaluates them (dynamic-resource-allocation/cel/compile.go).

The expression sees one variable, ``device``: ``driver``, ``attributes`` and ``capacity`` (maps keyed by domain,
then by the unqualified name), and ``allowMultipleAllocations``. A domain no attribute uses reads as an empty map (so
``device.attributes["other.example.com"].x`` is a runtime error "no such key", not a silent false), and a missing
key is a runtime error that aborts the allocation, as upstream. Kubernetes' ``quantity()`` and ``semver()``
libraries are registered; capacities are quantities and ``version`` attributes semvers.

Each expression is compiled once per process (``compile_selector`` keeps the programs), never per pod or device, and
a device's CEL value is built once per device (``device_value``). The library used is ``common-expression-language``
(module ``cel``), whose parser is cel-go's grammar. Differences from cel-go that remain: no static type check (a
type error is found when evaluated, as a runtime error, where the API server refuses it at creation), and neither
optional syntax (``.?``) nor ``cel.bind`` parse; docs/dra.md lists them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import cel

from accelsched.api import quantity as quantities
from accelsched.dra.model import Device, Version

MAX_EXPRESSION_LENGTH = 10 * 1024  # CELSelectorExpressionMaxLength
_QUANTITY = "__quantity__"
_SEMVER = "__semver__"
# Domains an expression indexes, so their maps exist (empty) on every device: the "unknown domain is an empty map"
# rule without a map type of our own.
_DOMAIN = re.compile(r"""\.(?:attributes|capacity)\s*\[\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\s*\]""")
_SEMVER_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


class CELError(Exception):
    """A selector that does not compile (bad input) or fails at runtime (the allocation aborts)."""


# ---------------------------------------------------------------------------------------------- values


def quantity_value(amount: Fraction) -> dict[str, str]:
    """A quantity as CEL sees it here: an opaque map holding the exact value (equal quantities are equal maps)."""
    return {_QUANTITY: str(amount)}


def _semver_value(text: str) -> dict[str, str]:
    return {_SEMVER: text}


def _as_fraction(value: Any) -> Fraction:
    if isinstance(value, Mapping) and _QUANTITY in value:
        return Fraction(value[_QUANTITY])
    raise CELError(f"no such overload for {value!r}")


def _parse_quantity(text: str) -> dict[str, str]:
    if not isinstance(text, str):
        raise CELError("quantity() takes a string")
    try:
        return quantity_value(quantities.parse_fraction(text))
    except ValueError as exc:
        raise CELError(f"quantities must match the regular expression: {exc}") from None


def _parse_semver(text: str, normalize: bool = False) -> dict[str, str]:
    if not isinstance(text, str) or not _SEMVER_RE.match(text):
        raise CELError(f"invalid semver {text!r}")
    return _semver_value(text)


def _semver_key(value: Any) -> tuple:
    """Semver 2.0.0 precedence: numbers, then a release above any pre-release, pre-release fields in order."""
    m = _SEMVER_RE.match(value[_SEMVER])
    assert m is not None
    pre = m.group(4)
    fields: tuple = ()
    if pre is not None:
        fields = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)), pre is None, fields)


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Mapping) and _SEMVER in a and isinstance(b, Mapping) and _SEMVER in b:
        ka, kb = _semver_key(a), _semver_key(b)
    else:
        ka, kb = _as_fraction(a), _as_fraction(b)
    return (ka > kb) - (ka < kb)


def _sign(a: Any) -> int:
    v = _as_fraction(a)
    return (v > 0) - (v < 0)


def _as_integer(a: Any) -> int:
    v = _as_fraction(a)
    if v.denominator != 1 or not -(2**63) <= v < 2**63:
        raise CELError("cannot convert value to integer")
    return int(v)


def _semver_part(index: int):
    return lambda v: int(_SEMVER_RE.match(v[_SEMVER]).group(index + 1))  # type: ignore[union-attr]


def _is_valid(parse) -> Any:
    def check(text: str) -> bool:
        try:
            parse(text)
            return True
        except CELError:
            return False

    return check


_FUNCTIONS = {
    "quantity": _parse_quantity,
    "isQuantity": _is_valid(_parse_quantity),
    "semver": _parse_semver,
    "isSemver": _is_valid(_parse_semver),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "add": lambda a, b: quantity_value(_as_fraction(a) + (_as_fraction(b) if isinstance(b, Mapping) else b)),
    "sub": lambda a, b: quantity_value(_as_fraction(a) - (_as_fraction(b) if isinstance(b, Mapping) else b)),
    "sign": _sign,
    "isInteger": lambda a: _as_fraction(a).denominator == 1,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda a: float(_as_fraction(a)),
    "major": _semver_part(0),
    "minor": _semver_part(1),
    "patch": _semver_part(2),
}


def _cel_attribute(value: Any) -> Any:
    return _semver_value(value.text) if isinstance(value, Version) else value


def device_value(device: Device, driver: str, domains: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``device`` as a selector sees it, with an empty map for each domain in ``domains`` the device lacks."""
    attributes: dict[str, dict[str, Any]] = {d: {} for d in domains}
    for name, value in device.attributes.items():
        domain, _, ident = name.rpartition("/")
        attributes.setdefault(domain or driver, {})[ident] = _cel_attribute(value)
    capacity: dict[str, dict[str, Any]] = {d: {} for d in domains}
    for name, cap in device.capacity.items():
        domain, _, ident = name.rpartition("/")
        capacity.setdefault(domain or driver, {})[ident] = quantity_value(cap.value)
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": device.allow_multiple_allocations,
    }


# ---------------------------------------------------------------------------------------------- programs


class Selector:
    """One compiled expression. ``matches`` raises CELError on a runtime error (the allocation then fails)."""

    __slots__ = ("domains", "expression", "program")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            self.program = cel.compile(expression)
        except (ValueError, RuntimeError) as exc:
            # The library prefixes cel-go's issues with "Failed to parse expression '...': "; the API server does not.
            text = re.sub(r"^Failed to parse expression '.*?': ", "", _first_line(exc), flags=re.S)
            raise CELError(f"compilation failed: {text}") from None
        self.domains = frozenset(a or b for a, b in _DOMAIN.findall(expression))

    def matches(self, device: Device, driver: str) -> bool:
        context = cel.Context(functions=_FUNCTIONS)
        context.add_variable("device", device_value(device, driver, self.domains))
        try:
            result = self.program.execute(context)
        except (KeyError, IndexError) as exc:
            raise CELError(f"no such key: {exc.args[0] if exc.args else ''}") from None
        except (RuntimeError, TypeError, ValueError, OverflowError, ZeroDivisionError) as exc:
            raise CELError(_first_line(exc)) from None
        if not isinstance(result, bool):
            raise CELError(f"CEL result of type {type(result).__name__} could not be converted to bool")
        return result


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Selector:
    """The program for ``expression``, compiled once (raises CELError when it does not compile)."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CELError(f"must be at most {MAX_EXPRESSION_LENGTH} bytes long")
    return Selector(expression)


def compile_error(expression: str) -> str | None:
    """Why ``expression`` would be refused by the API server's validation, or None (for dra/objects.py)."""
    try:
        compile_selector(expression)
    except CELError as exc:
        return str(exc)
    return None
