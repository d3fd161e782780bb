"""Kubernetes resource quantities: parsed once at the edge into integers in canonical units.

cpu is kept in millicores, memory-like resources in bytes, everything else (pods, extended resources such as
``qualcomm.com/ai-accelerator``) as plain integer counts, so the engine compares int64 arrays only.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from kubernetes.utils.quantity import parse_quantity

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

_BYTE_RESOURCES = (MEMORY, EPHEMERAL_STORAGE)
# resource.Quantity's grammar (apimachinery pkg/api/resource/quantity.go): a signed decimal number, then one
# suffix: binary SI (Ki..Ei), decimal SI (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2).
# No spaces, no underscores, no "K"; kubernetes.utils.parse_quantity alone accepts all three.
_QUANTITY_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?")
_INT64_MAX = 2**63 - 1
_UNIT = {CPU: "millicores", MEMORY: "bytes", EPHEMERAL_STORAGE: "bytes"}
_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def is_extended(name: str) -> bool:
    """Extended resources carry a domain (``vendor.com/x``) outside kubernetes.io; they are whole numbers."""
    if "/" not in name:
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def is_byte_resource(name: str) -> bool:
    return name in _BYTE_RESOURCES or name.startswith("hugepages-")


def parse(name: str, value: object) -> int:
    """Parse one quantity of resource ``name`` into canonical integer units.

    Raises ValueError with a user-facing reason (the caller adds file/object/field).
    Rounds up like resource.Quantity.MilliValue()/Value(): 0.1m cpu still reserves 1m.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{value!r} is not a quantity")
    text = str(value).strip()
    if not _QUANTITY_RE.fullmatch(text):
        raise ValueError(f"{text!r} is not a valid quantity (examples: 500m, 2, 1.5Gi, 1e3)")
    try:
        number = Decimal(parse_quantity(text))
    except (ValueError, InvalidOperation, TypeError):
        raise ValueError(f"{text!r} is not a valid quantity (examples: 500m, 2, 1.5Gi, 1e3)") from None
    if not number.is_finite():
        raise ValueError(f"{text!r} is not a finite quantity")
    if number < 0:
        raise ValueError(f"{text!r} is negative; quantities must be >= 0")
    if name == CPU:
        amount = math.ceil(number * 1000)
    elif is_extended(name) or name == PODS:
        if number != number.to_integral_value():
            raise ValueError(f"{text!r} must be a whole number for {name}")
        amount = int(number)
    else:
        amount = math.ceil(number)
    if amount > _INT64_MAX:
        raise ValueError(f"{text!r} is too large (more than {_INT64_MAX} {_UNIT.get(name, 'units')})")
    return amount


def format_quantity(name: str, amount: int) -> str:
    """Print canonical units back the way kubectl shows them: 3500m, 4, 64Gi, 8."""
    if name == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if is_byte_resource(name) and amount:
        for suffix, size in _BINARY_SUFFIXES:
            if amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)
