"""What happened to each pending pod, as the real kube-scheduler or accelsched decided it, and how two compare."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

PREEMPTION_PART = " preemption: "


@dataclass
class PodOutcome:
    """One pending pod's first decision.

    ``node``: where it was bound ('' when it was not); ``message``: the PodScheduled=False message (the
    FailedScheduling message); ``reason``: that condition's reason (Unschedulable, SchedulingGated);
    ``nominated`` and ``victims`` (namespace/name, sorted) when it preempted, ``node`` then is where it was bound
    once the victims were gone. ``best``: accelsched's top-scored nodes (offline only). ``claims``: for a bound pod
    with DRA claims, each pod claim's allocation as ``{"name": <pod's claim name>, "results": [{"request",
    "driver", "pool", "device"}]}`` in the pod's claim order (the generated claim's own name differs between the
    two sides, so it is left out); the extended-resource claim is named ``<extended-resources>``.
    """

    pod: str
    node: str = ""
    message: str = ""
    reason: str = ""
    nominated: str = ""
    victims: list[str] = field(default_factory=list)
    best: list[str] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)

    @property
    def kind(self) -> str:
        if self.victims or self.nominated:
            return "preempting"
        return "bound" if self.node else "pending"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pod": self.pod}
        for name in ("node", "reason", "message", "nominated"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.victims:
            out["victims"] = list(self.victims)
        if self.claims:
            out["claims"] = [dict(c) for c in self.claims]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PodOutcome:
        return cls(
            pod=str(data["pod"]),
            node=str(data.get("node") or ""),
            message=str(data.get("message") or ""),
            reason=str(data.get("reason") or ""),
            nominated=str(data.get("nominated") or ""),
            victims=sorted(data.get("victims") or []),
            claims=[dict(c) for c in data.get("claims") or []],
        )


def split_message(message: str) -> tuple[str, str]:
    """(filter part, PostFilter part) of a FailedScheduling message; the PostFilter part is '' without one."""
    for marker in (" no new claims to deallocate,", PREEMPTION_PART):
        at = message.find(marker)
        if at >= 0:
            return message[:at], message[at + 1 :]
    return message, ""


_GENERATED = re.compile(r"(claim [a-z0-9.-]+/[a-z0-9.-]+-)[a-z0-9]{5}\b")


_POOL_BEING_UPDATED = re.compile(r"(but resource pool )\S+( is currently)")


def mask_generated(message: str) -> str:
    """A message with the random suffix of generated claim names (``claim ns/<pod>-<claim>-xxxxx``) masked: the
    resourceclaim controller (real) and accelsched's loader (offline) draw different ones. Also the pool of an
    allocator error: kube-scheduler filters nodes in parallel and the first node's error aborts the cycle, so which
    node's incomplete pool is named is a race."""
    return _POOL_BEING_UPDATED.sub(r"\1*\2", _GENERATED.sub(r"\1*****", message))


def differences(real: list[PodOutcome], ours: list[PodOutcome]) -> list[str]:
    """Each way accelsched's decisions differ from the real ones, as short kinds with detail:
    ``kind: detail``. Empty when they agree (the real node among our best-scored ones counts as agreeing)."""
    out: list[str] = []
    for r, o in zip(real, ours, strict=True):
        where = r.pod
        if r.kind != o.kind:
            out.append(f"{r.kind}-vs-{o.kind}: {where}: real {_describe(r)}; accelsched {_describe(o)}")
            continue
        if r.kind == "pending":
            if r.reason != o.reason and "SchedulerError" in (r.reason, o.reason):
                out.append(f"reason: {where}: real {r.reason!r}, accelsched {o.reason or 'Unschedulable'!r}")
            if r.reason != o.reason and r.reason == "SchedulingGated":
                out.append(f"gated: {where}: real {r.reason!r}, accelsched {o.reason or 'Unschedulable'!r}")
            rf, rp = split_message(mask_generated(r.message))
            of, op = split_message(mask_generated(o.message))
            if rf != of:
                out.append(f"message-filter: {where}: real {rf!r}; accelsched {of!r}")
            if rp != op:
                out.append(f"message-postfilter: {where}: real {rp!r}; accelsched {op!r}")
        elif r.kind == "bound":
            if o.best and r.node not in o.best:
                out.append(f"score: {where}: real {r.node}; accelsched best {sorted(o.best)} (chose {o.node})")
            elif not o.best and r.node != o.node:
                out.append(f"score: {where}: real {r.node}; accelsched {o.node}")
            elif r.node == o.node and r.claims != o.claims:
                # Same node: the upstream allocator's choice there is deterministic (docs/conformance.md, DRA).
                out.append(f"allocation: {where}: real {_claims(r.claims)}; accelsched {_claims(o.claims)}")
        else:
            if r.nominated != o.nominated:
                out.append(f"preemption-node: {where}: real {r.nominated}; accelsched {o.nominated}")
            elif r.victims != o.victims:
                out.append(f"preemption-victims: {where}: real {r.victims}; accelsched {o.victims}")
            elif r.node != o.node:
                out.append(f"preemption-bind: {where}: real {r.node or 'pending'}; accelsched {o.node or 'pending'}")
    return out


def _claims(claims: list[dict[str, Any]]) -> str:
    parts = []
    for c in claims:
        devices = ",".join(f"{x.get('request')}={x.get('pool')}/{x.get('device')}" for x in c.get("results") or [])
        parts.append(f"{c.get('name')}[{devices}]")
    return " ".join(parts) or "none"


def _describe(o: PodOutcome) -> str:
    if o.kind == "bound":
        return f"bound to {o.node}"
    if o.kind == "preempting":
        return f"preempted {o.victims} on {o.nominated}"
    return f"pending {o.message!r}"
