"""The allocator's pool pruning gives the answers of the plain search, step after step.

allocator.py skips pools of which no device can be taken (``_Search.live_pools``, kept across allocations and
updated from ``AllocatedState.changes``) and pools without a value a matchAttribute constraint already fixed
(``pools_with``, ``pool_mismatches``). Both must leave every answer as the device-by-device loop gives it
(upstream's search). Here one long-lived Allocator allocates and releases claims in a seeded random sequence over
partitionable pools with counters, shareable devices with capacity and matchAttribute claims (Partitionable's and
ConsumableCapacity's shapes, small), and each answer is compared with a fresh Allocator whose pruning is switched
off. A selector that fails on some devices is part of the mix: its CEL error must surface as the plain search
raises it.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from test_dra_allocator import claim, consumes, first_available, labels, req, slc, sub

from accelsched.dra import allocator as alloc_mod
from accelsched.dra import allocator_counters, allocator_search
from accelsched.dra.allocated import AllocatedState
from accelsched.dra.allocator import Allocator
from accelsched.dra.model import (
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
)

DRIVER = "driver-a"
SLICE_ATTR = f"{DRIVER}/slice"


def _cluster(rng: random.Random) -> list:
    slices = []
    for p in range(6):
        pool = f"pool-{p}"
        counters = (CounterSet("cs", {"c1": Fraction(1), "c2": Fraction(1), "c3": Fraction(1), "c4": Fraction(1)}),)
        devices = [
            Device(f"d1-{i}", attributes={SLICE_ATTR: p}, consumes_counters=consumes("cs", **{f"c{i}": 1}))
            for i in range(1, 5)
        ]
        devices += [
            Device("d2-a", attributes={SLICE_ATTR: p}, consumes_counters=consumes("cs", c1=1, c2=1)),
            Device("d2-b", attributes={SLICE_ATTR: p}, consumes_counters=consumes("cs", c3=1, c4=1)),
        ]
        rng.shuffle(devices)
        slices.append(slc(f"{pool}-counters", "all", pool, DRIVER, count=2, counters=counters))
        slices.append(slc(f"{pool}-devices", "all", pool, DRIVER, *devices, count=2))
    for p in range(4):
        shared = Device(
            "share", attributes={SLICE_ATTR: 100 + p}, allow_multiple_allocations=True,
            capacity={"memory": DeviceCapacity(Fraction(rng.choice([40, 80, 120])))},
        )  # fmt: skip
        slices.append(slc(f"shared-{p}", "all", f"shared-{p}", DRIVER, shared))
    slices.append(slc("local", "node-1", "node-1", DRIVER, Device("plain-0"), Device("plain-1")))
    return slices


def _claims(step: int, rng: random.Random):
    kind = rng.randrange(6)
    name = f"c{step}"
    if kind == 5:  # a CEL runtime error on pool-2's devices (they have no "extra"), once the search gets there
        picky = f'device.attributes["{DRIVER}"].slice != 2 || device.attributes["{DRIVER}"].extra == 1'
        return claim(name, req("r", "counters", 2, picky), constraints=(DeviceConstraint((), SLICE_ATTR),))
    if kind == 0:  # Partitionable's: two devices of one slice
        return claim(name, req("r", "counters", 2), constraints=(DeviceConstraint((), SLICE_ATTR),))
    if kind == 1:  # ConsumableCapacity's: capacity from shareable devices
        amount = Fraction(rng.choice([20, 40, 60]))
        return claim(name, req("r", "shared", rng.choice([1, 2]), capacity_requests={"memory": amount}))
    if kind == 2:
        return claim(name, req("r", "counters", 1))
    if kind == 3:
        return claim(name, first_available("r", sub("two", "counters", 2), sub("one", "any", 1)))
    return claim(name, req("a", "counters", 1), req("b", "shared", 1, capacity_requests={"memory": Fraction(40)}),
                 constraints=(DeviceConstraint(("a", "b"), distinct_attribute=SLICE_ATTR),))  # fmt: skip


CLASSES = {
    "counters": DeviceClass("counters", (f'device.driver == "{DRIVER}" && !device.allowMultipleAllocations',)),
    "shared": DeviceClass("shared", (f'device.driver == "{DRIVER}" && device.allowMultipleAllocations',)),
    "any": DeviceClass("any", (f'device.driver == "{DRIVER}"',)),
}


def _answer(a: Allocator, node: str, c, state: AllocatedState):
    try:
        results = a.allocate(node, labels(), [c], state)
    except alloc_mod.AllocationError as exc:
        return ("error", str(exc))
    if results is None:
        return None
    return [(r.request, r.pool, r.device, r.share_id, dict(r.consumed_capacity)) for r in results[0].results]


def _every_pool(search, req):
    live = allocator_counters._LivePools(search.pools, 0, 0)
    live.indices = list(range(len(search.pools)))
    live.members = set(live.indices)
    return live


def _unpruned(monkeypatch_ctx):
    monkeypatch_ctx.setattr(allocator_search._Search, "live_pools", _every_pool)
    monkeypatch_ctx.setattr(
        allocator_search._Search, "pools_with", lambda self, req, attribute, value: _every_pool(self, req).indices
    )
    monkeypatch_ctx.setattr(allocator_search._Search, "pool_mismatches", lambda self, req, pool, needed: False)


@pytest.mark.parametrize("seed", range(6))
def test_pruned_answers_equal_the_plain_search_through_allocations_and_releases(seed, monkeypatch):
    rng = random.Random(seed)
    slices = _cluster(rng)
    pruned = Allocator(CLASSES, slices)
    state = AllocatedState()
    held = []
    allocated = 0
    for step in range(80):
        if held and rng.random() < 0.3:
            state.remove(held.pop(rng.randrange(len(held))))
        c = _claims(step, rng)
        node = rng.choice(["node-1", "node-2"])
        got = _answer(pruned, node, c, state)
        with monkeypatch.context() as m:
            _unpruned(m)
            want = _answer(Allocator(CLASSES, slices), node, c, state)
        assert got == want, f"seed {seed} step {step}"
        if got and got[0] != "error":
            results = pruned.allocate(node, labels(), [c], state)
            assert results is not None
            state.add(results[0])
            held.append(results[0])
            allocated += 1
    assert allocated > 20  # the sequence fills pools and frees them again, not just fails
