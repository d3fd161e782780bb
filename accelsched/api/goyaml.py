"""What a plain (unquoted, untagged) YAML scalar is, as kubectl and the API server read it.

They read YAML with sigs.k8s.io/yaml, which is go-yaml v2 (go.yaml.in/yaml/v2 resolve.go), not YAML 1.1 as
PyYAML resolves it. The two disagree on real manifests, and a what-if must type a value as the cluster would:

- a timestamp stays a string (go-yaml keeps timestamp-like values decoded into interface{} as written), so an
  unquoted ``2024-01-01`` is fine in a label, env value or argument, and an impossible date is no traceback;
- ``y``/``n`` are booleans, ``08`` and ``1e3`` are numbers (and so refused where a string belongs), while
  ``1:30`` (YAML 1.1's base 60) is a string;
- integers follow Go's ``strconv.ParseInt(s, 0, 64)`` after dropping ``_`` (``0x1f``, ``0o17``, ``017``,
  ``0b101``), then ``ParseUint``, then floats of the ``yamlStyleFloat`` form; what overflows is a string.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from accelsched.errors import quoted

MERGE = "<<"
_WORDS: dict[str, Any] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_NUMERIC_START = frozenset("+-0123456789")
_INT = re.compile(r"([+-]?)(?:0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|0([0-7]*)|([1-9][0-9]*))")
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?")  # what ParseFloat reads of a scalar starting with "."
# A timestamp as go-yaml's parseTimestamp looks for one (it stays a string either way: see the docstring).
_TIMESTAMP_LIKE = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt ].*)?")
_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1


def _go_int(plain: str) -> int | None:
    """strconv.ParseInt(plain, 0, 64), else ParseUint(plain, 0, 64) (no sign there), else None."""
    if len(plain) > 70:  # longer than any 64-bit value in any base
        return None
    m = _INT.fullmatch(plain)
    if m is None:
        return None
    sign, hex_, octal_o, binary, octal_0, decimal = m.groups()
    if hex_ is not None:
        value = int(hex_, 16)
    elif octal_o is not None:
        value = int(octal_o, 8)
    elif binary is not None:
        value = int(binary, 2)
    elif octal_0 is not None:
        value = int(octal_0 or "0", 8)
    else:
        value = int(decimal)
    if sign == "-":
        value = -value
    if _INT64_MIN <= value <= _UINT64_MAX and not (sign and value > 2**63 - 1):
        return value
    return None


def plain(value: str) -> Any:
    """The value go-yaml v2 gives an unquoted scalar: None, bool, int, float or the string itself."""
    if value in _WORDS:
        return _WORDS[value]
    first = value[:1]
    if first == ".":
        return _json_number(float(value), value) if _DOT_FLOAT.fullmatch(value) else value
    if first not in _NUMERIC_START or _TIMESTAMP_LIKE.fullmatch(value):
        return value
    digits = value.replace("_", "")
    number = _go_int(digits)
    if number is not None:
        return number
    if _YAML_STYLE_FLOAT.fullmatch(digits):
        return _json_number(float(digits), value)
    return value


def _json_number(f: float, text: str) -> Any:
    """kubectl turns YAML into JSON before it sends it: an integral float below 1e21 is printed as an integer
    (encoding/json), so ``replicas: 3.0`` or ``1e3`` reach the API server as 3 and 1000."""
    if math.isinf(f):
        return text  # ParseFloat's ErrRange: not a float, so go-yaml keeps the string
    if f.is_integer() and abs(f) < 1e21:
        return int(f)
    return f


def json_key(key: Any) -> str:
    """A mapping key as sigs.k8s.io/yaml makes it a JSON key: ``y:`` and ``true:`` are "true", ``1:`` is "1".
    A null (or other) key is refused there; here ValueError."""
    if type(key) is str:
        return key
    if type(key) is bool:
        return "true" if key else "false"
    if type(key) is int:
        return str(key)
    if type(key) is float:
        if math.isnan(key):
            return ".nan"
        if math.isinf(key):
            return ".inf" if key > 0 else "-.inf"
        return f"{key:.7g}".replace("e+0", "e+").replace("e-0", "e-")  # FormatFloat(k, 'g', -1, 32), near enough
    raise ValueError(f"unsupported map key of type {type(key).__name__}: {quoted(key)}")


class SafeDumper(yaml.CSafeDumper):
    """YAML that kubectl (go-yaml v2), and so accelsched, reads back with the same types: a string go-yaml would
    take for something else (``y``, ``08``, ``1e3``, ``0x1f``) is quoted; PyYAML alone would leave it plain."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if plain(data) is not data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="'")
    return dumper.represent_str(data)


SafeDumper.add_representer(str, _represent_str)


def dump(data: Any, **kwargs: Any) -> str:
    """``yaml.safe_dump`` with SafeDumper."""
    return yaml.dump(data, Dumper=SafeDumper, **kwargs)  # type: ignore[no-any-return]
