"""Upper bounds on what one input may multiply into: pods from workloads, devices on one node.

A manifest of a few lines can ask for ``replicas: 100000000`` or ``devices: 2147483647``; expanded, it takes all
memory before anything is scheduled. The API server accepts such numbers (an int32 replicas field), so the bound
is ours: far above what real clusters hold (Kubernetes' tested scale is 5,000 nodes and 150,000 pods; a node has
at most a few hundred devices of one kind), and raised with ``--limit NAME=N`` on ``schedule`` and ``explain``
(docs/input.md). Going past a limit is bad input, exit 2, naming the field that multiplied.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from accelsched.errors import quoted


@dataclass(frozen=True)
class Limits:
    # Pods one workload expands to: a Deployment's, ReplicaSet's or StatefulSet's replicas, a Job's parallelism
    # and completions. (A DaemonSet makes one pod per node in the input.)
    pods: int = 200_000
    # Devices of one resource on one node: node allocatable, the partitioning annotation, NRT zone counts.
    devices: int = 4096
    # Bytes of one input file (api/reader.py), checked before it is read: a `kubectl get nodes,pods -A -o json`
    # of a 5,000-node cluster with 55,000 pods is about 460 MiB.
    input_bytes: int = 2 << 30
    # Objects (documents and List items) of one file.
    objects: int = 1_000_000


DEFAULTS = Limits()
NAMES = tuple(f.name for f in dataclasses.fields(Limits))
_current = DEFAULTS


def current() -> Limits:
    return _current


def configure(overrides: dict[str, int] | None = None) -> Limits:
    """Set the limits for this process: the defaults with ``overrides`` (by name) on top."""
    global _current
    _current = dataclasses.replace(DEFAULTS, **(overrides or {}))
    return _current


def parse_overrides(items: tuple[str, ...] | list[str]) -> dict[str, int]:
    """``NAME=N`` items (``pods=500000``) into overrides; ValueError with a user-facing reason."""
    out: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in NAMES:
            raise ValueError(f"{quoted(item)}: expected NAME=N with NAME one of {', '.join(NAMES)}")
        value = value.strip()
        if not value.isdigit() or len(value) > 18 or int(value) < 1:
            raise ValueError(f"{quoted(item)}: the limit must be a whole number >= 1")
        out[name] = int(value)
    return out


def exceeded(what: str, value: int, name: str) -> str | None:
    """The message when ``value`` is over the limit ``name``, else None."""
    limit = getattr(_current, name)
    if value <= limit:
        return None
    return f"{what} {value} is more than the limit of {limit} (raise it with --limit {name}={value})"
