"""Clusters and pods shaped like kubernetes' test/integration/scheduler_perf workloads.

Every object is built from a plain Kubernetes dict through ``parse_node``/``parse_pod``, as the loader would,
so the benchmark schedules exactly what a user's manifests would produce. The templates follow
scheduler_perf's ``templates/node-default.yaml`` (pods 110, cpu 4, memory 32Gi) and ``pod-default.yaml``
(requests and limits cpu 100m, memory 500Mi); each workload lists where it differs from scheduler_perf.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from accelsched.api.objects import HOSTNAME_LABEL, Node, Pod, parse_node, parse_pod
from accelsched.framework.scheduler import Scheduler, ScheduleResult
from benchmarks import dra

ZONE_LABEL = "topology.kubernetes.io/zone"
NODE_CAPACITY = {"pods": "110", "cpu": "4", "memory": "32Gi"}
POD_RESOURCES = {"cpu": "100m", "memory": "500Mi"}
GPU = "nvidia.com/gpu"


# ---------------------------------------------------------------------------------------------- templates


def node_doc(name: str, labels: dict[str, str] | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """scheduler_perf's node-default.yaml: capacity pods 110, cpu 4, memory 32Gi (allocatable = capacity)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME_LABEL: name, **(labels or {})}},
        "spec": {},
        "status": {
            "capacity": {**NODE_CAPACITY, **(extra or {})},
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        },
    }


def pod_doc(
    name: str,
    namespace: str = "default",
    *,
    labels: dict[str, str] | None = None,
    resources: dict[str, Any] | None = None,
    limits: bool = True,
    affinity: dict[str, Any] | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    """scheduler_perf's pod-default.yaml (one pause container, requests = limits = cpu 100m, memory 500Mi)."""
    res = dict(POD_RESOURCES if resources is None else resources)
    container: dict[str, Any] = {
        "name": "pause",
        "image": "registry.k8s.io/pause:3.10",
        "ports": [{"containerPort": 80}],
        "resources": {"requests": res, **({"limits": dict(res)} if limits else {})},
    }
    spec: dict[str, Any] = {"containers": [container]}
    if affinity:
        spec["affinity"] = affinity
    if priority is not None:
        spec["priority"] = priority
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def default_nodes(count: int, zones: int = 3, extra: dict[str, Any] | None = None) -> list[Node]:
    """``count`` default nodes, labelled with their hostname and a zone (round robin over ``zones``)."""
    return [
        parse_node(node_doc(f"node-{i}", {ZONE_LABEL: f"zone{i % zones + 1}"}, extra), "benchmarks")
        for i in range(count)
    ]


# ---------------------------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Sizes:
    nodes: int
    init_pods: int
    measured_pods: int
    unschedulable_pods: int = 0


@dataclass
class Built:
    """A generated cluster: nodes, init pods (scheduled first, untimed) and the measured pods.

    ``measured`` may hold pods that must stay unschedulable (``expect_unschedulable``); every other measured
    pod must be scheduled. ``verify`` checks the placements and returns problems (an empty list when right).
    """

    nodes: list[Node]
    init: list[Pod]
    measured: list[Pod]
    expect_scheduled: int
    expect_unschedulable: int = 0
    verify: Callable[[list[ScheduleResult], list[ScheduleResult]], list[str]] | None = None
    groups: dict[str, Any] = field(default_factory=dict)  # gangs by namespace/name (framework.gang.PodGroup)
    # DRA workloads (benchmarks/dra.py): the DRAInputs the cluster state gets, a hook given the scheduler before the
    # init pods run, and a measured run of their own (steady state: create, schedule, delete, over and over).
    dra: Any = None
    started: Callable[[Scheduler], None] | None = None
    run_measured: Callable[[Scheduler, list[Pod]], list[ScheduleResult]] | None = None


@dataclass(frozen=True)
class Workload:
    family: str
    variant: str
    # kube-scheduler's threshold in pods/s (reference/kube-scheduler.md, test/integration/scheduler_perf).
    threshold: float
    full: Sizes
    quick: Sizes
    build: Callable[[Sizes], Built]
    description: str
    deviations: tuple[str, ...] = field(default_factory=tuple)
    # Other scheduler_perf variants of the same shape and their thresholds (QueueingHintsEnabled), reported beside.
    other_thresholds: tuple[tuple[str, float], ...] = ()
    group: str = ""  # a name ``--workload`` selects a set by ("DRA")

    @property
    def name(self) -> str:
        return f"{self.family}/{self.variant}"

    def sizes(self, quick: bool) -> Sizes:
        return self.quick if quick else self.full


def _by_pod(results: list[ScheduleResult]) -> dict[str, ScheduleResult]:
    return {r.pod.key: r for r in results}


# -- SchedulingBasic


def build_basic(s: Sizes) -> Built:
    nodes = default_nodes(s.nodes)
    init = [parse_pod(pod_doc(f"init-pod-{i}"), "benchmarks") for i in range(s.init_pods)]
    measured = [parse_pod(pod_doc(f"pod-{i}"), "benchmarks") for i in range(s.measured_pods)]
    return Built(nodes, init, measured, s.measured_pods)


# -- SchedulingWithExtendedResource (scheduler_perf: one distinct resource per node, one pod per resource)


def build_extended(s: Sizes) -> Built:
    count = s.nodes
    nodes = [
        parse_node(
            node_doc(
                f"node-{i}",
                {ZONE_LABEL: f"zone{i % 3 + 1}", "node-with-extended-resource": "true"},
                {f"foo.com/bar-{i}": 1},
            ),
            "benchmarks",
        )
        for i in range(count)
    ]
    measured = [
        parse_pod(pod_doc(f"test-extended-resource-{i}", "test", resources={f"foo.com/bar-{i}": 1}), "benchmarks")
        for i in range(s.measured_pods)
    ]

    def verify(init: list[ScheduleResult], results: list[ScheduleResult]) -> list[str]:
        # Pod i asks for foo.com/bar-i, which only node i has.
        return [
            f"{r.pod.key} on {r.node}, expected node-{r.pod.name.rsplit('-', 1)[1]}"
            for r in results
            if r.scheduled and r.node != f"node-{r.pod.name.rsplit('-', 1)[1]}"
        ]

    return Built(nodes, [], measured, s.measured_pods, verify=verify)


# -- SchedulingWithExtendedResource, shared devices: every node advertises 8 GPUs, pods ask for one


def build_shared_gpu(s: Sizes) -> Built:
    nodes = default_nodes(s.nodes, extra={GPU: 8})
    res = {**POD_RESOURCES, GPU: 1}
    init = [parse_pod(pod_doc(f"init-pod-{i}", resources=res), "benchmarks") for i in range(s.init_pods)]
    measured = [parse_pod(pod_doc(f"pod-{i}", resources=res), "benchmarks") for i in range(s.measured_pods)]

    def verify(init: list[ScheduleResult], results: list[ScheduleResult]) -> list[str]:
        problems = []
        held: dict[tuple[str, str], str] = {}
        for r in init + results:
            if not r.scheduled:
                continue
            ids = r.devices.get(GPU, [])
            if len(ids) != 1:
                problems.append(f"{r.pod.key} holds {ids} of {GPU}, expected one device")
            for d in ids:
                other = held.setdefault((r.node or "", d), r.pod.key)
                if other != r.pod.key:
                    problems.append(f"{r.pod.key} and {other} both hold {d} on {r.node}")
        return problems

    return Built(nodes, init, measured, s.measured_pods, verify=verify)


# -- SchedulingNodeAffinity


NODE_AFFINITY_ZONES = ("zone1", "zone2")


def build_node_affinity(s: Sizes) -> Built:
    # Four zones, pods require zone In [zone1, zone2]: half of the nodes are feasible.
    nodes = default_nodes(s.nodes, zones=4)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": list(NODE_AFFINITY_ZONES)}]}
                ]
            }
        }
    }
    init = [parse_pod(pod_doc(f"init-node-affinity-{i}", affinity=affinity), "benchmarks") for i in range(s.init_pods)]
    measured = [
        parse_pod(pod_doc(f"node-affinity-{i}", affinity=affinity), "benchmarks") for i in range(s.measured_pods)
    ]
    zone_of = {n.name: n.labels[ZONE_LABEL] for n in nodes}

    def verify(init: list[ScheduleResult], results: list[ScheduleResult]) -> list[str]:
        return [
            f"{r.pod.key} on {r.node} in {zone_of.get(r.node or '')}"
            for r in init + results
            if r.scheduled and zone_of.get(r.node or "") not in NODE_AFFINITY_ZONES
        ]

    return Built(nodes, init, measured, s.measured_pods, verify=verify)


# -- SchedulingPodAntiAffinity


def anti_affinity_pod(name: str, namespace: str) -> Pod:
    """scheduler_perf's pod-with-pod-anti-affinity.yaml: color=green, one green pod per hostname."""
    affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"color": "green"}},
                    "topologyKey": HOSTNAME_LABEL,
                    "namespaces": ["sched-1", "sched-0"],
                }
            ]
        }
    }
    return parse_pod(pod_doc(name, namespace, labels={"color": "green"}, affinity=affinity), "benchmarks")


def build_pod_anti_affinity(s: Sizes) -> Built:
    nodes = default_nodes(s.nodes)
    init = [anti_affinity_pod(f"anti-affinity-pod-{i}", "sched-0") for i in range(s.init_pods)]
    measured = [anti_affinity_pod(f"anti-affinity-pod-{i}", "sched-1") for i in range(s.measured_pods)]

    def verify(init: list[ScheduleResult], results: list[ScheduleResult]) -> list[str]:
        seen: dict[str, str] = {}
        problems = []
        for r in init + results:
            if r.scheduled:
                other = seen.setdefault(r.node or "", r.pod.key)
                if other != r.pod.key:
                    problems.append(f"{r.pod.key} and {other} share {r.node} despite required anti-affinity")
        return problems

    return Built(nodes, init, measured, s.measured_pods, verify=verify)


# -- Unschedulable


def build_unschedulable(s: Sizes) -> Built:
    nodes = default_nodes(s.nodes)
    init = [parse_pod(pod_doc(f"init-pod-{i}"), "benchmarks") for i in range(s.init_pods)]
    # pod-high-priority-large-cpu.yaml: priority 10, requests cpu 9 (no node has more than 4), no limits.
    large_cpu = {"cpu": "9", "memory": "500Mi"}
    big = [
        parse_pod(pod_doc(f"pod-h-{i}", resources=large_cpu, limits=False, priority=10), "benchmarks")
        for i in range(s.unschedulable_pods)
    ]
    basic = [parse_pod(pod_doc(f"pod-{i}"), "benchmarks") for i in range(s.measured_pods)]
    # Interleave the unschedulable pods with the measured ones, as scheduler_perf's churn op injects them.
    measured: list[Pod] = []
    step = max(1, len(basic) // max(1, len(big)))
    for i, pod in enumerate(basic):
        if i % step == 0 and i // step < len(big):
            measured.append(big[i // step])
        measured.append(pod)
    measured.extend(big[len(measured) - len(basic) :])
    big_keys = {p.key for p in big}

    def verify(init: list[ScheduleResult], results: list[ScheduleResult]) -> list[str]:
        by_pod = _by_pod(results)
        problems = []
        for key in big_keys:
            r = by_pod.get(key)
            if r is None:
                problems.append(f"{key}: no result")
            elif r.scheduled:
                problems.append(f"{key} (cpu 9) was scheduled on {r.node}, which has 4 cpu")
            elif "Insufficient cpu" not in r.message:
                problems.append(f"{key}: unexpected message {r.message!r}")
        return problems

    return Built(nodes, init, measured, s.measured_pods, len(big), verify=verify)


# -- Topology: 8 GPUs per node on two NUMA nodes, kubelets with single-numa-node, NIC-aligned pods


TOPOLOGY_LAYOUT = yaml.safe_dump(
    {
        "policy": "single-numa-node",
        "scope": "pod",
        "numa": {0: {"cpus": 2}, 1: {"cpus": 2}},
        "devices": {GPU: [f"gpu{i}@{i // 4}/sw{i // 2}" for i in range(8)]},
        "nics": ["nic0@0/sw0", "nic1@1/sw2"],
    }
)


def build_topology(s: Sizes) -> Built:
    docs = []
    for i in range(s.nodes):
        doc = node_doc(f"node-{i}", {ZONE_LABEL: f"zone{i % 3 + 1}"}, {GPU: 8})
        doc["metadata"]["annotations"] = {"accelsched.io/topology": TOPOLOGY_LAYOUT}
        docs.append(doc)
    nodes = [parse_node(d, "benchmarks") for d in docs]

    def pod(name: str, i: int) -> Pod:
        doc = pod_doc(name, resources={**POD_RESOURCES, GPU: 1 + i % 4})
        if i % 2:
            doc["metadata"]["annotations"] = {"accelsched.io/want-topology": "true"}
        return parse_pod(doc, "benchmarks")

    init = [pod(f"init-pod-{i}", 0) for i in range(s.init_pods)]
    measured = [pod(f"pod-{i}", i) for i in range(s.measured_pods)]

    def verify(init: list[ScheduleResult], results: list[ScheduleResult]) -> list[str]:
        problems = []
        held: dict[tuple[str, str], str] = {}
        for r in init + results:
            if not r.scheduled:
                continue
            ids = r.devices.get(GPU, [])
            numas = {int(d.removeprefix("gpu")) // 4 for d in ids}
            if len(ids) != r.pod.requests[GPU] or len(numas) != 1:
                problems.append(f"{r.pod.key} holds {ids}: not {r.pod.requests[GPU]} GPUs on one NUMA node")
            for d in ids:
                other = held.setdefault((r.node or "", d), r.pod.key)
                if other != r.pod.key:
                    problems.append(f"{r.pod.key} and {other} both hold {d} on {r.node}")
        return problems

    return Built(nodes, init, measured, s.measured_pods, verify=verify)


# -- MIG: 1,000 nodes x 8 dynamically partitioned A100-40GB, a stream of mixed MIG requests


MIG_LAYOUT = yaml.safe_dump({"mode": "mig", "model": "A100-40GB", "dynamic": True, "devices": 8})
MIG_MIX = ("1g.5gb", "1g.5gb", "1g.5gb", "2g.10gb", "2g.10gb", "3g.20gb", "1g.10gb", "4g.20gb")


def build_mig(s: Sizes) -> Built:
    docs = []
    for i in range(s.nodes):
        doc = node_doc(f"node-{i}", {ZONE_LABEL: f"zone{i % 3 + 1}"}, {"cpu": "64", "memory": "512Gi"})
        doc["metadata"]["annotations"] = {"accelsched.io/partitioning": MIG_LAYOUT}
        docs.append(doc)
    nodes = [parse_node(d, "benchmarks") for d in docs]

    def pod(name: str, i: int) -> Pod:
        resource = f"nvidia.com/mig-{MIG_MIX[i % len(MIG_MIX)]}"
        return parse_pod(pod_doc(name, resources={**POD_RESOURCES, resource: 1}), "benchmarks")

    init = [pod(f"init-pod-{i}", i) for i in range(s.init_pods)]
    measured = [pod(f"pod-{i}", i) for i in range(s.measured_pods)]

    def verify(init: list[ScheduleResult], results: list[ScheduleResult]) -> list[str]:
        from accelsched.devices import mig

        model = mig.model("A100-40GB")
        per_device: dict[tuple[str, str], list[mig.Instance]] = {}
        problems = []
        for r in init + results:
            for ids in r.devices.values():
                for ident in ids:
                    dev, _, inst = ident.partition(":")
                    per_device.setdefault((r.node or "", dev), []).append(mig.parse_instance(model, inst))
        for (node, dev), instances in per_device.items():
            try:
                mig.check_layout(model, instances)
            except ValueError as exc:
                problems.append(f"{node}/{dev}: {exc}")
        return problems

    return Built(nodes, init, measured, s.measured_pods, verify=verify)


# -- Preemption: every measured pod must evict low-priority pods to fit


def build_preemption(s: Sizes) -> Built:
    """scheduler_perf's PreemptionAsync: nodes full of low-priority pods (cpu 900m, 4 per node), then
    high-priority pods (priority 10, cpu 3) that each fit only by evicting three of them."""
    nodes = default_nodes(s.nodes)
    low = {"cpu": "900m", "memory": "500Mi"}
    high = {"cpu": "3", "memory": "500Mi"}
    init = [parse_pod(pod_doc(f"low-{i}", resources=low), "benchmarks") for i in range(s.init_pods)]
    measured = [
        parse_pod(pod_doc(f"high-{i}", resources=high, priority=10), "benchmarks") for i in range(s.measured_pods)
    ]

    def verify(init: list[ScheduleResult], results: list[ScheduleResult]) -> list[str]:
        problems = []
        per_node: dict[str, int] = {}
        for r in results:
            if r.pod.name.startswith("high-"):
                if not r.scheduled:
                    problems.append(f"{r.pod.key}: {r.message}")
                    continue
                per_node[r.node or ""] = per_node.get(r.node or "", 0) + 1
                if len(r.preempted) != 3 or any(v.priority >= r.pod.priority for v in r.preempted):
                    problems.append(f"{r.pod.key} evicted {[v.key for v in r.preempted]}: not 3 lower-priority pods")
        problems += [f"{node} got {n} cpu-3 pods" for node, n in per_node.items() if n > 1]
        return problems

    return Built(nodes, init, measured, s.measured_pods, verify=verify)


# -- Gangs: training jobs of 8 to 256 workers among single pods, on 8-GPU nodes


GANG_SIZES = (8, 16, 32, 64, 128, 256)
GANG_CYCLE_NODES = 500  # one round of GANG_SIZES (504 workers x 4 GPUs) per 500 nodes


def build_gangs(s: Sizes) -> Built:
    """Per 500 nodes one gang of each size in GANG_SIZES (workers ask 4 GPUs: two per node), interleaved with
    ``measured_pods`` single pods asking 1 or 2 GPUs. Everything fits, so every gang must be bound whole."""
    from accelsched.framework import gang

    nodes = default_nodes(s.nodes, extra={GPU: 8, "cpu": "64", "memory": "512Gi"})
    groups: dict[str, gang.PodGroup] = {}
    jobs: list[list[Pod]] = []
    for cycle in range(max(1, s.nodes // GANG_CYCLE_NODES)):
        for size in GANG_SIZES:
            name = f"train-{cycle}-{size}"
            groups[f"default/{name}"] = gang.PodGroup("default", name, size)
            labels = {gang.POD_GROUP_LABEL: name}
            resources = {**POD_RESOURCES, GPU: 4}
            job = [pod_doc(f"{name}-{i}", labels=labels, resources=resources) for i in range(size)]
            jobs.append([parse_pod(doc, "benchmarks") for doc in job])
    singles = [
        parse_pod(pod_doc(f"pod-{i}", resources={**POD_RESOURCES, GPU: 1 + i % 2}), "benchmarks")
        for i in range(s.measured_pods)
    ]
    measured: list[Pod] = []
    step = max(1, len(singles) // len(jobs))
    for j, job in enumerate(jobs):  # a job's workers arrive together, between runs of single pods
        measured.extend(singles[j * step : (j + 1) * step])
        measured.extend(job)
    measured.extend(singles[len(jobs) * step :])
    sizes = {key: group.min_member for key, group in groups.items()}

    def verify(init: list[ScheduleResult], results: list[ScheduleResult]) -> list[str]:
        problems = []
        placed: dict[str, int] = {}
        held: dict[tuple[str, str], str] = {}
        for r in init + results:
            if not r.scheduled:
                continue
            key = gang.group_key(r.pod)
            if key is not None:
                placed[key] = placed.get(key, 0) + 1
            for d in r.devices.get(GPU, []):
                other = held.setdefault((r.node or "", d), r.pod.key)
                if other != r.pod.key:
                    problems.append(f"{r.pod.key} and {other} both hold {d} on {r.node}")
        problems += [f"gang {k}: {placed.get(k, 0)} of {n} bound" for k, n in sizes.items() if placed.get(k, 0) != n]
        return problems

    return Built(nodes, [], measured, len(measured), verify=verify, groups=groups)


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "SchedulingBasic",
        "5000Nodes_10000Pods",
        680,
        Sizes(5000, 1000, 10000),
        Sizes(500, 500, 1000),
        build_basic,
        "default nodes (3 zones); pod-default pods (cpu 100m, memory 500Mi)",
    ),
    Workload(
        "SchedulingWithExtendedResource",
        "5000pods_5000nodes",
        180,
        Sizes(5000, 0, 5000),
        Sizes(500, 0, 500),
        build_extended,
        "node i advertises foo.com/bar-i: 1, pod i requests foo.com/bar-i: 1 (one feasible node per pod)",
    ),
    Workload(
        "SchedulingWithExtendedResource",
        "SharedGPU_5000Nodes_5000Pods",
        180,
        Sizes(5000, 1000, 5000),
        Sizes(500, 100, 500),
        build_shared_gpu,
        f"every node advertises {GPU}: 8; pods request 1 {GPU} + cpu 100m, memory 500Mi",
        ("not in scheduler_perf: compared against the 5000pods_5000nodes threshold",),
    ),
    Workload(
        "SchedulingNodeAffinity",
        "5000Nodes_10000Pods",
        220,
        Sizes(5000, 5000, 10000),
        Sizes(500, 500, 1000),
        build_node_affinity,
        f"nodes over zone1..zone4; pods require {ZONE_LABEL} In [zone1, zone2] (half the nodes feasible)",
        ("scheduler_perf labels every node zone1 (all feasible); here half the nodes are filtered out",),
    ),
    Workload(
        "SchedulingPodAntiAffinity",
        "5000Nodes_2000Pods",
        60,
        Sizes(5000, 1000, 2000),
        Sizes(500, 100, 400),
        build_pod_anti_affinity,
        "color=green pods with required anti-affinity on kubernetes.io/hostname (init in sched-0, measured sched-1)",
    ),
    Workload(
        "Unschedulable",
        "5kNodes_100Init_10kPods",
        590,
        Sizes(5000, 100, 10000, 200),
        Sizes(500, 10, 1000, 20),
        build_unschedulable,
        "pod-default pods interleaved with priority-10 pods requesting cpu 9 (fit nowhere)",
        ("scheduler_perf injects cpu-9 pods at 5/s during the run (~85 at 590 pods/s); here 200, all in the stream",),
    ),
)

WORKLOADS += (
    Workload(
        "TopologyAware",
        "5000Nodes_8GPUs_5000Pods",
        180,
        Sizes(5000, 1000, 5000),
        Sizes(500, 100, 500),
        build_topology,
        f"8 {GPU} per node on 2 NUMA nodes behind 4 switches, 2 NICs; single-numa-node kubelets; pods ask 1-4 GPUs,"
        " half want NIC alignment",
        ("not in scheduler_perf: compared against the SchedulingWithExtendedResource threshold",),
    ),
    Workload(
        "MIG",
        "1000Nodes_8A100_8000Pods",
        180,
        Sizes(1000, 2000, 8000),
        Sizes(100, 200, 800),
        build_mig,
        "8 dynamically partitioned A100-40GB per node; pods ask one MIG instance (1g.5gb..4g.20gb mix)",
        ("not in scheduler_perf: compared against the SchedulingWithExtendedResource threshold",),
    ),
)

WORKLOADS += (
    Workload(
        "PreemptionAsync",
        "5000Nodes",
        570,
        Sizes(5000, 20000, 5000),
        Sizes(500, 2000, 500),
        build_preemption,
        "4 low-priority pods (cpu 900m) per node; measured pods have priority 10 and cpu 3: each evicts three",
        (
            "kube-scheduler evaluates candidate nodes in 16 goroutines and deletes victims asynchronously; here one"
            " Python thread, victims evicted in the cycle",
        ),
    ),
    Workload(
        "Gangs",
        "5000Nodes_60Gangs8to256_5000Pods",
        180,
        Sizes(5000, 0, 5000),
        Sizes(500, 0, 500),
        build_gangs,
        f"8 {GPU} per node; per 500 nodes one gang each of 8, 16, 32, 64, 128 and 256 workers x 4 GPUs, among"
        " single pods of 1-2 GPUs; every gang bound whole",
        (
            "not in scheduler_perf (kube-scheduler has no gangs): pods/s compared against the"
            " SchedulingWithExtendedResource threshold",
        ),
    ),
)

# scheduler_perf's DRA workloads (benchmarks/dra.py): test/integration/scheduler_perf/dra/, 500 DRA nodes of 10
# devices where upstream has them. Those without a threshold upstream are compared against
# SchedulingWithResourceClaimTemplate's.
DRA_TEMPLATE_THRESHOLD = 40
_QH = "QueueingHintsEnabled"
_NO_THRESHOLD = "no threshold upstream: compared against SchedulingWithResourceClaimTemplate/5000pods_500nodes's"
_BORROWED = (
    "upstream has only a 'fast' shape (2 nodes, 10 pods): run at SchedulingWithResourceClaimTemplate/"
    "5000pods_500nodes's shape, 2500 init + 2500 measured pods on 500 DRA nodes"
)
_STEADY = "steady state: upstream runs for 10s; here a fixed number of pods, the timed run includes deleting them"
WORKLOADS += (
    Workload(
        "SchedulingWithResourceClaimTemplate",
        "5000pods_500nodes",
        DRA_TEMPLATE_THRESHOLD,
        Sizes(500, 2500, 2500),
        Sizes(50, 250, 250),
        dra.build_scheduling_with_template,
        "500 DRA nodes x 10 devices (test-driver.cdi.k8s.io); every pod has a claim from test-claim-template: one"
        " device of test-class; the pods fill the cluster",
        other_thresholds=((f"5000pods_500nodes_{_QH}", 56),),
        group="DRA",
    ),
    *(
        Workload(
            "SteadyStateClusterResourceClaimTemplate",
            f"{fill}_500nodes",
            threshold,
            Sizes(500, 0, 2000),
            Sizes(50, 0, 200),
            builder,
            f"500 DRA nodes x 10 devices, {claims} claims allocated up front (allocResourceClaims); pods with a"
            " template claim created 10 at a time, scheduled, then deleted with their claims",
            (_STEADY,),
            ((f"{fill}_500nodes_{_QH}", qh),),
            "DRA",
        )
        for fill, claims, threshold, qh, builder in (
            ("empty", 0, 64, 64, dra.build_steady_empty),
            ("half", 2500, 70, 60, dra.build_steady_half),
            ("full", 4990, 60, 60, dra.build_steady_full),
        )
    ),
    Workload(
        "ExtendedResource_25Classes",
        "5000pods_500nodes",
        DRA_TEMPLATE_THRESHOLD,
        Sizes(500, 2500, 2500),
        Sizes(50, 250, 250),
        dra.build_extended_resource,
        "25 DeviceClasses with extendedResourceName example.com/gpu-k over 500 DRA nodes x 10 devices; pod i requests"
        " example.com/gpu-(i mod 25): 1 (no claim of its own)",
        (_NO_THRESHOLD,),
        group="DRA",
    ),
    Workload(
        "ImplicitExtendedResource_25Classes",
        "5000pods_500nodes",
        DRA_TEMPLATE_THRESHOLD,
        Sizes(500, 2500, 2500),
        Sizes(50, 250, 250),
        dra.build_implicit_extended_resource,
        "25 DeviceClasses over 500 DRA nodes x 10 devices; pod i requests"
        " deviceclass.resource.kubernetes.io/test-class-(i mod 25): 1",
        (_NO_THRESHOLD,),
        group="DRA",
    ),
    Workload(
        "Partitionable",
        "2000pods_100nodes",
        DRA_TEMPLATE_THRESHOLD,
        Sizes(100, 0, 2000),
        Sizes(5, 0, 200),
        dra.build_partitionable,
        "100 DRA nodes; 2000 pools (counter set + 6 partitionable devices) on every node, 2000 claims pre-allocated;"
        " steady state of 2000 pods, claims for 2 devices of one slice (matchAttribute)",
        (
            _NO_THRESHOLD,
            _STEADY,
            "the whole 2000-pod round is measured, the first pod's pool gathering and CEL over 12,000 devices"
            " included; --quick: 5 nodes, 100 pools, two rounds",
        ),
        group="DRA",
    ),
    Workload(
        "FirstAvailable",
        "5000pods_500nodes",
        DRA_TEMPLATE_THRESHOLD,
        Sizes(500, 2500, 2500),
        Sizes(50, 250, 250),
        dra.build_first_available,
        "claims with firstAvailable [no-devices-class, test-class] (prioritizedlist) on 500 DRA nodes x 10 devices",
        (_NO_THRESHOLD, _BORROWED),
        group="DRA",
    ),
    Workload(
        "DeviceTaintToleration",
        "5000pods_500nodes",
        DRA_TEMPLATE_THRESHOLD,
        Sizes(500, 2500, 2500),
        Sizes(50, 250, 250),
        dra.build_device_taints,
        "every device tainted example.com/taint:NoSchedule; claims tolerate it (operator Exists)",
        (
            _NO_THRESHOLD,
            _BORROWED,
            "the taint is written on each device where upstream's DeviceTaintRule taint-all-devices adds it",
        ),
        group="DRA",
    ),
    Workload(
        "ConsumableCapacity",
        "2000pods_100nodes",
        DRA_TEMPLATE_THRESHOLD,
        Sizes(100, 0, 2000),
        Sizes(5, 0, 200),
        dra.build_consumable_capacity,
        "100 DRA nodes x 20 plain devices, 2000 slices of one shareable 80Gi device on every node; steady state of"
        " 2000 pods, claims asking 40Gi twice",
        (
            _NO_THRESHOLD,
            _STEADY,
            "the whole 2000-pod round is measured; --quick: 5 nodes, 100 slices, two rounds",
        ),
        group="DRA",
    ),
)

BY_NAME = {w.name: w for w in WORKLOADS}


def select(patterns: list[str] | None) -> list[Workload]:
    """Workloads by exact name, by case-insensitive substring (``NodeAffinity``, ``basic``) or group (``DRA``)."""
    if not patterns:
        return list(WORKLOADS)
    chosen: list[Workload] = []
    for pattern in patterns:
        for part in (p.strip() for p in pattern.split(",")):
            if not part:
                continue
            exact = BY_NAME.get(part)
            matches = [exact] if exact else [
                w for w in WORKLOADS if part.lower() in w.name.lower() or part.lower() == w.group.lower()
            ]
            if not matches:
                known = ", ".join(BY_NAME)
                raise SystemExit(f"benchmarks: no workload matches {part!r} (known: {known})")
            chosen.extend(m for m in matches if m not in chosen)
    return chosen
