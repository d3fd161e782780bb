"""Why a pod's ResourceClaims cannot be allocated on a node, device by device: what kube-scheduler cannot say.

kube-scheduler reports one string per node ("cannot allocate all claims"). For each node and each request this
module follows a request's devices down the same funnel the allocator uses (allocator_incubating.go isSelectable,
allocateDevice): devices of the node that the class's selectors accept, then the request's selectors (each failing
selector counted on its own, CEL runtime errors kept), untolerated taints, devices already allocated (and to which
claim and pod), exhausted counters, and finally the claim's constraints over the free devices. From the counts it
derives the smallest change that would make the node feasible, e.g.

    8 devices of gpu.example.com; 5 fail `device.capacity['gpu.example.com'].memory >= quantity("40Gi")`;
    3 match, 2 allocated to default/train-0 (claim train-0-gpu); request gpu needs 2
    -> 1 more matching device free would make node-a feasible

The analysis is pure (``analyse_node`` takes the node's devices, the classes, who holds each device and what
counters are left) so hand-built cases test it; ``explain_node`` and ``summary`` gather those from the cluster's
DRA state (cluster.dra, plugins/dynamicresources.py). It is only an explanation: the allocator decides. When every
request fits on its own and every constraint can be met but the allocator still refuses (requests or claims that
compete for the same devices), it says so rather than guessing.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from accelsched.dra.allocated import request_fits_capacity
from accelsched.dra.cel import CELError, compile_selector
from accelsched.dra.model import (
    ALLOCATION_MODE_ALL,
    DeviceClass,
    DeviceConstraint,
    DeviceID,
    DeviceRequest,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ResourceClaim,
    ResourceSlice,
    Version,
)

Located = tuple[ResourceSlice, Any]  # (slice, model.Device) as ALLOC's devices_for_node lists them
NO_DEVICES = "no ResourceSlice lists devices for this node"


@dataclass(frozen=True)
class Holder:
    """Who holds an allocated device: the claim, and the pods it is reserved for (``namespace/name``)."""

    claim: str  # namespace/name
    pods: tuple[str, ...] = ()

    def __str__(self) -> str:
        name = self.claim.partition("/")[2] or self.claim
        return f"{', '.join(self.pods)} (claim {name})" if self.pods else f"claim {self.claim} (reserved for no pod)"


@dataclass
class RequestFunnel:
    """One request (or firstAvailable subrequest) on one node, as counts down the allocator's checks."""

    claim: str
    request: str  # "gpu" or "gpu/large"
    device_class: str
    needed: int | None  # None: allocationMode All
    admin_access: bool = False
    class_missing: bool = False
    node_devices: int = 0
    of_class: int = 0
    failing: dict[str, int] = field(default_factory=dict)  # request selector -> devices it rejects first
    errors: list[str] = field(default_factory=list)  # CEL runtime errors, as the allocator words them
    error_devices: int = 0
    tainted: dict[str, int] = field(default_factory=dict)  # untolerated taint -> devices carrying it
    matching: int = 0
    taken: dict[Holder, int] = field(default_factory=dict)
    no_counters: dict[str, int] = field(default_factory=dict)  # counter set -> devices it cannot feed
    no_capacity: int = 0  # devices without the capacity the request asks left (consumable capacity)
    matched: list[Located] = field(default_factory=list)  # every matching device, free or not
    free: list[Located] = field(default_factory=list)

    @property
    def short(self) -> int:
        """Devices missing for this request alone (0: it fits on its own)."""
        if self.class_missing or self.errors:
            return 0
        if self.needed is None:
            return 0 if self.matching and len(self.free) == self.matching else max(1, self.matching - len(self.free))
        return max(0, self.needed - len(self.free))

    @property
    def fits(self) -> bool:
        return not self.class_missing and not self.errors and self.short == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "request": self.request,
            "deviceClassName": self.device_class,
            "needed": "All" if self.needed is None else self.needed,
            "classMissing": self.class_missing,
            "nodeDevices": self.node_devices,
            "ofClass": self.of_class,
            "failingSelectors": dict(self.failing),
            "celErrors": list(self.errors),
            "untoleratedTaints": dict(self.tainted),
            "matching": self.matching,
            "allocated": {str(h): n for h, n in self.taken.items()},
            "counterSetsExhausted": dict(self.no_counters),
            "capacityExhausted": self.no_capacity,
            "free": [f"{s.pool.name}/{d.name}" for s, d in self.free],
        }


@dataclass
class NodeClaims:
    """A node's device-level explanation: one funnel per request, constraint findings, and the remedies."""

    node: str
    funnels: list[RequestFunnel] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)

    def to_json(self) -> list[dict[str, Any]]:
        return [f.to_json() for f in self.funnels]


# ---------------------------------------------------------------------------------------------- small helpers


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """resourceclaim.ToleratesTaint: an empty effect matches every effect, an empty key with Exists every key."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.operator in ("", "Equal") and toleration.value == taint.value


def untolerated(device: Any, tolerations: Sequence[DeviceToleration]) -> DeviceTaint | None:
    """The first NoSchedule/NoExecute taint no toleration covers (taintPreventsAllocation); effect None never blocks."""
    for taint in device.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_text(taint: DeviceTaint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"


def attribute_text(value: Any) -> str:
    if isinstance(value, Version):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def fraction_text(amount: Fraction) -> str:
    """A quantity as people write it: ``40Gi`` for whole binary multiples, else its decimal value."""
    if amount.denominator == 1:
        whole = int(amount)
        for suffix, size in _BINARY:
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    return f"{float(amount):g}"


class CounterBook:
    """What is left of each shared counter: the pools' counter sets (newest generation) minus what every
    allocated device consumes (allocator checkAvailableCounters, before this cycle's own picks)."""

    def __init__(self, slices: Iterable[ResourceSlice], in_use: Callable[[DeviceID], Sequence[Holder]]) -> None:
        newest: dict[tuple[str, str], int] = {}
        slices = list(slices)
        for s in slices:
            key = (s.driver, s.pool.name)
            newest[key] = max(newest.get(key, s.pool.generation), s.pool.generation)
        self.left: dict[tuple[str, str, str], dict[str, Fraction]] = {}
        current = [s for s in slices if s.pool.generation == newest[(s.driver, s.pool.name)]]
        for s in current:
            for counter_set in s.shared_counters:
                self.left[(s.driver, s.pool.name, counter_set.name)] = dict(counter_set.counters)
        for s in current:
            for device in s.devices:
                if device.consumes_counters and in_use(DeviceID(s.driver, s.pool.name, device.name)):
                    for use in device.consumes_counters:
                        left = self.left.get((s.driver, s.pool.name, use.counter_set))
                        for name, amount in use.counters.items():
                            if left is not None and name in left:
                                left[name] -= amount

    def exhausted(self, slice_: ResourceSlice, device: Any) -> str | None:
        """The first counter set that cannot feed ``device``, as ``gpu-0-counters (memory: 10Gi left, needs 20Gi)``."""
        for use in device.consumes_counters:
            left = self.left.get((slice_.driver, slice_.pool.name, use.counter_set))
            if left is None:
                return f"{use.counter_set} (no such counter set)"
            for name, amount in use.counters.items():
                if left.get(name, Fraction(0)) < amount:
                    have = fraction_text(max(left.get(name, Fraction(0)), Fraction(0)))
                    return f"{use.counter_set} ({name}: {have} left, needs {fraction_text(amount)})"
        return None


# ---------------------------------------------------------------------------------------------- the funnel


def _selects(expressions: Sequence[str], where: str, device: Any, driver: str) -> tuple[int | None, str | None]:
    """(index of the first selector that rejects the device or None, the CEL runtime error or None)."""
    for i, expression in enumerate(expressions):
        try:
            if not compile_selector(expression).matches(device, driver):
                return i, None
        except CELError as exc:
            return i, f"{where}: selector #{i}: CEL runtime error: {exc}"
    return None, None


def _note_error(out: RequestFunnel, error: str) -> None:
    if error not in out.errors:
        out.errors.append(error)
    out.error_devices += 1


def funnel(
    claim: ResourceClaim,
    request_name: str,
    sub: DeviceSubRequest,
    classes: Mapping[str, DeviceClass],
    devices: Sequence[Located],
    in_use: Callable[[DeviceID], Sequence[Holder]],
    counters: CounterBook,
    capacity_used: Mapping[DeviceID, Mapping[str, Fraction]] | None = None,
) -> RequestFunnel:
    """Count ``devices`` (one node's) down the checks for one (sub)request."""
    out = RequestFunnel(
        claim.key,
        request_name,
        sub.device_class_name,
        None if sub.allocation_mode == ALLOCATION_MODE_ALL else sub.count,
        admin_access=bool(sub.admin_access),
        node_devices=len(devices),
    )
    device_class = classes.get(sub.device_class_name)
    if device_class is None:
        out.class_missing = True
        return out
    for located in devices:
        slice_, device = located
        failed, error = _selects(device_class.selectors, f"class {device_class.name}", device, slice_.driver)
        if error:
            _note_error(out, error)
            continue
        if failed is not None:
            continue
        out.of_class += 1
        failed, error = _selects(sub.selectors, f"claim {claim.key}", device, slice_.driver)
        if error:
            _note_error(out, error)
            continue
        if failed is not None:
            expression = sub.selectors[failed]
            out.failing[expression] = out.failing.get(expression, 0) + 1
            continue
        taint = untolerated(device, sub.tolerations)
        if taint is not None:
            out.tainted[taint_text(taint)] = out.tainted.get(taint_text(taint), 0) + 1
            continue
        out.matching += 1
        out.matched.append(located)
        device_id = DeviceID(slice_.driver, slice_.pool.name, device.name)
        holders = () if out.admin_access else in_use(device_id)
        if holders and not device.allow_multiple_allocations:
            for h in holders:
                out.taken[h] = out.taken.get(h, 0) + 1
            continue
        if device.capacity and not out.admin_access:  # CmpRequestOverCapacity, as the allocator does
            used = (capacity_used or {}).get(device_id)
            if not request_fits_capacity(sub.capacity_requests, device.capacity, used, None):
                out.no_capacity += 1
                continue
        exhausted = counters.exhausted(slice_, device) if device.consumes_counters else None
        if exhausted is not None:
            out.no_counters[exhausted] = out.no_counters.get(exhausted, 0) + 1
            continue
        out.free.append(located)
    return out


def funnel_line(f: RequestFunnel, node: str, name_claim: bool) -> str:
    """``8 devices of gpu.example.com; 5 fail `...`; 3 match, 2 allocated to default/train-0 (claim train-0-gpu);
    request gpu needs 2``."""
    request = f"request {f.request}" + (f" of claim {f.claim}" if name_claim else "")
    if f.class_missing:
        return f"{request}: device class {f.device_class} does not exist"
    if not f.of_class and not f.errors:
        if not f.node_devices:
            return f"{NO_DEVICES}; {request} needs {_needs(f)} of {f.device_class}"
        return (
            f"no devices of {f.device_class} (none of the {plural(f.node_devices, 'device')} on {node} passes the "
            f"class's selectors); {request} needs {_needs(f)}"
        )
    parts = [plural(f.of_class, "device") + f" of {f.device_class}"]
    parts += [f"{n} {'fails' if n == 1 else 'fail'} `{expression}`" for expression, n in f.failing.items()]
    parts += [
        f"{plural(f.error_devices, 'device')} {'stops' if f.error_devices == 1 else 'stop'} at {e}" for e in f.errors
    ]
    parts += [f"{n} {'has' if n == 1 else 'have'} the untolerated taint {t}" for t, n in f.tainted.items()]
    matched = f"{f.matching} match"
    if f.taken:
        holders = [f"{n} allocated to {h}" if k == 0 else f"{n} to {h}" for k, (h, n) in enumerate(f.taken.items())]
        matched += ", " + ", ".join(holders)
    parts.append(matched)
    parts += [f"{n} cannot draw from counter set {c}" for c, n in f.no_counters.items()]
    if f.no_capacity:
        parts.append(f"{f.no_capacity} {'has' if f.no_capacity == 1 else 'have'} too little capacity left")
    parts.append(f"{request} needs {_needs(f)}")
    return "; ".join(parts)


def _needs(f: RequestFunnel) -> str:
    if f.needed is None:
        return "all matching devices free (allocationMode All)"
    return str(f.needed)


def funnel_remedy(f: RequestFunnel) -> tuple[int, str] | None:
    """(devices to add or free, the change) that would let this request fit on its own."""
    if f.class_missing:
        return 1, f"a DeviceClass named {f.device_class}"
    if f.errors:
        return f.error_devices, "selectors that do not fail at runtime (guard attributes with has())"
    if f.fits:
        return None
    if f.needed is None:
        if not f.matching:
            return 1, "1 matching device"
        busy = f.matching - len(f.free)
        return busy, f"{plural(busy, 'more matching device')} free"
    if f.matching >= f.needed:
        return f.short, f"{plural(f.short, 'more matching device')} free"
    missing = f.needed - f.matching
    blocked = f.matching - len(f.free)
    text = f"{plural(missing, 'more device')} of {f.device_class} matching request {f.request}"
    return missing + blocked, text + (f" and {plural(blocked, 'matching device')} freed" if blocked else "")


# ---------------------------------------------------------------------------------------------- constraints


def _constrained(constraint: DeviceConstraint, funnels: Sequence[RequestFunnel]) -> list[RequestFunnel]:
    names = set(constraint.requests)
    return [f for f in funnels if not names or f.request in names or f.request.partition("/")[0] in names]


def _need(f: RequestFunnel) -> int:
    return f.needed if f.needed is not None else f.matching


def _with_value(devices: Sequence[Located], attribute: str, value: str) -> int:
    return sum(1 for _, d in devices if attribute in d.attributes and attribute_text(d.attributes[attribute]) == value)


def match_attribute_findings(attribute: str, funnels: Sequence[RequestFunnel]) -> tuple[str | None, list[str]]:
    """(detail, remedies) when no value of ``attribute`` has enough free devices for every request it ties.

    The remedies are the cheapest change overall (devices freed or added with one value) and, when that needs new
    devices, the cheapest that only frees devices already there (a pod to evict rather than hardware to add)."""
    values = sorted(
        {attribute_text(d.attributes[attribute]) for f in funnels for _, d in f.matched if attribute in d.attributes}
    )
    rows = {v: [(f, _with_value(f.free, attribute, v), _with_value(f.matched, attribute, v)) for f in funnels]
            for v in values}  # fmt: skip
    if any(all(free >= _need(f) for f, free, _ in row) for row in rows.values()):
        return None, []
    name = attribute.rpartition("/")[2]
    requests = ", ".join(f.request for f in funnels)
    if not values:
        return f"constraint matchAttribute {attribute} (requests {requests}): no matching device has the attribute", []
    places = "; ".join(
        f"{name} {v} has " + " and ".join(f"{free} of {_need(f)} {f.request} free" for f, free, _ in row)
        for v, row in rows.items()
    )
    options = []
    for v, row in rows.items():
        freed, added, n_freed, n_added = [], [], 0, 0
        for f, free, matched in row:
            short = max(0, _need(f) - free)
            free_up = min(short, matched - free)
            if free_up:
                freed.append(plural(free_up, f"{f.request} device"))
                n_freed += free_up
            if short - free_up:
                added.append(plural(short - free_up, f"more {f.request} device"))
                n_added += short - free_up
        parts = ([f"{' and '.join(freed)} with {name} {v} freed"] if freed else []) + (
            [f"{' and '.join(added)} with {name} {v}"] if added else []
        )
        options.append((n_freed + n_added, n_added, " and ".join(parts)))
    best = min(options, key=lambda o: (o[0], o[1]))
    freeing = min((o for o in options if not o[1]), key=lambda o: o[0], default=None)
    remedies = [best[2]] + ([freeing[2]] if freeing is not None and freeing is not best else [])
    return f"constraint matchAttribute {attribute} (requests {requests}): {places}", remedies


def distinct_attribute_findings(attribute: str, funnels: Sequence[RequestFunnel]) -> tuple[str | None, list[str]]:
    values = {attribute_text(d.attributes[attribute]) for f in funnels for _, d in f.free if attribute in d.attributes}
    needed = sum(_need(f) for f in funnels)
    if len(values) >= needed:
        return None, []
    requests = ", ".join(f.request for f in funnels)
    name = attribute.rpartition("/")[2]
    shown = ", ".join(sorted(values)) or "none"
    detail = (
        f"constraint distinctAttribute {attribute} (requests {requests}): the free devices have "
        f"{plural(len(values), 'distinct value')} ({shown}), {needed} needed"
    )
    return detail, [f"{plural(needed - len(values), 'more free device')} with another {name}"]


# ---------------------------------------------------------------------------------------------- one node


@dataclass(frozen=True)
class PodClaim:
    """One of the pod's claims as the explanation needs it: the pod's name for it and the claim (None: missing)."""

    pod_claim_name: str
    claim_key: str
    claim: ResourceClaim | None


def _choice(
    claim: ResourceClaim,
    request: DeviceRequest,
    classes: Mapping[str, DeviceClass],
    devices: Sequence[Located],
    in_use: Callable[[DeviceID], Sequence[Holder]],
    counters: CounterBook,
    capacity_used: Mapping[DeviceID, Mapping[str, Fraction]] | None = None,
) -> list[RequestFunnel]:
    """The request's funnel, or for firstAvailable the funnel of every subrequest (the first that fits wins)."""
    if request.exactly is not None:
        return [funnel(claim, request.name, request.exactly, classes, devices, in_use, counters, capacity_used)]
    return [
        funnel(claim, f"{request.name}/{sub.name}", sub, classes, devices, in_use, counters, capacity_used)
        for sub in request.first_available
    ]


def _requests(
    claim: ResourceClaim,
    classes: Mapping[str, DeviceClass],
    devices: Sequence[Located],
    in_use: Callable[[DeviceID], Sequence[Holder]],
    counters: CounterBook,
    capacity_used: Mapping[DeviceID, Mapping[str, Fraction]] | None = None,
) -> list[tuple[DeviceRequest, list[RequestFunnel], RequestFunnel]]:
    """Per request: its funnels (one, or one per firstAvailable subrequest) and the one that counts (the first that
    fits, else the first)."""
    out = []
    for request in claim.spec.requests:
        options = _choice(claim, request, classes, devices, in_use, counters, capacity_used)
        out.append((request, options, next((f for f in options if f.fits), options[0])))
    return out


def analyse_node(
    node: str,
    claims: Sequence[PodClaim],
    classes: Mapping[str, DeviceClass],
    devices: Sequence[Located],
    in_use: Callable[[DeviceID], Sequence[Holder]],
    counters: CounterBook,
    allocated_elsewhere: Callable[[ResourceClaim], str | None] = lambda claim: None,
    capacity_used: Mapping[DeviceID, Mapping[str, Fraction]] | None = None,
) -> NodeClaims:
    """Every claim of the pod still to allocate, on one node: funnels, constraint findings and remedies.

    Each problem contributes its alternatives; with one problem each alternative is a remedy of its own, with more
    the first alternatives of all of them together are one remedy (every problem must be fixed)."""
    out = NodeClaims(node)
    problems: list[list[str]] = []
    all_fit = True
    name_claims = len(claims) > 1
    if not devices and any(pc.claim is not None and pc.claim.allocation is None for pc in claims):
        out.details.append(NO_DEVICES)  # one line, not one per request: the usual case of most nodes
        return out
    for pc in claims:
        claim = pc.claim
        if claim is None:
            out.details.append(f"claim {pc.claim_key} (the pod's {pc.pod_claim_name}) does not exist")
            all_fit = False
            continue
        if claim.allocation is not None:
            where = allocated_elsewhere(claim)
            if where is not None:
                out.details.append(f"claim {claim.key} is already allocated, with devices reachable from {where} only")
                all_fit = False
            continue
        requests = _requests(claim, classes, devices, in_use, counters, capacity_used)
        out.funnels.extend(f for _, options, _ in requests for f in options)
        chosen = [f for _, _, f in requests]
        explained: set[int] = set()  # requests a constraint finding covers
        for constraint in claim.spec.constraints:
            tied = _constrained(constraint, chosen)
            # Where a request lacks matching devices at all, more devices are the answer, whatever the constraint.
            if not tied or not all(f.fits or (not f.class_missing and not f.errors and f.matching >= _need(f))
                                   for f in tied):  # fmt: skip
                continue
            if constraint.match_attribute:
                detail, remedies = match_attribute_findings(constraint.match_attribute, tied)
            elif constraint.distinct_attribute and all(f.fits for f in tied):
                detail, remedies = distinct_attribute_findings(constraint.distinct_attribute, tied)
            else:
                continue
            if detail:
                all_fit = False
                out.details.extend(funnel_line(f, node, name_claims) for f in tied if id(f) not in explained)
                out.details.append(detail)
                explained.update(id(f) for f in tied)
                if remedies:
                    problems.append(remedies)
        for request, options, counted in requests:
            if counted.fits or id(counted) in explained:
                continue
            all_fit = False
            out.details.extend(funnel_line(f, node, name_claims) for f in options)
            # The cheapest option; on a tie the earlier one, which the allocator tries first.
            best = min((r for r in map(funnel_remedy, options) if r), key=lambda r: r[0], default=None)
            if best:
                problems.append([best[1] if len(options) == 1 else f"for request {request.name}: {best[1]}"])
    if all_fit and out.funnels:
        out.details.append(
            "every request fits on its own and every constraint can be met, but not all at once: the requests "
            "(or the pod's claims) compete for the same devices or counters"
        )
    if len(problems) == 1:
        out.remedies.extend(problems[0])
    elif problems:
        out.remedies.append(" and ".join(dict.fromkeys(p[0] for p in problems)))
    return out


# ---------------------------------------------------------------------------------------------- cluster-wide


def summary(
    claims: Sequence[PodClaim],
    classes: Mapping[str, DeviceClass],
    per_node: Sequence[NodeClaims],
    template_of: Mapping[str, str] | None = None,
) -> list[str]:
    """Lines about the pod's claims across the cluster, before the node-by-node table: missing claims and classes
    (with the closest class names), then per request how many devices of its class exist, match and are free."""
    notes = []
    for pc in claims:
        if pc.claim is None:
            template = (template_of or {}).get(pc.pod_claim_name)
            if template:
                notes.append(
                    f"claim {pc.claim_key} (the pod's {pc.pod_claim_name}) cannot be made: "
                    f"ResourceClaimTemplate {template} does not exist"
                )
            else:
                notes.append(
                    f"claim {pc.claim_key} (the pod's {pc.pod_claim_name}) does not exist: the pod waits until "
                    "it is created"
                )
            continue
        if pc.claim.allocation is not None:
            continue
        for request in pc.claim.spec.requests:
            subs = [request.exactly] if request.exactly else list(request.first_available)
            for sub in subs:
                name = request.name if request.exactly else f"{request.name}/{sub.name}"
                if sub.device_class_name not in classes:
                    closest = difflib.get_close_matches(sub.device_class_name, sorted(classes), n=3, cutoff=0.8)
                    hint = (
                        f"; did you mean {', '.join(closest)}?"
                        if closest
                        else (f"; classes: {', '.join(sorted(classes))}" if classes else "; no DeviceClass exists")
                    )
                    notes.append(
                        f"claim {pc.claim.key}, request {name}: device class {sub.device_class_name} does not "
                        f"exist{hint}"
                    )
                    continue
                mine = [f for n in per_node for f in n.funnels if f.claim == pc.claim.key and f.request == name]
                of_class = sum(f.of_class for f in mine)
                matching = sum(f.matching for f in mine)
                free = sum(len(f.free) for f in mine)
                nodes = sum(1 for f in mine if f.of_class)
                enough = sum(1 for f in mine if f.fits)
                errors = sorted({e for f in mine for e in f.errors})
                needs = "all" if sub.allocation_mode == ALLOCATION_MODE_ALL else str(sub.count)
                line = (
                    f"claim {pc.claim.key}, request {name} ({needs} of {sub.device_class_name}): "
                    f"{plural(of_class, 'device')} of the class on {plural(nodes, 'node')}, {matching} match the "
                    f"request, {free} of them free; enough free for it alone on {plural(enough, 'node')}"
                )
                notes.append(line)
                notes.extend(f"claim {pc.claim.key}, request {name}: {e}" for e in errors)
    return notes


# ---------------------------------------------------------------------------------------------- from the cluster


def claim_holders(dra: Any) -> Iterator[tuple[str, list[Any], list[str]]]:
    """Each claim holding devices, allocated or in flight in this run: its key, the results that use a device
    (adminAccess results do not, allocateddevices.go), and its pods: those it is reserved for, then those it is
    being allocated for."""
    for key, claim in dra.claims.items():
        pending = dra.pending.get(key)
        allocation = claim.allocation or (pending.allocation if pending is not None else None)
        if allocation is None:
            continue
        pods = [f"{claim.namespace}/{r.name}" for r in claim.reserved_for if r.resource == "pods"]
        if pending is not None:
            pods += sorted(p for p in pending.pods if p not in pods)
        yield key, [r for r in allocation.results if not r.admin_access], pods


class ClusterView:
    """What the explanation reads from the cluster's DRA state (dra/state.py), gathered once per explanation:
    the pod's claims, who holds each device (allocated or in flight), and the counters left."""

    def __init__(self, pod: Any, cluster: Any) -> None:
        dra = cluster.dra
        self.dra = dra
        self.cluster = cluster
        self.claims = [
            PodClaim(name, key or f"{pod.namespace}/?", dra.claims.get(key) if key else None)
            for name, key, _ in dra.pod_claims(pod)
        ]
        self.templates = {
            pc.name: f"{pod.namespace}/{pc.resource_claim_template_name}"
            for pc in _pod_resource_claims(pod)
            if pc.resource_claim_template_name
            and f"{pod.namespace}/{pc.resource_claim_template_name}" not in dra.inputs.templates
        }
        self.holders: dict[DeviceID, list[Holder]] = {}
        for key, results, pods in claim_holders(dra):
            holder = Holder(key, tuple(pods))
            for r in results:
                self.holders.setdefault(r.device_id, []).append(holder)
        self.counters = CounterBook(dra.slices.values(), self.in_use)
        self.capacity_used = dra.allocated.capacity  # consumed capacity of shared devices

    def in_use(self, device: DeviceID) -> list[Holder]:
        return self.holders.get(device, [])

    def devices(self, node: int) -> list[Located]:
        """The devices the node sees (the allocator's pools for it), as (slice, device)."""
        listed = self.dra.devices_for_node(self.cluster.nodes[node].name)
        return [item if isinstance(item, tuple) else (item.slice, item.device) for item in listed]

    def allocated_elsewhere(self, node: int) -> Callable[[ResourceClaim], str | None]:
        name = self.cluster.nodes[node].name

        def where(claim: ResourceClaim) -> str | None:
            allocation = claim.allocation
            if allocation is None or allocation.node_selector is None:
                return None
            target = allocation.node_name
            if target is not None:
                return None if target == name else target
            return None  # a selector not naming one node: the plugin's own check decides

        return where

    def node(self, node: int) -> NodeClaims:
        return analyse_node(
            self.cluster.nodes[node].name,
            self.claims,
            self.dra.classes,
            self.devices(node),
            self.in_use,
            self.counters,
            self.allocated_elsewhere(node),
            self.capacity_used,
        )

    def summary(self) -> list[str]:
        if not any(pc.claim is not None and pc.claim.allocation is None for pc in self.claims):
            return summary(self.claims, self.dra.classes, [], self.templates)
        per_node = [self.node(i) for i in range(self.cluster.n)]
        return summary(self.claims, self.dra.classes, per_node, self.templates)


def _pod_resource_claims(pod: Any) -> Sequence[Any]:
    from accelsched.dra.state import pod_resource_claims

    return pod_resource_claims(pod)


def has_claims(pod: Any, cluster: Any) -> bool:
    """Whether the device-level explanation applies: the run has DRA state and the pod references claims."""
    return getattr(cluster, "dra", None) is not None and bool((pod.raw.get("spec") or {}).get("resourceClaims"))
