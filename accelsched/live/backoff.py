"""Backoffs: kube-scheduler's per-pod backoff (podInitialBackoffSeconds doubling up to podMaxBackoffSeconds), and
the exponential retry delay used when the API server is unreachable."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def pod_backoff(attempts: int, initial: float = 1.0, maximum: float = 10.0) -> float:
    """kube-scheduler's backoff after ``attempts`` failed attempts: 1 s, 2 s, 4 s, 8 s, then 10 s."""
    if attempts <= 0:
        return 0.0
    return min(initial * 2 ** (attempts - 1), maximum)


@dataclass
class Backoff:
    """Exponential delay for reconnecting: ``initial`` doubling up to ``maximum``; ``reset`` after a success."""

    initial: float = 0.2
    maximum: float = 5.0
    _current: float = field(default=0.0, init=False)

    def next(self) -> float:
        self._current = self.initial if self._current == 0 else min(self._current * 2, self.maximum)
        return self._current

    def reset(self) -> None:
        self._current = 0.0


@dataclass
class PodBackoff:
    """When each Pending pod may be tried again: per pod uid, its failed attempts and the time of the last one."""

    initial: float = 1.0
    maximum: float = 10.0
    attempts: dict[str, tuple[int, float]] = field(default_factory=dict)

    def failed(self, uid: str, now: float) -> None:
        count, _ = self.attempts.get(uid, (0, 0.0))
        self.attempts[uid] = (count + 1, now)

    def ready_at(self, uid: str) -> float:
        """The earliest time the pod may be attempted again (0 when it never failed)."""
        count, last = self.attempts.get(uid, (0, 0.0))
        return last + pod_backoff(count, self.initial, self.maximum) if count else 0.0

    def forget(self, uid: str) -> None:
        self.attempts.pop(uid, None)


class BackoffPool(dict[str, Any]):
    """The pods waiting out their backoff, noting when one enters: the loop looks through them again only then or
    once the earliest backoff it saw is over, not in every round (a backlog keeps thousands here)."""

    changed = True

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.changed = True

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self.changed = True
