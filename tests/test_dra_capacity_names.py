"""Consumable capacity names are compared as written, as the real allocator compares them.

consumable_capacity.go (requestsContainNonExistCapacity, CmpRequestOverCapacity, GetConsumedCapacityFromRequest)
looks a claim's ``capacity.requests`` names up in the device's ``capacity`` map verbatim: ``memory`` matches a device
capacity written ``memory``, and ``gpu.example.com/memory`` does not (conformance's dra-consumable class, against the
real kube-scheduler, pinned this: tests/conformance_cases/dra-consumable-ecb5eb68e4.yaml). CEL alone qualifies an
unqualified capacity name with the driver.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from accelsched.dra import objects as dra
from accelsched.dra.allocated import AllocatedState
from accelsched.dra.allocator import Allocator
from accelsched.dra.cel import compile_selector

DRIVER = "gpu.example.com"
GI = 2**30


def _slice(capacity_name: str) -> object:
    return dra.parse_resource_slice({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": DRIVER, "nodeName": "node-a", "pool": {"name": "node-a", "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "allowMultipleAllocations": True,
                              "capacity": {capacity_name: {"value": "80Gi"}}}]},
    })  # fmt: skip


def _claim(request_name: str) -> object:
    return dra.parse_resource_claim({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {
            "deviceClassName": "gpu", "capacity": {"requests": {request_name: "40Gi"}}}}]}},
    })  # fmt: skip


_CLASS = dra.parse_device_class({
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
})  # fmt: skip


def _allocate(capacity_name: str, request_name: str):
    allocator = Allocator({"gpu": _CLASS}, [_slice(capacity_name)])
    return allocator.allocate("node-a", {}, [_claim(request_name)], AllocatedState())


def test_device_capacity_names_are_kept_as_written():
    assert list(_slice("memory").devices[0].capacity) == ["memory"]
    assert list(_slice(f"{DRIVER}/memory").devices[0].capacity) == [f"{DRIVER}/memory"]


@pytest.mark.parametrize("name", ["memory", f"{DRIVER}/memory"])
def test_a_request_naming_the_capacity_as_the_device_writes_it_is_allocated(name):
    results = _allocate(name, name)
    assert results is not None and len(results) == 1
    (result,) = results[0].results
    assert result.consumed_capacity == {name: Fraction(40 * GI)}


@pytest.mark.parametrize(
    ("device_name", "request_name"), [("memory", f"{DRIVER}/memory"), (f"{DRIVER}/memory", "memory")]
)
def test_a_request_qualified_differently_from_the_device_capacity_does_not_fit(device_name, request_name):
    assert not _allocate(device_name, request_name)


@pytest.mark.parametrize("name", ["memory", f"{DRIVER}/memory"])
def test_cel_sees_either_spelling_under_the_drivers_domain(name):
    selector = compile_selector(f'device.capacity["{DRIVER}"].memory.compareTo(quantity("80Gi")) == 0')
    assert selector.matches(_slice(name).devices[0], DRIVER)
