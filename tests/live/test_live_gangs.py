"""Gangs through the API: all members bound or none, the waiting gang says why (the offline message), a gang
waits for its members to exist, and a bind that fails mid-gang keeps what is bound and completes the rest."""

from __future__ import annotations

import time

from conftest import KubeContext
from livekit import (
    LAB,
    accel_pod,
    apply_nodes,
    condition_message,
    decided,
    docs,
    for_accelsched,
    kube_for,
    node_of,
    running_scheduler,
    wait_for,
)

from accelsched import report
from accelsched.engine import schedule
from accelsched.live import kube as k
from accelsched.live.kube import ApiError

GANG_LABEL = "scheduling.x-k8s.io/pod-group"


def _priority_class(api: k.Kube) -> None:
    (pc,) = [d for d in docs(LAB / "07-topology.yaml", "PriorityClass") if d["metadata"]["name"] == "training-high"]
    try:
        api.create(k.Resource("/apis/scheduling.k8s.io/v1", "priorityclasses", namespaced=False), pc)
    except ApiError as exc:
        assert exc.status == 409


def _pod_group(api: k.Kube, namespace: str, name: str, min_member: int) -> None:
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member},
    }
    api.create(k.POD_GROUPS, body, namespace)


def test_two_gangs_where_one_fits_bind_all_or_nothing_as_offline(kube: KubeContext, tmp_path) -> None:
    gangs = LAB / "09-gangs.yaml"
    pc = tmp_path / "pc.yaml"
    pc.write_text(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: training-high}\nvalue: 1000\n"
    )
    _, offline_results = schedule([pc, gangs])
    offline = {r.pod.name: report.pod_json(r) for r in offline_results}

    api = kube_for(kube.kubeconfig)
    _priority_class(api)
    apply_nodes(kube.api, gangs)
    for group in docs(gangs, "PodGroup"):
        _pod_group(api, kube.namespace, group["metadata"]["name"], group["spec"]["minMember"])
    for pod in docs(gangs, "Pod"):
        api.create(k.PODS, for_accelsched(pod, kube.namespace), kube.namespace)
    with running_scheduler(kube.kubeconfig):
        for n in offline:
            wait_for(f"a decision on {n}", lambda n=n: decided(api, kube.namespace, n))
        time.sleep(1.0)  # nothing else may happen later: the waiting gang stays whole-Pending
        live = {n: decided(api, kube.namespace, n) for n in offline}

    by_gang: dict[str, set[bool]] = {}
    for name, pod in live.items():
        by_gang.setdefault(pod["metadata"]["labels"][GANG_LABEL], set()).add(bool(pod["spec"].get("nodeName")))
        assert pod["spec"].get("nodeName") == offline[name]["node"], name
        if not offline[name]["node"]:
            # The gang message names the PodGroup by namespace/name: the test's namespace instead of default.
            expected = offline[name]["message"].replace("gang default/", f"gang {kube.namespace}/")
            assert condition_message(pod) == expected, name
    assert by_gang == {"train-a": {True}, "train-b": {False}}


def test_a_gang_waits_for_min_member_pods_then_binds_whole(kube: KubeContext) -> None:
    api = kube_for(kube.kubeconfig)
    kube.make_node("g1", capacity={"qualcomm.com/ai-accelerator": 4})
    _pod_group(api, kube.namespace, "trio", 3)
    labels = {GANG_LABEL: "trio"}
    with running_scheduler(kube.kubeconfig) as scheduler:
        for i in range(2):
            api.create(k.PODS, accel_pod(f"trio-{i}", kube.namespace, 1, labels), kube.namespace)
        waiting = (  # Coscheduling's PreFilter message (scheduler-plugins), as offline
            "0/1 nodes are available: pre-filter pod trio-1 cannot find enough sibling pods, current pods number: 2,"
            " minMember of group: 3."
        )
        wait_for(
            "the waiting condition", lambda: condition_message(decided(api, kube.namespace, "trio-1") or {}) == waiting
        )
        assert scheduler.bound_total == 0
        api.create(k.PODS, accel_pod("trio-2", kube.namespace, 1, labels), kube.namespace)
        for i in range(3):
            wait_for(f"trio-{i} bound", lambda i=i: node_of(api, kube.namespace, f"trio-{i}"))


def test_a_bind_failing_mid_gang_keeps_the_bound_members_and_completes_the_gang(kube: KubeContext) -> None:
    """A Binding cannot be taken back: when member 2 of 3 is deleted after members were decided and member 1
    is bound, member 3 is still bound, and a replacement for member 2 completes the gang (minMember counts the
    bound ones), instead of the gang waiting forever for 3 new pods."""
    api = kube_for(kube.kubeconfig)
    kube.make_node("g1", capacity={"qualcomm.com/ai-accelerator": 4})
    _pod_group(api, kube.namespace, "trio", 3)
    labels = {GANG_LABEL: "trio"}
    for i in range(3):
        api.create(k.PODS, accel_pod(f"trio-{i}", kube.namespace, 1, labels), kube.namespace)

    def delete_second_member(pod, node) -> None:
        if pod.name == "trio-1":
            api.request("DELETE", k.PODS.path(kube.namespace, "trio-1"), {"gracePeriodSeconds": 0})

    with running_scheduler(kube.kubeconfig, before_bind=delete_second_member) as scheduler:
        wait_for("trio-0 and trio-2 bound", lambda: all(node_of(api, kube.namespace, f"trio-{i}") for i in (0, 2)))
        scheduler.before_bind = None
        wait_for(
            "the failed bind counted",
            lambda: scheduler.metrics.registry.get_sample_value("accelsched_binds_total", {"outcome": "gone"}) == 1,
        )
        api.create(k.PODS, accel_pod("trio-3", kube.namespace, 1, labels), kube.namespace)
        wait_for("the replacement bound", lambda: node_of(api, kube.namespace, "trio-3"))
    assert [node_of(api, kube.namespace, f"trio-{i}") for i in range(4)] == ["g1", "", "g1", "g1"]
