"""What the plugin advertises: units per resource name (whole devices, time-slicing replicas, MIG instances),
their health, and the watchers to tell when it changes.

Partitioning uses the fractional ledger's own syntax and validation (``accelsched.devices.partition.parse``), so the
IDs the plugin advertises are the allocation IDs the scheduler writes: ``gpu-0::3`` for a replica and
``gpu-0:3g.20gb@4`` for a MIG instance. A unit is as healthy as the physical device under it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelsched.api import goyaml
from accelsched.deviceplugin.config import CDI_DEVICE_NAME_RE, PluginConfig
from accelsched.deviceplugin.sources import MAX_DEVICE_ID, DeviceSource, PhysicalDevice
from accelsched.devices import partition
from accelsched.errors import InputError, Where

ADVERTISED_MODES = ("timeslicing", "mig")


@dataclass(frozen=True)
class Unit:
    """One advertised device ID, the physical device behind it, and the ID a container is shown (``visible``):
    the physical device for a time-slicing replica, the instance for MIG, the device itself otherwise."""

    id: str
    device: PhysicalDevice
    visible: str


def units_by_resource(config: PluginConfig, devices: list[PhysicalDevice]) -> dict[str, list[Unit]]:
    """Resource name -> the units advertised under it, in device order."""
    units = _units(config, devices)
    kind = config.allocate.cdi_kind
    for resource, items in units.items():
        long = next((u.id for u in items if len(u.id) > MAX_DEVICE_ID), None)
        if long:
            raise InputError(
                f"device ID {long!r} for {resource} is longer than the kubelet's {MAX_DEVICE_ID} characters",
                source=config.source_file,
                obj="DevicePluginConfig",
                field="partitioning" if config.partitioning else config.source,
            )
        bad = next((u.visible for u in items if kind and not CDI_DEVICE_NAME_RE.fullmatch(u.visible)), None)
        if bad:
            raise InputError(
                f"{kind}={bad} is not a CDI device name (letters, digits, _ - . : between a letter or digit at each"
                " end), so the runtime would refuse it; leave cdiKind empty for these devices",
                source=config.source_file,
                obj="DevicePluginConfig",
                field="allocate.cdiKind",
            )
    return units


def _units(config: PluginConfig, devices: list[PhysicalDevice]) -> dict[str, list[Unit]]:
    doc = config.partitioning
    if not doc:
        return {config.resource_name: [Unit(d.id, d, d.id) for d in devices]}
    ids = [d.id for d in devices]
    by_id = {d.id: d for d in devices}
    where = Where(config.source_file, "DevicePluginConfig")
    if doc.get("mode") not in ADVERTISED_MODES:
        raise where.error(
            "partitioning.mode",
            f"{doc.get('mode')!r} cannot be advertised by a device plugin ({', '.join(ADVERTISED_MODES)})",
        )
    if doc["mode"] == "timeslicing":
        doc = {"resource": config.resource_name, **doc}
    elif doc.get("dynamic", True):
        raise where.error(
            "partitioning.dynamic",
            "a device plugin advertises the MIG instances that exist: set dynamic: false and list instances",
        )
    part = _parse(where, doc, ids)
    out: dict[str, list[Unit]] = {}
    if part.mode == "timeslicing":
        units = []
        for dev_id in part.devices:
            units.extend(Unit(f"{dev_id}::{n}", by_id[dev_id], dev_id) for n in range(part.replicas))
        out[part.resource] = units
        return out
    for d, dev_id in enumerate(part.devices):
        for inst in part.fixed[d]:
            resource = partition.GPU_RESOURCE if part.strategy == "single" else partition.MIG_PREFIX + inst.profile
            ident = f"{dev_id}:{inst}"
            out.setdefault(resource, []).append(Unit(ident, by_id[dev_id], ident))
    if not out:
        raise where.error("partitioning.instances", "lists no MIG instances: there would be nothing to advertise")
    return out


def _parse(where: Where, doc: Mapping[str, Any], ids: list[str]) -> partition.Partition:
    """The ledger's parser, with its annotation field path turned into this config's ``partitioning``."""
    listed = doc.get("devices")
    unknown = [d for d in listed if d not in ids] if isinstance(listed, list) else []
    if unknown:
        raise where.error("partitioning.devices", f"unknown device(s) {', '.join(map(str, unknown))}")
    try:
        return partition.parse(where, goyaml.dump(dict(doc)), {partition.GPU_RESOURCE: ids})
    except InputError as exc:
        annotation = f"metadata.annotations[{partition.PARTITION_ANNOTATION}]"
        exc.field = exc.field.replace(annotation, "partitioning")
        raise


class Inventory:
    """Current health of every physical device, a version that moves on every change, and subscriber queues
    that receive every change in order (so a flap Unhealthy -> Healthy is seen twice, never merged away)."""

    def __init__(self, source: DeviceSource) -> None:
        self.source = source
        self.devices = source.devices()
        self.healthy: dict[str, bool] = source.health()
        self.version = 0
        self._lock = threading.Lock()
        self._subscribers: list[queue.Queue[dict[str, bool] | None]] = []

    def refresh(self) -> list[str]:
        """Read health from the source; on a change notify every subscriber. Returns the IDs that changed."""
        now = self.source.health()
        with self._lock:
            changed = [d for d, ok in now.items() if self.healthy.get(d) != ok]
            if changed:
                self.healthy = now
                self.version += 1
                for q in self._subscribers:
                    q.put(dict(now))
        return changed

    def subscribe(self) -> tuple[dict[str, bool], queue.Queue[dict[str, bool] | None]]:
        """The health now and a queue of every later health map (None: the plugin is stopping)."""
        q: queue.Queue[dict[str, bool] | None] = queue.Queue()
        with self._lock:
            self._subscribers.append(q)
            return dict(self.healthy), q

    def unsubscribe(self, q: queue.Queue[dict[str, bool] | None]) -> None:
        with self._lock:
            if q in self._subscribers:
                self._subscribers.remove(q)

    def close(self) -> None:
        with self._lock:
            for q in self._subscribers:
                q.put(None)
