"""Small builders for Kubernetes-shaped Node/Pod dicts and a one-call way to run the engine on them.

The dicts are what `kubectl get -o yaml` prints, so the tests drive the same parser the CLI uses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from accelsched.api import objects
from accelsched.api.loader import Document, Inputs, build_inputs
from accelsched.config import parse_config
from accelsched.engine import Session
from accelsched.framework.profile import SchedulerConfig
from accelsched.framework.scheduler import ScheduleResult

ACCEL = "qualcomm.com/ai-accelerator"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(
    name: str,
    cpu: str | int = "8",
    memory: str = "32Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, Any]] = (),
    unschedulable: bool = False,
    **extra: str | int,
) -> dict[str, Any]:
    """A Node dict. ``extra`` adds allocatable resources; pass them as ``{"vendor.com/x": 4}`` via ``**``."""
    allocatable: dict[str, Any] = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    allocatable.update({k: str(v) for k, v in extra.items()})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME: name, **(labels or {})}},
        "spec": spec,
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def pod(
    name: str,
    cpu: str | None = "100m",
    memory: str | None = None,
    *,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    tolerations: Iterable[Mapping[str, Any]] = (),
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    spread: Iterable[Mapping[str, Any]] = (),
    node_name: str | None = None,
    priority: int | None = None,
    extra: Mapping[str, int | str] | None = None,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    overhead: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Pod dict with one container requesting ``cpu``/``memory``/``extra`` (unless ``containers`` is given)."""
    if containers is None:
        requests: dict[str, str] = {}
        if cpu is not None:
            requests["cpu"] = cpu
        if memory is not None:
            requests["memory"] = memory
        limits = {}
        for res, amount in (extra or {}).items():
            requests[res] = str(amount)
            limits[res] = str(amount)
        resources: dict[str, Any] = {"requests": requests}
        if limits:
            resources["limits"] = limits
        containers = [{"name": "main", "image": "busybox", "resources": resources}]
    spec: dict[str, Any] = {"containers": containers}
    if init_containers:
        spec["initContainers"] = init_containers
    if overhead:
        spec["overhead"] = dict(overhead)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = dict(affinity)
    if spread:
        spec["topologySpreadConstraints"] = [dict(c) for c in spread]
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
    }


def container(name: str = "c", restart_policy: str | None = None, **resources: Mapping[str, str]) -> dict[str, Any]:
    """A container dict: ``container(requests={"cpu": "1"}, limits={...})``."""
    out: dict[str, Any] = {"name": name, "image": "busybox", "resources": dict(resources)}
    if restart_policy:
        out["restartPolicy"] = restart_policy
    return out


def namespace(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def config(**profile: Any) -> SchedulerConfig:
    """A KubeSchedulerConfiguration with one default-scheduler profile built from ``profile`` fields."""
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "default-scheduler", **profile}],
        }
    )


def session(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    *,
    namespaces: Iterable[Mapping[str, Any]] = (),
    config: SchedulerConfig | None = None,
    seed: int = 0,
) -> Session:
    inputs = Inputs(
        nodes=[objects.parse_node(n) for n in nodes],
        pods=[objects.parse_pod(p) for p in pods],
        namespaces=[objects.parse_namespace(n) for n in namespaces],
    )
    return _with_reasons(Session.start(inputs, config=config, seed=seed))


def _with_reasons(s: Session) -> Session:
    """The tests pin each Pending pod's per-node reasons (``schedule --reasons``): the scheduler keeps them."""
    s.scheduler.keep_diagnosis = True
    return s


def start(*docs: Mapping[str, Any], config: SchedulerConfig | None = None, seed: int = 0) -> Session:
    """A session over whole documents of any kind (PodGroups, PriorityClasses, ...), loaded as the CLI loads
    files: admission, priority classes and gang checks included."""
    inputs = build_inputs([Document(dict(d), "test.yaml", d["kind"]) for d in docs], base=Inputs())
    return _with_reasons(Session.start(inputs, config=config, seed=seed))


def run(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    *,
    namespaces: Iterable[Mapping[str, Any]] = (),
    config: SchedulerConfig | None = None,
    seed: int = 0,
) -> dict[str, ScheduleResult]:
    """Schedule the pending pods; results keyed by pod name (in the order they were last attempted)."""
    s = session(nodes, pods, namespaces=namespaces, config=config, seed=seed)
    assert not s.rejected, [r.message for r in s.rejected]
    return {r.pod.name: r for r in s.schedule()}


def placements(results: Mapping[str, ScheduleResult]) -> dict[str, str | None]:
    return {name: r.node for name, r in results.items()}


def filter_message(result: ScheduleResult) -> str:
    """The FitError message without its PostFilter part (DynamicResources' then DefaultPreemption's, joined by
    ``, `` as RunPostFilterPlugins does), which depends on the profile."""
    return re.sub(r"(?<=\.) (no new claims to deallocate|still not schedulable|not found|preemption: ).*$", "",
                  result.message)


def reason_counts(result: ScheduleResult) -> dict[str, int]:
    """``{"reason": count}`` parsed back out of ``0/N nodes are available: <count reason>, ....``."""
    msg = filter_message(result)
    m = re.fullmatch(r"0/\d+ nodes are available: (.*)\.", msg)
    assert m, msg
    out = {}
    for entry in m.group(1).split(", "):
        count, reason = entry.split(" ", 1)
        out[reason] = int(count)
    return out


def tol(key: str = "", operator: str = "Equal", value: str = "", effect: str = "") -> dict[str, str]:
    out = {"operator": operator}
    if key:
        out["key"] = key
    if value:
        out["value"] = value
    if effect:
        out["effect"] = effect
    return out


def taint(key: str, effect: str = "NoSchedule", value: str = "") -> dict[str, str]:
    out = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out
