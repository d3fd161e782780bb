"""The ``accelsched run`` process: logs, the health/metrics server, leader election, the scheduler, signals."""

from __future__ import annotations

import logging
import signal
import socket
import threading
import uuid
from dataclasses import dataclass

from accelsched.errors import InputError
from accelsched.live import debugstate, logs
from accelsched.live.kube import Kube, api_client
from accelsched.live.leaderelection import ElectionConfig
from accelsched.live.metrics import HealthServer
from accelsched.live.scheduler import API_CONNECTIONS, LiveScheduler

log = logging.getLogger("accelsched.live")

EXIT_LOST_LEASE = 1


@dataclass
class RunOptions:
    kubeconfig: str | None = None
    config: str | None = None
    seed: int = 0
    score_all_nodes: bool = False
    leader_elect: bool = False
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    lease_name: str = "accelsched"
    lease_namespace: str = "kube-system"
    identity: str | None = None
    metrics_port: int = 10251
    metrics_address: str = "0.0.0.0"
    debug_state_remote: bool = False  # /debug/state to every client, not only loopback ones
    log_level: str = "info"


def run_scheduler(options: RunOptions) -> int:
    """Run until SIGTERM/SIGINT (exit 0, the lease released) or until leadership is lost (exit 1, as
    kube-scheduler exits so that it restarts as a candidate)."""
    logs.setup(options.log_level)
    identity = options.identity or f"{socket.gethostname()}_{uuid.uuid4()}"
    election = None
    if options.leader_elect:
        election = ElectionConfig(
            options.lease_name,
            options.lease_namespace,
            identity,
            options.lease_duration,
            options.renew_deadline,
            options.retry_period,
        )
        try:
            election.check()
        except ValueError as exc:
            raise InputError(str(exc), field="--leader-elect-lease-duration") from None
    kube = Kube(api_client(options.kubeconfig, pool_size=API_CONNECTIONS))
    scheduler = LiveScheduler(
        kube, options.config, options.seed, identity, election, score_all_nodes=options.score_all_nodes, tend_heap=True
    )
    health = HealthServer(
        scheduler.metrics,
        scheduler.ready,
        options.metrics_port,
        options.metrics_address,
        scheduler.healthy,
        debug_state=debugstate.for_scheduler(scheduler),
        debug_remote=options.debug_state_remote,
    )
    health.start()
    done = threading.Event()

    def terminate(signum: int, _frame: object) -> None:
        log.info("shutting down", extra={"signal": signal.Signals(signum).name})
        done.set()

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    scheduler.start()
    log.info(
        "started",
        extra={
            "identity": identity,
            "schedulerNames": sorted(scheduler.scheduler_names),
            "metricsPort": health.port,
            "leaderElect": options.leader_elect,
        },
    )
    while not done.wait(0.2):
        if scheduler.lost_lease:
            break
    scheduler.stop()
    health.stop()
    if scheduler.lost_lease:
        return EXIT_LOST_LEASE
    log.info("stopped", extra={"bound": scheduler.bound_total})
    return 0
