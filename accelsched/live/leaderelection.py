"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection with a LeaseLock.

The python client's leaderelection only ships a ConfigMap lock; kube-scheduler uses a Lease. The rules are
client-go's: a candidate takes the lease when it is unheld, or when its record has not changed for a whole
lease duration by the candidate's own clock (never trusting the holder's clock); updates are optimistic
(resourceVersion), so of two candidates racing for an expired lease only one write succeeds. A leader that
cannot renew within the renew deadline stops leading (kube-scheduler then exits, and so does ``accelsched run``).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelsched.live.kube import JSON, LEASES, ApiError, Kube

log = logging.getLogger("accelsched.live.leaderelection")


@dataclass(frozen=True)
class ElectionConfig:
    """kube-scheduler's flags: --leader-elect-lease-duration 15s, -renew-deadline 10s, -retry-period 2s."""

    name: str = "accelsched"
    namespace: str = "kube-system"
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def check(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError("leader election needs lease duration > renew deadline > retry period > 0")


def micro_time(when: float) -> str:
    """A MicroTime: RFC 3339 with microseconds, UTC."""
    return dt.datetime.fromtimestamp(when, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def held_by_other(spec: JSON, identity: str, observed_at: float, now: float) -> bool:
    """True while another candidate holds the lease: a holder is named and the record we observed has not been
    left unchanged for its lease duration (measured from when *we* saw it change)."""
    holder = spec.get("holderIdentity") or ""
    if not holder or holder == identity:
        return False
    duration = float(spec.get("leaseDurationSeconds") or 0)
    return observed_at + duration > now


def next_spec(spec: JSON | None, identity: str, lease_duration: float, wall: float) -> JSON:
    """The record a candidate writes to take or renew the lease: acquireTime kept while we hold it,
    leaseTransitions bumped whenever the holder changes (client-go: also when taking a released lease, whose
    holder is empty); a new lease starts at 0."""
    ours = bool(spec) and spec.get("holderIdentity") == identity
    transitions = int((spec or {}).get("leaseTransitions") or 0)
    spec = spec or {}
    return {
        "holderIdentity": identity,
        "leaseDurationSeconds": round(lease_duration) or 1,
        "acquireTime": spec.get("acquireTime") if ours and spec.get("acquireTime") else micro_time(wall),
        "renewTime": micro_time(wall),
        "leaseTransitions": transitions if ours or not spec else transitions + 1,
    }


def released_spec(spec: JSON, wall: float) -> JSON:
    """client-go's release: no holder, a 1 s duration, renewTime and acquireTime now, transitions kept."""
    now = micro_time(wall)
    return {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now, "acquireTime": now}


class LeaderElector:
    """Runs the election in a thread; ``leading`` is set while this candidate holds the lease."""

    def __init__(
        self,
        kube: Kube,
        config: ElectionConfig,
        on_started: Callable[[], None] | None = None,
        on_stopped: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        status: Callable[[bool], None] | None = None,
    ) -> None:
        config.check()
        self.kube = kube
        self.config = config
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.clock = clock
        # leader_election_master_status as client-go keeps it: 0 from the start (a standby reports 0), 1 while leading.
        self.status = status or (lambda leading: None)
        self.status(False)
        self.leading = threading.Event()
        self.observed: JSON | None = None
        self.observed_at = 0.0
        self.holder = ""  # who holds the lease as last seen (for logs and /readyz)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if release and self.leading.is_set():
            self.release()

    def try_acquire_or_renew(self) -> bool:
        """One attempt: read the Lease (create it when missing), and take or renew it if the rules allow."""
        cfg = self.config
        now = self.clock()
        try:
            lease = self.kube.get(LEASES, cfg.name, cfg.namespace)
        except ApiError as exc:
            if exc.status != 404:
                log.warning("cannot read lease", extra={"lease": cfg.name, "error": exc.message})
                return False
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": next_spec(None, cfg.identity, cfg.lease_duration, time.time()),
            }
            try:
                self._observe(self.kube.create(LEASES, body, cfg.namespace), now)
            except ApiError:
                return False  # someone else created it first, or the server is away
            return True
        spec = lease.get("spec") or {}
        if self.observed is None or spec != self.observed.get("spec"):
            self._observe(lease, now)
        if held_by_other(spec, cfg.identity, self.observed_at, now):
            return False
        lease["spec"] = next_spec(spec, cfg.identity, cfg.lease_duration, time.time())
        try:
            self._observe(self.kube.replace(LEASES, cfg.name, lease, cfg.namespace), now)
        except ApiError:
            return False  # 409: another candidate wrote first
        return True

    def release(self) -> None:
        """Give the lease up on a clean shutdown (client-go's ReleaseOnCancel): the next candidate need not wait."""
        cfg = self.config
        try:
            lease = self.kube.get(LEASES, cfg.name, cfg.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != cfg.identity:
                return
            lease["spec"] = released_spec(lease["spec"], time.time())
            self.kube.replace(LEASES, cfg.name, lease, cfg.namespace)
        except ApiError as exc:
            log.warning("cannot release lease", extra={"lease": cfg.name, "error": exc.message})
        self.leading.clear()
        self.status(False)

    def _observe(self, lease: Any, now: float) -> None:
        self.observed = lease
        self.observed_at = now
        self.holder = str((lease.get("spec") or {}).get("holderIdentity") or "")

    def _run(self) -> None:
        cfg = self.config
        while not self._stop.is_set():
            if not self.try_acquire_or_renew():
                self._stop.wait(cfg.retry_period)
                continue
            log.info("became leader", extra={"lease": f"{cfg.namespace}/{cfg.name}", "identity": cfg.identity})
            self.leading.set()
            self.status(True)
            if self.on_started:
                self.on_started()
            last_renew = self.clock()
            while not self._stop.wait(cfg.retry_period):
                if self.try_acquire_or_renew():
                    last_renew = self.clock()
                elif self.clock() - last_renew > cfg.renew_deadline:
                    break
            if self._stop.is_set():
                return
            self.leading.clear()
            self.status(False)
            log.error("leader election lost", extra={"lease": f"{cfg.namespace}/{cfg.name}", "identity": cfg.identity})
            if self.on_stopped:
                self.on_stopped()
            return
