"""The bad resource.k8s.io/v1 objects and pod claims of tests/test_dra_objects.py, sent to the real kube-apiserver
v1.36.3 (dry run): it refuses each with the message accelsched gives, and accepts what accelsched accepts.

This keeps the unit tests' expected messages honest: they were written from validation.go, and this checks them
against the server itself. CEL compiler text after ``compilation failed: `` differs (cel-go vs the Python library),
so only the part before it is compared there.
"""

from __future__ import annotations

import copy
import json
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the unit test module beside tests/live
import test_dra_objects as cases

NAMESPACE = "ml"
PATHS = {
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceClaim": f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims",
    "ResourceClaimTemplate": f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates",
    "Pod": f"/api/v1/namespaces/{NAMESPACE}/pods",
}


@pytest.fixture(scope="module")
def post(control_plane):
    ctx = ssl.create_default_context(cafile=str(control_plane.ca_file))

    def send(obj: dict[str, Any], dry_run: bool = True, path: str = "") -> tuple[int, str]:
        path = (path or PATHS[obj["kind"]]) + ("?dryRun=All&fieldValidation=Strict" if dry_run else "")
        request = urllib.request.Request(
            control_plane.server + path,
            data=json.dumps(obj).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {control_plane.admin_token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, context=ctx, timeout=60) as response:
                return response.status, ""
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read()).get("message", "")

    # A namespace with its default ServiceAccount (admission needs it for pods; no controller runs here).
    for path, obj in (
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        (f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
         {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
    ):  # fmt: skip
        status, message = send(obj, dry_run=False, path=path)
        assert status in (201, 409), message
    return send


def _expected(field: str, message: str) -> str:
    cut = message.find("compilation failed: ")
    return f"{field}: {message if cut < 0 else message[: cut + len('compilation failed: ')]}"


# status.* rules are the status update's (validateResourceClaimStatusUpdate): a create drops the status.
ALL = [c for c in cases.SLICE_CASES + cases.CLAIM_CASES + cases.OTHER_CASES if not c[2].startswith("status.")]


@pytest.mark.parametrize(("doc", "field", "message"), [c[1:] for c in ALL], ids=[c[0] for c in ALL])
def test_the_api_server_refuses_with_the_same_message(post, doc, field, message):
    status, server = post(doc)
    assert status == 422, (status, server)
    assert _expected(field, message) in server, server


@pytest.mark.parametrize(
    ("pod_claims", "container_claims", "field", "message"),
    [c[1:] for c in cases.POD_CASES],
    ids=[c[0] for c in cases.POD_CASES],
)
def test_the_api_server_refuses_pod_claims_with_the_same_message(post, pod_claims, container_claims, field, message):
    doc = cases.pod_doc("p", *pod_claims)
    doc["spec"]["containers"][0]["resources"]["claims"] = container_claims
    status, server = post(doc)
    assert status == 422, (status, server)
    assert f"{field}: {message}" in server, server


def test_the_api_server_accepts_what_accelsched_accepts(post):
    docs = [
        cases.EXAMPLE_SLICE, cases.NVIDIA_COUNTERS, cases.NVIDIA_DEVICES, cases.CLAIM, cases.DEVICE_CLASS,
        cases.TEMPLATE,
        cases._slice(devices=None, sharedCounters=[{"name": "c", "counters": {"m": {"value": "-1"}}}]),
        cases._slice(devices=[{"name": "a", "capacity": {"memory": {"value": "-1Gi"}}}]),
        cases._claim(cases._exactly(count=0)),
        cases.pod_doc("p", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                      {"name": "nic", "resourceClaimName": "n"}),
    ]  # fmt: skip
    for doc in docs:
        doc = copy.deepcopy(doc)
        doc["metadata"].pop("namespace", None)
        status, server = post(doc)
        assert status == 201, (doc["kind"], doc["metadata"]["name"], server)
