"""The driver's record of prepared claims, so a restart loses nothing and a repeated Prepare answers the same.

The file has the kubelet's own checkpoint layout (pkg/kubelet/cm/dra/state/checkpoint.go): ``{"Data": <JSON text>,
"Checksum": <CRC-32 (IEEE) of that text>}``, so a torn or hand-edited file is detected rather than half-read. It is
written as the kubelet's checkpoint manager writes (a temporary file in the same folder, fsync, rename over the old
one, fsync of the folder): a reader sees the old record or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import zlib
from dataclasses import dataclass, field
from typing import Any

API_VERSION = "checkpoint.dra.accelsched.io/v1"
KIND = "DRADriverCheckpoint"


class CheckpointError(Exception):
    """The checkpoint file exists but cannot be trusted (bad JSON, wrong checksum, unknown layout)."""


@dataclass(frozen=True)
class PreparedDevice:
    """One device handed to the kubelet for a claim: the NodePrepareResources ``Device`` message, as data."""

    requests: tuple[str, ...]
    pool: str
    device: str
    cdi_device_ids: tuple[str, ...]
    share_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "requestNames": list(self.requests),
            "poolName": self.pool,
            "deviceName": self.device,
            "cdiDeviceIDs": list(self.cdi_device_ids),
        }
        if self.share_id is not None:
            out["shareID"] = self.share_id
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> PreparedDevice:
        return cls(
            tuple(doc["requestNames"]),
            doc["poolName"],
            doc["deviceName"],
            tuple(doc["cdiDeviceIDs"]),
            doc.get("shareID"),
        )


@dataclass(frozen=True)
class PreparedClaim:
    uid: str
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "devices": [d.to_dict() for d in self.devices]}


def encode(claims: dict[str, PreparedClaim]) -> bytes:
    data = json.dumps(
        {
            "kind": KIND,
            "apiVersion": API_VERSION,
            "preparedClaims": {uid: c.to_dict() for uid, c in sorted(claims.items())},
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return json.dumps({"Data": data, "Checksum": zlib.crc32(data.encode())}).encode()


def decode(blob: bytes, path: str = "") -> dict[str, PreparedClaim]:
    where = path or "checkpoint"
    try:
        outer = json.loads(blob)
        data, checksum = outer["Data"], outer["Checksum"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{where}: not a checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, str) or not isinstance(checksum, int):
        raise CheckpointError(f"{where}: not a checkpoint (Data must be a string, Checksum a number)")
    actual = zlib.crc32(data.encode())
    if actual != checksum:
        raise CheckpointError(f"{where}: checkpoint is corrupted (checksum {checksum}, data sums to {actual})")
    try:
        doc = json.loads(data)
        if doc.get("kind") != KIND or doc.get("apiVersion") != API_VERSION:
            raise CheckpointError(f"{where}: unknown checkpoint {doc.get('apiVersion')}/{doc.get('kind')}")
        return {
            uid: PreparedClaim(uid, c["namespace"], c["name"], tuple(PreparedDevice.from_dict(d) for d in c["devices"]))
            for uid, c in doc["preparedClaims"].items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{where}: bad checkpoint data ({type(exc).__name__}: {exc})") from None


def write_atomic(path: str, content: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``content`` in one step: temp file in the same folder, fsync, rename, fsync folder."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class Checkpoint:
    """The prepared claims by UID, loaded from ``path`` (none: empty) and written back on every change."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except FileNotFoundError:
            self.claims: dict[str, PreparedClaim] = {}
        else:
            self.claims = decode(blob, path)

    def put(self, claim: PreparedClaim) -> None:
        claims = {**self.claims, claim.uid: claim}
        write_atomic(self.path, encode(claims))
        self.claims = claims  # only once it is on disk: a failed write leaves memory and file agreeing

    def remove(self, uid: str) -> None:
        if uid not in self.claims:
            return
        claims = {k: v for k, v in self.claims.items() if k != uid}
        write_atomic(self.path, encode(claims))
        self.claims = claims
