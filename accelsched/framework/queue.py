"""The scheduling queue: an active heap ordered by the QueueSort plugin, and an unschedulable pool.

A pod that fits nowhere waits in the unschedulable pool until a cluster event could make it fit; the plugins
that rejected it decide (kube-scheduler's QueueingHints). Only then does it go back to the active heap, so a
stuck pod costs nothing while the rest of the queue moves.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelsched.api.objects import Pod

# (waiting pod, pod that was just bound) -> might the waiting pod fit now?
QueueingHint = Callable[[Pod, Pod], bool]


@dataclass
class _Unschedulable:
    pod: Pod
    plugins: frozenset[str] = field(default_factory=frozenset)


class SchedulingQueue:
    def __init__(self, sort_key: Callable[[Pod, int], tuple[Any, ...]], hints: dict[str, QueueingHint]) -> None:
        self._sort_key = sort_key
        self._hints = hints
        self._heap: list[tuple[tuple[Any, ...], int, Pod]] = []
        self._seq = itertools.count()
        self._unschedulable: dict[str, _Unschedulable] = {}
        # The waiting pods a bind can help: rejected by at least one plugin with a queueing hint. Pods rejected
        # only for capacity never move on a bind, so a bind need not look at them.
        self._hinted: dict[str, _Unschedulable] = {}

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, pod: Pod) -> None:
        seq = next(self._seq)
        heapq.heappush(self._heap, (self._sort_key(pod, seq), seq, pod))

    def take(self, wanted: Callable[[Pod], bool]) -> list[Pod]:
        """Remove and return the queued pods ``wanted`` selects (a gang's other members), in queue order."""
        chosen = sorted((entry for entry in self._heap if wanted(entry[2])), key=lambda e: (e[0], e[1]))
        if chosen:
            self._heap = [entry for entry in self._heap if not wanted(entry[2])]
            heapq.heapify(self._heap)
        return [entry[2] for entry in chosen]

    def pop(self) -> Pod | None:
        return heapq.heappop(self._heap)[2] if self._heap else None

    def add_unschedulable(self, pod: Pod, plugins: frozenset[str]) -> None:
        entry = _Unschedulable(pod, plugins)
        self._unschedulable[pod.key] = entry
        if any(name in self._hints for name in plugins):
            self._hinted[pod.key] = entry

    @property
    def unschedulable(self) -> list[Pod]:
        return [u.pod for u in self._unschedulable.values()]

    def assigned_pod_added(self, bound: Pod) -> int:
        """A pod was bound: move back the waiting pods one of whose rejecting plugins says it may now fit."""
        hints = self._hints
        moved = [
            key
            for key, u in self._hinted.items()
            if any(name in hints and hints[name](u.pod, bound) for name in u.plugins)
        ]
        for key in moved:
            del self._hinted[key]
            self.add(self._unschedulable.pop(key).pod)
        return len(moved)

    def requeue_unschedulable(self, may_help: Callable[[Pod, frozenset[str]], bool] | None = None) -> int:
        """A pod was deleted: the waiting pods it may help go back to the active heap (all without ``may_help``,
        the event's queueing hint over a waiting pod and the plugins that rejected it)."""
        moved = [
            key for key, entry in self._unschedulable.items() if may_help is None or may_help(entry.pod, entry.plugins)
        ]
        for key in moved:
            self._hinted.pop(key, None)
            self.add(self._unschedulable.pop(key).pod)
        return len(moved)
