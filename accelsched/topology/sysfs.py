"""Discover a node's NUMA and PCIe topology from sysfs, the same files hwloc and nvidia-smi read.

``root`` lets tests point discovery at a fixture tree (``tests/sysfs_builder.py``) or a copied /sys. Real machines
have odd sysfs (VMs without NUMA, firmware that reports no node, files only root may read), so what a real kernel can
show becomes a line in ``NodeTopology.warnings`` naming the path, and discovery carries on. What no kernel can show
(a FIFO or a device node where an attribute belongs, a file longer than a page, a CPU id past NR_CPUS, a number too
long for 64 bits) means the tree is not a sysfs: that raises InputError naming the file, before it can hang the read
or fill memory.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from accelsched.errors import InputError
from accelsched.topology.model import (
    CpuLimitError,
    NodeTopology,
    NumaNode,
    PciDevice,
    device_kind,
    parse_cpulist,
)

# A PCI function (domain:bus:device.function); VMD and Hyper-V use domains wider than four digits.
BDF_RE = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", re.IGNORECASE)
# A root complex (host bridge) directory under /sys/devices, e.g. pci0000:00.
ROOT_RE = re.compile(r"^pci[0-9a-f]{4,}:[0-9a-f]{2}$", re.IGNORECASE)
MEMTOTAL_RE = re.compile(r"MemTotal:\s+(\d+)\s*kB")
# A sysfs attribute is at most one page (PAGE_SIZE; 64 KiB is the largest page Linux uses, on arm64 and ppc64).
MAX_ATTRIBUTE_BYTES = 64 * 1024
MAX_MEMTOTAL_DIGITS = 17  # kB: 10^17 kB is past 2^63 bytes, so a longer number cannot be real memory
NODE_DIR_RE = re.compile(r"^node(\d+)$")


class _Reader:
    """Reads small sysfs files under one root and records every failure as a warning instead of raising."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.warnings: list[str] = []

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def warn(self, path: Path | str, problem: str) -> None:
        self.warnings.append(f"{path}: {problem}")

    def text(self, path: Path) -> str | None:
        """The file's stripped content, or None with a warning if it cannot be read.

        Only a regular file (after symlinks) of at most MAX_ATTRIBUTE_BYTES is read: a FIFO would block the open or
        the read forever and /dev/zero never ends, so those raise InputError naming the file instead.
        """
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: opening a FIFO must not wait for a writer
            try:
                mode = os.fstat(fd).st_mode
                if not stat.S_ISREG(mode):
                    raise InputError(
                        f"not a regular file ({_file_type(mode)}); sysfs attributes are regular files",
                        source=str(path),
                    )
                data = os.read(fd, MAX_ATTRIBUTE_BYTES + 1)
            finally:
                os.close(fd)
            if len(data) > MAX_ATTRIBUTE_BYTES:
                raise InputError(
                    f"longer than {MAX_ATTRIBUTE_BYTES} bytes; a sysfs attribute is at most one page",
                    source=str(path),
                )
            return data.decode("ascii").strip()
        except FileNotFoundError:
            self.warn(path, "missing")
        except PermissionError:
            self.warn(path, "permission denied")
        except (OSError, UnicodeDecodeError) as e:
            self.warn(path, f"unreadable ({e})")
        return None

    def hex_value(self, path: Path, bits: int) -> int | None:
        """A ``0x...`` sysfs value of at most ``bits`` bits, or None with a warning."""
        text = self.text(path)
        if text is None:
            return None
        try:
            value = int(text, 16)
        except ValueError:
            value = -1
        if not 0 <= value < (1 << bits):
            self.warn(path, f"garbage {text[:40]!r}, expected a {bits}-bit hex number")
            return None
        return value

    def listdir(self, path: Path) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []
        except OSError as e:
            self.warn(path, f"cannot list ({e.strerror or e})")
            return []


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def discover(root: str | Path = "/", all_devices: bool = False) -> NodeTopology:
    """Read NUMA nodes and PCI devices under ``root``; keep only accelerators and NICs unless ``all_devices``."""
    reader = _Reader(root)
    numa = _numa_nodes(reader)
    devices = _pci_devices(reader, all_devices)
    return NodeTopology(numa=numa, devices=devices, warnings=reader.warnings)


def _cpulist(reader: _Reader, path: Path) -> tuple[int, ...]:
    text = reader.text(path)
    if text is None:
        return ()
    try:
        return parse_cpulist(text)
    except CpuLimitError as e:
        raise InputError(str(e), source=str(path)) from None
    except ValueError:
        reader.warn(path, f"garbage {text[:40]!r}, expected a CPU list like 0-3,8-11")
        return ()


def _numa_nodes(reader: _Reader) -> list[NumaNode]:
    node_dir = reader.path("sys", "devices", "system", "node")
    ids = sorted(int(m.group(1)) for name in reader.listdir(node_dir) if (m := NODE_DIR_RE.match(name)))
    if not ids:
        # Kernels without CONFIG_NUMA (and some VMs) have no node dirs: the whole machine is one node.
        online = reader.path("sys", "devices", "system", "cpu", "online")
        reader.warn(node_dir, "no NUMA nodes; assuming one node 0 with every online CPU")
        return [NumaNode(id=0, cpus=_cpulist(reader, online), memory_bytes=None, distances=(10,))]
    nodes = []
    for node_id in ids:
        base = node_dir / f"node{node_id}"
        distances: tuple[int, ...] = ()
        text = reader.text(base / "distance")
        if text is not None:
            try:
                distances = tuple(int(x) for x in text.split())
            except ValueError:
                reader.warn(base / "distance", f"garbage {text[:40]!r}, expected integers")
        memory: int | None = None
        text = reader.text(base / "meminfo")
        if text is not None:
            m = MEMTOTAL_RE.search(text)
            if m and len(m.group(1)) > MAX_MEMTOTAL_DIGITS:
                digits = len(m.group(1))
                raise InputError(f"MemTotal has {digits} digits: too large", source=str(base / "meminfo"))
            if m:
                memory = int(m.group(1)) * 1024
            else:
                reader.warn(base / "meminfo", "no MemTotal line")
        nodes.append(
            NumaNode(id=node_id, cpus=_cpulist(reader, base / "cpulist"), memory_bytes=memory, distances=distances)
        )
    return nodes


def _resolve(reader: _Reader, link: Path) -> str:
    """The device's real path under ``root``; an absolute link target is taken as relative to root."""
    try:
        target = os.readlink(link)
    except OSError:
        return os.path.realpath(link)  # a plain directory (a copied tree) is its own path
    if os.path.isabs(target):
        target = str(reader.root / target.lstrip("/"))
    else:
        target = os.path.join(os.path.dirname(link), target)
    return os.path.realpath(target)


def _placement(reader: _Reader, link: Path, real: str) -> tuple[str, tuple[str, ...]]:
    """Root complex and bridge chain from the resolved path ``.../devices/pci0000:00/<bridge>/.../<device>``."""
    parts = Path(real).parts
    start = next((i for i, p in enumerate(parts) if ROOT_RE.match(p)), None)
    if start is None:
        reader.warn(link, f"resolves to {real}, which is under no pciDDDD:BB root complex")
        return "", ()
    chain = [p for p in parts[start + 1 :] if BDF_RE.match(p)]
    return parts[start], tuple(chain[:-1])


def _numa_of(reader: _Reader, path: Path, kind: str) -> int | None:
    text = reader.text(path)
    if text is None:
        return None
    try:
        node = int(text)
    except ValueError:
        reader.warn(path, f"garbage {text[:40]!r}, expected a NUMA node number")
        return None
    if node < 0:
        if kind != "other":
            reader.warn(path, f"{node}: the kernel reports no NUMA affinity for this {kind}")
        return None
    return node


def _friendly_name(reader: _Reader, dev: Path) -> str:
    """InfiniBand name (what nvidia-smi's NIC legend shows), else the netdev, also one level down (virtio)."""
    for sub in ("infiniband", "net"):
        names = reader.listdir(dev / sub)
        if names:
            return names[0]
    for child in reader.listdir(dev):
        if child.startswith("virtio"):
            names = reader.listdir(dev / child / "net")
            if names:
                return names[0]
    return ""


def _pci_devices(reader: _Reader, all_devices: bool) -> list[PciDevice]:
    bus = reader.path("sys", "bus", "pci", "devices")
    devices = []
    for address in reader.listdir(bus):
        link = bus / address
        real = _resolve(reader, link)
        if not os.path.isdir(real):
            target = os.readlink(link) if os.path.islink(link) else "?"
            reader.warn(link, f"dangling symlink to {target}; skipped")
            continue
        dev = Path(real)
        pci_class = reader.hex_value(dev / "class", 24)
        vendor = reader.hex_value(dev / "vendor", 16)
        if pci_class is None or vendor is None:
            reader.warn(link, "skipped: cannot classify without class and vendor")
            continue
        kind = device_kind(pci_class, vendor)
        if kind == "other" and not all_devices:
            continue
        device_id = reader.hex_value(dev / "device", 16)
        root, bridges = _placement(reader, link, real)
        devices.append(
            PciDevice(
                address=address,
                vendor=vendor,
                device=device_id if device_id is not None else 0,
                pci_class=pci_class,
                numa_node=_numa_of(reader, dev / "numa_node", kind),
                bridges=bridges,
                root=root,
                kind=kind,
                name=_friendly_name(reader, dev),
            )
        )
    return devices
