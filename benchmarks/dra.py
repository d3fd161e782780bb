"""scheduler_perf's DRA workloads (test/integration/scheduler_perf/dra/ of kubernetes v1.36.3), offline.

Every object is the YAML scheduler_perf creates, written here as the same dict and read through the API parsers
(accelsched/dra/objects.py), so the benchmark allocates exactly what a user's manifests would give:

- nodes: templates/node-with-dra-test-driver.yaml (``scheduler-perf-dra-*``, label ``node-with-dra: "true"``);
- the driver: dra.go's createResourceDriver, one ResourceSlice per DRA node (pool = node name) with
  ``maxClaimsPerNode`` devices ``instance-<i>`` (attributes model, family, driverVersion, dra.example.com/numa;
  capacity memory 1Gi);
- DeviceClasses, ResourceClaims, ResourceClaimTemplates and pods: templates/*.yaml;
- a pod's claim from its template: the claim the resourceclaim controller makes (dra/claims.py);
- allocResourceClaims: claims allocated without a pod, one device each on a node picked at random among those with
  a free device (dra.go shuffles the nodes for every claim and takes the first one the allocator can use); they
  arrive as claims with ``status.allocation`` set, as a cluster dump holds them;
- steady state (createPods with steadyState): ``count`` pods are created, scheduled, then deleted with their
  claims (whose devices become free again), over and over; the timed run includes the creation and deletion.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from accelsched.api.objects import Node, Pod, parse_node, parse_pod
from accelsched.framework.scheduler import Scheduler, ScheduleResult

if TYPE_CHECKING:
    from benchmarks.workloads import Built, Sizes

DRIVER = "test-driver.cdi.k8s.io"
CLASS = "test-class"
NO_DEVICES_CLASS = "no-devices-class"
TEMPLATE = "test-claim-template"
POD_CLAIM = "resource"
NODE_PREFIX = "scheduler-perf-dra-"
SOURCE = "benchmarks"
API = "resource.k8s.io/v1"
# Kubernetes' generateName suffix alphabet (apimachinery util/rand: no vowels, no confusable characters).
ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
# templates/devicetaintrule.yaml: the rule taints every device.
TAINT = {"key": "example.com/taint", "value": "tainted", "effect": "NoSchedule"}


def generated_name(prefix: str, i: int) -> str:
    """``prefix`` + 5 characters, as the API server's generateName would give (deterministic here)."""
    suffix = ""
    for _ in range(5):
        i, digit = divmod(i, len(ALPHANUMS))
        suffix += ALPHANUMS[digit]
    return prefix + suffix


# ---------------------------------------------------------------------------------------------- templates


def node_doc(name: str) -> dict[str, Any]:
    """templates/node-with-dra-test-driver.yaml."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"node-with-dra": "true"}},
        "spec": {},
        "status": {
            "capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
            "conditions": [{"status": "True", "type": "Ready"}],
            "phase": "Running",
        },
    }


def driver_slice_doc(node: str, capacity: int, taint: bool = False) -> dict[str, Any]:
    """dra.go's resourceSlice(driverName, nodeName, capacity). ``taint``: the devices as DeviceTaintRule
    ``taint-all-devices`` leaves them (the taint written on each device)."""
    devices = []
    for i in range(capacity):
        device: dict[str, Any] = {
            "name": f"instance-{i}",
            "attributes": {
                "model": {"string": "A100"},
                "family": {"string": "GPU"},
                "driverVersion": {"version": "1.2.3"},
                "dra.example.com/numa": {"int": i},
            },
            "capacity": {"memory": {"value": "1Gi"}},
        }
        if taint:
            device["taints"] = [dict(TAINT)]
        devices.append(device)
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": node},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


DRA_NODE_SELECTOR = {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "node-with-dra", "operator": "In", "values": ["true"]}]}]
}


def partitionable_slice_docs(i: int) -> list[dict[str, Any]]:
    """templates/resourceslice-partitionable-countersets.yaml and -devices.yaml: one pool of two slices, its four
    counters shared by two 2-counter and four 1-counter devices, reachable from every DRA node."""
    pool = {"name": f"resourceslice-{i}", "generation": 1, "resourceSliceCount": 2}
    counters = {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"resourceslice-countersets-{i}"},
        "spec": {
            "pool": dict(pool),
            "driver": DRIVER,
            "nodeSelector": DRA_NODE_SELECTOR,
            "sharedCounters": [
                {"name": "counter-set", "counters": {f"counter{k}": {"value": "1"} for k in range(1, 5)}}
            ],
        },
    }

    def device(name: str, preallocate: bool, uses: list[int]) -> dict[str, Any]:
        return {
            "name": name,
            "attributes": {"preallocate": {"bool": preallocate}, "dra.example.com/slice": {"int": i}},
            "capacity": {"counters": {"value": str(len(uses))}},
            "consumesCounters": [
                {"counterSet": "counter-set", "counters": {f"counter{k}": {"value": "1"} for k in uses}}
            ],
        }

    devices = {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"resourceslice-devices-{i}"},
        "spec": {
            "pool": dict(pool),
            "driver": DRIVER,
            "nodeSelector": DRA_NODE_SELECTOR,
            "devices": [
                device("device-2-counters-1", True, [1, 2]),
                device("device-2-counters-2", False, [3, 4]),
                *(device(f"device-1-counter-{k}", False, [k]) for k in range(1, 5)),
            ],
        },
    }
    return [counters, devices]


def consumable_slice_doc(i: int) -> dict[str, Any]:
    """templates/resourceslice-consumablecapacity.yaml: one shareable device of 80Gi memory per slice."""
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"resourceslice-{i}"},
        "spec": {
            "pool": {"name": f"resourceslice-{i}", "generation": 1, "resourceSliceCount": 1},
            "driver": DRIVER,
            "nodeSelector": DRA_NODE_SELECTOR,
            "devices": [
                {
                    "name": "shareable-device",
                    "allowMultipleAllocations": True,
                    "capacity": {
                        "memory": {
                            "value": "80Gi",
                            "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi"}},
                        }
                    },
                }
            ],
        },
    }


def device_class_doc(
    name: str = CLASS, expression: str = f'device.driver == "{DRIVER}"', extended_resource_name: str | None = None
) -> dict[str, Any]:
    """templates/deviceclass*.yaml."""
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if extended_resource_name:
        spec["extendedResourceName"] = extended_resource_name
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def exactly(name: str = "req-0", **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": CLASS, **fields}}


# templates/resourceclaimtemplate*.yaml: spec.spec.devices of each.
ONE_DEVICE = {"requests": [exactly()]}
TWO_DEVICES = {
    "requests": [exactly(count=2)],
    "constraints": [{"requests": ["req-0"], "matchAttribute": "dra.example.com/slice"}],
}
FIRST_AVAILABLE = {
    "requests": [
        {
            "name": "req-0",
            "firstAvailable": [
                {"name": "sub-0", "deviceClassName": NO_DEVICES_CLASS},
                {"name": "sub-1", "deviceClassName": CLASS},
            ],
        }
    ]
}
TOLERATION = {"requests": [exactly(tolerations=[{"key": TAINT["key"], "operator": "Exists"}])]}
CONSUMABLE = {
    "requests": [
        exactly("req-0", capacity={"requests": {"memory": "40Gi"}}),
        exactly("req-1", capacity={"requests": {"memory": "40Gi"}}),
    ]
}
# templates/resourceclaim-with-selector.yaml (Partitionable's pre-allocated claims).
WITH_SELECTOR = {
    "requests": [
        exactly(
            selectors=[
                {
                    "cel": {
                        "expression": f"device.capacity['{DRIVER}'].counters.compareTo(quantity('2')) >= 0 &&\n"
                        f"device.attributes['{DRIVER}'].preallocate"
                    }
                }
            ]
        )
    ]
}


def claim_template_doc(namespace: str, devices: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": TEMPLATE, "namespace": namespace},
        "spec": {"spec": {"devices": devices}},
    }


def claim_doc(name: str, namespace: str, devices: dict[str, Any]) -> dict[str, Any]:
    """templates/resourceclaim.yaml (test-claim-<i>)."""
    return {
        "apiVersion": API,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-claim-{namespace}-{name}"},
        "spec": {"devices": devices},
    }


def pod_with_claim_template_doc(name: str, namespace: str) -> dict[str, Any]:
    """templates/pod-with-claim-template.yaml."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-pod-{namespace}-{name}"},
        "spec": {
            "containers": [
                {
                    "image": "registry.k8s.io/pause:3.10.1",
                    "name": "pause",
                    "resources": {"claims": [{"name": POD_CLAIM}]},
                }
            ],
            "resourceClaims": [{"name": POD_CLAIM, "resourceClaimTemplateName": TEMPLATE}],
        },
    }


def pod_with_extended_resource_doc(name: str, namespace: str, resource: str) -> dict[str, Any]:
    """templates/pod-with-extended-resource-mod25.yaml and pod-with-implicit-extended-resource-mod25.yaml."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-pod-{namespace}-{name}"},
        "spec": {
            "containers": [
                {
                    "image": "registry.k8s.io/pause:3.9",
                    "name": "pause",
                    "resources": {"requests": {resource: 1}, "limits": {resource: 1}},
                }
            ]
        },
    }


def allocated_status(results: list[dict[str, Any]], node_selector: dict[str, Any]) -> dict[str, Any]:
    """A claim's status once allocResourceClaims (or kube-scheduler) allocated it: no consumer in reservedFor."""
    return {"allocation": {"devices": {"results": results}, "nodeSelector": node_selector}}


def on_node(node: str) -> dict[str, Any]:
    """The node selector kube-scheduler writes for node-local devices: the node's name, by field."""
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def preallocated_claim_docs(count: int, nodes: list[str], per_node: int, seed: int = 0) -> list[dict[str, Any]]:
    """allocResourceClaims over templates/resourceclaim.yaml: claim i gets the first free device of a node chosen
    at random among those with one left (dra.go shuffles the nodes per claim and takes the first that fits)."""
    if count > len(nodes) * per_node:
        raise ValueError(f"{count} claims do not fit {len(nodes)} nodes x {per_node} devices")
    rng = random.Random(seed)
    used = dict.fromkeys(nodes, 0)
    open_nodes = list(nodes)
    docs = []
    for i in range(count):
        k = rng.randrange(len(open_nodes))
        node = open_nodes[k]
        device = used[node]
        used[node] += 1
        if used[node] == per_node:
            open_nodes[k] = open_nodes[-1]
            open_nodes.pop()
        doc = claim_doc(f"test-claim-{i}", "init", ONE_DEVICE)
        result = {"request": "req-0", "driver": DRIVER, "pool": node, "device": f"instance-{device}"}
        doc["status"] = allocated_status([result], on_node(node))
        docs.append(doc)
    return docs


# ---------------------------------------------------------------------------------------------- the objects


@dataclass
class Objects:
    """A DRA cluster being generated: documents in, parsed objects out (``inputs``)."""

    nodes: list[Node] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)

    def inputs(self) -> Any:
        """The DRAInputs the loader would hand over for these documents (parsed by dra/objects.py)."""
        from accelsched.dra import objects
        from accelsched.dra.model import DRAInputs

        out = DRAInputs()
        for doc in self.classes:
            c = objects.parse_device_class(doc, SOURCE)
            out.classes[c.name] = c
        for doc in self.slices:
            s = objects.parse_resource_slice(doc, SOURCE)
            out.slices[s.name] = s
        for doc in self.claims:
            claim = objects.parse_resource_claim(doc, SOURCE)
            out.claims[claim.key] = claim
        for doc in self.templates:
            t = objects.parse_resource_claim_template(doc, SOURCE)
            out.templates[t.key] = t
        return out


def dra_nodes(count: int, capacity: int, objs: Objects, taint: bool = False) -> list[str]:
    """``count`` DRA nodes with the test driver's slice of ``capacity`` devices each (capacity 0: no slice)."""
    names = [generated_name(NODE_PREFIX, i) for i in range(count)]
    objs.nodes = [parse_node(node_doc(name), SOURCE) for name in names]
    if capacity:
        objs.slices += [driver_slice_doc(name, capacity, taint) for name in names]
    return names


def template_pods(prefix: str, namespace: str, count: int, start: int = 0) -> list[Pod]:
    return [
        parse_pod(pod_with_claim_template_doc(generated_name(prefix, start + i), namespace), SOURCE)
        for i in range(count)
    ]


def template_claims(pods: list[Pod], templates: dict[str, Any]) -> list[Any]:
    """What the resourceclaim controller does when these pods are created: each one's claim from its template
    (dra/claims.py), named in the pod's status.resourceClaimStatuses."""
    from accelsched.dra import claims as claims_mod

    out = []
    for pod in pods:
        for pc in claims_mod.pod_resource_claims(pod):
            if pc.resource_claim_template_name:
                template = templates[f"{pod.namespace}/{pc.resource_claim_template_name}"]
                claim = claims_mod.claim_from_template(pod, pc, template)
                claims_mod.set_claim_status(pod, pc, claim.name)
                out.append(claim)
    return out


# ---------------------------------------------------------------------------------------------- checks


@dataclass
class Holding:
    """One allocated claim: its key, its allocation and the node of the pod it is reserved for (None: no pod)."""

    claim: str
    allocation: Any
    node: str | None
    pod: str = ""


class Checker:
    """Validates allocations against the slices: every device exists and is reachable from the pod's node, no
    device is given twice (a device with allowMultipleAllocations: its capacity is never overdrawn), no shared
    counter is overdrawn. ``base`` (claims allocated before the run, none of them released) is indexed once."""

    def __init__(self, inputs: Any, scheduler: Scheduler, base: list[Holding]) -> None:
        cluster = scheduler.cluster
        self.devices: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self.counter_sets: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.reach: dict[str, set[str]] = {}
        for s in inputs.slices.values():
            for d in s.devices:
                self.devices[(s.driver, s.pool.name, d.name)] = (s, d)
            for cs in s.shared_counters:
                self.counter_sets[(s.driver, s.pool.name, cs.name)] = dict(cs.counters)
            if s.node_name is not None:
                self.reach[s.name] = {s.node_name}
            elif s.all_nodes:
                self.reach[s.name] = set(cluster.index)
            elif s.node_selector is not None:
                mask = np.zeros(cluster.n, dtype=bool)
                for term in s.node_selector:
                    mask |= cluster.term_mask(term)
                self.reach[s.name] = {cluster.nodes[i].name for i in np.flatnonzero(mask)}
        self.base_devices: dict[tuple[str, str, str], list[tuple[str, Any]]] = {}
        self.base_counters: dict[tuple[str, str, str, str], Any] = {}
        self.problems = self._add(base, self.base_devices, self.base_counters, None)

    def _add(
        self,
        holdings: list[Holding],
        devices: dict[tuple[str, str, str], list[tuple[str, Any]]],
        counters: dict[tuple[str, str, str, str], Any],
        base: Checker | None,
    ) -> list[str]:
        problems = []
        for h in holdings:
            for r in h.allocation.results:
                key = (r.driver, r.pool, r.device)
                found = self.devices.get(key)
                if found is None:
                    problems.append(f"{h.claim}: device {'/'.join(key)} does not exist")
                    continue
                s, d = found
                if h.node is not None and h.node not in self.reach.get(s.name, ()):
                    problems.append(f"{h.claim}: device {'/'.join(key)} is not reachable from node {h.node}")
                first = key not in devices and (base is None or key not in base.base_devices)
                devices.setdefault(key, []).append((h.claim, r))
                if first:  # a device consumes its counters once, however many shares it has
                    for use in d.consumes_counters:
                        for name, amount in use.counters.items():
                            ck = (r.driver, r.pool, use.counter_set, name)
                            counters[ck] = counters.get(ck, 0) + amount
        return problems

    def check(self, holdings: list[Holding]) -> list[str]:
        """Problems of ``holdings`` together with the base (each call: one moment of the cluster)."""
        devices: dict[tuple[str, str, str], list[tuple[str, Any]]] = {}
        counters: dict[tuple[str, str, str, str], Any] = {}
        problems = self._add(holdings, devices, counters, self)
        for key, users in devices.items():
            users = self.base_devices.get(key, []) + users
            d = self.devices[key][1]
            if not d.allow_multiple_allocations:
                if len(users) > 1:
                    problems.append(f"device {'/'.join(key)} given to {', '.join(c for c, _ in users)}")
                continue
            for name, cap in d.capacity.items():
                used = sum((r.consumed_capacity.get(name, 0) for _, r in users), start=0)
                if used > cap.value:
                    problems.append(f"device {'/'.join(key)}: {name} {used} consumed of {cap.value}")
        for ck, amount in counters.items():
            total = amount + self.base_counters.get(ck, 0)
            limit = self.counter_sets.get(ck[:3], {}).get(ck[3])
            if limit is None or total > limit:
                problems.append(f"counter {'/'.join(ck)}: {total} consumed of {limit}")
        return problems


def holdings_of(state: Any, pods: list[tuple[Pod, str]]) -> tuple[list[Holding], list[str]]:
    """The allocated claims reserved for each of these bound pods (pod, node), and the pods without one."""
    by_uid: dict[str, list[Any]] = {}
    wanted = {pod.uid for pod, _ in pods}
    for claim in state.claims.values():
        for ref in claim.reserved_for:
            if ref.uid in wanted:
                by_uid.setdefault(ref.uid, []).append(claim)
    out, missing = [], []
    for pod, node in pods:
        claims = [c for c in by_uid.get(pod.uid, []) if c.allocation is not None]
        if not claims:
            missing.append(pod.key)
        out += [Holding(c.key, c.allocation, node, pod.key) for c in claims]
    return out, missing


def base_holdings(state: Any) -> list[Holding]:
    """Claims allocated without a consumer (allocResourceClaims)."""
    return [Holding(c.key, c.allocation, None) for c in state.claims.values() if c.allocation and not c.reserved_for]


# ---------------------------------------------------------------------------------------------- the runs


MeasuredRun = Callable[[Scheduler, list[Pod]], list[ScheduleResult]]


def delete_pod(scheduler: Scheduler, pod: Pod) -> None:
    """Delete a bound pod, as steady state's DeleteCollection does: off its node, and the resourceclaim
    controller's part (Scheduler.evict with delete, DRAState.release_pod): the pod leaves its claims' reservedFor
    and the claim made from its template is deleted, its devices free again. For good, as preemption's victims
    (Scheduler.preempt): nothing kept to restore it."""
    scheduler.evict(pod, delete=True)
    scheduler._dra_undo.pop(pod.key, None)
    pod.node_name = ""


@dataclass
class Run:
    """What a DRA workload's checks need from the run: the scheduler (set when it starts) and, for steady state,
    the holdings of each batch at the moment it was bound (before its pods were deleted)."""

    inputs: Any
    per_pod: int  # device results each scheduled pod's claims must hold
    scheduler: Scheduler | None = None
    batches: list[tuple[list[Holding], list[str]]] = field(default_factory=list)

    def start(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def steady(self, count: int, claims: dict[str, list[Any]]) -> MeasuredRun:
        """createPods with steadyState: ``count`` pods at a time are created (their template claims with them),
        scheduled, then deleted with their claims; the next batch follows."""

        def run(scheduler: Scheduler, pods: list[Pod]) -> list[ScheduleResult]:
            state = scheduler.cluster.dra
            results: list[ScheduleResult] = []
            for k in range(0, len(pods), count):
                batch = pods[k : k + count]
                for pod in batch:  # the resourceclaim controller creates their claims, the informer delivers them
                    for claim in claims[pod.key]:
                        state.update_claim(claim.key, claim)
                out = scheduler.run(batch)
                results += out
                held, missing = [], []
                for r in out:
                    if r.scheduled:
                        mine = [c for c in claims[r.pod.key] if c.allocation is not None]
                        if not mine:
                            missing.append(r.pod.key)
                        held += [Holding(c.key, c.allocation, r.node, r.pod.key) for c in mine]
                self.batches.append((held, missing))
                for r in out:
                    if r.scheduled:
                        delete_pod(scheduler, r.pod)
            return results

        return run

    def verify(self, init: list[ScheduleResult], results: list[ScheduleResult]) -> list[str]:
        """No device given twice at any moment, every allocation valid for its pod's node, and every scheduled
        pod holding an allocated claim with ``per_pod`` devices."""
        assert self.scheduler is not None
        state = self.scheduler.cluster.dra
        checker = Checker(self.inputs, self.scheduler, base_holdings(state))
        problems = list(checker.problems)
        batches = self.batches
        if not batches:  # nothing deleted: every pod is still bound, one moment to check (the end of the run)
            batches = [holdings_of(state, [(r.pod, r.node or "") for r in init + results if r.scheduled])]
        for held, missing in batches:
            problems += [f"{key}: scheduled without an allocated claim" for key in missing]
            problems += checker.check(held)
            per_pod: dict[str, int] = {}
            for h in held:
                per_pod[h.pod] = per_pod.get(h.pod, 0) + len(h.allocation.results)
            problems += [f"{pod}: {n} devices allocated, expected {self.per_pod}" for pod, n in per_pod.items()
                         if n != self.per_pod]  # fmt: skip
        return problems


def _built(objs: Objects, init: list[Pod], measured: list[Pod], per_pod: int, steady: int = 0) -> Built:
    """Parse the documents, make the pods' template claims, and wire the run and its checks."""
    from benchmarks.workloads import Built

    inputs = objs.inputs()
    init_claims = template_claims(init, inputs.templates)
    for claim in init_claims:
        inputs.claims[claim.key] = claim
    run = Run(inputs, per_pod)
    built = Built(objs.nodes, init, measured, len(measured), verify=run.verify, dra=inputs, started=run.start)
    if steady:
        by_pod: dict[str, list[Any]] = {pod.key: [] for pod in measured}
        uids = {pod.uid: pod.key for pod in measured}
        for claim in template_claims(measured, inputs.templates):
            by_pod[uids[claim.owner_pod_uid]].append(claim)
        built.run_measured = run.steady(steady, by_pod)
    else:
        for claim in template_claims(measured, inputs.templates):
            inputs.claims[claim.key] = claim
    return built


def claim_template_objects(
    nodes: int, per_node: int, devices: dict[str, Any], taint: bool = False
) -> tuple[Objects, list[str]]:
    """The common part: DRA nodes with the test driver, test-class, and the template in both namespaces."""
    objs = Objects()
    names = dra_nodes(nodes, per_node, objs, taint)
    objs.classes.append(device_class_doc())
    objs.templates += [claim_template_doc(ns, devices) for ns in ("init", "test")]
    return objs, names


def build_scheduling_with_template(
    s: Sizes, devices: dict[str, Any] = ONE_DEVICE, taint: bool = False, extra_classes: tuple[dict, ...] = ()
) -> Built:
    """SchedulingWithResourceClaimTemplate: ``init_pods`` then ``measured_pods`` pods, each with a claim from
    test-claim-template, on DRA nodes of 10 devices (5000 pods fill 500 nodes). FirstAvailable and
    DeviceTaintToleration run the same shape with their own template (and class, and tainted devices)."""
    objs, _ = claim_template_objects(s.nodes, 10, devices, taint)
    objs.classes += list(extra_classes)
    init = template_pods("test-dra", "init", s.init_pods)
    measured = template_pods("test-dra", "test", s.measured_pods)
    return _built(objs, init, measured, 1)


def build_first_available(s: Sizes) -> Built:
    """prioritizedlist: firstAvailable [sub-0 of no-devices-class, sub-1 of test-class]: sub-1 every time."""
    no_devices = device_class_doc(NO_DEVICES_CLASS, 'device.driver == "no-such-driver.cdi.k8s.io"')
    return build_scheduling_with_template(s, FIRST_AVAILABLE, extra_classes=(no_devices,))


def build_device_taints(s: Sizes) -> Built:
    """devicetaints: every device tainted example.com/taint=tainted:NoSchedule, claims tolerate it (Exists)."""
    return build_scheduling_with_template(s, TOLERATION, taint=True)


STEADY_BATCH = 10  # SteadyStateClusterResourceClaimTemplate's createPods count


def build_steady_state(s: Sizes, fill: str) -> Built:
    """SteadyStateClusterResourceClaimTemplate: ``initClaims`` claims allocated up front (empty: none, half:
    half the devices, full: all but 10), then pods created 10 at a time, scheduled and deleted."""
    per_node = 10
    objs, names = claim_template_objects(s.nodes, per_node, ONE_DEVICE)
    total = s.nodes * per_node
    init_claims = {"empty": 0, "half": total // 2, "full": total - STEADY_BATCH}[fill]
    objs.claims += preallocated_claim_docs(init_claims, names, per_node)
    measured = template_pods("test-dra", "test", s.measured_pods)
    return _built(objs, [], measured, 1, steady=STEADY_BATCH)


def build_steady_empty(s: Sizes) -> Built:
    return build_steady_state(s, "empty")


def build_steady_half(s: Sizes) -> Built:
    return build_steady_state(s, "half")


def build_steady_full(s: Sizes) -> Built:
    return build_steady_state(s, "full")


def build_extended_resource(s: Sizes, classes: int = 25, implicit: bool = False) -> Built:
    """ExtendedResource_25Classes (and ImplicitExtendedResource_25Classes): 25 DeviceClasses over the test
    driver's devices, class k backing example.com/gpu-k (implicitly: deviceclass.resource.kubernetes.io/test-class-k);
    pod i asks 1 of resource i mod 25 in its container's requests and limits, no claim of its own."""
    objs = Objects()
    dra_nodes(s.nodes, 10, objs)
    for k in range(classes):
        ext = None if implicit else f"example.com/gpu-{k}"
        objs.classes.append(device_class_doc(f"test-class-{k}", extended_resource_name=ext))

    def resource(i: int) -> str:
        k = i % classes
        return f"deviceclass.resource.kubernetes.io/test-class-{k}" if implicit else f"example.com/gpu-{k}"

    def pods(namespace: str, count: int) -> list[Pod]:
        return [
            parse_pod(pod_with_extended_resource_doc(f"test-dra-{i}", namespace, resource(i)), SOURCE)
            for i in range(count)
        ]

    return _built(objs, pods("init", s.init_pods), pods("test", s.measured_pods), 1)


def build_implicit_extended_resource(s: Sizes) -> Built:
    return build_extended_resource(s, implicit=True)


PARTITIONABLE_POOLS_PER_NODE = 20  # 2000pods_100nodes: resourceSlices 2000 (of each kind) for 100 nodes


def build_partitionable(s: Sizes) -> Built:
    """Partitionable/2000pods_100nodes: 2000 pools (a counter-set slice and a device slice each) reachable from
    every DRA node; 2000 claims with a selector pre-allocated (device-2-counters-1 of each pool, counters 1 and 2);
    then steady state of 2000 pods whose claims ask two devices of one slice (matchAttribute
    dra.example.com/slice): only device-1-counter-3 + device-1-counter-4 are left for that in each pool."""
    objs = Objects()
    dra_nodes(s.nodes, 0, objs)
    pools = s.nodes * PARTITIONABLE_POOLS_PER_NODE
    for i in range(pools):
        objs.slices += partitionable_slice_docs(i)
    objs.classes.append(device_class_doc())
    for i in range(pools):  # allocResourceClaims: each pool's one preallocate device, on whichever node
        doc = claim_doc(f"test-claim-with-selector-{i}", "init", WITH_SELECTOR)
        result = {"request": "req-0", "driver": DRIVER, "pool": f"resourceslice-{i}", "device": "device-2-counters-1"}
        doc["status"] = allocated_status([result], DRA_NODE_SELECTOR)
        objs.claims.append(doc)
    objs.templates.append(claim_template_doc("test", TWO_DEVICES))
    measured = template_pods("test-dra", "test", s.measured_pods)
    return _built(objs, [], measured, 2, steady=pools)


CONSUMABLE_SLICES_PER_NODE = 20  # 2000pods_100nodes: resourceSlices 2000 for 100 nodes, maxClaimsPerNode 20


def build_consumable_capacity(s: Sizes) -> Built:
    """ConsumableCapacity/2000pods_100nodes: the test driver's 20 plain devices per node (which the class, asking
    allowMultipleAllocations, never selects) and 2000 slices of one shareable 80Gi device reachable from every
    node; steady state of 2000 pods whose claims ask 40Gi twice."""
    objs = Objects()
    dra_nodes(s.nodes, CONSUMABLE_SLICES_PER_NODE, objs)
    slices = s.nodes * CONSUMABLE_SLICES_PER_NODE
    objs.slices += [consumable_slice_doc(i) for i in range(slices)]
    objs.classes.append(
        device_class_doc(expression=f'device.driver == "{DRIVER}" &&\ndevice.allowMultipleAllocations == true')
    )
    objs.templates.append(claim_template_doc("test", CONSUMABLE))
    measured = template_pods("test-dra", "test", s.measured_pods)
    return _built(objs, [], measured, 2, steady=slices)
