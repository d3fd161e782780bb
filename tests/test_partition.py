"""Fractional accelerators through the whole scheduler: MIG (dynamic and fixed, mixed and single strategy),
slices, time-slicing and GPU-milli shares; placement-aware fit, policies, fragmentation and bad input."""

from __future__ import annotations

import json

import pytest
import yaml
from builders import start
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsched.config import parse_config
from accelsched.devices import mig
from accelsched.devices.partition import MILLI_RESOURCE
from accelsched.engine import Session
from accelsched.errors import InputError

# The PostFilter part of the message (DynamicResources, then DefaultPreemption: the lone node holds no pod of lower
# priority), written from the v1.36.3 source (FitError.Error, RunPostFilterPlugins).
NO_VICTIMS = (
    " no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
)
NOT_HELPFUL = (
    " no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
)


def node(name: str, partitioning: dict) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"accelsched.io/partitioning": yaml.safe_dump(partitioning)}},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
    }


def pod(name: str, resource: str, amount: int, *, node_name: str = "", held: list[str] | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if held:
        meta["annotations"] = {"accelsched.io/devices": json.dumps({resource: held})}
    spec: dict = {
        "containers": [
            {"name": "c", "resources": {"requests": {resource: str(amount)}, "limits": {resource: str(amount)}}}
        ]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def schedule(*docs: dict, config: dict | None = None) -> tuple[Session, dict]:
    session = start(*docs, config=parse_config(config) if config else None)
    return session, {r.pod.name: r for r in session.rejected + session.schedule()}


MIG_A100 = {"mode": "mig", "model": "A100-40GB", "devices": 1}


# ---------------------------------------------------------------------------------------- MIG


def test_dynamic_mig_carves_instances_at_valid_starts_until_the_gpu_is_full():
    _, results = schedule(node("n", MIG_A100), *[pod(f"p{i}", "nvidia.com/mig-3g.20gb", 1) for i in range(3)])
    starts = sorted(results[f"p{i}"].devices["nvidia.com/mig-3g.20gb"][0] for i in range(2))
    assert starts == ["gpu-0:3g.20gb@0", "gpu-0:3g.20gb@4"]
    # 2 per GPU
    assert results["p2"].message == "0/1 nodes are available: 1 Insufficient nvidia.com/mig-3g.20gb." + NO_VICTIMS


def test_placement_not_count_rejects_when_the_free_slices_are_misaligned():
    # A 1g.5gb goes to slice 6 (keeping 0-3 and 4-5 whole), the first 3g to 0; the second 3g is within the count
    # (2 per GPU) but slices 4-5 and 7 are no aligned run of four.
    docs = [node("n", MIG_A100), pod("small", "nvidia.com/mig-1g.5gb", 1)]
    docs += [pod("a", "nvidia.com/mig-3g.20gb", 1), pod("b", "nvidia.com/mig-3g.20gb", 1)]
    _, results = schedule(*docs)
    assert results["small"].devices == {"nvidia.com/mig-1g.5gb": ["gpu-0:1g.5gb@6"]}
    assert results["a"].devices == {"nvidia.com/mig-3g.20gb": ["gpu-0:3g.20gb@0"]}
    assert results["b"].node is None
    assert results["b"].message == "0/1 nodes are available: 1 node(s) had no free 3g.20gb MIG placement." + NO_VICTIMS


def test_four_free_slices_in_the_wrong_places_do_not_fit_a_3g():
    # 2g.10gb@2 and 1g.5gb@6 leave slices 0-1, 4-5 and 7 free: five slices, but no aligned run of four.
    held = [
        pod("a", "nvidia.com/mig-2g.10gb", 1, node_name="n", held=["gpu-0:2g.10gb@2"]),
        pod("b", "nvidia.com/mig-1g.5gb", 1, node_name="n", held=["gpu-0:1g.5gb@6"]),
    ]
    session, results = schedule(node("n", MIG_A100), *held, pod("p", "nvidia.com/mig-3g.20gb", 1))
    assert results["p"].node is None
    part = session.cluster.devices[0].partition
    with pytest.raises(
        ValueError, match=r"slices 0-1,4-5,7 free but 3g.20gb needs 4 aligned slices starting at 0 or 4"
    ):
        part.plan({"nvidia.com/mig-3g.20gb": 1}, "binpack")


def test_fixed_partitions_serve_only_the_operators_instances():
    fixed = {**MIG_A100, "dynamic": False, "instances": {"gpu-0": ["3g.20gb@0", "1g.5gb@4", "1g.5gb@5"]}}
    docs = [node("n", fixed), pod("big", "nvidia.com/mig-3g.20gb", 1), pod("s1", "nvidia.com/mig-1g.5gb", 1)]
    docs += [
        pod("s2", "nvidia.com/mig-1g.5gb", 1),
        pod("s3", "nvidia.com/mig-1g.5gb", 1),
        pod("x", "nvidia.com/mig-2g.10gb", 1),
    ]
    session, results = schedule(*docs)
    assert results["big"].devices == {"nvidia.com/mig-3g.20gb": ["gpu-0:3g.20gb@0"]}
    assert {results["s1"].devices["nvidia.com/mig-1g.5gb"][0], results["s2"].devices["nvidia.com/mig-1g.5gb"][0]} == {
        "gpu-0:1g.5gb@4",
        "gpu-0:1g.5gb@5",
    }
    assert results["s3"].node is None  # slices 6-7 are free, but nobody created an instance there
    assert "Insufficient nvidia.com/mig-2g.10gb" in results["x"].message  # the node advertises no 2g instance
    part = session.cluster.devices[0].partition
    part.release({"nvidia.com/mig-3g.20gb": ["gpu-0:3g.20gb@0"]})
    assert any(i.profile == "3g.20gb" and not owner for i, owner in part.instances[0])  # freed, not destroyed


def test_single_strategy_serves_nvidia_gpu_as_instances_of_one_profile():
    single = {"mode": "mig", "model": "A100-80GB", "strategy": "single", "profile": "2g.20gb", "devices": 2}
    session, results = schedule(node("n", single), *[pod(f"p{i}", "nvidia.com/gpu", 1) for i in range(7)])
    placed = [r for r in results.values() if r.node]
    assert len(placed) == 6  # three 2g instances per GPU
    assert all(r.devices["nvidia.com/gpu"][0].split(":")[1].startswith("2g.20gb@") for r in placed)
    assert session.cluster.allocatable[session.cluster.res_index["nvidia.com/gpu"], 0] == 6


# ---------------------------------------------------------------------------------------- other modes


def test_slices_come_from_one_device_and_policies_choose_it():
    slices = {"mode": "slices", "resource": "example.com/accel-slice", "units": 4, "devices": 2}
    docs = [node("n", slices), pod("a", "example.com/accel-slice", 3), pod("b", "example.com/accel-slice", 1)]
    _, packed = schedule(*docs, pod("c", "example.com/accel-slice", 3))
    assert packed["a"].devices["example.com/accel-slice"] == ["gpu-0:slices=0-2"]
    assert packed["b"].devices["example.com/accel-slice"] == ["gpu-0:slices=3-3"]  # binpack: the fuller device
    assert packed["c"].devices["example.com/accel-slice"] == ["gpu-1:slices=0-2"]
    spread = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"pluginConfig": [{"name": "DeviceAllocation", "args": {"partitionPolicy": "spread"}}]}],
    }
    _, spreaded = schedule(*docs, config=spread)
    assert spreaded["b"].devices["example.com/accel-slice"] == ["gpu-1:slices=0-0"]


def test_time_slicing_hands_out_replicas():
    ts = {"mode": "timeslicing", "replicas": 2, "devices": 2}
    _, results = schedule(node("n", ts), *[pod(f"p{i}", "nvidia.com/gpu", 1) for i in range(5)])
    ids = sorted(r.devices["nvidia.com/gpu"][0] for r in results.values() if r.node)
    assert ids == ["gpu-0::0", "gpu-0::1", "gpu-1::0", "gpu-1::1"]
    assert results["p4"].node is None


def test_milli_shares_fit_on_one_device_and_whole_gpus_need_free_devices():
    docs = [node("n", {"mode": "milli", "devices": 2}), pod("a", MILLI_RESOURCE, 600), pod("b", MILLI_RESOURCE, 600)]
    docs += [pod("whole", "nvidia.com/gpu", 1), pod("c", MILLI_RESOURCE, 400)]
    _, results = schedule(*docs)
    assert results["a"].devices[MILLI_RESOURCE] != results["b"].devices[MILLI_RESOURCE]  # 600 + 600 > 1000
    assert results["whole"].node is None  # both devices are shared now
    assert results["whole"].message == (
        "0/1 nodes are available: 1 node(s) had no device with 1 free nvidia.com/gpu." + NO_VICTIMS
    )
    assert results["c"].devices[MILLI_RESOURCE][0].endswith("milli=400")


# ---------------------------------------------------------------------------------------- invariants


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]), st.booleans()),
        min_size=1,
        max_size=25,
    ),
    st.lists(st.integers(1, 1000), max_size=20),
)
def test_instances_never_overlap_and_shares_never_exceed_a_device(mig_requests, milli_requests):
    docs = [node("m", {**MIG_A100, "devices": 2}), node("s", {"mode": "milli", "devices": 2})]
    for i, (profile, _) in enumerate(mig_requests):
        docs.append(pod(f"m{i}", f"nvidia.com/mig-{profile}", 1))
    for i, amount in enumerate(milli_requests):
        docs.append(pod(f"s{i}", MILLI_RESOURCE, amount))
    session, results = schedule(*docs)
    model = mig.model("A100-40GB")
    mig_part = session.cluster.devices[0].partition
    for dev in mig_part.instances:
        mig.check_layout(model, [i for i, _ in dev])  # raises on overlap, bad start, count or compute
        assert sum(i.size for i, _ in dev) <= mig.SLICES
    milli_part = session.cluster.devices[1].partition
    assert all(0 <= used <= 1000 for used in milli_part.milli)
    held = [d for r in results.values() for ids in r.devices.values() for d in ids if "milli" not in d]
    assert len(held) == len(set(held))  # no instance handed out twice
    shares = {}
    for r in results.values():
        for ident in r.devices.get(MILLI_RESOURCE, []):
            dev, amount = ident.split(":milli=")
            shares[dev] = shares.get(dev, 0) + int(amount)
    assert all(v <= 1000 for v in shares.values())


# ---------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("partitioning", "field", "text"),
    [
        ({"mode": "mig", "model": "V100-16GB"}, "model", "V100"),
        ({"mode": "mig", "model": "A100-40GB", "strategy": "single", "profile": "2g.20gb"}, "profile", "A100-40GB"),
        (
            {"mode": "mig", "model": "A100-40GB", "dynamic": False, "instances": {"gpu-0": ["3g.20gb@2"]}},
            "instances",
            "allowed starts: 0, 4",
        ),
        (
            {"mode": "mig", "model": "A100-40GB", "instances": {"gpu-0": ["4g.20gb@0", "2g.10gb@2"]}},
            "instances",
            "overlap",
        ),
        ({"mode": "slices", "resource": "example.com/accel-slice", "units": 100}, "units", "1..64"),
        ({"mode": "magic"}, "mode", "unknown mode"),
    ],
)
def test_bad_partitioning_names_the_field(partitioning, field, text):
    with pytest.raises(InputError) as err:
        schedule(node("n", partitioning))
    assert field in str(err.value) and text in str(err.value) and "Node n" in str(err.value)


def test_requests_no_device_can_serve_are_bad_input():
    slices = {"mode": "slices", "resource": "example.com/accel-slice", "units": 8}
    with pytest.raises(InputError, match=r"requests\[example.com/accel-slice\]: 12 slices is more than a device has"):
        schedule(node("n", slices), pod("p", "example.com/accel-slice", 12))
    with pytest.raises(InputError, match=r"more than one device"):
        schedule(node("n", {"mode": "milli"}), pod("p", MILLI_RESOURCE, 1500))


def test_a_profile_no_node_advertises_is_pending():
    """An 80GB profile on a 40GB GPU: no node advertises it, which kube-scheduler answers with Insufficient on
    every node (not bad input)."""
    _, results = schedule(node("n", MIG_A100), pod("p", "nvidia.com/mig-2g.20gb", 1))
    assert results["p"].node is None
    assert results["p"].message == "0/1 nodes are available: 1 Insufficient nvidia.com/mig-2g.20gb." + NOT_HELPFUL


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 1000), min_size=1, max_size=8),
    st.sampled_from([MILLI_RESOURCE, "nvidia.com/gpu"]),
    st.integers(1, 1200),
)
def test_a_sharing_nodes_quick_fit_agrees_with_planning_the_allocation(used, resource, amount):
    """``fits`` answers one milli or whole-GPU request without planning it; the answer is the plan's."""
    from accelsched.devices.partition import Partition

    part = Partition("milli", [f"gpu-{d}" for d in range(len(used))], milli=list(used))
    amount = amount if resource == MILLI_RESOURCE else 1 + amount % len(used) + amount % 2
    try:
        part.plan({resource: amount}, "binpack")
        planned = True
    except ValueError:
        planned = False
    assert part.fits({resource: amount}) == planned
