"""Helpers for the live scheduler's integration tests: apply lab YAML to the real API server, run the scheduler,
wait for what it writes back (bindings, conditions, events)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from controlplane import REPO, make_node

from accelsched.api.loader import read_documents
from accelsched.live import kube as k
from accelsched.live.kube import ApiError, Kube, api_client
from accelsched.live.leaderelection import ElectionConfig
from accelsched.live.scheduler import LiveScheduler

LAB = REPO / "examples" / "lab"


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0, every: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except ApiError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


def kube_for(kubeconfig: Path | str) -> Kube:
    return Kube(api_client(str(kubeconfig)))


@contextlib.contextmanager
def running_scheduler(
    kubeconfig: Path | str,
    config: str | None = None,
    election: ElectionConfig | None = None,
    before_bind: Callable[..., None] | None = None,
    **kwargs: Any,
) -> Iterator[LiveScheduler]:
    """An in-process ``accelsched run`` (same class the command runs), synced before the test goes on."""
    scheduler = LiveScheduler(kube_for(kubeconfig), config, election=election, watch_timeout=60, **kwargs)
    scheduler.before_bind = before_bind
    scheduler.start()
    try:
        wait_for("the scheduler's caches to sync", lambda: scheduler.synced, timeout=30)
        yield scheduler
    finally:
        scheduler.stop()


def docs(path: Path, kind: str) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(d.doc)) for d in read_documents(path) if d.kind == kind]


def apply_nodes(api: Any, path: Path) -> list[str]:
    """The file's Nodes as a kubelet would register them: spec and labels, then the status it reports."""
    names = []
    for node in docs(path, "Node"):
        meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
        make_node(
            api,
            meta["name"],
            labels=meta.get("labels"),
            capacity=status.get("capacity") or status.get("allocatable"),
            allocatable=status.get("allocatable"),
            taints=spec.get("taints") or (),
            unschedulable=bool(spec.get("unschedulable")),
        )
        names.append(meta["name"])
    return names


def for_accelsched(pod: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The lab pod in the test's namespace, asking for accelsched by schedulerName."""
    pod = json.loads(json.dumps(pod))
    pod["metadata"]["namespace"] = namespace
    pod["spec"]["schedulerName"] = "accelsched"
    return pod


def pod_json(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return kube.get(k.PODS, name, namespace)


def decided(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    """The pod once the scheduler has decided: bound, or marked PodScheduled=False."""
    pod = pod_json(kube, namespace, name)
    if (pod.get("spec") or {}).get("nodeName"):
        return pod
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return pod
    return None


def condition_message(pod: dict[str, Any]) -> str:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return str(c.get("message") or "")
    return ""


def events_for(kube: Kube, namespace: str, name: str, reason: str | None = None) -> list[dict[str, Any]]:
    items = kube.list(k.EVENTS, namespace).get("items") or []
    return [
        e
        for e in items
        if (e.get("regarding") or {}).get("name") == name and (reason is None or e.get("reason") == reason)
    ]


def devices_of(pod: dict[str, Any]) -> dict[str, list[str]]:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get("accelsched.io/devices")
    return json.loads(text) if text else {}


def accel_pod(name: str, namespace: str, accel: int = 1, labels: dict[str, str] | None = None) -> dict[str, Any]:
    amount = str(accel)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "schedulerName": "accelsched",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/infer:1",
                    "resources": {
                        "requests": {"cpu": "100m", "qualcomm.com/ai-accelerator": amount},
                        "limits": {"qualcomm.com/ai-accelerator": amount},
                    },
                }
            ],
        },
    }


def node_of(kube: Kube, namespace: str, name: str) -> str:
    """The node the pod is bound to, or '' (also when it does not exist)."""
    try:
        return str((pod_json(kube, namespace, name).get("spec") or {}).get("nodeName") or "")
    except ApiError as exc:
        if exc.status == 404:
            return ""
        raise


@contextlib.contextmanager
def real_kueue(workdir: Path) -> Iterator[Any]:
    """The real Kueue v0.19.2 on a control plane of its own (conformance/kueue/real.py's KueueCluster), built if
    missing; the test is skipped (failed under CI=true) naming what is missing when it cannot be."""
    import prereqs

    from conformance.kueue.process import kueue_binary
    from conformance.kueue.real import KueueCluster

    if kueue_binary(build=False) is None and (why := prereqs.no_go_toolchain()):
        prereqs.missing(why, "ACCELSCHED_SKIP_LIVE")
    with KueueCluster(workdir) as cluster:
        yield cluster
