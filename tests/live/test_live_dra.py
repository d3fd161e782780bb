"""DRA live: the real resourceclaim controller (kube-controller-manager v1.36.3 with only that controller) makes the
claims of pods' ResourceClaimTemplates, the real kube-scheduler v1.36.3 allocates one, and accelsched's PreBind
(live/dra.py) writes the same claim status; ``accelsched run`` schedules a DRA pod end to end.

The reference status is kube-scheduler's own write, read back from the API server: accelsched's must equal it field
by field but for the timestamp and the pod it names. Expected FailedScheduling messages come from kube-scheduler on
an identical pod in the same cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from conftest import KubeContext
from controlplane import ControlPlane, _kill
from livekit import condition_message, events_for, kube_for, node_of, running_scheduler, wait_for

from accelsched.cli import main
from accelsched.dra import model
from accelsched.dra.objects import parse_resource_claim
from accelsched.live import kube as k
from accelsched.live.dra import (
    DEVICE_CLASSES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    ClaimWriteError,
    ClaimWriter,
    reserved_for_pod,
)
from accelsched.live.kube import ApiError, Kube

DRIVER = "gpu.example.com"
NODES = ("node-a", "node-b")
DEVICES_PER_NODE = 2
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


# ---------------------------------------------------------------------------------------------- the cluster


@pytest.fixture(scope="module")
def controller_manager(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """kube-controller-manager with only the resourceclaim controller, for this module's tests."""
    control_plane.start_controller_manager(["resourceclaim-controller"])
    try:
        yield control_plane
    finally:
        control_plane.stop_controller_manager()


@pytest.fixture(scope="module")
def kube_scheduler(control_plane: ControlPlane) -> Iterator[subprocess.Popen[bytes]]:
    """The real kube-scheduler v1.36.3 (default profile, schedulerName default-scheduler), for reference writes."""
    workdir = control_plane.workdir
    config = workdir / "kube-scheduler-dra.yaml"
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(control_plane.kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": "default-scheduler"}],
    }
    config.write_text(yaml.safe_dump(doc))
    log = (workdir / "kube-scheduler-dra.log").open("ab")
    assert control_plane.bin_dir is not None
    args = [str(control_plane.bin_dir / "kube-scheduler"), f"--config={config}", "--secure-port=0", "--v=2"]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        # It holds no state worth a graceful stop, which after DRA work took 30 s here: killed.
        _kill(proc, signal.SIGKILL)
        log.close()


@pytest.fixture
def dra(kube: KubeContext, controller_manager: ControlPlane) -> Iterator[Kube]:
    """Two nodes, each with a ResourceSlice of two gpu.example.com devices, the DeviceClass, and the templates
    ``one-gpu`` (one device) and ``three-gpus`` (more than any node has). Cluster-scoped objects go afterwards."""
    api = kube_for(kube.kubeconfig)
    for node in NODES:
        kube.make_node(node)
    api.create(DEVICE_CLASSES, device_class())
    for node in NODES:
        api.create(RESOURCE_SLICES, resource_slice(node))
    api.create(RESOURCE_CLAIM_TEMPLATES, template("one-gpu", kube.namespace, 1), kube.namespace)
    api.create(RESOURCE_CLAIM_TEMPLATES, template("three-gpus", kube.namespace, 3), kube.namespace)
    try:
        yield api
    finally:
        for node in NODES:
            with contextlib.suppress(ApiError):
                api.delete(RESOURCE_SLICES, f"{node}-gpus")
        with contextlib.suppress(ApiError):
            api.delete(DEVICE_CLASSES, DRIVER)


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": model.API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def resource_slice(node: str) -> dict[str, Any]:
    devices = [
        {"name": f"gpu-{i}", "attributes": {"index": {"int": i}}, "capacity": {"memory": {"value": "80Gi"}}}
        for i in range(DEVICES_PER_NODE)
    ]
    return {
        "apiVersion": model.API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": devices,
        },
    }


def template(name: str, namespace: str, count: int) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": count}}
    return {
        "apiVersion": model.API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def dra_pod(name: str, namespace: str, scheduler: str, tmpl: str = "one-gpu", node: str = "node-a") -> dict[str, Any]:
    """A pod asking for its template's devices, held to ``node`` so both schedulers face the same choice."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": tmpl}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/train:1",
                    "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def claim_of(api: Kube, namespace: str, pod: str, timeout: float = 60) -> dict[str, Any]:
    """The claim the resourceclaim controller made for the pod's ``gpu`` claim, once the pod's status names it."""

    def named() -> str | None:
        statuses = (api.get(k.PODS, pod, namespace).get("status") or {}).get("resourceClaimStatuses") or []
        return next((s.get("resourceClaimName") for s in statuses if s.get("name") == "gpu"), None)

    name = wait_for(f"the resourceclaim controller to make {pod}'s claim", named, timeout=timeout)
    return api.get(RESOURCE_CLAIMS, name, namespace)


def delete_now(api: Kube, namespace: str, pod: str) -> None:
    """Delete a pod at once (no kubelet here finishes a graceful deletion of a bound pod)."""
    api.request("DELETE", k.PODS.path(namespace, pod), body={"gracePeriodSeconds": 0})


def claim_now(api: Kube, claim: dict[str, Any]) -> dict[str, Any]:
    meta = claim["metadata"]
    return api.get(RESOURCE_CLAIMS, meta["name"], meta["namespace"])


def allocated(api: Kube, claim: dict[str, Any]) -> dict[str, Any] | None:
    current = claim_now(api, claim)
    return current if (current.get("status") or {}).get("reservedFor") else None


def comparable(claim: dict[str, Any]) -> dict[str, Any]:
    """What PreBind decides in a claim, without the timestamp and with the pod named generically."""
    status = claim.get("status") or {}
    allocation = {key: v for key, v in (status.get("allocation") or {}).items() if key != "allocationTimestamp"}
    reserved = [{**r, "name": "<pod>", "uid": "<uid>"} for r in status.get("reservedFor") or []]
    return {"finalizers": claim["metadata"].get("finalizers"), "allocation": allocation, "reservedFor": reserved}


@dataclasses.dataclass
class Pod:
    """What ClaimWriter reads of a pod."""

    name: str
    uid: str


def pod_ref(api: Kube, namespace: str, name: str) -> Pod:
    return Pod(name, api.get(k.PODS, name, namespace)["metadata"]["uid"])


def reference_claim(api: Kube, namespace: str, name: str = "ref") -> dict[str, Any]:
    """kube-scheduler's PreBind for a one-gpu pod held to node-a, read back from the API server."""
    api.create(k.PODS, dra_pod(name, namespace, "default-scheduler"), namespace)
    claim = claim_of(api, namespace, name)
    wait_for(f"kube-scheduler to bind {name}", lambda: node_of(api, namespace, name), timeout=60)
    return wait_for("kube-scheduler's claim write", lambda: allocated(api, claim), timeout=30)


# ---------------------------------------------------------------------------------------------- the controller


def test_the_resourceclaim_controller_makes_the_claim_from_the_template(kube: KubeContext, dra: Kube) -> None:
    ns = kube.namespace
    dra.create(k.PODS, dra_pod("train-0", ns, "nobody"), ns)
    claim = claim_of(dra, ns, "train-0")
    meta = claim["metadata"]
    uid = dra.get(k.PODS, "train-0", ns)["metadata"]["uid"]
    assert meta["name"].startswith("train-0-gpu-") and len(meta["name"]) == len("train-0-gpu-") + 5
    assert meta["annotations"] == {model.POD_CLAIM_NAME_ANNOTATION: "gpu"}
    owner = meta["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Pod", "train-0", uid, True)
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == DRIVER
    assert not (claim.get("status") or {}).get("allocation")


# ---------------------------------------------------------------------------------------------- the writer


def test_claim_writer_writes_what_kube_scheduler_writes(
    kube: KubeContext, dra: Kube, kube_scheduler: subprocess.Popen[bytes]
) -> None:
    ns = kube.namespace
    ref = reference_claim(dra, ns)
    assert ref["status"]["allocation"]["devices"]["results"][0]["pool"] == "node-a"
    # The same allocation, as accelsched's allocator would hand it to PreBind (no timestamp yet), written by
    # accelsched for another pod's claim: the claims must read the same.
    allocation = dataclasses.replace(parse_resource_claim(ref, "cluster").allocation, allocation_timestamp="")
    dra.create(k.PODS, dra_pod("ours", ns, "nobody"), ns)
    claim = claim_of(dra, ns, "ours")
    ours = pod_ref(dra, ns, "ours")
    written = ClaimWriter(dra).write_allocation(parse_resource_claim(claim, "cluster"), allocation, ours)
    stored = claim_now(dra, claim)
    assert written["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert comparable(stored) == comparable(ref)
    assert stored["status"]["reservedFor"] == [{"resource": "pods", "name": "ours", "uid": ours.uid}]
    assert stored["metadata"]["finalizers"] == [model.FINALIZER]
    assert TIMESTAMP.match(stored["status"]["allocation"]["allocationTimestamp"])
    node_selector = stored["status"]["allocation"]["nodeSelector"]
    assert node_selector == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]
    }


def test_deleting_the_pod_makes_the_controller_clear_the_reservation(
    kube: KubeContext, dra: Kube, kube_scheduler: subprocess.Popen[bytes]
) -> None:
    """What accelsched relies on after a pod it placed is gone: the controller, not the scheduler, deallocates."""
    ns = kube.namespace
    allocation = parse_resource_claim(reference_claim(dra, ns), "cluster").allocation
    delete_now(dra, ns, "ref")
    dra.create(k.PODS, dra_pod("ours", ns, "nobody"), ns)
    claim = claim_of(dra, ns, "ours")
    ClaimWriter(dra).write_allocation(parse_resource_claim(claim, "cluster"), allocation, pod_ref(dra, ns, "ours"))
    delete_now(dra, ns, "ours")

    def cleared() -> dict[str, Any] | None:
        """Reservation and allocation go in one status update, then the finalizer; the claim, made for the pod, may
        then be deleted too (the controller does when it still sees the pod, done): gone is cleared as well, since
        a claim with the finalizer would not be."""
        try:
            current = claim_now(dra, claim)
        except ApiError as exc:
            if exc.status == 404:
                return {"deleted": True}
            raise
        return None if current["metadata"].get("finalizers") else current

    current = wait_for("the controller to clear the claim", cleared, timeout=60)
    assert not (current.get("status") or {}).get("reservedFor")
    assert not (current.get("status") or {}).get("allocation")


def test_a_conflict_is_retried_with_the_claim_read_again(kube: KubeContext, dra: Kube) -> None:
    ns = kube.namespace
    dra.create(k.PODS, dra_pod("p", ns, "nobody"), ns)
    claim = claim_of(dra, ns, "p")
    stale = parse_resource_claim(claim, "cluster")
    # Someone else updates the claim first: the cached copy's resourceVersion is stale, the Update gets a 409.
    dra.patch(RESOURCE_CLAIMS, claim["metadata"]["name"], {"metadata": {"labels": {"team": "a"}}}, ns)
    writer = ClaimWriter(dra)
    writer.write_allocation(stale, one_device("node-a", "gpu-1"), pod_ref(dra, ns, "p"))
    stored = claim_now(dra, claim)
    assert stored["metadata"]["labels"] == {"team": "a"}
    assert stored["metadata"]["finalizers"] == [model.FINALIZER]
    assert stored["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-1"


def test_a_claim_allocated_meanwhile_is_not_overwritten(kube: KubeContext, dra: Kube) -> None:
    ns = kube.namespace
    dra.create(k.PODS, dra_pod("p", ns, "nobody"), ns)
    claim = claim_of(dra, ns, "p")
    stale = parse_resource_claim(claim, "cluster")
    writer = ClaimWriter(dra)
    writer.write_allocation(stale, one_device("node-a", "gpu-0"), pod_ref(dra, ns, "p"))
    dra.create(k.PODS, dra_pod("other", ns, "nobody"), ns)
    with pytest.raises(ClaimWriteError) as err:
        writer.write_allocation(stale, one_device("node-b", "gpu-1"), pod_ref(dra, ns, "other"))
    name = f"{ns}/{claim['metadata']['name']}"
    assert str(err.value) == f"claim {name} got allocated elsewhere in the meantime"
    assert claim_now(dra, claim)["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"


def test_a_shared_claim_gets_one_more_reservation_and_unreserve_takes_it_back(kube: KubeContext, dra: Kube) -> None:
    ns = kube.namespace
    shared = {
        "apiVersion": model.API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": ns},
        "spec": template("x", ns, 1)["spec"]["spec"],
    }
    claim = dra.create(RESOURCE_CLAIMS, shared, ns)
    # Real pods using it: the controller takes reservations of pods that do not exist off at once.
    for name in ("a", "b"):
        pod = dra_pod(name, ns, "nobody")
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
        dra.create(k.PODS, pod, ns)
    writer = ClaimWriter(dra)
    first, second = pod_ref(dra, ns, "a"), pod_ref(dra, ns, "b")
    writer.write_allocation(parse_resource_claim(claim, "cluster"), one_device("node-a", "gpu-0"), first)
    again = claim_now(dra, claim)
    written = writer.write_allocation(parse_resource_claim(again, "cluster"), None, second)
    stored = claim_now(dra, claim)
    assert [r["name"] for r in stored["status"]["reservedFor"]] == ["a", "b"]
    assert stored["status"]["allocation"] == again["status"]["allocation"]  # reserved only, not allocated again
    writer.unreserve(written, second)
    stored = claim_now(dra, claim)
    assert [r["name"] for r in stored["status"]["reservedFor"]] == ["a"]
    assert reserved_for_pod(stored, first.uid) and not reserved_for_pod(stored, second.uid)
    assert stored["status"]["allocation"] == again["status"]["allocation"]  # the allocation stays, as upstream


def one_device(node: str, device: str) -> model.AllocationResult:
    from accelsched.api.selectors import NodeSelectorTerm, Requirement

    return model.AllocationResult(
        results=(model.DeviceRequestAllocationResult("gpu", DRIVER, node, device),),
        node_selector=(NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", (node,)),)),),
    )


# ---------------------------------------------------------------------------------------------- accelsched run


def service_account_kubeconfig(kube: KubeContext) -> Path:
    """Credentials of the accelsched ServiceAccount with deploy/scheduler's RBAC (test_live_rbac's setup)."""
    from test_live_rbac import SCHEDULER_DIR, _apply

    admin = kube_for(kube.kubeconfig)
    _apply(admin, SCHEDULER_DIR / "serviceaccount.yaml")
    _apply(admin, SCHEDULER_DIR / "rbac.yaml")
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    path = k.Resource("/api/v1", "serviceaccounts").path("kube-system", "accelsched", "token")
    token = admin.request("POST", path, body=request)["status"]["token"]
    return kube.control_plane.token_kubeconfig(token, "accelsched-sa")


def test_accelsched_binds_a_dra_pod_with_the_claim_kube_scheduler_would_write(
    kube: KubeContext, dra: Kube, kube_scheduler: subprocess.Popen[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    """As deployed (the ServiceAccount and its RBAC): every read and write DRA needs is granted."""
    ns = kube.namespace
    ref = reference_claim(dra, ns)
    delete_now(dra, ns, "ref")  # its claim is deallocated by the controller: node-a's devices are free again
    wait_for("the reference claim to be released", lambda: not allocated(dra, ref), timeout=60)
    caplog.set_level(logging.WARNING, logger="accelsched")
    with running_scheduler(service_account_kubeconfig(kube)) as scheduler:
        dra.create(k.PODS, dra_pod("train", ns, "accelsched"), ns)
        assert wait_for("accelsched to bind train", lambda: node_of(dra, ns, "train"), timeout=60) == "node-a"
        claim = claim_of(dra, ns, "train")
        uid = dra.get(k.PODS, "train", ns)["metadata"]["uid"]
        assert comparable(claim) == comparable(ref)
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "train", "uid": uid}]
        # The claim's own write comes back through the watch: followed in place, no rebuild for it.
        wait_for("the claim event to be applied", lambda: scheduler.claims_applied > 0, timeout=30)
        assert not scheduler.assumed_claims.claims
    refused = [
        r.getMessage() + str(vars(r))
        for r in caplog.records
        if getattr(r, "status", None) == 403 or "forbidden" in str(getattr(r, "error", "")).lower()
    ]
    assert not refused, refused


def test_a_pod_whose_claim_cannot_be_allocated_stays_pending_with_kube_schedulers_message(
    kube: KubeContext, dra: Kube, kube_scheduler: subprocess.Popen[bytes]
) -> None:
    ns = kube.namespace
    dra.create(k.PODS, dra_pod("ref-big", ns, "default-scheduler", tmpl="three-gpus"), ns)
    expected = wait_for("kube-scheduler's verdict", lambda: condition_message(dra.get(k.PODS, "ref-big", ns)), 60)
    assert "cannot allocate all claims" in expected
    with running_scheduler(kube.kubeconfig):
        dra.create(k.PODS, dra_pod("big", ns, "accelsched", tmpl="three-gpus"), ns)
        message = wait_for("accelsched's verdict", lambda: condition_message(dra.get(k.PODS, "big", ns)), 60)
        assert message == expected
        events = wait_for("the FailedScheduling event", lambda: events_for(dra, ns, "big", "FailedScheduling"), 30)
        assert events[0]["note"] == expected
        time.sleep(1)
        assert not node_of(dra, ns, "big")
    # the read-only what-if (schedule --from-cluster) lists what run reads, the DRA objects included: the same verdict
    out = CliRunner().invoke(main, ["schedule", "--kubeconfig", str(kube.kubeconfig), "-o", "json"])
    assert out.exit_code == 0, out.output
    pods = {(p["namespace"], p["name"]): p for p in json.loads(out.stdout)["pods"]}
    assert pods[(ns, "big")]["node"] is None
    assert pods[(ns, "big")]["message"] == expected


def test_a_pod_waits_for_its_claim_and_is_woken_when_it_is_created(kube: KubeContext, dra: Kube) -> None:
    """PreEnqueue: no claim yet (the controller is stopped), so nothing is written; the controller then makes the
    claim and names it in the pod's status, which brings the pod back, and it is bound."""
    ns = kube.namespace
    cp = kube.control_plane
    cp.stop_controller_manager()
    try:
        with running_scheduler(kube.kubeconfig):
            dra.create(k.PODS, dra_pod("late", ns, "accelsched"), ns)
            time.sleep(3)
            pod = dra.get(k.PODS, "late", ns)
            assert not pod["spec"].get("nodeName") and not condition_message(pod)
            assert not events_for(dra, ns, "late")
            cp.start_controller_manager(["resourceclaim-controller"])
            assert wait_for("accelsched to bind late", lambda: node_of(dra, ns, "late"), timeout=60) == "node-a"
    finally:
        if cp._controller_manager is None or cp._controller_manager.poll() is not None:
            cp.start_controller_manager(["resourceclaim-controller"])


# ---------------------------------------------------------------------------------------------- extended resources

EXTENDED = "example.com/gpu"


def extended_class() -> dict[str, Any]:
    """A DeviceClass serving the extended resource example.com/gpu with gpu.example.com devices (DRAExtendedResource,
    beta and on in 1.36): pods asking for example.com/gpu in their requests are given devices by a claim the
    scheduler creates, since no node reports that resource as allocatable."""
    doc = device_class()
    doc["metadata"] = {"name": "gpu-extended"}
    doc["spec"]["extendedResourceName"] = EXTENDED
    return doc


def extended_pod(name: str, namespace: str, scheduler: str, node: str) -> dict[str, Any]:
    pod = dra_pod(name, namespace, scheduler, node=node)
    del pod["spec"]["resourceClaims"]
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", EXTENDED: "1"}, "limits": {EXTENDED: "1"}}
    return pod


def extended_claim_of(api: Kube, namespace: str, pod: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod's status.extendedResourceClaimStatus and the claim it names, once the claim shows a reservation."""
    def named() -> dict[str, Any] | None:
        return (api.get(k.PODS, pod, namespace).get("status") or {}).get("extendedResourceClaimStatus")

    status = wait_for(f"{pod}'s extendedResourceClaimStatus", named, timeout=60)
    claim = api.get(RESOURCE_CLAIMS, status["resourceClaimName"], namespace)
    return status, wait_for(f"{pod}'s claim write", lambda: allocated(api, claim), timeout=30)


def extended_comparable(status: dict[str, Any], claim: dict[str, Any], pod: str, node: str) -> dict[str, Any]:
    """What PreBind writes for a pod's extended resources, the pod's name, uid and node made generic."""
    meta = claim["metadata"]
    text = json.dumps(
        {
            "requestMappings": status["requestMappings"],
            "generateName": meta.get("generateName"),
            "annotations": meta.get("annotations"),
            "owners": [{**o, "uid": "<uid>"} for o in meta.get("ownerReferences") or []],
            "spec": claim["spec"],
            **comparable(claim),
        },
        sort_keys=True,
    )
    return json.loads(text.replace(pod, "<pod>").replace(node, "<node>"))


def test_accelsched_creates_the_extended_resource_claim_kube_scheduler_creates(
    kube: KubeContext, dra: Kube, kube_scheduler: subprocess.Popen[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    """The live PreBind for a pod's extended resources backed by DRA, against kube-scheduler's on the same cluster:
    the claim created (annotation, owner, spec), written (finalizer, allocation, reservation) and named in the pod's
    status with the same request mappings; as deployed, with the ServiceAccount's RBAC."""
    ns = kube.namespace
    dra.create(DEVICE_CLASSES, extended_class())
    try:
        dra.create(k.PODS, extended_pod("ref-ext", ns, "default-scheduler", "node-a"), ns)
        assert wait_for("kube-scheduler to bind ref-ext", lambda: node_of(dra, ns, "ref-ext"), timeout=60) == "node-a"
        ref = extended_comparable(*extended_claim_of(dra, ns, "ref-ext"), "ref-ext", "node-a")
        caplog.set_level(logging.WARNING, logger="accelsched")
        with running_scheduler(service_account_kubeconfig(kube)) as scheduler:
            dra.create(k.PODS, extended_pod("train-x", ns, "accelsched", "node-b"), ns)
            assert wait_for("accelsched to bind train-x", lambda: node_of(dra, ns, "train-x"), timeout=60) == "node-b"
            status, claim = extended_claim_of(dra, ns, "train-x")
            name = claim["metadata"]["name"]
            assert re.fullmatch(r"train-x-extended-resources-[bcdfghjklmnpqrstvwxz2456789]{5}", name)
            assert extended_comparable(status, claim, "train-x", "node-b") == ref
            uid = dra.get(k.PODS, "train-x", ns)["metadata"]["uid"]
            assert claim["metadata"]["ownerReferences"][0]["uid"] == uid
            assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "train-x", "uid": uid}]
            # node-b's second device is left; a pod asking for two more stays Pending, as it would with
            # kube-scheduler: the created claim's devices are held (its write seen, nothing assumed any more).
            wait_for("the created claim to be followed", lambda: not scheduler.assumed_claims.claims, timeout=30)
            big = extended_pod("train-big", ns, "accelsched", "node-b")
            big["spec"]["containers"][0]["resources"] = {"requests": {EXTENDED: "2"}, "limits": {EXTENDED: "2"}}
            dra.create(k.PODS, big, ns)
            verdict = wait_for("the verdict", lambda: condition_message(dra.get(k.PODS, "train-big", ns)), 60)
            assert verdict.startswith("0/2 nodes are available"), verdict
            assert not node_of(dra, ns, "train-big")
    finally:
        with contextlib.suppress(ApiError):
            dra.delete(DEVICE_CLASSES, "gpu-extended")
    refused = [r.getMessage() + str(vars(r)) for r in caplog.records if getattr(r, "status", None) == 403]
    assert not refused, refused


def test_unreserve_deletes_the_extended_resource_claim_prebind_created(kube: KubeContext, dra: Kube) -> None:
    """unreserveExtendedResourceClaim: the claim PreBind created and wrote is deleted, its finalizer taken off
    first; a user's claim only loses the pod's reservation (the shared-claim test above)."""
    ns = kube.namespace
    dra.create(k.PODS, extended_pod("gone", ns, "nobody", "node-a"), ns)
    pod = pod_ref(dra, ns, "gone")
    doc = {
        "apiVersion": model.API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {
            "name": "gone-extended-resources-bcdfg",
            "namespace": ns,
            "generateName": "gone-extended-resources-",
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "gone", "uid": pod.uid, "controller": True}
            ],
            "uid": "planned",
        },
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
    }
    writer = ClaimWriter(dra)
    planned = parse_resource_claim(doc, "cluster")
    created = writer.create(planned)
    assert created["metadata"]["uid"] != "planned" and created["metadata"]["name"] == "gone-extended-resources-bcdfg"
    written = writer.write_allocation(planned, one_device("node-a", "gpu-0"), pod, created)
    assert written["metadata"]["finalizers"] == [model.FINALIZER] and reserved_for_pod(written, pod.uid)
    writer.extended_status(pod, written, [{"containerName": "main", "resourceName": EXTENDED, "requestName": "r"}])
    got = dra.get(k.PODS, "gone", ns)["status"]["extendedResourceClaimStatus"]
    assert got["resourceClaimName"] == "gone-extended-resources-bcdfg"
    with pytest.raises(ClaimWriteError, match=rf"^create claim for extended resources {ns}/: .*already exists"):
        writer.create(planned)
    writer.unreserve(written, pod)
    with pytest.raises(ApiError) as err:
        claim_now(dra, written)
    assert err.value.status == 404
