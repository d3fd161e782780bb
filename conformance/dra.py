"""DRA (``resource.k8s.io/v1``) in the conformance oracle: object builders, the scenario classes, the parts of the
resourceclaim controller the harness plays on the real cluster, and the allocation validity check.

The real side runs no kube-controller-manager, so, as it plays the PV controller for volumes, the harness plays the
resourceclaim controller where a scenario needs it: a pod's ``resourceClaimTemplateName`` claims are created as the
controller creates them (generateName ``<pod>-<claim>-``, the ``resource.kubernetes.io/pod-claim-name``
annotation, the pod as controlling owner, the template's labels and annotations) and named in the pod's
``status.resourceClaimStatuses``; a preemption victim's reservations are removed and a claim reserved for nobody is
deallocated, and one the victim owned deleted. Offline, accelsched's loader makes the claims from the templates with
other random suffixes, so allocations are compared by the pod's claim name (``PodOutcome.claims``).

The upstream allocator is deterministic on a given node (pools sorted by driver and pool name, slices by name,
devices in slice order, first fit with backtracking, claims in the pod's order), so where accelsched binds a pod to
the node kube-scheduler chose, the allocations must be identical; every allocation (both sides) must also be valid:
devices that exist in the newest generation of their pool, reachable from the node, matching the class and request
selectors, the counts, the constraints, never allocated twice (beyond adminAccess or allowMultipleAllocations).
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

from conformance.objects import container, pod
from conformance.scenario import JSON, MAIN_NAMESPACE, Scenario

API = "resource.k8s.io/v1"
GPU_DRIVER = "gpu.example.com"
NIC_DRIVER = "nic.example.com"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
FINALIZER = "resource.kubernetes.io/delete-protection"
EXTENDED_CLAIM = "<extended-resources>"
EXTENDED_GPU = "example.com/gpu"
ALLOCATED_AT = "2026-01-01T00:00:00Z"  # kube-scheduler writes an allocation back as it read it, timestamp included
MODELS = ("a100", "h100", "l4")
MEMORY = {"a100": "40Gi", "h100": "80Gi", "l4": "24Gi"}
VERSIONS = ("1.2.0", "1.5.3", "2.0.0", "2.1.0-rc.1")
ROOTS = ("pci0000:00", "pci0000:40")
GPU_SELECTOR = f'device.driver == "{GPU_DRIVER}"'
NIC_SELECTOR = f'device.driver == "{NIC_DRIVER}"'
A = f'device.attributes["{GPU_DRIVER}"]'
C = f'device.capacity["{GPU_DRIVER}"]'
# Request selectors that every generated GPU can evaluate (quantities, semver, string and int ops).
SAFE_SELECTORS = (
    f'{A}.model == "h100"',
    f'{A}.model != "l4"',
    f'{A}.model.startsWith("a")',
    f'{A}.model.endsWith("00")',
    f'{A}.model.matches("^[ah]")',
    f'{A}.model in ["a100", "l4"]',
    f"{A}.index < 2",
    f"{A}.index % 2 == 0",
    f'{C}.memory.compareTo(quantity("40Gi")) >= 0',
    f'{C}.memory.isGreaterThan(quantity("30Gi"))',
    f'{C}.memory.isLessThan(quantity("48Gi"))',
    f'{A}.driverVersion.isGreaterThan(semver("1.5.0"))',
    f'{A}.driverVersion.compareTo(semver("2.0.0")) >= 0',
    f"{A}.healthy",
    f'has({A}.vendor) && {A}.vendor == "acme"',
    f'!has({A}.vendor) || {A}.vendor == "acme"',
)
# Selectors that fail at runtime on a GPU without the ``vendor`` attribute (a missing key is an error, not false).
UNGUARDED_SELECTORS = (f'{A}.vendor == "acme"', f'{A}.vendor.startsWith("ac")')


# ---------------------------------------------------------------------------------------------- object builders


def device_class(name: str, selectors: Iterable[str] = (), extended_resource_name: str | None = None) -> JSON:
    spec: JSON = {}
    if selectors:
        spec["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if extended_resource_name:
        spec["extendedResourceName"] = extended_resource_name
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def gpu(name: str, index: int, model: str, *, version: str = "1.5.3", root: str = ROOTS[0], vendor: bool = True,
        healthy: bool = True, memory: str | None = None) -> JSON:
    attrs: JSON = {"model": {"string": model}, "index": {"int": index}, "driverVersion": {"version": version},
                   "healthy": {"bool": healthy}, PCIE_ROOT: {"string": root}}
    if vendor:
        attrs["vendor"] = {"string": "acme"}
    return {"name": name, "attributes": attrs,
            "capacity": {"memory": {"value": memory or MEMORY[model]}, "compute": {"value": "100"}}}


def nic(name: str, root: str) -> JSON:
    return {"name": name, "attributes": {"kind": {"string": "rdma"}, PCIE_ROOT: {"string": root}},
            "capacity": {"bandwidth": {"value": "200G"}}}


def resource_slice(name: str, driver: str, pool: str, devices: list[JSON] | None = None, *, node: str | None = None,
                   all_nodes: bool = False, node_selector: JSON | None = None, generation: int = 1, count: int = 1,
                   shared_counters: list[JSON] | None = None) -> JSON:
    spec: JSON = {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count}}
    if node:
        spec["nodeName"] = node
    elif all_nodes:
        spec["allNodes"] = True
    elif node_selector:
        spec["nodeSelector"] = node_selector
    if devices is not None:
        spec["devices"] = devices
    if shared_counters:
        spec["sharedCounters"] = shared_counters
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def exactly(device_class_name: str, count: int = 1, selectors: Iterable[str] = (), mode: str = "",
            admin: bool = False, tolerations: list[JSON] | None = None, capacity: JSON | None = None) -> JSON:
    out: JSON = {"deviceClassName": device_class_name}
    if selectors:
        out["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if mode == "All":
        out["allocationMode"] = "All"
    elif count != 1 or mode == "ExactCount":
        out["allocationMode"] = "ExactCount"
        out["count"] = count
    if admin:
        out["adminAccess"] = True
    if tolerations:
        out["tolerations"] = tolerations
    if capacity:
        out["capacity"] = {"requests": capacity}
    return out


def claim_spec(requests: list[JSON], constraints: list[JSON] | None = None) -> JSON:
    devices: JSON = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"devices": devices}


def claim(name: str, spec: JSON, ns: str = MAIN_NAMESPACE) -> JSON:
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
            "spec": copy.deepcopy(spec)}


def template(name: str, spec: JSON, ns: str = MAIN_NAMESPACE, labels: dict[str, str] | None = None) -> JSON:
    body: JSON = {"spec": copy.deepcopy(spec)}
    if labels:
        body["metadata"] = {"labels": labels}
    return {"apiVersion": API, "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": ns},
            "spec": body}


def allocated(body: JSON, node: str | None, results: list[JSON], pods: list[str]) -> JSON:
    """``body`` (a claim) as kube-scheduler leaves it allocated: results, the node selector, reserved for ``pods``
    (names; their uids are filled in when the real run creates them)."""
    alloc: JSON = {"devices": {"results": results}, "allocationTimestamp": ALLOCATED_AT}
    if node:
        alloc["nodeSelector"] = {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    body["metadata"]["finalizers"] = [FINALIZER]
    body["status"] = {"allocation": alloc,
                      "reservedFor": [{"resource": "pods", "name": p, "uid": pod_uid(p)} for p in pods]}
    return body


def pod_uid(name: str) -> str:
    """A bound pod's uid in the scenario (the real API server assigns its own; the harness rewrites reservedFor
    with it): stable, derived from the name."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"conformance/{name}"))


def use_claims(body: JSON, claims: list[tuple[str, str, str]], in_container: bool = False) -> JSON:
    """Give pod ``body`` claims: (pod claim name, "claim"|"template", object name)."""
    refs = []
    for name, kind, obj in claims:
        ref = {"name": name, ("resourceClaimName" if kind == "claim" else "resourceClaimTemplateName"): obj}
        refs.append(ref)
    body["spec"]["resourceClaims"] = refs
    if in_container:
        body["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": n} for n, _, _ in claims]
    return body


# ---------------------------------------------------------------------------------------------- scenario classes
# Class names end in ``-class`` and pools are named after nodes (or ``*-pool``): the real run renames them by exact
# string value, so no other string (a request or pod claim name) may equal one. Each fills a generator.Builder
# (``b``). Shapes favour few nodes and few devices per node (so "cannot allocate all claims" and its neighbours
# show up).


class _Devices:
    """Per scenario: the GPUs made per node (raw devices) and which are in use (by bound claims)."""

    def __init__(self) -> None:
        self.by_node: dict[str, list[JSON]] = {}
        self.used: set[tuple[str, str]] = set()  # (pool, device)


def _small_nodes(b: Any, lo: int = 1, hi: int = 4) -> list[str]:
    b.add_nodes(b.rng.randint(lo, hi))
    return [n["metadata"]["name"] for n in b.nodes]


def _gpus(b: Any, count: int, vendor_p: float = 1.0, same_model: str | None = None) -> list[JSON]:
    out = []
    for i in range(count):
        model = same_model or b.pick(MODELS)
        out.append(gpu(f"gpu-{i}", i, model, version=b.pick(VERSIONS), root=ROOTS[(i * 2) // max(1, count)],
                       vendor=b.chance(vendor_p), healthy=b.chance(0.85)))
    return out


def _gpu_slices(b: Any, nodes: list[str], lo: int = 0, hi: int = 4, vendor_p: float = 1.0,
                devices: _Devices | None = None) -> _Devices:
    devices = devices or _Devices()
    for n in nodes:
        count = b.rng.randint(lo, hi)
        if count == 0 and b.chance(0.5):
            continue  # no slice at all for this node
        made = _gpus(b, count, vendor_p)
        devices.by_node[n] = made
        b.objects.append(resource_slice(f"{n}-gpu", GPU_DRIVER, n, made, node=n))
    return devices


def _gpu_class(b: Any, extra: Iterable[str] = (), name: str = "gpu-class", **kw: Any) -> str:
    b.objects.append(device_class(name, [GPU_SELECTOR, *extra], **kw))
    return name


def _bound_with_claims(b: Any, devices: _Devices, klass: str = "gpu-class", count: int | None = None,
                       priority: str | None = None) -> None:
    """Bound pods each holding a claim on 1-2 free GPUs of their node (allocated, reserved for them)."""
    for i in range(b.rng.randint(0, 3) if count is None else count):
        free = {n: [d for d in ds if (n, d["name"]) not in devices.used] for n, ds in devices.by_node.items()}
        nodes = [n for n, ds in free.items() if ds]
        if not nodes:
            return
        where = b.pick(nodes)
        take = free[where][: b.rng.randint(1, min(2, len(free[where])))]
        name = f"held-{i}"
        spec = claim_spec([{"name": "gpu", "exactly": exactly(klass, len(take))}])
        results = [{"request": "gpu", "driver": GPU_DRIVER, "pool": where, "device": d["name"]} for d in take]
        body = use_claims(_plain_pod(b, f"bound-dra-{i}", priority=priority), [("gpu", "claim", name)])
        if not b.place(body, [where]):
            continue
        body["metadata"]["uid"] = pod_uid(body["metadata"]["name"])
        devices.used.update((where, d["name"]) for d in take)
        b.objects.append(allocated(claim(name, spec), where, results, [body["metadata"]["name"]]))


def _plain_pod(b: Any, name: str, priority: str | None = None, **spec: Any) -> JSON:
    req = {"cpu": b.pick(("100m", "250m", "500m", "1")), "memory": b.pick(("128Mi", "512Mi", "1Gi"))}
    body = pod(name, [container("main", req)], labels={"app": b.pick(("web", "db", "cache"))}, **spec)
    if priority:
        body["spec"]["priorityClassName"] = priority
    return body


def _pending_with(b: Any, i: int, spec: JSON, template_p: float = 0.5, claim_name: str = "gpu",
                  extra: list[tuple[str, JSON]] | None = None, **pod_spec: Any) -> JSON:
    """A pending pod ``pod-<i>`` with a claim of ``spec`` (from a template or a claim of its own), plus ``extra``
    claims, each (pod claim name, spec)."""
    refs = []
    for j, (name, s) in enumerate([(claim_name, spec), *(extra or [])]):
        if b.chance(template_p):
            obj = f"tmpl-{i}-{j}"
            b.objects.append(template(obj, s, labels={"app": "dra"} if b.chance(0.3) else None))
            refs.append((name, "template", obj))
        else:
            obj = f"claim-{i}-{j}"
            b.objects.append(claim(obj, s))
            refs.append((name, "claim", obj))
    body = _plain_pod(b, f"pod-{i}", **pod_spec)
    b.pending.append(use_claims(body, refs, in_container=b.chance(0.5)))
    return body


def cls_dra_basic(b: Any) -> None:
    nodes = _small_nodes(b)
    devices = _gpu_slices(b, nodes)
    klass = _gpu_class(b)
    _bound_with_claims(b, devices)
    for i in range(b.rng.randint(1, 3)):
        _pending_with(b, i, claim_spec([{"name": "gpu", "exactly": exactly(klass, b.pick((1, 1, 2, 3)))}]))


def cls_dra_cel(b: Any) -> None:
    nodes = _small_nodes(b)
    devices = _gpu_slices(b, nodes, 0, 5, vendor_p=0.6)
    classes = [_gpu_class(b)]
    if b.chance(0.5):
        classes.append(_gpu_class(b, [f'{C}.memory.compareTo(quantity("40Gi")) >= 0'], name="gpu-big-class"))
    if b.chance(0.3):
        classes.append(_gpu_class(b, [f'{A}.model.startsWith("h") || {A}.index == 0'], name="gpu-h-class"))
    _bound_with_claims(b, devices)
    for i in range(b.rng.randint(1, 3)):
        sels = b.rng.sample(SAFE_SELECTORS, b.rng.randint(0, 2))
        _pending_with(b, i, claim_spec([{"name": "gpu", "exactly": exactly(b.pick(classes), b.pick((1, 1, 2)),
                                                                            sels)}]))


def cls_dra_celerror(b: Any) -> None:
    nodes = _small_nodes(b, 1, 3)
    devices = _gpu_slices(b, nodes, 1, 3, vendor_p=0.5)
    in_class = b.chance(0.3)
    bad = b.pick(UNGUARDED_SELECTORS)
    klass = _gpu_class(b, [bad] if in_class else [])
    _bound_with_claims(b, devices, count=b.rng.randint(0, 1))
    for i in range(b.rng.randint(1, 2)):
        sels = [] if in_class else [b.pick((bad, *SAFE_SELECTORS[:4]))]
        _pending_with(b, i, claim_spec([{"name": "gpu", "exactly": exactly(klass, 1, sels)}]))


def cls_dra_all(b: Any) -> None:
    nodes = _small_nodes(b, 1, 3)
    devices = _gpu_slices(b, nodes, 0, 4)
    klass = _gpu_class(b)
    _bound_with_claims(b, devices, count=b.rng.randint(0, 2))
    for i in range(b.rng.randint(1, 2)):
        sels = b.rng.sample(SAFE_SELECTORS[:12], b.rng.randint(0, 1))
        mode = b.pick(("All", "All", "ExactCount"))
        _pending_with(b, i, claim_spec([{"name": "gpu", "exactly": exactly(klass, b.pick((1, 2, 4)), sels, mode)}]))


def _nic_slices(b: Any, nodes: list[str]) -> None:
    for n in nodes:
        if b.chance(0.8):
            nics = [nic(f"nic-{j}", ROOTS[j % 2] if b.chance(0.8) else ROOTS[0]) for j in range(b.rng.randint(1, 2))]
            b.objects.append(resource_slice(f"{n}-nic", NIC_DRIVER, f"{n}-nics", nics, node=n))


def cls_dra_constraints(b: Any) -> None:
    nodes = _small_nodes(b, 1, 3)
    devices = _gpu_slices(b, nodes, 1, 4)
    _nic_slices(b, nodes)
    gpu_class = _gpu_class(b)
    b.objects.append(device_class("nic-class", [NIC_SELECTOR]))
    _bound_with_claims(b, devices, count=b.rng.randint(0, 2))
    for i in range(b.rng.randint(1, 2)):
        requests = [{"name": "gpu", "exactly": exactly(gpu_class, b.pick((1, 2)))}]
        if b.chance(0.7):
            requests.append({"name": "nic", "exactly": exactly("nic-class")})
        constraints = []
        kind = b.pick(("match", "match", "distinct", "both"))
        if kind in ("match", "both"):
            names = [r["name"] for r in requests] if b.chance(0.6) else []
            constraints.append({"requests": names, "matchAttribute": PCIE_ROOT} if names else
                               {"matchAttribute": PCIE_ROOT})
        if kind in ("distinct", "both"):
            constraints.append({"requests": ["gpu"], "distinctAttribute": f"{GPU_DRIVER}/model"})
        if b.chance(0.15):
            constraints.append({"requests": ["gpu"], "matchAttribute": f"{GPU_DRIVER}/model"})
        _pending_with(b, i, claim_spec(requests, constraints))


def cls_dra_firstavailable(b: Any) -> None:
    nodes = _small_nodes(b, 1, 4)
    devices = _gpu_slices(b, nodes, 0, 4)
    klass = _gpu_class(b)
    _bound_with_claims(b, devices, count=b.rng.randint(0, 2))
    for i in range(b.rng.randint(1, 2)):
        subs = [{"name": "big", **exactly(klass, b.pick((2, 3)), [f'{A}.model == "h100"'])},
                {"name": "mid", **exactly(klass, 2)},
                {"name": "one", **exactly(klass, 1, b.rng.sample(SAFE_SELECTORS[:6], b.rng.randint(0, 1)))}]
        subs = subs[: b.rng.randint(2, 3)]
        requests = [{"name": "gpu", "firstAvailable": subs}]
        _pending_with(b, i, claim_spec(requests))


def cls_dra_admin(b: Any) -> None:
    nodes = _small_nodes(b, 1, 3)
    devices = _gpu_slices(b, nodes, 1, 3)
    klass = _gpu_class(b)
    _bound_with_claims(b, devices, count=b.rng.randint(1, 3))
    b.namespace_labels[ADMIN_LABEL] = "true"  # adminAccess needs it; the API server refuses a claim otherwise
    for i in range(b.rng.randint(1, 2)):
        admin = b.chance(0.7)
        mode = "All" if admin and b.chance(0.4) else ""
        _pending_with(b, i, claim_spec([{"name": "gpu", "exactly": exactly(klass, b.pick((1, 2)), mode=mode,
                                                                            admin=admin)}]))


def cls_dra_taints(b: Any) -> None:
    nodes = _small_nodes(b, 1, 3)
    devices = _Devices()
    for n in nodes:
        made = _gpus(b, b.rng.randint(1, 3))
        for d in made:
            if b.chance(0.5):
                t = {"key": b.pick(("example.com/unhealthy", "example.com/maintenance")),
                     "effect": b.pick(("NoSchedule", "NoExecute", "None"))}
                if b.chance(0.6):
                    t["value"] = b.pick(("yes", "no"))
                d["taints"] = [t]
        devices.by_node[n] = made
        b.objects.append(resource_slice(f"{n}-gpu", GPU_DRIVER, n, made, node=n))
    klass = _gpu_class(b)
    for i in range(b.rng.randint(1, 3)):
        tols = []
        for _ in range(b.rng.randint(0, 2)):
            tol: JSON = {"key": b.pick(("example.com/unhealthy", "example.com/maintenance", "")),
                         "operator": b.pick(("Equal", "Exists"))}
            if not tol["key"]:
                tol["operator"] = "Exists"
            if tol["operator"] == "Equal":
                tol["value"] = b.pick(("yes", "no"))
            if b.chance(0.5):
                tol["effect"] = b.pick(("NoSchedule", "NoExecute"))
            tols.append(tol)
        _pending_with(b, i, claim_spec([{"name": "gpu", "exactly": exactly(klass, b.pick((1, 1, 2)),
                                                                            tolerations=tols)}]))


MIG_PROFILES = (("1g.10gb", 1, 1), ("2g.20gb", 2, 2), ("3g.40gb", 4, 3), ("7g.80gb", 8, 7))  # (name, memory, sm)


def _mig_devices(gpu_index: int, counter_set: str, full: bool) -> list[JSON]:
    """A MIG-like GPU: 8 memory slices; each placement of each profile a device consuming the slices it covers."""
    out = []
    for name, mem, sm in MIG_PROFILES:
        if name == "7g.80gb" and not full:
            continue
        for start in range(0, 8, mem):
            if start + mem > 8:
                break
            counters = {f"memory-slice-{s}": {"value": "1"} for s in range(start, start + mem)}
            counters["multiprocessors"] = {"value": str(sm * 14)}
            out.append({"name": f"gpu-{gpu_index}-mig-{name.replace('.', '')}-{start}",  # no dots in a name
                        "attributes": {"profile": {"string": name}, "parent": {"int": gpu_index},
                                       "type": {"string": "mig"}},
                        "capacity": {"memory": {"value": f"{mem * 10}Gi"}},
                        "consumesCounters": [{"counterSet": counter_set, "counters": counters}]})
    return out


def cls_dra_partition(b: Any) -> None:
    nodes = _small_nodes(b, 1, 3)
    for n in nodes:
        gpus = b.rng.randint(0, 1 if b.chance(0.5) else 2)
        if not gpus:
            continue
        sets = []
        devs: list[JSON] = []
        for g in range(gpus):
            counters = {f"memory-slice-{s}": {"value": "1"} for s in range(8)}
            counters["multiprocessors"] = {"value": "98"}
            sets.append({"name": f"gpu-{g}-counters", "counters": counters})
            devs.extend(_mig_devices(g, f"gpu-{g}-counters", full=b.chance(0.7)))
        # 1.35+: a slice holds devices or sharedCounters, not both: one pool of two slices.
        b.objects.append(resource_slice(f"{n}-counters", GPU_DRIVER, n, node=n, count=2, shared_counters=sets))
        b.objects.append(resource_slice(f"{n}-mig", GPU_DRIVER, n, devs, node=n, count=2))
    b.objects.append(device_class("mig-class", [GPU_SELECTOR, f'{A}.type == "mig"']))
    for i in range(b.rng.randint(1, 3)):
        profile = b.pick([p[0] for p in MIG_PROFILES])
        sels = [f'{A}.profile == "{profile}"']
        requests = [{"name": "mig", "exactly": exactly("mig-class", b.pick((1, 1, 2, 3)), sels)}]
        if b.chance(0.3):
            requests.append({"name": "small", "exactly": exactly("mig-class", 1, [f'{A}.profile == "1g.10gb"'])})
        _pending_with(b, i, claim_spec(requests), claim_name="mig")


def cls_dra_consumable(b: Any) -> None:
    nodes = _small_nodes(b, 1, 3)
    for n in nodes:
        if b.chance(0.2):
            continue
        devs = []
        for j in range(b.rng.randint(1, 2)):
            policy: JSON = {"default": "10Gi"}
            if b.chance(0.5):
                policy["validRange"] = {"min": "5Gi", "step": "5Gi"}
            else:
                policy["validValues"] = ["10Gi", "20Gi", "40Gi"]
            devs.append({"name": f"shared-{j}", "allowMultipleAllocations": True,
                         "attributes": {"model": {"string": b.pick(MODELS)}},
                         "capacity": {b.pick(("memory", "memory", "memory", f"{GPU_DRIVER}/memory")): {
                             "value": b.pick(("40Gi", "80Gi")), "requestPolicy": policy}}})
        b.objects.append(resource_slice(f"{n}-gpu", GPU_DRIVER, n, devs, node=n))
    klass = _gpu_class(b)
    for i in range(b.rng.randint(1, 3)):
        # Upstream looks a requested capacity up by the name as written, in the device's capacity map as written
        # (an unqualified "memory" and "gpu.example.com/memory" differ there): both spellings on both sides.
        name = b.pick(("memory", "memory", f"{GPU_DRIVER}/memory"))
        cap = {name: b.pick(("10Gi", "20Gi", "40Gi", "60Gi"))} if b.chance(0.8) else None
        _pending_with(b, i, claim_spec([{"name": "gpu", "exactly": exactly(klass, b.pick((1, 1, 2)),
                                                                            capacity=cap)}]))


def cls_dra_shared(b: Any) -> None:
    nodes = _small_nodes(b, 1, 4)
    devices = _gpu_slices(b, nodes, 0, 3)
    klass = _gpu_class(b)
    spec = claim_spec([{"name": "gpu", "exactly": exactly(klass, b.pick((1, 2)))}])
    if b.chance(0.4) and devices.by_node:
        # The shared claim is already allocated and reserved for a bound pod.
        where = b.pick(sorted(devices.by_node))
        take = devices.by_node[where][:1]
        user = use_claims(_plain_pod(b, "bound-shared"), [("gpu", "claim", "shared")])
        if take and b.place(user, [where]):
            user["metadata"]["uid"] = pod_uid("bound-shared")
            spec = claim_spec([{"name": "gpu", "exactly": exactly(klass, 1)}])
            results = [{"request": "gpu", "driver": GPU_DRIVER, "pool": where, "device": take[0]["name"]}]
            b.objects.append(allocated(claim("shared", spec), where, results, ["bound-shared"]))
            devices.used.add((where, take[0]["name"]))
        else:
            b.objects.append(claim("shared", spec))
    else:
        b.objects.append(claim("shared", spec))
    _bound_with_claims(b, devices, count=b.rng.randint(0, 2))
    for i in range(b.rng.randint(2, 3)):
        body = _plain_pod(b, f"pod-{i}")
        refs = [("gpu", "claim", "shared")]
        if b.chance(0.3):
            obj = f"tmpl-{i}"
            b.objects.append(template(obj, claim_spec([{"name": "gpu", "exactly": exactly(klass)}])))
            refs.append(("own", "template", obj))
        if b.chance(0.25):
            body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": b.pick(nodes)}
        b.pending.append(use_claims(body, refs))


def cls_dra_generations(b: Any) -> None:
    nodes = _small_nodes(b, 1, 3)
    klass = _gpu_class(b)
    for n in nodes:
        shape = b.pick(("old+new", "old+new", "incomplete", "plain"))
        new = _gpus(b, b.rng.randint(0, 3))
        if shape == "plain":
            b.objects.append(resource_slice(f"{n}-gpu", GPU_DRIVER, n, new, node=n))
        elif shape == "old+new":
            old = [gpu(f"old-gpu-{j}", 10 + j, b.pick(MODELS)) for j in range(b.rng.randint(1, 4))]
            b.objects.append(resource_slice(f"{n}-gpu-gen1", GPU_DRIVER, n, old, node=n, generation=1))
            b.objects.append(resource_slice(f"{n}-gpu-gen2", GPU_DRIVER, n, new, node=n, generation=2))
        else:  # one slice of a pool announced as two: the pool is incomplete
            b.objects.append(resource_slice(f"{n}-gpu-a", GPU_DRIVER, n, new, node=n, count=2))
    for i in range(b.rng.randint(1, 2)):
        mode = b.pick(("", "", "All"))
        _pending_with(b, i, claim_spec([{"name": "gpu", "exactly": exactly(klass, b.pick((1, 2)), mode=mode)}]))


def cls_dra_network(b: Any) -> None:
    nodes = _small_nodes(b, 2, 4)
    devices = _gpu_slices(b, nodes, 0, 2)
    klass = _gpu_class(b)
    net = [gpu(f"net-gpu-{j}", 20 + j, b.pick(MODELS)) for j in range(b.rng.randint(1, 3))]
    how = b.pick(("all", "selector", "selector"))
    if how == "all":
        b.objects.append(resource_slice("net-gpu", GPU_DRIVER, "net-pool", net, all_nodes=True))
    else:
        rack = b.pick(("rack-0", "rack-1"))
        b.objects.append(resource_slice("net-gpu", GPU_DRIVER, "net-pool", net, node_selector={"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "example.com/rack", "operator": "In", "values": [rack]}]}]}))
    _bound_with_claims(b, devices, count=b.rng.randint(0, 2))
    for i in range(b.rng.randint(1, 3)):
        sels = [f'{A}.index >= 20'] if b.chance(0.3) else []
        _pending_with(b, i, claim_spec([{"name": "gpu", "exactly": exactly(klass, b.pick((1, 2, 3)), sels)}]))


def cls_dra_noclass(b: Any) -> None:
    nodes = _small_nodes(b, 1, 3)
    _gpu_slices(b, nodes, 1, 2)
    klass = _gpu_class(b)
    for i in range(b.rng.randint(1, 2)):
        missing = b.chance(0.7)
        requests = [{"name": "gpu", "exactly": exactly("no-such-class" if missing else klass)}]
        if b.chance(0.3):
            requests.insert(0, {"name": "first", "exactly": exactly(klass)})
        _pending_with(b, i, claim_spec(requests))


def cls_dra_extended(b: Any) -> None:
    nodes = _small_nodes(b, 1, 3)
    devices = _gpu_slices(b, nodes, 0, 3)
    _gpu_class(b, name="gpu-ext-class", extended_resource_name=EXTENDED_GPU)
    for n in b.nodes:  # some nodes serve it from a device plugin instead
        if b.chance(0.3):
            count = str(b.pick((1, 2)))
            for where in ("capacity", "allocatable"):
                n["status"][where][EXTENDED_GPU] = count
    del devices
    for i in range(b.rng.randint(1, 2)):
        count = str(b.pick((1, 1, 2, 3)))
        body = pod(f"pod-{i}", [container("main", {"cpu": "100m", EXTENDED_GPU: count})])
        b.pending.append(body)


def cls_dra_mixed(b: Any) -> None:
    nodes = _small_nodes(b, 2, 4)
    devices = _gpu_slices(b, nodes, 0, 3)
    klass = _gpu_class(b)
    for n in b.nodes:
        if b.chance(0.3):
            n["spec"]["taints"] = [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]
    _bound_with_claims(b, devices)
    for i in range(b.rng.randint(1, 3)):
        spec: JSON = {}
        if b.chance(0.4):
            spec["nodeSelector"] = {"example.com/rack": b.pick(("rack-0", "rack-1"))}
        if b.chance(0.3):
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        body = _pending_with(b, i, claim_spec([{"name": "gpu", "exactly": exactly(klass, b.pick((1, 2)))}]), **spec)
        if b.chance(0.35):
            body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = b.pick(("3", "6", "12"))


def cls_dra_preemption(b: Any) -> None:
    nodes = _small_nodes(b, 1, 3)
    devices = _gpu_slices(b, nodes, 1, 2)
    klass = _gpu_class(b)
    _bound_with_claims(b, devices, count=b.rng.randint(1, 3), priority="low")
    for i in range(b.rng.randint(1, 2)):
        body = _pending_with(b, i, claim_spec([{"name": "gpu", "exactly": exactly(klass, b.pick((1, 2)))}]),
                             priority=b.pick(("high", "high", "mid")))
        if b.chance(0.6):  # needs room: preemption for cpu (DRA failures are unresolvable: never preempted for)
            body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = b.pick(("2", "4", "6"))


CLASSES: dict[str, tuple[Callable[[Any], None], int]] = {
    "dra-basic": (cls_dra_basic, 3),
    "dra-cel": (cls_dra_cel, 3),
    "dra-celerror": (cls_dra_celerror, 1),
    "dra-all": (cls_dra_all, 2),
    "dra-constraints": (cls_dra_constraints, 3),
    "dra-firstavailable": (cls_dra_firstavailable, 2),
    "dra-admin": (cls_dra_admin, 1),
    "dra-taints": (cls_dra_taints, 2),
    "dra-partition": (cls_dra_partition, 2),
    "dra-consumable": (cls_dra_consumable, 2),
    "dra-shared": (cls_dra_shared, 2),
    "dra-generations": (cls_dra_generations, 1),
    "dra-network": (cls_dra_network, 2),
    "dra-noclass": (cls_dra_noclass, 1),
    "dra-extended": (cls_dra_extended, 2),
    "dra-mixed": (cls_dra_mixed, 2),
    "dra-preemption": (cls_dra_preemption, 2),
}
GROUP = "dra"


# ---------------------------------------------------------------------------------------------- the real cluster


def write_claim_status(kube: Any, resource: Any, obj: JSON, uids: dict[str, str]) -> None:
    """An allocated claim's status, its reservedFor pods' uids filled in from the pods as created."""
    status = copy.deepcopy(obj["status"])
    ns = obj["metadata"]["namespace"]
    for ref in status.get("reservedFor") or []:
        ref["uid"] = uids.get(f"{ns}/{ref['name']}", "") or "00000000-0000-0000-0000-000000000000"
    kube.patch(resource, obj["metadata"]["name"], {"status": status}, ns, sub="status",
               content_type="application/merge-patch+json")


def make_template_claims(kube: Any, resources: dict[str, Any], body: JSON) -> list[JSON]:
    """The resourceclaim controller's work for a new pod: one claim per template reference, then the pod's
    status.resourceClaimStatuses. Returns the claims made (for deletion)."""
    ns = body["metadata"]["namespace"]
    name = body["metadata"]["name"]
    made, statuses = [], []
    for ref in body["spec"].get("resourceClaims") or []:
        tname = ref.get("resourceClaimTemplateName")
        if not tname:
            continue
        tmpl = kube.get(resources["ResourceClaimTemplate"], tname, ns)
        meta = (tmpl.get("spec") or {}).get("metadata") or {}
        generate = f"{name}-{ref['name']}-"
        if len(generate) > 57:  # the controller's proportional truncation
            generate = (name[: len(name) * 57 // len(generate)] + "-" + ref["name"][: len(ref["name"]) * 57 //
                                                                                    len(generate)])
        new = {"apiVersion": API, "kind": "ResourceClaim",
               "metadata": {"generateName": generate, "namespace": ns,
                            "annotations": {**(meta.get("annotations") or {}), POD_CLAIM_ANNOTATION: ref["name"]},
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                                 "uid": body["metadata"]["uid"], "controller": True}]},
               "spec": tmpl["spec"]["spec"]}
        if meta.get("labels"):
            new["metadata"]["labels"] = meta["labels"]
        got = kube.create(resources["ResourceClaim"], new, ns)
        made.append({"kind": "ResourceClaim", "metadata": {"name": got["metadata"]["name"], "namespace": ns}})
        statuses.append({"name": ref["name"], "resourceClaimName": got["metadata"]["name"]})
    if statuses:
        kube.patch(resources["Pod"], name, {"status": {"resourceClaimStatuses": statuses}}, ns, sub="status",
                   content_type="application/merge-patch+json")
    return made


def pod_claim_names(body: JSON) -> list[tuple[str, str]]:
    """(pod claim name, ResourceClaim name) of a pod as the API holds it; '' where no claim was made yet."""
    statuses = {s["name"]: s.get("resourceClaimName") or "" for s in
                (body.get("status") or {}).get("resourceClaimStatuses") or []}
    out = []
    for ref in (body.get("spec") or {}).get("resourceClaims") or []:
        out.append((ref["name"], ref.get("resourceClaimName") or statuses.get(ref["name"], "")))
    return out


def read_allocations(kube: Any, resource: Any, body: JSON, back: dict[str, str]) -> list[JSON]:
    """Each pod claim's status.allocation.devices.results, as kube-scheduler wrote them (names canonical)."""
    ns = body["metadata"]["namespace"]
    out = []
    names = pod_claim_names(body)
    ext = ((body.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if ext:
        names.append((EXTENDED_CLAIM, ext))
    for pod_name, claim_name in names:
        results: list[JSON] = []
        if claim_name:
            with contextlib.suppress(Exception):
                got = kube.get(resource, claim_name, ns)
                for r in (((got.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                        "results") or []:
                    results.append({"request": r["request"], "driver": r["driver"],
                                    "pool": back.get(r["pool"], r["pool"]), "device": r["device"]})
        out.append({"name": pod_name, "results": results})
    return out


def release_claims(kube: Any, resource: Any, victim: JSON | None) -> None:
    """The resourceclaim controller after a pod is gone: its reservations removed, a claim reserved for nobody
    deallocated (its finalizer dropped), a claim it owned (from a template) deleted."""
    if not victim:
        return
    ns = victim["metadata"]["namespace"]
    uid = victim["metadata"].get("uid")
    merge = "application/merge-patch+json"
    for _, claim_name in pod_claim_names(victim):
        if not claim_name:
            continue
        with contextlib.suppress(Exception):
            got = kube.get(resource, claim_name, ns)
            owners = got["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == uid and o.get("controller") for o in owners):
                kube.patch(resource, claim_name, {"metadata": {"finalizers": None}}, ns, content_type=merge)
                kube.request("DELETE", resource.path(ns, claim_name), {"gracePeriodSeconds": 0})
                continue
            status = got.get("status") or {}
            left = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
            if left:
                kube.patch(resource, claim_name, {"status": {"reservedFor": left}}, ns, sub="status",
                           content_type=merge)
            else:
                kube.patch(resource, claim_name, {"status": {"reservedFor": None, "allocation": None}}, ns,
                           sub="status", content_type=merge)
                kube.patch(resource, claim_name, {"metadata": {"finalizers": None}}, ns, content_type=merge)


# ---------------------------------------------------------------------------------------------- validity


def _fraction(text: str) -> Fraction:
    from accelsched.api.quantity import parse_fraction

    return Fraction(parse_fraction(str(text)))


def _model_device(raw: JSON, driver: str) -> Any:
    """A raw slice device as accelsched.dra.model.Device, for accelsched.dra.cel (names qualified by driver)."""
    from accelsched.dra import model

    def qualify(name: str) -> str:
        return name if "/" in name else f"{driver}/{name}"

    attrs: dict[str, Any] = {}
    for name, value in (raw.get("attributes") or {}).items():
        if "version" in value:
            attrs[qualify(name)] = model.Version(value["version"])
        else:
            attrs[qualify(name)] = next(iter(value.values()))
    caps = {qualify(n): model.DeviceCapacity(_fraction(c["value"])) for n, c in (raw.get("capacity") or {}).items()}
    return model.Device(name=raw["name"], attributes=attrs, capacity=caps,
                        allow_multiple_allocations=bool(raw.get("allowMultipleAllocations")))


def _node_selected(node: JSON, selector: JSON | None) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    for term in (selector or {}).get("nodeSelectorTerms") or []:
        ok = True
        for e in term.get("matchExpressions") or []:
            have = labels.get(e["key"])
            op = e["operator"]
            if op == "In":
                ok &= have in e.get("values", [])
            elif op == "NotIn":
                ok &= have not in e.get("values", [])
            elif op == "Exists":
                ok &= have is not None
            elif op == "DoesNotExist":
                ok &= have is None
        for f in term.get("matchFields") or []:
            ok &= (node["metadata"]["name"] in f.get("values", [])) == (f["operator"] == "In")
        if ok:
            return True
    return False


class _World:
    """The scenario's DRA objects, indexed: newest-generation devices, classes, claim specs by pod claim."""

    def __init__(self, scenario: Scenario) -> None:
        docs = scenario.documents()
        self.nodes = {n["metadata"]["name"]: n for n in docs if n["kind"] == "Node"}
        self.classes = {c["metadata"]["name"]: c for c in docs if c["kind"] == "DeviceClass"}
        slices = [s for s in docs if s["kind"] == "ResourceSlice"]
        newest: dict[tuple[str, str], int] = {}
        for s in slices:
            pid = (s["spec"]["driver"], s["spec"]["pool"]["name"])
            newest[pid] = max(newest.get(pid, 0), s["spec"]["pool"]["generation"])
        self.devices: dict[tuple[str, str, str], tuple[JSON, JSON]] = {}  # (driver, pool, device) -> (dev, slice)
        self.counters: dict[tuple[str, str, str, str], Fraction] = {}  # (driver, pool, set, counter) -> value
        for s in slices:
            pid = (s["spec"]["driver"], s["spec"]["pool"]["name"])
            if s["spec"]["pool"]["generation"] != newest[pid]:
                continue
            for cs in s["spec"].get("sharedCounters") or []:
                for counter, amount in (cs.get("counters") or {}).items():
                    self.counters[(*pid, cs["name"], counter)] = _fraction(amount["value"])
            for d in s["spec"].get("devices") or []:
                self.devices[(*pid, d["name"])] = (d, s)
        self.claims = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in docs
                       if c["kind"] == "ResourceClaim"}
        self.templates = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in docs
                          if c["kind"] == "ResourceClaimTemplate"}
        self.pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in docs if p["kind"] == "Pod"}

    def spec_of(self, pod_key: str, pod_claim: str) -> tuple[JSON | None, str]:
        """The claim spec behind a pod's claim and a key naming the claim object (shared claims share it)."""
        body = self.pods.get(pod_key)
        ns = pod_key.split("/", 1)[0]
        for ref in ((body or {}).get("spec") or {}).get("resourceClaims") or []:
            if ref["name"] != pod_claim:
                continue
            if ref.get("resourceClaimName"):
                c = self.claims.get(f"{ns}/{ref['resourceClaimName']}")
                return (c or {}).get("spec"), f"claim:{ns}/{ref['resourceClaimName']}"
            t = self.templates.get(f"{ns}/{ref.get('resourceClaimTemplateName')}")
            return ((t or {}).get("spec") or {}).get("spec"), f"template:{pod_key}/{pod_claim}"
        return None, ""

    def reachable(self, key: tuple[str, str, str], node: str) -> bool:
        _, sl = self.devices[key]
        spec = sl["spec"]
        n = self.nodes.get(node)
        if n is None:
            return False
        if spec.get("nodeName"):
            return bool(spec["nodeName"] == node)
        if spec.get("allNodes"):
            return True
        if spec.get("nodeSelector"):
            return _node_selected(n, spec["nodeSelector"])
        return True


def _selectors_match(exprs: list[str], raw: JSON, driver: str) -> str:
    """'' when every expression is true for the device, else why not."""
    from accelsched.dra.cel import CELError, compile_selector

    device = _model_device(raw, driver)
    for e in exprs:
        try:
            if not compile_selector(e).matches(device, driver):
                return f"selector {e!r} false"
        except CELError as exc:
            return f"selector {e!r}: {exc}"
    return ""


def _sub_requests(spec: JSON) -> dict[str, JSON]:
    """result request name -> the exactly/subrequest body it allocates for."""
    out = {}
    for r in (spec.get("devices") or {}).get("requests") or []:
        if r.get("exactly"):
            out[r["name"]] = r["exactly"]
        for s in r.get("firstAvailable") or []:
            out[f"{r['name']}/{s['name']}"] = s
    return out


def check_allocations(scenario: Scenario, outcomes: list[Any], side: str) -> list[str]:
    """Why the allocations in ``outcomes`` (PodOutcome, bound pods' claims) are not valid, as differences."""
    if not any(o.claims for o in outcomes):
        return []
    world = _World(scenario)
    problems: list[str] = []
    owners: dict[tuple[str, str, str], str] = {}
    for c in world.claims.values():  # devices already allocated by pre-allocated claims
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
            owners[(r["driver"], r["pool"], r["device"])] = f"claim:{c['metadata']['namespace']}/" \
                                                          f"{c['metadata']['name']}"
    for o in outcomes:
        if not o.node:
            continue
        for pc in o.claims:
            if pc["name"] == EXTENDED_CLAIM:
                continue
            spec, ckey = world.spec_of(o.pod, pc["name"])
            if spec is None:
                problems.append(f"{o.pod} claim {pc['name']}: no such claim")
                continue
            subs = _sub_requests(spec)
            per_request: dict[str, list[tuple[str, str, str]]] = {}
            mine: set[tuple[str, str, str]] = set()
            for r in pc.get("results") or []:
                where = f"{o.pod} claim {pc['name']} {r['request']}={r['pool']}/{r['device']}"
                k = (r["driver"], r["pool"], r["device"])
                sub = subs.get(r["request"])
                if sub is None:
                    problems.append(f"{where}: no such request")
                    continue
                if k not in world.devices:
                    problems.append(f"{where}: no such device in the newest pool generation")
                    continue
                raw, _ = world.devices[k]
                if not world.reachable(k, o.node):
                    problems.append(f"{where}: not reachable from {o.node}")
                cls = world.classes.get(sub["deviceClassName"])
                exprs = [s["cel"]["expression"] for s in ((cls or {}).get("spec") or {}).get("selectors") or []]
                exprs += [s["cel"]["expression"] for s in sub.get("selectors") or []]
                why = _selectors_match(exprs, raw, r["driver"])
                if why:
                    problems.append(f"{where}: {why}")
                shared = raw.get("allowMultipleAllocations") or sub.get("adminAccess")
                if not shared and (owners.get(k, ckey) != ckey or k in mine):
                    problems.append(f"{where}: also allocated to {owners.get(k, ckey)}")
                mine.add(k)
                if not shared:
                    owners[k] = ckey
                per_request.setdefault(r["request"].split("/")[0], []).append(k)
                if "/" in r["request"]:
                    per_request.setdefault(r["request"], []).append(k)
            for name, sub in subs.items():
                got = len(per_request.get(name, []))
                if "/" not in name and name not in {r["name"] for r in spec["devices"]["requests"]
                                                    if r.get("exactly")}:
                    continue
                if sub.get("allocationMode", "ExactCount") == "ExactCount" and got and got != sub.get("count", 1):
                    problems.append(f"{o.pod} claim {pc['name']} request {name}: {got} devices, count "
                                    f"{sub.get('count', 1)}")
            for con in (spec.get("devices") or {}).get("constraints") or []:
                names = con.get("requests") or [r["name"] for r in spec["devices"]["requests"]]
                keys = [k for n in names for k in per_request.get(n, [])]
                attr = con.get("matchAttribute") or con.get("distinctAttribute")
                values = [_attribute(world.devices[k][0], k[0], attr) for k in keys if k in world.devices]
                if con.get("matchAttribute") and (None in values or len(set(map(repr, values))) > 1):
                    problems.append(f"{o.pod} claim {pc['name']}: matchAttribute {attr}: {values}")
                if con.get("distinctAttribute") and len(set(map(repr, values))) != len(values):
                    problems.append(f"{o.pod} claim {pc['name']}: distinctAttribute {attr}: {values}")
    problems += _counter_overdraw(world, owners)
    return [f"allocation-invalid: {side}: {p}" for p in problems]


def _attribute(raw: JSON, driver: str, qualified: str) -> Any:
    domain, _, name = qualified.rpartition("/")
    attrs = raw.get("attributes") or {}
    value = attrs.get(qualified) or (attrs.get(name) if domain == driver else None)
    return None if value is None else next(iter(value.values()))


def _counter_overdraw(world: _World, owners: dict[tuple[str, str, str], str]) -> list[str]:
    """Shared counters drawn beyond their value by the devices allocated (each device counted once)."""
    drawn: dict[tuple[str, str, str, str], Fraction] = {}
    for k in owners:
        if k not in world.devices:
            continue
        for use in world.devices[k][0].get("consumesCounters") or []:
            for counter, amount in (use.get("counters") or {}).items():
                at = (k[0], k[1], use["counterSet"], counter)
                drawn[at] = drawn.get(at, Fraction(0)) + _fraction(amount["value"])
    out = []
    for at, total in sorted(drawn.items()):
        have = world.counters.get(at)
        if have is None or total > have:
            out.append(f"counter {at[1]}/{at[2]}/{at[3]} drawn {total} of {have}")
    return out
