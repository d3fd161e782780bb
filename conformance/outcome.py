"""What happened to each pending pod, as the real kube-scheduler or accelsched decided it, and how two compare."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PREEMPTION_PART = " preemption: "


@dataclass
class PodOutcome:
    """One pending pod's first decision.

    ``node``: where it was bound ('' when it was not); ``message``: the PodScheduled=False message (the
    FailedScheduling message); ``reason``: that condition's reason (Unschedulable, SchedulingGated);
    ``nominated`` and ``victims`` (namespace/name, sorted) when it preempted, ``node`` then is where it was bound
    once the victims were gone. ``best``: accelsched's top-scored nodes (offline only).
    """

    pod: str
    node: str = ""
    message: str = ""
    reason: str = ""
    nominated: str = ""
    victims: list[str] = field(default_factory=list)
    best: list[str] = field(default_factory=list)

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
        )


def split_message(message: str) -> tuple[str, str]:
    """(filter part, PostFilter part) of a FailedScheduling message; the PostFilter part is '' without one."""
    for marker in (" no new claims to deallocate,", PREEMPTION_PART):
        at = message.find(marker)
        if at >= 0:
            return message[:at], message[at + 1 :]
    return message, ""


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
            if r.reason != o.reason and r.reason == "SchedulingGated":
                out.append(f"gated: {where}: real {r.reason!r}, accelsched {o.reason or 'Unschedulable'!r}")
            rf, rp = split_message(r.message)
            of, op = split_message(o.message)
            if rf != of:
                out.append(f"message-filter: {where}: real {rf!r}; accelsched {of!r}")
            if rp != op:
                out.append(f"message-postfilter: {where}: real {rp!r}; accelsched {op!r}")
        elif r.kind == "bound":
            if o.best and r.node not in o.best:
                out.append(f"score: {where}: real {r.node}; accelsched best {sorted(o.best)} (chose {o.node})")
            elif not o.best and r.node != o.node:
                out.append(f"score: {where}: real {r.node}; accelsched {o.node}")
        else:
            if r.nominated != o.nominated:
                out.append(f"preemption-node: {where}: real {r.nominated}; accelsched {o.nominated}")
            elif r.victims != o.victims:
                out.append(f"preemption-victims: {where}: real {r.victims}; accelsched {o.victims}")
            elif r.node != o.node:
                out.append(f"preemption-bind: {where}: real {r.node or 'pending'}; accelsched {o.node or 'pending'}")
    return out


def _describe(o: PodOutcome) -> str:
    if o.kind == "bound":
        return f"bound to {o.node}"
    if o.kind == "preempting":
        return f"preempted {o.victims} on {o.nominated}"
    return f"pending {o.message!r}"
