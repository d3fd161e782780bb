"""What a Pending pod keeps after its cycle must not grow with the node count (issue 24): kube-scheduler keeps only
its FailedScheduling message; the per-node diagnosis lives for the cycle, or for ``schedule --reasons``.

Measured with tracemalloc as the bytes still allocated after ``Scheduler.run``, per extra Pending pod (the
difference between two backlogs, so what the session holds per node or per pod shape cancels out), at 200 and at
800 nodes. A size measurement, not a timing.
"""

from __future__ import annotations

import gc
import tracemalloc

from builders import ACCEL, node, pod

from accelsched.api.loader import Inputs
from accelsched.api.objects import parse_node, parse_pod
from accelsched.engine import Session

SMALL, LARGE = 200, 800  # nodes
FEW, MANY = 20, 60  # Pending pods
# Slack per Pending pod per extra node: the diagnosis alone kept two or three bytes per node (one bool mask per
# rejecting filter, and the first-rejected mask); half a byte leaves room for allocator noise, none for a mask.
BYTES_PER_NODE = 0.5


def retained_after_run(nodes: int, pending: int, keep_diagnosis: bool = False) -> int:
    """Bytes allocated by ``Scheduler.run`` over ``pending`` pods that fit nowhere, still held after it returns
    (the results included)."""
    inputs = Inputs(
        # Each node has one accelerator; half are tainted, so two filters reject (two reasons, two masks).
        nodes=[
            parse_node(node(f"n{i}", taints=[{"key": "t", "effect": "NoSchedule"}] if i % 2 else (), **{ACCEL: 1}))
            for i in range(nodes)
        ],
        pods=[parse_pod(pod(f"p{i}", extra={ACCEL: 2 + i % 3})) for i in range(pending)],
    )
    session = Session.start(inputs)
    session.scheduler.keep_diagnosis = keep_diagnosis
    gc.collect()
    tracemalloc.start()
    try:
        results = session.schedule()
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(results) == pending and not any(r.scheduled for r in results)
    return held


def per_pending_pod(nodes: int, keep_diagnosis: bool = False) -> float:
    extra = retained_after_run(nodes, MANY, keep_diagnosis) - retained_after_run(nodes, FEW, keep_diagnosis)
    return extra / (MANY - FEW)


def test_memory_per_pending_pod_does_not_grow_with_nodes() -> None:
    small, large = per_pending_pod(SMALL), per_pending_pod(LARGE)
    assert large - small < BYTES_PER_NODE * (LARGE - SMALL), (small, large)


def test_the_measurement_sees_a_diagnosis_kept_for_reasons() -> None:
    """The same measurement with the per-node reasons kept (``--reasons``) grows with the nodes: it can fail."""
    small, large = per_pending_pod(SMALL, keep_diagnosis=True), per_pending_pod(LARGE, keep_diagnosis=True)
    assert large - small > 2 * BYTES_PER_NODE * (LARGE - SMALL), (small, large)


def test_a_backlog_of_many_shapes_keeps_the_per_shape_caches_bounded(monkeypatch) -> None:
    """Every Pending pod its own request shape: past SHAPE_CACHE_LIMIT the per-shape caches start over between
    cycles (as live mode does between rounds), and the placements are those of a run that never trims."""
    from accelsched.cluster import state

    def run(limit: int) -> tuple[list[tuple[str, str | None, str]], int]:
        monkeypatch.setattr(state, "SHAPE_CACHE_LIMIT", limit)
        inputs = Inputs(
            nodes=[parse_node(node(f"n{i}", cpu="4", **{ACCEL: 2})) for i in range(6)],
            pods=[parse_pod(pod(f"p{i}", cpu=f"{100 + 7 * i}m", extra={ACCEL: 1 + i % 3})) for i in range(40)],
        )
        session = Session.start(inputs)
        results = session.schedule()
        return [(r.pod.name, r.node, r.message) for r in results], len(session.cluster.memo)

    trimmed, kept = run(8)
    untrimmed, grown = run(10**9)
    assert trimmed == untrimmed
    assert any(node is None for _, node, _ in trimmed)  # a backlog: some pods went through PostFilter
    assert grown > 40 and kept <= 8, (grown, kept)  # an entry or more per shape unbounded; at most the limit
