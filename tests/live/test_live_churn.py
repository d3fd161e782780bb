"""Churn against the real API server: a burst of 10,000 deletions by others is applied to the session in place.

Before, every deletion by others set ``dirty`` and the next round rebuilt the whole session from the cache (seconds
at this size); now each DELETED event takes that one pod off its node. The cluster is full, so the pending pods can
only be placed once the deletions are in the session. The 10,000 DELETEs go out from 32 clients at once; the API
server takes them as fast as it can (about 35 s on the 2-core development VM, where the burst is the server's ceiling,
not the scheduler's). Takes about 90 s here, most of it creating and deleting the pods.
"""

from __future__ import annotations

import concurrent.futures
import time

from conftest import KubeContext
from livekit import kube_for, running_scheduler, wait_for

from accelsched.engine import Session
from accelsched.live import convert as live_convert
from accelsched.live import kube as k

NODES = 50
PER_NODE = 200  # 200 x 10m: every node's 2 cpus taken
BURST = NODES * PER_NODE


def filler(name: str, namespace: str, node: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"burst": "yes"}},
        "spec": {
            "schedulerName": "default-scheduler",
            "nodeName": node,
            "containers": [
                {"name": "c", "image": "registry.example.com/x:1", "resources": {"requests": {"cpu": "10m"}}}
            ],
        },
    }


def big(name: str, namespace: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "accelsched",
            "containers": [{"name": "c", "image": "registry.example.com/x:1", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def test_a_burst_of_10000_deletions_is_applied_in_place_without_a_rebuild(kube: KubeContext) -> None:
    api = kube_for(kube.kubeconfig)
    ns = kube.namespace
    for i in range(NODES):
        kube.make_node(f"burst-{i:02d}", capacity={"cpu": "2", "pods": PER_NODE + 10})
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(
            pool.map(lambda i: api.create(k.PODS, filler(f"f-{i:05d}", ns, f"burst-{i % NODES:02d}"), ns), range(BURST))
        )

    with running_scheduler(kube.kubeconfig) as scheduler:
        wait_for("the first session", lambda: scheduler.session is not None and scheduler.rebuilds, timeout=120)
        for i in range(5):
            api.create(k.PODS, big(f"big-{i}", ns), ns)
        wait_for(
            "the big pods tried and found no room",
            lambda: all(
                any(
                    c.get("reason") == "Unschedulable"
                    for c in (api.get(k.PODS, f"big-{i}", ns).get("status") or {}).get("conditions") or []
                )
                for i in range(5)
            ),
            timeout=60,
            every=0.5,
        )
        rebuilds, applied = scheduler.rebuilds, scheduler.pods_applied
        started = time.monotonic()
        # As fast as the server takes them: 32 clients deleting at once (a DELETE collection runs one by one).
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            list(
                pool.map(
                    lambda i: api.request(
                        "DELETE", k.PODS.path(ns, f"f-{i:05d}"), {"gracePeriodSeconds": 0}, timeout=120
                    ),
                    range(BURST),
                )
            )
        burst_s = time.monotonic() - started

        def placed() -> bool:
            return all((api.get(k.PODS, f"big-{i}", ns).get("spec") or {}).get("nodeName") for i in range(5))

        wait_for("the big pods bound once the room is free", placed, timeout=120, every=0.5)
        wait_for("every deletion applied", lambda: len(scheduler.pods.store) == 5, timeout=60)
        wait_for("the session caught up", lambda: scheduler.pods_applied - applied >= BURST, timeout=60)
        assert scheduler.rebuilds == rebuilds, f"rebuilt: {scheduler.rebuild_reason}"
        time.sleep(1.0)  # the loop idles now (no events): its session is stable to compare
        with scheduler.lock:
            snapshot = scheduler._snapshot()
        fresh = Session.start(live_convert.convert(snapshot, scheduler.scheduler_names).inputs, scheduler.config)
        session = scheduler.session
        assert session is not None
        assert sorted(session.cluster.pod_node) == sorted(fresh.cluster.pod_node) == [f"{ns}/big-{i}" for i in range(5)]
        cpu = session.cluster.res_index["cpu"]
        assert session.cluster.requested[cpu].tolist() == fresh.cluster.requested[cpu].tolist()
        print(f"{BURST} deletions sent in {burst_s:.2f} s by 32 clients; no rebuild")
