"""A pod's spec.volumes, as far as the volume plugins read them: claims (persistentVolumeClaim, ephemeral) and the
in-tree disks VolumeRestrictions and NodeVolumeLimits still look at in kube-scheduler 1.36.

Kept apart from api/objects.py (which parses the rest of the pod) so that api/storage.py, which builds on
objects.py, and objects.py can both use it without an import circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelsched.errors import Where, quoted

# In-tree sources kube-scheduler 1.36 still checks: VolumeRestrictions' disk conflicts (gce/aws/iscsi/rbd), and
# the ones csi-translation-lib migrates inline to a CSI driver (NodeVolumeLimits counts them against that driver).
DISK_CONFLICT_KINDS = ("gcePersistentDisk", "awsElasticBlockStore", "iscsi", "rbd")
# In-tree plugin -> (its CSI driver, the field naming the disk): csi-translation-lib's inline translation, for the
# five plugins whose CSI migration is always on (nodevolumelimits.isCSIMigrationOn).
MIGRATED_INLINE = {
    "awsElasticBlockStore": ("ebs.csi.aws.com", "volumeID"),
    "gcePersistentDisk": ("pd.csi.storage.gke.io", "pdName"),
    "azureDisk": ("disk.csi.azure.com", "diskURI"),
    "cinder": ("cinder.csi.openstack.org", "volumeID"),
    "portworxVolume": ("pxd.portworx.com", "volumeID"),
}
# IsInlineMigratable is true for these too (NodeVolumeLimits' PreFilter then runs), but nothing is counted.
INLINE_MIGRATABLE = (*MIGRATED_INLINE, "azureFile", "vsphereVolume")
_REQUIRED = {
    "gcePersistentDisk": "pdName",
    "awsElasticBlockStore": "volumeID",
    "iscsi": "iqn",
    "rbd": "image",
    "azureDisk": "diskURI",
    "cinder": "volumeID",
    "portworxVolume": "volumeID",
}


@dataclass(frozen=True)
class PodVolume:
    """One entry of spec.volumes. ``kind`` is the source's field name (``persistentVolumeClaim``, ``ephemeral``,
    ``gcePersistentDisk``, ...); ``disk`` identifies an in-tree disk (pdName, volumeID, iqn, or pool/image)."""

    name: str
    kind: str
    claim_name: str = ""  # persistentVolumeClaim.claimName
    read_only: bool = False
    disk: str = ""
    monitors: tuple[str, ...] = ()  # rbd.monitors

    def claim_for(self, pod_name: str) -> str:
        """The claim this volume uses: its claimName, or ``<pod>-<volume>`` for an ephemeral volume
        (ephemeral.VolumeClaimName); empty for any other source."""
        if self.kind == "persistentVolumeClaim":
            return self.claim_name
        if self.kind == "ephemeral":
            return f"{pod_name}-{self.name}"
        return ""


def _get(where: Where, value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise where.error(path, f"must be a mapping, got {type(value).__name__}")
    return value


def _text(where: Where, value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise where.error(path, f"must be a string, got {type(value).__name__}")
    return value


def _flag(where: Where, value: Any, path: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise where.error(path, f"must be true or false, got {quoted(value)}")
    return value


def parse_volumes(where: Where, value: Any, path: str = "spec.volumes") -> tuple[PodVolume, ...]:
    """spec.volumes, checked as the API server does for what the plugins read: a unique name per volume, one
    source each, a claimName for a claim, the disk's name for an in-tree disk."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise where.error(path, f"must be a list, got {type(value).__name__}")
    out: list[PodVolume] = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        p = f"{path}[{i}]"
        item = _get(where, item, p)
        name = _text(where, item.get("name"), f"{p}.name")
        if not name:
            raise where.error(f"{p}.name", "is required")
        if name in seen:
            raise where.error(f"{p}.name", f"duplicate volume name {quoted(name)}")
        seen.add(name)
        sources = [k for k in item if k != "name" and item[k] is not None]
        if len(sources) > 1:
            raise where.error(p, f"may specify only one volume source, got {', '.join(sorted(sources))}")
        kind = sources[0] if sources else "emptyDir"
        src = _get(where, item.get(kind), f"{p}.{kind}")
        sp = f"{p}.{kind}"
        read_only = _flag(where, src.get("readOnly"), f"{sp}.readOnly")
        if kind == "persistentVolumeClaim":
            claim = _text(where, src.get("claimName"), f"{sp}.claimName")
            if not claim:
                raise where.error(f"{sp}.claimName", "is required")
            out.append(PodVolume(name, kind, claim_name=claim, read_only=read_only))
        elif kind in _REQUIRED:
            field = _REQUIRED[kind]
            disk = _text(where, src.get(field), f"{sp}.{field}")
            if not disk:
                raise where.error(f"{sp}.{field}", "is required")
            monitors: tuple[str, ...] = ()
            if kind == "rbd":
                raw = src.get("monitors")
                if not isinstance(raw, list) or not raw:
                    raise where.error(f"{sp}.monitors", "is required")
                monitors = tuple(_text(where, m, f"{sp}.monitors[{j}]") for j, m in enumerate(raw))
                disk = f"{_text(where, src.get('pool'), f'{sp}.pool') or 'rbd'}/{disk}"  # API default pool: rbd
            out.append(PodVolume(name, kind, read_only=read_only, disk=disk, monitors=monitors))
        else:
            out.append(PodVolume(name, kind, read_only=read_only))
    return tuple(out)


def conflicts(volume: PodVolume, other: PodVolume) -> bool:
    """VolumeRestrictions' isVolumeConflict for one pair: the same GCE PD unless both read-only, the same EBS
    volume always, the same iSCSI IQN unless both read-only, the same RBD pool/image on a shared monitor unless
    both read-only."""
    if volume.kind != other.kind or volume.disk != other.disk or volume.kind not in DISK_CONFLICT_KINDS:
        return False
    if volume.kind == "awsElasticBlockStore":
        return True
    if volume.kind == "rbd" and not set(volume.monitors) & set(other.monitors):
        return False
    return not (volume.read_only and other.read_only)
