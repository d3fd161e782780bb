"""The device plugin's configuration: one YAML file (the DaemonSet's ConfigMap), validated once at the edge.

```yaml
resourceName: qualcomm.com/ai-accelerator
source: sysfs                  # sysfs: real accelerators under /sys; fake: a made-up inventory (kind clusters, tests)
socketDir: /var/lib/kubelet/device-plugins
healthIntervalSeconds: 5       # how often device health is read
sysfs: {root: /, vendors: ["0x17cb"], requireDriver: true}
fake:
  devices: 4                   # IDs <idPrefix>-0 .. (idPrefix defaults to the resource name's basename)
  numaNodes: 2                 # devices split evenly, in order; or numa: [0, 0, 1, 1]
  devicesPerSwitch: 2          # consecutive devices behind one PCIe switch (pair score PIX)
  health: [{afterSeconds: 30, device: qaic-1, health: Unhealthy}, {afterSeconds: 60, device: qaic-1, health: Healthy}]
allocate:
  envVar: QAIC_VISIBLE_DEVICES
  deviceNodes: [/dev/accel/accel{accel}]   # per allocated device: {accel}/{render}/{card} (node numbers from
                                           # sysfs), {index} (position in the plugin's list), {id}
  sharedDeviceNodes: []                    # absolute, given as written with every allocation (e.g. /dev/nvidiactl)
  permissions: rw
  mounts: [{hostPath: /opt/qti-aic, containerPath: /opt/qti-aic, readOnly: true}]
  cdiKind: qualcomm.com/accel              # CDI device names <cdiKind>=<id>; empty: none
partitioning: {mode: timeslicing, replicas: 4}   # or mode: mig (fixed instances, fake source only); the ledger's syntax
metrics: {address: 0.0.0.0, port: 8080}   # /healthz, /readyz, /metrics; port 0: a free one; enabled: false: none
```

Unknown fields and wrong types are errors naming the file and the field, never silent defaults.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelsched import listen
from accelsched.api import reader
from accelsched.errors import InputError

KUBELET_DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
SOURCES = ("sysfs", "fake")
HEALTH_VALUES = ("Healthy", "Unhealthy")
OBJECT = "DevicePluginConfig"
# Limits on what the config multiplies, so a typo cannot make the plugin build millions of devices. 1,024 fake
# devices (times at most 64 time-slicing replicas) keeps ListAndWatch's answer under gRPC's 4 MiB message limit;
# 1,024 NUMA nodes is the kernel's MAX_NUMNODES (NODES_SHIFT 10); a day is the longest interval worth polling at.
MAX_FAKE_DEVICES = 1024
MAX_NUMA_NODES = 1024
MAX_INTERVAL_SECONDS = 86400.0
# The kubelet's Register accepts an extended resource name (pkg/apis/core/v1/helper IsExtendedResourceName): it has a
# "/", is outside *kubernetes.io/, does not start with "requests.", and "requests." + name is a qualified name.
REQUESTS_PREFIX = "requests."
DNS1123_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_RE = re.compile(rf"{DNS1123_LABEL}(?:\.{DNS1123_LABEL})*")
QUALIFIED_NAME_RE = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")
DNS1123_SUBDOMAIN_MAX, QUALIFIED_NAME_MAX = 253, 63
# Regexes below are used with fullmatch: "$" would also match before a trailing newline.
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PERMISSIONS_RE = re.compile(r"(?!.*(.).*\1)[rwm]{1,3}")
# The CDI parser's rules (container-device-interface pkg/parser): vendor and class start with a letter, the device
# name with a letter or digit; both end with a letter or digit; inside, letters, digits and _ - . (names also :).
_CDI_VENDOR_OR_CLASS = r"[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?"
CDI_KIND_RE = re.compile(rf"{_CDI_VENDOR_OR_CLASS}/{_CDI_VENDOR_OR_CLASS}")
CDI_DEVICE_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?")
# Device-node placeholders read from sysfs: {accel} is N of <device>/accel/accelN (/dev/accel/accelN), {render} of
# <device>/drm/renderDN (/dev/dri/renderDN), {card} of <device>/drm/cardN. Value: the sysfs name's prefix.
NODE_PLACEHOLDERS = {"accel": "accel", "render": "renderD", "card": "card"}
PLACEHOLDERS = ("index", "id", *NODE_PLACEHOLDERS)


@dataclass(frozen=True)
class HealthEvent:
    """One step of the fake source's schedule: ``after_seconds`` from start, ``device`` becomes ``healthy``."""

    after_seconds: float
    device: str
    healthy: bool


@dataclass(frozen=True)
class MountConfig:
    host_path: str
    container_path: str
    read_only: bool = False


@dataclass
class SysfsConfig:
    root: str = "/"
    vendors: tuple[int, ...] = ()  # empty: every accelerator discovery finds
    require_driver: bool = True


@dataclass
class FakeConfig:
    devices: int = 4
    id_prefix: str = ""
    numa: tuple[int, ...] = ()  # per device; empty: split evenly over numa_nodes
    numa_nodes: int = 1
    devices_per_switch: int = 0
    health: tuple[HealthEvent, ...] = ()


@dataclass
class AllocateConfig:
    env_var: str = "ACCELSCHED_VISIBLE_DEVICES"
    device_nodes: tuple[str, ...] = ()
    shared_device_nodes: tuple[str, ...] = ()
    permissions: str = "rw"
    mounts: tuple[MountConfig, ...] = ()
    cdi_kind: str = ""


@dataclass
class PluginConfig:
    resource_name: str = "accelsched.io/accelerator"
    source: str = "sysfs"
    socket_dir: str = KUBELET_DEVICE_PLUGIN_DIR
    health_interval: float = 5.0
    watch_interval: float = 1.0  # how often kubelet.sock and our sockets are checked (kubelet restarts)
    sysfs: SysfsConfig = field(default_factory=SysfsConfig)
    fake: FakeConfig = field(default_factory=FakeConfig)
    allocate: AllocateConfig = field(default_factory=AllocateConfig)
    partitioning: dict[str, Any] | None = None  # validated against the devices by partitions.py
    metrics_address: str = "0.0.0.0"
    metrics_port: int | None = 8080  # None: no HTTP endpoint
    source_file: str = ""

    @property
    def basename(self) -> str:
        return self.resource_name.rsplit("/", 1)[-1]


class _Reader:
    """Typed field access on one mapping, raising InputError with ``file: DevicePluginConfig: path``."""

    def __init__(self, source: str, doc: Any, path: str, fields: set[str]) -> None:
        self.source, self.path = source, path
        if doc is None:
            doc = {}
        if not isinstance(doc, Mapping):
            raise self.error("", f"must be a mapping, got {type(doc).__name__}")
        unknown = set(doc) - fields
        if unknown:
            names = ", ".join(sorted(map(str, unknown)))
            raise self.error("", f"unknown field(s) {names} (known: {', '.join(sorted(fields))})")
        self.doc = doc

    def error(self, name: str, message: str) -> InputError:
        where = ".".join(p for p in (self.path, name) if p) or "(top level)"
        return InputError(message, source=self.source, obj=OBJECT, field=where)

    def get(self, name: str, kind: type | tuple[type, ...], default: Any) -> Any:
        value = self.doc.get(name, default)
        if value is default:
            return default
        bad_bool = isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
        if not isinstance(value, kind) or bad_bool:
            want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.error(name, f"must be {want}, got {value!r}")
        return value

    def number(self, name: str, default: float, minimum: float, maximum: float = math.inf) -> float:
        """A finite int or float in [minimum, maximum]: YAML's .inf and .nan are floats, and would otherwise reach
        int() (OverflowError, ValueError) or a sleep that never ends."""
        value = self.get(name, (int, float), default)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(name, f"must be a finite number, got {value}")
        if not minimum <= value <= maximum:
            bound = f"{minimum}..{maximum}" if math.isfinite(maximum) else f">= {minimum}"
            raise self.error(name, f"must be {bound}, got {value}")
        return float(value)

    def integer(self, name: str, default: int, minimum: int, maximum: int) -> int:
        """An int (not a float, not a bool) in [minimum, maximum]."""
        value = self.get(name, int, default)
        if not minimum <= value <= maximum:
            raise self.error(name, f"must be {minimum}..{maximum}, got {value}")
        return value

    def string(self, name: str, default: str | None) -> Any:
        """A path string without NUL (the OS refuses it with a ValueError) or other control characters."""
        value = self.get(name, str, default)
        if value is not None and _has_control(value):
            raise self.error(name, f"{value!r} contains a control character")
        return value

    def strings(self, name: str) -> tuple[str, ...]:
        items = self.get(name, list, [])
        if not all(isinstance(s, str) and s and not _has_control(s) for s in items):
            raise self.error(name, f"must be a list of non-empty strings without control characters, got {items!r}")
        return tuple(items)

    def sub(self, name: str, fields: set[str]) -> _Reader:
        return _Reader(self.source, self.doc.get(name), ".".join(p for p in (self.path, name) if p), fields)


def _has_control(text: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)


def extended_resource_name_error(name: str) -> str:
    """Why the kubelet's Register would refuse ``name`` as a device plugin's resource, or "" when it accepts it."""
    prefix, slash, basename = name.partition("/")
    if not slash:
        return "has no domain prefix (like vendor.com/gpu)"
    if "kubernetes.io/" in name:
        return "is in the kubernetes.io/ namespace, which is for native resources"
    if name.startswith(REQUESTS_PREFIX):
        return f"starts with {REQUESTS_PREFIX!r}, which is for quota"
    quota_prefix = REQUESTS_PREFIX + prefix
    if len(quota_prefix) > DNS1123_SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN_RE.fullmatch(quota_prefix):
        return (
            f"prefix {prefix!r} must be a DNS-1123 subdomain (lower case letters, digits, '-' and '.', starting and"
            f" ending with a letter or digit) of at most {DNS1123_SUBDOMAIN_MAX - len(REQUESTS_PREFIX)} characters"
        )
    if len(basename) > QUALIFIED_NAME_MAX or not QUALIFIED_NAME_RE.fullmatch(basename):
        return (
            f"name part {basename!r} must be at most {QUALIFIED_NAME_MAX} characters of letters, digits, '-', '_'"
            " and '.', starting and ending with a letter or digit"
        )
    return ""


def load(path: str | None, overrides: Mapping[str, Any] | None = None) -> PluginConfig:
    """Read ``path`` (None: defaults only), then apply ``overrides`` (CLI flags: ``field`` or ``section.field``)."""
    doc: dict[str, Any] = {}
    source = path or "(flags)"
    if path is not None:
        # As the manifests are read: bounded, UTF-8 or UTF-16 with a BOM, duplicate keys and alias bombs refused.
        data = reader.read_input(path, path)
        docs = reader.parse(reader.decode(data, path), path)
        if len(docs) > 1:
            raise InputError(f"holds {len(docs)} documents; the config is one", source=path, obj=OBJECT)
        loaded = docs[0] if docs else None
        if loaded is not None and not isinstance(loaded, Mapping):
            raise InputError(f"must be a mapping, got {type(loaded).__name__}", source=path, obj=OBJECT)
        doc = dict(loaded or {})
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        section, _, name = key.partition(".")  # "sysfs.root" sets root in the sysfs section
        if name:
            inner = doc.get(section)
            doc[section] = {**(inner if isinstance(inner, Mapping) else {}), name: value}
        else:
            doc[key] = value
    return parse(doc, source)


def parse(doc: Mapping[str, Any], source: str = "") -> PluginConfig:
    top = _Reader(
        source,
        doc,
        "",
        {
            "resourceName", "source", "socketDir", "healthIntervalSeconds", "watchIntervalSeconds",
            "sysfs", "fake", "allocate", "partitioning", "metrics",
        },
    )  # fmt: skip
    cfg = PluginConfig(source_file=source)
    cfg.resource_name = top.get("resourceName", str, cfg.resource_name)
    problem = extended_resource_name_error(cfg.resource_name)
    if problem:
        raise top.error("resourceName", f"{cfg.resource_name!r} is not an extended resource name: {problem}")
    cfg.source = top.get("source", str, cfg.source)
    if cfg.source not in SOURCES:
        raise top.error("source", f"unknown source {cfg.source!r} ({', '.join(SOURCES)})")
    cfg.socket_dir = listen.socket_folder(top.string("socketDir", cfg.socket_dir))
    cfg.health_interval = top.number("healthIntervalSeconds", cfg.health_interval, 0.01, MAX_INTERVAL_SECONDS)
    cfg.watch_interval = top.number("watchIntervalSeconds", cfg.watch_interval, 0.01, MAX_INTERVAL_SECONDS)
    cfg.sysfs = _sysfs(top.sub("sysfs", {"root", "vendors", "requireDriver"}))
    cfg.fake = _fake(top.sub("fake", {"devices", "idPrefix", "numa", "numaNodes", "devicesPerSwitch", "health"}))
    cfg.fake.id_prefix = cfg.fake.id_prefix or cfg.basename
    cfg.allocate = _allocate(
        top.sub("allocate", {"envVar", "deviceNodes", "sharedDeviceNodes", "permissions", "mounts", "cdiKind"})
    )
    partitioning = top.get("partitioning", dict, None)
    cfg.partitioning = dict(partitioning) if partitioning else None
    if cfg.partitioning and cfg.partitioning.get("mode") == "mig" and cfg.source == "sysfs":
        # What Allocate could hand a container for an instance is the parent GPU's /dev node and accelsched's own
        # instance ID in the env var: no isolation. Real MIG needs NVML and the nvidia-caps nodes, which this
        # plugin does not drive, so it advertises MIG instances only from the fake source (scheduling tests).
        raise top.error(
            "partitioning.mode",
            "mig is advertise-only (source: fake): with source: sysfs a container would get the whole parent GPU;"
            " use NVIDIA's device plugin for real MIG instances",
        )
    metrics = top.sub("metrics", {"address", "port", "enabled"})
    cfg.metrics_address = metrics.string("address", cfg.metrics_address)
    problem = listen.host_problem(cfg.metrics_address)
    if problem:
        raise metrics.error("address", problem)
    port = metrics.integer("port", 8080, 0, 65535)
    cfg.metrics_port = port if metrics.get("enabled", bool, True) else None
    return cfg


def _sysfs(r: _Reader) -> SysfsConfig:
    out = SysfsConfig(root=r.string("root", "/"), require_driver=r.get("requireDriver", bool, True))
    vendors = []
    for v in r.get("vendors", list, []):
        if isinstance(v, int) and not isinstance(v, bool):
            vendor = v
        elif isinstance(v, str) and re.fullmatch(r"(0[xX])?[0-9a-fA-F]{1,4}", v):
            vendor = int(v, 16)
        else:
            raise r.error("vendors", f"{v!r} is not a PCI vendor ID like 0x17cb")
        if not 0 <= vendor <= 0xFFFF:
            raise r.error("vendors", f"{v!r} is not a 16-bit PCI vendor ID")
        vendors.append(vendor)
    out.vendors = tuple(vendors)
    return out


def _fake(r: _Reader) -> FakeConfig:
    out = FakeConfig(
        devices=r.integer("devices", 4, 0, MAX_FAKE_DEVICES),
        id_prefix=r.string("idPrefix", ""),
        numa_nodes=r.integer("numaNodes", 1, 1, MAX_NUMA_NODES),
        devices_per_switch=r.integer("devicesPerSwitch", 0, 0, MAX_FAKE_DEVICES),
    )
    numa = r.get("numa", list, [])
    valid = all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < MAX_NUMA_NODES for n in numa)
    if numa and (len(numa) != out.devices or not valid):
        raise r.error(
            "numa", f"must list one NUMA node (0..{MAX_NUMA_NODES - 1}) per device ({out.devices}), got {numa!r}"
        )
    out.numa = tuple(numa)
    events = []
    for i, item in enumerate(r.get("health", list, [])):
        step = _Reader(r.source, item, f"{r.path}.health[{i}]", {"afterSeconds", "device", "health"})
        health = step.get("health", str, None)
        if health not in HEALTH_VALUES:
            raise step.error("health", f"must be one of {', '.join(HEALTH_VALUES)}, got {health!r}")
        device = step.string("device", None)
        if device is None:
            raise step.error("device", "is required")
        events.append(HealthEvent(step.number("afterSeconds", 0.0, 0.0), device, health == "Healthy"))
    out.health = tuple(sorted(events, key=lambda e: e.after_seconds))
    return out


def template_fields(template: str) -> list[tuple[str, str | None]]:
    """``allocate.deviceNodes`` split into (literal, placeholder or None) parts; ValueError saying what is wrong.

    Only a bare ``{name}`` of PLACEHOLDERS is a field (``{{`` and ``}}`` are braces): a format spec or conversion
    (``{accel:>3000000000}``, ``{id!r}``) or an attribute (``{id.__class__}``) is refused, as str.format would
    pad to gigabytes or reach into objects with them."""
    names = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:  # a single "{" or "}"
        raise ValueError(f"{exc}; only {names} can be filled in ({{{{ and }}}} for braces)") from None
    out: list[tuple[str, str | None]] = []
    for literal, name, spec, conversion in parts:
        if name is not None and (spec or conversion or name not in PLACEHOLDERS):
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise ValueError(f"{shown[:60]} is not a placeholder; only {names} can be filled in, as written")
        out.append((literal, name))
    return out


def render_template(template: str, fields: Mapping[str, object]) -> str:
    """``template`` with its placeholders filled in from ``fields`` (KeyError: a placeholder without a value)."""
    return "".join(literal + ("" if name is None else str(fields[name])) for literal, name in template_fields(template))


def _allocate(r: _Reader) -> AllocateConfig:
    out = AllocateConfig(
        env_var=r.get("envVar", str, AllocateConfig.env_var),
        device_nodes=r.strings("deviceNodes"),
        shared_device_nodes=r.strings("sharedDeviceNodes"),
        permissions=r.get("permissions", str, "rw"),
        cdi_kind=r.get("cdiKind", str, ""),
    )
    if not ENV_NAME_RE.fullmatch(out.env_var):
        raise r.error("envVar", f"{out.env_var!r} is not an environment variable name")
    if not PERMISSIONS_RE.fullmatch(out.permissions):
        raise r.error("permissions", f"must be letters of rwm, each at most once, got {out.permissions!r}")
    if out.cdi_kind and not CDI_KIND_RE.fullmatch(out.cdi_kind):
        raise r.error(
            "cdiKind",
            f"{out.cdi_kind!r} is not a CDI kind like vendor.com/class (each part starts with a letter, ends with a"
            " letter or digit, and holds only letters, digits, _ - .)",
        )
    for i, path in enumerate(out.device_nodes):
        if not path.startswith("/"):
            raise r.error("deviceNodes", f"{path!r} must be an absolute path")
        try:
            template_fields(path)
        except ValueError as exc:
            raise r.error(f"deviceNodes[{i}]", f"{path[:200]!r}: {exc}") from None
    for path in out.shared_device_nodes:
        if not path.startswith("/"):
            raise r.error("sharedDeviceNodes", f"{path!r} must be an absolute path")
        if "{" in path or "}" in path:
            raise r.error("sharedDeviceNodes", f"{path!r}: shared nodes are given as written, nothing is filled in")
    mounts = []
    for i, item in enumerate(r.get("mounts", list, [])):
        m = _Reader(r.source, item, f"{r.path}.mounts[{i}]", {"hostPath", "containerPath", "readOnly"})
        host, container = m.string("hostPath", ""), m.string("containerPath", "")
        if not host.startswith("/") or not container.startswith("/"):
            raise m.error("hostPath" if not host.startswith("/") else "containerPath", "must be an absolute path")
        mounts.append(MountConfig(host, container, m.get("readOnly", bool, False)))
    out.mounts = tuple(mounts)
    return out
