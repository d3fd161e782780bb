"""The structured allocator against upstream's own test cases.

Most cases are ports of dynamic-resource-allocation@v0.36.3/structured/internal/allocatortesting/
allocator_testing.go (TestAllocator): same slices, classes and claims, same expected allocations, named after the
upstream case in each test's comment. The helpers below mirror that file's (node, class, device, slice...): names
``node-1``, ``driver-a``, ``pool-1``, ``device-1``..., nodes labelled region and planet=earth.
"""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from accelsched.api.selectors import NodeSelectorTerm, Requirement
from accelsched.dra.allocated import AllocatedState
from accelsched.dra.allocator import (
    REASON_ALLOCATED,
    REASON_COUNTERS,
    REASON_TAINTED,
    AllocationError,
    Allocator,
    Features,
)
from accelsched.dra.model import (
    ALLOCATION_MODE_ALL,
    AllocationResult,
    CapacityRequestPolicy,
    CapacityRequestPolicyRange,
    ClaimSpec,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceCounterConsumption,
    DeviceID,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    OpaqueConfig,
    ResourceClaim,
    ResourcePool,
    ResourceSlice,
    Version,
)

NODE1, NODE2 = "node-1", "node-2"
DRIVER_A, DRIVER_B = "driver-a", "driver-b"
CLASS_A, CLASS_B = "class-a", "class-b"
GI = 2**30


def labels(region: str = "region-1") -> dict[str, str]:
    return {"region": region, "planet": "earth"}


def cls(name: str = CLASS_A, driver: str = DRIVER_A, *extra: str, config: tuple = ()) -> DeviceClass:
    return DeviceClass(name, selectors=(f'device.driver == "{driver}"', *extra), config=config)


def dev(name: str, driver: str = DRIVER_A, memory: int | None = None, **kw) -> Device:
    attributes = {f"{driver}/{k}": v for k, v in kw.pop("attrs", {}).items()}
    capacity = kw.pop("capacity", {})
    if memory is not None:
        capacity = {**capacity, f"{driver}/memory": DeviceCapacity(Fraction(memory))}
    return Device(name, attributes=attributes, capacity=capacity, **kw)


def consumes(counter_set: str, **counters: int) -> tuple[DeviceCounterConsumption, ...]:
    return (DeviceCounterConsumption(counter_set, {k: Fraction(v) for k, v in counters.items()}),)


def slc(
    name: str,
    where: object,
    pool: str,
    driver: str,
    *devices: Device,
    count: int = 1,
    generation: int = 1,
    counters: tuple[CounterSet, ...] = (),
) -> ResourceSlice:
    """slice(): ``where`` is a node name, "all", "per-device" or node selector terms."""
    s = ResourceSlice(name, driver, ResourcePool(pool, generation, count), devices=devices, shared_counters=counters)
    if where == "all":
        s.all_nodes = True
    elif where == "per-device":
        s.per_device_node_selection = True
    elif isinstance(where, tuple):
        s.node_selector = where
    else:
        s.node_name = where  # type: ignore[assignment]
    return s


def label_selector(key: str, *values: str) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm((Requirement(key, "In", values),), ()),)


def local_selector(node: str) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm((), (Requirement("metadata.name", "In", (node,)),)),)


def req(name: str, class_name: str = CLASS_A, count: int = 1, *selectors: str, **kw) -> DeviceRequest:
    return DeviceRequest(name, exactly=DeviceSubRequest(name, class_name, tuple(selectors), count=count, **kw))


def all_req(name: str, class_name: str = CLASS_A, *selectors: str, **kw) -> DeviceRequest:
    return req(name, class_name, 0, *selectors, allocation_mode=ALLOCATION_MODE_ALL, **kw)


def first_available(name: str, *subs: DeviceSubRequest) -> DeviceRequest:
    return DeviceRequest(name, first_available=subs)


def sub(name: str, class_name: str = CLASS_A, count: int = 1, *selectors: str, **kw) -> DeviceSubRequest:
    return DeviceSubRequest(name, class_name, tuple(selectors), count=count, **kw)


def claim(name: str, *requests: DeviceRequest, constraints: tuple = (), config: tuple = ()) -> ResourceClaim:
    return ResourceClaim("", name, ClaimSpec(tuple(requests), tuple(constraints), tuple(config)))


def result(request: str, driver: str, pool: str, device: str, admin: bool = False, **kw) -> tuple:
    return (request, driver, pool, device, True if admin else None, kw.get("tolerations", ()))


DEFAULT_FEATURES = Features()


def allocate(classes, slices, claims, node=NODE1, node_labels=None, allocated=None, features=DEFAULT_FEATURES):
    a = Allocator({c.name: c for c in classes}, slices, features)
    return a.allocate(
        node,
        node_labels if node_labels is not None else labels(),
        claims,
        allocated if allocated is not None else AllocatedState(),
    )


def summary(results: list[AllocationResult] | None) -> list | None:
    if results is None:
        return None
    return [
        [(r.request, r.driver, r.pool, r.device, r.admin_access, r.tolerations) for r in a.results] for a in results
    ]


def state_with(*ids: tuple[str, str, str]) -> AllocatedState:
    state = AllocatedState()
    state.add(AllocationResult(tuple(DeviceRequestAllocationResult("r", *i) for i in ids)))
    return state


MEM_GE = 'device.capacity["driver-a"].memory.compareTo(quantity("{}")) >= 0'


# ---------------------------------------------------------------------------------------------- basics


def test_simple_and_node_selector():
    # "simple"
    out = allocate(
        [cls()], [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"))], [claim("claim-0", req("req-0"))]
    )
    assert summary(out) == [[result("req-0", DRIVER_A, "pool-1", "device-1")]]
    assert out[0].node_selector == local_selector(NODE1) and out[0].node_name == NODE1


def test_other_node():
    # "other-node"
    slices = [
        slc("slice-1", NODE1, "pool-1", DRIVER_B, dev("device-1", DRIVER_B)),
        slc("slice-2", NODE2, "pool-2", DRIVER_A, dev("device-1")),
    ]
    out = allocate([cls()], slices, [claim("claim-0", req("req-0"))], node=NODE2, node_labels=labels("region-2"))
    assert summary(out) == [[result("req-0", DRIVER_A, "pool-2", "device-1")]]
    assert out[0].node_selector == local_selector(NODE2)


def test_small_and_large_backtrack_requests_and_claims():
    # "small-and-large-backtrack-requests" and "small-and-large-backtrack-claims": the large device is listed first
    # and must be given back to the small request.
    slices = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-2", memory=2 * GI), dev("device-1", memory=GI))]
    small, large = req("req-0", CLASS_A, 1, MEM_GE.format("1Gi")), req("req-1", CLASS_A, 1, MEM_GE.format("2Gi"))
    out = allocate([cls()], slices, [claim("claim-0", small, large)])
    assert summary(out) == [
        [result("req-0", DRIVER_A, "pool-1", "device-1"), result("req-1", DRIVER_A, "pool-1", "device-2")]
    ]
    out = allocate([cls()], slices, [claim("claim-0", small), claim("claim-1", large)])
    assert summary(out) == [
        [result("req-0", DRIVER_A, "pool-1", "device-1")],
        [result("req-1", DRIVER_A, "pool-1", "device-2")],
    ]


def test_devices_split_across_slices_and_pool_order():
    # "devices-split-across-different-slices"
    slices = [
        slc("slice-2", NODE1, "pool-2", DRIVER_A, dev("device-1")),
        slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1")),
    ]
    out = allocate([cls()], slices, [claim("claim-0", req("req-0", CLASS_A, 2))])
    assert summary(out) == [
        [result("req-0", DRIVER_A, "pool-1", "device-1"), result("req-0", DRIVER_A, "pool-2", "device-1")]
    ]


def test_obsolete_and_incomplete_pools():
    # "obsolete-slice": the newer generation has one of two slices: nothing is allocated from the pool.
    slices = [
        slc("slice-1-obsolete", NODE1, "pool-1", DRIVER_A, dev("device-1"), count=2),
        slc("slice-1-obsolete", NODE1, "pool-1", DRIVER_A, dev("device-2"), count=2, generation=2),
    ]
    assert allocate([cls()], slices, [claim("claim-0", req("req-0"))]) is None
    # "no-allocation-from-incomplete-pools"
    slices = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), count=2)]
    assert allocate([cls()], slices, [claim("claim-0", req("req-0"))]) is None
    # "all-devices-of-the-incomplete-pool"
    with pytest.raises(
        AllocationError,
        match="claim claim-0, request req-0: asks for all devices, but resource pool "
        "driver-a/pool-1 is currently being updated",
    ):
        allocate([cls()], slices, [claim("claim-0", all_req("req-0"))])


def test_multi_host_pool_with_stale_slice_for_current_node():
    # "multi-host-resource-pool-with-stale-slice-for-current-node": node-2's slice has a newer generation.
    slices = [
        slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), count=2),
        slc("slice-2", NODE2, "pool-1", DRIVER_A, dev("device-2"), count=2, generation=2),
    ]
    assert allocate([cls()], slices, [claim("claim-0", req("req-0"))]) is None


def test_pool_spanning_nodes_is_complete():
    # "different-resourceslices-in-pool-can-target-different-nodes" (in spirit): a pool of two slices, one per node,
    # is complete from node-1's view.
    slices = [
        slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), count=2),
        slc("slice-2", NODE2, "pool-1", DRIVER_A, dev("device-2"), count=2),
    ]
    out = allocate([cls()], slices, [claim("claim-0", req("req-0"))])
    assert summary(out) == [[result("req-0", DRIVER_A, "pool-1", "device-1")]]


def test_duplicate_device_names_make_the_pool_invalid():
    # "duplicate-slice"
    slices = [
        slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), count=2),
        slc("slice-1-2", NODE1, "pool-1", DRIVER_A, dev("device-1"), count=2),
    ]
    with pytest.raises(AllocationError, match="invalid resource pools were encountered") as err:
        allocate([cls()], slices, [claim("claim-0", req("req-0"))])
    assert err.value.on_node
    # "invalid-pool-is-ok-if-devices-can-be-allocated-from-other"
    slices.append(slc("slice-3", NODE1, "pool-2", DRIVER_A, dev("device-2")))
    out = allocate([cls()], slices, [claim("claim-0", req("req-0"))])
    assert summary(out) == [[result("req-0", DRIVER_A, "pool-2", "device-2")]]
    # "invalid-pool-is-error-if-no-other-device-can-be-allocated"
    with pytest.raises(AllocationError, match="invalid resource pools were encountered"):
        allocate(
            [cls()], slices, [claim("claim-0", req("req-0"))], allocated=state_with((DRIVER_A, "pool-2", "device-2"))
        )


def test_missing_class_and_not_enough_devices():
    # "no-classes" / "unknown-class"
    with pytest.raises(
        AllocationError, match="claim claim-0, request req-0: could not retrieve device class unknown-class"
    ):
        allocate(
            [cls()],
            [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"))],
            [claim("claim-0", req("req-0", "unknown-class"))],
        )
    # "not-enough-suitable-devices"
    assert (
        allocate(
            [cls()],
            [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"))],
            [claim("claim-0", req("req-0")), claim("claim-0", req("req-1"))],
        )
        is None
    )
    # "no-slices", "no-claims-to-allocate"
    assert allocate([cls()], [], [claim("claim-0", req("req-0"))]) is None
    assert allocate([cls()], [], []) == []


def test_namespaced_claim_in_errors():
    with pytest.raises(AllocationError, match="claim ns/claim-0, request req-0: could not retrieve"):
        allocate([], [], [ResourceClaim("ns", "claim-0", ClaimSpec((req("req-0"),)))])


# ---------------------------------------------------------------------------------------------- All mode


def test_all_devices():
    # "all-devices-many-plus-another" and its reversed twin
    slices = [
        slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), dev("device-2")),
        slc("slice-1", NODE1, "pool-1", DRIVER_B, dev("device-1", DRIVER_B)),
    ]
    classes = [cls(), cls(CLASS_B, DRIVER_B)]
    a, b = claim("claim-0", all_req("req-0")), claim("claim-1", req("req-0", CLASS_B))
    assert summary(allocate(classes, slices, [a, b])) == [
        [result("req-0", DRIVER_A, "pool-1", "device-1"), result("req-0", DRIVER_A, "pool-1", "device-2")],
        [result("req-0", DRIVER_B, "pool-1", "device-1")],
    ]
    assert summary(allocate(classes, slices, [b, a])) == [
        [result("req-0", DRIVER_B, "pool-1", "device-1")],
        [result("req-0", DRIVER_A, "pool-1", "device-1"), result("req-0", DRIVER_A, "pool-1", "device-2")],
    ]


def test_all_devices_no_solution():
    # "all-devices-no-solution" / "-reversed", "all-devices-slice-without-devices", "all-devices-some-allocated"
    one = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"))]
    assert allocate([cls()], one, [claim("claim-1", req("req-0")), claim("claim-0", all_req("req-0"))]) is None
    assert allocate([cls()], one, [claim("claim-0", all_req("req-0")), claim("claim-1", req("req-0"))]) is None
    assert allocate([cls()], [slc("slice-1", NODE1, "pool-1", DRIVER_A)], [claim("claim-0", all_req("req-0"))]) is None
    two = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), dev("device-2"))]
    assert (
        allocate(
            [cls()], two, [claim("claim-0", all_req("req-0"))], allocated=state_with((DRIVER_A, "pool-1", "device-1"))
        )
        is None
    )


def test_all_devices_admin_access():
    # "all-devices-some-allocated-admin-access": admin access needs no free device
    two = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), dev("device-2"))]
    out = allocate(
        [cls()],
        two,
        [claim("claim-0", all_req("req-0", admin_access=True))],
        allocated=state_with((DRIVER_A, "pool-1", "device-1")),
    )
    assert summary(out) == [
        [result("req-0", DRIVER_A, "pool-1", "device-1", True), result("req-0", DRIVER_A, "pool-1", "device-2", True)]
    ]
    # "all-devices-some-allocating-admin-access": the same claim cannot take a device twice
    c = claim("claim-0", req("req-0", admin_access=True), all_req("req-1", admin_access=True))
    assert allocate([cls()], two, [c]) is None


def test_admin_access():
    two = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), dev("device-2"))]
    # "count-devices-some-allocated-admin-access"
    out = allocate(
        [cls()],
        two,
        [claim("claim-0", req("req-0", CLASS_A, 2, admin_access=True))],
        allocated=state_with((DRIVER_A, "pool-1", "device-1")),
    )
    assert summary(out) == [
        [result("req-0", DRIVER_A, "pool-1", "device-1", True), result("req-0", DRIVER_A, "pool-1", "device-2", True)]
    ]
    # "separate-claims-share-device-admin-access"
    out = allocate(
        [cls()],
        two,
        [claim("claim-0", req("req-0", admin_access=True)), claim("claim-1", req("req-0", admin_access=True))],
    )
    assert summary(out) == [
        [result("req-0", DRIVER_A, "pool-1", "device-1", True)],
        [result("req-0", DRIVER_A, "pool-1", "device-1", True)],
    ]
    # "admin-access-claims-device-allocating-for-non-admin-access"
    out = allocate([cls()], two, [claim("claim-0", req("req-0")), claim("claim-1", req("req-0", admin_access=True))])
    assert summary(out) == [
        [result("req-0", DRIVER_A, "pool-1", "device-1")],
        [result("req-0", DRIVER_A, "pool-1", "device-1", True)],
    ]
    # "admin-access-disabled"
    with pytest.raises(AllocationError, match="admin access is requested, but the feature is disabled"):
        allocate(
            [cls()], two, [claim("claim-0", req("req-0", admin_access=True))], features=Features(admin_access=False)
        )


def test_admin_access_results_do_not_count_as_in_use():
    state = AllocatedState()
    state.add(
        AllocationResult((DeviceRequestAllocationResult("r", DRIVER_A, "pool-1", "device-1", admin_access=True),))
    )
    assert not state.devices and not state.is_allocated(DeviceID(DRIVER_A, "pool-1", "device-1"))


# ---------------------------------------------------------------------------------------------- network devices


def test_network_attached_devices():
    # "network-attached-device"
    s = [slc("slice-1", label_selector("region", "region-1"), "pool-1", DRIVER_A, dev("device-1"))]
    out = allocate([cls()], s, [claim("claim-0", req("req-0"))])
    assert out[0].node_selector == label_selector("region", "region-1") and out[0].node_name is None
    # "unsuccessful-allocation-network-attached-device"
    assert allocate([cls()], s, [claim("claim-0", req("req-0"))], node=NODE2, node_labels=labels("region-2")) is None
    # allNodes only: available everywhere, no node selector
    out = allocate([cls()], [slc("slice-1", "all", "pool-1", DRIVER_A, dev("device-1"))], [claim("c", req("r"))])
    assert out[0].node_selector is None and out[0].node_name is None


def test_many_network_attached_devices():
    # "many-network-attached-devices": the requirements of every slice's selector, merged into one term
    slices = [
        slc("slice-1", label_selector("region", "region-1"), "pool-1", DRIVER_A, dev("device-1")),
        slc("slice-1", "all", "pool-2", DRIVER_A, dev("device-1")),
        slc("slice-1", label_selector("planet", "earth"), "pool-3", DRIVER_A, dev("device-1")),
        slc("slice-1", local_selector(NODE1), "pool-4", DRIVER_A, dev("device-1")),
    ]
    out = allocate([cls()], slices, [claim("claim-0", req("req-0", CLASS_A, 4))])
    assert [r.pool for r in out[0].results] == ["pool-1", "pool-2", "pool-3", "pool-4"]
    assert out[0].node_selector == (
        NodeSelectorTerm(
            (Requirement("region", "In", ("region-1",)), Requirement("planet", "In", ("earth",))),
            (Requirement("metadata.name", "In", (NODE1,)),),
        ),
    )


def test_local_and_network_attached_devices():
    # "local-and-network-attached-devices": one node-local device pins the claim to the node
    slices = [
        slc("slice-1", label_selector("region", "region-1"), "pool-1", DRIVER_A, dev("device-1")),
        slc("slice-2", NODE1, "pool-2", DRIVER_A, dev("device-2")),
    ]
    out = allocate([cls()], slices, [claim("claim-0", req("req-0", CLASS_A, 2))])
    assert out[0].node_selector == local_selector(NODE1)


def test_binds_to_node():
    # "node-restriction"
    s = [slc("slice-1", label_selector("planet", "earth"), "pool-1", DRIVER_A, dev("device-1", binds_to_node=True))]
    out = allocate([cls()], s, [claim("claim-0", req("req-0"))])
    assert out[0].node_selector == local_selector(NODE1)


def test_already_allocated_devices():
    # "already-allocated-devices"
    s = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"))]
    assert allocate([cls()], s, [claim("c", req("r"))], allocated=state_with((DRIVER_A, "pool-1", "device-1"))) is None


# ---------------------------------------------------------------------------------------------- constraints


def _numa_devices(*values):
    return [
        slc(
            "slice-1",
            NODE1,
            "pool-1",
            DRIVER_A,
            *(dev(f"device-{i + 1}", attrs={"numa": v}) for i, v in enumerate(values)),
        )
    ]


def test_match_attribute():
    numa = DeviceConstraint(match_attribute=f"{DRIVER_A}/numa")
    # "with-constraint"
    out = allocate([cls()], _numa_devices(1, 1), [claim("claim-0", req("req-0"), req("req-1"), constraints=(numa,))])
    assert [r.device for r in out[0].results] == ["device-1", "device-2"]
    # "with-constraint-not-matching-int-attribute"
    assert (
        allocate([cls()], _numa_devices(1, 2), [claim("claim-0", req("req-0", CLASS_A, 2), constraints=(numa,))])
        is None
    )
    # "with-constraint-non-existent-attribute"
    missing = DeviceConstraint(match_attribute=f"{DRIVER_A}/NonExistentAttribute")
    assert (
        allocate([cls()], _numa_devices(1, 1), [claim("claim-0", req("req-0", CLASS_A, 2), constraints=(missing,))])
        is None
    )
    # "with-constraint-not-matching-int-attribute-all-devices": a constraint making All impossible is an error
    with pytest.raises(
        AllocationError,
        match="claim claim-0, request req-0: cannot add device "
        "driver-a/pool-1/device-2 because a claim constraint would not be "
        "satisfied",
    ):
        allocate([cls()], _numa_devices(1, 2), [claim("claim-0", all_req("req-0"), constraints=(numa,))])


def test_match_attribute_types_never_mix():
    # 1 and true are different attribute values (IntValue vs BoolValue).
    c = DeviceConstraint(match_attribute=f"{DRIVER_A}/numa")
    assert allocate([cls()], _numa_devices(1, True), [claim("c", req("r", CLASS_A, 2), constraints=(c,))]) is None
    versions = _numa_devices(Version("1.0.0"), Version("1.0.0"))
    assert allocate([cls()], versions, [claim("c", req("r", CLASS_A, 2), constraints=(c,))]) is not None


def test_constraint_for_request_retry():
    # "with-constraint-for-request-retry"
    slices = [
        slc(
            "slice-1",
            NODE1,
            "pool-1",
            DRIVER_A,
            dev("device-1", attrs={"driverVersion": Version("1.0.0"), "stringAttribute": "a"}),
            dev("device-2", attrs={"driverVersion": Version("2.0.0"), "stringAttribute": "b"}),
            dev("device-3", attrs={"driverVersion": Version("3.0.0"), "stringAttribute": "b"}),
        )
    ]
    constraints = (
        DeviceConstraint(("req-0",), match_attribute=f"{DRIVER_A}/driverVersion"),
        DeviceConstraint(match_attribute=f"{DRIVER_A}/stringAttribute"),
    )
    out = allocate([cls()], slices, [claim("claim-0", req("req-0"), req("req-1"), constraints=constraints)])
    assert [r.device for r in out[0].results] == ["device-2", "device-3"]


def test_distinct_attribute():
    # "with-distinct-constraints"
    distinct = DeviceConstraint(distinct_attribute=f"{DRIVER_A}/numa")
    out = allocate([cls()], _numa_devices(1, 1, 2), [claim("c", req("req-0"), req("req-1"), constraints=(distinct,))])
    assert [r.device for r in out[0].results] == ["device-1", "device-3"]
    # "with-distinct-constraints-attribute-not-set"
    s = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), dev("device-2"))]
    assert allocate([cls()], s, [claim("c", req("req-0"), req("req-1"), constraints=(distinct,))]) is None


def test_constraints_with_subrequests():
    # "prioritized-list-subrequests-with-constraints-ref-sub-request": a constraint naming "req-0/subReq-1" only
    # applies when that subrequest is chosen.
    slices = _numa_devices(1, 2)
    c = DeviceConstraint(("req-0/subReq-1", "req-1"), match_attribute=f"{DRIVER_A}/numa")
    fa = first_available("req-0", sub("subReq-0", CLASS_B, 1), sub("subReq-1", CLASS_A, 1))
    other = slc("slice-2", NODE1, "pool-2", DRIVER_A, dev("device-9", attrs={"numa": 2}))
    out = allocate([cls(), cls(CLASS_B, DRIVER_B)], [*slices, other], [claim("c", fa, req("req-1"), constraints=(c,))])
    assert [(r.request, r.pool, r.device) for r in out[0].results] == [
        ("req-0/subReq-1", "pool-1", "device-2"),
        ("req-1", "pool-2", "device-9"),
    ]


# ---------------------------------------------------------------------------------------------- CEL


def test_cel_runtime_errors_abort():
    s = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"))]
    bad = 'device.attributes["driver-a"].missing == 1'
    with pytest.raises(AllocationError, match=r"^claim claim-0: selector #0: CEL runtime error: no such key"):
        allocate([cls()], s, [claim("claim-0", req("req-0", CLASS_A, 1, bad))])
    with pytest.raises(AllocationError, match=r"^class class-a: selector #1: CEL runtime error: no such key"):
        allocate([cls(CLASS_A, DRIVER_A, bad)], s, [claim("claim-0", req("req-0"))])
    # "invalid-CEL-all-devices": also in All mode
    with pytest.raises(AllocationError, match="selector #0: CEL runtime error"):
        allocate([cls()], s, [claim("claim-0", all_req("req-0", CLASS_A, bad))])


def test_cel_error_not_reached_when_class_rejects():
    # Class selectors run first: a device the class rejects never evaluates the claim's selectors.
    s = [slc("slice-1", NODE1, "pool-1", DRIVER_B, dev("device-1", DRIVER_B))]
    bad = 'device.attributes["driver-a"].missing == 1'
    assert allocate([cls()], s, [claim("claim-0", req("req-0", CLASS_A, 1, bad))]) is None


def test_cel_verdicts_are_cached_per_device(monkeypatch):
    from accelsched.dra import cel as cel_module

    calls = []
    original = cel_module.Selector.matches
    monkeypatch.setattr(
        cel_module.Selector, "matches", lambda self, d, drv: calls.append(d.name) or original(self, d, drv)
    )
    slices = [slc(f"slice-{n}", f"node-{n}", f"pool-{n}", DRIVER_A, dev("device-1")) for n in range(3)]
    a = Allocator({CLASS_A: cls()}, slices)
    for _ in range(3):
        for n in range(3):
            assert a.allocate(f"node-{n}", {}, [claim("c", req("r"))], AllocatedState()) is not None
    assert len(calls) == 3  # one class selector per device, once per run


# ---------------------------------------------------------------------------------------------- limits


def test_too_many_devices():
    # "too-many-devices-single-request", "too-many-devices-total"
    with pytest.raises(
        AllocationError, match="claim claim-0: number of requested devices 500 exceeds the claim limit of 32"
    ):
        allocate([cls()], [], [claim("claim-0", req("req-0", CLASS_A, 500))])
    with pytest.raises(AllocationError, match="exceeds the claim limit"):
        allocate([cls()], [], [claim("claim-0", req("req-0", CLASS_A, 32), req("req-1"))])
    # "many-devices-okay" (no slices: no fit, no error)
    assert allocate([cls()], [], [claim("claim-0", req("req-0", CLASS_A, 32))]) is None


def test_prioritized_list_too_many_in_first_subrequest():
    # "prioritized-list-too-many-in-first-subrequest"
    s = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"))]
    fa = first_available("req-0", sub("subReq-0", CLASS_B, 500), sub("subReq-1", CLASS_A, 1))
    out = allocate([cls(), cls(CLASS_B, DRIVER_B)], s, [claim("claim-0", fa)])
    assert summary(out) == [[result("req-0/subReq-1", DRIVER_A, "pool-1", "device-1")]]


# ---------------------------------------------------------------------------------------------- prioritized list


def test_prioritized_list():
    classes = [cls(), cls(CLASS_B, DRIVER_B)]
    s = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"))]
    # "prioritized-list-first-unavailable"
    fa = first_available("req-0", sub("subReq-0", CLASS_B), sub("subReq-1", CLASS_A))
    assert summary(allocate(classes, s, [claim("claim-0", fa)])) == [
        [result("req-0/subReq-1", DRIVER_A, "pool-1", "device-1")]
    ]
    # "prioritized-list-non-available"
    fa = first_available("req-0", sub("subReq-0", CLASS_B, 2), sub("subReq-1", CLASS_A, 2))
    assert allocate(classes, s, [claim("claim-0", fa)]) is None
    # "prioritized-list-disabled"
    with pytest.raises(
        AllocationError,
        match="claim claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is disabled",
    ):
        allocate(classes, s, [claim("claim-0", fa)], features=Features(prioritized_list=False))


def test_prioritized_list_with_backtracking():
    # "prioritized-list-with-backtracking"
    slices = [
        slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1", memory=8 * GI)),
        slc("slice-2", NODE1, "pool-2", DRIVER_A, dev("device-2", memory=4 * GI)),
    ]
    fa = first_available(
        "req-0", sub("subReq-0", CLASS_A, 1, MEM_GE.format("8Gi")), sub("subReq-1", CLASS_A, 1, MEM_GE.format("4Gi"))
    )
    out = allocate([cls()], slices, [claim("claim-0", fa, req("req-1", CLASS_A, 1, MEM_GE.format("8Gi")))])
    assert summary(out) == [
        [result("req-0/subReq-1", DRIVER_A, "pool-2", "device-2"), result("req-1", DRIVER_A, "pool-1", "device-1")]
    ]


def test_all_devices_prioritized_list():
    # "all-devices-slice-without-devices-prioritized-list", "all-devices-some-allocated-prioritized-list"
    classes = [cls(), cls(CLASS_B, DRIVER_B)]
    fa = first_available(
        "req-0", sub("subReq-0", CLASS_A, 0, allocation_mode=ALLOCATION_MODE_ALL), sub("subReq-1", CLASS_B)
    )
    slices = [
        slc("slice-1", NODE1, "pool-1", DRIVER_A),
        slc("slice-2", NODE1, "pool-2", DRIVER_B, dev("device-1", DRIVER_B)),
    ]
    assert summary(allocate(classes, slices, [claim("claim-0", fa)])) == [
        [result("req-0/subReq-1", DRIVER_B, "pool-2", "device-1")]
    ]
    slices[0] = slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), dev("device-2"))
    out = allocate(classes, slices, [claim("claim-0", fa)], allocated=state_with((DRIVER_A, "pool-1", "device-1")))
    assert summary(out) == [[result("req-0/subReq-1", DRIVER_B, "pool-2", "device-1")]]


# ---------------------------------------------------------------------------------------------- configs


def test_class_and_claim_configs():
    # "with-class-device-config-with-multiple-request-and-configs"
    config_a, config_b = OpaqueConfig(DRIVER_A, {"a": 1}), OpaqueConfig(DRIVER_B, {"b": 1})
    classes = [cls(config=(config_a,)), cls(CLASS_B, DRIVER_B, config=(config_b,))]
    slices = [
        slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-0"), dev("device-1")),
        slc("slice-2", NODE1, "pool-1", DRIVER_B, dev("device-1", DRIVER_B)),
    ]
    claim_config = OpaqueConfig(DRIVER_A, {"c": 1}, ("req-1",))
    out = allocate(
        classes, slices, [claim("claim-0", req("req-0"), req("req-1"), req("req-2", CLASS_B), config=(claim_config,))]
    )
    assert [(c.source, c.config.driver, c.config.requests) for c in out[0].config] == [
        ("FromClass", DRIVER_A, ("req-0", "req-1")),
        ("FromClass", DRIVER_B, ("req-2",)),
        ("FromClaim", DRIVER_A, ("req-1",)),
    ]
    # "prioritized-list-device-config": a claim config naming the chosen subrequest
    fa = first_available("req-0", sub("subReq-0", CLASS_B, 5), sub("subReq-1", CLASS_A))
    cfg = OpaqueConfig(DRIVER_A, {}, ("req-0/subReq-1",))
    out = allocate(classes, slices, [claim("claim-0", fa, config=(cfg,))])
    assert [(c.source, c.config.requests) for c in out[0].config] == [
        ("FromClass", ("req-0/subReq-1",)),
        ("FromClaim", ("req-0/subReq-1",)),
    ]


# ---------------------------------------------------------------------------------------------- counters


def _counter_pool(*devices, memory=8 * GI, where=NODE1):
    return [
        slc("slice-1", where, "pool-1", DRIVER_A, *devices, count=2),
        slc(
            "slice-2",
            where,
            "pool-1",
            DRIVER_A,
            count=2,
            counters=(CounterSet("counter-set-1", {"memory": Fraction(memory)}),),
        ),
    ]


def test_partitionable_devices():
    # "partitionable-devices-single-device"
    out = allocate(
        [cls()],
        _counter_pool(dev("device-1", consumes_counters=consumes("counter-set-1", memory=4 * GI))),
        [claim("claim-0", req("req-0"))],
    )
    assert summary(out) == [[result("req-0", DRIVER_A, "pool-1", "device-1")]]
    # "partitionable-devices-multiple-devices": device-2 (6Gi) cannot join device-1 (4Gi) in 8Gi
    devices = [
        dev("device-1", consumes_counters=consumes("counter-set-1", memory=4 * GI)),
        dev("device-2", consumes_counters=consumes("counter-set-1", memory=6 * GI)),
        dev("device-3", consumes_counters=consumes("counter-set-1", memory=4 * GI)),
    ]
    out = allocate([cls()], _counter_pool(*devices), [claim("claim-0", req("req-0"), req("req-1"))])
    assert [r.device for r in out[0].results] == ["device-1", "device-3"]
    # "partitionable-devices-no-capacity-available": counters consumed by allocated devices are subtracted
    assert (
        allocate(
            [cls()],
            _counter_pool(*devices),
            [claim("claim-0", req("req-0"), req("req-1"))],
            allocated=state_with((DRIVER_A, "pool-1", "device-2")),
        )
        is None
    )


def test_partitionable_taint_releases_counter():
    # "partitionable-devices-taint-releases-counter"
    taint = DeviceTaint("taint-key", "taint-value", "NoSchedule")
    devices = [
        dev("device-1", taints=(taint,), consumes_counters=consumes("counter-set-1", c=1)),
        dev("device-2", consumes_counters=consumes("counter-set-1", c=1)),
    ]
    slices = [
        slc("slice-1", NODE1, "pool-1", DRIVER_A, *devices, count=2),
        slc("slice-2", NODE1, "pool-1", DRIVER_A, count=2, counters=(CounterSet("counter-set-1", {"c": Fraction(1)}),)),
    ]
    out = allocate([cls()], slices, [claim("claim-0", req("req-0"))])
    assert [r.device for r in out[0].results] == ["device-2"]


def test_devices_on_other_nodes_consume_the_same_counter_set():
    # "partitionable-devices-devices-on-different-nodes-consume-same-counter-set"
    slices = [
        slc(
            "slice-1",
            NODE1,
            "pool-1",
            DRIVER_A,
            count=3,
            counters=(CounterSet("counter-set-1", {"memory": Fraction(8 * GI)}),),
        ),
        slc(
            "slice-2",
            NODE1,
            "pool-1",
            DRIVER_A,
            dev("device-1", memory=6 * GI, consumes_counters=consumes("counter-set-1", memory=6 * GI)),
            dev("device-2", memory=2 * GI, consumes_counters=consumes("counter-set-1", memory=2 * GI)),
            count=3,
        ),
        slc(
            "slice-3",
            NODE2,
            "pool-1",
            DRIVER_A,
            dev("device-3", consumes_counters=consumes("counter-set-1", memory=6 * GI)),
            count=3,
        ),
    ]
    fa = first_available(
        "req-0", sub("subReq-0", CLASS_A, 1, MEM_GE.format("6Gi")), sub("subReq-1", CLASS_A, 1, MEM_GE.format("2Gi"))
    )
    out = allocate([cls()], slices, [claim("claim-0", fa)], allocated=state_with((DRIVER_A, "pool-1", "device-3")))
    assert summary(out) == [[result("req-0/subReq-1", DRIVER_A, "pool-1", "device-2")]]


def test_invalid_counter_references():
    # "partitionable-devices-device-counter-consumption-references-unknown-counter-set"
    with pytest.raises(AllocationError, match="invalid resource pools"):
        allocate(
            [cls()],
            _counter_pool(dev("device-1", consumes_counters=consumes("nope", memory=1))),
            [claim("claim-0", req("req-0"))],
        )
    # "...-references-unknown-counter-in-counter-set"
    with pytest.raises(AllocationError, match="invalid resource pools"):
        allocate(
            [cls()],
            _counter_pool(dev("device-1", consumes_counters=consumes("counter-set-1", other=1))),
            [claim("claim-0", req("req-0"))],
        )


def test_partitionable_disabled():
    # "partitionable-devices-disabled-device-consumes-counters"
    f = Features(partitionable_devices=False)
    assert (
        allocate(
            [cls()],
            _counter_pool(dev("device-1", consumes_counters=consumes("counter-set-1", memory=1))),
            [claim("claim-0", req("req-0"))],
            features=f,
        )
        is None
    )


def test_per_device_node_selection():
    # "partitionable-devices-per-device-node-selection-node-selector"
    devices = [dev("device-1", node_selector=label_selector("region", "region-1")), dev("device-2", node_name=NODE2)]
    slices = [slc("slice-1", "per-device", "pool-1", DRIVER_A, *devices)]
    out = allocate([cls()], slices, [claim("claim-0", req("req-0"))])
    assert out[0].results[0].device == "device-1" and out[0].node_selector == label_selector("region", "region-1")
    out = allocate([cls()], slices, [claim("claim-0", req("req-0"))], node=NODE2, node_labels=labels("region-2"))
    assert out[0].results[0].device == "device-2" and out[0].node_selector == local_selector(NODE2)
    a = Allocator({CLASS_A: cls()}, slices)
    assert [d.name for _, d in a.devices_for_node(NODE2, labels("region-2"))] == ["device-2"]
    # "partitionable-devices-disabled-per-device-node-selection"
    assert (
        allocate([cls()], slices, [claim("claim-0", req("req-0"))], features=Features(partitionable_devices=False))
        is None
    )


# ---------------------------------------------------------------------------------------------- taints


NO_SCHEDULE = DeviceTaint("taint-key", "taint-value", "NoSchedule")
NO_EXECUTE = DeviceTaint("taint-key", "taint-value-2", "NoExecute")
TOLERATE_NO_EXECUTE = DeviceToleration("taint-key", "Equal", "taint-value-2", "NoExecute")
TOLERATE_NO_SCHEDULE = DeviceToleration("taint-key", "Exists", "", "NoSchedule")


def test_taints():
    slices = [
        slc(
            "slice-1",
            NODE1,
            "pool-1",
            DRIVER_A,
            dev("device-1", taints=(NO_SCHEDULE,)),
            dev("device-2", taints=(NO_EXECUTE,)),
        )
    ]
    # "tainted-two-devices"
    assert allocate([cls()], slices, [claim("claim-0", req("req-0"))]) is None
    # "tainted-two-devices-tolerated": the tolerations are copied into the result
    out = allocate([cls()], slices, [claim("claim-0", req("req-0", tolerations=(TOLERATE_NO_EXECUTE,)))])
    assert summary(out) == [[result("req-0", DRIVER_A, "pool-1", "device-2", tolerations=(TOLERATE_NO_EXECUTE,))]]
    # "tainted-two-devices-prioritized-list-tolerated"
    fa = first_available("req-0", sub("subReq-0"), sub("subReq-1", tolerations=(TOLERATE_NO_EXECUTE,)))
    out = allocate([cls()], slices, [claim("claim-0", fa)])
    assert summary(out) == [
        [result("req-0/subReq-1", DRIVER_A, "pool-1", "device-2", tolerations=(TOLERATE_NO_EXECUTE,))]
    ]
    # "tainted-disabled"
    out = allocate([cls()], slices, [claim("claim-0", req("req-0"))], features=Features(device_taints=False))
    assert out[0].results[0].device == "device-1"
    # "tainted-one-device-two-taints-both-tolerated"
    both = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1", taints=(NO_SCHEDULE, NO_EXECUTE)))]
    assert allocate([cls()], both, [claim("c", req("r", tolerations=(TOLERATE_NO_SCHEDULE,)))]) is None
    assert allocate([cls()], both, [claim("c", req("r", tolerations=(TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE)))])


def test_taint_with_effect_none_is_ignored():
    # "tainted-no-effect"
    s = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1", taints=(DeviceTaint("k", "v", "None"),)))]
    assert allocate([cls()], s, [claim("claim-0", req("req-0"))]) is not None


def test_tainted_all_devices():
    # "tainted-all-devices-single": All mode with an untolerated taint does not fit
    s = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1", taints=(NO_SCHEDULE,)))]
    assert allocate([cls()], s, [claim("claim-0", all_req("req-0"))]) is None


# ---------------------------------------------------------------------------------------------- binding conditions


def test_binding_conditions():
    # "binding-conditions-with-and-without"
    s = [
        slc(
            "slice-1",
            NODE1,
            "pool-1",
            DRIVER_A,
            dev("device-1"),
            dev("device-2", binding_conditions=("IsPrepare",), binding_failure_conditions=("BindingFailed",)),
        )
    ]
    out = allocate([cls()], s, [claim("claim-0", req("req-0"), req("req-1"))])
    r = out[0].results
    assert (r[0].binding_conditions, r[1].binding_conditions, r[1].binding_failure_conditions) == (
        (),
        ("IsPrepare",),
        ("BindingFailed",),
    )
    # "binding-conditions-without-feature-gate"
    only = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1", binding_conditions=("IsPrepare",)))]
    assert allocate([cls()], only, [claim("c", req("r"))], features=Features(device_binding_and_status=False)) is None


def test_pools_with_binding_conditions_come_last():
    # GatherPools puts pools with binding conditions after the others.
    slices = [
        slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1", binding_conditions=("IsPrepare",))),
        slc("slice-2", NODE1, "pool-2", DRIVER_A, dev("device-1")),
    ]
    out = allocate([cls()], slices, [claim("c", req("r"))])
    assert out[0].results[0].pool == "pool-2"


# ---------------------------------------------------------------------------------------------- consumable capacity

CAP = f"{DRIVER_A}/capacity-0"


def _shared(name, value, policy=None):
    return dev(name, allow_multiple_allocations=True, capacity={CAP: DeviceCapacity(Fraction(value), policy)})


RANGE_2_2_4 = CapacityRequestPolicy(
    default=Fraction(2), valid_range=CapacityRequestPolicyRange(Fraction(2), Fraction(4), Fraction(2))
)
MULTI = 'device.driver == "driver-a" && device.allowMultipleAllocations == true'


def _cap_req(name, amount):
    return req(name, capacity_requests={CAP: Fraction(amount)})


def test_consumable_capacity_policies():
    multi_class = [DeviceClass(CLASS_A, selectors=(MULTI,))]
    # "consumable-capacity-multi-allocatable-device-with-range-policy-step": 3 rounds up to 4
    out = allocate(
        multi_class,
        [slc("slice-1", NODE1, "pool-1", DRIVER_A, _shared("device-1", 4, RANGE_2_2_4))],
        [claim("claim-0", _cap_req("req-0", 3))],
    )
    assert out[0].results[0].consumed_capacity == {CAP: 4} and out[0].results[0].share_id
    # "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy"
    assert (
        allocate(
            multi_class,
            [slc("slice-1", NODE1, "pool-1", DRIVER_A, _shared("device-1", 10, RANGE_2_2_4))],
            [claim("claim-0", _cap_req("req-0", 6))],
        )
        is None
    )
    # "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up"
    values = CapacityRequestPolicy(default=Fraction(1), valid_values=(Fraction(1), Fraction(3)))
    out = allocate(
        multi_class,
        [slc("slice-1", NODE1, "pool-1", DRIVER_A, _shared("device-1", 3, values))],
        [claim("claim-0", _cap_req("req-0", 2))],
    )
    assert out[0].results[0].consumed_capacity == {CAP: 3}
    # no request: the policy default is consumed
    out = allocate(
        multi_class,
        [slc("slice-1", NODE1, "pool-1", DRIVER_A, _shared("device-1", 4, RANGE_2_2_4))],
        [claim("claim-0", req("req-0"))],
    )
    assert out[0].results[0].consumed_capacity == {CAP: 2}


def test_consumable_capacity_sharing():
    multi_class = [DeviceClass(CLASS_A, selectors=(MULTI,))]
    slices = [slc("slice-1", NODE1, "pool-1", DRIVER_A, _shared("device-1", 2, RANGE_2_2_4))]
    # "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request"
    assert (
        allocate(multi_class, slices, [claim("claim-0", _cap_req("req-0", 1)), claim("claim-1", _cap_req("req-0", 2))])
        is None
    )
    # "...-with-allocated-capacity-use-remaining" / "...-next-device"
    four = [slc("slice-1", NODE1, "pool-1", DRIVER_A, _shared("device-1", 4, RANGE_2_2_4))]
    state = AllocatedState()
    state.add(
        AllocationResult(
            (
                DeviceRequestAllocationResult(
                    "r", DRIVER_A, "pool-1", "device-1", share_id="s1", consumed_capacity={CAP: Fraction(2)}
                ),
            )
        )
    )
    out = allocate(multi_class, four, [claim("claim-0", _cap_req("req-0", 2))], allocated=state)
    assert out[0].results[0].device == "device-1"
    two = [
        slc(
            "slice-1",
            NODE1,
            "pool-1",
            DRIVER_A,
            _shared("device-1", 2, RANGE_2_2_4),
            _shared("device-2", 2, RANGE_2_2_4),
        )
    ]
    out = allocate(multi_class, two, [claim("claim-0", _cap_req("req-0", 2))], allocated=state)
    assert out[0].results[0].device == "device-2"
    # Two claims share one device in one call, with distinct share IDs.
    out = allocate(multi_class, four, [claim("claim-0", _cap_req("req-0", 2)), claim("claim-1", _cap_req("req-0", 2))])
    assert [a.results[0].device for a in out] == ["device-1", "device-1"]
    assert out[0].results[0].share_id != out[1].results[0].share_id
    # remove() gives the capacity back
    state.remove(
        state_result := AllocationResult(
            (
                DeviceRequestAllocationResult(
                    "r", DRIVER_A, "pool-1", "device-1", share_id="s1", consumed_capacity={CAP: Fraction(2)}
                ),
            )
        )
    )
    assert not state.capacity and not state.shared
    assert state_result.results[0].share_id == "s1"


def test_consumable_capacity_dedicated_device_request():
    # "consumable-capacity-dedicated-device-with-consumable-capacity-request": capacity requests on a dedicated
    # device only need to fit its capacity; nothing is recorded.
    s = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1", capacity={CAP: DeviceCapacity(Fraction(4))}))]
    out = allocate([cls()], s, [claim("claim-0", _cap_req("req-0", 2))])
    assert out[0].results[0].consumed_capacity == {} and out[0].results[0].share_id is None
    # a request for a capacity the device lacks skips the device
    assert allocate([cls()], s, [claim("claim-0", req("req-0", capacity_requests={"x/y": Fraction(1)}))]) is None
    # "consumable-capacity-disabled-feature"
    with pytest.raises(
        AllocationError, match="has capacity requests, but the DRAConsumableCapacity feature is disabled"
    ):
        allocate([cls()], s, [claim("claim-0", _cap_req("req-0", 2))], features=Features(consumable_capacity=False))


# ---------------------------------------------------------------------------------------------- search order


def test_check_combinations_with_backtracking():
    # "check-combinations-with-backtracking": expectNumAllocateOneInvocations 12 upstream
    slices = [
        slc(
            "slice-1",
            NODE1,
            "pool-1",
            DRIVER_A,
            dev("device-1", attrs={"type": "X"}),
            dev("device-2", attrs={"type": "Y"}),
            dev("device-3", attrs={"type": "Y"}),
        )
    ]
    a = Allocator({CLASS_A: cls()}, slices)
    c = claim(
        "claim-0", req("req-1", CLASS_A, 2), req("req-2", CLASS_A, 1, 'device.attributes["driver-a"].type == "X"')
    )
    out = a.allocate(NODE1, labels(), [c], AllocatedState())
    assert [(r.request, r.device) for r in out[0].results] == [
        ("req-1", "device-2"),
        ("req-1", "device-3"),
        ("req-2", "device-1"),
    ]
    assert a.num_allocate_one == 12


def test_check_combinations_single_slice():
    # "check-combinations-within-single-request-single-pool-single-slice": 16 invocations, no solution
    a = Allocator(
        {CLASS_A: cls()}, [slc("slice-1", NODE1, "pool-1", DRIVER_A, *(dev(f"device-{i}") for i in range(1, 5)))]
    )
    assert a.allocate(NODE1, labels(), [claim("claim-0", req("req-0", CLASS_A, 5))], AllocatedState()) is None
    assert a.num_allocate_one == 16


# ---------------------------------------------------------------------------------------------- explain helpers


def test_why_unusable():
    devices = [
        dev("device-1"),
        dev("device-2", taints=(NO_SCHEDULE,)),
        dev("device-3", consumes_counters=consumes("counter-set-1", memory=8 * GI)),
        dev("device-4", consumes_counters=consumes("counter-set-1", memory=1)),
    ]
    a = Allocator({CLASS_A: cls()}, _counter_pool(*devices))
    state = state_with((DRIVER_A, "pool-1", "device-1"), (DRIVER_A, "pool-1", "device-4"))
    why = {d.name: a.why_unusable(NODE1, labels(), DeviceID(DRIVER_A, "pool-1", d.name), state) for d in devices}
    assert why == {
        "device-1": REASON_ALLOCATED,
        "device-2": REASON_TAINTED,
        "device-3": REASON_COUNTERS,
        "device-4": REASON_ALLOCATED,
    }
    assert (
        a.why_unusable(NODE1, labels(), DeviceID(DRIVER_A, "pool-1", "device-2"), state, (TOLERATE_NO_SCHEDULE,))
        is None
    )


def test_allocated_state_from_claims_and_counter_cache_invalidation():
    devices = [
        dev("device-1", consumes_counters=consumes("counter-set-1", memory=8 * GI)),
        dev("device-2", consumes_counters=consumes("counter-set-1", memory=8 * GI)),
    ]
    a = Allocator({CLASS_A: cls()}, _counter_pool(*devices))
    state = AllocatedState()
    first = a.allocate(NODE1, labels(), [claim("c0", req("r"))], state)
    assert first[0].results[0].device == "device-1"
    done = claim("c0", req("r"))
    done.allocation = first[0]
    state.add(first[0])  # Reserve: the cached available counters must be recomputed
    assert a.allocate(NODE1, labels(), [claim("c1", req("r"))], state) is None
    assert AllocatedState.from_claims([done]).devices == {DeviceID(DRIVER_A, "pool-1", "device-1")}
    state.remove(first[0])
    assert a.allocate(NODE1, labels(), [claim("c1", req("r"))], state) is not None


# ---------------------------------------------------------------------------------------------- cost


def test_allocate_cost_per_node_is_small():
    """500 nodes with 8 GPUs each, half of them in use: one-GPU claims. Generous bound for a noisy 2-core VM."""
    slices = [
        slc(
            f"slice-{n}",
            f"node-{n}",
            f"node-{n}",
            DRIVER_A,
            *(dev(f"gpu-{i}", memory=80 * GI, attrs={"index": i, "model": "A100"}) for i in range(8)),
        )
        for n in range(500)
    ]
    a = Allocator({CLASS_A: cls()}, slices)
    state = AllocatedState()
    for n in range(500):
        state.add(
            AllocationResult(
                tuple(DeviceRequestAllocationResult("r", DRIVER_A, f"node-{n}", f"gpu-{i}") for i in range(4))
            )
        )
    node_labels = [{"kubernetes.io/hostname": f"node-{n}"} for n in range(500)]
    for n in range(500):  # warm: pools gathered and CEL verdicts cached once
        a.allocate(f"node-{n}", node_labels[n], [claim("warm", req("r"))], state)
    claims = [claim(f"c{p}", req("r", CLASS_A, 1, 'device.attributes["driver-a"].model == "A100"')) for p in range(4)]
    start = time.perf_counter()
    calls = 0
    for c in claims:
        for n in range(500):
            assert a.allocate(f"node-{n}", node_labels[n], [c], state) is not None
            calls += 1
    per_call = (time.perf_counter() - start) / calls
    assert per_call < 1e-3, f"{per_call * 1e6:.0f} us per allocate"


# ---------------------------------------------------------------------------------------------- upstream quirks


def test_overdrawn_counter_set_blocks_the_whole_pool():
    # checkAvailableCounters compares every counter of every counter set of the pool: once allocated devices
    # overdraw one set (possible when slices change under allocations), no device of the pool fits, even one
    # drawing from another set.
    slices = [
        slc(
            "slice-1",
            NODE1,
            "pool-1",
            DRIVER_A,
            dev("device-1", consumes_counters=consumes("cs-1", c=3)),
            dev("device-2", consumes_counters=consumes("cs-2", c=1)),
            count=2,
        ),
        slc(
            "slice-2",
            NODE1,
            "pool-1",
            DRIVER_A,
            count=2,
            counters=(CounterSet("cs-1", {"c": Fraction(2)}), CounterSet("cs-2", {"c": Fraction(1)})),
        ),
    ]
    assert allocate([cls()], slices, [claim("c", req("r"))]) is not None
    assert (
        allocate([cls()], slices, [claim("c", req("r"))], allocated=state_with((DRIVER_A, "pool-1", "device-1")))
        is None
    )


def test_distinct_attribute_remembers_one_value_per_request():
    # constraint.go distinctAttributeConstraint keys the values it has seen by request name, so within one request
    # only consecutive devices are compared: numa 1, 2, 1 for one request of three devices is accepted upstream.
    distinct = DeviceConstraint(distinct_attribute=f"{DRIVER_A}/numa")
    out = allocate([cls()], _numa_devices(1, 2, 1), [claim("c", req("r", CLASS_A, 3), constraints=(distinct,))])
    assert [r.device for r in out[0].results] == ["device-1", "device-2", "device-3"]
    # Across requests every value is remembered.
    c = claim("c", req("r0"), req("r1"), req("r2"), constraints=(distinct,))
    assert allocate([cls()], _numa_devices(1, 2, 1), [c]) is None


def test_distinct_attribute_first_devices_of_two_requests_may_match():
    # Found by tests/test_dra_properties.py, the answer checked against upstream's allocator
    # (hack/dra-allocator-oracle): r0's second device overwrites the value remembered for r0 (model "a" -> "b"),
    # so r1's fallback may take another model "a" device.
    distinct = DeviceConstraint(distinct_attribute=f"{DRIVER_A}/model")
    a, b = dev("device-0", attrs={"model": "a"}), dev("device-1", attrs={"model": "b"})
    s = [slc("s0", NODE1, "pool-0", DRIVER_A, a, b), slc("s1", NODE1, "pool-1", DRIVER_A, a)]
    c = claim(
        "c",
        first_available("r0", sub("first", CLASS_A, 2), sub("fallback")),
        first_available("r1", sub("first", CLASS_A, 0, allocation_mode=ALLOCATION_MODE_ALL), sub("fallback")),
        constraints=(distinct,),
    )
    assert [(r.request, r.pool, r.device) for r in allocate([cls()], s, [c])[0].results] == [
        ("r0/first", "pool-0", "device-0"),
        ("r0/first", "pool-0", "device-1"),
        ("r1/fallback", "pool-1", "device-0"),
    ]


def test_all_devices_leave_out_devices_short_of_the_requested_capacity():
    # Found by tests/test_dra_properties.py, checked against upstream's allocator: "all" devices are those whose
    # capacity covers the request's (CmpRequestOverCapacity, allocator_incubating.go), so a smaller device, here
    # one with a taint the request does not tolerate, is not part of it and does not make the request fail.
    small = dev("device-1", memory=2, taints=(NO_SCHEDULE,))
    s = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-0", memory=4), small)]
    out = allocate([cls()], s, [claim("c", all_req("r0", capacity_requests={f"{DRIVER_A}/memory": Fraction(3)}))])
    assert [(r.device, r.consumed_capacity) for r in out[0].results] == [("device-0", {})]


def test_claim_config_listed_once_per_named_request():
    # The claim-config loop appends a config once per request it names (allocator_incubating.go), so a config
    # naming two requests appears twice in the result.
    cfg = OpaqueConfig(DRIVER_A, {"x": 1}, ("req-0", "req-1"))
    s = [slc("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-1"), dev("device-2"))]
    out = allocate([cls()], s, [claim("c", req("req-0"), req("req-1"), config=(cfg,))])
    assert [(c.source, c.config.requests) for c in out[0].config] == [("FromClaim", ("req-0", "req-1"))] * 2
