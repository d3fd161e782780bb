"""The engine's Pod for a Pending pod tried again, without parsing it again: a copy of the first pod parsed with
the same scheduling signature (framework.equivalence), given this pod's name, uid and object.

A backlog is retried on every pod deletion (NodeResourcesFit's queueing hint), and parsing each of its pods again
cost more than deciding it once equivalent failures are reused. Keeping every Pending pod parsed would cost about
2 KB each; here each pod keeps a digest of what the parser reads of it (everything but its resourceVersion, its
managed fields and its status conditions, which the failure reports rewrite) and the signature it had, and each
signature keeps one parsed Pod, in a bounded table. A pod whose digest changed is parsed again.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from accelsched.api.objects import Pod
from accelsched.framework.equivalence import signature
from accelsched.live import convert as live_convert
from accelsched.live.kube import JSON

MAX_TEMPLATES = 10_000  # distinct signatures kept at once; past it the table starts over (bounded memory)
UNREAD_METADATA = frozenset({"resourceVersion", "managedFields"})


def digest(obj: JSON) -> int:
    """A hash of what parsing ``obj`` reads: a pod's failure report (its PodScheduled condition) leaves it as it
    was, so a pod retried after its report is not parsed again."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in UNREAD_METADATA}
    status = {k: v for k, v in (obj.get("status") or {}).items() if k != "conditions"}
    return hash(json.dumps([meta, obj.get("spec"), status], sort_keys=True, default=str))


def _copy(template: Pod, obj: JSON) -> Pod:
    """``template`` as the pod ``obj`` names: its own identity and object, and its own copies of what a cycle
    writes to (devices, exclusive CPUs) or a queue's admission adds to (the node selector)."""
    meta = obj.get("metadata") or {}
    pod = copy.copy(template)
    pod.name = str(meta.get("name") or "")
    pod.uid = str(meta.get("uid") or "")
    pod.raw = obj
    pod.labels = dict(template.labels)
    pod.annotations = dict(template.annotations)
    pod.requests = dict(template.requests)
    pod.node_selector = dict(template.node_selector)
    pod.devices = {}
    pod.exclusive_cpus = {}
    pod.node_name = ""
    return pod


class ParsedPods:
    """Pending pods' Pods, parsed once per signature (see the module docstring)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, tuple[Any, ...]]] = {}  # uid -> (digest, signature)
        self._templates: dict[tuple[Any, ...], Pod] = {}
        self.copied = 0  # Pods made by copying (tests read it)

    def parse(self, obj: JSON) -> tuple[Pod, tuple[Any, ...] | None]:
        """The Pod of ``obj`` and its signature (None: it has none); raises as live.convert.parse_pod does."""
        uid = str((obj.get("metadata") or {}).get("uid"))
        hashed = digest(obj)
        seen = self._seen.get(uid)
        if seen is not None and seen[0] == hashed:
            template = self._templates.get(seen[1])
            if template is not None:
                self.copied += 1
                return _copy(template, obj), seen[1]
        pod = live_convert.parse_pod(obj, live_convert.SOURCE)
        signed = signature(pod)
        if signed is None:
            self._seen.pop(uid, None)
            return pod, None
        if signed not in self._templates:
            if len(self._templates) >= MAX_TEMPLATES:
                self._templates.clear()
            template = self._templates[signed] = _copy(pod, pod.raw)  # a cycle writes to the pod it tries
            template.raw = {}  # not kept alive by the table
        self._seen[uid] = (hashed, signed)
        return pod, signed

    def forget(self, uid: str) -> None:
        """The pod is bound or gone: nothing of it is kept."""
        self._seen.pop(uid, None)
