"""DeviceAllocation (accelsched): at Reserve, picks the concrete device IDs of every extended resource.

kube-scheduler only counts extended resources; the kubelet's device manager picks IDs later. accelsched picks
them in the scheduling cycle so the result names the devices, and topology or fragmentation policies can
choose them. Unreserve gives them back, so a cycle that fails after Reserve leaves nothing held.
"""

from __future__ import annotations

import json

from accelsched.api.objects import DEVICES_ANNOTATION, Pod
from accelsched.cluster.devices import Allocator, first_free
from accelsched.cluster.state import ClusterState
from accelsched.framework.interface import SUCCESS, CycleState, Status, unschedulable

NAME = "DeviceAllocation"


class DeviceAllocation:
    name = NAME

    def __init__(self, allocator: Allocator = first_free) -> None:
        self.allocator = allocator

    def reserve(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> Status:
        try:
            pod.devices = cluster.devices[node].allocate(pod.requests, self.allocator)
        except ValueError as exc:
            return unschedulable(NAME, str(exc))
        if pod.devices:
            pod.raw.setdefault("metadata", {}).setdefault("annotations", {})[DEVICES_ANNOTATION] = json.dumps(
                pod.devices, sort_keys=True
            )
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> None:
        cluster.devices[node].release(pod.devices)
        pod.devices = {}
        annotations = pod.raw.get("metadata", {}).get("annotations") or {}
        annotations.pop(DEVICES_ANNOTATION, None)


def new(args: dict, handle: object) -> DeviceAllocation:
    return DeviceAllocation()
