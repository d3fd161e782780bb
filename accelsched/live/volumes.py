"""Live mode's storage side: informers for the storage kinds, and VolumeBinding's PreBind through the API.

bind_pod_volumes is the binder's BindPodVolumes (volumebinding/binder.go): bindAPIUpdate updates each PV chosen
for a static binding (spec.claimRef to the claim, ``pv.kubernetes.io/bound-by-controller: "yes"`` when the PV was
not bound to it before) and each claim to provision (``volume.kubernetes.io/selected-node: <node>``), then
checkBindings polls every second, up to bindTimeoutSeconds, until the PV controller and the provisioner have bound
every claim (spec.volumeName and ``pv.kubernetes.io/bind-completed``). It runs in the binding cycle (a bind
worker), never in the scheduling loop, as kube-scheduler runs PreBind in the binding goroutine.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from accelsched.api.objects import Pod
from accelsched.api.storage import ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE
from accelsched.live.kube import JSON, ApiError, Kube, Resource

PERSISTENT_VOLUMES = Resource("/api/v1", "persistentvolumes", namespaced=False)
PERSISTENT_VOLUME_CLAIMS = Resource("/api/v1", "persistentvolumeclaims")
STORAGE_CLASSES = Resource("/apis/storage.k8s.io/v1", "storageclasses", namespaced=False)
CSI_NODES = Resource("/apis/storage.k8s.io/v1", "csinodes", namespaced=False)
CSI_DRIVERS = Resource("/apis/storage.k8s.io/v1", "csidrivers", namespaced=False)
CSI_STORAGE_CAPACITIES = Resource("/apis/storage.k8s.io/v1", "csistoragecapacities")
# kind -> where it lives: the informers live/scheduler.py keeps, and the kinds the loader parses.
RESOURCES = {
    "PersistentVolume": PERSISTENT_VOLUMES,
    "PersistentVolumeClaim": PERSISTENT_VOLUME_CLAIMS,
    "StorageClass": STORAGE_CLASSES,
    "CSINode": CSI_NODES,
    "CSIDriver": CSI_DRIVERS,
    "CSIStorageCapacity": CSI_STORAGE_CAPACITIES,
}
POLL_SECONDS = 1.0


def _claim_ref(claim: JSON) -> JSON:
    """reference.GetReference of a claim, as GetBindVolumeToClaim sets it."""
    meta = claim.get("metadata") or {}
    return {
        "kind": "PersistentVolumeClaim",
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "apiVersion": "v1",
        "resourceVersion": meta.get("resourceVersion"),
    }


def _bound_to(pv: JSON, claim: JSON) -> bool:
    ref = (pv.get("spec") or {}).get("claimRef") or {}
    meta = claim.get("metadata") or {}
    if not ref or ref.get("name") != meta.get("name") or ref.get("namespace") != meta.get("namespace"):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def _fully_bound(claim: JSON) -> bool:
    meta = claim.get("metadata") or {}
    return bool((claim.get("spec") or {}).get("volumeName")) and ANN_BIND_COMPLETED in (meta.get("annotations") or {})


def bind_pod_volumes(
    kube: Kube, pod: Pod, node: str, plan: Any, timeout: float, stopped: threading.Event | None = None
) -> str | None:
    """BindPodVolumes for ``plan`` (volumebinding.PodVolumes); an error message, or None once all are bound."""
    try:
        for pv, claim in plan.static_bindings:
            body = copy.deepcopy(pv.raw)
            claim_raw = claim.raw
            if not _bound_to(body, claim_raw):
                body.setdefault("metadata", {}).setdefault("annotations", {}).setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
            body.setdefault("spec", {})["claimRef"] = _claim_ref(claim_raw)
            kube.replace(PERSISTENT_VOLUMES, pv.name, body)
        for claim in plan.dynamic_provisions:
            body = copy.deepcopy(claim.raw)
            body.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node
            kube.replace(PERSISTENT_VOLUME_CLAIMS, claim.name, body, claim.namespace)
    except ApiError as exc:
        return f"binding volumes: {exc.message}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            error, done = _check_bindings(kube, node, plan)
        except ApiError as exc:
            error, done = f"failed to check binding: {exc.message}", False
        if error:
            return f"binding volumes: {error}"
        if done:
            return None
        if time.monotonic() >= deadline:
            return "binding volumes: context deadline exceeded"
        if stopped is not None:
            if stopped.wait(POLL_SECONDS):
                return "binding volumes: scheduler stopping"
        else:
            time.sleep(POLL_SECONDS)


def _check_bindings(kube: Kube, node: str, plan: Any) -> tuple[str, bool]:
    """checkBindings: ('', True) when every claim is bound, ('', False) to poll again, (error, False) to fail."""
    done = True
    for pv, claim in plan.static_bindings:
        current = kube.get(PERSISTENT_VOLUMES, pv.name)
        ref = (current.get("spec") or {}).get("claimRef") or {}
        if not ref.get("uid"):
            return f'ClaimRef got reset for pv "{pv.name}"', False
        done = done and _fully_bound(kube.get(PERSISTENT_VOLUME_CLAIMS, claim.name, claim.namespace))
    for claim in plan.dynamic_provisions:
        current = kube.get(PERSISTENT_VOLUME_CLAIMS, claim.name, claim.namespace)
        annotations = (current.get("metadata") or {}).get("annotations")
        if not annotations:
            return f'selectedNode annotation reset for PVC "{claim.name}"', False
        if annotations.get(ANN_SELECTED_NODE) != node:
            return f'provisioning failed for PVC "{claim.name}"', False
        done = done and _fully_bound(current)
    return "", done
