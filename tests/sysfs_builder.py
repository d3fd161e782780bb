"""Write fixture sysfs trees (NUMA nodes, PCI devices, bus symlinks) so discovery runs on real files and links.

The trees mirror what the kernel exposes: devices live under ``sys/devices/<root complex>/<bridges...>/<bdf>``,
``sys/bus/pci/devices/<bdf>`` is a relative symlink to them, and every bridge on the way is itself a PCI device of
class 0x0604. Ready-made machines (``dgx_like``, ``qaic_box``, ``nic_on_other_socket``) and broken trees are below.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from accelsched.topology.model import device_kind, format_cpulist, parse_cpulist

NVIDIA, MELLANOX, QUALCOMM, INTEL, AMD, ASPEED, BROADCOM = 0x10DE, 0x15B3, 0x17CB, 0x8086, 0x1022, 0x1A03, 0x10B5
H100, L40S, CX7, QAIC_AI100, E810 = 0x2330, 0x26B9, 0x1021, 0xA100, 0x1593
ROOT_PORT, SWITCH_PORT = (AMD, 0x1483), (BROADCOM, 0xC010)


class SysfsBuilder:
    """Builds a sysfs tree under ``root``; every method returns self so a machine reads as one chain of calls."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.sys = self.root / "sys"
        self.created: dict[str, Path] = {}  # bdf -> device directory
        self.online: set[int] = set()
        (self.sys / "bus" / "pci" / "devices").mkdir(parents=True, exist_ok=True)
        (self.sys / "devices" / "system" / "cpu").mkdir(parents=True, exist_ok=True)

    def _write(self, path: Path, content: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content + "\n")

    def cpus_online(self, cpus: Iterable[int]) -> SysfsBuilder:
        self.online.update(cpus)
        self._write(self.sys / "devices" / "system" / "cpu" / "online", format_cpulist(sorted(self.online)))
        return self

    def numa(self, id: int, cpus: Iterable[int] | str, mem_kb: int, distances: Sequence[int]) -> SysfsBuilder:
        """A NUMA node dir with cpulist, distance and meminfo; its CPUs are also marked online."""
        cpu_list = cpus if isinstance(cpus, str) else format_cpulist(sorted(cpus))
        base = self.sys / "devices" / "system" / "node" / f"node{id}"
        self._write(base / "cpulist", cpu_list)
        self._write(base / "distance", " ".join(str(d) for d in distances))
        meminfo = f"Node {id} MemTotal:       {mem_kb} kB\nNode {id} MemFree:        {mem_kb // 2} kB"
        self._write(base / "meminfo", meminfo)
        return self.cpus_online(parse_cpulist(cpu_list))

    def pci(
        self,
        bdf: str,
        class_: int,
        vendor: int,
        device: int,
        numa: int | None,
        parents: Sequence[str] = (),
        root: str = "pci0000:00",
        net: str | None = None,
        ib: str | None = None,
        prog_if: int = 0,
    ) -> SysfsBuilder:
        """A PCI function ``class_`` (16-bit class+subclass) below ``parents``; missing parent bridges are created."""
        for i, parent in enumerate(parents):
            if parent not in self.created:
                vend, dev = ROOT_PORT if i == 0 else SWITCH_PORT
                self.pci(parent, 0x0604, vend, dev, numa, parents[:i], root)
        rel = Path(root, *parents, bdf)
        path = self.sys / "devices" / rel
        self._write(path / "class", f"0x{(class_ << 8) | prog_if:06x}")
        self._write(path / "vendor", f"0x{vendor:04x}")
        self._write(path / "device", f"0x{device:04x}")
        self._write(path / "numa_node", str(-1 if numa is None else numa))
        if net:
            (path / "net" / net).mkdir(parents=True)
        if ib:
            (path / "infiniband" / ib).mkdir(parents=True)
        os.symlink(Path("../../../devices", rel), self.sys / "bus" / "pci" / "devices" / bdf)
        self.created[bdf] = path
        return self

    # Breakage, for the degrade-never-crash tests.
    def write(self, bdf: str, name: str, content: str) -> SysfsBuilder:
        self._write(self.created[bdf] / name, content)
        return self

    def remove(self, bdf: str, name: str) -> SysfsBuilder:
        (self.created[bdf] / name).unlink()
        return self

    def chmod(self, bdf: str, name: str, mode: int) -> SysfsBuilder:
        os.chmod(self.created[bdf] / name, mode)
        return self

    def dangling(self, bdf: str, root: str = "pci0000:00") -> SysfsBuilder:
        os.symlink(Path("../../../devices", root, bdf), self.sys / "bus" / "pci" / "devices" / bdf)
        return self

    # Driver binding and hot-unplug, for device plugin health.
    def bind(self, bdf: str, driver: str) -> SysfsBuilder:
        """``<dev>/driver`` -> ``/sys/bus/pci/drivers/<driver>``, as the kernel links a bound device."""
        drivers = self.sys / "bus" / "pci" / "drivers" / driver
        drivers.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(drivers, self.created[bdf]), self.created[bdf] / "driver")
        return self

    def unbind(self, bdf: str) -> SysfsBuilder:
        (self.created[bdf] / "driver").unlink()
        return self

    def device_node(self, bdf: str, subsystem: str, name: str, dev: str = "0:0") -> SysfsBuilder:
        """What a bound driver registers: ``<dev>/accel/accelN`` or ``<dev>/drm/renderDN``/``cardN``, each a
        directory whose ``dev`` file holds major:minor (/dev/accel/accelN, /dev/dri/renderDN)."""
        self._write(self.created[bdf] / subsystem / name / "dev", dev)
        return self

    def unplug(self, bdf: str) -> SysfsBuilder:
        """The device leaves the bus: its bus entry and its directory are gone."""
        (self.sys / "bus" / "pci" / "devices" / bdf).unlink()
        shutil.rmtree(self.created.pop(bdf))
        return self


def _gpu(b: SysfsBuilder, bdf: str, numa: int, parents: Sequence[str], root: str, device: int = H100) -> None:
    b.pci(bdf, 0x0302, NVIDIA, device, numa, parents, root)


# dgx_like: socket 0 has one root port feeding a two-level switch tree (switch A and B below a top switch), socket 1
# has switches C and D on two separate root complexes; each switch holds two GPUs and one NIC.
DGX_GPUS = [
    "0000:05:00.0", "0000:06:00.0", "0000:0a:00.0", "0000:0b:00.0",
    "0000:83:00.0", "0000:84:00.0", "0000:c3:00.0", "0000:c4:00.0",
]  # fmt: skip
DGX_NICS = ["0000:07:00.0", "0000:0c:00.0", "0000:85:00.0", "0000:c5:00.0"]
DGX_NIC_NAMES = ["mlx5_0", "enp12s0", "mlx5_2", "mlx5_3"]
DGX_CPUS = {0: (*range(0, 16), *range(32, 48)), 1: (*range(16, 32), *range(48, 64))}
DGX_MEM_KB = 512 * 1024 * 1024


def dgx_like(root: str | Path) -> Path:
    """2 sockets, 8 H100 (0x0302), 4 ConnectX-7 behind 4 PCIe switches, plus a BMC VGA and an NVMe ("other")."""
    b = SysfsBuilder(root)
    b.numa(0, "0-15,32-47", DGX_MEM_KB, [10, 21]).numa(1, "16-31,48-63", DGX_MEM_KB, [21, 10])
    top = ["0000:00:01.0", "0000:01:00.0"]
    sw_a = [*top, "0000:02:00.0", "0000:03:00.0"]
    sw_b = [*top, "0000:02:01.0", "0000:08:00.0"]
    _gpu(b, "0000:05:00.0", 0, [*sw_a, "0000:04:00.0"], "pci0000:00")
    _gpu(b, "0000:06:00.0", 0, [*sw_a, "0000:04:01.0"], "pci0000:00")
    b.pci("0000:07:00.0", 0x0207, MELLANOX, CX7, 0, [*sw_a, "0000:04:02.0"], ib="mlx5_0", net="ibp7s0")
    _gpu(b, "0000:0a:00.0", 0, [*sw_b, "0000:09:00.0"], "pci0000:00")
    _gpu(b, "0000:0b:00.0", 0, [*sw_b, "0000:09:01.0"], "pci0000:00")
    b.pci("0000:0c:00.0", 0x0200, MELLANOX, CX7, 0, [*sw_b, "0000:09:02.0"], net="enp12s0")
    for rc, bus, nic_class, ib in (("80", 0x80, 0x0207, "mlx5_2"), ("c0", 0xC0, 0x0200, "mlx5_3")):
        sw = [f"0000:{rc}:01.0", f"0000:{bus + 1:02x}:00.0"]
        dsp = f"0000:{bus + 2:02x}"
        _gpu(b, f"0000:{bus + 3:02x}:00.0", 1, [*sw, f"{dsp}:00.0"], f"pci0000:{rc}")
        _gpu(b, f"0000:{bus + 4:02x}:00.0", 1, [*sw, f"{dsp}:01.0"], f"pci0000:{rc}")
        b.pci(f"0000:{bus + 5:02x}:00.0", nic_class, MELLANOX, CX7, 1, [*sw, f"{dsp}:02.0"], f"pci0000:{rc}", ib=ib)
    b.pci("0000:0e:00.0", 0x0300, ASPEED, 0x2000, 0, ["0000:00:03.0", "0000:0d:00.0"])  # BMC VGA: not a GPU
    b.pci("0000:0f:00.0", 0x0108, 0x144D, 0xA80A, 0, ["0000:00:04.0"], prog_if=0x02)  # NVMe
    return b.root


# qaic_box: four Qualcomm Cloud AI 100 cards, each on its own root port; two root complexes per NUMA node.
QAIC_CARDS = ["0000:01:00.0", "0000:02:00.0", "0000:81:00.0", "0000:82:00.0"]
QAIC_NIC = "0000:41:00.0"


def qaic_box(root: str | Path) -> Path:
    """4 AI 100 (class 0x1200, vendor 0x17cb) on NUMA 0 and 1, one Intel E810 NIC on a third root complex (NUMA 0)."""
    b = SysfsBuilder(root)
    b.numa(0, range(0, 8), 64 * 1024 * 1024, [10, 32]).numa(1, range(8, 16), 64 * 1024 * 1024, [32, 10])
    for bdf, port, rc, numa in (
        ("0000:01:00.0", "0000:00:01.0", "pci0000:00", 0),
        ("0000:02:00.0", "0000:00:02.0", "pci0000:00", 0),
        ("0000:81:00.0", "0000:80:01.0", "pci0000:80", 1),
        ("0000:82:00.0", "0000:80:02.0", "pci0000:80", 1),
    ):
        b.pci(bdf, 0x1200, QUALCOMM, QAIC_AI100, numa, [port], rc)
    b.pci(QAIC_NIC, 0x0200, INTEL, E810, 0, ["0000:40:01.0"], "pci0000:40", net="eth0")
    return b.root


OTHER_SOCKET_GPUS = ["0000:01:00.0", "0000:02:00.0"]
OTHER_SOCKET_NIC = "0000:81:00.0"


def nic_on_other_socket(root: str | Path) -> Path:
    """Two L40S on NUMA 0 and the only NIC on NUMA 1: every GPU-NIC pair crosses the socket link (SYS)."""
    b = SysfsBuilder(root)
    b.numa(0, range(0, 4), 16 * 1024 * 1024, [10, 20]).numa(1, range(4, 8), 16 * 1024 * 1024, [20, 10])
    _gpu(b, "0000:01:00.0", 0, ["0000:00:01.0"], "pci0000:00", L40S)
    _gpu(b, "0000:02:00.0", 0, ["0000:00:02.0"], "pci0000:00", L40S)
    b.pci(OTHER_SOCKET_NIC, 0x0200, MELLANOX, CX7, 1, ["0000:80:01.0"], "pci0000:80", net="eth0")
    return b.root


def no_numa(root: str | Path) -> Path:
    """A kernel without NUMA dirs: only cpu/online, one GPU with numa_node -1."""
    b = SysfsBuilder(root).cpus_online(range(0, 6))
    b.pci("0000:01:00.0", 0x0302, NVIDIA, L40S, None, ["0000:00:01.0"])
    return b.root


SMALL_GPUS = ["0000:01:00.0", "0000:02:00.0"]
SMALL_NIC = "0000:03:00.0"


def _small(root: str | Path) -> SysfsBuilder:
    """Base for the broken trees: one NUMA node, two GPUs and a NIC behind one switch."""
    b = SysfsBuilder(root).numa(0, range(4), 1024 * 1024, [10])
    sw = ["0000:00:01.0", "0000:10:00.0"]
    _gpu(b, SMALL_GPUS[0], 0, [*sw, "0000:11:00.0"], "pci0000:00")
    _gpu(b, SMALL_GPUS[1], 0, [*sw, "0000:11:01.0"], "pci0000:00")
    b.pci(SMALL_NIC, 0x0200, MELLANOX, CX7, 0, [*sw, "0000:11:02.0"], net="eth0")
    return b


def missing_numa_node(root: str | Path) -> Path:
    return _small(root).remove(SMALL_GPUS[0], "numa_node").root


def numa_minus_one(root: str | Path) -> Path:
    return _small(root).write(SMALL_GPUS[0], "numa_node", "-1").root


def unreadable_numa_node(root: str | Path) -> Path:
    """numa_node mode 000; as root the file stays readable, so callers check os.access before relying on it."""
    return _small(root).chmod(SMALL_GPUS[0], "numa_node", 0).root


def dangling_symlink(root: str | Path) -> Path:
    return _small(root).dangling("0000:09:00.0").root


def garbage_class(root: str | Path) -> Path:
    return _small(root).write(SMALL_GPUS[1], "class", "this is not hex").root


def garbage_numa_files(root: str | Path) -> Path:
    """Garbage in a NUMA node's cpulist and distance, and a meminfo without MemTotal."""
    b = _small(root)
    node = b.sys / "devices" / "system" / "node" / "node0"
    (node / "cpulist").write_text("0-3,x\n")
    (node / "distance").write_text("ten\n")
    (node / "meminfo").write_text("Node 0 MemFree: 12 kB\n")
    return b.root


BROKEN: dict[str, Callable[[str | Path], Path]] = {
    "missing_numa_node": missing_numa_node,
    "numa_minus_one": numa_minus_one,
    "unreadable_numa_node": unreadable_numa_node,
    "dangling_symlink": dangling_symlink,
    "garbage_class": garbage_class,
    "garbage_numa_files": garbage_numa_files,
}


def with_drivers(root: str | Path, machine: Callable[[str | Path], Path], driver: str) -> SysfsBuilder:
    """``machine`` (e.g. ``dgx_like``) with ``driver`` bound to every accelerator, as a builder for later changes
    (unbind, unplug): what the device plugin's sysfs health reads."""
    b = SysfsBuilder(root)
    machine(root)
    for link in sorted((b.sys / "bus" / "pci" / "devices").iterdir()):
        b.created[link.name] = link.resolve()
    for bdf, path in list(b.created.items()):
        pci_class = int((path / "class").read_text(), 16)
        if device_kind(pci_class, int((path / "vendor").read_text(), 16)) == "accelerator":
            b.bind(bdf, driver)
    return b
