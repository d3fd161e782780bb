"""Builders for the Kubernetes objects scenarios are made of, valid for the real API server as created."""

from __future__ import annotations

from typing import Any

from conformance.scenario import JSON, MAIN_NAMESPACE

ACCELERATOR = "qualcomm.com/ai-accelerator"
GPU = "nvidia.com/gpu"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
# Bound pods stay Terminating when preempted (no kubelet finishes the delete), so victims can be counted.
VICTIM_GRACE_SECONDS = 3600

PRIORITY_CLASSES: dict[str, int] = {"low": 100, "mid": 1000, "high": 10000}
NEVER_CLASS = "high-never"  # preemptionPolicy: Never


def priority_classes() -> list[JSON]:
    out = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        for name, value in PRIORITY_CLASSES.items()
    ]
    out.append(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": NEVER_CLASS},
            "value": PRIORITY_CLASSES["high"],
            "preemptionPolicy": "Never",
        }
    )
    return out


def node(
    name: str,
    allocatable: dict[str, str],
    labels: dict[str, str] | None = None,
    taints: list[JSON] | None = None,
    unschedulable: bool = False,
    images: list[JSON] | None = None,
) -> JSON:
    spec: JSON = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    status: JSON = {"capacity": dict(allocatable), "allocatable": dict(allocatable)}
    if images:
        status["images"] = images
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME: name, **(labels or {})}},
        "spec": spec,
        "status": status,
    }


def container(name: str, requests: dict[str, str] | None = None, image: str = "registry.example.com/app:1",
              ports: list[JSON] | None = None, restart_policy: str | None = None) -> JSON:
    c: JSON = {"name": name, "image": image}
    if requests:
        limits = {r: v for r, v in requests.items() if "/" in r}  # extended resources need limit == request
        c["resources"] = {"requests": dict(requests), **({"limits": limits} if limits else {})}
    if ports:
        c["ports"] = ports
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


def pod(
    name: str,
    containers: list[JSON],
    namespace: str = MAIN_NAMESPACE,
    labels: dict[str, str] | None = None,
    node_name: str = "",
    **spec: Any,
) -> JSON:
    body: JSON = {"containers": containers, **{k: v for k, v in spec.items() if v not in (None, [], {})}}
    if node_name:
        body["nodeName"] = node_name
        body.setdefault("terminationGracePeriodSeconds", VICTIM_GRACE_SECONDS)
    meta: JSON = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def namespace(name: str, labels: dict[str, str] | None = None) -> JSON:
    meta: JSON = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
