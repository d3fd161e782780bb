"""Integer sets written the way the kernel writes cpulists: ``0-15,32-47,60``."""

from __future__ import annotations

from collections.abc import Iterable


def compact(values: Iterable[int]) -> str:
    """Sorted, de-duplicated, runs of consecutive integers as ``a-b``: [0, 1, 4, 5, 7] -> ``0-1,4-5,7``."""
    ordered = sorted(set(values))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
