"""Live mode's parsed Kueue Workloads, kept from one session rebuild to the next until their resourceVersion changes.

Kueue's scheduler keeps a ``workload.Info`` per Workload in its cache and queue manager, updated by the informer's
events; it does not read every Workload again when one changes. ``accelsched run`` rebuilds its session (and runs
admission, accelsched/queues) from the cache's objects, and in a deep queue (benchmarks/deepqueue.py: a thousand
Workloads waiting in one ClusterQueue) reading every Workload again each round was most of the round: the
Workload's own fields and each pod set's template read as a pod. Here a Workload's reading (the parsed object,
which keeps its templates as read, or the error that left it out) is kept under its uid and resourceVersion: the
API server gives every write a new resourceVersion, so an unchanged version is an unchanged object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from accelsched.live.kube import JSON

T = TypeVar("T")


class ParsedByVersion(Generic[T]):
    """Each object's reading under its uid and resourceVersion. ``read`` is called once per round with every
    object the cache holds; readings of objects not seen in a round are dropped then (deleted or replaced)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], T] = {}
        self._seen: dict[tuple[str, str], T] = {}
        self.hits = 0  # readings served from the cache (for tests and the benchmark's notes)

    def read(self, doc: JSON, parse: Callable[[JSON], T]) -> T:
        """``parse(doc)``, or what it gave for this object at this resourceVersion before. An object without a
        uid or resourceVersion (not from an API server) is parsed every time."""
        meta = doc.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        version = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if not (isinstance(uid, str) and uid and isinstance(version, str) and version):
            return parse(doc)
        key = (uid, version)
        if key in self._kept:
            self.hits += 1
            value = self._kept[key]
        else:
            value = parse(doc)
        self._seen[key] = value
        return value

    def end_round(self) -> None:
        """Keep only the readings of this round's objects."""
        self._kept, self._seen = self._seen, {}
