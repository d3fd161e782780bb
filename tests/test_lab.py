"""The lab demo's claims, replayed from the same steps the demo shows (so the demo and the issue cannot drift)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from accelsched.cli import main
from accelsched.demo import LAB_STEPS, play
from conformance import cases

CASES = Path(__file__).resolve().parent / "conformance_cases"


def recorded_message(case: str, pod: str) -> str:
    """What the real kube-scheduler v1.36.3 said for this lab step's pod (`python -m conformance record`)."""
    _, outcomes, _ = cases.read(CASES / f"lab-{case}.yaml")
    assert outcomes is not None, f"lab-{case}.yaml has no recorded outcome: run python -m conformance record"
    (outcome,) = [o for o in outcomes if o.pod == f"default/{pod}"]
    return outcome.message


@pytest.fixture(scope="module")
def outcomes():
    return list(play())


def titled(outcomes, start: str):
    (step,) = [o for o in outcomes if o.step.title.startswith(start)]
    return step


def by_name(outcome, name):
    (r,) = [r for r in outcome.results if r.pod.name == name]
    return r


def test_device_plugin_daemonset_lands_on_every_node_including_tainted(outcomes):
    placed = sorted(r.node for r in outcomes[0].shown)
    assert placed == ["node-a", "node-b", "node-c", "node-d"]


def test_sixteen_accelerators_fit_nowhere_with_the_kube_scheduler_message(outcomes):
    r = by_name(outcomes[1], "train-16")
    assert r.node is None
    assert r.message == recorded_message("02-train-16", "train-16")
    verdicts = {v.node: v for v in outcomes[1].verdicts["default/train-16"]}
    assert verdicts["node-c"].first_filter == "TaintToleration"
    assert any("12 short" in d for d in verdicts["node-a"].details)


def test_only_the_tolerating_pod_lands_on_the_tainted_node(outcomes):
    assert by_name(outcomes[2], "maint-tool").node == "node-c"
    infer_b = by_name(outcomes[2], "infer-b")
    assert infer_b.node is None
    assert infer_b.message == recorded_message("03-maintenance", "infer-b")
    remedies = {v.node: v.remedies for v in outcomes[2].verdicts["default/infer-b"]}
    assert "tolerate maintenance=true:NoSchedule would make node-c feasible" in remedies["node-c"]


def test_cordon_keeps_new_pods_off_but_daemon_pods_stay(outcomes):
    step = outcomes[3]
    infer_c = by_name(step, "infer-c")
    assert "1 node(s) were unschedulable" in infer_c.message
    verdicts = {v.node: v for v in step.verdicts["default/infer-c"]}  # what the lab shows, node by node
    assert verdicts["node-b"].reasons == ["node(s) were unschedulable"]
    node_b = step.session.cluster.index["node-b"]
    assert any(p.owner_kind == "DaemonSet" for p in step.session.cluster.pods_on[node_b].values())


def test_replicas_spread_over_pdus_and_the_extra_one_stays_pending(outcomes):
    step = outcomes[4]
    replicas = [r for r in step.shown if r.pod.namespace == "tenant-a"]
    assert len(replicas) == 3
    placed = [r for r in replicas if r.node]
    pdus = {step.session.cluster.nodes[step.session.cluster.index[r.node]].labels["accelsched.io/pdu"] for r in placed}
    assert len(placed) == 2 and len(pdus) == 2
    (pending,) = [r for r in replicas if not r.node]
    assert pending.message == (
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, "
        "2 node(s) didn't match pod anti-affinity rules."
        " no new claims to deallocate, preemption: 0/4 nodes are available:"
        " 2 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    )  # from the v1.36.3 source (FitError.Error, RunPostFilterPlugins)


def test_binding_consumes_capacity_and_devices_are_never_shared(outcomes):
    step = outcomes[5]
    assert by_name(step, "train-4").node is None
    assert "2 Insufficient qualcomm.com/ai-accelerator" in by_name(step, "train-4").message
    assert {by_name(step, "train-3a").node, by_name(step, "train-3b").node} == {"node-a", "node-d"}
    cluster = step.session.cluster
    row = cluster.res_index["qualcomm.com/ai-accelerator"]
    for i in range(cluster.n):
        held = [d for p in cluster.pods_on[i].values() for d in p.devices.get("qualcomm.com/ai-accelerator", [])]
        assert len(held) == len(set(held)) == cluster.requested[row, i]
        assert cluster.requested[row, i] <= cluster.allocatable[row, i]


def test_demo_command_prints_every_step():
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 0, result.output
    for n, step in enumerate(LAB_STEPS, start=1):
        assert f"Step {n}: {step.title}" in result.output
    assert "FailedScheduling" in result.output and "Successfully assigned" in result.output


def test_fractional_step_serves_more_pods_per_gpu_with_slices(outcomes):
    step = outcomes[7]
    placed = {}
    for r in step.shown:
        variant = r.pod.labels["app"]
        placed[variant] = placed.get(variant, 0) + bool(r.node)
    assert placed == {"chat-whole": 2, "chat-mig": 8, "chat-shared": 8}
    mig_ids = [d for r in step.shown if r.pod.labels["app"] == "chat-mig" for d in r.devices["nvidia.com/mig-1g.5gb"]]
    assert len(set(mig_ids)) == 8 and all(":1g.5gb@" in d for d in mig_ids)
    cluster = step.session.cluster
    part = cluster.devices[cluster.index["node-h"]].partition
    # Seven 1g.5gb fill one A100's compute; its eighth memory slice is left over: fragmentation.
    assert part.fragmentation([{"nvidia.com/mig-1g.5gb": 1}]) == 2


def test_gang_step_beats_the_per_pod_deadlock(outcomes):
    step = outcomes[8]
    workers = [r for r in step.shown if r.pod.name.startswith("train-")]
    per_pod = {
        g: sum(1 for r in workers if r.pod.name.startswith(g) and step.naive.get(r.pod.key))
        for g in ("train-a", "train-b")
    }
    ours = {g: sum(1 for r in workers if r.pod.name.startswith(g) and r.node) for g in ("train-a", "train-b")}
    assert per_pod == {"train-a": 2, "train-b": 2}  # each job half placed: neither can start
    assert ours == {"train-a": 4, "train-b": 0}


def test_preemption_step_evicts_the_running_gang_whole(outcomes):
    step = outcomes[9]
    by = {r.pod.name: r for r in step.shown}
    assert by["infer-urgent"].node in ("node-m", "node-n")
    assert sorted(v.name for v in by["infer-urgent"].preempted) == ["sweep-0", "sweep-1"]
    assert by["sweep-1"].message.startswith("Preempted by default/infer-urgent on node ")
    assert "batch-0" not in by and "batch-1" not in by  # bound before this step and untouched: no result
    cluster = step.session.cluster
    assert set(cluster.pods_on[cluster.index["node-l"]]) == {"default/batch-0", "default/batch-1"}
    # Blind to gangs (kube-scheduler), one worker goes and its partner keeps two cards for nothing.
    assert step.blind == {"default/infer-urgent": ["default/sweep-0"]}


def test_dra_step_puts_the_pair_beside_its_nic_and_explains_the_pending_pod_device_by_device(outcomes):
    step = titled(outcomes, "Dynamic Resource Allocation")
    cluster = step.session.cluster
    first, second = by_name(step, "train-dra-a"), by_name(step, "train-dra-b")
    assert first.node == "node-p"
    (claim,) = cluster.dra.pod_claim_results(first.pod)
    devices = {(s.pool.name, d.name): d for s in cluster.dra.slices.values() for d in s.devices}
    picked = [devices[(r["pool"], r["device"])] for r in claim["results"]]
    assert sorted(r["request"] for r in claim["results"]) == ["accel", "accel", "nic"]
    assert {d.attributes["resource.kubernetes.io/pcieRoot"] for d in picked} == {"pci0000:00"}
    assert second.node is None and "30 cannot allocate all claims" in second.message  # the fabric trays too
    verdicts = {v.node: v for v in step.verdicts["default/train-dra-b"]}
    held = verdicts["node-p"].details[1]
    assert held.startswith("1 device of nic.accelsched.io; 1 match, 1 allocated to default/train-dra-a (claim ")
    assert verdicts["node-p"].remedies == [
        "1 more nic device with pcieRoot pci0000:80 would make node-p feasible",
        "2 accel devices and 1 nic device with pcieRoot pci0000:00 freed would make node-p feasible",
    ]
    assert verdicts["node-q"].details[-1] == (
        "constraint matchAttribute resource.kubernetes.io/pcieRoot (requests accel, nic): pcieRoot pci0000:00 has "
        "1 of 2 accel free and 1 of 1 nic free; pcieRoot pci0000:80 has 3 of 2 accel free and 0 of 1 nic free"
    )
    assert verdicts["node-q"].remedies == ["1 more accel device with pcieRoot pci0000:00 would make node-q feasible"]
    assert verdicts["node-a"].details == ["no ResourceSlice lists devices for this node"]
    assert any("request nic (1 of nic.accelsched.io)" in n for n in step.notes["default/train-dra-b"])


def test_dra_step_slices_are_what_the_driver_inventory_publishes_from_sysfs():
    """examples/lab/11-dra-slices.yaml is generated (hack/gen-dra-lab.py): regenerate it and compare."""
    import runpy

    generator = runpy.run_path(str(Path(__file__).resolve().parent.parent / "hack" / "gen-dra-lab.py"))
    committed = (Path(generator["OUT"])).read_text()
    assert generator["render"]() == committed, "run: python hack/gen-dra-lab.py"
    assert "resource.kubernetes.io/pcieRoot" in committed


def test_demo_command_prints_the_device_level_explanation():
    result = CliRunner().invoke(main, ["demo"], terminal_width=200)
    assert result.exit_code == 0, result.output
    (n,) = [n for n, step in enumerate(LAB_STEPS, start=1) if step.title.startswith("Dynamic Resource Allocation")]
    dra = result.output[result.output.index(f"Step {n}: Dynamic Resource Allocation") :]
    dra = dra[: dra.index(f"Step {n + 1}:")] if n < len(LAB_STEPS) else dra
    assert "claim net-accel (train-dra-a-net-accel-" in dra
    assert "all with resource.kubernetes.io/pcieRoot pci0000:00" in dra
    assert "→ 1 more accel device with pcieRoot pci0000:00 would make node-q feasible" in dra
    assert "node-a, node-d, node-e" in dra  # nodes with the same explanation share a line


def ranked(step, gang: str) -> list[str]:
    """The nodes of a gang's pods, by completion index (rank)."""
    pods = [r for r in step.shown if r.pod.name.startswith(gang) and r.node]
    return [r.node for r in sorted(pods, key=lambda r: int(r.pod.labels["batch.kubernetes.io/job-completion-index"]))]


def clique(step, node: str) -> str:
    cluster = step.session.cluster
    return cluster.nodes[cluster.index[node]].labels["nvidia.com/gpu.clique"]


def test_fabric_step_keeps_the_gang_in_one_block_with_each_slice_in_one_nvlink_domain(outcomes):
    step = outcomes[10]
    nodes = ranked(step, "pretrain-")
    assert len(nodes) == 6
    cluster = step.session.cluster
    blocks = {cluster.nodes[cluster.index[n]].labels["cloud.provider.com/topology-block"] for n in nodes}
    assert blocks == {"block-0"}  # block-1 holds no whole slice
    assert len({clique(step, n) for n in nodes[:3]}) == 1 and len({clique(step, n) for n in nodes[3:]}) == 1
    assert nodes == ["gb-01", "gb-02", "gb-03", "gb-10", "gb-11", "gb-12"]  # the tightest domain first, in order


def test_fabric_preemption_step_frees_exactly_one_nvlink_domain_at_the_least_gpu_hours(outcomes):
    step = outcomes[11]
    nodes = ranked(step, "urgent-nvl-")
    assert len(nodes) == 4 and {clique(step, n) for n in nodes} == {"7f3c.nvl-2"}
    evicted = sorted(v.name for r in step.shown for v in r.preempted)
    assert evicted == ["batch-20", "batch-21"]  # nvl-2's two 4-hour pods, not nvl-3's three that ran a day
    cluster = step.session.cluster
    assert {"default/batch-30", "default/batch-31", "default/batch-32"} <= set(cluster.pod_node)


def workload(step, name):
    (o,) = [o for o in step.session.queues.outcomes if o.info.name == name]
    return o


def conditions(outcome) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in outcome.conditions}


def gpu_usage(step, cluster_queue: str) -> int:
    return step.session.queues.tree.cluster_queues[cluster_queue].usage.get(("a100", "nvidia.com/gpu"), 0)


def test_queue_step_lets_team_a_borrow_team_b_idle_gpus(outcomes):
    step = titled(outcomes, "Queues: team-a borrows")
    assert step.step.queues
    for name in ("pretrain", "finetune"):
        assert conditions(workload(step, name)) == {
            "QuotaReserved": ("True", "QuotaReserved"),
            "Admitted": ("True", "Admitted"),
        }
    assert (gpu_usage(step, "team-a"), gpu_usage(step, "team-b")) == (16, 0)  # 8 of them borrowed from team-b
    placed = {r.pod.name.rsplit("-", 1)[0]: r.node for r in step.shown}
    assert set(placed) == {"pretrain", "finetune"} and set(placed.values()) <= {"a100-1", "a100-2"}


def test_queue_step_reclaims_the_borrowed_gpus_when_team_b_submits(outcomes):
    step = titled(outcomes, "Queues: team-b comes back")
    finetune, pretrain, evaluation = (workload(step, n) for n in ("finetune", "pretrain", "eval"))
    assert evaluation.admitted and pretrain.admitted and not finetune.admitted and finetune.preempted
    assert conditions(finetune) == {
        "QuotaReserved": ("False", "Pending"),
        "Admitted": ("False", "NoReservation"),
        "Preempted": ("True", "InCohortReclamation"),
        "Evicted": ("True", "Preempted"),
        "Requeued": ("True", "Preempted"),
    }
    preempted = next(c["message"] for c in finetune.conditions if c["type"] == "Preempted")
    assert preempted == (
        "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: 5b1f0a52-0000-4000-8000-00000000b001) due to "
        "reclamation within the cohort; preemptor path: /research/team-b; preemptee path: /research/team-a"
    )
    (pod_set,) = finetune.info.pod_sets  # named by Kueue's role hash (pinned to Kueue's own function)
    assert finetune.held_message == (
        f"couldn't assign flavors to pod set {pod_set.name}: insufficient unused quota for nvidia.com/gpu in flavor "
        "a100, 4 more needed"
    )
    assert (gpu_usage(step, "team-a"), gpu_usage(step, "team-b")) == (8, 4)
    (ev,) = step.shown
    assert ev.node in {"a100-1", "a100-2"}
    held = [r for r in step.results if r.pod.name.startswith("finetune-")]
    assert len(held) == 2 and all(r.node is None and r.reason == "SchedulingGated" for r in held)
    cluster = step.session.cluster
    assert not any(k.startswith("team-a/finetune-") for k in cluster.pod_node)  # off their node


def test_demo_command_prints_the_queue_conditions():
    result = CliRunner().invoke(main, ["demo"], terminal_width=250)
    assert result.exit_code == 0, result.output
    reclaim = result.output[result.output.index("Queues: team-b comes back") :]
    assert "Preempted=True  InCohortReclamation  Preempted to accommodate a workload" in reclaim
    assert "workload team-a/finetune (team-a): preempted, requeued" in reclaim
    assert "nvidia.com/gpu 8/8" in reclaim and "nvidia.com/gpu 4/8" in reclaim
    # accelsched's explanation (accelsched/queues/explain.py, checked in tests/test_queues_explain.py)
    assert (
        "accelsched: blocked by ClusterQueue team-a, flavor a100, nvidia.com/gpu: needs 8, used 8 of nominal 8"
        in reclaim
    )
    assert "accelsched: smallest change that admits it: wait for workload team-b/eval (4 nvidia.com/gpu)" in reclaim
