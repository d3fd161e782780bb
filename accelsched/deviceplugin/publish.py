"""Tell the scheduler *which* devices are healthy: the plugin writes them to its Node's ``accelsched.io/devices``.

The kubelet publishes only counts: a device the plugin reports Unhealthy lowers the Node's allocatable by one, and
nothing on the Node says which one. accelsched allocates device IDs (the ``accelsched.io/devices`` annotation of a
bound pod), and without this it takes the first ``allocatable`` IDs as the healthy ones. The real kubelet showed the
cost (tests/node/test_node_lifecycle.py): with ``ai-accelerator-1`` sick, accelsched wrote it into a pod's
annotation while the kubelet's Allocate gave that pod ``ai-accelerator-2`` and ``-3``.

So, when the plugin knows its node (``--node-name $(NODE_NAME)``, the DaemonSet's downward API), it writes every
advertised ID per resource into the Node's ``accelsched.io/devices`` annotation, healthy ones first in the
plugin's order, then the unhealthy ones. The scheduler reads a node's first ``allocatable`` IDs as its usable devices
(cluster/devices.py), so once the kubelet's status shows the new allocatable, they are exactly the healthy ones.
Between the two writes (up to the kubelet's ``nodeStatusUpdateFrequency``) the scheduler can still count the sick
device when it needs all of them; the kubelet refuses such a pod at admission rather than give a sick device.

Other resources' entries in the annotation are kept (read, merged, written back with the resourceVersion the read
returned, so a concurrent writer is not overwritten). Partitioned resources (MIG, time-slicing) are left out: the
partition ledger names those IDs itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from accelsched.api.objects import DEVICES_ANNOTATION

log = logging.getLogger(__name__)


def ordered_ids(units: Sequence[Any], healthy: Mapping[str, bool]) -> list[str]:
    """The advertised IDs, the healthy ones first (each group in the plugin's order)."""
    ok = [u.id for u in units if healthy.get(u.device.id)]
    sick = [u.id for u in units if not healthy.get(u.device.id)]
    return ok + sick


class NodePublisher:
    """Writes ``accelsched.io/devices`` on ``node_name`` whenever the healthy set changes; retried until it lands."""

    def __init__(self, kube: Any, node_name: str, units: Mapping[str, Sequence[Any]]) -> None:
        self.kube = kube
        self.node_name = node_name
        self.units = dict(units)
        self._published: dict[str, list[str]] | None = None

    def wanted(self, healthy: Mapping[str, bool]) -> dict[str, list[str]]:
        return {resource: ordered_ids(units, healthy) for resource, units in sorted(self.units.items())}

    def publish(self, healthy: Mapping[str, bool]) -> bool:
        """Write the annotation if it changed since the last write that landed; False (and a warning) if it failed,
        so the next health step tries again."""
        from accelsched.live import kube as k

        want = self.wanted(healthy)
        if want == self._published:
            return True
        try:
            node = self.kube.get(k.NODES, self.node_name)
            meta = node.get("metadata") or {}
            current = (meta.get("annotations") or {}).get(DEVICES_ANNOTATION)
            try:
                merged = json.loads(current) if current else {}
            except ValueError:
                merged = {}
            if not isinstance(merged, dict):
                merged = {}
            merged.update(want)
            body = {
                "metadata": {
                    "resourceVersion": meta.get("resourceVersion"),
                    "annotations": {DEVICES_ANNOTATION: json.dumps(merged, sort_keys=True)},
                }
            }
            self.kube.patch(k.NODES, self.node_name, body, content_type="application/merge-patch+json")
        except k.ApiError as exc:
            log.warning("cannot write %s on node %s: %s", DEVICES_ANNOTATION, self.node_name, exc)
            return False
        self._published = want
        log.info("node %s: %s = %s", self.node_name, DEVICES_ANNOTATION, json.dumps(want, sort_keys=True))
        return True
