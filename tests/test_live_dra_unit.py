"""Live mode's DRA bookkeeping without an API server (tests/live/test_live_dra.py runs it against a real one):
claim events taken into the session in place, writes in flight seen by a rebuild, PreBind's writes deferred to the
binding cycle, and the queueing hints that wake a pod waiting for its claim."""

from __future__ import annotations

import copy

from test_live_incremental import new_live, watch

from accelsched.api import objects
from accelsched.dra import model
from accelsched.dra.objects import parse_resource_claim
from accelsched.engine import Session
from accelsched.live import convert as live_convert
from accelsched.live import dra as live_dra
from accelsched.live.dra import AssumedClaims, ClaimWrite, claim_event_wakes, generated_claims_changed
from accelsched.live.scheduler import LiveScheduler

DRIVER = "gpu.example.com"


def node(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


DEVICE_CLASS = {
    "apiVersion": model.API_VERSION,
    "kind": "DeviceClass",
    "metadata": {"name": DRIVER, "uid": "uid-class"},
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
}
SLICE = {
    "apiVersion": model.API_VERSION,
    "kind": "ResourceSlice",
    "metadata": {"name": "n1-gpus"},
    "spec": {
        "driver": DRIVER,
        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "n1",
        "devices": [{"name": "gpu-0"}],
    },
}


def claim(name: str = "c", uid: str = "uid-c", allocated_to: str = "") -> dict:
    """A user-made claim for one gpu.example.com device; allocated (gpu-0 on n1) and reserved for a pod if asked."""
    doc: dict = {
        "apiVersion": model.API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": uid, "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
    }
    if allocated_to:
        doc["metadata"]["finalizers"] = [model.FINALIZER]
        doc["status"] = {
            "allocation": live_dra.to_api_allocation(gpu0(), "2026-01-01T00:00:00Z"),
            "reservedFor": [{"resource": "pods", "name": allocated_to, "uid": f"uid-{allocated_to}"}],
        }
    return doc


def gpu0() -> model.AllocationResult:
    return model.AllocationResult(results=(model.DeviceRequestAllocationResult("gpu", DRIVER, "n1", "gpu-0"),))


def pod(name: str, claim_name: str = "c", bound: str = "") -> dict:
    spec: dict = {
        "schedulerName": "accelsched",
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}}],
    }
    if bound:
        spec["nodeName"] = bound
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def cluster(live: LiveScheduler, *claims: dict) -> None:
    watch(live, live.nodes, "ADDED", node("n1"))
    watch(live, live.dra["DeviceClass"], "ADDED", DEVICE_CLASS)
    watch(live, live.dra["ResourceSlice"], "ADDED", SLICE)
    for doc in claims:
        watch(live, live.dra["ResourceClaim"], "ADDED", doc)


DEVICE = model.DeviceID(DRIVER, "n1", "gpu-0")


def test_a_claim_update_is_taken_in_place_and_equals_a_fresh_build() -> None:
    live = new_live()
    cluster(live, claim())
    live.sync_session()
    rebuilds = live.rebuilds
    assert not live.session.cluster.dra.allocated.is_allocated(DEVICE)
    watch(live, live.dra["ResourceClaim"], "MODIFIED", claim(allocated_to="other"))
    live.sync_session()
    assert (live.rebuilds, live.claims_applied) == (rebuilds, 1)
    assert live.session.cluster.dra.allocated.is_allocated(DEVICE)
    fresh = Session.start(live_convert.convert(live._snapshot(), live.scheduler_names).inputs)
    assert fresh.cluster.dra.allocated.devices == live.session.cluster.dra.allocated.devices
    watch(live, live.dra["ResourceClaim"], "DELETED", claim(allocated_to="other"))
    live.sync_session()
    assert live.rebuilds == rebuilds and not live.session.cluster.dra.allocated.is_allocated(DEVICE)
    assert "default/c" not in live.session.cluster.dra.claims


def test_prebind_records_the_claim_write_for_the_binding_cycle() -> None:
    live = new_live()
    cluster(live, claim())
    watch(live, live.pods, "ADDED", pod("p"))
    live.sync_session()
    results = live._run(list(live.pending_by_key.values()))
    assert [r.node for r in results] == ["n1"]
    (decision,) = live._decided
    (write,) = decision.claims
    assert write.claim.key == "default/c"
    assert [r.device_id for r in write.allocation.results] == [DEVICE]
    assert not live.claim_writer.pending  # taken into the decision


def test_a_write_in_flight_is_seen_by_a_rebuild_until_the_cache_shows_it() -> None:
    live = new_live()
    cluster(live, claim())
    p = objects.parse_pod(pod("p"), "cluster")
    unallocated = parse_resource_claim(claim(), "cluster")
    live.assumed_claims.assume(p, [ClaimWrite(unallocated, gpu0())])
    live._invalidate("test")
    live.sync_session()
    state = live.session.cluster.dra
    assert state.allocated.is_allocated(DEVICE)
    assert [r.uid for r in state.claims["default/c"].reserved_for] == ["uid-p"]
    # The watch shows our write: nothing is assumed any more, and the claim stays allocated.
    watch(live, live.dra["ResourceClaim"], "MODIFIED", claim(allocated_to="p"))
    assert not live.assumed_claims.claims
    live.sync_session()
    assert live.session.cluster.dra.allocated.is_allocated(DEVICE)


def test_assumed_claims_follow_the_claim_they_were_written_for() -> None:
    assumed = AssumedClaims()
    p = objects.parse_pod(pod("p"), "cluster")
    assumed.assume(p, [ClaimWrite(parse_resource_claim(claim(), "cluster"), gpu0())])
    shown = assumed.overlay("default/c", claim())
    assert shown["metadata"]["finalizers"] == [model.FINALIZER]
    assert shown["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert shown["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    recreated = claim(uid="uid-other")
    assert assumed.overlay("default/c", recreated) is recreated  # another claim under the same name
    assumed.observed("default/c", claim())  # only the finalizer written so far: still in flight
    assert assumed.claims
    assumed.forget("uid-p")  # the write failed
    assert not assumed.claims


def test_a_claim_event_wakes_the_pods_it_can_help() -> None:
    waiting = pod("p", claim_name="c")
    assert claim_event_wakes(waiting, None, claim())  # its claim was created
    assert not claim_event_wakes(waiting, None, claim(name="other"))
    assert not claim_event_wakes(waiting, claim(), copy.deepcopy(claim()))  # nothing in the status changed
    assert claim_event_wakes(waiting, claim(), claim(allocated_to="q"))
    # Any claim deallocated frees devices for every waiting pod.
    assert claim_event_wakes(waiting, claim(name="other", allocated_to="q"), claim(name="other"))


def test_a_claim_added_moves_its_pod_out_of_the_unschedulable_pool() -> None:
    live = new_live()
    cluster(live)
    waiting, other = pod("p", claim_name="c"), pod("q", claim_name="d")
    live.unschedulable = {"default/p": waiting, "default/q": other}
    watch(live, live.dra["ResourceClaim"], "ADDED", claim())
    assert list(live.backing_off) == ["default/p"] and list(live.unschedulable) == ["default/q"]


def test_the_controller_naming_a_pods_claims_is_the_update_that_requeues_it() -> None:
    before = pod("p")
    after = copy.deepcopy(before)
    after["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2q"}]
    assert generated_claims_changed(before, after)
    assert not generated_claims_changed(before, copy.deepcopy(before))


def test_to_api_allocation_stamps_only_an_allocation_without_a_timestamp() -> None:
    assert live_dra.to_api_allocation(gpu0(), "2026-01-01T00:00:00Z")["allocationTimestamp"] == "2026-01-01T00:00:00Z"
    stamped = model.AllocationResult(results=gpu0().results, allocation_timestamp="2025-05-05T05:05:05Z")
    assert live_dra.to_api_allocation(stamped, "2026-01-01T00:00:00Z")["allocationTimestamp"] == "2025-05-05T05:05:05Z"
    assert "allocationTimestamp" not in live_dra.to_api_allocation(gpu0())


def test_one_bad_dra_object_is_left_out_and_named_the_rest_is_scheduled() -> None:
    live = new_live()
    bad = claim(name="bad", uid="uid-bad")
    bad["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": "device.driver =="}}]
    cluster(live, claim(), bad)
    converted = live_convert.convert(live._snapshot(), live.scheduler_names)
    assert list(converted.errors) == ["ResourceClaim default/bad"]
    assert "selectors[0].cel.expression" in converted.errors["ResourceClaim default/bad"]
    assert set(converted.inputs.dra.claims) == {"default/c"} and set(converted.inputs.dra.slices) == {"n1-gpus"}
