"""The order in which the device plugin writes a Node's device IDs (accelsched/deviceplugin/publish.py).

The scheduler reads a Node's first ``allocatable`` IDs of ``accelsched.io/devices`` as its usable devices, so the
healthy IDs must come first. The write itself is exercised against the real kubelet and API server in
tests/node/test_node_lifecycle.py.
"""

from __future__ import annotations

from accelsched.cluster.devices import NodeDevices
from accelsched.deviceplugin.config import FakeConfig, PluginConfig
from accelsched.deviceplugin.inventory import units_by_resource
from accelsched.deviceplugin.publish import NodePublisher, ordered_ids
from accelsched.deviceplugin.sources import FakeSource

RESOURCE = "qualcomm.com/ai-accelerator"


def _units():
    config = PluginConfig(resource_name=RESOURCE, source="fake", fake=FakeConfig(devices=4, id_prefix="qaic"))
    return units_by_resource(config, FakeSource(config.fake).devices())[RESOURCE]


def test_healthy_ids_come_first_in_the_plugins_order():
    healthy = {"qaic-0": True, "qaic-1": False, "qaic-2": True, "qaic-3": True}
    assert ordered_ids(_units(), healthy) == ["qaic-0", "qaic-2", "qaic-3", "qaic-1"]


def test_the_scheduler_then_uses_exactly_the_healthy_devices():
    healthy = {"qaic-0": True, "qaic-1": False, "qaic-2": False, "qaic-3": True}
    ids = NodePublisher(None, "node-a", {RESOURCE: _units()}).wanted(healthy)[RESOURCE]
    # The kubelet's allocatable is the healthy count: 2.
    pool = NodeDevices.for_node({RESOURCE: 2}, {RESOURCE: ids}).pools[RESOURCE]
    assert pool.ids == ["qaic-0", "qaic-3"]
