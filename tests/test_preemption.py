"""DefaultPreemption as kube-scheduler does it, and gang-aware.

Faithful parts: only resolvable rejections are worth preempting for; only pods of strictly lower priority are
victims; victims are as few and as unimportant as possible (reprieve most important first); the candidate node
has the lowest highest-victim priority, then the lowest priority sum, then the fewest victims; preemptionPolicy
Never opts out; and the FitError gets DynamicResources' ``no new claims to deallocate`` then DefaultPreemption's
``preemption: 0/N nodes are available: ...`` part, joined by ``, `` and ending with a single ``.``. Until the
HARNESS records them from the real kube-scheduler, the expected messages here are written from the v1.36.3 source
(framework/types.go FitError.Error, framework/runtime RunPostFilterPlugins, preemption.Evaluator.Preempt,
noderesources fitsRequest's Unresolvable). Gang parts: a running gang is evicted whole or not at all, and a
pending gang preempts only when the whole gang then fits.
"""

from __future__ import annotations

import json

import pytest
from builders import ACCEL, config, node, pod, run, session, start, taint
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsched.errors import InputError
from accelsched.report import to_json

GANG_LABEL = "scheduling.x-k8s.io/pod-group"


def accel_pod(name: str, count: int, priority: int = 0, on: str | None = None, **kw) -> dict:
    return pod(name, extra={ACCEL: count}, priority=priority, node_name=on, **kw)


def never(doc: dict) -> dict:
    doc["spec"]["preemptionPolicy"] = "Never"
    return doc


def evicted(results: dict) -> dict[str, str]:
    return {name: r.message for name, r in results.items() if r.message.startswith("Preempted by")}


def test_a_higher_priority_pod_evicts_the_fewest_lowest_priority_pods_and_binds_there() -> None:
    nodes = [node("a", **{ACCEL: 4})]
    existing = [accel_pod("low1", 1, 1, "a"), accel_pod("low2", 1, 2, "a"), accel_pod("low3", 2, 3, "a")]
    results = run(nodes, [*existing, accel_pod("high", 2, priority=100)])
    # Evicting low1 and low2 (2 cards, priorities 1+2) beats evicting low3 (2 cards, priority 3): the highest
    # victim priority decides first. Reprieve goes most important first, so low3 stays.
    assert results["high"].node == "a"
    assert sorted(v.name for v in results["high"].preempted) == ["low1", "low2"]
    assert evicted(results) == {
        "low1": "Preempted by default/high on node a",
        "low2": "Preempted by default/high on node a",
    }
    assert "low3" not in results  # never touched


def test_the_node_whose_victims_matter_least_is_chosen() -> None:
    nodes = [node("a", **{ACCEL: 2}), node("b", **{ACCEL: 2}), node("c", **{ACCEL: 2})]
    existing = [
        accel_pod("on-a", 2, 50, "a"),
        accel_pod("on-b1", 1, 10, "b"),
        accel_pod("on-b2", 1, 10, "b"),
        accel_pod("on-c", 2, 10, "c"),
    ]
    results = run(nodes, [*existing, accel_pod("high", 2, priority=100)])
    # b and c both have highest victim priority 10; c's sum (one pod) is lower than b's (two pods).
    assert results["high"].node == "c"
    assert [v.name for v in results["high"].preempted] == ["on-c"]


def test_equal_or_higher_priority_pods_are_never_victims() -> None:
    nodes = [node("a", **{ACCEL: 2}), node("b", **{ACCEL: 2})]
    existing = [accel_pod("same", 2, 100, "a"), accel_pod("higher", 2, 200, "b")]
    results = run(nodes, [*existing, accel_pod("high", 2, priority=100)])
    assert results["high"].node is None
    assert results["high"].message == (
        f"0/2 nodes are available: 2 Insufficient {ACCEL}. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    assert evicted(results) == {}


def test_preemption_is_not_helpful_where_a_filter_cannot_be_fixed_by_evicting() -> None:
    nodes = [
        node("tainted", taints=[taint("maintenance")], **{ACCEL: 2}),
        node("cordoned", unschedulable=True, **{ACCEL: 2}),
        node("full", **{ACCEL: 2}),
        node("small", **{ACCEL: 1}),
        node("shared", **{ACCEL: 2}),
    ]
    existing = [
        accel_pod("t", 2, 0, "tainted", tolerations=[{"operator": "Exists"}]),
        accel_pod("c", 2, 0, "cordoned"),
        accel_pod("f", 2, 50, "full"),
        accel_pod("s", 1, 0, "small"),
        accel_pod("low-half", 1, 0, "shared"),
        accel_pod("high-half", 1, 50, "shared"),
    ]
    results = run(nodes, [*existing, accel_pod("high", 2, priority=10)])
    assert results["high"].node is None
    # "small" has 1 card allocatable for a request of 2: Fit's Unresolvable, so not helpful (as the taint and the
    # cordon). "full" has no lower-priority pod. "shared" has one, but evicting it leaves 1 card: the node keeps its
    # filter reason.
    assert results["high"].message == (
        f"0/5 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, "
        f"3 Insufficient {ACCEL}. no new claims to deallocate, preemption: 0/5 nodes are available: "
        f"1 Insufficient {ACCEL}, 1 No preemption victims found for incoming pod, "
        "3 Preemption is not helpful for scheduling."
    )
    assert evicted(results) == {}


def test_preemption_policy_never_waits_instead() -> None:
    nodes = [node("a", **{ACCEL: 2})]
    results = run(nodes, [accel_pod("low", 2, 0, "a"), never(accel_pod("polite", 2, priority=100))])
    assert results["polite"].node is None
    assert results["polite"].message == (
        f"0/1 nodes are available: 1 Insufficient {ACCEL}. "
        "no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never."
    )
    assert evicted(results) == {}


def test_priority_class_gives_priority_and_preemption_policy() -> None:
    docs = [
        node("a", **{ACCEL: 2}),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch"}, "value": 10},
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "urgent-polite"},
            "value": 1000,
            "preemptionPolicy": "Never",
        },
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "urgent"}, "value": 1000},
    ]
    batch = accel_pod("batch", 2, None, "a")
    batch["spec"]["priorityClassName"] = "batch"
    polite = accel_pod("polite", 2)
    polite["spec"]["priorityClassName"] = "urgent-polite"
    urgent = accel_pod("urgent", 2)
    urgent["spec"]["priorityClassName"] = "urgent"
    results = {r.pod.name: r for r in start(*docs, batch, polite, urgent).schedule()}
    assert results["polite"].node is None and "preemptionPolicy=Never" in results["polite"].message
    assert results["urgent"].node == "a"
    assert [v.name for v in results["urgent"].preempted] == ["batch"]


def test_a_freed_node_lets_lower_priority_pending_pods_try_again() -> None:
    """Evicting two 1-card pods for a 1-card pod frees a card a waiting pod can then use."""
    nodes = [node("a", **{ACCEL: 2})]
    existing = [accel_pod("big", 2, 0, "a")]
    pending = [accel_pod("waiting", 1, priority=5), accel_pod("high", 1, priority=100)]
    results = run(nodes, [*existing, *pending])
    assert results["high"].node == "a"
    assert [v.name for v in results["high"].preempted] == ["big"]
    assert results["waiting"].node == "a"  # it failed before "big" left, and was retried after


def test_victims_are_listed_in_the_json_contract() -> None:
    s = session([node("a", **{ACCEL: 1})], [accel_pod("low", 1, 0, "a"), accel_pod("high", 1, priority=9)])
    out = to_json(s.schedule(), s.cluster)
    json.dumps(out)
    assert [(p["name"], p["node"], p["message"]) for p in out["pods"]] == [
        ("low", None, "Preempted by default/high on node a"),
        ("high", "a", ""),
    ]
    assert out["pods"][1]["preempted"] == ["default/low"]


def test_config_args_are_checked() -> None:
    def cfg(args: dict) -> None:
        config(pluginConfig=[{"name": "DefaultPreemption", "args": args}])

    cfg({"minCandidateNodesPercentage": 50, "minCandidateNodesAbsolute": 10})
    for bad, field in (
        ({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage"),
        ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute"),
        ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, "both be 0"),
        ({"bogus": 1}, "bogus"),
    ):
        with pytest.raises(InputError, match=field):
            cfg(bad)


def test_disabling_default_preemption_drops_the_message_part() -> None:
    """DynamicResources alone: its reason is the whole PostFilter message, with no period (types.go)."""
    cfg = config(plugins={"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}})
    results = run([node("a", **{ACCEL: 1})], [accel_pod("low", 1, 0, "a"), accel_pod("high", 1, 9)], config=cfg)
    assert results["high"].message == f"0/1 nodes are available: 1 Insufficient {ACCEL}. no new claims to deallocate"
    assert evicted(results) == {}


def test_disabling_dynamic_resources_drops_its_message_part() -> None:
    cfg = config(plugins={"multiPoint": {"disabled": [{"name": "DynamicResources"}]}})
    results = run([node("a", **{ACCEL: 1})], [accel_pod("low", 1, 50, "a"), accel_pod("high", 1, 9)], config=cfg)
    assert results["high"].message == (
        f"0/1 nodes are available: 1 Insufficient {ACCEL}. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


def test_no_post_filter_plugin_no_post_filter_part() -> None:
    cfg = config(plugins={"postFilter": {"disabled": [{"name": "*"}]}})
    results = run([node("a", **{ACCEL: 1})], [accel_pod("low", 1, 0, "a"), accel_pod("high", 1, 9)], config=cfg)
    assert results["high"].message == f"0/1 nodes are available: 1 Insufficient {ACCEL}."


def test_a_node_without_the_resource_is_not_helpful_to_preempt_on() -> None:
    """The issue's case: no lower-priority pods anywhere, one node short of cpu, every node without the
    accelerator at all. Each node's Fit status is UnschedulableAndUnresolvable (some request exceeds its
    allocatable), so kube-scheduler counts 3 "Preemption is not helpful", not "No preemption victims"."""
    nodes = [node("n1", cpu="1"), node("n2", cpu="4"), node("n3", cpu="4")]
    results = run(nodes, [pod("p", cpu="2", extra={ACCEL: 1})])
    assert results["p"].message == (
        f"0/3 nodes are available: 1 Insufficient cpu, 3 Insufficient {ACCEL}. no new claims to deallocate, "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_too_little_free_but_enough_allocatable_is_resolvable() -> None:
    """Short of free room on a node that could hold the pod empty: Unschedulable, so preemption tries it."""
    results = run([node("a", **{ACCEL: 2})], [accel_pod("same", 1, 9, "a"), accel_pod("p", 2, 9)])
    assert results["p"].message == (
        f"0/1 nodes are available: 1 Insufficient {ACCEL}. no new claims to deallocate, "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


# ---------------------------------------------------------------------------------------- gangs


def member(name: str, gang: str, count: int, priority: int, on: str | None = None) -> dict:
    return accel_pod(name, count, priority, on, labels={GANG_LABEL: gang})


def pod_group(name: str, min_member: int) -> dict:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member},
    }


def run_docs(*docs: dict) -> dict:
    s = start(*docs)
    assert not s.rejected
    return {r.pod.name: r for r in s.schedule()}


def test_a_running_gang_is_evicted_whole_or_not_at_all() -> None:
    """One card is needed on node a; its only low-priority pod belongs to a two-node gang: the whole gang goes."""
    docs = [
        node("a", **{ACCEL: 2}),
        node("b", **{ACCEL: 2}),
        member("g-0", "train", 2, 0, "a"),
        member("g-1", "train", 2, 0, "b"),
        accel_pod("high", 1, priority=100),
    ]
    results = run_docs(*docs)
    assert results["high"].node in ("a", "b")
    assert sorted(v.name for v in results["high"].preempted) == ["g-0", "g-1"]
    assert set(evicted(results)) == {"g-0", "g-1"}


def test_a_gang_with_a_member_of_equal_priority_is_not_a_victim() -> None:
    docs = [
        node("a", **{ACCEL: 2}),
        node("b", **{ACCEL: 2}),
        member("g-0", "train", 2, 0, "a"),
        member("g-1", "train", 2, 100, "b"),  # as important as the preemptor
        accel_pod("high", 1, priority=100),
    ]
    results = run_docs(*docs)
    assert results["high"].node is None
    assert "2 No preemption victims found for incoming pod" in results["high"].message
    assert evicted(results) == {}


def test_a_pending_gang_preempts_only_when_the_whole_gang_then_fits() -> None:
    docs = [
        node("a", **{ACCEL: 4}),
        node("b", **{ACCEL: 4}),
        accel_pod("low-a", 4, 0, "a"),
        accel_pod("low-b", 4, 0, "b"),
        pod_group("train", 2),
        member("w-0", "train", 4, 50),
        member("w-1", "train", 4, 50),
    ]
    results = run_docs(*docs)
    assert {results["w-0"].node, results["w-1"].node} == {"a", "b"}
    assert set(evicted(results)) == {"low-a", "low-b"}


def test_a_pending_gang_that_cannot_fit_whole_evicts_nobody() -> None:
    docs = [
        node("a", **{ACCEL: 4}),
        node("b", **{ACCEL: 4}),
        accel_pod("low-a", 4, 0, "a"),
        accel_pod("vip-b", 4, 100, "b"),  # cannot be evicted by the gang
        pod_group("train", 2),
        member("w-0", "train", 4, 50),
        member("w-1", "train", 4, 50),
    ]
    results = run_docs(*docs)
    assert results["w-0"].node is None and results["w-1"].node is None
    assert evicted(results) == {}
    assert "preemption: evicting lower-priority pods would not make the whole gang fit" in results["w-0"].message


# ---------------------------------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    bound=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4), st.integers(0, 3), st.booleans()), max_size=10),
    pending=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 3), st.booleans()), min_size=1, max_size=6),
)
def test_preemption_never_evicts_equal_or_higher_priority_and_never_overcommits(nodes, bound, pending) -> None:
    """Random bound pods (some in one running gang) and pending pods of random priorities."""
    node_docs = [node(f"n{i}", **{ACCEL: c}) for i, c in enumerate(nodes)]
    free = dict(enumerate(nodes))
    existing = []
    for j, (where, count, prio, in_gang) in enumerate(bound):
        where %= len(nodes)
        if count > free[where]:
            continue
        free[where] -= count
        labels = {GANG_LABEL: "running"} if in_gang else None
        existing.append(accel_pod(f"b{j}", count, prio * 10, f"n{where}", labels=labels))
    wanted = [accel_pod(f"p{j}", count, prio * 10) for j, (count, prio, _) in enumerate(pending)]
    for doc, (_, _, is_never) in zip(wanted, pending, strict=True):
        if is_never:
            never(doc)
    s = session(node_docs, [*existing, *wanted])
    results = s.schedule()
    by_name = {r.pod.name: r for r in results}
    priority = {r.pod.name: r.pod.priority for r in results}
    running_gang = [d["metadata"]["name"] for d in existing if d["metadata"]["labels"].get(GANG_LABEL)]
    for r in results:
        for victim in r.preempted:
            assert victim.priority < r.pod.priority, (victim.name, r.pod.name)
            assert r.pod.preemption_policy != "Never"
            if victim.name in running_gang:  # the whole running gang went with it
                assert all(by_name[m].message.startswith("Preempted by") for m in running_gang)
        if r.message.startswith("Preempted by"):
            assert any(r.pod is v for other in results for v in other.preempted)
    # No overcommit, and the cluster's books agree with the bound pods.
    cluster = s.cluster
    row = cluster.res_index[ACCEL]
    assert (cluster.requested[row] <= cluster.allocatable[row]).all()
    for i, on in enumerate(cluster.pods_on):
        assert sum(p.requests.get(ACCEL, 0) for p in on.values()) == cluster.requested[row, i]
        used = {d for p in on.values() for d in p.devices.get(ACCEL, [])}
        assert len(used) == cluster.requested[row, i]
        assert cluster.min_priority[i] == min((p.priority for p in on.values()), default=cluster.min_priority.max())
    for level, kept in cluster._below.items():  # kept in step with every bind and eviction
        fresh = {}
        for i, on in enumerate(cluster.pods_on):
            fresh[i] = sum(p.requests.get(ACCEL, 0) for p in on.values() if p.priority < level)
        assert [int(kept[row, i]) for i in range(cluster.n)] == [fresh[i] for i in range(cluster.n)]
    assert priority  # every pending pod got a result


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    bound=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3), st.integers(0, 3), st.booleans()), max_size=8),
    want=st.tuples(st.integers(1, 4), st.integers(1, 4)),
)
def test_victims_by_fit_arithmetic_equal_victims_by_dry_runs(nodes, bound, want) -> None:
    """The arithmetic shortcut and full filter dry runs pick the same victims on every node."""
    from accelsched.api.objects import parse_pod
    from accelsched.plugins.defaultpreemption import DefaultPreemption, _fit_decides

    node_docs = [node(f"n{i}", **{ACCEL: c}) for i, c in enumerate(nodes)]
    free = dict(enumerate(nodes))
    existing = []
    for j, (where, count, prio, in_gang) in enumerate(bound):
        where %= len(nodes)
        if count <= free[where]:
            free[where] -= count
            labels = {GANG_LABEL: "running"} if in_gang else None
            existing.append(accel_pod(f"b{j}", count, prio * 10, f"n{where}", labels=labels))
    s = session(node_docs, existing)
    pod_obj = parse_pod(accel_pod("p", want[0], want[1] * 10))
    checks = _fit_decides(pod_obj, s.scheduler)
    assert checks is not None
    plugin = DefaultPreemption()
    before = s.cluster.requested.copy()
    for i in range(len(nodes)):
        fast, fast_reasons = plugin.select_victims_by_fit(pod_obj, i, s.scheduler, frozenset(), checks)
        slow, slow_reasons = plugin.select_victims(pod_obj, i, s.scheduler, frozenset(), None)
        assert (None if fast is None else [v.key for v in fast]) == (None if slow is None else [v.key for v in slow])
        assert fast_reasons == slow_reasons
    assert (s.cluster.requested == before).all()  # dry runs leave the state as it was


# ---------------------------------------------------------------------------------------- review regressions


@settings(max_examples=60, deadline=None)
@given(
    devices=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    bound=st.lists(st.tuples(st.integers(0, 2), st.sampled_from([0, 250, 500, 800]), st.integers(0, 3)), max_size=8),
    want=st.tuples(st.sampled_from([0, 300, 700]), st.integers(0, 2), st.integers(1, 4)),
)
def test_victims_by_node_local_dry_runs_equal_victims_by_full_dry_runs(devices, bound, want) -> None:
    """On GPU-milli nodes (DevicePartition reads only the node's own ledger) a dry run on the node alone picks the
    same victims, with the same reasons, as a dry run of every filter over every node."""
    import yaml

    from accelsched.api.objects import parse_pod
    from accelsched.devices.partition import GPU_RESOURCE, MILLI_RESOURCE
    from accelsched.plugins.defaultpreemption import DefaultPreemption, _fit_decides, _node_local_filters

    def milli_node(i: int, count: int) -> dict:
        doc = node(f"n{i}", cpu="4")
        partitioning = yaml.safe_dump({"mode": "milli", "devices": count})
        doc["metadata"]["annotations"] = {"accelsched.io/partitioning": partitioning}
        return doc

    def share_pod(name: str, milli: int, whole: int, priority: int, on: str | None = None) -> dict:
        extra = {**({MILLI_RESOURCE: milli} if milli else {}), **({GPU_RESOURCE: whole} if whole else {})}
        return pod(name, cpu="500m", extra=extra or {GPU_RESOURCE: 1}, priority=priority, node_name=on)

    s = session([milli_node(i, c) for i, c in enumerate(devices)], [])
    for j, (where, milli, prio) in enumerate(bound):  # admitted as the kubelet would: one that does not fit is not
        on = f"n{where % len(devices)}"
        s.scheduler.admit_bound(parse_pod(share_pod(f"b{j}", milli, 0 if milli else 1, prio * 10, on)))
    pod_obj = parse_pod(share_pod("p", want[0], want[1], want[2] * 10))
    assert _fit_decides(pod_obj, s.scheduler) is None  # DevicePartition is no pod-independent filter
    local = _node_local_filters(pod_obj, s.scheduler)
    assert local is not None
    plugin = DefaultPreemption()
    before = (s.cluster.requested.copy(), [list(d.partition.milli) for d in s.cluster.devices])
    for i in range(len(devices)):
        here, here_reasons = plugin.select_victims(pod_obj, i, s.scheduler, frozenset(), None, local=local)
        full, full_reasons = plugin.select_victims(pod_obj, i, s.scheduler, frozenset(), None)
        assert (None if here is None else [v.key for v in here]) == (None if full is None else [v.key for v in full])
        assert here_reasons == full_reasons
    assert (s.cluster.requested == before[0]).all()  # dry runs leave the state as it was
    assert [list(d.partition.milli) for d in s.cluster.devices] == before[1]


def test_an_evicted_pod_gives_back_its_exclusive_cpus_on_its_numa_node() -> None:
    """Exclusive CPUs are taken at Reserve per NUMA node; eviction must return them, dry runs and for good."""
    from test_topology_scheduling import node_doc, pod_doc, session_of, two_numa

    from accelsched.api.objects import parse_pod
    from accelsched.topology.alignment import TopologyIndex

    def prio(doc: dict, value: int) -> dict:
        doc["spec"]["priority"] = value
        return doc

    s = session_of(
        node_doc("n1", 8, two_numa("single-numa-node")),
        prio(pod_doc("low0", 4, cpu="30"), 0),
        prio(pod_doc("low1", 4, cpu="30"), 0),
    )
    assert all(r.node == "n1" for r in s.schedule())
    index = TopologyIndex.of(s.cluster)
    assert index.cpu_free.tolist() == [[2, 2]]
    (victim, high) = s.schedule([parse_pod(prio(pod_doc("high", 4, cpu="2"), 100))])
    assert high.node == "n1" and victim.preempted_by == "default/high"
    # The victim's 30 CPUs came back to its NUMA node (32 free there), and high took 2 of them.
    assert sorted(index.cpu_free.tolist()[0]) == [2, 30]
    (nxt,) = s.schedule([parse_pod(prio(pod_doc("next", 0, cpu="20"), 0))])
    assert nxt.node == "n1"


def test_hard_default_spreading_makes_preemption_use_full_dry_runs() -> None:
    """PodTopologySpread defaultConstraints with DoNotSchedule bind a ReplicaSet's pods: evicting on node a
    would not help (skew), so the dry run must say so and node b's pod is the victim."""
    spread = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}
    cfg = config(
        pluginConfig=[
            {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [spread]}}
        ]
    )

    def replica(doc: dict) -> dict:
        doc["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x", "uid": "u", "controller": True}
        ]
        return doc

    pods = [
        replica(accel_pod("x-old", 1, 100, "a", labels={"app": "x"})),
        accel_pod("low-a", 1, 0, "a"),
        accel_pod("low-b", 2, 0, "b"),
        replica(accel_pod("x-new", 1, 50, labels={"app": "x"})),
    ]
    results = run([node("a", **{ACCEL: 2}), node("b", **{ACCEL: 2})], pods, config=cfg)
    assert results["x-new"].node == "b"
    assert [v.name for v in results["x-new"].preempted] == ["low-b"]
    assert "low-a" not in results  # untouched


def test_a_gang_preemption_that_is_undone_leaves_every_victim_exactly_where_it_was() -> None:
    docs = [
        node("a", **{ACCEL: 4}),
        node("b", **{ACCEL: 4}),
        accel_pod("low-a1", 2, 0, "a"),
        accel_pod("low-a2", 2, 0, "a"),
        accel_pod("vip-b", 4, 100, "b"),
        pod_group("train", 2),
        member("w-0", "train", 4, 50),
        member("w-1", "train", 4, 50),
    ]
    s = start(*docs)
    cluster = s.cluster
    before = (
        cluster.requested.copy(),
        {k: dict(p.devices) for on in cluster.pods_on for k, p in on.items()},
        dict(cluster.pod_node),
        dict(cluster.bound_seq),
        cluster.min_priority.copy(),
    )
    results = {r.pod.name: r for r in s.schedule()}
    assert results["w-0"].node is None and evicted(results) == {}
    after = (
        cluster.requested,
        {k: dict(p.devices) for on in cluster.pods_on for k, p in on.items()},
        dict(cluster.pod_node),
        dict(cluster.bound_seq),
        cluster.min_priority,
    )
    assert (before[0] == after[0]).all() and before[1:4] == after[1:4] and (before[4] == after[4]).all()
    free = {d.pools[ACCEL].free_count for d in cluster.devices}
    assert free == {0}


def test_candidate_count_limits_the_nodes_dry_run() -> None:
    """minCandidateNodesAbsolute 1 (percentage 0): the first candidate from the random offset wins, so the seed
    decides; with the defaults every node is a candidate and the least important victims always win."""
    nodes = [node(f"n{i}", **{ACCEL: 1}) for i in range(4)]
    existing = [accel_pod(f"low{i}", 1, 10 * (i + 1), f"n{i}") for i in range(4)]

    def chosen(args: dict | None, seed: int) -> str:
        cfg = None if args is None else config(pluginConfig=[{"name": "DefaultPreemption", "args": args}])
        results = run(nodes, [*existing, accel_pod("high", 1, 100)], config=cfg, seed=seed)
        return results["high"].node

    assert {chosen(None, seed) for seed in range(8)} == {"n0"}
    one = {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1}
    assert len({chosen(one, seed) for seed in range(8)}) > 1


def test_min_resources_short_of_free_capacity_may_still_preempt_lower_priority_pods() -> None:
    """8 cards in all, 4 held by a low-priority pod: minResources 8 is short of the free 4, but the pods the gang
    may evict hold the rest, so it preempts; against a pod of its own priority it waits with the gate's message."""
    group = pod_group("train", 2)
    group["spec"]["minResources"] = {ACCEL: "8"}
    workers = [member("w-0", "train", 4, 50), member("w-1", "train", 4, 50)]
    nodes = [node("a", **{ACCEL: 4}), node("b", **{ACCEL: 4})]
    results = run_docs(*nodes, accel_pod("low", 4, 0, "a"), group, *workers)
    assert {results["w-0"].node, results["w-1"].node} == {"a", "b"}
    assert set(evicted(results)) == {"low"}
    results = run_docs(*nodes, accel_pod("peer", 4, 50, "a"), group, *workers)
    assert results["w-0"].node is None and evicted(results) == {}
    assert f"minResources 8 {ACCEL} but 4 free in the cluster" in results["w-0"].message


def started(doc: dict, when: str) -> dict:
    doc.setdefault("status", {}).update({"phase": "Running", "startTime": when})
    return doc


def test_victims_and_candidates_follow_the_start_time_as_more_important_pod_does() -> None:
    """MoreImportantPod: among equal priorities the pod that started earlier is more important, so reprieve keeps
    it; pickOneNodeForPreemption then prefers the node whose highest-priority victims started latest. A pod with
    no status.startTime counts as started now (GetPodStartTime)."""
    nodes = [node("a", **{ACCEL: 2})]
    old = started(accel_pod("old", 1, 5, "a"), "2026-01-01T00:00:00Z")
    new = started(accel_pod("new", 1, 5, "a"), "2026-06-01T00:00:00Z")
    # Bound in the opposite order of their start times: the start time, not the bind order, decides.
    results = run(nodes, [new, old, accel_pod("high", 1, priority=100)])
    assert [v.name for v in results["high"].preempted] == ["new"]

    nodes = [node("a", **{ACCEL: 1}), node("b", **{ACCEL: 1})]
    on_a = started(accel_pod("on-a", 1, 5, "a"), "2026-06-01T00:00:00Z")
    on_b = started(accel_pod("on-b", 1, 5, "b"), "2026-01-01T00:00:00Z")
    results = run(nodes, [on_a, on_b, accel_pod("high", 1, priority=100)])
    assert results["high"].node == "a" and [v.name for v in results["high"].preempted] == ["on-a"]
    results = run(nodes, [accel_pod("unstarted", 1, 5, "b"), on_a, accel_pod("high", 1, priority=100)])
    assert results["high"].node == "b"


def test_a_start_time_that_is_not_rfc3339_is_bad_input() -> None:
    with pytest.raises(InputError, match=r"status\.startTime.*RFC 3339"):
        run([node("a")], [started(pod("p", node_name="a"), "yesterday")])
