"""accelsched's Topology Manager prediction against the real kubelet's single-numa-node policy.

This machine has one NUMA node, which limits what can be shown (docs/node.md lists it). The plugin reports
``ai-accelerator-0``/``-1`` on NUMA node 0 and ``-2``/``-3`` on NUMA node 1, and the Node's topology annotation says
the same. For the kubelet, whose machine has only NUMA node 0, a device on node 1 is in no NUMA mask at all. What
both agree on here: a pod that needs more devices than one NUMA node holds is rejected at admission, and a pod that
fits in NUMA node 0 is admitted with NUMA node 0's devices.

Real components: kube-apiserver + etcd, the kubelet v1.36.3 (Topology Manager single-numa-node, restarted with it),
containerd + runc, `accelsched device-plugin`, `accelsched run`. About 40 s on 2 cores.
"""

from __future__ import annotations

import nodekit as nk
import podkit
import pytest
from dpkit import wait_capacity

TOPOLOGY = """policy: single-numa-node
scope: container
numa: {0: {cpus: 1}, 1: {cpus: 1}}
devices:
  qualcomm.com/ai-accelerator: [ai-accelerator-0@0, ai-accelerator-1@0, ai-accelerator-2@1, ai-accelerator-3@1]
"""


@pytest.fixture
def single_numa_node(node):
    node.reconfigure_kubelet(topologyManagerPolicy="single-numa-node", topologyManagerScope="container")
    node.untaint_not_ready()
    try:
        yield
    finally:
        node.core.patch_node(node.name, {"metadata": {"annotations": {"accelsched.io/topology": None}}})
        node.reconfigure_kubelet(topologyManagerPolicy=None, topologyManagerScope=None)


def _pod_scheduled_message(node, ns, name):
    pod = node.core.read_namespaced_pod(name, ns)
    for c in pod.status.conditions or []:
        if c.type == "PodScheduled" and c.status == "False":
            return c.message
    return None


def test_single_numa_node_rejections_and_admissions_agree(node, ns, device_plugin, scheduler, single_numa_node):
    plugin = device_plugin(fake={"numa": [0, 0, 1, 1]})
    wait_capacity(node, plugin.resource, 4)
    node.core.patch_node(node.name, {"metadata": {"annotations": {"accelsched.io/topology": TOPOLOGY}}})
    scheduler()

    # Three devices fit on no single NUMA node: accelsched predicts the kubelet's rejection and does not bind.
    node.core.create_namespaced_pod(ns, podkit.probe_pod("wide", plugin.resource, 3))
    message = nk.wait_for("accelsched to leave 'wide' Pending", lambda: _pod_scheduled_message(node, ns, "wide"))
    assert "Topology Manager: TopologyAffinityError" in message, message
    # The same pod bound to the node regardless (what a topology-blind scheduler does): the kubelet rejects it.
    node.core.create_namespaced_pod(ns, podkit.probe_pod("wide-bound", plugin.resource, 3, node_name=node.name))

    def rejected():
        pod = node.core.read_namespaced_pod("wide-bound", ns)
        return pod.status if pod.status.phase == "Failed" else None

    status = nk.wait_for("the kubelet to reject 'wide-bound'", rejected, timeout=60)
    assert status.reason == "TopologyAffinityError", status

    # Two fit on NUMA node 0: accelsched places them there and the kubelet admits the pod with those devices.
    node.core.create_namespaced_pod(ns, podkit.probe_pod("fits", plugin.resource, 2))
    ev = podkit.evidence(node, plugin, ns, "fits")
    podkit.record("topology", ev)
    assert ev.agree, ev
    assert ev.annotation == ["ai-accelerator-0", "ai-accelerator-1"]
    pod = node.core.read_namespaced_pod("fits", ns)
    assert pod.metadata.annotations.get("accelsched.io/numa-nodes") == "0"
