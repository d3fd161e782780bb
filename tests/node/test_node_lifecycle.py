"""The real kubelet across a restart, a device turning unhealthy, preemption and a gang.

Real components: kube-apiserver + etcd, the kubelet v1.36.3, containerd + runc, `accelsched device-plugin` from
its DaemonSet's command, `accelsched run`. About 90 s on 2 cores after the node is up (the kubelet restart and the
victims' graceful termination are most of it).
"""

from __future__ import annotations

import json

import nodekit as nk
import podkit
from dpkit import wait_capacity


def _registrations(plugin) -> int:
    return plugin.log.read_text().count("registered ")


def test_kubelet_restart_keeps_running_pods_and_their_devices(node, ns, device_plugin, scheduler):
    plugin = device_plugin()
    wait_capacity(node, plugin.resource, 4)
    scheduler()
    node.core.create_namespaced_pod(ns, podkit.probe_pod("before", plugin.resource, 2))
    before = podkit.evidence(node, plugin, ns, "before")
    assert before.agree, before
    container_id = node.core.read_namespaced_pod("before", ns).status.container_statuses[0].container_id
    registrations = _registrations(plugin)

    node.restart_kubelet()
    # The new kubelet removed every socket in the folder: the plugin notices, serves and registers again.
    nk.wait_for("the plugin to register with the new kubelet", lambda: _registrations(plugin) > registrations)
    wait_capacity(node, plugin.resource, 4)
    pod = node.core.read_namespaced_pod("before", ns)
    status = pod.status.container_statuses[0]
    assert pod.status.phase == "Running" and status.container_id == container_id and status.restart_count == 0
    assert podkit.checkpoint_devices(pod.metadata.uid, plugin.resource) == before.annotation

    # The restarted kubelet still counts them as used: the next pod gets the other two.
    node.core.create_namespaced_pod(ns, podkit.probe_pod("after", plugin.resource, 2))
    after = podkit.evidence(node, plugin, ns, "after")
    podkit.record("kubelet-restart", after)
    assert after.agree, after
    assert set(after.annotation).isdisjoint(before.annotation)


def test_an_unhealthy_device_lowers_allocatable_and_accelsched_stops_using_it(node, ns, device_plugin, scheduler):
    sick = "ai-accelerator-1"
    plugin = device_plugin(fake={"health": [{"afterSeconds": 3, "device": sick, "health": "Unhealthy"}]})
    # Capacity counts every device the plugin lists; allocatable only the healthy ones.
    wait_capacity(node, plugin.resource, 4, allocatable=3)
    # Which one is sick is only on the Node because the plugin wrote it there (publish.py): healthy IDs first.
    order = ["ai-accelerator-0", "ai-accelerator-2", "ai-accelerator-3", sick]
    nk.wait_for(
        "the plugin to write the healthy device IDs on the Node",
        lambda: (
            json.loads((node.read_node().metadata.annotations or {}).get(podkit.DEVICES_ANNOTATION, "{}")).get(
                plugin.resource
            )
            == order
        ),
    )
    scheduler()
    evs = []
    for name in ("one", "two"):
        node.core.create_namespaced_pod(ns, podkit.probe_pod(name, plugin.resource, 1 if name == "one" else 2))
        ev = podkit.evidence(node, plugin, ns, name)
        podkit.record("unhealthy-device", ev)
        evs.append(ev)
    for ev in evs:
        assert sick not in ev.annotation and sick not in ev.checkpoint, ev
        assert ev.agree, ev


def _priority_class(node, name: str, value: int) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.SchedulingV1Api(node.api).create_priority_class(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        )
    except ApiException as e:
        if e.status != 409:
            raise


def test_a_preemption_victim_is_deleted_by_the_kubelet_and_its_devices_go_to_the_preemptor(
    node, ns, device_plugin, scheduler
):
    _priority_class(node, "node-e2e-low", 10)
    _priority_class(node, "node-e2e-high", 1000)
    plugin = device_plugin()
    wait_capacity(node, plugin.resource, 4)
    scheduler()
    low = {}
    for name in ("low-a", "low-b"):
        node.core.create_namespaced_pod(ns, podkit.probe_pod(name, plugin.resource, 2, priority_class="node-e2e-low"))
        low[name] = podkit.evidence(node, plugin, ns, name)
        podkit.record("preemption", low[name])
        assert low[name].agree, low[name]
    node.core.create_namespaced_pod(ns, podkit.probe_pod("high", plugin.resource, 2, priority_class="node-e2e-high"))

    # The scheduler deletes a victim gracefully; the object stays, terminating, until the kubelet has stopped its
    # container and deletes it for good.
    def terminating():
        pods = node.core.list_namespaced_pod(ns).items
        return [p.metadata.name for p in pods if p.metadata.deletion_timestamp and p.metadata.name in low]

    victims = nk.wait_for("a victim to be terminating", terminating, timeout=60)
    assert len(victims) == 1, victims
    nk.wait_for(
        f"the kubelet to delete {victims[0]}",
        lambda: victims[0] not in [p.metadata.name for p in node.core.list_namespaced_pod(ns).items],
        timeout=90,
    )
    high = podkit.evidence(node, plugin, ns, "high")
    podkit.record("preemption", high)
    assert high.agree, high
    assert high.annotation == low[victims[0]].annotation  # the victim's devices, and only those
    survivor = next(n for n in low if n != victims[0])
    assert node.core.read_namespaced_pod(survivor, ns).status.phase == "Running"


def test_a_gang_runs_all_its_members_with_their_devices(node, ns, device_plugin, scheduler):
    from kubernetes import client

    plugin = device_plugin()
    wait_capacity(node, plugin.resource, 4)
    scheduler()
    client.CustomObjectsApi(node.api).create_namespaced_custom_object(
        "scheduling.x-k8s.io",
        "v1alpha1",
        ns,
        "podgroups",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "job"},
            "spec": {"minMember": 2},
        },
    )
    names = ("worker-0", "worker-1")
    for name in names:
        pod = podkit.probe_pod(name, plugin.resource, 2)
        pod["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "job"}
        node.core.create_namespaced_pod(ns, pod)
    evs = [podkit.evidence(node, plugin, ns, name) for name in names]
    for ev in evs:
        podkit.record("gang", ev)
        assert ev.agree, ev
    assert sorted(evs[0].annotation + evs[1].annotation) == [f"ai-accelerator-{i}" for i in range(4)]
