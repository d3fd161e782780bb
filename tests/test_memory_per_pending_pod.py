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
