"""Pods on the real node and the evidence of which devices they got, from each component that handled them.

A pod's devices are read four ways, and a test compares them:
- ``annotation``: what accelsched chose and wrote in ``accelsched.io/devices`` at bind;
- ``allocate``: what the kubelet passed to the plugin's Allocate (the plugin logs each call);
- ``checkpoint``: what the kubelet's device manager recorded for the pod (``kubelet_internal_checkpoint``);
- ``container``: what the running container sees: the visible-devices variable and the ``/dev`` nodes, read from
  its log through the API server (``kubectl logs``).

:func:`record` appends each checked pod to ``$ACCELSCHED_NODE_REPORT`` (JSON lines), from which `make node-e2e`
prints its last line (tests/node/summary.py); `make chart-e2e` records its workload pods the same way.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import nodekit as nk

DEVICES_ANNOTATION = "accelsched.io/devices"


def probe_pod(
    name: str,
    resource: str,
    count: int,
    scheduler: str = "accelsched",
    priority_class: str | None = None,
    annotations: dict[str, str] | None = None,
    node_name: str | None = None,
) -> dict[str, Any]:
    """A pod running the probe image, asking for ``count`` devices (requests = limits, as extended resources need)."""
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        # No kube-controller-manager publishes kube-root-ca.crt here, which the token volume would wait for.
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 5,
        "containers": [
            {
                "name": "probe",
                "image": nk.PROBE_IMAGE,
                "imagePullPolicy": "Never",  # imported, there is no registry
                "resources": {"limits": {resource: str(count)}, "requests": {resource: str(count)}},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_name:
        spec["nodeName"] = node_name
    meta = {"name": name, "annotations": annotations or {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@dataclass
class Seen:
    """What the container reported about itself (from its log)."""

    env: dict[str, str] = field(default_factory=dict)
    dev: dict[str, str] = field(default_factory=dict)  # path -> "char 261:0"
    ready: bool = False


def parse_probe_log(text: str) -> Seen:
    seen = Seen()
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "env":
            k, _, v = rest.partition("=")
            seen.env[k] = v
        elif kind == "dev":
            path, _, what = rest.partition(" ")
            seen.dev[path] = what
        elif line == "probe ready":
            seen.ready = True
    return seen


def container_log(node: Any, namespace: str, name: str) -> Seen:
    """The probe's report, once it has printed all of it (read through the API server from the kubelet)."""

    def read() -> Seen | None:
        seen = parse_probe_log(node.core.read_namespaced_pod_log(name, namespace))
        return seen if seen.ready else None

    return nk.wait_for(f"the log of {namespace}/{name}", read, timeout=60)


def wait_running(node: Any, namespace: str, name: str, timeout: float = 120) -> Any:
    def check() -> Any:
        pod = node.core.read_namespaced_pod(name, namespace)
        if pod.status.phase == "Failed":
            raise AssertionError(f"{namespace}/{name} failed: {pod.status.reason}: {pod.status.message}")
        return pod if pod.status.phase == "Running" else None

    return nk.wait_for(f"{namespace}/{name} to run", check, timeout=timeout)


def annotated_devices(pod: Any, resource: str) -> list[str]:
    raw = (pod.metadata.annotations or {}).get(DEVICES_ANNOTATION)
    return sorted(json.loads(raw).get(resource, [])) if raw else []


def checkpoint_devices(pod_uid: str, resource: str) -> list[str]:
    """The device IDs the kubelet's device manager checkpointed for ``pod_uid`` (all containers, all NUMA nodes)."""
    path = nk.DEVICE_PLUGIN_DIR / "kubelet_internal_checkpoint"
    data = json.loads(path.read_text())["Data"]
    ids: list[str] = []
    for entry in data.get("PodDeviceEntries") or []:
        if entry["PodUID"] == pod_uid and entry["ResourceName"] == resource:
            by_numa = entry["DeviceIDs"]
            for group in by_numa.values() if isinstance(by_numa, dict) else [by_numa]:
                ids.extend(group)
    return sorted(set(ids))


def visible(seen: Seen, env_var: str) -> list[str]:
    value = seen.env.get(env_var, "")
    return sorted(v for v in value.split(",") if v)


def accel_nodes(seen: Seen) -> dict[str, str]:
    return {p: w for p, w in seen.dev.items() if p.startswith("/dev/accel/")}


@dataclass
class Evidence:
    pod: str
    annotation: list[str]
    checkpoint: list[str]
    container: list[str]
    device_nodes: dict[str, str]

    @property
    def agree(self) -> bool:
        return bool(self.annotation) and self.annotation == self.checkpoint == self.container


def evidence(node: Any, plugin: Any, namespace: str, name: str) -> Evidence:
    """Wait for the pod to run and collect what each component says it got."""
    pod = wait_running(node, namespace, name)
    seen = container_log(node, namespace, name)
    return Evidence(
        pod=f"{namespace}/{name}",
        annotation=annotated_devices(pod, plugin.resource),
        checkpoint=checkpoint_devices(pod.metadata.uid, plugin.resource),
        container=visible(seen, plugin.env_var),
        device_nodes=accel_nodes(seen),
    )


def record(test: str, ev: Evidence, **extra: Any) -> None:
    """Append the pod's row; ``extra`` adds (or, for ``agree``, overrides) fields, e.g. ``in_cluster`` for
    `make chart-e2e`'s pods."""
    path = os.environ.get("ACCELSCHED_NODE_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"test": test, **asdict(ev), "agree": ev.agree, **extra}) + "\n")
