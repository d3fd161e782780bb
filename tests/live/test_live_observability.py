"""``accelsched run`` as a real process: kube-scheduler's queue metrics and /debug/state on its metrics port, read
while it schedules, against what the API server shows (the node's status, the pods' bindings and conditions)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from conftest import KubeContext
from livekit import accel_pod, condition_message, decided, devices_of, kube_for, node_of, wait_for
from prometheus_client.parser import text_string_to_metric_families

from accelsched.live import kube as k

ACCEL = "qualcomm.com/ai-accelerator"


def _run(kubeconfig: Path, log: Path) -> subprocess.Popen[bytes]:
    # The default --metrics-address (every address): /debug/state must still answer loopback clients only.
    args = [sys.executable, "-m", "accelsched.cli", "run", f"--kubeconfig={kubeconfig}", "--metrics-port=0"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("wb"))


def _log(log: Path) -> list[dict]:
    out = []
    for line in log.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = _get(f"http://127.0.0.1:{port}/metrics")[1]
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(port: int, name: str, **labels: str) -> float:
    return _samples(port).get((name, tuple(sorted(labels.items()))), 0.0)


def _outbound_address() -> str:
    """This machine's non-loopback address, if it has one (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))
            address = s.getsockname()[0]
    except OSError:
        return ""
    return "" if address.startswith("127.") else address


def test_queue_metrics_and_debug_state_follow_a_running_scheduler(kube: KubeContext, tmp_path: Path) -> None:
    api, ns = kube_for(kube.kubeconfig), kube.namespace
    kube.make_node("obs1", capacity={ACCEL: 4}, labels={"zone": "z1"})
    log = tmp_path / "run.log"
    proc = _run(kube.kubeconfig, log)
    try:
        started = wait_for("started", lambda: [e for e in _log(log) if e.get("msg") == "started"], timeout=60)
        port = int(started[0]["metricsPort"])
        wait_for("ready", lambda: _get(f"http://127.0.0.1:{port}/readyz")[0] == 200, timeout=60)

        gated = accel_pod("gated", ns)
        gated["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
        for pod in (accel_pod("fits", ns), accel_pod("big", ns, accel=8), gated):
            api.create(k.PODS, pod, ns)
        wait_for("fits bound", lambda: node_of(api, ns, "fits"), timeout=60)
        big = wait_for("big unschedulable", lambda: decided(api, ns, "big"), timeout=60)
        incoming = "scheduler_queue_incoming_pods_total"
        wait_for(
            "the attempt failure counted",
            lambda: _value(port, incoming, queue="unschedulable", event="ScheduleAttemptFailure") >= 1,
            timeout=30,
        )
        assert _value(port, incoming, queue="active", event="UnschedulablePodAdd") == 2  # fits and big
        assert _value(port, incoming, queue="unschedulable", event="UnschedulablePodAdd") == 1  # gated
        assert _value(port, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 1  # fits
        wait_for("pending_pods", lambda: _value(port, "scheduler_pending_pods", queue="gated") == 1, timeout=30)
        assert _value(port, "scheduler_pending_pods", queue="unschedulable") == 1

        # /debug/state against the API server's view (what kubectl describe node / pod show).
        status, text = _get(f"http://127.0.0.1:{port}/debug/state?node=obs1")
        assert status == 200, text
        state = json.loads(text)
        row, node = state["node"], api.get(k.NODES, "obs1")
        assert row["allocatable"][ACCEL] == node["status"]["allocatable"][ACCEL] == "4"
        assert row["allocatable"]["cpu"] == node["status"]["allocatable"]["cpu"]
        assert row["labels"]["zone"] == "z1"
        assert row["requested"][ACCEL] == "1" and row["requested"]["cpu"] == "100m"
        fits = api.get(k.PODS, "fits", ns)
        (device,) = devices_of(fits)[ACCEL]
        assert row["devices"][ACCEL]["held"] == {device: f"{ns}/fits"}
        assert [p["pod"] for p in row["pods"]] == [f"{ns}/fits"]
        queue = state["queue"]
        (entry,) = queue["unschedulable"]
        assert entry["pod"] == f"{ns}/big" and entry["attempts"] >= 1
        assert entry["lastFailure"] == condition_message(big)  # the PodScheduled message it wrote
        assert [(e["pod"], e["schedulingGates"]) for e in queue["gated"]] == [(f"{ns}/gated", ["example.com/hold"])]

        assert _get(f"http://127.0.0.1:{port}/debug/state?node=nope") == (404, "node 'nope' not found\n")
        status, text = _get(f"http://127.0.0.1:{port}/debug/state?nodes=obs1")
        assert status == 400 and text.count("\n") == 1
        outside = _outbound_address()
        if outside:  # the port listens on every address; /debug/state answers loopback clients only
            assert _get(f"http://{outside}:{port}/debug/state")[0] == 403
            assert _get(f"http://{outside}:{port}/metrics")[0] == 200

        api.patch(k.PODS, "gated", {"spec": {"schedulingGates": None}}, ns)
        wait_for("gated bound once ungated", lambda: node_of(api, ns, "gated"), timeout=60)
        event = "UnschedulablePodUpdatePodSchedulingGatesEliminated"
        assert _value(port, incoming, queue="active", event=event) == 1
        wait_for(
            "two SLI observations",
            lambda: _value(port, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 2,
            timeout=30,
        )
        rebuilds = [e for e in _log(log) if e.get("msg") == "session rebuilt"]
        assert rebuilds and all(e.get("reason") for e in rebuilds), rebuilds  # each rebuild says why
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
