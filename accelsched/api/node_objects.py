"""A Node, parsed and checked once from its YAML dict: labels, taints, allocatable resources, images, devices and the
node's accelerator partition and topology. The public entry point is api/objects.py's parse_node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelsched.api import limits, quantity
from accelsched.api.object_fields import (
    DEVICES_ANNOTATION,
    HOSTNAME_LABEL,
    _mapping,
    _string_map,
    metadata,
    parse_resources,
    parse_taints,
)
from accelsched.api.pod_objects import (
    NodeImage,
    parse_devices_annotation,
    parse_node_images,
)
from accelsched.api.selectors import Taint
from accelsched.devices import partition as partitioning
from accelsched.errors import quoted
from accelsched.topology import layout as topology_layout

# ---------------------------------------------------------------------------------------------- nodes


@dataclass
class Node:
    name: str
    source: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    allocatable: dict[str, int] = field(default_factory=dict)
    capacity: dict[str, int] = field(default_factory=dict)
    device_ids: dict[str, list[str]] = field(default_factory=dict)
    layout: Any = None  # topology.layout.NodeLayout when the node's topology is known
    partition: Any = None  # devices.partition.Partition when the node's devices are split (MIG, slices, ...)
    images: tuple[NodeImage, ...] = ()  # status.images: what ImageLocality scores
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


def parse_node(doc: Mapping[str, Any], source: str = "") -> Node:
    where, name, _, meta = metadata(doc, source, "Node", namespaced=False)
    spec = _mapping(where, doc.get("spec"), "spec")
    status = _mapping(where, doc.get("status"), "status")
    capacity = parse_resources(where, status.get("capacity"), "status.capacity")
    allocatable = (
        parse_resources(where, status.get("allocatable"), "status.allocatable")
        if "allocatable" in status
        else dict(capacity)
    )
    for res, amount in allocatable.items():
        if res in capacity and amount > capacity[res]:
            raise where.error(f"status.allocatable[{res}]", f"is larger than status.capacity[{res}]")
        too_many = quantity.is_extended(res) and limits.exceeded(f"{res} devices", amount, "devices")
        if too_many:  # each device gets an ID: a count in the billions would fill memory
            raise where.error(f"status.allocatable[{res}]", too_many)
    labels = _string_map(where, meta.get("labels"), "metadata.labels")
    labels.setdefault(HOSTNAME_LABEL, name)
    annotations = _string_map(where, meta.get("annotations"), "metadata.annotations")
    device_ids: dict[str, list[str]] = {}
    if DEVICES_ANNOTATION in annotations:
        path = f"metadata.annotations[{DEVICES_ANNOTATION}]"
        device_ids = parse_devices_annotation(where, annotations[DEVICES_ANNOTATION], path)
        for res, ids in device_ids.items():
            if len(ids) < allocatable.get(res, 0):
                raise where.error(
                    path, f"names {len(ids)} devices of {res} but the node advertises {allocatable.get(res, 0)}"
                )
    unschedulable = spec.get("unschedulable", False)
    if not isinstance(unschedulable, bool):
        raise where.error("spec.unschedulable", f"must be true or false, got {quoted(unschedulable)}")
    node = Node(
        name=name,
        source=source,
        labels=labels,
        annotations=annotations,
        taints=parse_taints(where, spec.get("taints"), "spec.taints"),
        unschedulable=unschedulable,
        allocatable=allocatable,
        capacity=capacity or dict(allocatable),
        device_ids=device_ids,
        images=parse_node_images(where, status),
        raw=dict(doc),
    )
    if topology_layout.TOPOLOGY_ANNOTATION in annotations:
        node.layout = topology_layout.from_annotation(where, annotations[topology_layout.TOPOLOGY_ANNOTATION])
    topology_layout.apply_labels(node, where)
    topology_layout.finish(node, where)
    if partitioning.PARTITION_ANNOTATION in annotations:
        node.partition = partitioning.parse(where, annotations[partitioning.PARTITION_ANNOTATION], node.device_ids)
        # The partitioning says what the node serves (the device plugin would advertise the same).
        node.allocatable.update(node.partition.capacity())
        node.capacity.update(node.partition.capacity())
    return node
