"""What the informers keep of each object: its JSON less managedFields, with repeated strings stored once.

kube-scheduler's pod informer drops ``.metadata.managedFields`` (newPodInformer's transform, "to improve memory
usage"): the server-side apply bookkeeping is a third of a small pod's JSON and nothing a scheduler reads. Here
it goes for nodes and pods alike (a PUT without managedFields leaves the server's as they are, and nodes and pods
are never PUT from the cache anyway).

A JSON decoder makes a new string for every key and value it reads, so 30,000 pods hold 30,000 copies of
"metadata", "containers", "default-scheduler", their namespace, their node's name and the service account volume's
paths. The strings of a trimmed object are interned (``sys.intern``): one copy of each, shared by every object that
has it, as Go's informers share nothing but keep far smaller structs. Values that are unique to an object (its
uid, resourceVersion, timestamps) are left as they are: interning them would cost a table entry and save nothing.
Containers (dicts, lists) are never shared between objects: the scheduler copies and edits them.
"""

from __future__ import annotations

import sys
from typing import Any

from accelsched.live.kube import JSON

# Keys whose string values differ from object to object: not worth an entry in the interned table.
UNIQUE = frozenset(
    {
        "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "startTime", "lastTransitionTime",
        "lastProbeTime", "lastHeartbeatTime", "lastUpdateTime", "time", "startedAt", "finishedAt", "containerID",
        "imageID", "podIP", "ip", "hostIP", "generateName",
    }
)  # fmt: skip
LONGEST = 256  # longer strings (certificates, last-applied-configuration) are left alone: rarely repeated


def trim(obj: JSON) -> JSON:
    """The object the informer stores and hands to its handler (a new dict; ``obj`` may be dropped)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return _shared(obj)


def _shared(value: Any) -> Any:
    if isinstance(value, dict):
        intern = sys.intern
        return {
            intern(key): (
                value
                if type(value) is not str and not isinstance(value, (dict, list))
                else _string(key, value)
                if type(value) is str
                else _shared(value)
            )
            for key, value in value.items()
        }
    if isinstance(value, list):
        return [_string("", item) if type(item) is str else _shared(item) for item in value]
    return value


def _string(key: str, value: str) -> str:
    if key in UNIQUE or len(value) > LONGEST:
        return value
    return sys.intern(value)
