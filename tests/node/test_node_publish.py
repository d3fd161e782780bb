"""The device plugin's write of the healthy device IDs on the real kubelet's Node (accelsched/deviceplugin/publish.py).

Real components: kube-apiserver + etcd, and the kubelet v1.36.3, which rewrites the Node's status every second while
the plugin patches its metadata. About 2 s.
"""

from __future__ import annotations

import json

from accelsched.deviceplugin.config import FakeConfig, PluginConfig
from accelsched.deviceplugin.inventory import units_by_resource
from accelsched.deviceplugin.publish import NodePublisher
from accelsched.deviceplugin.sources import FakeSource
from accelsched.live.kube import Kube, api_client

RESOURCE = "example.com/publish-test"


def test_the_write_keeps_other_resources_and_follows_health(node):
    key = "accelsched.io/devices"
    node.core.patch_node(node.name, {"metadata": {"annotations": {key: json.dumps({"other.com/x": ["x-0"]})}}})
    config = PluginConfig(resource_name=RESOURCE, source="fake", fake=FakeConfig(devices=3, id_prefix="p"))
    units = units_by_resource(config, FakeSource(config.fake).devices())
    kube = Kube(api_client(str(node.control_plane.kubeconfig)))
    publisher = NodePublisher(kube, node.name, units)
    try:
        assert publisher.publish({"p-0": True, "p-1": True, "p-2": True})
        written = json.loads(node.read_node().metadata.annotations[key])
        assert written == {"other.com/x": ["x-0"], RESOURCE: ["p-0", "p-1", "p-2"]}
        assert publisher.publish({"p-0": False, "p-1": True, "p-2": True})
        written = json.loads(node.read_node().metadata.annotations[key])
        assert written[RESOURCE] == ["p-1", "p-2", "p-0"] and written["other.com/x"] == ["x-0"]
    finally:
        kube.api.close()
        node.core.patch_node(node.name, {"metadata": {"annotations": {key: None}}})
