"""queues/pending.py: a ClusterQueue's queue kept by equivalence class serves the order a plain sorted list does, and
the quota-bound replay of ``simulate --queues`` decides the same with it as with that list, byte for byte."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsched.queues.admission import _Admission
from accelsched.queues.pending import Classes, Pending
from accelsched.sim import queues
from accelsched.sim.tenants import workload
from accelsched.sim.trace import load_nodes, load_pods
from tests.test_sim_queues import two_tenant_trace


class SortedList(Pending[Any]):
    """The queue as one list in queue order, a class found by reading all of it (what admission kept before)."""

    def __init__(self, key: Callable[[Any], Any], cls: Callable[[Any], Hashable]) -> None:
        super().__init__(key, cls)
        self.items: list[Any] = []

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self.items))

    def __contains__(self, item: object) -> bool:
        return any(o is item for o in self.items)

    def first(self) -> Any:
        return self.items[0]

    def add(self, item: Any) -> Hashable:
        self.items.append(item)
        self.items.sort(key=self.key)
        return self.cls(item)

    def add_class(self, cls: Hashable, items: list[Any]) -> None:
        self.items.extend(items)
        self.items.sort(key=self.key)

    def remove(self, item: Any) -> None:
        self.items.remove(item)

    def discard(self, item: Any) -> bool:
        if item not in self:
            return False
        self.remove(item)
        return True

    def pop_class(self, cls: Hashable) -> list[Any]:
        moved = [o for o in self.items if self.cls(o) == cls]
        self.items = [o for o in self.items if self.cls(o) != cls]
        return moved

    def clear(self) -> None:
        self.items = []


@dataclasses.dataclass(eq=False)
class Item:
    priority: int
    created: int
    order: int
    shape: int


def key(item: Item) -> tuple[int, int, int]:
    return (-item.priority, item.created, item.order)


def shape(item: Item) -> int:
    return item.shape


OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "remove", "discard", "pop", "batch", "clear"]),
        st.integers(0, 3),
        st.integers(0, 4),
    ),
    max_size=60,
)


def apply(op: str, cls: int, n: int, fast: Any, plain: SortedList, made: list[Item]) -> None:
    """One drawn operation on both stores: ``made`` is every workload made so far (for the membership checks)."""

    def new(priority: int) -> Item:
        made.append(Item(priority, created=len(made) % 7, order=len(made), shape=cls))
        return made[-1]

    if op == "add":
        item = new(n % 2)
        fast.add(item)
        plain.add(item)
    elif op == "batch":  # the inadmissible set of one class coming back, sorted
        items = sorted((new(i % 2) for i in range(n)), key=key)
        fast.add_class(cls, list(items))
        plain.add_class(cls, list(items))
    elif op == "remove" and plain:
        item = list(plain)[n % len(plain)]
        fast.remove(item)
        plain.remove(item)
    elif op == "discard" and made:  # queued or not (taken out, or never in): one lookup says which
        item = made[(cls * 5 + n) % len(made)]
        assert fast.discard(item) == plain.discard(item)
    elif op == "pop":
        assert fast.pop_class(cls) == plain.pop_class(cls)
    elif op == "clear" and n == 0:
        fast.clear()
        plain.clear()


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_the_queue_by_class_serves_the_sorted_lists_order(ops: list[tuple[str, int, int]]) -> None:
    fast, plain = Pending(key, shape), SortedList(key, shape)
    made: list[Item] = []
    for op, cls, n in ops:
        apply(op, cls, n, fast, plain, made)
        assert list(fast) == list(plain)
        assert len(fast) == len(plain) and bool(fast) == bool(plain)
        if plain:
            assert fast.first() is plain.first()
        assert [m in fast for m in made] == [m in plain for m in made]


@settings(max_examples=100, deadline=None)
@given(OPS)
def test_the_inadmissible_set_holds_what_the_sorted_list_holds(ops: list[tuple[str, int, int]]) -> None:
    """Classes (the inadmissible set) keeps the same workloads, each class in queue order, under the same operations,
    removal included (a Workload deleted or finished while it waits there: live/workloaddeltas)."""
    fast, plain = Classes(key, shape), SortedList(key, shape)
    made: list[Item] = []
    for op, cls, n in ops:
        apply(op, cls, n, fast, plain, made)
        assert len(fast) == len(plain)
        assert sorted(fast, key=key) == list(plain)
        for group in fast.groups.values():
            assert group == sorted(group, key=key) and len({shape(i) for i in group}) == 1
        assert [m in fast for m in made] == [m in plain for m in made]
    with pytest.raises(ValueError):
        fast.remove(Item(0, 0, -1, 0))


QUEUES = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
{fair}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: gpu
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: all
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources:
      - name: nvidia.com/gpu
        nominalQuota: {cohort}
"""

CLUSTER_QUEUE = """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: {name}
spec:
  cohortName: all
  namespaceSelector: {{}}
  queueingStrategy: {strategy}
  preemption:
    reclaimWithinCohort: {reclaim}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources:
      - name: nvidia.com/gpu
        nominalQuota: {nominal}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: {name}
  namespace: team-{name}
spec:
  clusterQueue: {name}
"""


@pytest.mark.parametrize(
    ("fair", "cohort", "nominal", "reclaim", "strategy"),
    [
        (True, 3, 0, "Never", "BestEffortFIFO"),  # the benchmark's shape: every GPU borrowed, fair sharing orders
        (False, 0, 2, "Any", "BestEffortFIFO"),  # quota of their own, borrowing reclaimed by preemption
        (True, 2, 1, "Never", "StrictFIFO"),
    ],
)
def test_a_quota_bound_replay_decides_as_with_the_sorted_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fair: bool, cohort: int, nominal: int, reclaim: str, strategy: str
) -> None:
    node_path, pod_path = two_tenant_trace(tmp_path, pods=200)
    nodes, pods = load_nodes(node_path), load_pods(pod_path)
    config = "fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare]" if fair else ""
    text = QUEUES.format(fair=config, cohort=cohort) + "".join(
        CLUSTER_QUEUE.format(name=name, nominal=nominal, reclaim=reclaim, strategy=strategy) for name in ("ls", "be")
    )
    (tmp_path / "q.yaml").write_text(text)
    objects = queues.load_queues(tmp_path / "q.yaml")
    replayed, of = workload(nodes, pods, queues.tenants(pods, objects, "qos"), 1.3, 42)

    def run() -> queues.QueueTimeline:
        return queues.replay(nodes, replayed, objects, of, "fgd", 42, compress=200)

    fast = run()
    monkeypatch.setattr(_Admission, "queue_type", SortedList)
    plain = run()
    assert sum(len(t.waits) - t.waits.count(0) for t in plain.tenants) > 20  # the quota binds: many waited
    for name in ("times", "allocated", "shares", "ideals", "demands"):
        assert np.array_equal(getattr(fast, name), getattr(plain, name)), name
    assert fast.tenants == plain.tenants  # shares, gaps, every wait, preemptions, pods never run
    assert (fast.placement_waits, fast.unschedulable) == (plain.placement_waits, plain.unschedulable)
    if reclaim == "Any":
        assert sum(t.preempted for t in plain.tenants) > 0  # evictions went back into the queues too
