"""Property tests of the structured allocator: random slices, random claims allocated one after another.

Whatever the inputs, an allocation never gives a device to two claims (beyond the capacity of an
allowMultipleAllocations device), never overdraws a counter, and satisfies every selector, toleration and
constraint of its claim; an ``All`` request gets every matching device. The checks below recompute all of this
from the model objects, independently of the allocator's own bookkeeping.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelsched.dra.allocated import AllocatedState
from accelsched.dra.allocator import AllocationError, Allocator
from accelsched.dra.cel import compile_selector
from accelsched.dra.model import (
    ALLOCATION_MODE_ALL,
    CapacityRequestPolicy,
    CapacityRequestPolicyRange,
    ClaimSpec,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceCounterConsumption,
    DeviceRequest,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ResourceClaim,
    ResourcePool,
    ResourceSlice,
)

DRIVER = "gpu.example.com"
NODE = "node-1"
CAP = f"{DRIVER}/memory"
SELECTORS = (
    f'device.attributes["{DRIVER}"].numa == 0',
    f'device.attributes["{DRIVER}"].numa != 2',
    f'device.attributes["{DRIVER}"].model == "a"',
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("4")) >= 0',
)
CLASSES = {
    "gpu": DeviceClass("gpu", selectors=(f'device.driver == "{DRIVER}"',)),
    "model-a": DeviceClass("model-a", selectors=(f'device.driver == "{DRIVER}"', SELECTORS[2])),
}
TAINT = DeviceTaint("maintenance", "yes", "NoSchedule")
TOLERATION = DeviceToleration("maintenance", "Exists")


@st.composite
def devices(draw, name: str, counter_sets: tuple[str, ...]):
    multi = draw(st.booleans()) if draw(st.integers(0, 3)) == 0 else False
    memory = draw(st.sampled_from([2, 4, 8]))
    policy = None
    if multi and draw(st.booleans()):
        policy = CapacityRequestPolicy(
            default=Fraction(1), valid_range=CapacityRequestPolicyRange(Fraction(1), Fraction(memory), Fraction(1))
        )
    consumes = ()
    if counter_sets and draw(st.booleans()):
        consumes = (
            DeviceCounterConsumption(draw(st.sampled_from(counter_sets)), {"c": Fraction(draw(st.integers(1, 3)))}),
        )
    return Device(
        name,
        attributes={f"{DRIVER}/numa": draw(st.integers(0, 2)), f"{DRIVER}/model": draw(st.sampled_from("ab"))},
        capacity={CAP: DeviceCapacity(Fraction(memory), policy)},
        consumes_counters=consumes,
        taints=(TAINT,) if draw(st.integers(0, 4)) == 0 else (),
        allow_multiple_allocations=multi,
    )


@st.composite
def slices(draw):
    out = []
    for p in range(draw(st.integers(1, 3))):
        pool = f"pool-{p}"
        counter_sets = tuple(f"cs-{i}" for i in range(draw(st.integers(0, 2))))
        n = draw(st.integers(1, 5))
        devs = tuple(draw(devices(f"dev-{i}", counter_sets)) for i in range(n))
        where = draw(st.sampled_from(["node", "all"]))
        count = 2 if counter_sets else 1
        s = ResourceSlice(f"{pool}-devices", DRIVER, ResourcePool(pool, 1, count), devices=devs)
        if where == "node":
            s.node_name = NODE
        else:
            s.all_nodes = True
        out.append(s)
        if counter_sets:
            out.append(
                ResourceSlice(
                    f"{pool}-counters",
                    DRIVER,
                    ResourcePool(pool, 1, count),
                    node_name=NODE,
                    shared_counters=tuple(
                        CounterSet(c, {"c": Fraction(draw(st.integers(1, 4)))}) for c in counter_sets
                    ),
                )
            )
    return out


@st.composite
def requests(draw, name: str, multi_ok: bool):
    mode_all = draw(st.integers(0, 5)) == 0
    capacity = {}
    if multi_ok and draw(st.booleans()):
        capacity = {CAP: Fraction(draw(st.integers(1, 4)))}
    return DeviceSubRequest(
        name,
        draw(st.sampled_from(sorted(CLASSES))),
        selectors=tuple(draw(st.lists(st.sampled_from(SELECTORS), max_size=2, unique=True))),
        allocation_mode=ALLOCATION_MODE_ALL if mode_all else "ExactCount",
        count=0 if mode_all else draw(st.integers(1, 3)),
        tolerations=(TOLERATION,) if draw(st.booleans()) else (),
        capacity_requests=capacity,
    )


@st.composite
def claims(draw, index: int):
    subs = [draw(requests(f"r{i}", True)) for i in range(draw(st.integers(1, 2)))]
    reqs = []
    for sub in subs:
        if draw(st.integers(0, 3)) == 0:  # firstAvailable: the drawn request, then a fallback
            fallback = DeviceSubRequest("fallback", "gpu", count=1)
            reqs.append(
                DeviceRequest(
                    sub.name,
                    first_available=(
                        DeviceSubRequest(
                            "first",
                            sub.device_class_name,
                            sub.selectors,
                            sub.allocation_mode,
                            sub.count,
                            None,
                            sub.tolerations,
                            sub.capacity_requests,
                        ),
                        fallback,
                    ),
                )
            )
        else:
            reqs.append(DeviceRequest(sub.name, exactly=sub))
    constraints = ()
    kind = draw(st.sampled_from(["none", "match", "distinct"]))
    if kind == "match":
        constraints = (DeviceConstraint(match_attribute=f"{DRIVER}/numa"),)
    elif kind == "distinct":
        constraints = (DeviceConstraint(distinct_attribute=f"{DRIVER}/model"),)
    return ResourceClaim("default", f"claim-{index}", ClaimSpec(tuple(reqs), constraints))


def _chosen(claim: ResourceClaim, request_name: str) -> DeviceSubRequest:
    base, _, sub = request_name.partition("/")
    request = next(r for r in claim.spec.requests if r.name == base)
    if not sub:
        assert request.exactly is not None
        return request.exactly
    return next(s for s in request.first_available if s.name == sub)


def _matches(selectors, device: Device) -> bool:
    return all(compile_selector(e).matches(device, DRIVER) for e in selectors)


def _value_key(v):
    return (type(v).__name__, v)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(slice_list=slices(), data=st.data())
def test_sequential_allocations_are_consistent(slice_list, data):
    claim_list = [data.draw(claims(i)) for i in range(data.draw(st.integers(1, 6)))]
    allocator = Allocator(CLASSES, slice_list)
    state = AllocatedState()
    devices = {(s.pool.name, d.name): (s, d) for s in slice_list for d in s.devices}
    dedicated: Counter = Counter()
    shared_use: dict = defaultdict(Fraction)
    shared_devices: set = set()
    for claim in claim_list:
        before_free = {k for k in devices if k not in dedicated}
        try:
            out = allocator.allocate(NODE, {}, [claim], state)
        except AllocationError as exc:
            # Only the constraint-vs-All error can happen with these inputs (no CEL errors: every attribute exists).
            assert "cannot add device" in str(exc), exc
            continue
        if out is None:
            continue
        (allocation,) = out
        state.add(allocation)
        per_request: dict[str, list] = defaultdict(list)
        for r in allocation.results:
            key = (r.pool, r.device)
            slice_, device = devices[key]
            sub = _chosen(claim, r.request)
            # Selectors of the class and of the request, and the device's taints tolerated.
            assert _matches(CLASSES[sub.device_class_name].selectors + sub.selectors, device)
            if device.taints:
                assert sub.tolerations, (r, device.taints)
            if r.share_id is None:
                assert not device.allow_multiple_allocations
                dedicated[key] += 1
            else:
                assert device.allow_multiple_allocations
                shared_devices.add(key)
                for name, amount in r.consumed_capacity.items():
                    shared_use[(key, name)] += amount
            per_request[r.request.partition("/")[0]].append((r.request, key, device))
        # Never twice, never beyond capacity.
        assert all(n == 1 for n in dedicated.values()), dedicated
        for (key, name), used in shared_use.items():
            assert used <= devices[key][1].capacity[name].value
        # Counters: each device in use (dedicated or shared) consumes its counters once.
        used_counters: Counter = Counter()
        for key in set(dedicated) | shared_devices:
            slice_, device = devices[key]
            for c in device.consumes_counters:
                for name, amount in c.counters.items():
                    used_counters[(slice_.pool.name, c.counter_set, name)] += amount
        limits = {
            (s.pool.name, cs.name, n): v for s in slice_list for cs in s.shared_counters for n, v in cs.counters.items()
        }
        for k, used in used_counters.items():
            assert used <= limits[k], (k, used, limits[k])
        # Counts and All mode: every device the selectors match whose capacity covers the capacity requests
        # (upstream's CmpRequestOverCapacity leaves the others out of "all"), all of them free before. Only devices
        # without allowMultipleAllocations: whether a shared one is in also depends on what its shares consume.
        for got in per_request.values():
            sub = _chosen(claim, got[0][0])
            if sub.allocation_mode == ALLOCATION_MODE_ALL:
                wanted = {
                    k
                    for k, (_, d) in devices.items()
                    if not d.allow_multiple_allocations
                    and _matches(CLASSES[sub.device_class_name].selectors + sub.selectors, d)
                    and all(v <= d.capacity[n].value for n, v in sub.capacity_requests.items())
                }
                assert wanted <= {k for _, k, _ in got}
                assert wanted <= before_free
            else:
                assert len(got) == sub.count
        # Constraints.
        for c in claim.spec.constraints:
            if c.match_attribute:
                values = [_value_key(d.attributes[c.match_attribute]) for g in per_request.values() for _, _, d in g]
                assert len(set(values)) <= 1, values
            else:
                _assert_distinct(claim, per_request, c.distinct_attribute)


def _assert_distinct(claim: ResourceClaim, per_request: dict[str, list], attribute: str) -> None:
    """What upstream's distinctAttributeConstraint guarantees (constraint.go), which is less than "all distinct": it
    remembers one value per request, the one its latest device added, and forgets it when backtracking removes any
    of that request's devices. So the only promise on the result is that each device of a request differs from the
    last device of every request before it (requests are allocated in order, and a request before is final when
    the next one's devices go in); two devices of one request, or the first devices of two requests, may share a
    value (test_dra_allocator.py: test_distinct_attribute_remembers_one_value_per_request and, found here and
    settled with upstream's allocator, test_distinct_attribute_first_devices_of_two_requests_may_match)."""
    order = [r.name for r in claim.spec.requests if r.name in per_request]
    for j, later in enumerate(order):
        for earlier in order[:j]:
            last = _value_key(per_request[earlier][-1][2].attributes[attribute])
            clash = [k for _, k, d in per_request[later] if _value_key(d.attributes[attribute]) == last]
            assert not clash, (earlier, last, later, clash)
