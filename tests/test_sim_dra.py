"""``simulate --devices dra``: the generic path with the trace's GPUs as DRA devices and its GPU requests as
ResourceClaims (accelsched/sim/dra.py), against the default device-plugin model on the same trace, profile and
seed. Whole GPUs must place exactly alike; shares differ only in which GPU of the node DRA's allocator takes (the
first with room, in the slice's device order, where DeviceAllocation binpacks onto the tightest)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from sim_traces import openb_slice, trace_folder, write_trace

from accelsched.cli import main
from accelsched.config import build_profile
from accelsched.framework.profile import SchedulerConfig
from accelsched.sim import dra as sim_dra
from accelsched.sim import generic
from accelsched.sim.trace import MILLI, Nodes, Pods, load_nodes, load_pods

# Only NodeResourcesFit scores (CPU and memory, LeastAllocated): DevicePartition's GPU score reads the
# device-plugin ledger, which a DRA cluster does not have, so a profile that scores it cannot place alike.
FIT_ONLY = {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit", "weight": 1}]}}


def fit_config() -> SchedulerConfig:
    return SchedulerConfig({generic.SCHEDULER_NAME: build_profile(generic.SCHEDULER_NAME, FIT_ONLY, {})})


def whole_only(pods: Pods) -> Pods:
    return pods.take(np.flatnonzero((pods.num_gpu == 0) | (pods.gpu_milli == MILLI)))


def replay(nodes: Nodes, pods: Pods, devices: str, seed: int, tie_break: str = "paper", sharing: bool | None = None):
    if sharing is None:
        sharing = bool(((pods.num_gpu == 1) & (pods.gpu_milli < MILLI)).any())
    engine = generic.GenericEngine(nodes, fit_config(), seed, tie_break, devices, sharing)
    out = [
        engine.schedule(engine.pod(pods, i, f"{pods.names[i]}-{i}"), int(pods.gpu_request[i])) for i in range(pods.n)
    ]
    return engine, out


def check_ledger(engine: generic.GenericEngine, nodes: Nodes) -> None:
    """The free milli the engine keeps equals the DRA state's allocated claims, and no GPU is overdrawn."""
    free = engine.gpu_free()
    assert (free >= 0).all() and (free <= MILLI).all()
    assert int(nodes.gpus.sum()) * MILLI - int(free.sum()) == engine.allocated
    held = sum(m for c in engine.dra.state.claims.values() if c.allocation for _, m in sim_dra.claim_gpus(c))
    assert held == engine.allocated


@pytest.mark.parametrize(("seed", "tie_break"), [(3, "paper"), (4, "name"), (5, "random")])
def test_whole_gpus_place_exactly_as_the_device_plugin_model(tmp_path, seed, tie_break):
    node_path, pod_path = write_trace(tmp_path, seed, nodes=16, pods=180)
    nodes, pods = load_nodes(node_path), whole_only(load_pods(pod_path))
    plugin, want = replay(nodes, pods, "device-plugin", seed, tie_break)
    dra, got = replay(nodes, pods, "dra", seed, tie_break)
    assert got == want  # same node and same GPUs for every pod, so the same number placed
    placed = sum(r is not None for r in got)
    assert placed > 40 and placed < pods.n  # crowded: some pods fail
    assert dra.allocated == plugin.allocated
    assert (dra.gpu_free() == plugin.gpu_free()).all()
    check_ledger(dra, nodes)
    assert all(c.allocation is not None for c in dra.dra.state.claims.values())  # failed pods' claims are gone
    # On shareable devices (consumable milli) a whole-GPU claim takes all of a device: the same placements.
    shared, again = replay(nodes, pods, "dra", seed, tie_break, sharing=True)
    assert again == want
    check_ledger(shared, nodes)


def test_whole_gpus_on_a_slice_of_the_real_trace():
    nodes, pods = openb_slice(32000, 400)
    pods = whole_only(pods)
    _, want = replay(nodes, pods, "device-plugin", 42)
    _, got = replay(nodes, pods, "dra", 42)
    assert got == want and sum(r is not None for r in got) > 50


@pytest.mark.parametrize("seed", [3, 4])
def test_shares_place_close_to_the_device_plugin_model(tmp_path, seed):
    node_path, pod_path = write_trace(tmp_path, seed, nodes=16, pods=180)
    nodes, pods = load_nodes(node_path), load_pods(pod_path)
    _, want = replay(nodes, pods, "device-plugin", seed)
    dra, got = replay(nodes, pods, "dra", seed)
    check_ledger(dra, nodes)
    placed_want, placed_got = sum(r is not None for r in want), sum(r is not None for r in got)
    assert abs(placed_got - placed_want) <= pods.n // 20
    # Up to the first difference, the only one allowed is the GPU a share lands on (same node).
    first = next(i for i, (a, b) in enumerate(zip(want, got, strict=True)) if a != b)
    assert want[first] is not None and got[first] is not None and want[first][0] == got[first][0]
    assert pods.num_gpu[first] == 1 and pods.gpu_milli[first] < MILLI


def test_claims_carry_the_request_and_the_gpu_spec(tmp_path):
    node_path, pod_path = write_trace(tmp_path, 3, nodes=16, pods=180)
    nodes, pods = load_nodes(node_path), load_pods(pod_path)
    engine, got = replay(nodes, pods, "dra", 3)
    state = engine.dra.state
    seen_share = seen_spec = seen_multi = 0
    for i, result in enumerate(got):
        if result is None or not pods.num_gpu[i]:
            continue
        pod_key = f"default/{pods.names[i]}-{i}"
        claim = engine.dra.claims[pod_key]
        node = engine.cluster.nodes[result[0]].name
        published = {d.name: d for d in state.slices[f"{node}-{sim_dra.DRIVER}"].devices}
        devices = [published[r.device] for r in claim.allocation.results]
        assert {r.pool for r in claim.allocation.results} == {node}
        assert claim.allocation.node_name == node
        assert len(devices) == pods.num_gpu[i]
        models = pods.specs[int(pods.spec[i])]
        if models:
            seen_spec += 1
            assert all(d.attributes[f"{sim_dra.DRIVER}/model"] in models for d in devices)
        if pods.gpu_milli[i] < MILLI:
            seen_share += 1
            (r,) = claim.allocation.results
            assert [int(v) for v in r.consumed_capacity.values()] == [int(pods.gpu_milli[i])]
        seen_multi += pods.num_gpu[i] > 1
    assert seen_share > 20 and seen_spec > 10 and seen_multi > 3


def test_a_pod_that_leaves_frees_its_claim_for_the_next(tmp_path):
    node_path = tmp_path / "nodes.csv"
    node_path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,2,T4\n")
    pod_path = tmp_path / "pods.csv"
    pod_path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,1024,2,1000\nb,1000,1024,1,600\n")
    nodes, pods = load_nodes(node_path), load_pods(pod_path)
    engine = generic.GenericEngine(nodes, fit_config(), 0, "name", "dra", sharing=True)
    a = engine.pod(pods, 0, "a")
    assert engine.schedule(a, 2000) == (0, (0, 1))
    b = engine.pod(pods, 1, "b")
    assert engine.schedule(b, 600) is None  # both GPUs held whole
    assert set(engine.dra.state.claims) == {engine.dra.claims[a.key].key}  # b's claim deleted with it
    engine.remove(a, 2000)
    assert engine.dra.state.claims == {} and engine.allocated == 0
    assert (engine.gpu_free()[0, :2] == MILLI).all()
    b2 = engine.pod(pods, 1, "b2")
    assert engine.schedule(b2, 600) == (0, (0,))
    assert engine.gpu_free()[0, 0] == 400


def _profile(tmp_path):
    config = tmp_path / "fit.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": "default-scheduler", "plugins": FIT_ONLY}],
            }
        )
    )
    return config


def test_cli_devices_dra_places_whole_gpus_as_the_default(tmp_path):
    pod_path = trace_folder(tmp_path, 6, nodes=8, pods=60)
    lines = pod_path.read_text().splitlines()
    whole = [lines[0]] + [row for row in lines[1:] if row.split(",")[4] in ("0", "1000")]
    pod_path.write_text("\n".join(whole) + "\n")
    base = ["simulate", "--data", str(tmp_path), "--pods", str(pod_path), "--policy", str(_profile(tmp_path))]
    base += ["--seeds", "1", "-o", "json"]
    rows = {}
    for devices in ("device-plugin", "dra"):
        result = CliRunner().invoke(main, [*base, "--devices", devices])
        assert result.exit_code == 0, result.output
        (rows[devices],) = json.loads(result.output)["policies"]
    for key in ("failed_pods", "final_alloc", "unallocated_gpus", "frag_gpus"):
        assert rows["dra"][key] == rows["device-plugin"][key], key
    assert rows["dra"]["failed_pods"] > 0 and rows["dra"]["final_alloc"] > 0.5


@pytest.mark.parametrize(
    ("extra", "shown"),
    [
        (["--policy", "fgd"], "policy 'fgd'"),
        (["--mode", "timeline", "--policy", "bestfit"], "policy 'bestfit'"),
        (["--mode", "timeline", "--policy", "FILE"], "--mode timeline"),
    ],
)
def test_cli_devices_dra_refuses_the_built_in_policies(tmp_path, extra, shown):
    extra = [str(_profile(tmp_path)) if a == "FILE" else a for a in extra]
    result = CliRunner().invoke(main, ["simulate", "--devices", "dra", "--seeds", "1", *extra])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"accelsched: error: --devices: dra runs KubeSchedulerConfiguration profiles (--policy FILE) in the "
        f"inflation mode; {shown} runs on the device-plugin model only"
    ]
