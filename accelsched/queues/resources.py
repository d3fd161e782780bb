"""Resource amounts as Kueue counts and prints them (pkg/resources: ResourceValue and ResourceFormatter).

Kueue keeps every amount as an int64: millicores for cpu, whole units (rounded up) for everything else; it prints
them back as resource.Quantity does (``NewMilliQuantity`` for cpu, binary for memory and ephemeral-storage,
decimal otherwise), so its messages say ``1500m``, ``2``, ``1k`` or ``64Gi``.
"""

from __future__ import annotations

import functools
import math
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, Decimal
from typing import Any

from accelsched.api import quantity

# resource.Quantity's decimal and binary suffixes, largest first.
_DECIMAL = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3), ("", 0), ("m", -3), ("u", -6), ("n", -9))
_BINARY = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def value(name: str, amount: Any) -> int:
    """resources.ResourceValue: millicores for cpu, whole units rounded up for the rest. ValueError when the text
    is no quantity; a negative amount is kept (the webhooks refuse it with their own words)."""
    exact = quantity.parse_fraction(amount)
    return math.ceil(exact * 1000) if name == quantity.CPU else math.ceil(exact)


def _decimal(number: int, exponent: int) -> str:
    """resource.Quantity's DecimalSI form of number * 10**exponent (exponent a multiple of 3, from -9 up)."""
    if number == 0:
        return "0"
    while number % 1000 == 0 and exponent < 18:
        number //= 1000
        exponent += 3
    suffix = next(s for s, e in _DECIMAL if e == exponent)
    return f"{number}{suffix}"


def format_scaled(value: float) -> str:
    """How Kueue prints a quantity its resource.MulByFloat made (admission fair sharing's decayed usage): DecimalSI
    at nano precision, rounded down (``1500m``, ``687527n``, ``12``). ``value`` is accelsched's float for Kueue's
    decimal: its shortest text, cleared of binary noise below 1e-12 first (0.1 + 0.2 is 300m, as Kueue's decimal
    sum is), so the last nano digits of a large or long-decayed amount can differ from Kueue's."""
    exact = Decimal(repr(float(value))).quantize(Decimal("1e-12"), ROUND_HALF_EVEN)
    nanos = int(exact.quantize(Decimal("1e-9"), ROUND_DOWN).scaleb(9))
    return _decimal(nanos, -9)


def _binary(amount: int) -> str:
    """BinarySI: a power-of-1024 suffix when exact; below 1024, or not a multiple, DecimalSI (CanonicalizeBytes)."""
    if -1024 < amount < 1024:
        return _decimal(amount, 0)
    for suffix, shift in _BINARY:
        if amount % (1 << shift) == 0:
            return f"{amount >> shift}{suffix}"
    return _decimal(amount, 0)


@functools.lru_cache(maxsize=8192)
def format_amount(name: str, amount: int) -> str:
    """ResourceFormatter.ResourceQuantityString: how Kueue prints an amount of ``name`` in its messages. Cached:
    live mode's Workload door prints every admission's and every ClusterQueue's usage each round (a tenth of its
    CPU at 1,000 ClusterQueues, the same few amounts again and again)."""
    if name == quantity.CPU:
        return _decimal(amount, -3)
    if quantity.is_byte_resource(name):
        return _binary(amount)
    return _decimal(amount, 0)
