"""Kubernetes resource quantities: parsed once at the edge into integers in canonical units.

cpu is kept in millicores, memory-like resources in bytes, everything else (pods, extended resources such as
``qualcomm.com/ai-accelerator``) as plain integer counts, so the engine compares int64 arrays only.
"""

from __future__ import annotations

import re
from fractions import Fraction

from accelsched.errors import quoted

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

_BYTE_RESOURCES = (MEMORY, EPHEMERAL_STORAGE)
# resource.Quantity's grammar (apimachinery pkg/api/resource/quantity.go): a signed decimal number, then one
# suffix: binary SI (Ki..Ei), decimal SI (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2).
# No spaces, no underscores, no "K" (the Python kubernetes client's parse_quantity accepts all three, and
# expands exponents into huge integers, so it is not used). Groups: sign, whole, fraction, fraction without a
# whole part, exponent, suffix.
GRAMMAR = re.compile(r"([+-]?)(?:([0-9]+)(?:\.([0-9]*))?|\.([0-9]+))(?:[eE]([+-]?[0-9]+)|([KMGTPE]i|[numkMGTPE]))?")
_DECIMAL_EXP = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_EXP = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
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
    Time and memory are linear in the text: a huge exponent (``1e9999999``) is judged by its magnitude,
    never expanded, and anything past int64 in canonical units (about 2^63 millicores or bytes, the most a
    resource.Quantity holds) is an error rather than a silently capped value.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{value!r} is not a quantity")
    text = str(value).strip()
    if len(text) <= 15 and text.isascii() and text.isdigit():  # plain counts ("110", "8"): the common case
        return int(text) * 1000 if name == CPU else int(text)
    match = GRAMMAR.fullmatch(text)
    if match is None:
        raise ValueError(f"{quoted(text)} is not a valid quantity (examples: 500m, 2, 1.5Gi, 1e3)")
    sign, whole, frac, frac_only, exponent, suffix = match.groups()
    frac = frac or frac_only
    digits = (whole or "") + (frac or "")
    scale = -len(frac or "")  # value = int(digits) * 10**scale * 2**binary
    binary = 0
    if exponent is not None:
        exponent = exponent.lstrip("+")
        negative_exp = exponent.startswith("-")
        exp_digits = exponent.lstrip("-").lstrip("0") or "0"
        if len(exp_digits) > 18:  # past int64: resource.Quantity cannot parse the suffix either
            raise ValueError(f"{quoted(text)}: unable to parse quantity's suffix (exponent out of range)")
        scale += -int(exp_digits) if negative_exp else int(exp_digits)
    elif suffix:
        if suffix.endswith("i"):
            binary = _BINARY_EXP[suffix]
        else:
            scale += _DECIMAL_EXP[suffix]
    if name == CPU:
        scale += 3  # millicores
    stripped = digits.lstrip("0")
    if not stripped:
        return 0
    if sign == "-":
        raise ValueError(f"{quoted(text)} is negative; quantities must be >= 0")
    trimmed = stripped.rstrip("0")
    scale += len(stripped) - len(trimmed)
    # Magnitude first, in digits: 2**60 is below 10**19, int64 max below 10**19.
    magnitude = len(trimmed) + scale + (binary * 3 + 9) // 10
    if magnitude > 20:
        raise ValueError(f"{quoted(text)} is too large (more than {_INT64_MAX} {_UNIT.get(name, 'units')})")
    whole_units = is_extended(name) or name == PODS
    if magnitude < -20:  # far below one unit: rounds up to 1, as MilliValue()/Value() do
        if whole_units:
            raise ValueError(f"{quoted(text)} must be a whole number for {name}")
        return 1
    # Past 40 significant digits only "is there a remainder" matters; the digits left out are not all zero.
    sticky = len(trimmed) > 40
    if sticky:
        scale += len(trimmed) - 40
        trimmed = trimmed[:40]
    numerator = int(trimmed) << binary
    if scale >= 0:
        amount, remainder = numerator * 10**scale, 0
    else:
        amount, remainder = divmod(numerator, 10**-scale)
    if remainder or sticky:
        if whole_units:
            raise ValueError(f"{quoted(text)} must be a whole number for {name}")
        amount += 1
    if amount > _INT64_MAX:
        raise ValueError(f"{quoted(text)} is too large (more than {_INT64_MAX} {_UNIT.get(name, 'units')})")
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


def parse_fraction(text: object) -> Fraction:
    """A quantity as its exact value (DRA capacities, counters and CEL's ``quantity()``): signed, unrounded.

    Raises ValueError for text resource.Quantity would not parse, and for magnitudes past what it holds (about
    2^63 in the quantity's own units, or finer than 1e-9), so time and memory stay linear in the text.
    """
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise ValueError(f"{quoted(text)} is not a quantity")
    text = str(text).strip()
    match = GRAMMAR.fullmatch(text)
    if match is None:
        raise ValueError(f"{quoted(text)} is not a valid quantity (examples: 500m, 2, 1.5Gi, 1e3)")
    sign, whole, frac, frac_only, exponent, suffix = match.groups()
    frac = frac or frac_only or ""
    digits = ((whole or "") + frac).lstrip("0") or "0"
    if len(digits) > 40:
        raise ValueError(f"{quoted(text)} has too many digits")
    scale = -len(frac)
    binary = 0
    if exponent is not None:
        e = int(exponent)
        if abs(e) > 40:
            raise ValueError(f"{quoted(text)}: exponent out of range")
        scale += e
    elif suffix:
        if suffix.endswith("i"):
            binary = _BINARY_EXP[suffix]
        else:
            scale += _DECIMAL_EXP[suffix]
    value = Fraction(int(digits) << binary) * Fraction(10) ** scale
    if value > _INT64_MAX:
        raise ValueError(f"{quoted(text)} is too large")
    return -value if sign == "-" else value
