"""Where the plugin's devices come from: real accelerators under /sys, or a fake inventory from the config.

A source answers two questions: which physical devices there are (once, at start; a new card needs a plugin
restart, as with the NVIDIA plugin) and which of them are healthy now (every health interval). Both carry the
PCIe placement, so GetPreferredAllocation can score device pairs exactly as the scheduler's allocator does.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from accelsched.deviceplugin.config import NODE_PLACEHOLDERS, FakeConfig, PluginConfig, SysfsConfig
from accelsched.errors import InputError
from accelsched.topology.model import PciDevice
from accelsched.topology.sysfs import discover

log = logging.getLogger(__name__)
MAX_DEVICE_ID = 63  # the kubelet's limit on Device.ID


@dataclass(frozen=True)
class PhysicalDevice:
    """One accelerator the node has: its plugin ID, its position in the plugin's list (``{index}``), where it is."""

    id: str
    index: int
    pci: PciDevice

    @property
    def numa_node(self) -> int | None:
        return self.pci.numa_node


class DeviceSource(Protocol):
    def devices(self) -> list[PhysicalDevice]: ...

    def health(self) -> dict[str, bool]:
        """Device ID -> healthy, read now."""
        ...

    def device_nodes(self, device: PhysicalDevice) -> dict[str, int]:
        """The device's node numbers now, by placeholder (``accel``, ``render``, ``card``); absent: no such node."""
        ...


_NODE_RE = re.compile(rf"^({'|'.join(NODE_PLACEHOLDERS.values())})(\d+)$")
_PLACEHOLDER_OF = {prefix: name for name, prefix in NODE_PLACEHOLDERS.items()}


def sysfs_device_nodes(device_dir: Path) -> dict[str, int]:
    """What the driver registered for a PCI device: ``accel/accelN`` (DRM accel: /dev/accel/accelN) and
    ``drm/renderDN``, ``drm/cardN`` (/dev/dri/...). The kernel numbers these per driver and in probe order, so they
    differ from a device's position in any list we make."""
    out: dict[str, int] = {}
    for sub in ("accel", "drm"):
        try:
            names = os.listdir(device_dir / sub)
        except OSError:
            continue
        for name in sorted(names):
            m = _NODE_RE.match(name)
            if m:
                out.setdefault(_PLACEHOLDER_OF[m.group(1)], int(m.group(2)))
    return out


class SysfsSource:
    """Accelerators found by topology discovery (PCI class 0x0302, 0x0380, 0x1200, and 0x0300 from GPU vendors;
    optionally only some vendors).

    A device is unhealthy when its sysfs entry is gone (hot-unplug, fallen off the bus) or, with ``requireDriver``,
    when no driver is bound to it (unbound, or the driver crashed and released it): the kubelet must not hand it out.
    """

    def __init__(self, config: SysfsConfig) -> None:
        self.root = Path(config.root)
        self.require_driver = config.require_driver
        topo = discover(config.root)
        for warning in topo.warnings:
            log.warning("sysfs: %s", warning)
        found = [d for d in topo.accelerators() if not config.vendors or d.vendor in config.vendors]
        self._devices = [PhysicalDevice(d.address, i, d) for i, d in enumerate(found)]

    def devices(self) -> list[PhysicalDevice]:
        return list(self._devices)

    def health(self) -> dict[str, bool]:
        bus = self.root / "sys" / "bus" / "pci" / "devices"
        out = {}
        for dev in self._devices:
            entry = bus / dev.id
            present = entry.is_dir()  # follows the bus symlink: a dangling one means the device is gone
            bound = os.path.isdir(entry / "driver") if self.require_driver else True
            out[dev.id] = present and bound
        return out

    def device_nodes(self, device: PhysicalDevice) -> dict[str, int]:
        return sysfs_device_nodes(self.root / "sys" / "bus" / "pci" / "devices" / device.id)


class FakeSource:
    """A made-up inventory, so the plugin runs on any node and in kind-style clusters: ``devices`` IDs
    ``<idPrefix>-<i>``, spread over NUMA nodes, optionally paired behind PCIe switches, with a health schedule.

    ``clock`` is injectable so tests step through the schedule deterministically instead of sleeping.
    """

    def __init__(self, config: FakeConfig, clock: Callable[[], float] = time.monotonic, source: str = "") -> None:
        self.clock = clock
        self.start = clock()
        n = config.devices
        if config.numa:
            numa = list(config.numa)
        else:
            per = -(-n // config.numa_nodes) if n else 1
            numa = [i // per for i in range(n)]
        self._devices = []
        for i in range(n):
            ident = f"{config.id_prefix}-{i}"
            if len(ident) > MAX_DEVICE_ID:
                raise InputError(f"device ID {ident!r} is longer than {MAX_DEVICE_ID}", source=source, field="fake")
            switch = config.devices_per_switch
            # One root complex per NUMA node; behind it one switch per `switch` devices, or a root port each.
            bridge = f"fake-switch-{numa[i]}-{i // switch}" if switch else f"fake-port-{i}"
            pci = PciDevice(
                address=f"fake:{i:02x}",
                vendor=0,
                device=0,
                pci_class=0x120000,
                numa_node=numa[i],
                bridges=(bridge,),
                root=f"pci{numa[i]:04x}:00",
                kind="accelerator",
            )
            self._devices.append(PhysicalDevice(ident, i, pci))
        known = {d.id for d in self._devices}
        for k, event in enumerate(config.health):
            if event.device not in known:
                raise InputError(
                    f"unknown device {event.device!r} (devices: {', '.join(sorted(known)) or 'none'})",
                    source=source,
                    obj="DevicePluginConfig",
                    field=f"fake.health[{k}].device",
                )
        self.schedule = config.health

    def devices(self) -> list[PhysicalDevice]:
        return list(self._devices)

    def device_nodes(self, device: PhysicalDevice) -> dict[str, int]:
        """Made up like the devices: node numbers follow the position (render nodes start at 128, as DRM's)."""
        return {"accel": device.index, "render": 128 + device.index, "card": device.index}

    def health(self) -> dict[str, bool]:
        elapsed = self.clock() - self.start
        out = {d.id: True for d in self._devices}
        for event in self.schedule:  # sorted by time: the last event due wins
            if event.after_seconds <= elapsed:
                out[event.device] = event.healthy
        return out


def from_config(config: PluginConfig, clock: Callable[[], float] = time.monotonic) -> DeviceSource:
    if config.source == "fake":
        return FakeSource(config.fake, clock, config.source_file)
    return SysfsSource(config.sysfs)
