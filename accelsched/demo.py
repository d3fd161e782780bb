"""The lab scenario behind ``make demo``: a four-node accelerator cluster, played step by step.

Each step applies Kubernetes YAML (the shipped deploy/ manifests and examples/lab/), like ``kubectl apply``,
then schedules every pending pod. The steps are data (LAB_STEPS) so tests replay exactly what the demo shows.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from accelsched import report
from accelsched.api.loader import Inputs, build_inputs, read_documents
from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.config import kube_scheduler_config
from accelsched.devices import partition as partitioning
from accelsched.engine import Session
from accelsched.explain import Explainer, NodeVerdict
from accelsched.fabric import request as fabric_request
from accelsched.framework import gang
from accelsched.framework.scheduler import ScheduleResult
from accelsched.queues import explain as queue_explain
from accelsched.queues import report as queue_report
from accelsched.topology.alignment import TopologyIndex, pod_admitted
from accelsched.topology.allocator import NIC_ANNOTATION, NUMA_ANNOTATION

# The lab's YAML, under the names the steps give: in a checkout, accelsched/data/demo/{examples,deploy} link to the
# repository's examples/ and deploy/ (one copy); a wheel carries the files themselves (pyproject's package-data).
ROOT = Path(__file__).resolve().parent / "data" / "demo"


@dataclass(frozen=True)
class Step:
    title: str
    story: str
    files: tuple[str, ...]
    compare_default: bool = False  # also show where the stock kube-scheduler would bind, and if the kubelet admits
    sharing_summary: bool = False  # also compare the ways of sharing devices (whole, MIG, time-slicing)
    compare_naive: bool = False  # also schedule each gang member on its own, as a per-pod scheduler would
    compare_preemption: bool = False  # also show whom a preemption blind to gangs would evict
    fabric_ranks: bool = False  # also show each gang's ranks with the fabric domains they landed in
    queues: bool = False  # also show Kueue's workloads with their conditions, the ClusterQueues, and why not admitted


LAB_STEPS = (
    Step(
        "The cluster and its device plugin",
        "Four nodes on two PDUs advertise qualcomm.com/ai-accelerator. The device-plugin DaemonSet tolerates every "
        "taint, so it lands on all four nodes, the tainted node-c included.",
        ("examples/lab/00-nodes.yaml", "deploy/device-plugin-daemonset.yaml"),
    ),
    Step(
        "Capacity: a pod asking for 16 accelerators",
        "No node has 16 accelerators. kube-scheduler's message counts one reason per node; the breakdown says how "
        "many each node is short.",
        ("examples/lab/02-train-16.yaml",),
    ),
    Step(
        "Taints and tolerations: node-c is under maintenance",
        "maint-tool tolerates maintenance=true:NoSchedule and lands on node-c; infer-b asks for node-c without the "
        "toleration and stays Pending.",
        ("examples/lab/03-maintenance.yaml",),
    ),
    Step(
        "Cordon: kubectl cordon node-b",
        "node-b gets spec.unschedulable: true. A pod pinned to node-b stays Pending; the device-plugin pod already "
        "there keeps running (it tolerates node.kubernetes.io/unschedulable).",
        ("examples/lab/04-cordon-node-b.yaml",),
    ),
    Step(
        "Anti-affinity across PDUs: the tenant's inference Deployment",
        "Three replicas, each needing its own PDU. Two PDUs have room (node-b is cordoned, node-c tainted), so the "
        "third replica stays Pending with the anti-affinity reason.",
        ("deploy/tenant-inference.yaml",),
    ),
    Step(
        "Binding consumes capacity",
        "Every bind takes device IDs. With one card gone on node-a and node-d, a 4-card job fits nowhere; two 3-card "
        "jobs take what is left.",
        ("examples/lab/06-fill.yaml",),
    ),
    Step(
        "Topology: accelerators beside their NIC, on one NUMA node",
        "node-e and node-f run the kubelet Topology Manager with single-numa-node. train-nic wants four cards next "
        "to its NIC. The stock scheduler counts cards only and picks the emptier node-f, whose free cards are split "
        "over both NUMA nodes: the kubelet would reject the pod. accelsched predicts that and binds on node-e.",
        ("examples/lab/07-topology.yaml",),
        compare_default=True,
    ),
    Step(
        "Fractional accelerators: whole devices, MIG instances, time-slicing",
        "The same small inference pods (a seventh of an A100 each), eight per variant, on three nodes with two A100s "
        "each. Whole devices serve two; dynamic MIG carves 1g.5gb instances at valid start slots with hardware "
        "isolation; time-slicing serves four per device without isolation. The MIG node's last slice of each GPU "
        "is memory no 1g.5gb can use: fragmentation.",
        ("examples/lab/08-fractional.yaml",),
        sharing_summary=True,
    ),
    Step(
        "Gangs: two training jobs that only fit one at a time",
        "Workers of train-a and train-b arrive interleaved; each job needs all four workers (PodGroup minMember 4) "
        "and the two nodes hold one job. A per-pod scheduler places workers as they come: each job gets half the "
        "cards and neither can start, a deadlock. accelsched decides a gang in one go: train-a whole, train-b "
        "waits holding nothing.",
        ("examples/lab/09-gangs.yaml",),
        compare_naive=True,
    ),
    Step(
        "Priority and preemption: an urgent inference pod on a full pool",
        "The burst pool is full: two batch jobs (priority 200) on node-l, the two workers of the sweep gang "
        "(priority 100) on node-m and node-n. An inference pod of priority 100000 needs two cards. Preemption "
        "evicts the least important pods; kube-scheduler, blind to gangs, would evict one sweep worker and leave "
        "the other holding two cards for a job that cannot run. accelsched evicts the sweep gang whole.",
        ("examples/lab/10-preemption.yaml",),
        compare_preemption=True,
    ),
    Step(
        "A fabric: blocks of NVLink domains, a gang with its ranks in order",
        "Sixteen 4-GPU trays in two blocks of two NVLink domains (nvidia.com/gpu.clique), described by Kueue's "
        "Topology. pretrain asks, with Kueue's podset annotations, for one block and slices of 3 consecutive ranks "
        "per NVLink domain. Only block-0 holds two slices; inside it the tightest domains are taken, and ranks 0-2 "
        "and 3-5 each share a domain, in order.",
        ("examples/lab/12-fabric-nodes.yaml", "examples/lab/12-fabric-gang.yaml"),
        fabric_ranks=True,
    ),
    Step(
        "Preemption that frees one NVLink domain",
        "urgent-nvl needs a whole NVLink domain and none has four free trays. Evicting a pod here and there would "
        "not help; freeing nvl-3 would cost three batch pods that ran a day (288 GPU-hours), nvl-2 two that ran 4 "
        "hours (32). accelsched evicts exactly those two and places the gang in nvl-2.",
        ("examples/lab/13-fabric-preemption.yaml",),
        fabric_ranks=True,
    ),
    Step(
        "Queues: team-a borrows team-b's idle GPUs",
        "Two teams share two 8-GPU nodes through Kueue's objects (kueue.x-k8s.io/v1beta2): each ClusterQueue is "
        "guaranteed 8 GPUs in the cohort research and may borrow what the other leaves idle. team-b is idle; team-a "
        "submits two 8-GPU jobs. pretrain runs on team-a's own quota, finetune borrows team-b's 8 GPUs. The "
        "conditions are the ones Kueue writes, word for word.",
        ("examples/lab/14-queues.yaml",),
        queues=True,
    ),
    Step(
        "Queues: team-b comes back and reclaims its GPUs",
        "team-b submits eval (4 GPUs). Its ClusterQueue is under its guarantee and team-a is borrowing, so Kueue's "
        "reclaimWithinCohort preempts team-a's borrowing workload, finetune: Preempted (InCohortReclamation), "
        "Evicted and Requeued, its pods off their node. eval is admitted on the quota it got back. finetune waits, "
        "its pods SchedulingGated (not Unschedulable: no autoscaler scales up for a quota wait). accelsched says "
        "which quota blocks it, how much the cohort still lends, whose workloads hold the GPUs, and the smallest "
        "change that admits it.",
        ("examples/lab/15-queues-reclaim.yaml",),
        queues=True,
    ),
    Step(
        "Dynamic Resource Allocation: two accelerators beside a NIC on one PCIe root",
        "node-p and node-q publish their accelerators and NICs as ResourceSlices (resource.k8s.io/v1), read from "
        "/sys by accelsched's DRA driver, with the standard resource.kubernetes.io/pcieRoot attribute. Each training "
        "pod's ResourceClaim asks for two accelerators and a NIC with one pcieRoot (matchAttribute). train-dra-a "
        "gets node-p's pci0000:00 devices. train-dra-b fits nowhere: kube-scheduler only says \"cannot allocate all "
        'claims"; accelsched says device by device why, and what would help.',
        ("examples/lab/11-dra-nodes.yaml", "examples/lab/11-dra-slices.yaml", "examples/lab/11-dra-claims.yaml"),
    ),
)

ISOLATION = {"whole": "whole device", "mig": "hardware (own memory and compute slices)", "timeslicing": "none (shared)"}


def sharing_table(outcome: StepOutcome) -> Table:
    """Per way of sharing: pods placed, pods per device, units in use and fragmentation, and the isolation."""
    cluster = outcome.session.cluster
    typical = [r.pod.requests for r in outcome.shown]
    table = Table(title="Utilization vs isolation", title_justify="left")
    for col in ("node", "sharing", "pods placed", "pods per GPU", "capacity in use", "fragmented", "isolation"):
        table.add_column(col)
    for i, node in enumerate(cluster.nodes):
        sharing = node.labels.get("accelsched.io/sharing")
        if sharing is None or not any(
            r.pod.raw.get("spec", {}).get("nodeSelector", {}).get("accelsched.io/sharing") == sharing
            for r in outcome.shown
        ):
            continue
        asked = [r for r in outcome.shown if r.pod.raw["spec"]["nodeSelector"]["accelsched.io/sharing"] == sharing]
        placed = sum(1 for r in asked if r.node == node.name)
        part = cluster.devices[i].partition
        if part is None:
            gpus = len(cluster.devices[i].pools.get("nvidia.com/gpu").ids)
            held = gpus - cluster.devices[i].pools["nvidia.com/gpu"].free_count
            in_use, frag = f"{held}/{gpus} GPUs", "0"
        else:
            gpus = len(part.devices)
            unit = partitioning.UNIT_NAMES[part.mode]
            in_use, frag = f"{part.used_units()}/{part.total_units} {unit}", f"{part.fragmentation(typical)} {unit}"
        table.add_row(
            node.name, sharing, f"{placed}/{len(asked)}", f"{placed / gpus:.1f}", in_use, frag, ISOLATION[sharing]
        )
    return table


@dataclass
class DefaultChoice:
    """Where the stock kube-scheduler binds a pod, and whether that node's kubelet would admit it."""

    node: str | None
    admitted: bool
    policy: str


@dataclass
class StepOutcome:
    step: Step
    session: Session
    results: list[ScheduleResult]
    new_pods: set[str]
    verdicts: dict[str, list[NodeVerdict]]
    notes: dict[str, list[str]] = field(default_factory=dict)  # per pod: the explainer's cluster-wide notes
    default: dict[str, DefaultChoice] = field(default_factory=dict)
    naive: dict[str, str | None] = field(default_factory=dict)  # pod -> node under per-pod scheduling
    blind: dict[str, list[str]] = field(default_factory=dict)  # preemptor -> victims when gangs are ignored

    @property
    def shown(self) -> list[ScheduleResult]:
        """The results of this step's own pods (earlier Pending pods are retried, but were shown before)."""
        return [r for r in self.results if r.pod.key in self.new_pods]


def play(steps: tuple[Step, ...] = LAB_STEPS, root: Path = ROOT, seed: int = 0) -> Iterator[StepOutcome]:
    """Apply each step's YAML on top of the last and schedule all pending pods; yield what happened."""
    inputs = Inputs()
    for step in steps:
        docs = [d for f in step.files for d in read_documents(root / f)]
        before = {p.key for p in inputs.pods}
        for d in docs:
            d.source = str(Path(d.source).relative_to(root))
        inputs = build_inputs(docs, base=inputs)
        default = stock_scheduler_choices(inputs, seed) if step.compare_default else {}
        naive = per_pod_placements(inputs, seed) if step.compare_naive else {}
        blind = gang_blind_victims(inputs, seed) if step.compare_preemption else {}
        session = Session.start(inputs, seed=seed)
        explainer = Explainer(session.scheduler)
        results = session.rejected + session.schedule()
        new = {p.key for p in inputs.pods} - before
        notes = {key: n for key, n in explainer.notes.items() if key in new and n and _has_claims(session, key)}
        yield StepOutcome(step, session, results, new, explainer.verdicts, notes, default, naive, blind)


def _has_claims(session: Session, key: str) -> bool:
    """Only the claims' notes are shown in the demo (the other notes predate DRA and the demo never showed them)."""
    pod = next((p for p in session.inputs.pods if p.key == key), None)
    return pod is not None and bool((pod.raw.get("spec") or {}).get("resourceClaims"))


def per_pod_placements(inputs: Inputs, seed: int) -> dict[str, str | None]:
    """Where a scheduler without gangs would put each pod: every gang member on its own, as it arrives."""
    session = Session.start(copy.deepcopy(inputs), seed=seed)
    session.scheduler.groups = {}
    return {r.pod.key: r.node for r in session.schedule()}


def gang_blind_victims(inputs: Inputs, seed: int) -> dict[str, list[str]]:
    """Whom preemption evicts when no pod is known to belong to a gang, as in kube-scheduler."""
    blind = copy.deepcopy(inputs)
    for pod in blind.pods:
        pod.labels.pop(gang.POD_GROUP_LABEL, None)
    session = Session.start(blind, seed=seed)
    session.scheduler.groups = {}
    return {r.pod.key: [v.key for v in r.preempted] for r in session.schedule() if r.preempted}


def rank_table(outcome: StepOutcome) -> Table:
    """Each fabric gang's members by rank, with the domain of every Topology level they landed in."""
    levels = [k for t in outcome.session.scheduler.topologies for k in t.levels if k != "kubernetes.io/hostname"]
    table = Table(title="Ranks on the fabric", title_justify="left")
    for col in ("gang", "rank", "pod", "node", *levels):
        table.add_column(col)
    cluster = outcome.session.cluster
    placed = [r for r in outcome.shown if r.node and gang.group_key(r.pod)]
    for r in sorted(placed, key=lambda r: (gang.group_key(r.pod), fabric_request.rank(r.pod.labels, {}, r.pod.name))):
        labels = cluster.nodes[cluster.index[r.node]].labels
        rank = r.pod.labels.get(fabric_request.COMPLETION_INDEX, "")
        table.add_row(gang.group_key(r.pod), rank, r.pod.name, r.node, *(labels.get(k, "") for k in levels))
    return table


def _can_start(minimum: int, bound: int) -> str:
    return "[green]yes[/]" if bound >= minimum else "[red]no[/]"


def gang_table(outcome: StepOutcome) -> Table:
    """Per gang: workers bound by a per-pod scheduler vs by accelsched, and whether the job can start."""
    table = Table(title="Gangs: per-pod scheduler vs accelsched", title_justify="left")
    for col in (
        "gang",
        "minMember",
        "per-pod: bound",
        "per-pod: can start",
        "accelsched: bound",
        "accelsched: can start",
    ):
        table.add_column(col)
    groups = outcome.session.scheduler.groups
    for key, group in sorted(groups.items()):
        members = [r for r in outcome.shown if gang.group_key(r.pod) == key]
        if not members:
            continue
        naive = sum(1 for r in members if outcome.naive.get(r.pod.key))
        ours = sum(1 for r in members if r.node)
        yes = functools.partial(_can_start, group.min_member)
        table.add_row(
            key, str(group.min_member), f"{naive}/{len(members)}", yes(naive), f"{ours}/{len(members)}", yes(ours)
        )
    return table


def stock_scheduler_choices(inputs: Inputs, seed: int) -> dict[str, DefaultChoice]:
    """Schedule a copy of the inputs with the stock profile, noting before each bind what the kubelet would say."""
    session = Session.start(copy.deepcopy(inputs), config=kube_scheduler_config(), seed=seed)
    admitted: dict[str, np.ndarray] = {}

    def observe(pod: Pod) -> None:
        admitted[pod.key] = pod_admitted(pod, TopologyIndex.of(session.cluster), session.cluster)

    session.scheduler.observer = observe
    choices = {}
    for r in session.schedule():
        node = session.cluster.index.get(r.node) if r.node else None
        layout = session.cluster.nodes[node].layout if node is not None else None
        choices[r.pod.key] = DefaultChoice(
            r.node, bool(node is None or admitted[r.pod.key][node]), layout.policy if layout else "none"
        )
    return choices


def _events(console: Console, outcome: StepOutcome) -> None:
    for r in outcome.shown:
        console.print(f"[bold]{r.pod.key}[/]")
        choice = outcome.default.get(r.pod.key)
        if choice is not None:
            console.print(f"  {compare_line(r, choice)}", soft_wrap=True, highlight=False)
        if r.node:
            devices = f" (devices {', '.join(i for ids in r.devices.values() for i in ids)})" if r.devices else ""
            console.print(
                f"  Normal   Scheduled         Successfully assigned {r.pod.key} to {r.node}{devices}", soft_wrap=True
            )
            for line in claim_lines(outcome.session.cluster, r):
                console.print(f"  {line}", soft_wrap=True, highlight=False)
            if r.preempted:
                console.print(f"  (evicted {', '.join(v.key for v in r.preempted)} to make room)", soft_wrap=True)
            if r.pod.key in outcome.blind:
                console.print(f"  {preemption_line(r, outcome.blind[r.pod.key])}", soft_wrap=True, highlight=False)
            continue
        if r.preempted_by:
            console.print(f"  Normal   Preempted         {r.message}", soft_wrap=True)
            continue
        console.print(f"  Warning  FailedScheduling  [red]{r.message}[/]", soft_wrap=True)
        for note in outcome.notes.get(r.pod.key, []):
            console.print(f"    {escape(note)}", soft_wrap=True, highlight=False)
        for nodes, v in grouped([v for v in outcome.verdicts.get(r.pod.key, []) if not v.feasible]):
            console.print(f"    {nodes}: {v.first_filter}: {', '.join(v.reasons)}", soft_wrap=True)
            for d in v.details:
                console.print(f"      - {escape(d)}", soft_wrap=True, highlight=False)
            for fix in v.remedies:
                console.print(f"      [cyan]→ {escape(fix)}[/]", soft_wrap=True, highlight=False)


def grouped(verdicts: list[NodeVerdict]) -> list[tuple[str, NodeVerdict]]:
    """Rejected nodes with the very same explanation on one line (``node-a, node-b: ...``), in node order."""
    groups: dict[tuple, list[NodeVerdict]] = {}
    for v in verdicts:
        key = (v.first_filter, tuple(v.reasons), tuple(v.details), tuple(v.remedies))
        groups.setdefault(key, []).append(v)
    return [(", ".join(v.node for v in group), group[0]) for group in groups.values()]


def claim_lines(cluster: ClusterState, r: ScheduleResult) -> list[str]:
    """A bound pod's DRA claims: ``claim net-accel (train-dra-a-net-accel-x): accel accel-0, accel-1; nic nic-0,
    all with resource.kubernetes.io/pcieRoot pci0000:00`` when a matchAttribute constraint tied them."""
    dra = getattr(cluster, "dra", None)
    if dra is None or not (r.pod.raw.get("spec") or {}).get("resourceClaims"):
        return []
    lines = []
    for entry in dra.pod_claim_results(r.pod):
        by_request: dict[str, list[str]] = {}
        for result in entry["results"]:
            by_request.setdefault(result["request"], []).append(result["device"])
        devices = "; ".join(f"{request} {', '.join(ids)}" for request, ids in by_request.items())
        line = f"claim {entry['name']} ({entry['resourceClaimName']}): {devices or 'no devices'}"
        key = f"{r.pod.namespace}/{entry['resourceClaimName']}"
        claim = dra.claims.get(key)
        shared = _shared_attributes(dra, claim, entry["results"]) if claim is not None else []
        lines.append(line + "".join(f", all with {name} {value}" for name, value in shared))
    return lines


def _shared_attributes(dra: Any, claim: Any, results: list[dict[str, str]]) -> list[tuple[str, str]]:
    """The value each matchAttribute constraint of the claim made its allocated devices share."""
    devices = {(s.driver, s.pool.name, d.name): d for s in dra.slices.values() for d in s.devices}
    out = []
    for constraint in claim.spec.constraints:
        name = constraint.match_attribute
        values = {
            str(devices[key].attributes.get(name))
            for key in ((x["driver"], x["pool"], x["device"]) for x in results)
            if key in devices and name in devices[key].attributes
        }
        if name and len(values) == 1:
            out.append((name, values.pop()))
    return out


def preemption_line(r: ScheduleResult, blind: list[str]) -> str:
    """E.g. ``default kube-scheduler evicts default/sweep-0 (leaving default/sweep-1 of gang default/sweep
    running, useless); accelsched evicts default/sweep-0, default/sweep-1``."""
    line = f"default kube-scheduler evicts {', '.join(blind)}"
    evicted = set(blind)
    split = sorted(
        {
            (gang.group_key(p), p.key)
            for p in r.preempted
            if gang.group_key(p) and p.key not in evicted and any(gang.group_key(v) for v in r.preempted)
        }
    )
    if split:
        left = ", ".join(key for _, key in split)
        line += f" (leaving {left} of gang {split[0][0]} running, useless)"
    return line + f"; accelsched evicts {', '.join(v.key for v in r.preempted)}"


def compare_line(r: ScheduleResult, choice: DefaultChoice) -> str:
    """E.g. ``default kube-scheduler: node-f, rejected at admission by single-numa-node (TopologyAffinityError);
    accelsched: node-e, NUMA 0 with nic0``."""
    if choice.node is None:
        stock = "Pending"
    elif choice.admitted:
        stock = f"{choice.node}, admitted"
    else:
        stock = f"{choice.node}, rejected at admission by {choice.policy} (TopologyAffinityError)"
    ours = r.node or "Pending"
    annotations = r.pod.raw.get("metadata", {}).get("annotations") or {}
    if r.node and annotations.get(NUMA_ANNOTATION):
        ours += f", NUMA {annotations[NUMA_ANNOTATION]}"
        if annotations.get(NIC_ANNOTATION):
            ours += f" with {annotations[NIC_ANNOTATION]}"
    return f"default kube-scheduler: {stock}; accelsched: {ours}"


def workload_lines(outcome: StepOutcome) -> list[str]:
    """Each Kueue workload with its conditions (type=status, reason, message) and, for one not admitted, what
    holds its pods back."""
    queues = outcome.session.queues
    if queues is None:
        return []
    lines = []
    held = queues.held()
    inputs = outcome.session.inputs
    for o in queues.outcomes:
        state = "admitted" if o.admitted else ("preempted, requeued" if o.preempted else "not admitted")
        lines.append(f"workload {o.info.key} ({o.cluster_queue}): {state}")
        lines.extend(f"  {c['type']}={c['status']}  {c['reason']}  {c['message']}" for c in o.conditions)
        if o.admitted:
            continue
        pods = sorted(p.key for p in o.info.pods if p.key in held)
        if pods:
            lines.append(f"  accelsched: its pods {', '.join(pods)} are SchedulingGated (never Unschedulable)")
        why = queue_explain.explain(queues, o, inputs.pods, inputs.namespaces, inputs.nodes)
        lines.extend(f"  accelsched: {line}" for line in why.lines()[1:])  # the first repeats the message
    return lines


def run_demo(console: Console, last_step: int | None = None, seed: int = 0) -> None:
    steps = LAB_STEPS if last_step is None else LAB_STEPS[:last_step]
    for n, outcome in enumerate(play(steps, seed=seed), start=1):
        console.print(Panel(outcome.step.story, title=f"Step {n}: {outcome.step.title}", title_align="left"))
        console.print("  applied: " + ", ".join(outcome.step.files))
        dra = outcome.session.cluster.dra
        console.print(report.pods_table(outcome.shown, title="Pods placed in this step", why=False, dra=dra))
        _events(console, outcome)
        typical = [r.pod.requests for r in outcome.shown]
        console.print(report.nodes_table(outcome.session.cluster, typical=typical))
        line = report.fragmentation_line(outcome.session.cluster, typical)
        if line:
            console.print(line)
        if outcome.step.sharing_summary:
            console.print(sharing_table(outcome))
        if outcome.step.compare_naive:
            console.print(gang_table(outcome))
        if outcome.step.fabric_ranks:
            console.print(rank_table(outcome))
        if outcome.step.queues and outcome.session.queues is not None:
            for line in workload_lines(outcome):
                console.print(escape(line), soft_wrap=True, highlight=False)
            console.print(queue_report.cluster_queues_table(outcome.session.queues))
    summary = Table(title="Summary", title_justify="left")
    summary.add_column("scheduled", justify="right")
    summary.add_column("pending", justify="right")
    bound = sum(1 for p in outcome.session.inputs.pods if p.node_name)
    summary.add_row(str(bound), str(len(outcome.session.inputs.pods) - bound))
    console.print(summary)
