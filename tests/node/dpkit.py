"""The device plugin as its DaemonSet runs it, on the test node, and the device nodes its Allocate hands out.

The command and the config come from deploy/device-plugin-daemonset.yaml, not from here: the DaemonSet container's
``command`` with the ConfigMap's ``config.yaml`` at the path it mounts. Only what the test node needs differs, and
each difference is a flag or a key named here: ``--source fake`` (there are no accelerators on a CI machine),
``--metrics-address 127.0.0.1 --metrics-port 0`` (no fixed port on a shared machine), and the test's ``fake``
section (NUMA placement, a health schedule). The plugin runs as a host process rather than in a pod: the image
holds Python and accelsched (hack/build-image.sh builds it in minutes), which the kubelet would only run the same
command from.

The ConfigMap's ``deviceNodes: ["/dev/accel/accel{accel}"]`` asks for ``/dev/accel/accelN``; the fake source numbers
N by position. :func:`accel_device_nodes` makes those nodes on the host (char major 261, the kernel's accel major;
nothing drives them, so nothing can be done with them but see them) so the runtime can put them in a container.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import nodekit as nk
import yaml

DAEMONSET = nk.REPO / "deploy" / "device-plugin-daemonset.yaml"
ACCEL_DIR = Path("/dev/accel")
ACCEL_MAJOR = 261


def daemonset_parts() -> tuple[list[str], dict[str, Any], str, list[dict[str, Any]]]:
    """(the container's command, the ConfigMap's config, the path the command reads it from, the container's env)."""
    docs = [d for d in yaml.safe_load_all(DAEMONSET.read_text()) if d]
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    container = ds["spec"]["template"]["spec"]["containers"][0]
    command = list(container["command"])
    config = yaml.safe_load(cm["data"]["config.yaml"])
    path = command[command.index("--config") + 1]
    return command, config, path, list(container.get("env") or [])


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


class DevicePlugin:
    """``accelsched device-plugin`` started from the DaemonSet's command; ``log`` is its output."""

    def __init__(
        self, workdir: Path, node_name: str, kubeconfig: Path, config: Mapping[str, Any] | None = None
    ) -> None:
        self.workdir = workdir
        self.node_name = node_name
        self.kubeconfig = kubeconfig
        self.command, base, self.mounted_path, self.env_spec = daemonset_parts()
        self.config = _merge(base, config or {})
        self.log = workdir / "device-plugin.log"
        self._proc: Any = None

    @property
    def resource(self) -> str:
        return str(self.config["resourceName"])

    @property
    def env_var(self) -> str:
        return str(self.config["allocate"]["envVar"])

    def argv(self) -> list[str]:
        config_file = self.workdir / Path(self.mounted_path).name
        env = self.env()
        # $(VAR) in a container's command is the kubelet's expansion of the container's env.
        args = [
            str(config_file) if a == self.mounted_path else re.sub(r"\$\((\w+)\)", lambda m: env[m[1]], a)
            for a in self.command
        ]
        # The image's `accelsched` is this environment's console script.
        args[0] = str(Path(sys.executable).parent / args[0])
        return [*args, "--source", "fake", "--metrics-address", "127.0.0.1", "--metrics-port", "0"]

    def env(self) -> dict[str, str]:
        """The DaemonSet's env as the kubelet would fill it in (only the downward API's spec.nodeName is used), and
        KUBECONFIG where a pod would have its in-cluster service-account credentials."""
        env = {"KUBECONFIG": str(self.kubeconfig)}
        for item in self.env_spec:
            field = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            if field != "spec.nodeName":
                raise AssertionError(f"{DAEMONSET}: env {item['name']} is not filled in here; add it to dpkit.env()")
            env[item["name"]] = self.node_name
        return env

    def start(self) -> DevicePlugin:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / Path(self.mounted_path).name).write_text(yaml.safe_dump(self.config, sort_keys=False))
        self._proc = nk.spawn(self.argv(), self.log, self.env())
        nk.wait_for("the device plugin to register with the kubelet", self.registered, timeout=60)
        return self

    def registered(self) -> bool:
        if self._proc.poll() is not None:
            raise nk.NodeError(f"the device plugin exited ({self._proc.returncode}):\n{nk.tail(self.log)}")
        return "registered" in self.log.read_text(errors="replace").lower()

    def allocations(self) -> list[list[str]]:
        """The device IDs of each Allocate call, in order, from the plugin's own log line."""
        text = self.log.read_text(errors="replace")
        return [m.split(",") for m in re.findall(r"Allocate\(([^)]*)\)", text)]

    def stop(self) -> None:
        nk.stop_process(self._proc)
        self._proc = None


@contextlib.contextmanager
def accel_device_nodes(count: int) -> Iterator[list[Path]]:
    """Make ``/dev/accel/accel0..count-1`` (char 261:N) where missing; remove exactly what was made."""
    made: list[Path] = []
    made_dir = not ACCEL_DIR.exists()
    ACCEL_DIR.mkdir(exist_ok=True)
    try:
        for i in range(count):
            path = ACCEL_DIR / f"accel{i}"
            if not path.exists():
                os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(ACCEL_MAJOR, i))
                made.append(path)
        yield [ACCEL_DIR / f"accel{i}" for i in range(count)]
    finally:
        for path in made:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        if made_dir:
            with contextlib.suppress(OSError):
                ACCEL_DIR.rmdir()


def wait_capacity(node: Any, resource: str, capacity: int, allocatable: int | None = None, timeout: float = 60) -> Any:
    """Wait until the kubelet's Node status shows ``capacity`` (and ``allocatable``) of ``resource``."""
    want_alloc = capacity if allocatable is None else allocatable

    def check() -> Any:
        n = node.read_node()
        cap = int((n.status.capacity or {}).get(resource, "-1"))
        alloc = int((n.status.allocatable or {}).get(resource, "-1"))
        return n if (cap, alloc) == (capacity, want_alloc) else None

    return nk.wait_for(f"{resource} capacity {capacity}/allocatable {want_alloc}", check, timeout=timeout)


def since(t0: float) -> str:
    return f"{time.monotonic() - t0:.1f}s"
