"""Counter bookkeeping of the DRA allocator (dra/allocator.py): which pools can still give a device for a request
signature (_LivePools) and whether a device's consumesCounters fit what its pool's counter sets have left.
"""

from __future__ import annotations

from collections.abc import Mapping

from accelsched.dra.pools import Entry, Pool


class _LivePools:
    """_Search.live_pools' answer for one pools list and request signature, and what it was computed from."""

    __slots__ = ("by_name", "indices", "members", "pools", "seen", "serial")

    def __init__(self, pools: list[Pool], serial: int, seen: int) -> None:
        self.pools = pools  # kept: the key holds its id
        self.serial = serial  # the AllocatedState's
        self.seen = seen  # how much of its changes is reflected
        self.indices: list[int] = []  # sorted
        self.members: set[int] = set()  # the same, for lookups
        self.by_name: dict[str, list[int]] = {}


def _negative_amounts(e: Entry) -> bool:
    """Whether taking a share of ``e`` or its counters could consume a negative amount (the API accepts negative
    quantities): then taking more elsewhere may make room, and live_pools never calls its pool dead."""
    if any(amount < 0 for _, counters in e.consumes for _, amount in counters):  # type: ignore[operator]
        return True
    for cap in e.device.capacity.values():
        policy = cap.request_policy
        amounts = [cap.value]
        if policy is not None:
            amounts += [policy.default] if policy.default is not None else []
            amounts += list(policy.valid_values)
            if policy.valid_range is not None:
                amounts.append(policy.valid_range.min)
        if any(x < 0 for x in amounts):
            return True
    return False


def _counters_fit(e: Entry, available: Mapping[str, Mapping[str, object]]) -> bool:
    """reserve_counters with nothing consumed yet in the search."""
    used: dict[tuple[str, str], object] = {}
    for set_name, counters in e.consumes:
        for name, amount in counters:
            used[(set_name, name)] = used.get((set_name, name), 0) + amount  # type: ignore[operator]
    for (set_name, name), amount in used.items():
        limit = available.get(set_name)
        if limit is None:
            continue
        have = limit.get(name)
        if have is not None and have < amount:  # type: ignore[operator]
            return False
    return True
