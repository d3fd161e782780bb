"""The lab scenario behind ``make demo``: a four-node accelerator cluster, played step by step.

Each step applies Kubernetes YAML (the shipped deploy/ manifests and examples/lab/), like ``kubectl apply``,
then schedules every pending pod. The steps are data (LAB_STEPS) so tests replay exactly what the demo shows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from accelsched import report
from accelsched.api.loader import Inputs, build_inputs, read_documents
from accelsched.engine import Session
from accelsched.explain import Explainer, NodeVerdict
from accelsched.framework.scheduler import ScheduleResult

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Step:
    title: str
    story: str
    files: tuple[str, ...]


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
)


@dataclass
class StepOutcome:
    step: Step
    session: Session
    results: list[ScheduleResult]
    new_pods: set[str]
    verdicts: dict[str, list[NodeVerdict]]

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
        session = Session.start(inputs, seed=seed)
        explainer = Explainer(session.scheduler)
        results = session.rejected + session.schedule()
        yield StepOutcome(step, session, results, {p.key for p in inputs.pods} - before, explainer.verdicts)


def _events(console: Console, outcome: StepOutcome) -> None:
    for r in outcome.shown:
        console.print(f"[bold]{r.pod.key}[/]")
        if r.node:
            devices = f" (devices {', '.join(i for ids in r.devices.values() for i in ids)})" if r.devices else ""
            console.print(
                f"  Normal   Scheduled         Successfully assigned {r.pod.key} to {r.node}{devices}", soft_wrap=True
            )
            continue
        console.print(f"  Warning  FailedScheduling  [red]{r.message}[/]", soft_wrap=True)
        for v in outcome.verdicts.get(r.pod.key, []):
            if v.feasible:
                continue
            console.print(f"    {v.node}: {v.first_filter}: {', '.join(v.reasons)}", soft_wrap=True)
            for d in v.details:
                console.print(f"      - {d}", soft_wrap=True, highlight=False)
            for fix in v.remedies:
                console.print(f"      [cyan]→ {fix}[/]", soft_wrap=True, highlight=False)


def run_demo(console: Console, last_step: int | None = None, seed: int = 0) -> None:
    steps = LAB_STEPS if last_step is None else LAB_STEPS[:last_step]
    for n, outcome in enumerate(play(steps, seed=seed), start=1):
        console.print(Panel(outcome.step.story, title=f"Step {n}: {outcome.step.title}", title_align="left"))
        console.print("  applied: " + ", ".join(outcome.step.files))
        console.print(report.pods_table(outcome.shown, title="Pods placed in this step", why=False))
        _events(console, outcome)
        console.print(report.nodes_table(outcome.session.cluster))
    summary = Table(title="Summary", title_justify="left")
    summary.add_column("scheduled", justify="right")
    summary.add_column("pending", justify="right")
    bound = sum(1 for p in outcome.session.inputs.pods if p.node_name)
    summary.add_row(str(bound), str(len(outcome.session.inputs.pods) - bound))
    console.print(summary)
