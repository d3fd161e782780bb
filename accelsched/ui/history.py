"""The page's history: allocation, Pending pods by reason and fragmentation of every published state, kept in the
process (a bounded ring: live mode publishes on every burst of events) and exposed as Prometheus gauges.

A point is read off the view the Hub publishes (its counts and capacity panel), so the history says what the page
said at that version, and costs nothing the publish did not compute already.
"""

from __future__ import annotations

import re
import threading
from collections import Counter, deque
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

POINTS = 720  # an hour at one publish per 5 s; older points are dropped
# kube-scheduler's "0/16 nodes are available: 3 Insufficient x, 1 node(s) had untolerated taint(s). preemption: ..."
_AVAILABLE = re.compile(r"nodes are available: (.*?)(?:\.\s|\.?$)")
_COUNTED = re.compile(r"^(\d+)\s+(.*)$")


def reason_of(entry: dict[str, Any]) -> str:
    """The filter a Pending entry's message blames on the most nodes (``Insufficient nvidia.com/gpu``), its gate
    for a gated pod, else the message's first clause: what pending.js groups the list by."""
    message = str(entry.get("message") or "")
    found = _AVAILABLE.search(message)
    if found is None:
        if entry.get("status") == "Gated":
            return "Gated"
        return message.split(";")[0][:90] or str(entry.get("status") or "Pending")
    best: tuple[int, str] | None = None
    for part in found.group(1).split(","):
        counted = _COUNTED.match(part.strip())
        if counted and (best is None or int(counted.group(1)) > best[0]):
            best = (int(counted.group(1)), counted.group(2))
    return best[1] if best else found.group(1)


def point(view: dict[str, Any], at: float) -> dict[str, Any]:
    """One history point of a published view: physical devices (all, used, free for a new pod, stranded), Pending
    pods (a gang counts its members) by reason, and the split devices' fragmented units per mode."""
    capacity = view.get("capacity") or {}
    physical = capacity.get("physical") or []
    devices = capacity.get("devices") or {}
    reasons: Counter[str] = Counter()
    for entry in view.get("pending") or []:
        reasons[reason_of(entry)] += len(entry.get("members") or ()) if entry.get("kind") == "gang" else 1
    return {
        "t": round(at, 3),
        "version": view.get("version"),
        "devices": sum(e["devices"] for e in physical),
        "used": sum(e["used"] for e in physical),
        "free": devices.get("free", 0),
        "stranded": devices.get("stranded", 0),
        "pending": sum(reasons.values()),
        "pendingByReason": dict(reasons.most_common()),
        "fragmented": {p["mode"]: p["fragmented"] for p in capacity.get("partitions") or []},
    }


class History:
    """The last POINTS points, and the latest as Prometheus gauges (``/metrics``): thread-safe, as the Hub's publish
    runs on the live source's thread while the server reads."""

    def __init__(self, points: int = POINTS) -> None:
        self._points: deque[dict[str, Any]] = deque(maxlen=points)
        self._lock = threading.Lock()
        self.registry = CollectorRegistry()
        self._devices = Gauge(
            "accelsched_ui_devices", "Physical accelerator devices by state: used, free (a new pod can use them), "
            "stranded (free on a node no new pod can use).", ["state"], registry=self.registry,
        )  # fmt: skip
        self._pending = Gauge(
            "accelsched_ui_pending_pods", "Pending pods by the reason their message gives for the most nodes.",
            ["reason"], registry=self.registry,
        )  # fmt: skip
        self._fragmented = Gauge(
            "accelsched_ui_fragmented_units", "Free units of split devices that no request seen can use, by mode.",
            ["mode"], registry=self.registry,
        )  # fmt: skip
        self._version = Gauge("accelsched_ui_state_version", "The version of the state shown.", registry=self.registry)

    def record(self, view: dict[str, Any], at: float) -> dict[str, Any]:
        p = point(view, at)
        with self._lock:
            self._points.append(p)
            for state in ("used", "free", "stranded"):
                self._devices.labels(state).set(p[state])
            self._pending.clear()  # a reason that no pod gives any more is no series of 0 forever
            for reason, n in p["pendingByReason"].items():
                self._pending.labels(reason).set(n)
            self._fragmented.clear()
            for mode, n in p["fragmented"].items():
                self._fragmented.labels(mode).set(n)
            self._version.set(p["version"] or 0)
        return p

    def points(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._points)

    def metrics(self) -> bytes:
        with self._lock:
            return generate_latest(self.registry)
