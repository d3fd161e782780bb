"""What the live scheduler reads of pod and node JSON objects: gang keys, write keys, placement and change tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelsched.api.objects import DEVICES_ANNOTATION, Pod
from accelsched.framework import gang
from accelsched.live.kube import JSON

if TYPE_CHECKING:
    from accelsched.live.writes import Decision


gang_key = gang.group_key_of  # the gang a pod's object belongs to, as gang.group_key reads a Pod


def write_key(obj: JSON) -> str:
    """What API writes are ordered by: the gang (bound as one unit), else the pod."""
    meta = obj.get("metadata") or {}
    return gang_key(obj) or f"{meta.get('namespace')}/{meta.get('name')}"


def gang_member(obj: JSON) -> bool:
    return gang_key(obj) is not None


def same_placement(current: Pod, obj: JSON, node: str) -> bool:
    """Whether the session's pod already accounts ``obj``: the same pod on the same node, with the same spec
    and labels (what the accounting reads; the status and most metadata do not move it)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    if str(meta.get("uid")) != current.uid or spec.get("nodeName") != node:
        return False
    held = current.raw.get("spec") or {}
    return labels(current.raw) == labels(obj) and {**held, "nodeName": node} == spec


def devices_guessed(pod: Pod) -> bool:
    """Bound by another scheduler without the devices annotation: its devices are the first free ones, a guess."""
    return bool((pod.raw.get("spec") or {}).get("nodeName")) and DEVICES_ANNOTATION not in (
        (pod.raw.get("metadata") or {}).get("annotations") or {}
    )


def nominated(obj: JSON) -> str:
    return str((obj.get("status") or {}).get("nominatedNodeName") or "")


def labels(obj: JSON) -> dict:
    return (obj.get("metadata") or {}).get("labels") or {}


def same_content(old: JSON, new: JSON) -> bool:
    return (
        {k: v for k, v in old.items() if k not in ("metadata", "status")}
        == {k: v for k, v in new.items() if k not in ("metadata", "status")}
        and labels(old) == labels(new)
        and (old.get("metadata") or {}).get("annotations") == (new.get("metadata") or {}).get("annotations")
        and old.get("status") == new.get("status")
    )


def node_changed(old: JSON, new: JSON) -> bool:
    """What scheduling reads of a node: spec, labels, annotations, capacity and allocatable."""
    o_meta, n_meta = old.get("metadata") or {}, new.get("metadata") or {}
    o_status, n_status = old.get("status") or {}, new.get("status") or {}
    return (
        old.get("spec") != new.get("spec")
        or o_meta.get("labels") != n_meta.get("labels")
        or o_meta.get("annotations") != n_meta.get("annotations")
        or o_status.get("allocatable") != n_status.get("allocatable")
        or o_status.get("capacity") != n_status.get("capacity")
    )


def as_bound(obj: JSON, decision: Decision) -> JSON:
    """A pending pod's object as it will be once bound: nodeName and the chosen devices."""
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), **decision.annotations}
    return {**obj, "metadata": meta, "spec": {**(obj.get("spec") or {}), "nodeName": decision.node}}
