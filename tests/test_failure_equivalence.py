"""Equivalent failures (framework.equivalence): a run that answers a pod from the failure of an equivalent pod
decides exactly what a run of full cycles decides (the same nodes, devices, messages, victims and nominations,
in the same order), and does answer most of a backlog of few shapes that way."""

from __future__ import annotations

from typing import Any

import pytest
from builders import node, pod, start, taint, tol
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelsched.framework.equivalence import Failures, signature
from accelsched.framework.types import ScheduleResult

GPU = "nvidia.com/gpu"


class FullCycles(Failures):
    """No reuse: every pod's cycle runs in full (what the scheduler did before)."""

    def schedule_one(self, scheduler: Any, pod: Any, cycle: Any) -> ScheduleResult:
        return cycle(pod)


def outcome(docs: list[dict], reuse: bool, seed: int) -> tuple[list[tuple], int]:
    session = start(*docs, seed=seed)
    session.scheduler.keep_diagnosis = False  # as the CLI and live mode run (the builders keep reasons)
    if not reuse:
        session.scheduler.failures = FullCycles()
    results = session.schedule()
    decided = [
        (r.pod.key, r.node, r.message, sorted(r.devices.items()), r.nominated, sorted(v.key for v in r.preempted))
        for r in results
    ]
    return decided, session.scheduler.failures.reused


def backlog(shapes: list[tuple[int, int, int, bool]], bound: list[tuple[int, int, int]], nodes: int) -> list[dict]:
    """``nodes`` nodes of 8 CPUs and 4 GPUs (every third tainted), pods already ``bound`` (node, cpu, priority) and
    Pending pods of ``shapes`` (cpu, gpus, priority, tolerates the taint), in creation order."""
    docs: list[dict] = [
        node(f"n{i}", cpu=8, taints=[taint("pool")] if i % 3 == 2 else [], **{GPU: 4}) for i in range(nodes)
    ]
    for j, (where, cpu, priority) in enumerate(bound):
        docs.append(pod(f"b{j}", str(cpu), node_name=f"n{where % nodes}", priority=priority))
    for j, (cpu, gpus, priority, tolerates) in enumerate(shapes):
        docs.append(
            pod(
                f"p{j}",
                str(cpu),
                priority=priority,
                extra={GPU: gpus} if gpus else None,
                tolerations=[tol("pool", "Exists")] if tolerates else (),
            )
        )
    return docs


SHAPE = st.tuples(st.integers(1, 9), st.integers(0, 5), st.sampled_from([0, 10]), st.booleans())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=st.lists(st.sampled_from([(9, 0, 0, False), (2, 5, 10, True), (4, 1, 10, False)]) | SHAPE, max_size=30),
    bound=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 6), st.sampled_from([0, 5])), max_size=8),
    nodes=st.integers(1, 6),
    seed=st.integers(0, 3),
)
def test_reusing_failures_decides_what_full_cycles_decide(shapes, bound, nodes, seed) -> None:
    docs = backlog(shapes, bound, nodes)
    assert outcome(docs, reuse=True, seed=seed)[0] == outcome(docs, reuse=False, seed=seed)[0]


def test_a_backlog_of_few_shapes_is_answered_from_the_first_failure_of_each() -> None:
    # 3 nodes with room for the 3 small pods; 60 Pending pods of 2 shapes no node takes (9 CPUs; 5 GPUs), one
    # small pod created between them and two after: the first small pod's placement changes the state, so each
    # shape fails in full once before it and once after it, and every other pod of its shape is answered.
    shapes = [(9, 0, 0, False), (2, 5, 0, True)] * 10 + [(1, 0, 0, False)] + [(9, 0, 0, False), (2, 5, 0, True)] * 20
    shapes += [(1, 0, 0, False), (1, 0, 0, False)]
    docs = backlog(shapes, [], 3)
    decided, reused = outcome(docs, reuse=True, seed=0)
    assert decided == outcome(docs, reuse=False, seed=0)[0]
    placed = [key for key, node_name, *_ in decided if node_name]
    assert len(placed) == 3
    assert reused == 60 - 2 * 2  # two full failures per shape: before the first placement and after it


AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def test_a_reused_preemption_failure_draws_the_generator_as_its_full_cycle_did() -> None:
    # Every node is full of a low-priority app=x pod. The followers need room next to an app=x pod: preemption
    # sees room on every node once the x pod goes (it draws its random offset) but no dry run passes (the
    # affinity leaves with the victim), so they fail without victims. The preemptor after them picks among equal
    # candidates from that offset: its node depends on how many draws the followers made (one each, replayed).
    docs = [node(f"n{i}", cpu=8) for i in range(6)]
    docs += [pod(f"x{i}", "7", node_name=f"n{i}", priority=0, labels={"app": "x"}) for i in range(6)]
    docs += [pod(f"f{j}", "2", priority=10, affinity=AFFINITY) for j in range(5)]
    docs.append(pod("preemptor", "2", priority=10))
    chosen = set()
    for seed in range(8):
        decided, reused = outcome(docs, reuse=True, seed=seed)
        assert decided == outcome(docs, reuse=False, seed=seed)[0]
        assert reused == 8  # f1-f4 before the preemption, and again after it requeued them (f0 in full each time)
        assert all(not victims for key, _n, _m, _d, _nom, victims in decided if "/f" in key)
        chosen.update(victims[0] for key, _n, _m, _d, _nom, victims in decided if key.endswith("preemptor"))
    assert len(chosen) > 1  # the generator decides it: a replay that skipped the draws would be caught


def test_a_pod_with_claims_or_a_nominated_node_is_never_answered_from_another() -> None:
    claims = start(node("n1"), pod("a")).inputs.pods[0]
    claims.raw["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    nominated = start(node("n1"), pod("a")).inputs.pods[0]
    nominated.raw["status"] = {"nominatedNodeName": "n1"}
    plain = start(node("n1"), pod("a")).inputs.pods[0]
    other = start(node("n1"), pod("b", labels={"app": "x"})).inputs.pods[0]
    assert signature(claims) is None and signature(nominated) is None
    assert signature(plain) == signature(start(node("n1"), pod("c")).inputs.pods[0])  # names do not count
    assert signature(plain) != signature(other)  # labels do (spread and affinity read them)


@pytest.mark.parametrize("order", [("p0", "p1"), ("p1", "p0")])
def test_a_dra_backed_extended_resource_is_always_tried_in_full(tmp_path, order: tuple[str, str]) -> None:
    """A pod asking for a DeviceClass-backed extended resource is served through its own claim (found by its name,
    which no signature holds), and its failed cycle may delete that claim and free a device without a new cluster
    version: reusing an equivalent's failure would keep p1's stale claim or deny p0 the device it frees."""
    from test_dra_extended import CLASS, DRA_NODE, STALE_CLAIM
    from test_dra_extended import pod as extended_pod

    from accelsched.engine import schedule

    one_device = DRA_NODE.replace("[{name: gpu-0}, {name: gpu-1}]", "[{name: gpu-0}]")
    assert one_device != DRA_NODE
    claim = STALE_CLAIM.replace("device: gpu-1", "device: gpu-0")  # p1's leftover claim holds the only device
    path = tmp_path / "in.yaml"
    path.write_text("\n---\n".join([CLASS, one_device, claim, *(extended_pod(name) for name in order)]))
    answers = {}
    for reasons in (True, False):  # per-node reasons keep every cycle full; without them failures may be reused
        _, results = schedule([path], reasons=reasons)
        answers[reasons] = {r.pod.name: (r.node, r.message) for r in results}
    assert answers[False] == answers[True]
    assert answers[False]["p0"][0] == "dra-node"
