"""CDI (Container Device Interface) spec files for prepared claims: what the container runtime injects.

The kubelet passes the ``cdi_device_ids`` Prepare returns to the runtime (CRI ``CDIDevices``); containerd and CRI-O
look each ``<vendor>/<class>=<name>`` up in the spec files of /etc/cdi and /var/run/cdi and apply its
``containerEdits``. As dra-example-driver does, each claim gets its own transient spec file,
``<vendor>-<class>_<claim uid>.json`` (the CDI library's GenerateTransientSpecName), whose device names are
``<claim uid>-<device>``: two claims never share a CDI device, and Unprepare removes exactly one file.

Edits per device: environment variables naming it (``ACCELSCHED_DRA_DEVICE_<NAME>``, plus its PCI bus ID, and a MIG
device's profile and parent) and the /dev nodes its driver registered (read from sysfs; a fake device has none).
Files are written atomically (temporary name, then rename), so a runtime never reads half a spec.
"""

from __future__ import annotations

import contextlib
import json
import os
import re

from accelsched.dra.driver.checkpoint import write_atomic
from accelsched.dra.inventory import KIND_MIG, NodeDevice

# 0.5.0 is the oldest version with everything used here (env, deviceNodes) that the CDI library of containerd 1.7
# and 2.x both read; the library refuses a file whose version it does not know.
CDI_VERSION = "0.5.0"
DEFAULT_CDI_DIR = "/var/run/cdi"
DEFAULT_CLASS = "device"
_ENV_SAFE = re.compile(r"[^A-Z0-9_]")


def vendor_for(driver: str) -> str:
    """The CDI vendor for a driver, ``k8s.<driver>`` as dra-example-driver and the NVIDIA driver use."""
    return f"k8s.{driver}"


def env_name(device: str) -> str:
    return "ACCELSCHED_DRA_DEVICE_" + _ENV_SAFE.sub("_", device.upper())


def container_edits(device: NodeDevice, pool: str) -> dict[str, object]:
    key = env_name(device.name)
    env = [f"{key}={device.name}", f"{key}_POOL={pool}"]
    if device.pci_address:
        env.append(f"{key}_PCI_BUS_ID={device.pci_address}")
    if device.kind == KIND_MIG:
        profile = device.attributes.get("profile", {}).get("string", "")
        env += [f"{key}_MIG_PROFILE={profile}", f"{key}_MIG_PARENT={device.parent}"]
    edits: dict[str, object] = {"env": env}
    if device.device_nodes:
        edits["deviceNodes"] = [{"path": p} for p in device.device_nodes]
    return edits


class CDIWriter:
    """Writes and removes the per-claim spec files of one driver in ``cdi_dir``."""

    def __init__(self, driver: str, cdi_dir: str = DEFAULT_CDI_DIR, cdi_class: str = DEFAULT_CLASS) -> None:
        self.vendor = vendor_for(driver)
        self.cdi_class = cdi_class
        self.cdi_dir = cdi_dir

    @property
    def kind(self) -> str:
        return f"{self.vendor}/{self.cdi_class}"

    def spec_path(self, claim_uid: str) -> str:
        return os.path.join(self.cdi_dir, f"{self.vendor}-{self.cdi_class}_{claim_uid}.json")

    def device_id(self, claim_uid: str, device: str) -> str:
        return f"{self.kind}={claim_uid}-{device}"

    def write(self, claim_uid: str, devices: list[tuple[NodeDevice, str]]) -> dict[str, str]:
        """Write the claim's spec (``devices``: each with its pool); returns device name -> CDI device ID."""
        spec = {
            "cdiVersion": CDI_VERSION,
            "kind": self.kind,
            "devices": [
                {"name": f"{claim_uid}-{device.name}", "containerEdits": container_edits(device, pool)}
                for device, pool in devices
            ],
        }
        os.makedirs(self.cdi_dir, exist_ok=True)
        write_atomic(self.spec_path(claim_uid), json.dumps(spec, indent=2).encode() + b"\n", mode=0o644)
        return {device.name: self.device_id(claim_uid, device.name) for device, _ in devices}

    def remove(self, claim_uid: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.spec_path(claim_uid))

    def claim_uids(self) -> list[str]:
        """The claims that have a spec file here now (to remove those no checkpoint entry backs)."""
        prefix, suffix = f"{self.vendor}-{self.cdi_class}_", ".json"
        try:
            names = os.listdir(self.cdi_dir)
        except FileNotFoundError:
            return []
        return sorted(n[len(prefix) : -len(suffix)] for n in names if n.startswith(prefix) and n.endswith(suffix))
