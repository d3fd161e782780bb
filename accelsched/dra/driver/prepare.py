"""Preparing and unpreparing one claim: what NodePrepareResources / NodeUnprepareResources do per claim.

Prepare reads the ResourceClaim (from the API server in a cluster, from a dict in unit tests: ``ClaimSource``),
checks that its UID is the one the kubelet named and that it is allocated, takes the allocation results of this
driver, finds each device in this node's current inventory, writes the claim's CDI spec and checkpoints the result
before answering. A claim already in the checkpoint is answered from it without reading the API server again, so
a repeated Prepare (the kubelet retries after its own restart or a timeout) gives the same devices and the same CDI
IDs. Unprepare removes the CDI spec, then the checkpoint entry; an unknown claim is already unprepared.

What goes wrong with one claim (not found, not allocated, a device gone from this node) is a ``ClaimError``: the
server puts its message in that claim's response entry, as the API defines, and the kubelet retries later.

MIG devices are handed out as published (a placement the allocator chose); creating the MIG instance on the GPU
is the vendor driver's job and is not done here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from accelsched.dra.driver.cdi import CDIWriter
from accelsched.dra.driver.checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from accelsched.dra.inventory import NodeInventory
from accelsched.live.kube import ApiError, Resource

RESOURCE_CLAIMS = Resource("/apis/resource.k8s.io/v1", "resourceclaims")


class ClaimError(Exception):
    """Preparing or unpreparing one claim failed; the message goes into that claim's response entry."""


class ClaimSource(Protocol):
    def get(self, namespace: str, name: str) -> Mapping[str, Any]:
        """The ResourceClaim as the API returns it; ClaimError when it cannot be read."""
        ...


class ApiClaimSource:
    """Claims from the API server (the DaemonSet's ServiceAccount may ``get`` resourceclaims)."""

    def __init__(self, kube: Any) -> None:
        self.kube = kube

    def get(self, namespace: str, name: str) -> Mapping[str, Any]:
        try:
            return self.kube.get(RESOURCE_CLAIMS, name, namespace)
        except ApiError as exc:
            if exc.status == 404:
                raise ClaimError(f"ResourceClaim {namespace}/{name} not found") from None
            raise ClaimError(f"fetch ResourceClaim {namespace}/{name}: {exc}") from None


class StaticClaimSource:
    """Claims from a dict keyed by (namespace, name): for tests and for running without an API server."""

    def __init__(self, claims: Mapping[tuple[str, str], Mapping[str, Any]] | None = None) -> None:
        self.claims: dict[tuple[str, str], Mapping[str, Any]] = dict(claims or {})

    def add(self, claim: Mapping[str, Any]) -> None:
        meta = claim["metadata"]
        self.claims[(meta["namespace"], meta["name"])] = claim

    def get(self, namespace: str, name: str) -> Mapping[str, Any]:
        try:
            return self.claims[(namespace, name)]
        except KeyError:
            raise ClaimError(f"ResourceClaim {namespace}/{name} not found") from None


def _results(claim: Mapping[str, Any], driver: str, where: str) -> list[Mapping[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        raise ClaimError(f"{where} is not allocated")
    results = ((allocation.get("devices") or {}).get("results")) or []
    ours = [r for r in results if isinstance(r, Mapping) and r.get("driver") == driver]
    if not ours:
        raise ClaimError(f"{where} has no device of driver {driver} allocated")
    return ours


class Preparer:
    """Prepares claims for ``driver`` from the devices of ``pool`` (this node's) that ``inventory`` returns now."""

    def __init__(
        self,
        driver: str,
        pool: str,
        inventory: Callable[[], NodeInventory],
        claims: ClaimSource,
        cdi: CDIWriter,
        checkpoint: Checkpoint,
    ) -> None:
        self.driver = driver
        self.pool = pool
        self.inventory = inventory
        self.claims = claims
        self.cdi = cdi
        self.checkpoint = checkpoint
        self._lock = threading.Lock()  # one claim at a time: CDI files and the checkpoint change together

    def prepare(self, namespace: str, uid: str, name: str) -> PreparedClaim:
        where = f"ResourceClaim {namespace}/{name}"
        with self._lock:
            done = self.checkpoint.claims.get(uid)
            if done is not None:
                if (done.namespace, done.name) != (namespace, name):
                    raise ClaimError(
                        f"claim UID {uid} was prepared as {done.namespace}/{done.name}, not {namespace}/{name}"
                    )
                return done
            claim = self.claims.get(namespace, name)
            actual = (claim.get("metadata") or {}).get("uid")
            if actual != uid:
                raise ClaimError(f"{where} has UID {actual}, not {uid} (deleted and created again?)")
            devices = self._devices(_results(claim, self.driver, where), where)
            try:
                ids = self.cdi.write(uid, list({d.name: (d, self.pool) for d, _ in devices}.values()))
                prepared = PreparedClaim(
                    uid,
                    namespace,
                    name,
                    tuple(
                        PreparedDevice((r["request"],), self.pool, d.name, (ids[d.name],), r.get("shareID"))
                        for d, r in devices
                    ),
                )
                self.checkpoint.put(prepared)
            except OSError as exc:
                self.cdi.remove(uid)  # nothing half-done: no spec without its checkpoint entry
                raise ClaimError(f"{where}: {type(exc).__name__}: {exc}") from None
            return prepared

    def _devices(self, results: list[Mapping[str, Any]], where: str) -> list[tuple[Any, Mapping[str, Any]]]:
        here = self.inventory().by_name()
        out = []
        for r in results:
            pool, device = r.get("pool"), r.get("device")
            if pool != self.pool:
                raise ClaimError(f"{where}: device {pool}/{device} is not in this node's pool {self.pool}")
            if device not in here:
                raise ClaimError(f"{where}: device {device} is not on this node now (gone, or never published)")
            if not r.get("request"):
                raise ClaimError(f"{where}: the allocation result for device {device} names no request")
            out.append((here[device], r))
        return out

    def unprepare(self, namespace: str, uid: str, name: str) -> None:
        with self._lock:
            try:
                self.cdi.remove(uid)
                self.checkpoint.remove(uid)
            except OSError as exc:
                raise ClaimError(f"ResourceClaim {namespace}/{name}: {type(exc).__name__}: {exc}") from None

    def remove_orphans(self) -> list[str]:
        """Remove CDI specs no checkpoint entry backs (a crash between writing one and checkpointing it)."""
        with self._lock:
            orphans = [uid for uid in self.cdi.claim_uids() if uid not in self.checkpoint.claims]
            for uid in orphans:
                self.cdi.remove(uid)
            return orphans
