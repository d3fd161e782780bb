"""Per-node values cached by key and kept current from a log of the nodes that changed.

ClusterState.node_values keeps, per request shape, an array over nodes (a score, a fit) and after a bind
recomputes only the nodes the change log names: the work per bind stays one node's, not the cluster's (design
principle 3). The pieces live here so that the state module keeps to what the cluster holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# Values per node derived from that node's state alone, given the node indices to compute.
NodeFunction = Callable[[np.ndarray], np.ndarray]
NODE_CACHE_SIZE = 256
SCALAR_UPDATE_LIMIT = 8


@dataclass
class NodeCache:
    values: np.ndarray
    seen: int  # position in ClusterState.changes up to which ``values`` is current
    epoch: int = field(default=0)
    best: BestNodes | None = None


class BestNodes:
    """The nodes holding the maximum of a cached array, kept as values change one node at a time, so the
    scheduler picks among the best nodes without scanning every node (O(1) per bind in the common case)."""

    def __init__(self, values: np.ndarray) -> None:
        self.top = int(values.max())
        self.members = np.flatnonzero(values == self.top).tolist()
        self.pos = {node: k for k, node in enumerate(self.members)}

    def update(self, node: int, value: int) -> bool:
        """Record ``node``'s new value; False when the maximum left every node (rebuild from the array)."""
        if value > self.top:
            self.top, self.members, self.pos = value, [node], {node: 0}
        elif value == self.top:
            if node not in self.pos:
                self.pos[node] = len(self.members)
                self.members.append(node)
        elif node in self.pos:
            k = self.pos.pop(node)
            last = self.members.pop()
            if last != node:
                self.members[k] = last
                self.pos[last] = k
        return bool(self.members)


class ChangeLog:
    """Node indices in the order they changed (assume/forget/touch), addressed by absolute position so that
    each reader (node_values, the volume indexes, learned shapes) keeps a cursor, ``log[seen:]``.

    A state that lives for days (live mode applies every cluster change in place) must not keep its whole
    history: past ``4 n`` entries the older half is dropped. A reader whose cursor falls before what is kept
    gets every node (it recomputes all), which node_values would do anyway that far behind."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.offset = 0  # absolute position of _items[0]
        self._items: list[int] = []
        self.limit = max(4 * n, 4096)

    def restarted(self, n: int) -> ChangeLog:
        """An empty log over ``n`` nodes that goes on from this one's end: readers behind it see every node (the
        node indices before it are void once the node set changed)."""
        log = ChangeLog(n)
        log.offset = len(self)
        return log

    def append(self, node: int) -> None:
        self._items.append(node)
        if len(self._items) > self.limit:
            drop = len(self._items) // 2
            del self._items[:drop]
            self.offset += drop

    def __len__(self) -> int:
        return self.offset + len(self._items)

    def __getitem__(self, where: slice) -> list[int]:
        if not isinstance(where, slice) or where.stop is not None or where.step is not None:
            raise TypeError("ChangeLog supports log[start:] only")
        start = where.start or 0
        if start < self.offset:
            return list(range(self.n))
        return self._items[start - self.offset :]

    @property
    def retained(self) -> int:
        return len(self._items)
