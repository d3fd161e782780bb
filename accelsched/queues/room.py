"""Admitted means placeable: a workload that quota admits and the engine cannot place whole gives its quota back and
waits for room, out of its queue, until capacity frees (a pod leaves, a node joins).

The rule of ``simulate --queues``' replay (sim/queues.py) and of ``accelsched run``'s second door (queued pods,
live/queuedoor.py). Kueue keeps such a workload admitted, its pods Pending on nodes that cannot take them, and
holding quota another workload could run on; the Kueue oracle and the first door (Workload objects) admit as Kueue
does: nothing ever waits here for them (``QueueObjects.room_waits`` stays empty).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

ROOM = "waiting for room"  # how a room wait's message starts (a quota wait's starts "waiting for quota")

T = TypeVar("T")


def room_message(cluster_queue: str, reason: str) -> str:
    """What a workload waiting for room shows: its quota was there, the nodes' room was not (the engine's reason)."""
    return (
        f"{ROOM}: quota in ClusterQueue {cluster_queue} admits it but no node can take it whole ({reason}); "
        "its quota is given back until capacity frees"
    )


class RoomWaits(Generic[T]):
    """The workloads waiting for room, by key, each with what the caller requeues it by and its message."""

    def __init__(self) -> None:
        self.waiting: dict[str, tuple[T, str]] = {}
        self.ever: set[str] = set()  # every workload that ever waited (the figure "waited for room")

    def __len__(self) -> int:
        return len(self.waiting)

    def __contains__(self, key: str) -> bool:
        return key in self.waiting

    def __iter__(self) -> Iterator[T]:
        return (item for item, _ in self.waiting.values())

    def park(self, key: str, item: T, message: str) -> None:
        """Quota admitted it and the engine could not place it: the caller has given its quota back."""
        self.waiting[key] = (item, message)
        self.ever.add(key)

    def messages(self) -> dict[str, str]:
        return {key: message for key, (_, message) in self.waiting.items()}

    def freed(self, fits: Callable[[T], bool] | None = None) -> list[T]:
        """Capacity freed: those that may fit now (all, without ``fits``) leave the waits and are returned, to go
        back to their queues. The others stay: requeued, they would be admitted and given back again at every
        departure."""
        out = []
        for key, (item, _) in list(self.waiting.items()):
            if fits is None or fits(item):
                del self.waiting[key]
                out.append(item)
        return out
