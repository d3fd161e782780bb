"""Kueue's rules past the structural schema: the CRDs' patterns, sizes and CEL rules, and Kueue's webhooks.

The structural part (types, enums, unknown and required fields) is checked with every other kind against the
compact schema (api/validation.py, made from Kueue's CRDs by hack/gen-schema.py). What is left is worded as the
API server words it: ``Invalid value: "x": ...`` for a pattern, a CEL rule or a webhook's field.Invalid,
``Too many: 17: must have at most 16 items`` for maxItems, ``Duplicate value: ...`` for a repeated key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from accelsched.api import validation as api_validation
from accelsched.errors import Where, clipped, quoted

# The CRDs' patterns (config/components/crd/bases).
NAME_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
POD_SET_NAME_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_NAME_RE = re.compile(NAME_PATTERN)
_POD_SET_NAME_RE = re.compile(POD_SET_NAME_PATTERN)

# Kueue's webhooks (pkg/webhooks/clusterqueue_webhook.go, common.go).
LIMIT_IS_EMPTY = "must be nil when {} is empty"
LENDING_LIMIT = "must be less than or equal to the nominalQuota"
IS_NEGATIVE = "must be greater than or equal to 0"  # apimachinery's IsNegativeErrorMsg
MUST_MATCH_COVERED = "must match the name in coveredResources"


def shown(value: Any) -> str:
    """A value as field.Invalid prints it: strings quoted, numbers bare; bounded as errors.clipped (a field may
    hold megabytes), a string cut before it is quoted."""
    return quoted(value, quote=json.dumps) if isinstance(value, str) else clipped(str(value))


def invalid(where: Where, path: str, value: Any, detail: str) -> Exception:
    return where.error(path, f"Invalid value: {shown(value)}: {detail}")


def check_name(where: Where, value: Any, path: str, pattern: re.Pattern[str] = _NAME_RE, max_length: int = 253) -> str:
    """A reference field (cohortName, clusterQueue, a flavor's name): maxLength, then the CRD's pattern."""
    if not isinstance(value, str):
        return ""
    check_length(where, value, path, 0, max_length)
    if value and not pattern.fullmatch(value):
        raise invalid(where, path, value, f"{path} in body should match '{pattern.pattern}'")
    return value


def check_length(where: Where, value: str, path: str, min_length: int, max_length: int) -> None:
    """A string field's minLength and maxLength, worded as the API server words them."""
    if len(value) > max_length:
        raise where.error(path, f"Too long: may not be more than {max_length} bytes")
    if len(value) < min_length:
        raise invalid(where, path, value, f"{path} in body should be at least {min_length} chars long")


def check_pod_set_name(where: Where, value: Any, path: str) -> str:
    return check_name(where, value, path, _POD_SET_NAME_RE, 63)


def check_items(where: Where, items: Sequence[Any], path: str, max_items: int, min_items: int = 0) -> None:
    if len(items) > max_items:
        raise where.error(path, f"Too many: {len(items)}: must have at most {max_items} items")
    if len(items) < min_items:
        raise invalid(where, path, len(items), f"{path} in body should have at least {min_items} items")


def check_unique(where: Where, items: Sequence[Mapping[str, Any]], path: str, key: str = "name") -> None:
    """x-kubernetes-list-type: map with list-map-keys [name]: the API server refuses a repeated key."""
    seen: set[Any] = set()
    for i, item in enumerate(items):
        if item.get(key) in seen:
            raise where.error(f"{path}[{i}]", f"Duplicate value: {{{json.dumps(key)}:{json.dumps(item.get(key))}}}")
        seen.add(item.get(key))


def check_resource_name(where: Where, name: str, path: str) -> None:
    """validateResourceName: a resource name is a qualified name (content.IsLabelKey)."""
    problem = api_validation.label_key_problem(name)
    if problem:
        raise invalid(where, path, name, problem)


def check_label_map(where: Where, labels: Mapping[str, Any], path: str) -> None:
    """metav1validation.ValidateLabels: keys qualified names, values label values."""
    for key, val in labels.items():
        problem = api_validation.label_key_problem(str(key))
        if problem:
            raise invalid(where, path, str(key), problem)
        problem = api_validation.label_value_problem(str(val))
        if problem:
            raise invalid(where, f"{path}[{key}]", str(val), problem)
