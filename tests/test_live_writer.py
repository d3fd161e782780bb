"""live.writer: API writes concurrent across pods, in submission order per pod (kube-scheduler's async API calls)."""

from __future__ import annotations

import concurrent.futures
import threading
import time

from accelsched.live.writer import Deferred, OrderedWriter, PriorityGate


class _Recorder:
    """A write that records its name, and waits for ``release`` first when asked (a slow API call)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.done: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, name: str, wait: bool = False) -> None:
        if wait:
            assert self.release.wait(5)
        with self._lock:
            self.done.append(name)


def _recording_writer() -> tuple[
    concurrent.futures.ThreadPoolExecutor, OrderedWriter, threading.Event, list[str], _Recorder
]:
    pool = concurrent.futures.ThreadPoolExecutor(4)
    write = _Recorder()
    return pool, OrderedWriter(pool), write.release, write.done, write


def test_writes_of_one_pod_run_in_order_and_other_pods_do_not_wait_for_them() -> None:
    pool, writer, release, done, write = _recording_writer()

    writer.submit("ns/a", write, "a-bind", True)  # a slow bind: the API server has not answered yet
    writer.submit("ns/a", write, "a-event")
    writer.submit("ns/a", write, "a-condition")
    for i in range(5):
        writer.submit(f"ns/b{i}", write, f"b{i}")
    deadline = time.monotonic() + 5
    while len(done) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(done) == [f"b{i}" for i in range(5)]  # the other pods went on
    assert writer.in_flight == 1  # a's event and condition wait behind its bind
    release.set()
    pool.shutdown(wait=True)
    assert [d for d in done if d.startswith("a-")] == ["a-bind", "a-event", "a-condition"]
    assert writer.in_flight == 0  # drained keys leave nothing behind


def test_a_failed_write_does_not_stall_the_next_ones() -> None:
    pool = concurrent.futures.ThreadPoolExecutor(2)
    writer = OrderedWriter(pool)
    done: list[int] = []

    def boom() -> None:
        raise RuntimeError("500")

    writer.submit("ns/a", boom)
    writer.submit("ns/a", done.append, 1)
    pool.shutdown(wait=True)
    assert done == [1]


def test_writes_sharing_a_node_key_run_in_submission_order_while_other_nodes_go_on() -> None:
    """Device pods' Bindings are ordered by pod and by node: a slow bind on node-a holds back the next bind to
    node-a (another pod) but not a bind to node-b, and a pod's own later writes still follow its bind."""
    pool, writer, release, done, write = _recording_writer()

    writer.submit(("ns/p1", "node:a"), write, "p1-bind", True)
    writer.submit(("ns/p2", "node:a"), write, "p2-bind")
    writer.submit(("ns/p3", "node:b"), write, "p3-bind")
    writer.submit("ns/p2", write, "p2-event")
    deadline = time.monotonic() + 5
    while "p3-bind" not in done and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    assert done == ["p3-bind"]  # node-b went on; p2 waits for p1 on node-a, p2's event for p2's bind
    release.set()
    deadline = time.monotonic() + 5
    while writer.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    pool.shutdown(wait=True)
    assert done == ["p3-bind", "p1-bind", "p2-bind", "p2-event"]
    assert writer.in_flight == 0


def test_bindings_do_not_queue_behind_reports_and_a_waiting_report_is_replaced_by_a_newer_one() -> None:
    """A backlog's FailedScheduling reports go to their own pool: with every report thread held by a slow API
    call, a binding still goes out. A pod's report waiting behind its running one is replaced by a newer report
    (one per pod, the latest), as kube-scheduler's API dispatcher merges a pod's queued status patches."""
    binds = concurrent.futures.ThreadPoolExecutor(2)
    reports = concurrent.futures.ThreadPoolExecutor(1)
    writer = OrderedWriter(binds, reports)
    write = _Recorder()
    writer.report("ns/old", write, "old-report-1", True)  # holds the only report thread
    writer.report("ns/old", write, "old-report-2")  # waits behind it ...
    writer.report("ns/old", write, "old-report-3")  # ... and is replaced by this one
    for i in range(20):
        writer.report(f"ns/p{i}", write, f"p{i}-report")
    writer.submit("ns/new", write, "new-bind")
    deadline = time.monotonic() + 5
    while "new-bind" not in write.done and time.monotonic() < deadline:
        time.sleep(0.01)
    assert write.done == ["new-bind"]  # every report is still waiting for the report thread
    write.release.set()
    reports.shutdown(wait=True)
    binds.shutdown(wait=True)
    assert [d for d in write.done if d.startswith("old-")] == ["old-report-1", "old-report-3"]
    assert len(write.done) == 1 + 2 + 20 and writer.in_flight == 0


def test_the_reports_of_a_gangs_members_waiting_behind_one_key_each_stand() -> None:
    """A gang's members share the gang's write key: a member's report waiting behind another's replaces only an
    earlier report of the same member, never another member's (each member must get its condition)."""
    reports = concurrent.futures.ThreadPoolExecutor(1)
    writer = OrderedWriter(concurrent.futures.ThreadPoolExecutor(1), reports)
    write = _Recorder()
    writer.report("ns/gang", write, "m0-report-1", True, subject="ns/m0")  # holds the only report thread
    writer.report("ns/gang", write, "m1-report", subject="ns/m1")
    writer.report("ns/gang", write, "m2-report-1", subject="ns/m2")
    writer.report("ns/gang", write, "m2-report-2", subject="ns/m2")  # replaces m2's waiting report only
    write.release.set()
    reports.shutdown(wait=True)
    assert write.done == ["m0-report-1", "m1-report", "m2-report-2"] and writer.in_flight == 0


def test_deferred_calls_run_on_its_thread_in_the_order_they_fall_due_and_stop_drops_the_rest() -> None:
    deferred = Deferred("test")
    done: list[str] = []
    last = threading.Event()
    deferred.call_later(0.2, done.append, "later")
    deferred.call_later(0.0, done.append, "sooner")
    deferred.call_later(0.3, last.set)
    assert last.wait(10)
    assert done == ["sooner", "later"] and len(deferred) == 0
    deferred.call_later(3600, done.append, "never")
    assert len(deferred) == 1
    deferred.stop()
    deferred.call_later(0, done.append, "after the stop")
    assert len(deferred) == 0 and done == ["sooner", "later"]


def test_a_priority_gate_starts_the_highest_priority_write_first_and_keeps_to_its_slots() -> None:
    """The queue door's admission lane (live.queuedoor): with its slot taken, the writes waiting start by priority
    (ties in the order they came), one at a time as its one slot frees."""
    pool, writer, release, done, write = _recording_writer()
    gate = PriorityGate(writer, slots=1)
    gate.submit("ns/slow", write, "slow", True)  # the slot taken by a write the API server has not answered
    gate.submit("ns/small", write, "small", priority=50)
    gate.submit("ns/large", write, "large", priority=200)
    gate.submit("ns/medium-a", write, "medium-a", priority=100)
    gate.submit("ns/medium-b", write, "medium-b", priority=100)
    gate.submit("ns/large", write, "large-again", priority=200)
    time.sleep(0.1)
    assert done == [] and gate.waiting == 5  # nothing starts beyond the slot (a pool of 4 threads has room)
    release.set()
    deadline = time.monotonic() + 5
    while len(done) < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    pool.shutdown(wait=True)
    assert done == ["slow", "large", "large-again", "medium-a", "medium-b", "small"]

