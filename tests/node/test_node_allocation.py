"""accelsched's device choice against the real kubelet: registration, Allocate, what the container sees.

Real components: kube-apiserver + etcd, the kubelet v1.36.3, containerd + runc, the CNI plugins, `accelsched
device-plugin` from its DaemonSet's command, and `accelsched run`. About 40 s on 2 cores after the node is up.
"""

from __future__ import annotations

import shutil
import subprocess

import nodekit as nk
import podkit
from dpkit import ACCEL_MAJOR, wait_capacity


def test_plugin_registers_and_the_node_advertises_its_devices(node, device_plugin):
    plugin = device_plugin()
    n = wait_capacity(node, plugin.resource, 4)
    assert n.status.capacity[plugin.resource] == "4"
    assert n.status.allocatable[plugin.resource] == "4"
    assert n.status.node_info.kubelet_version == "v1.36.3"
    kubectl = shutil.which("kubectl")
    if kubectl:  # the same status as `kubectl describe node` shows it to a user
        out = subprocess.run(
            [kubectl, "--kubeconfig", str(node.control_plane.kubeconfig), "describe", "node", node.name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert any(line.split() == [f"{plugin.resource}:", "4"] for line in out.splitlines()), out


def test_the_kubelet_allocates_the_devices_accelsched_chose(node, ns, device_plugin, scheduler):
    plugin = device_plugin()
    wait_capacity(node, plugin.resource, 4)
    scheduler()
    got = []
    for name in ("first", "second"):
        node.core.create_namespaced_pod(ns, podkit.probe_pod(name, plugin.resource, 2))
        ev = podkit.evidence(node, plugin, ns, name)
        podkit.record("allocation", ev)
        got.append(ev)
        # The kubelet's Allocate got exactly the IDs accelsched wrote, and the container sees them.
        assert ev.annotation and ev.annotation == ev.checkpoint == ev.container, ev
        assert sorted(plugin.allocations()[-1]) == ev.annotation
        # One device node per device, as the ConfigMap's deviceNodes asks: /dev/accel/accelN, char 261:N.
        expected = {
            f"/dev/accel/accel{d.rsplit('-', 1)[1]}": f"char {ACCEL_MAJOR}:{d.rsplit('-', 1)[1]}" for d in ev.annotation
        }
        assert ev.device_nodes == expected, ev
    assert set(got[0].annotation).isdisjoint(got[1].annotation)
    assert nk.wait_for("allocatable to stay 4 with 4 in use", lambda: node.allocatable(plugin.resource) == 4)


def test_pods_created_together_each_get_the_devices_accelsched_chose(node, ns, device_plugin, scheduler):
    """The device plugin API names no pod, so the kubelet hands devices out in the order the Bindings reach it:
    accelsched sends a node's device-pod Bindings in decision order (live.writer), so each pod gets its own."""
    plugin = device_plugin()
    wait_capacity(node, plugin.resource, 4)
    scheduler()
    names = [f"single-{i}" for i in range(4)]
    for name in names:  # bound back to back; the kubelet admits them in the order the bindings reach it
        node.core.create_namespaced_pod(ns, podkit.probe_pod(name, plugin.resource, 1))
    evs = [podkit.evidence(node, plugin, ns, name) for name in names]
    for ev in evs:
        podkit.record("together", ev)
    assert all(ev.agree for ev in evs), evs
    assert sorted(d for ev in evs for d in ev.annotation) == [f"ai-accelerator-{i}" for i in range(4)]
