"""The DRA classes of the conformance oracle (conformance/dra.py), without a cluster: the recorded DRA cases
(tests/conformance_cases/dra-*.yaml, each the real kube-scheduler v1.36.3's outcome with the allocations it wrote)
replayed through accelsched offline, their allocations valid and identical; the generator's DRA scenarios
well-formed for the real run's renaming; and the allocation validity check catching what it must."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # conformance/ is not an installed package: import it from the checkout
    sys.path.insert(0, str(REPO))

from conformance import cases, dra, generator, offline  # noqa: E402
from conformance.outcome import PodOutcome, differences, mask_generated  # noqa: E402
from conformance.scenario import Scenario, renaming  # noqa: E402

CASES = sorted((Path(__file__).parent / "conformance_cases").glob("dra-*.yaml"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_recorded_dra_case(path: Path) -> None:
    scenario, recorded, header = cases.read(path)
    assert recorded is not None, f"{path.name} has no recorded outcome: run python -m conformance record {path}"
    # The recorded (real) allocations are valid: else the case or the check is wrong.
    assert dra.check_allocations(scenario, recorded, "real") == []
    if header.get("xfail"):
        pytest.xfail(str(header["xfail"]))  # documented in docs/conformance.md
    try:
        ours = offline.run(scenario, {o.pod: o.node for o in recorded if o.node})
    except offline.AccelschedError as exc:
        pytest.fail(f"accelsched refused input the real API server took: {exc}")
    assert differences(recorded, ours) + dra.check_allocations(scenario, ours, "accelsched") == []


def test_dra_group_expands_to_every_dra_class_and_default_draws_none() -> None:
    drawn = {s.klass for s in generator.generate(300, 5, ["dra"])}
    assert drawn == set(dra.CLASSES)
    assert not any(s.klass.startswith("dra-") for s in generator.generate(200, 5))


def _strings(value: object, keys: bool = False) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values())) if value else set()
    return set()


def test_renamed_names_never_collide_with_other_strings() -> None:
    """The real run renames cluster-scoped names by exact string value: a request or pod-claim name equal to a
    class or pool name would be renamed too (as a class named "gpu" once renamed every request "gpu")."""
    for s in generator.generate(400, 9, ["dra"]):
        names = set(renaming(s, "t"))
        for obj in [*s.objects, *s.pending]:
            if obj["kind"] in ("ResourceClaim", "ResourceClaimTemplate", "Pod"):
                for ref in obj["spec"].get("resourceClaims") or []:
                    assert ref["name"] not in names, (s.klass, s.seed, ref)
                spec = obj["spec"] if obj["kind"] == "ResourceClaim" else (obj["spec"].get("spec") or {})
                for r in (spec.get("devices") or {}).get("requests") or []:
                    assert r["name"] not in names, (s.klass, s.seed, r["name"])
                    assert all(sub["name"] not in names for sub in r.get("firstAvailable") or [])


def test_mig_and_slice_shapes_are_what_the_api_server_takes() -> None:
    for s in generator.generate(300, 2, ["dra-partition", "dra-generations", "dra-consumable"]):
        for sl in s.of_kind("ResourceSlice"):
            spec = sl["spec"]
            assert not (spec.get("devices") and spec.get("sharedCounters")), "1.35+: devices or sharedCounters"
            assert len(spec.get("devices") or []) <= 128
            assert all("." not in d["name"] for d in spec.get("devices") or []), "device names have no dots"


def test_mask_generated_hides_only_the_random_suffix() -> None:
    msg = 'running "DynamicResources" filter plugin: claim ns-main/pod-0-gpu-zhblr, request gpu: asks'
    assert mask_generated(msg) == 'running "DynamicResources" filter plugin: claim ns-main/pod-0-gpu-*****, request ' \
                                  "gpu: asks"
    assert mask_generated("0/2 nodes are available: 2 cannot allocate all claims.") == \
        "0/2 nodes are available: 2 cannot allocate all claims."


# ------------------------------------------------------------------------------------------ the validity check


def _scenario() -> Scenario:
    """One node with GPUs gpu-0 (a100, root 0), gpu-1 (h100, root 0), gpu-2 (l4, root 1); a pending pod whose claim
    asks for 2 devices on one PCIe root, the second request for an h100."""
    from conformance.objects import container, node, pod

    n = node("node-0", {"cpu": "8", "memory": "16Gi", "pods": "110"})
    gpus = [dra.gpu("gpu-0", 0, "a100", root=dra.ROOTS[0]), dra.gpu("gpu-1", 1, "h100", root=dra.ROOTS[0]),
            dra.gpu("gpu-2", 2, "l4", root=dra.ROOTS[1])]
    objects = [dra.device_class("gpu-class", [dra.GPU_SELECTOR]),
               dra.resource_slice("node-0-gpu", dra.GPU_DRIVER, "node-0", gpus, node="node-0"), n]
    spec = dra.claim_spec([{"name": "any", "exactly": dra.exactly("gpu-class")},
                           {"name": "big", "exactly": dra.exactly("gpu-class", 1, [f'{dra.A}.model == "h100"'])}],
                          [{"matchAttribute": dra.PCIE_ROOT}])
    objects.append(dra.claim("c", spec))
    body = dra.use_claims(pod("pod-0", [container("main", {"cpu": "1"})]), [("gpu", "claim", "c")])
    return Scenario("dra-test", objects=objects, pending=[body])


def _bound(results: list[tuple[str, str]]) -> list[PodOutcome]:
    return [PodOutcome("ns-main/pod-0", node="node-0", claims=[{"name": "gpu", "results": [
        {"request": r, "driver": dra.GPU_DRIVER, "pool": "node-0", "device": d} for r, d in results]}])]


def test_a_valid_allocation_passes() -> None:
    assert dra.check_allocations(_scenario(), _bound([("any", "gpu-0"), ("big", "gpu-1")]), "x") == []


@pytest.mark.parametrize(("results", "why"), [
    ([("any", "gpu-1"), ("big", "gpu-1")], "also allocated"),  # the same device twice
    ([("any", "gpu-0"), ("big", "gpu-2")], "selector"),  # an l4 for the h100 request
    ([("any", "gpu-2"), ("big", "gpu-1")], "matchAttribute"),  # different PCIe roots
    ([("any", "gpu-0"), ("big", "gpu-9")], "no such device"),
    ([("nope", "gpu-0")], "no such request"),
])
def test_an_invalid_allocation_is_named(results: list[tuple[str, str]], why: str) -> None:
    problems = dra.check_allocations(_scenario(), _bound(results), "x")
    assert problems and any(why in p for p in problems), problems


def test_count_and_reachability_are_checked() -> None:
    s = _scenario()
    claim = next(o for o in s.objects if o["kind"] == "ResourceClaim")
    claim["spec"]["devices"]["requests"][0]["exactly"] = dra.exactly("gpu-class", 2)
    claim["spec"]["devices"]["constraints"] = []
    problems = dra.check_allocations(s, _bound([("any", "gpu-0"), ("big", "gpu-1")]), "x")
    assert any("1 devices, count 2" in p for p in problems), problems
    elsewhere = copy.deepcopy(_bound([("any", "gpu-0")]))
    elsewhere[0].node = "node-9"
    assert any("not reachable" in p for p in dra.check_allocations(s, elsewhere, "x"))


def test_overdrawn_counters_are_named() -> None:
    """Two MIG placements that overlap (the same memory slices) may not both be allocated."""
    from conformance.objects import container, node, pod

    counters = {f"memory-slice-{i}": {"value": "1"} for i in range(8)}
    counters["multiprocessors"] = {"value": "98"}
    devices = dra._mig_devices(0, "gpu-0-counters", full=True)
    objects = [node("node-0", {"cpu": "8", "memory": "16Gi", "pods": "110"}),
               dra.device_class("mig-class", [dra.GPU_SELECTOR]),
               dra.resource_slice("c", dra.GPU_DRIVER, "node-0", node="node-0", count=2,
                                  shared_counters=[{"name": "gpu-0-counters", "counters": counters}]),
               dra.resource_slice("m", dra.GPU_DRIVER, "node-0", devices, node="node-0", count=2),
               dra.claim("c", dra.claim_spec([{"name": "mig", "exactly": dra.exactly("mig-class", 2)}]))]
    body = dra.use_claims(pod("pod-0", [container("main", {"cpu": "1"})]), [("mig", "claim", "c")])
    s = Scenario("dra-test", objects=objects, pending=[body])
    full = next(d["name"] for d in devices if "7g" in d["name"])
    one = next(d["name"] for d in devices if "1g" in d["name"])
    out = [PodOutcome("ns-main/pod-0", node="node-0", claims=[{"name": "mig", "results": [
        {"request": "mig", "driver": dra.GPU_DRIVER, "pool": "node-0", "device": d} for d in (full, one)]}])]
    assert any("counter" in p and "drawn" in p for p in dra.check_allocations(s, out, "x"))
