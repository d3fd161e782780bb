"""What real clusters do to a scheduler: the API server killed and restarted mid-run, a watch whose version has
expired (410 Gone), a pod deleted or a node removed between decision and bind, a bind that conflicts."""

from __future__ import annotations

import json
import threading
import time

import pytest
from conftest import KubeContext
from livekit import accel_pod, kube_for, node_of, running_scheduler, wait_for

from accelsched.live import kube as k
from accelsched.live.informer import Informer
from accelsched.live.kube import ApiError

ACCEL = "qualcomm.com/ai-accelerator"


def _delete_pod(api: k.Kube, namespace: str, name: str) -> None:
    api.request("DELETE", k.PODS.path(namespace, name), {"gracePeriodSeconds": 0})


def test_api_server_killed_and_restarted_mid_run(kube: KubeContext) -> None:
    """Nothing bound twice, nothing forgotten: 3 nodes x 20 cards and exactly 60 one-card pods, 40 created
    before the kill (some bound, some deciding or binding when the server dies) and 20 after the restart."""
    api = kube_for(kube.kubeconfig)
    for i in range(3):
        kube.make_node(f"r{i}", capacity={ACCEL: 20})
    cp = kube.control_plane
    with running_scheduler(kube.kubeconfig) as scheduler:
        for i in range(40):
            api.create(k.PODS, accel_pod(f"p{i:02d}", kube.namespace), kube.namespace)
        wait_for("some pods bound", lambda: scheduler.bound_total >= 5, timeout=30, every=0.01)
        cp.stop_apiserver()
        relists = scheduler.pods.relists
        wait_for("the watches seen down", lambda: not scheduler.watching, timeout=30, every=0.01)
        rounds: list[int] = []
        run = scheduler._run
        scheduler._run = lambda pods, nominations=None: rounds.append(len(pods)) or run(pods, nominations)
        threading.Event().wait(2.0)  # the scheduler keeps reconnecting while the server is away...
        assert rounds == []  # ...but decides nothing on its stale cache
        cp.start_apiserver()
        api = kube_for(kube.kubeconfig)
        for i in range(40, 60):
            api.create(k.PODS, accel_pod(f"p{i:02d}", kube.namespace), kube.namespace)
        wait_for(
            "every pod bound",
            lambda: all(node_of(api, kube.namespace, f"p{i:02d}") for i in range(60)),
            timeout=90,
            every=0.5,
        )
        assert scheduler.pods.relists > relists  # it resynced from a fresh list after the restart
        resyncs = scheduler.metrics.registry.get_sample_value("accelsched_cache_resyncs_total")
        assert resyncs >= 3  # nodes, pods and namespaces at least
        # A bind whose answer was lost was confirmed, not decided again (which would end in 409 Conflict).
        assert not scheduler.metrics.registry.get_sample_value("accelsched_binds_total", {"outcome": "conflict"})
    pods = api.list(k.PODS, kube.namespace)["items"]
    assert len(pods) == 60
    per_node: dict[str, list[str]] = {}
    for p in pods:
        per_node.setdefault(p["spec"]["nodeName"], []).extend(
            json.loads(p["metadata"]["annotations"]["accelsched.io/devices"])[ACCEL]
        )
    double = {n: sorted({i for i in ids if ids.count(i) > 1}) for n, ids in per_node.items()}
    assert not any(double.values()), f"devices double-booked: {double}"
    # 60 cards for 60 pods: every card taken exactly once (no double booking, nothing leaked by a lost bind).
    assert {n: sorted(ids) for n, ids in per_node.items()} == {
        f"r{i}": sorted(f"ai-accelerator-{j}" for j in range(20)) for i in range(3)
    }


def test_watch_from_an_expired_version_relists(kube: KubeContext) -> None:
    """A watch from a version the server no longer has gets 410 Gone; the informer relists, and the relist
    reports an object deleted meanwhile as deleted."""
    api = kube_for(kube.kubeconfig)
    api.create(k.PODS, accel_pod("stays", kube.namespace), kube.namespace)
    api.create(k.PODS, accel_pod("goes", kube.namespace), kube.namespace)
    seen: list[tuple[str, str]] = []
    lock = threading.RLock()
    resyncs: list[int] = []
    informer = Informer(
        api,
        k.PODS,
        lambda kind, obj, old: seen.append((kind, obj["metadata"]["name"])),
        lock,
        on_relist=lambda: resyncs.append(1),
    )
    informer._list()
    assert {name for _, name in seen} >= {"stays", "goes"}
    _delete_pod(api, kube.namespace, "goes")
    informer.resource_version = "1"  # long compacted out of the watch cache
    with pytest.raises(ApiError) as gone:
        informer._watch()
    assert gone.value.status == 410  # the server said 410 Gone: relist (at once), do not resume
    seen.clear()
    informer._list()
    assert ("DELETED", "goes") in seen
    assert resyncs == [1]  # the relist counted as a resync (the first list is not one)
    assert f"{kube.namespace}/stays" in informer.store and f"{kube.namespace}/goes" not in informer.store


def test_pod_deleted_between_decision_and_bind_gives_its_reservation_back(kube: KubeContext) -> None:
    api = kube_for(kube.kubeconfig)
    kube.make_node("only", capacity={ACCEL: 1})
    api.create(k.PODS, accel_pod("first", kube.namespace), kube.namespace)

    def delete_it(pod, node) -> None:
        if pod.name == "first":
            _delete_pod(api, kube.namespace, "first")

    with running_scheduler(kube.kubeconfig, before_bind=delete_it) as scheduler:
        wait_for(
            "the bind to fail",
            lambda: scheduler.metrics.registry.get_sample_value("accelsched_binds_total", {"outcome": "gone"}) == 1,
        )
        api.create(k.PODS, accel_pod("second", kube.namespace), kube.namespace)
        # The one card was reserved for "first"; unless that was undone, "second" could never fit.
        assert wait_for("second bound", lambda: node_of(api, kube.namespace, "second")) == "only"


def test_node_removed_between_decision_and_bind_is_not_bound_to(kube: KubeContext) -> None:
    api = kube_for(kube.kubeconfig)
    kube.make_node("doomed", capacity={ACCEL: 2})
    api.create(k.PODS, accel_pod("p", kube.namespace), kube.namespace)

    started: list = []  # the scheduler, once running (the hook may run before the with-block binds the name)

    def remove_node(pod, node) -> None:
        api.request("DELETE", k.NODES.path(None, "doomed"))
        wait_for("the node gone from the cache", lambda: started and "doomed" not in started[0].nodes.store)

    with running_scheduler(kube.kubeconfig, before_bind=remove_node) as scheduler:
        started.append(scheduler)
        wait_for(
            "the bind refused",
            lambda: (
                scheduler.metrics.registry.get_sample_value("accelsched_binds_total", {"outcome": "node-gone"}) == 1
            ),
        )
        scheduler.before_bind = None
        assert node_of(api, kube.namespace, "p") == ""
        kube.make_node("spare", capacity={ACCEL: 2})
        assert wait_for("p bound to the new node", lambda: node_of(api, kube.namespace, "p")) == "spare"


def test_bind_conflict_is_dropped_and_the_other_binding_stands(kube: KubeContext) -> None:
    api = kube_for(kube.kubeconfig)
    kube.make_node("n1", capacity={ACCEL: 4})
    kube.make_node("n2", capacity={ACCEL: 4})
    api.create(k.PODS, accel_pod("contested", kube.namespace), kube.namespace)

    def someone_else_binds(pod, node) -> None:
        other = "n2" if node == "n1" else "n1"
        api.bind(kube.namespace, pod.name, other, pod.uid)
        someone_else_binds.node = other

    with running_scheduler(kube.kubeconfig, before_bind=someone_else_binds) as scheduler:
        wait_for(
            "the conflict",
            lambda: scheduler.metrics.registry.get_sample_value("accelsched_binds_total", {"outcome": "conflict"}) == 1,
        )
        scheduler.before_bind = None
        assert node_of(api, kube.namespace, "contested") == someone_else_binds.node
        # The cache resynced: the pod counts on the other node, and nothing is retried or bound twice.
        api.create(k.PODS, accel_pod("after", kube.namespace, 4), kube.namespace)
        assert wait_for("after bound", lambda: node_of(api, kube.namespace, "after")) == (
            "n1" if someone_else_binds.node == "n2" else "n2"
        )
        wait_for("the bind of after counted", lambda: scheduler.bound_total == 1)
        time.sleep(0.5)
        assert scheduler.bound_total == 1  # "contested" was never bound by us


def test_pending_pods_are_retried_when_a_pod_is_deleted_or_capacity_grows(kube: KubeContext) -> None:
    api = kube_for(kube.kubeconfig)
    kube.make_node("small", capacity={ACCEL: 2})
    with running_scheduler(kube.kubeconfig) as scheduler:
        api.create(k.PODS, accel_pod("holder", kube.namespace, 2), kube.namespace)
        wait_for("holder bound", lambda: node_of(api, kube.namespace, "holder"))
        api.create(k.PODS, accel_pod("waiter", kube.namespace, 2), kube.namespace)
        api.create(k.PODS, accel_pod("big", kube.namespace, 4), kube.namespace)
        wait_for("both unschedulable", lambda: len(scheduler.unschedulable) == 2)
        _delete_pod(api, kube.namespace, "holder")  # pod deleted: its 2 cards are free again
        assert wait_for("waiter bound", lambda: node_of(api, kube.namespace, "waiter")) == "small"
        assert node_of(api, kube.namespace, "big") == ""
        grown = {"status": {"capacity": {ACCEL: "6"}, "allocatable": {ACCEL: "6"}}}  # a device plugin registers more
        api.patch(k.NODES, "small", grown, sub="status")
        assert wait_for("big bound", lambda: node_of(api, kube.namespace, "big")) == "small"
