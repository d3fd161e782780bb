"""A ClusterQueue's queued workloads, kept by equivalence class: Kueue's ClusterQueue heap and its inadmissible
set (pkg/cache/queue/cluster_queue.go) at a cost that grows with the classes, not with the backlog.

Kueue pops the head of a ClusterQueue's heap (priority, then creation time); with SchedulingEquivalenceHashing a
head that does not fit takes every queued workload of its equivalence class to the inadmissible set with it, and
an event in the cohort tree puts the inadmissible set back. A replay of a quota-bound trace does this at every
departure, over a backlog of thousands of workloads of a few dozen shapes: done on one sorted list, each step
reads the whole backlog. Here each class keeps its own sorted list, and a heap holds each class's first
workload, so a head is a heap top, a class moves in one step, and putting the inadmissible set back merges lists
per class. The order served is the sorted list's: the queue order, ties in the order queued.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Key = Any  # a sort key: tuples compared as Python compares them


class Classes(Generic[T]):
    """Sorted lists of workloads by class (the inadmissible set; and ``Pending``'s store)."""

    def __init__(self, key: Callable[[T], Key], cls: Callable[[T], Hashable]) -> None:
        self.key, self.cls = key, cls
        self.groups: dict[Hashable, list[T]] = {}
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[T]:
        return self.unordered()

    def unordered(self) -> Iterator[T]:
        """Every workload, class by class."""
        for group in self.groups.values():
            yield from group

    def __contains__(self, item: object) -> bool:
        return self._index(item) is not None  # type: ignore[arg-type]

    def _index(self, item: T) -> int | None:
        """Where the workload is in its class's list (found by its key, then by identity), or None."""
        group = self.groups.get(self.cls(item), [])
        key = self.key(item)
        at = bisect.bisect_left(group, key, key=self.key)
        while at < len(group) and self.key(group[at]) == key:
            if group[at] is item:
                return at
            at += 1
        return None

    def remove(self, item: T) -> None:
        """One workload out of its class (a workload deleted while it waits)."""
        if not self.discard(item):
            raise ValueError("not queued")

    def discard(self, item: T) -> bool:
        """One workload out of its class if it is queued (found once: the Workload door forgets a finished one
        without asking first whether it waits). True when it was."""
        at = self._index(item)
        if at is None:
            return False
        self._remove_at(item, at)
        return True

    def _remove_at(self, item: T, at: int) -> Hashable:
        cls = self.cls(item)
        group = self.groups[cls]
        del group[at]
        self.size -= 1
        if not group:
            del self.groups[cls]
        return cls

    def add(self, item: T) -> Hashable:
        """One workload into its class, after those of an equal key (as an append and a stable sort would)."""
        cls = self.cls(item)
        group = self.groups.setdefault(cls, [])
        bisect.insort_right(group, item, key=self.key)
        self.size += 1
        return cls

    def add_class(self, cls: Hashable, items: list[T]) -> None:
        """A sorted list of one class's workloads joins that class: the shorter list goes into the longer."""
        if not items:
            return
        group = self.groups.get(cls)
        self.size += len(items)
        if group is None:
            self.groups[cls] = items
            return
        if len(group) < len(items):
            group, items = items, group
            self.groups[cls] = group
        for item in items:
            bisect.insort_right(group, item, key=self.key)

    def pop_class(self, cls: Hashable) -> list[T]:
        group = self.groups.pop(cls, [])
        self.size -= len(group)
        return group

    def clear(self) -> None:
        for cls in list(self.groups):
            self.pop_class(cls)


class Pending(Classes[T]):
    """A ClusterQueue's queue: ``first`` is the head in queue order; a class leaves whole (``pop_class``)."""

    def __init__(self, key: Callable[[T], Key], cls: Callable[[T], Hashable]) -> None:
        super().__init__(key, cls)
        self._heap: list[tuple[Key, int, Hashable]] = []  # (its first's key, token, class); stale when the token is
        self._token: dict[Hashable, int] = {}  # not the class's current one
        self._tokens = 0

    def __bool__(self) -> bool:
        return self.size > 0

    def __iter__(self) -> Iterator[T]:
        """Every workload in queue order (ties: the class met first in the heap's order, then the order queued)."""
        return heapq.merge(*self.groups.values(), key=self.key)

    def _push(self, cls: Hashable) -> None:
        self._tokens += 1
        self._token[cls] = self._tokens
        heapq.heappush(self._heap, (self.key(self.groups[cls][0]), self._tokens, cls))
        if len(self._heap) > 4 * len(self.groups) + 64:  # stale entries leave only from the top: drop them all
            self._heap = [e for e in self._heap if self._token.get(e[2]) == e[1]]
            heapq.heapify(self._heap)

    def first(self) -> T:
        while True:
            _, token, cls = self._heap[0]
            if self._token.get(cls) == token:
                return self.groups[cls][0]
            heapq.heappop(self._heap)

    def add(self, item: T) -> Hashable:
        cls = super().add(item)
        if self.groups[cls][0] is item:
            self._push(cls)
        return cls

    def add_class(self, cls: Hashable, items: list[T]) -> None:
        if not items:
            return
        before = self.groups.get(cls, [None])[0]
        super().add_class(cls, items)
        if self.groups[cls][0] is not before:
            self._push(cls)

    def _remove_at(self, item: T, at: int) -> Hashable:
        cls = super()._remove_at(item, at)
        if cls not in self.groups:
            self._token.pop(cls, None)
        elif at == 0:
            self._push(cls)
        return cls

    def pop_class(self, cls: Hashable) -> list[T]:
        self._token.pop(cls, None)
        return super().pop_class(cls)
