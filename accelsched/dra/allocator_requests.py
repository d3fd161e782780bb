"""The request and constraint model of the DRA allocator (dra/allocator.py): its feature gates, errors and unsuitability
reasons, one request or subrequest as the search sees it (_Request), the matchAttribute and distinctAttribute
constraints (_Constraint), and the taint and selector verdicts of a device for a request.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from accelsched.dra.cel import CELError, compile_selector
from accelsched.dra.model import (
    ALLOCATION_MODE_ALL,
    Device,
    DeviceClass,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ResourceClaim,
)
from accelsched.dra.pools import MAX_VERDICTS_PER_DEVICE, Entry

REASON_ALLOCATED = "allocated"
REASON_TAINTED = "untolerated taint"
REASON_COUNTERS = "counters exhausted"
REASON_CAPACITY = "capacity exhausted"
_SHARE_NAMESPACE = uuid.UUID("7f3b2f4e-5a54-4d8e-9a55-1dd6e4b0a8c1")


@dataclass(frozen=True)
class Features:
    """internal.Features: the allocator's feature switches (all on by default in 1.36)."""

    admin_access: bool = True
    consumable_capacity: bool = True
    device_binding_and_status: bool = True
    device_taints: bool = True
    partitionable_devices: bool = True
    prioritized_list: bool = True


class _DeadlineExceeded(Exception):
    """The search ran past its deadline (upstream: context.DeadlineExceeded from the Filter's timeout)."""


class AllocationError(Exception):
    """An error upstream's Allocate returns (not "does not fit"). ``on_node``: it wraps ErrFailedAllocationOnNode,
    i.e. only this node is affected and the text is the node's unschedulable reason; otherwise the scheduling
    attempt fails with the error."""

    def __init__(self, message: str, on_node: bool = False) -> None:
        super().__init__(message)
        self.on_node = on_node


class _MaxSizeExceeded(Exception):
    """errAllocationResultMaxSizeExceeded: more than 32 results in a claim along this branch."""


# ---------------------------------------------------------------------------------------------- requests


class _Request:
    """requestData for one request without subrequests or one subrequest (node independent parts)."""

    __slots__ = (
        "admin",
        "all_mode",
        "capacities",
        "class_",
        "count",
        "dead_key",
        "has_admin",
        "name",
        "parent",
        "result_name",
        "sig",
        "spec",
        "tolerations",
        "vkey",
    )

    def __init__(self, spec: DeviceSubRequest, parent: str | None, class_: DeviceClass | None) -> None:
        self.spec = spec
        self.name = spec.name
        self.parent = parent
        self.result_name = f"{parent}/{spec.name}" if parent is not None else spec.name
        self.class_ = class_
        self.has_admin = parent is None and spec.admin_access is not None
        self.admin = parent is None and bool(spec.admin_access)
        self.all_mode = spec.allocation_mode == ALLOCATION_MODE_ALL
        self.count = spec.count
        self.tolerations = spec.tolerations
        self.capacities = spec.capacity_requests
        class_selectors = class_.selectors if class_ is not None else ()
        self.sig = (class_.name if class_ is not None else "", tuple(class_selectors), tuple(spec.selectors))
        self.vkey = 0
        # What decides whether a device of a pool can be taken at all (see _Search.live_pools): set with
        # vkey; None (never memoized) for adminAccess, which takes devices in use.
        self.dead_key: tuple | None = None


class _Constraint:
    """matchAttribute / distinctAttribute (constraint.go); ``requests`` empty: every request of the claim."""

    __slots__ = ("attribute", "count", "distinct", "requests", "seen", "value")

    def __init__(self, requests: tuple[str, ...], attribute: str, distinct: bool) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute
        self.distinct = distinct
        self.count = 0
        self.value: object = None
        self.seen: dict[str, object] = {}  # distinct: value per request name (upstream keys it so)

    def applies(self, base: str, sub: str | None) -> bool:
        if not self.requests:
            return True
        return base in self.requests or (sub is not None and f"{base}/{sub}" in self.requests)

    def add(self, base: str, sub: str | None, device: Device) -> bool:
        if not self.applies(base, sub):
            return True
        key = _attribute_key(device.attributes.get(self.attribute))
        if key is None:
            return False  # attribute not set (or of a type that cannot match)
        if self.count == 0:
            if self.distinct:
                self.seen[base] = key
            else:
                self.value = key
            self.count = 1
            return True
        if self.distinct:
            if key in self.seen.values():
                return False
            self.seen[base] = key
        elif key != self.value:
            return False
        self.count += 1
        return True

    def remove(self, base: str, sub: str | None) -> None:
        if not self.applies(base, sub):
            return
        if self.distinct:
            self.seen.pop(base, None)
        self.count -= 1


def _kobj(claim: ResourceClaim) -> str:
    """klog.KObj: namespace/name, or the name alone without a namespace."""
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


def _attribute_key(value: object) -> object:
    """An attribute value with its type, so that 1 and true never compare equal (IntValue vs BoolValue)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, str):
        return ("string", value)
    text = getattr(value, "text", None)
    if isinstance(text, str):
        return ("version", text)
    return None


def _tolerated(taint: DeviceTaint, tolerations: tuple[DeviceToleration, ...]) -> bool:
    """resourceclaim.ToleratesTaint for any of the tolerations."""
    for t in tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if t.key and t.key != taint.key:
            continue
        if t.operator in ("", "Equal"):
            if t.value == taint.value:
                return True
        elif t.operator == "Exists":
            return True
    return False


def _taint_prevents(taints: tuple[DeviceTaint, ...], tolerations: tuple[DeviceToleration, ...]) -> bool:
    return any(not _tolerated(t, tolerations) for t in taints)


def _verdict(entry: Entry, req: _Request) -> object:
    """Class selectors, then request selectors, for one device: True, False, or (kind, index, message)."""
    cached = entry.verdicts.get(req.vkey)
    if cached is not None:
        return cached
    result: object = True
    device, driver = entry.device, entry.slice.driver
    _, class_selectors, request_selectors = req.sig
    for kind, selectors in (("class", class_selectors), ("claim", request_selectors)):
        if kind == "class" and req.class_ is None:
            continue
        for i, expression in enumerate(selectors):
            try:
                selector = compile_selector(expression)
            except CELError as exc:
                result = (kind, i, f"CEL compile error: {exc}")
                break
            try:
                matched = selector.matches(device, driver)
            except CELError as exc:
                result = (kind, i, f"CEL runtime error: {exc}")
                break
            if not matched:
                result = False
                break
        if result is not True:
            break
    if len(entry.verdicts) >= MAX_VERDICTS_PER_DEVICE:
        entry.verdicts.clear()
    entry.verdicts[req.vkey] = result
    return result
