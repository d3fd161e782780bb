"""API writes in order per pod, concurrently across pods: kube-scheduler's asynchronous API calls, in small.

The scheduling loop never waits for the API server: a decision's Binding, the Scheduled or FailedScheduling
event, the PodScheduled condition and ``nominatedNodeName`` all go to a pool of threads. What one pod (or one
gang) is told must still arrive in the order it was decided: a FailedScheduling condition written after the same
pod's later Binding, or a nomination cleared before it was set, would leave the wrong state behind. So writes are
queued per key (the pod, or its gang): the first write of a key starts on the pool, the next ones wait for it,
and different keys run side by side. A key's queue is dropped when it drains, so memory follows the writes in
flight, not the pods ever written.

That a decision never double-books a node while its bind is in flight is the session's part, not this one's: the
pod is assumed (accounted on its node) from the decision until the watch confirms the bind or its failure is
drained (live.scheduler).
"""

from __future__ import annotations

import concurrent.futures
import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("accelsched.live")


class _Write:
    """One write and the keys it is ordered by; ``blocked`` counts the keys where an earlier write still runs;
    ``report``: the object a report (an event, a condition) is about, or "" for another write: a later report of
    the same key, function and object replaces it while it has not started."""

    __slots__ = ("args", "blocked", "fn", "keys", "report")

    def __init__(self, keys: tuple[str, ...], fn: Callable[..., Any], args: tuple[Any, ...], report: str) -> None:
        self.keys, self.fn, self.args, self.blocked, self.report = keys, fn, args, 0, report


class OrderedWriter:
    """Runs each write on ``pool``; writes that share a key one after another, in submission order.

    A write may name several keys: a device-carrying pod's Binding is ordered by the pod and by its node, since the
    kubelet hands a node's devices out in the order its pods' Bindings arrive (the device plugin API does not say
    which pod a request is for), so they must arrive in the order accelsched decided them. Writes wait only for
    earlier ones, so no two can wait for each other."""

    def __init__(
        self, pool: concurrent.futures.Executor, report_pool: concurrent.futures.Executor | None = None
    ) -> None:
        self.pool = pool
        self.report_pool = report_pool or pool
        self._lock = threading.Lock()
        self._queues: dict[str, deque[_Write]] = {}  # key -> its writes, the head running (or about to)

    def submit(self, key: str | tuple[str, ...], fn: Callable[..., Any], *args: Any) -> None:
        self._submit(_Write((key,) if isinstance(key, str) else tuple(dict.fromkeys(key)), fn, args, ""))

    def report(self, key: str, fn: Callable[..., Any], *args: Any, subject: str = "") -> None:
        """A report of a pod's state (its FailedScheduling event and condition), on the report pool, so that
        bindings never queue behind a backlog's reports (kube-scheduler's API dispatcher sends a binding before
        status patches); one still waiting behind an earlier write of its key is replaced by this newer one, as
        the dispatcher merges a pod's queued status patches, so a backlog retried faster than its reports are
        written keeps one report per pod. ``subject``: the object reported on, when it is not the key itself (a
        gang's members share the gang's key, and each member's report stands)."""
        subject = subject or key
        with self._lock:
            queue = self._queues.get(key)
            last = queue[-1] if queue else None
            if last is not None and last.report == subject and last.fn == fn and last.blocked and last.keys == (key,):
                last.args = args
                return
        self._submit(_Write((key,), fn, args, subject))

    def _submit(self, write: _Write) -> None:
        with self._lock:
            for k in write.keys:
                queue = self._queues.setdefault(k, deque())
                queue.append(write)
                write.blocked += len(queue) > 1
            ready = write.blocked == 0
        if ready:
            self._start(write)

    def _start(self, write: _Write) -> None:
        try:
            (self.report_pool if write.report else self.pool).submit(self._run, write)
        except RuntimeError:  # the pool is shut down (stopping): the write dies with the process
            self._finish(write)

    def _run(self, write: _Write) -> None:
        """Run ``write``, then on this same thread each write it was the last to hold back (a pool being shut down
        still drains what was queued before)."""
        ready = [write]
        while ready:
            current = ready.pop(0)
            try:
                current.fn(*current.args)
            except Exception:  # one failed write must not stall the pod's later ones
                log.exception("API write failed", extra={"key": current.keys[0]})
            ready.extend(self._finish(current))

    def _finish(self, write: _Write) -> list[_Write]:
        """Take ``write`` off its queues; the writes that were waiting only for it, now free to start."""
        free = []
        with self._lock:
            for k in write.keys:
                queue = self._queues[k]
                queue.popleft()  # a write runs only at the head of every queue it is in
                if not queue:
                    del self._queues[k]
                    continue
                head = queue[0]
                head.blocked -= 1
                if head.blocked == 0:
                    free.append(head)
        return free

    @property
    def in_flight(self) -> int:
        """Keys with a write running or queued."""
        with self._lock:
            return len(self._queues)


class PriorityGate:
    """Hands writes to ``writer`` at most ``slots`` at a time; those waiting for a slot start highest ``priority``
    first, ties in the order they came. Writes that share a key still run one after another (the writer's part).

    For the queue door's Workload admissions and evictions (live.queuedoor): admission decides faster than the API
    server takes its writes while Kueue's performance runner creates its Workloads (thousands of its requests in
    flight at once), and in submission order a higher-priority Workload's admission, decided a moment later, waited
    behind every lower-priority one decided before it: at large-scale a large Workload's admission took 33 s to show
    where Kueue, admitting 50 a second from its priority-ordered heap, showed it in 17 s. Kueue's heap serves a
    backlog by priority, and so does this."""

    def __init__(self, writer: OrderedWriter, slots: int) -> None:
        self.writer, self.slots = writer, slots
        self._lock = threading.Lock()
        self._waiting: list[tuple[int, int, str, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0
        self._running = 0

    def submit(self, key: str, fn: Callable[..., Any], *args: Any, priority: int = 0) -> None:
        with self._lock:
            self._seq += 1
            heapq.heappush(self._waiting, (-priority, self._seq, key, fn, args))
        self._pump()

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def _pump(self) -> None:
        while True:
            with self._lock:
                if self._running >= self.slots or not self._waiting:
                    return
                _, _, key, fn, args = heapq.heappop(self._waiting)
                self._running += 1
            self.writer.submit(key, self._run, fn, args)

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            fn(*args)
        finally:
            with self._lock:
                self._running -= 1
            self._pump()


class Deferred:
    """Calls each function handed to it once its delay is over, on one thread of its own, started with the first.

    For the writes worth holding back a moment because a later decision often makes them moot (the queue door's
    Pending conditions, live.queuedoor): one thread and a heap, not a timer thread per write, since a backlog
    defers thousands. A call that is due runs on this thread, so what it does must be short (hand a write to a
    pool). Calls still waiting when it stops are dropped: they were reports of a scheduler that is going away."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._due: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        with self._cond:
            if self._stopped:
                return
            self._seq += 1
            heapq.heappush(self._due, (time.monotonic() + delay, self._seq, fn, args))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._due.clear()
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def run_all(self) -> None:
        """Run every call waiting, now, on the caller's thread, whatever its time (the tests' clock)."""
        with self._cond:
            due, self._due = sorted(self._due), []
        for _, _, fn, args in due:
            fn(*args)

    def __len__(self) -> int:
        with self._cond:
            return len(self._due)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._due or self._due[0][0] > time.monotonic()):
                    self._cond.wait(self._due[0][0] - time.monotonic() if self._due else None)
                if self._stopped:
                    return
                _, _, fn, args = heapq.heappop(self._due)
            try:
                fn(*args)
            except Exception:  # one failed call must not stop the later ones
                log.exception("deferred call failed", extra={"key": self.name})
