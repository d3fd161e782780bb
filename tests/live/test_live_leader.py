"""Two ``accelsched run --leader-elect`` replicas as real processes: only the Lease holder schedules; when it is
killed, the other takes over within the lease duration and schedules."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import KubeContext
from livekit import accel_pod, events_for, kube_for, node_of, wait_for

from accelsched.live import kube as k

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 4.0, 3.0, 0.5


def _replica(kubeconfig: Path, namespace: str, identity: str, log: Path) -> subprocess.Popen[bytes]:
    args = [
        sys.executable, "-m", "accelsched.cli", "run",
        f"--kubeconfig={kubeconfig}",
        "--leader-elect",
        f"--leader-elect-resource-namespace={namespace}",
        f"--leader-elect-lease-duration={LEASE_DURATION}",
        f"--leader-elect-renew-deadline={RENEW_DEADLINE}",
        f"--leader-elect-retry-period={RETRY_PERIOD}",
        f"--identity={identity}",
        "--metrics-port=0",
        "--metrics-address=127.0.0.1",
    ]  # fmt: skip
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("wb"))


def _metrics_port(log: Path) -> int:
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("msg") == "started":
            return int(entry["metricsPort"])
    return 0


def _holder(api: k.Kube, namespace: str) -> str:
    return str(api.get(k.LEASES, "accelsched", namespace)["spec"].get("holderIdentity") or "")


INSTANCE = f"accelsched-{socket.gethostname()}"


def test_only_the_leader_schedules_and_the_other_takes_over_when_it_dies(kube: KubeContext, tmp_path: Path) -> None:
    api = kube_for(kube.kubeconfig)
    kube.make_node("le1", capacity={"qualcomm.com/ai-accelerator": 8})
    logs = {name: tmp_path / f"{name}.log" for name in ("replica-a", "replica-b")}
    procs = {name: _replica(kube.kubeconfig, kube.namespace, name, log) for name, log in logs.items()}
    try:
        leader = wait_for("a leader", lambda: _holder(api, kube.namespace), timeout=60)
        follower = next(n for n in procs if n != leader)
        ports = {n: wait_for(f"{n} serving", lambda n=n: _metrics_port(logs[n]), timeout=30) for n in procs}
        for name, port in ports.items():  # both ready: caches synced, leader known
            wait_for(f"{name} ready", lambda port=port: _ready(port), timeout=30)

        api.create(k.PODS, accel_pod("before", kube.namespace), kube.namespace)
        wait_for("before bound", lambda: node_of(api, kube.namespace, "before"), timeout=30)
        (event,) = _scheduled_event(api, kube.namespace, "before")
        # client-go's recorder: <reportingController>-<hostname>, the same for both replicas on this machine;
        # which replica scheduled is told by its metrics.
        assert (event["reportingController"], event["reportingInstance"]) == ("accelsched", INSTANCE)
        text = urllib.request.urlopen(f"http://127.0.0.1:{ports[leader]}/metrics").read().decode()
        assert 'scheduler_schedule_attempts_total{profile="accelsched",result="scheduled"} 1.0' in text
        text = urllib.request.urlopen(f"http://127.0.0.1:{ports[follower]}/metrics").read().decode()
        assert 'result="scheduled"' not in text  # the follower watched, but scheduled nothing

        procs[leader].send_signal(signal.SIGKILL)  # no chance to release the lease
        procs[leader].wait(timeout=10)
        killed = time.monotonic()
        wait_for("the follower to take over", lambda: _holder(api, kube.namespace) == follower, timeout=30)
        took = time.monotonic() - killed
        assert took <= LEASE_DURATION + 2 * RETRY_PERIOD + 1.0, f"takeover took {took:.1f}s"

        api.create(k.PODS, accel_pod("after", kube.namespace), kube.namespace)
        wait_for("after bound", lambda: node_of(api, kube.namespace, "after"), timeout=30)
        (event,) = _scheduled_event(api, kube.namespace, "after")
        assert event["reportingInstance"] == INSTANCE
        text = urllib.request.urlopen(f"http://127.0.0.1:{ports[follower]}/metrics").read().decode()
        assert 'scheduler_schedule_attempts_total{profile="accelsched",result="scheduled"} 1.0' in text
        assert len(events_for(api, kube.namespace, "before", "Scheduled")) == 1  # never bound twice
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)


def _scheduled_event(api: k.Kube, namespace: str, name: str) -> list[dict]:
    """The pod's Scheduled events, once there is one: the recorder writes them after the bind, on its own thread."""
    return wait_for(f"{name}'s Scheduled event", lambda: events_for(api, namespace, name, "Scheduled"), timeout=30)


def _ready(port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz").status == 200
    except OSError:
        return False
