"""Gang scheduling: all or nothing, no deadlock between gangs, nothing held after a failure, topology domains.

The failure modes come from scheduler-plugins issues 117, 429, 713 and koordinator 872 (reference
devices-and-topology.md): interleaved gangs each holding part of the cluster; a gang that passes an aggregate
capacity check but cannot be placed and loops; assumed pods holding resources with no timeout.
"""

from __future__ import annotations

import pytest
from builders import start
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsched.engine import Session
from accelsched.errors import InputError

ACCEL = "qualcomm.com/ai-accelerator"


def node(name: str, accel: int, pdu: str = "pdu-1") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"accelsched.io/pdu": pdu}},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110", ACCEL: str(accel)}},
    }


def member(name: str, group: str | None, accel: int) -> dict:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    res = {"cpu": "1", ACCEL: str(accel)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "c", "resources": {"requests": res, "limits": {ACCEL: str(accel)}}}]},
    }


def group(name: str, min_member: int, **annotations: str) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if annotations:
        meta["annotations"] = {f"accelsched.io/{k.replace('_', '-')}": v for k, v in annotations.items()}
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": {"minMember": min_member},
    }


def run(*docs: dict, gangs: bool = True) -> tuple[Session, dict]:
    session = start(*docs)
    if not gangs:
        session.scheduler.groups = {}  # the naive per-pod scheduler: every pod on its own
    return session, {r.pod.name: r for r in session.schedule()}


def bound(results: dict, prefix: str) -> int:
    return sum(1 for name, r in results.items() if name.startswith(prefix) and r.node)


def interleaved_gangs() -> list[dict]:
    docs = [node("n1", 4), node("n2", 4), group("a", 4), group("b", 4)]
    for i in range(4):
        docs += [member(f"a-{i}", "a", 2), member(f"b-{i}", "b", 2)]
    return docs


def test_naive_per_pod_scheduling_deadlocks_two_interleaved_gangs():
    _, results = run(*interleaved_gangs(), gangs=False)
    assert bound(results, "a-") == 2 and bound(results, "b-") == 2  # each holds half: neither can start


def test_gangs_are_placed_whole_and_never_interleave():
    _, results = run(*interleaved_gangs())
    assert bound(results, "a-") == 4 and bound(results, "b-") == 0
    message = results["b-0"].message
    assert message.startswith("gang default/b needs 4 pods x 2 qualcomm.com/ai-accelerator (minMember 4)")
    assert "short 8 qualcomm.com/ai-accelerator" in message
    assert all(results[f"b-{i}"].message == message for i in range(4))


def test_a_gang_that_passes_the_aggregate_check_but_cannot_be_placed_fails_once_and_holds_nothing():
    # 6 accelerators free in total for 2 x 3, but node n2 has only 2: no placement, no loop.
    docs = [node("n1", 4), node("n2", 2), group("g", 2), member("g-0", "g", 3), member("g-1", "g", 3)]
    docs.append(member("small", None, 2))
    session, results = run(*docs)
    assert bound(results, "g-") == 0
    assert results["small"].node is not None  # the work behind the gang is not blocked
    row = session.cluster.res_index[ACCEL]
    assert int(session.cluster.requested[row].sum()) == 2  # only the small pod holds anything
    held = [
        d
        for pool in (dev.pools[ACCEL] for dev in session.cluster.devices)
        for d in pool.ids
        if d not in pool.free_ids()
    ]
    assert len(held) == 2


def test_min_member_below_the_gang_size_binds_what_fits():
    docs = [node("n1", 4), group("g", 2)] + [member(f"g-{i}", "g", 2) for i in range(3)]
    _, results = run(*docs)
    assert bound(results, "g-") == 2


def test_required_topology_keeps_the_gang_in_one_domain_tightest_first():
    docs = [node("a1", 4, "pdu-1"), node("a2", 4, "pdu-1"), node("b1", 4, "pdu-2"), node("c1", 8, "pdu-3")]
    docs += [group("g", 2, required_topology="accelsched.io/pdu")] + [member(f"g-{i}", "g", 4) for i in range(2)]
    session, results = run(*docs)
    nodes = {results[f"g-{i}"].node for i in range(2)}
    pdus = {session.cluster.nodes[session.cluster.index[n]].labels["accelsched.io/pdu"] for n in nodes}
    assert len(pdus) == 1 and pdus <= {"pdu-1", "pdu-3"}
    assert pdus == {"pdu-1"} or pdus == {"pdu-3"}


def test_required_topology_explains_the_best_domain():
    docs = [node("a1", 4, "pdu-1"), node("a2", 4, "pdu-1"), node("b1", 4, "pdu-2")]
    docs += [group("g", 3, required_topology="accelsched.io/pdu")] + [member(f"g-{i}", "g", 4) for i in range(3)]
    _, results = run(*docs)
    assert bound(results, "g-") == 0
    assert "best accelsched.io/pdu pdu-1 fits 2; short 4 qualcomm.com/ai-accelerator" in results["g-0"].message


def test_a_labelled_job_is_a_gang_of_its_pods():
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {
            "parallelism": 3,
            "template": {
                "metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "train"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "resources": {"requests": {ACCEL: "2"}, "limits": {ACCEL: "2"}}}],
                },
            },
        },
    }
    _, results = run(node("n1", 4), job)
    assert sum(1 for r in results.values() if r.node) == 0  # 3 x 2 > 4: none, not two


def test_a_pod_group_with_fewer_pods_than_min_member_waits_pending_with_coscheduling_message():
    """Valid input (issue 28): more pods may come. Coscheduling's PreFilter rejects each member, none is bound."""
    _, results = run(node("n1", 4), group("g", 3), member("g-0", "g", 1), member("g-1", "g", 1))
    assert {k: (r.node, r.message) for k, r in results.items()} == {
        f"g-{i}": (
            None,
            f"0/1 nodes are available: pre-filter pod g-{i} cannot find enough sibling pods, current pods number: 2,"
            " minMember of group: 3.",
        )
        for i in range(2)
    }


def test_bound_members_count_as_siblings_of_the_pending_ones():
    bound_member = member("g-0", "g", 1)
    bound_member["spec"]["nodeName"] = "n1"
    _, results = run(node("n1", 4), group("g", 3), bound_member, member("g-1", "g", 1), member("g-2", "g", 1))
    assert results["g-1"].message and "cannot find enough sibling pods" not in results["g-1"].message
    _, results = run(node("n1", 4), group("g", 4), bound_member, member("g-1", "g", 1), member("g-2", "g", 1))
    assert "current pods number: 3, minMember of group: 4." in results["g-1"].message


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(1, 8), min_size=1, max_size=4),  # node sizes
    st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3)), max_size=4),  # gangs
    st.lists(st.integers(1, 4), max_size=4),  # single pods
)
def test_each_gang_has_zero_or_at_least_min_member_bound_and_nothing_is_overcommitted(nodes, gangs, singles):
    docs = [node(f"n{i}", size) for i, size in enumerate(nodes)]
    for g, (size, accel, slack) in enumerate(gangs):
        minimum = max(1, size - slack + 1)
        docs.append(group(f"g{g}", min(minimum, size)))
        docs += [member(f"g{g}-{i}", f"g{g}", accel) for i in range(size)]
    docs += [member(f"s{i}", None, accel) for i, accel in enumerate(singles)]
    session = start(*docs)
    scheduler, cluster = session.scheduler, session.cluster
    minimum = {f"default/g{g}": min(max(1, size - slack + 1), size) for g, (size, _, slack) in enumerate(gangs)}

    def check() -> None:  # after every decision: no gang partly bound, nothing overcommitted
        per_gang: dict[str, int] = {}
        for key in cluster.pod_node:
            name = key.split("/", 1)[1]
            if name.startswith("g"):
                gang_key = f"default/{name.split('-')[0]}"
                per_gang[gang_key] = per_gang.get(gang_key, 0) + 1
        for key, count in per_gang.items():
            assert count >= minimum[key], (key, count)
        assert (cluster.requested <= cluster.allocatable).all()

    decide_gang, decide_one = scheduler.schedule_gang, scheduler.schedule_one

    def gang_then_check(*args, **kwargs):
        out = decide_gang(*args, **kwargs)
        check()
        return out

    def one_then_check(pod, hold=None, allowed=None):
        out = decide_one(pod, hold, allowed)
        if hold is None:
            check()
        return out

    scheduler.schedule_gang, scheduler.schedule_one = gang_then_check, one_then_check
    results = {r.pod.name: r for r in session.schedule()}
    for g in range(len(gangs)):
        placed = bound(results, f"g{g}-")
        assert placed == 0 or placed >= minimum[f"default/g{g}"]
    check()


# ---------------------------------------------------------------------------------------- the four failure modes


def attempts(*docs: dict) -> tuple[dict, list[str]]:
    """Run with an observer that records every scheduling attempt, by pod name."""
    session = start(*docs)
    seen: list[str] = []
    session.scheduler.observer = lambda pod: seen.append(pod.name)
    return {r.pod.name: r for r in session.schedule()}, seen


def test_failure_mode_gangs_arriving_interleaved_never_each_hold_part_of_the_cluster():
    """koordinator 872: gangs A and C arrive A C A C ... and each could take half the cluster."""
    docs = [node("n1", 4), node("n2", 4), group("a", 2), group("c", 2)]
    docs += [member("a-0", "a", 4), member("c-0", "c", 4), member("a-1", "a", 4), member("c-1", "c", 4)]
    results, _ = attempts(*docs)
    assert sorted(bound(results, p) for p in ("a-", "c-")) == [0, 2]


def test_failure_mode_a_gang_that_cannot_be_placed_is_tried_once_not_in_a_loop():
    """scheduler-plugins 713: an aggregate check passes (8 free for 2 x 4) but no node has 4: one attempt per
    member, then the gang waits; the run ends."""
    docs = [node("n1", 3), node("n2", 3), node("n3", 2), group("g", 2), member("g-0", "g", 4), member("g-1", "g", 4)]
    results, seen = attempts(*docs)
    assert bound(results, "g-") == 0
    assert sorted(seen) == ["g-0", "g-1"]


def test_failure_mode_nothing_is_held_after_a_gang_fails_so_no_timeout_is_needed():
    """scheduler-plugins 429: assumed members held resources with no timeout. Here a failed gang holds nothing
    at once, and work that arrived after it uses the room."""
    docs = [node("n1", 4), group("big", 3)] + [member(f"big-{i}", "big", 2) for i in range(3)]
    docs += [member("after-0", None, 2), member("after-1", None, 2)]
    results, _ = attempts(*docs)
    assert bound(results, "big-") == 0
    assert bound(results, "after-") == 2


def test_min_resources_the_cluster_cannot_cover_skips_the_attempt_and_says_so():
    docs = [node("n1", 4), node("n2", 4), group("g", 2)]
    docs[-1]["spec"]["minResources"] = {ACCEL: "16", "cpu": "2"}
    docs += [member("g-0", "g", 2), member("g-1", "g", 2)]
    results, seen = attempts(*docs)
    assert bound(results, "g-") == 0
    assert seen == []  # not a single member cycle
    assert results["g-0"].message == (
        f"gang default/g needs 2 pods x 2 {ACCEL} (minMember 2); minResources 16 {ACCEL} but 8 free in the cluster"
    )


def test_min_resources_that_fit_change_nothing():
    docs = [node("n1", 4), group("g", 2)]
    docs[-1]["spec"]["minResources"] = {ACCEL: "4"}
    docs += [member("g-0", "g", 2), member("g-1", "g", 2)]
    results, _ = attempts(*docs)
    assert bound(results, "g-") == 2


def test_bad_min_resources_is_bad_input():
    doc = group("g", 1)
    doc["spec"]["minResources"] = {ACCEL: "-2"}
    with pytest.raises(InputError, match=r"PodGroup default/g: spec.minResources\[qualcomm.com/ai-accelerator\]"):
        run(node("n1", 4), doc, member("g-0", "g", 1))
