"""Preemption live: the victim is deleted through the API, the preemptor is nominated (status.nominatedNodeName)
and bound only once the victim is gone, never onto room that is still taken."""

from __future__ import annotations

import time

from conftest import KubeContext
from livekit import accel_pod, events_for, kube_for, node_of, pod_json, running_scheduler, wait_for

from accelsched.live import kube as k
from accelsched.live.kube import ApiError

PRIORITY_CLASSES = k.Resource("/apis/scheduling.k8s.io/v1", "priorityclasses", namespaced=False)


def high_priority_class(api: k.Kube) -> None:
    try:
        api.create(PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                      "metadata": {"name": "live-high"}, "value": 1000})  # fmt: skip
    except ApiError as exc:
        assert exc.status == 409


def test_preemptor_waits_for_its_victim_to_be_gone(kube: KubeContext) -> None:
    api = kube_for(kube.kubeconfig)
    high_priority_class(api)
    kube.make_node("only", capacity={"qualcomm.com/ai-accelerator": 1})
    with running_scheduler(kube.kubeconfig):
        api.create(k.PODS, accel_pod("low", kube.namespace), kube.namespace)
        wait_for("low bound", lambda: node_of(api, kube.namespace, "low"))
        high = accel_pod("high", kube.namespace)
        high["spec"]["priorityClassName"] = "live-high"
        api.create(k.PODS, high, kube.namespace)
        # No kubelet here: the victim's graceful deletion starts and stays, so the room is still taken.
        wait_for(
            "the victim deleting", lambda: pod_json(api, kube.namespace, "low")["metadata"].get("deletionTimestamp")
        )
        victim = pod_json(api, kube.namespace, "low")
        (disruption,) = [c for c in victim["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (disruption["reason"], disruption["message"]) == (
            "PreemptionByScheduler",
            "accelsched: preempting to accommodate a higher priority pod",  # kube-scheduler's wording
        )
        (event,) = wait_for("the Preempted event", lambda: events_for(api, kube.namespace, "low", "Preempted"))
        preemptor = pod_json(api, kube.namespace, "high")
        assert (event["type"], event["note"]) == (
            "Normal",
            f"Preempted by pod {preemptor['metadata']['uid']} on node only",
        )
        assert (event["related"]["name"], event["related"]["uid"]) == ("high", preemptor["metadata"]["uid"])
        assert event["reportingController"] == "accelsched" and event["reportingInstance"].startswith("accelsched-")
        wait_for(
            "high nominated",
            lambda: pod_json(api, kube.namespace, "high").get("status", {}).get("nominatedNodeName") == "only",
        )
        time.sleep(1.5)
        assert node_of(api, kube.namespace, "high") == ""  # not bound while the victim holds the card
        api.request("DELETE", k.PODS.path(kube.namespace, "low"), {"gracePeriodSeconds": 0})  # the kubelet's part
        assert wait_for("high bound", lambda: node_of(api, kube.namespace, "high"), timeout=30) == "only"


def test_room_freed_by_preemption_is_held_for_the_preemptor(kube: KubeContext) -> None:
    """A lower-priority pod arriving while the preemptor waits must not take the freed room (and be preempted in
    turn): the nominated pod holds its node, as kube-scheduler's nominator does."""
    api = kube_for(kube.kubeconfig)
    high_priority_class(api)
    kube.make_node("only", capacity={"qualcomm.com/ai-accelerator": 1})
    ns = kube.namespace
    with running_scheduler(kube.kubeconfig):
        api.create(k.PODS, accel_pod("low", ns), ns)
        wait_for("low bound", lambda: node_of(api, ns, "low"))
        high = accel_pod("high", ns)
        high["spec"]["priorityClassName"] = "live-high"
        api.create(k.PODS, high, ns)
        wait_for("high nominated", lambda: pod_json(api, ns, "high").get("status", {}).get("nominatedNodeName"))
        api.request("DELETE", k.PODS.path(ns, "low"), {"gracePeriodSeconds": 0})  # a fast kubelet
        api.create(k.PODS, accel_pod("late-low", ns), ns)
        assert wait_for("high bound", lambda: node_of(api, ns, "high"), timeout=30) == "only"
        time.sleep(1.0)
        late = pod_json(api, ns, "late-low")
        assert not late["spec"].get("nodeName") and not late["metadata"].get("deletionTimestamp")
        events = wait_for("late-low's FailedScheduling", lambda: events_for(api, ns, "late-low", "FailedScheduling"))
        assert all("Insufficient qualcomm.com/ai-accelerator" in e["note"] for e in events)
