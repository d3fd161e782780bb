"""``simulate --queues`` (accelsched/sim/queues.py, tenants.py): the time-based replay with Kueue's admission
(accelsched/queues) deciding which tenant's pods may start, on small traces in the openb format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from accelsched.cli import main
from accelsched.errors import InputError
from accelsched.sim import queues, timeline
from accelsched.sim.tenants import workload
from accelsched.sim.trace import MILLI, load_nodes, load_pods
from tests.sim_traces import trace_folder, write_trace


def queue_file(path: Path, nominal: dict[str, int], borrowing_limit: int | None = None, reclaim: str = "Never") -> Path:
    """One ClusterQueue per tenant in one cohort, LocalQueues ls and be (the trace's qos, lowercased)."""
    docs = []
    for name, quota in nominal.items():
        limit = f"\n        borrowingLimit: {borrowing_limit}" if borrowing_limit is not None else ""
        docs.append(f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: {name}
spec:
  cohortName: all
  namespaceSelector: {{}}
  preemption:
    reclaimWithinCohort: {reclaim}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources:
      - name: nvidia.com/gpu
        nominalQuota: {quota}{limit}
""")
        docs.append(f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: {name}
  namespace: team-{name}
spec:
  clusterQueue: {name}
""")
    docs.append("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: gpu\n")
    path.write_text("---\n".join(docs))
    return path


def two_tenant_trace(directory: Path, seed: int = 7, pods: int = 150) -> tuple[Path, Path]:
    """A synthetic trace whose pods alternate between the qos LS and BE, on 8 nodes: crowded once compressed."""
    node_path, pod_path = write_trace(directory, seed, nodes=8, pods=pods)
    lines = pod_path.read_text().splitlines()
    lines[1:] = [line.replace(",LS,", ",BE,") if i % 2 else line for i, line in enumerate(lines[1:])]
    pod_path.write_text("\n".join(lines) + "\n")
    return node_path, pod_path


COMPRESS = 200  # the arrivals of ~90 minutes within ~30 s, run times kept: the tenants contend


def test_water_fill_is_weighted_max_min_capped_by_demand() -> None:
    got = queues.water_fill(10.0, np.array([2.0, 1.0, 1.0]), np.array([10.0, 1.0, 10.0]))
    assert np.allclose(got, [6.0, 1.0, 3.0])  # 2.5 each per weight: tenant 1 needs 1, the 9 left go 2:1
    assert np.allclose(queues.water_fill(10.0, np.array([1.0, 1.0]), np.array([2.0, 3.0])), [2.0, 3.0])
    assert np.allclose(queues.water_fill(10.0, np.array([1.0, 3.0]), np.array([0.0, 20.0])), [0.0, 10.0])


def test_tenants_by_qos_and_by_localqueues(tmp_path: Path) -> None:
    _, pod_path = two_tenant_trace(tmp_path)
    pods = load_pods(pod_path)
    objects = queues.load_queues(queue_file(tmp_path / "q.yaml", {"ls": 10, "be": 10}))
    by_qos = queues.tenants(pods, objects, "qos")
    assert by_qos[:4] == ["team-ls/ls", "team-be/be", "team-ls/ls", "team-be/be"]
    assert queues.tenants(pods, objects, "localqueues")[:3] == ["team-ls/ls", "team-be/be", "team-ls/ls"]
    only_ls = queues.load_queues(queue_file(tmp_path / "ls.yaml", {"ls": 10}))
    with pytest.raises(InputError, match="qos 'BE' has no LocalQueue 'be'"):
        queues.tenants(pods, only_ls, "qos")


def replay(tmp_path: Path, nominal: dict[str, int], **kwargs) -> tuple[queues.QueueTimeline, timeline.Timeline]:
    node_path, pod_path = two_tenant_trace(tmp_path)
    nodes, pods = load_nodes(node_path), load_pods(pod_path)
    objects = queues.load_queues(queue_file(tmp_path / "q.yaml", nominal, **kwargs))
    replayed, of = workload(nodes, pods, queues.tenants(pods, objects, "qos"), 1.3, 42)
    with_quotas = queues.replay(nodes, replayed, objects, of, "fgd", 42, compress=COMPRESS)
    return with_quotas, timeline.replay(nodes, replayed, "fgd", 42, compress=COMPRESS)


def test_without_borrowing_no_tenant_ever_runs_past_its_quota(tmp_path: Path) -> None:
    run, free = replay(tmp_path, {"ls": 12, "be": 8}, borrowing_limit=0)  # the biggest pod asks for 8 GPUs
    assert run.shares.shape[1] == 2
    assert (run.shares[:, 0] <= 12 * MILLI).all() and (run.shares[:, 1] <= 8 * MILLI).all()
    assert run.shares[:, 1].max() == 8 * MILLI  # be fills its quota at some point: the cap is what holds it
    assert (run.allocated >= run.shares.sum(axis=1)).all()  # CPU-only pods run unqueued beside them
    assert run.mean_allocation() < free.mean_allocation()  # 20 GPUs of quota hold the cluster back
    assert all(t.never == 0 for t in run.tenants)  # everything runs in the end


def test_with_quotas_covering_the_cluster_allocation_stays_within_a_point_of_no_quotas(tmp_path: Path) -> None:
    node_path, _ = two_tenant_trace(tmp_path)
    gpus = int(load_nodes(node_path).gpus.sum())
    run, free = replay(tmp_path, {"ls": gpus // 2, "be": gpus - gpus // 2}, reclaim="Any")
    assert abs(run.mean_allocation() - free.mean_allocation()) < 0.01
    assert run.allocated.max() <= run.capacity
    # borrowing happens: a tenant goes past its nominal quota while the other leaves GPUs idle
    assert (run.shares[:, 0] > (gpus // 2) * MILLI).any() or (run.shares[:, 1] > (gpus - gpus // 2) * MILLI).any()
    for t in run.tenants:
        assert t.pods > 0 and 0 <= t.share <= 1 and 0 <= t.ideal <= 1


def test_the_drf_ideal_is_the_capacity_split_by_weight_when_both_tenants_want_more(tmp_path: Path) -> None:
    run, _ = replay(tmp_path, {"ls": 4, "be": 4})
    busy = run.ideals.sum(axis=1) > 0
    assert (run.ideals.sum(axis=1)[busy] <= run.capacity + 1e-6).all()
    both = (run.ideals[:, 0] > 0) & (run.ideals[:, 1] > 0) & np.isclose(run.ideals.sum(axis=1), run.capacity)
    assert both.any()  # contention: the weights (1 and 1) split it evenly unless one asks for less
    # weights 1 and 1: the one that asks for more gets at least half; an even split while both ask for more
    assert (run.ideals[both].max(axis=1) >= run.capacity / 2 - 1e-6).all()
    assert np.isclose(run.ideals[both], run.capacity / 2).all(axis=1).any()


def test_simulate_queues_cli_json_and_bad_input(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    pod_path = trace_folder(data, 7, nodes=8, pods=120)
    (data / "openb_pod_list_default.csv").write_text(pod_path.read_text())
    gpus = int(load_nodes(data / "openb_node_list_gpu_node.csv").gpus.sum())
    qfile = queue_file(tmp_path / "q.yaml", {"ls": gpus, "be": 1})
    args = ["simulate", "--data-dir", str(data), "--policy", "fgd", "--seeds", "42", "--compress", "20"]
    result = CliRunner().invoke(main, [*args, "--queues", str(qfile), "-o", "json"])
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.output)["runs"]
    assert [t["clusterQueue"] for t in run["tenants"]] == ["ls", "be"]
    assert run["tenants"][0]["pods"] > 0 and run["tenants"][1]["pods"] == 0  # every pod of this trace is LS
    assert abs(run["allocation"]["differencePoints"]) < 1.0
    table = CliRunner().invoke(main, [*args, "--queues", str(qfile)], terminal_width=200)
    assert table.exit_code == 0, table.output
    assert "DRF ideal" in table.output and "allocation rate:" in table.output
    missing = CliRunner().invoke(main, [*args, "--queues", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "--queues" in missing.output and "Traceback" not in missing.output
    empty = tmp_path / "empty.yaml"
    empty.write_text("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: gpu\n")
    bad = CliRunner().invoke(main, [*args, "--queues", str(empty)])
    assert bad.exit_code == 2 and "needs ClusterQueues and LocalQueues" in bad.output


def test_fabric_and_queues_together_are_refused_before_any_work() -> None:
    from click.testing import CliRunner

    from accelsched.cli import main

    result = CliRunner().invoke(main, ["simulate", "--fabric", "--queues", "examples/queues/openb-tenants.yaml"])
    assert result.exit_code == 2
    assert "--fabric and --queues are separate experiments" in result.output
