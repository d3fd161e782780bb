"""The trace's GPUs as DRA devices and its GPU requests as ResourceClaims (``simulate --devices dra``).

The generic path's default is the device-plugin model (generic.py: the ``milli`` partition annotation,
``nvidia.com/gpu`` and ``accelsched.io/gpu-milli``). With DRA instead, each node's GPUs are devices ``gpu-0``..
of one ResourceSlice of the ``gpu.accelsched.io`` driver (its pool the node's name), with the attributes ``model``
(the trace's GPU model) and ``index``; when the workload shares GPUs every device also has a consumable capacity
``milli: 1000`` and ``allowMultipleAllocations: true``. A pod's GPU request becomes one claim made from a
ResourceClaimTemplate of its shape: whole GPUs are ``count: N`` devices of the class, a share one device with
``capacity.requests.milli``; a ``gpu_spec`` is a CEL selector on ``model``. (A whole-GPU request of a shareable
device consumes all of its ``milli``: with no request policy upstream's allocator takes the full capacity.)
The trace has no GPU memory, so the devices publish none.

Every object is built as the document a user would write and parsed by dra/objects.py; the state is the same
DRAState engine.Session.start attaches, and the claims are made as the resourceclaim controller makes them
(dra/claims.py). Nothing of DRA's semantics is repeated here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.dra import claims as claims_mod
from accelsched.dra import objects
from accelsched.dra.model import API_VERSION, DRAInputs, ResourceClaim
from accelsched.dra.state import DRAState
from accelsched.sim.trace import MILLI, Nodes

DRIVER = "gpu.accelsched.io"
DEVICE_CLASS = "gpu.accelsched.io"
MILLI_CAPACITY = "milli"
POD_CLAIM = "gpu"
SOURCE = "simulate --devices dra"
NAMESPACE = "default"


def device_class_doc() -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def slice_doc(node: str, gpus: int, model: str, sharing: bool) -> dict[str, Any]:
    """The node's GPUs, as the driver on it would publish them: one slice, the pool named after the node."""
    devices = []
    for i in range(gpus):
        device: dict[str, Any] = {
            "name": f"gpu-{i}",
            "attributes": {"model": {"string": model}, "index": {"int": i}},
        }
        if sharing:
            device["allowMultipleAllocations"] = True
            device["capacity"] = {MILLI_CAPACITY: {"value": str(MILLI)}}
        devices.append(device)
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def model_selector(models: frozenset[str]) -> str:
    """CEL accepting the devices of these GPU models (a gpu_spec)."""
    return f'device.attributes["{DRIVER}"].model in {json.dumps(sorted(models))}'


def template_doc(name: str, num_gpu: int, milli: int, models: frozenset[str]) -> dict[str, Any]:
    """A ResourceClaimTemplate for one pod shape: ``num_gpu`` whole devices, or one device's ``milli`` share."""
    exactly: dict[str, Any] = {"deviceClassName": DEVICE_CLASS}
    if num_gpu == 1 and milli < MILLI:
        exactly["capacity"] = {"requests": {MILLI_CAPACITY: str(milli)}}
    else:
        exactly["count"] = num_gpu
    if models:
        exactly["selectors"] = [{"cel": {"expression": model_selector(models)}}]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def template_name(num_gpu: int, milli: int, spec: int) -> str:
    share = f"milli-{milli}" if num_gpu == 1 and milli < MILLI else f"{num_gpu}x"
    return f"gpu-{share}-spec-{spec}"


def pod_claim_fields(template: str) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(spec.resourceClaims, the container's resources.claims) of a pod whose GPUs come from ``template``."""
    return [{"name": POD_CLAIM, "resourceClaimTemplateName": template}], [{"name": POD_CLAIM}]


def dra_inputs(nodes: Nodes, names: list[str], sharing: bool) -> DRAInputs:
    """The class and every GPU node's slice, parsed (the nodes named ``names``, in the trace's order)."""
    inputs = DRAInputs()
    cls = objects.parse_device_class(device_class_doc(), SOURCE)
    inputs.classes[cls.name] = cls
    for i, name in enumerate(names):
        if nodes.gpus[i]:
            doc = slice_doc(name, int(nodes.gpus[i]), nodes.models[int(nodes.model[i])], sharing)
            s = objects.parse_resource_slice(doc, SOURCE)
            inputs.slices[s.name] = s
    return inputs


@dataclass
class DRADevices:
    """The DRA side of one replay: the state on the cluster, the pods' claims, and the free milli per GPU it
    implies (for fragmentation, kept from the allocations so it costs nothing to read)."""

    state: DRAState
    gpu_free: np.ndarray  # nodes x MAX_GPUS_PER_NODE, milli
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # pod key -> its claim

    @classmethod
    def attach(cls, cluster: ClusterState, nodes: Nodes, names: list[str], sharing: bool, width: int) -> DRADevices:
        """cluster.dra = DRAState(...), as engine.Session.start does."""
        cluster.dra = DRAState(dra_inputs(nodes, names, sharing), cluster)
        free = np.zeros((cluster.n, width), dtype=np.int64)
        free[np.arange(width)[None, :] < nodes.gpus[:, None]] = MILLI
        return cls(cluster.dra, free)

    def template(self, num_gpu: int, milli: int, spec: int, models: frozenset[str]) -> str:
        name = template_name(num_gpu, milli, spec)
        key = f"{NAMESPACE}/{name}"
        templates = self.state.inputs.templates
        if key not in templates:
            templates[key] = objects.parse_resource_claim_template(template_doc(name, num_gpu, milli, models), SOURCE)
        return name

    def create_claims(self, pod: Pod) -> None:
        """The resourceclaim controller's part when the pod is created: its claim from its template."""
        for pc in claims_mod.pod_resource_claims(pod):
            template = self.state.inputs.templates[f"{pod.namespace}/{pc.resource_claim_template_name}"]
            claim = claims_mod.claim_from_template(pod, pc, template)
            claims_mod.set_claim_status(pod, pc, claim.name)
            self.state.update_claim(claim.key, claim)
            self.claims[pod.key] = claim

    def bound(self, pod: Pod, node: int) -> tuple[int, ...]:
        """The GPU indices the pod's claim was given on ``node``; their milli is taken."""
        claim = self.claims.get(pod.key)
        if claim is None:
            return ()
        assert claim.allocation is not None, f"{pod.key} bound without its claim allocated"
        taken = []
        for gpu, milli in claim_gpus(claim):
            self.gpu_free[node, gpu] -= milli
            taken.append(gpu)
        return tuple(sorted(taken))

    def failed(self, pod: Pod) -> None:
        """The pod is dropped (it fit nowhere): its claim is deleted with it."""
        claim = self.claims.pop(pod.key, None)
        if claim is not None:
            self.state.update_claim(claim.key, None)

    def released(self, pod: Pod, node: int) -> None:
        """After Scheduler.evict(pod, delete=True) freed the claim: its milli is free again here too."""
        claim = self.claims.pop(pod.key, None)
        if claim is not None and claim.allocation is not None:
            for gpu, milli in claim_gpus(claim):
                self.gpu_free[node, gpu] += milli


def claim_gpus(claim: ResourceClaim) -> list[tuple[int, int]]:
    """(GPU index, milli consumed) of each device the claim was allocated: a whole device when it names no
    consumed capacity (an exclusive one)."""
    assert claim.allocation is not None
    out = []
    for r in claim.allocation.results:
        milli = next((int(v) for k, v in r.consumed_capacity.items() if k.endswith(MILLI_CAPACITY)), MILLI)
        out.append((int(r.device.removeprefix("gpu-")), milli))
    return out
