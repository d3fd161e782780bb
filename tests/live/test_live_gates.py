"""Pods with spec.schedulingGates are not scheduled (kube-scheduler's SchedulingGates PreEnqueue) until every
gate is removed; meanwhile they take no room and are counted as gated."""

from __future__ import annotations

import time

from conftest import KubeContext
from livekit import accel_pod, events_for, kube_for, node_of, pod_json, running_scheduler, wait_for

from accelsched.live import kube as k


def test_a_gated_pod_waits_for_its_gates_and_takes_no_room(kube: KubeContext) -> None:
    api = kube_for(kube.kubeconfig)
    ns = kube.namespace
    kube.make_node("only", capacity={"qualcomm.com/ai-accelerator": 1})
    with running_scheduler(kube.kubeconfig) as scheduler:
        gated = accel_pod("gated", ns)
        gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
        api.create(k.PODS, gated, ns)
        time.sleep(1.0)
        api.create(k.PODS, accel_pod("ready", ns), ns)
        assert wait_for("ready bound", lambda: node_of(api, ns, "ready")) == "only"
        value = scheduler.metrics.registry.get_sample_value
        assert not value("accelsched_binds_total", {"outcome": "error"})  # no bind of the gated pod was tried
        wait_for("the gated pod counted", lambda: value("scheduler_pending_pods", {"queue": "gated"}) == 1)
        assert node_of(api, ns, "gated") == "" and events_for(api, ns, "gated", "FailedScheduling") == []
        (condition,) = pod_json(api, ns, "gated")["status"]["conditions"]
        assert condition["reason"] == "SchedulingGated"  # the API server's, left as it is
        api.patch(k.PODS, "gated", {"spec": {"schedulingGates": None}}, ns)  # the gate removed: now it is tried
        wait_for("gated tried", lambda: events_for(api, ns, "gated", "FailedScheduling"))
        assert node_of(api, ns, "gated") == ""  # the only card is ready's
        wait_for("nothing gated", lambda: value("scheduler_pending_pods", {"queue": "gated"}) == 0)
