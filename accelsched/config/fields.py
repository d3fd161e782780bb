"""Strict, typed decoding of a KubeSchedulerConfiguration: what the v1 types and strict decoding allow.

An unknown field, a float or string where an int belongs, .inf or .nan, a duration Go cannot parse: each is an
InputError naming the field path, as kube-scheduler refuses the file at start-up.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from accelsched.errors import InputError

OBJ = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_PARALLELISM = 16
DEFAULT_POD_INITIAL_BACKOFF_SECONDS, DEFAULT_POD_MAX_BACKOFF_SECONDS = 1, 10
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
# A Go time.Duration is int64 nanoseconds: kube-scheduler multiplies the backoff seconds into one (and Python's
# timed waits stop at threading.TIMEOUT_MAX, the same 292 years), so a longer backoff is refused here.
MAX_DURATION_SECONDS = (2**63 - 1) // 10**9
DNS1123_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_RE = re.compile(rf"{DNS1123_LABEL}(?:\.{DNS1123_LABEL})*")
DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start"
    " and end with an alphanumeric character (the spec.schedulerName a pod can ask for)"
)
_GO_DURATION_RE = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_GO_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
LEADER_ELECTION_FIELDS = {
    "leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock", "resourceName",
    "resourceNamespace",
}  # fmt: skip
CLIENT_CONNECTION_FIELDS = {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}


def go_value(value: Any) -> str:
    """A value the way field.Invalid prints it (%#v): strings quoted, numbers bare."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)


class Fields:
    """Strict, typed access to one mapping of the config at ``path`` (what the v1 types and strict decoding allow:
    an unknown field, a float or string where an int belongs, .inf or .nan, are errors)."""

    def __init__(self, source: str, doc: Any, path: str, fields: set[str]) -> None:
        self.source, self.path = source, path
        if doc is None:
            doc = {}
        if not isinstance(doc, Mapping):
            raise self.error("", f"must be a mapping, got {type_name(doc)}")
        unknown = sorted(map(str, set(doc) - fields))
        if unknown:
            raise self.error(unknown[0], f"unknown field(s) {', '.join(unknown)}")
        self.doc = doc

    def error(self, name: str, message: str) -> InputError:
        return InputError(message, source=self.source, obj=OBJ, field=join_path(self.path, name) or "(top level)")

    def value(self, name: str, kinds: tuple[type, ...], want: str, default: Any) -> Any:
        value = self.doc.get(name)
        if value is None:
            return default
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise self.error(name, f"must be {want}, got {type_name(value)} {short(value)}")
        return value

    def integer(self, name: str, bits: tuple[int, int], default: Any) -> Any:
        value = self.value(name, (int,), "an integer", default)
        if value is not default and not bits[0] <= value <= bits[1]:
            size = 32 if bits == INT32 else 64
            raise self.error(name, f"{short(value)} does not fit an int{size}")
        return value

    def number(self, name: str, default: float) -> float:
        value = self.value(name, (int, float), "a number", default)
        if (isinstance(value, float) and not math.isfinite(value)) or abs(value) > 3.4e38:  # float32, as qps
            raise self.error(name, f"must be a finite float32, got {value}")
        return float(value)

    def boolean(self, name: str, default: Any) -> Any:
        return self.value(name, (bool,), "true or false", default)

    def string(self, name: str, default: Any) -> Any:
        return self.value(name, (str,), "a string", default)

    def list(self, name: str) -> list[Any]:
        return self.value(name, (list,), "a list", None) or []

    def duration(self, name: str, default: float) -> float:
        """A metav1.Duration: a Go duration string such as 15s, 1m30s or 100ms, in seconds."""
        text = self.string(name, None)
        if text is None:
            return default
        body = text[1:] if text[:1] in "+-" else text
        parts = _GO_DURATION_RE.findall(body)
        if body == "0":
            return 0.0
        if not parts or "".join(n + u for n, u in parts) != body:
            raise self.error(name, f"{go_value(text)} is not a duration like 15s, 1m30s or 100ms")
        seconds = sum(float(n) * _GO_DURATION_UNITS[u] for n, u in parts)
        if seconds > MAX_DURATION_SECONDS:
            raise self.error(name, f"{go_value(text)} is longer than a Go time.Duration holds")
        return -seconds if text.startswith("-") else seconds

    def sub(self, name: str, fields: set[str]) -> Fields:
        return Fields(self.source, self.doc.get(name), join_path(self.path, name), fields)


def join_path(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", float: "a float"}.get(
        type(value), type(value).__name__
    )


def short(value: Any) -> str:
    if isinstance(value, int) and value.bit_length() > 100:  # str() of a 5,000-digit int is itself an error
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
