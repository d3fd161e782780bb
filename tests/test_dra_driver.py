"""The DRA driver over real unix-socket gRPC, against a kubelet-side peer written from the kubelet's source
(tests/dra_kubelet_peer.py), with claims from a small in-memory claim source; and the slices it would publish.

Publishing to a real kube-apiserver and preparing claims read from it are in tests/live/test_dra_driver_live.py.
Every wait is bounded; nothing sleeps and hopes.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import grpc
import pytest
import sysfs_builder as sb
from click.testing import CliRunner
from dra_kubelet_peer import DRAError, DRAKubeletPeer

from accelsched.api.quantity import parse_fraction
from accelsched.cli import main as cli
from accelsched.devices import mig
from accelsched.dra import inventory as inv
from accelsched.dra.driver import gen
from accelsched.dra.driver.checkpoint import Checkpoint, CheckpointError, decode, encode
from accelsched.dra.driver.main import DRADriver, DriverConfig
from accelsched.dra.driver.prepare import StaticClaimSource
from accelsched.dra.driver.proto import api_pb2 as pb
from accelsched.errors import InputError

DRIVER = "gpu.example.com"
NODE = "node-a"
GO_MOD = Path("/root/go/pkg/mod/k8s.io/kubelet@v0.36.3/pkg/apis")


@pytest.fixture
def dirs() -> Iterator[dict[str, str]]:
    # Short paths: a unix socket path must fit in 108 bytes, pytest's tmp_path may not.
    root = tempfile.mkdtemp(prefix="dra-")
    out = {name: os.path.join(root, name) for name in ("plugins", "registry", "cdi")}
    for path in out.values():
        os.makedirs(path)
    out["root"] = root
    yield out
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def peer(dirs: dict[str, str]) -> Iterator[DRAKubeletPeer]:
    kubelet = DRAKubeletPeer(dirs["registry"]).start()
    yield kubelet
    kubelet.stop()


def config(dirs: dict[str, str], **extra: Any) -> DriverConfig:
    defaults: dict[str, Any] = {
        "node_name": NODE,
        "driver": DRIVER,
        "plugins_dir": dirs["plugins"],
        "registry_dir": dirs["registry"],
        "cdi_dir": dirs["cdi"],
        "fake": inv.FakeSpec(devices=4, numa_nodes=2, nics=2),
        "interval": 3600,  # tests take watch steps themselves
    }
    return DriverConfig(**{**defaults, **extra})


def claim(name: str, uid: str, devices: list[tuple[str, str]], driver: str = DRIVER, pool: str = NODE) -> dict:
    """A ResourceClaim as the API returns it once the scheduler allocated ``devices`` ((request, device) pairs)."""
    results = [{"request": r, "driver": driver, "pool": pool, "device": d} for r, d in devices]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": "default", "name": name, "uid": uid},
        "spec": {"devices": {"requests": [{"name": r, "exactly": {"deviceClassName": "gpu"}} for r, _ in devices]}},
        "status": {"allocation": {"devices": {"results": results}}},
    }


@pytest.fixture
def claims() -> StaticClaimSource:
    source = StaticClaimSource()
    source.add(claim("two-gpus", "uid-1", [("gpus", "gpu-0"), ("gpus", "gpu-1")]))
    source.add(claim("gpu-and-nic", "uid-2", [("gpu", "gpu-2"), ("nic", "nic-1")]))
    return source


@pytest.fixture
def driver(dirs: dict[str, str], claims: StaticClaimSource) -> Iterator[DRADriver]:
    d = DRADriver(config(dirs), claims).start()
    yield d
    d.stop()


def ids(devices: list[pb.Device]) -> list[tuple[list[str], str, str, list[str]]]:
    return [(list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids)) for d in devices]


# ---------------------------------------------------------------------------------------------- wire format


def test_committed_stubs_are_what_the_protos_generate() -> None:
    pytest.importorskip("grpc_tools")
    assert gen.stale() == [], "run make proto (python -m accelsched.dra.driver.gen) and commit the stubs"


@pytest.mark.parametrize(
    ("ours", "upstream"),
    [("api.proto", "dra/v1/api.proto"), ("pluginregistration.proto", "pluginregistration/v1/api.proto")],
)
def test_protos_are_the_kubelets_unchanged(ours: str, upstream: str) -> None:
    source = GO_MOD / upstream
    if not source.exists():
        pytest.skip(f"{source} not in the Go module cache")
    text = (gen.PACKAGE_ROOT / gen.PROTO_DIR / ours).read_text()
    assert text.split("\n", 1)[1] == source.read_text()  # below our one header line


def test_rpc_paths_are_the_kubelets() -> None:
    """The method paths the kubelet dials (api_grpc.pb.go's FullMethodName constants)."""
    stubs = (gen.PACKAGE_ROOT / gen.PROTO_DIR / "api_pb2_grpc.py").read_text()
    assert "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources" in stubs
    assert "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources" in stubs
    reg = (gen.PACKAGE_ROOT / gen.PROTO_DIR / "pluginregistration_pb2_grpc.py").read_text()
    assert "/pluginregistration.Registration/GetInfo" in reg
    assert "/pluginregistration.Registration/NotifyRegistrationStatus" in reg


# ---------------------------------------------------------------------------------------------- registration


def test_registers_with_the_kubelet(driver: DRADriver, peer: DRAKubeletPeer, dirs: dict[str, str]) -> None:
    attempt = peer.next_attempt()
    assert attempt.error == "" and attempt.notified
    assert attempt.socket == os.path.join(dirs["registry"], f"{DRIVER}-reg.sock")
    assert (attempt.info.type, attempt.info.name) == ("DRAPlugin", DRIVER)
    assert attempt.info.endpoint == os.path.join(dirs["plugins"], DRIVER, "dra.sock")
    assert list(attempt.info.supported_versions) == ["v1.DRAPlugin"]
    assert peer.wait_registered(DRIVER).service == "v1.DRAPlugin"
    assert driver.registration.registered.wait(5)
    # Only the two sockets: the private names they were bound under are gone.
    assert sorted(os.listdir(dirs["registry"])) == [f"{DRIVER}-reg.sock"]
    assert sorted(os.listdir(os.path.join(dirs["plugins"], DRIVER))) == ["dra.sock"]


def test_a_refused_registration_is_recorded(dirs: dict[str, str], claims: StaticClaimSource) -> None:
    d = DRADriver(config(dirs), claims)
    d.registration.versions = ("v9.DRAPlugin",)
    d.start()
    kubelet = DRAKubeletPeer(dirs["registry"]).start()
    try:
        attempt = kubelet.next_attempt()
        endpoint = os.path.join(dirs["plugins"], DRIVER, "dra.sock")
        want = (
            "RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of DRA driver"
            f' plugin {DRIVER} at endpoint {endpoint}: none of services supported by the plugin (["v9.DRAPlugin"])'
            ' are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])'
        )
        assert attempt.error == want
        assert d.registration.last_error == want and not d.registration.registered.is_set()
        assert kubelet.get(DRIVER) is None
    finally:
        kubelet.stop()
        d.stop()


def test_a_removed_socket_is_served_and_registered_again(driver: DRADriver, peer: DRAKubeletPeer) -> None:
    peer.wait_registered(DRIVER)
    assert peer.next_attempt().error == ""
    os.unlink(driver.config.registration_socket)
    os.unlink(driver.config.service_socket)
    driver.step()
    assert peer.next_attempt().error == ""
    devices = peer.prepare(DRIVER, [("default", "uid-1", "two-gpus")])
    assert [d.device_name for d in devices["uid-1"]] == ["gpu-0", "gpu-1"]


def test_a_restarted_kubelet_registers_the_driver_again(driver: DRADriver, peer: DRAKubeletPeer) -> None:
    assert peer.next_attempt().error == ""
    peer.restart()  # it forgets every plugin, then finds the sockets in the folder
    assert peer.next_attempt().error == ""
    assert [d.device_name for d in peer.prepare(DRIVER, [("default", "uid-1", "two-gpus")])["uid-1"]] == [
        "gpu-0",
        "gpu-1",
    ]


# ---------------------------------------------------------------------------------------------- prepare


def test_prepare_writes_cdi_and_checkpoint_and_unprepare_removes_them(
    driver: DRADriver, peer: DRAKubeletPeer, dirs: dict[str, str]
) -> None:
    peer.wait_registered(DRIVER)
    got = peer.prepare(DRIVER, [("default", "uid-1", "two-gpus"), ("default", "uid-2", "gpu-and-nic")])
    kind = f"k8s.{DRIVER}/device"
    assert ids(got["uid-1"]) == [
        (["gpus"], NODE, "gpu-0", [f"{kind}=uid-1-gpu-0"]),
        (["gpus"], NODE, "gpu-1", [f"{kind}=uid-1-gpu-1"]),
    ]
    assert ids(got["uid-2"]) == [
        (["gpu"], NODE, "gpu-2", [f"{kind}=uid-2-gpu-2"]),
        (["nic"], NODE, "nic-1", [f"{kind}=uid-2-nic-1"]),
    ]
    spec_path = os.path.join(dirs["cdi"], f"k8s.{DRIVER}-device_uid-1.json")
    spec = json.loads(Path(spec_path).read_text())
    assert (spec["cdiVersion"], spec["kind"]) == ("0.5.0", kind)
    assert [d["name"] for d in spec["devices"]] == ["uid-1-gpu-0", "uid-1-gpu-1"]
    assert "ACCELSCHED_DRA_DEVICE_GPU_0=gpu-0" in spec["devices"][0]["containerEdits"]["env"]
    assert sorted(Checkpoint(driver.config.checkpoint_path).claims) == ["uid-1", "uid-2"]

    peer.unprepare(DRIVER, [("default", "uid-1", "two-gpus")])
    assert not os.path.exists(spec_path)
    assert sorted(Checkpoint(driver.config.checkpoint_path).claims) == ["uid-2"]
    peer.unprepare(DRIVER, [("default", "uid-1", "two-gpus")])  # again: already unprepared is success


def test_a_repeated_prepare_answers_from_the_checkpoint(
    driver: DRADriver, peer: DRAKubeletPeer, claims: StaticClaimSource
) -> None:
    peer.wait_registered(DRIVER)
    first = ids(peer.prepare(DRIVER, [("default", "uid-1", "two-gpus")])["uid-1"])
    claims.claims.clear()  # the API server is not asked again
    assert ids(peer.prepare(DRIVER, [("default", "uid-1", "two-gpus")])["uid-1"]) == first


def test_a_restart_loses_nothing(dirs: dict[str, str], claims: StaticClaimSource, peer: DRAKubeletPeer) -> None:
    first = DRADriver(config(dirs), claims).start()
    peer.wait_registered(DRIVER)
    before = ids(peer.prepare(DRIVER, [("default", "uid-1", "two-gpus")])["uid-1"])
    first.stop()
    orphan = Path(dirs["cdi"], f"k8s.{DRIVER}-device_uid-crashed.json")  # written, never checkpointed
    orphan.write_text("{}")
    unrelated = Path(dirs["cdi"], "k8s.other.example.com-device_uid-9.json")
    unrelated.write_text("{}")

    second = DRADriver(config(dirs), StaticClaimSource()).start()  # no claims to read: all from the checkpoint
    try:
        assert not orphan.exists() and unrelated.exists()
        peer.next_attempt()
        assert peer.next_attempt().error == ""  # the new sockets registered again
        assert ids(peer.prepare(DRIVER, [("default", "uid-1", "two-gpus")])["uid-1"]) == before
        peer.unprepare(DRIVER, [("default", "uid-1", "two-gpus")])
        assert second.checkpoint.claims == {}
        assert not Path(dirs["cdi"], f"k8s.{DRIVER}-device_uid-1.json").exists()
    finally:
        second.stop()


@pytest.mark.parametrize(
    ("name", "uid", "message"),
    [
        ("missing", "uid-9", "ResourceClaim default/missing not found"),
        (
            "two-gpus",
            "uid-other",
            "ResourceClaim default/two-gpus has UID uid-1, not uid-other (deleted and created again?)",
        ),
        ("pending", "uid-3", "ResourceClaim default/pending is not allocated"),
        ("elsewhere", "uid-4", f"ResourceClaim default/elsewhere has no device of driver {DRIVER} allocated"),
        (
            "gone",
            "uid-5",
            "ResourceClaim default/gone: device gpu-7 is not on this node now (gone, or never published)",
        ),
        (
            "other-node",
            "uid-6",
            f"ResourceClaim default/other-node: device node-b/gpu-0 is not in this node's pool {NODE}",
        ),
    ],
)
def test_claim_errors_go_in_the_response_map(
    driver: DRADriver, peer: DRAKubeletPeer, claims: StaticClaimSource, name: str, uid: str, message: str
) -> None:
    pending = claim("pending", "uid-3", [("gpu", "gpu-0")])
    del pending["status"]
    claims.add(pending)
    claims.add(claim("elsewhere", "uid-4", [("gpu", "gpu-0")], driver="other.example.com"))
    claims.add(claim("gone", "uid-5", [("gpu", "gpu-7")]))
    claims.add(claim("other-node", "uid-6", [("gpu", "gpu-0")], pool="node-b"))
    peer.wait_registered(DRIVER)
    stub = peer.get(DRIVER).stub
    response = stub.NodePrepareResources(
        pb.NodePrepareResourcesRequest(
            claims=[
                pb.Claim(namespace="default", uid=uid, name=name),
                pb.Claim(namespace="default", uid="uid-1", name="two-gpus"),
            ]
        ),
        timeout=10,
    )
    assert response.claims[uid].error == message and not response.claims[uid].devices
    assert [d.device_name for d in response.claims["uid-1"].devices] == ["gpu-0", "gpu-1"]  # the good one still done
    with pytest.raises(DRAError) as err:
        peer.prepare(DRIVER, [("default", uid, name)])
    assert str(err.value) == f"NodePrepareResources failed for ResourceClaim {name}: {message}"
    assert uid not in driver.checkpoint.claims and not Path(driver.cdi.spec_path(uid)).exists()


@pytest.mark.parametrize(
    ("claims_", "message"),
    [
        ([pb.Claim(namespace="default", name="x")], "claims[0].uid is required"),
        ([pb.Claim(uid="u", name="x")], "claims[0].namespace is required"),
        ([pb.Claim(namespace="default", uid="u")], "claims[0].name is required"),
        (
            [pb.Claim(namespace="d", uid="u", name="a"), pb.Claim(namespace="d", uid="u", name="b")],
            "claims[1].uid u is listed twice",
        ),
    ],
)
def test_malformed_requests_are_invalid_argument(
    driver: DRADriver, peer: DRAKubeletPeer, claims_: list[pb.Claim], message: str
) -> None:
    stub = peer.wait_registered(DRIVER).stub
    for call, request in (
        (stub.NodePrepareResources, pb.NodePrepareResourcesRequest(claims=claims_)),
        (stub.NodeUnprepareResources, pb.NodeUnprepareResourcesRequest(claims=claims_)),
    ):
        with pytest.raises(grpc.RpcError) as err:
            call(request, timeout=10)
        assert (err.value.code(), err.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
    assert stub.NodePrepareResources(pb.NodePrepareResourcesRequest(), timeout=10).claims == {}  # still serving


def test_an_unexpected_failure_is_internal_and_the_server_keeps_serving(
    driver: DRADriver, peer: DRAKubeletPeer, claims: StaticClaimSource
) -> None:
    claims.claims[("default", "broken")] = {"metadata": {"uid": "uid-b"}, "status": {"allocation": {"devices": 7}}}
    stub = peer.wait_registered(DRIVER).stub
    with pytest.raises(grpc.RpcError) as err:
        stub.NodePrepareResources(
            pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace="default", uid="uid-b", name="broken")]),
            timeout=10,
        )
    assert err.value.code() == grpc.StatusCode.INTERNAL and "AttributeError" in err.value.details()
    assert [d.device_name for d in peer.prepare(DRIVER, [("default", "uid-1", "two-gpus")])["uid-1"]] == [
        "gpu-0",
        "gpu-1",
    ]


def test_a_device_removed_from_the_source_cannot_be_prepared(dirs: dict[str, str], peer: DRAKubeletPeer) -> None:
    fake = Path(dirs["root"], "fake.yaml")
    fake.write_text("devices: 2\n")
    source = StaticClaimSource()
    source.add(claim("c", "uid-c", [("gpu", "gpu-1")]))
    d = DRADriver(config(dirs, fake=None, fake_file=str(fake)), source).start()
    try:
        peer.wait_registered(DRIVER)
        fake.write_text("devices: 2\nmissing: [gpu-1]\n")
        d.step()
        with pytest.raises(DRAError, match="device gpu-1 is not on this node now"):
            peer.prepare(DRIVER, [("default", "uid-c", "c")])
        fake.write_text("devices: [not a number]\n")  # a bad edit keeps the last good inventory
        d.step()
        assert [x.name for x in d.inventory.devices] == ["gpu-0"]
        fake.write_text("devices: 2\n")
        d.step()
        assert [x.device_name for x in peer.prepare(DRIVER, [("default", "uid-c", "c")])["uid-c"]] == ["gpu-1"]
    finally:
        d.stop()


# ---------------------------------------------------------------------------------------------- checkpoint


def test_checkpoint_layout_is_the_kubelets_and_corruption_is_detected(tmp_path: Path) -> None:
    path = str(tmp_path / "checkpoint.json")
    cp = Checkpoint(path)
    from accelsched.dra.driver.checkpoint import PreparedClaim, PreparedDevice

    cp.put(PreparedClaim("u1", "ns", "c", (PreparedDevice(("r",), "p", "d", ("k/c=x",)),)))
    outer = json.loads(Path(path).read_text())
    assert sorted(outer) == ["Checksum", "Data"]
    import zlib

    assert outer["Checksum"] == zlib.crc32(outer["Data"].encode())
    assert Checkpoint(path).claims == cp.claims
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.json"]  # no temporary file left behind

    tampered = dict(outer, Data=outer["Data"].replace('"d"', '"e"'))
    Path(path).write_text(json.dumps(tampered))
    with pytest.raises(CheckpointError, match="checkpoint is corrupted"):
        Checkpoint(path)
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        decode(b'{"Data": "x"')
    assert decode(encode({})) == {}


def test_a_corrupt_checkpoint_stops_the_driver_as_bad_input(dirs: dict[str, str]) -> None:
    path = os.path.join(dirs["plugins"], DRIVER, "checkpoint.json")
    os.makedirs(os.path.dirname(path))
    Path(path).write_text('{"Data": "{}", "Checksum": 1}')
    with pytest.raises(InputError) as err:
        DRADriver(config(dirs), StaticClaimSource())
    assert err.value.source == path and "corrupted" in str(err.value)


# ---------------------------------------------------------------------------------------------- inventory


def _attr(device: dict, name: str) -> Any:
    return next(iter(device["attributes"][name].values()))


def test_sysfs_slices_carry_topology_and_mig_partitions(tmp_path: Path) -> None:
    root = sb.dgx_like(tmp_path)
    slices = inv.resource_slices(inv.from_sysfs(root), DRIVER, NODE, 3, {"name": NODE, "uid": "node-uid"})
    pools = {
        (s["spec"]["pool"]["name"], s["spec"]["pool"]["generation"], s["spec"]["pool"]["resourceSliceCount"])
        for s in slices
    }
    assert pools == {(NODE, 3, len(slices))}
    for s in slices:
        assert s["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "node-uid", "controller": True}
        ]
        assert ("devices" in s["spec"]) != ("sharedCounters" in s["spec"])  # never both (1.35+)
        devices = s["spec"].get("devices", [])
        limit = 64 if any("consumesCounters" in d for d in devices) else 128
        assert len(devices) <= limit and len(s["spec"].get("sharedCounters", [])) <= 8
    devices = {d["name"]: d for s in slices for d in s["spec"].get("devices", [])}
    gpu = devices["gpu-0000-05-00-0"]
    assert _attr(gpu, "resource.kubernetes.io/pcieRoot") == "pci0000:00"
    assert _attr(gpu, "resource.kubernetes.io/pciBusID") == "0000:05:00.0"
    assert _attr(gpu, "numaNode") == 0 and _attr(gpu, "accelsched.io/pcieSwitch") == "0000:03:00.0"
    assert (_attr(gpu, "vendor"), _attr(gpu, "deviceID"), _attr(gpu, "model")) == ("0x10de", "0x2330", "H100-80GB")
    assert gpu["capacity"]["memory"] == {"value": "80Gi"}
    nic = devices["nic-0000-07-00-0"]
    assert _attr(nic, "accelsched.io/kind") == "nic" and _attr(nic, "interface") == "mlx5_0"
    assert _attr(nic, "resource.kubernetes.io/pcieRoot") == _attr(gpu, "resource.kubernetes.io/pcieRoot")
    # 8 H100: 8 counter sets, each GPU whole plus 18 placements; the BMC VGA and the NVMe are not devices.
    counter_sets = [c for s in slices for c in s["spec"].get("sharedCounters", [])]
    assert len(counter_sets) == 8
    assert sum(1 for d in devices.values() if _attr(d, "accelsched.io/kind") == "mig") == 8 * 18
    part = devices["gpu-0000-05-00-0-mig-3g-40gb-4"]
    assert (_attr(part, "profile"), _attr(part, "parent"), _attr(part, "numaNode")) == (
        "3g.40gb",
        "gpu-0000-05-00-0",
        0,
    )
    assert _attr(part, "resource.kubernetes.io/pcieRoot") == "pci0000:00"
    assert "resource.kubernetes.io/pciBusID" not in part["attributes"]
    assert part["consumesCounters"][0]["counters"]["memory-slice-4"] == {"value": "1"}
    assert "memory-slice-3" not in part["consumesCounters"][0]["counters"]
    assert len(devices) == 8 * 19 + 4


def test_an_unplugged_gpu_leaves_the_slices_with_its_partitions(tmp_path: Path) -> None:
    b = sb.SysfsBuilder(tmp_path)
    b.numa(0, range(4), 1024, [10])
    for bdf, port in (("0000:01:00.0", "0000:00:01.0"), ("0000:02:00.0", "0000:00:02.0")):
        b.pci(bdf, 0x0302, sb.NVIDIA, 0x20B0, 0, [port])  # A100 SXM4 40GB: MIG-capable
    before = inv.from_sysfs(tmp_path)
    assert [c["name"] for c in before.counter_sets] == ["gpu-0000-01-00-0-counters", "gpu-0000-02-00-0-counters"]
    assert len(before.devices) == 2 * 19
    b.unplug("0000:02:00.0")
    after = inv.from_sysfs(tmp_path)
    assert [c["name"] for c in after.counter_sets] == ["gpu-0000-01-00-0-counters"]
    assert {d.name for d in after.devices} == {d.name for d in before.devices if d.name.startswith("gpu-0000-01")}


def test_sysfs_without_mig_and_a_non_gpu_accelerator(tmp_path: Path) -> None:
    root = sb.qaic_box(tmp_path)
    found = inv.from_sysfs(root)
    assert [d.name for d in found.devices] == [
        "accel-0000-01-00-0",
        "accel-0000-02-00-0",
        "accel-0000-81-00-0",
        "accel-0000-82-00-0",
        "nic-0000-41-00-0",
    ]
    assert found.counter_sets == ()
    slices = inv.resource_slices(found, DRIVER, NODE)
    assert len(slices) == 1 and len(slices[0]["spec"]["devices"]) == 5
    dgx = sb.dgx_like(tmp_path / "dgx")
    assert inv.from_sysfs(dgx, mig_enabled=False).counter_sets == ()


def test_a_device_node_registered_in_sysfs_goes_into_the_cdi_edits(tmp_path: Path) -> None:
    b = sb.SysfsBuilder(tmp_path)
    b.numa(0, range(4), 1024, [10])
    b.pci("0000:01:00.0", 0x1200, sb.QUALCOMM, sb.QAIC_AI100, 0, ["0000:00:01.0"]).device_node(
        "0000:01:00.0", "accel", "accel3"
    )
    from accelsched.dra.driver.cdi import container_edits

    (device,) = inv.from_sysfs(tmp_path).devices
    edits = container_edits(device, NODE)
    assert edits["deviceNodes"] == [{"path": "/dev/accel/accel3"}]
    assert "ACCELSCHED_DRA_DEVICE_ACCEL_0000_01_00_0_PCI_BUS_ID=0000:01:00.0" in edits["env"]


def test_fake_inventory_is_shaped_like_the_example_driver() -> None:
    found = inv.from_fake(inv.parse_fake({"devices": 4, "numaNodes": 2, "nics": 2}), NODE)
    devices = {d.name: d.to_api() for d in found.devices}
    assert list(devices) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3", "nic-0", "nic-1"]
    gpu = devices["gpu-2"]
    assert (_attr(gpu, "index"), _attr(gpu, "model"), _attr(gpu, "driverVersion")) == (2, "LATEST-GPU-MODEL", "1.0.0")
    assert gpu["attributes"]["driverVersion"] == {"version": "1.0.0"}
    assert _attr(gpu, "uuid") == inv.fake_uuid(NODE, "gpu-2") != inv.fake_uuid("node-b", "gpu-2")
    assert gpu["capacity"] == {"memory": {"value": "80Gi"}}
    assert [_attr(devices[n], "numaNode") for n in devices] == [0, 0, 1, 1, 0, 1]
    assert _attr(devices["nic-1"], "resource.kubernetes.io/pcieRoot") == _attr(gpu, "resource.kubernetes.io/pcieRoot")


@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [
        ({"devices": "8"}, "devices", "must be a int"),
        ({"devices": True}, "devices", "must be a int"),
        ({"devices": 2000}, "devices", "between 0 and 1024"),
        ({"numaNodes": 0}, "numaNodes", "between 1 and 1024"),
        ({"migModel": "A100"}, "migModel", "ambiguous"),
        ({"memory": "lots"}, "memory", "not a quantity"),
        ({"gpus": 2}, "gpus", "unknown field"),
    ],
)
def test_bad_fake_inventory_is_input_error(doc: dict, field: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        inv.parse_fake(doc, "fake.yaml")
    assert (err.value.source, err.value.field) == ("fake.yaml", field) and message in str(err.value)


# ---------------------------------------------------------------------------------------------- MIG counters


def _fits(model: mig.Model, chosen: list[inv.NodeDevice], counter_set: dict) -> bool:
    """Counter arithmetic as the allocator does it: the sum of what the devices consume never exceeds a counter."""
    left = {k: parse_fraction(v["value"]) for k, v in counter_set["counters"].items()}
    for d in chosen:
        for k, v in d.consumes_counters[0]["counters"].items():
            left[k] -= parse_fraction(v["value"])
    return all(v >= Fraction(0) for v in left.values())


def _layout_ok(model: mig.Model, layout: list[mig.Instance]) -> bool:
    try:
        mig.check_layout(model, layout)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(mig.MODELS))
def test_mig_counters_allow_exactly_the_layouts_the_hardware_allows(name: str) -> None:
    """Every set of placements that fits the counters is a layout mig.check_layout accepts, and every placement
    added to such a set fits iff the layout stays valid (so, by induction from the empty set, the counters accept
    exactly the valid layouts). The full GPU fits alone and with nothing else."""
    model = mig.MODELS[name]
    found = inv.from_fake(inv.parse_fake({"devices": 1, "migModel": name}), NODE)
    (counter_set,) = found.counter_sets
    full, *parts = found.devices
    assert full.name == "gpu-0" and all(p.parent == "gpu-0" for p in parts)
    assert _fits(model, [full], counter_set) and not _fits(model, [full, parts[0]], counter_set)
    names = sorted(counter_set["counters"])
    total = [parse_fraction(counter_set["counters"][n]["value"]) for n in names]

    def use(p: inv.NodeDevice) -> list[Fraction]:
        counters = p.consumes_counters[0]["counters"]
        return [parse_fraction(counters[n]["value"]) if n in counters else Fraction(0) for n in names]

    uses = [use(p) for p in parts]
    instances = []
    for p in parts:
        profile = model.profile(_attr(p.to_api(), "profile"))
        instances.append(mig.Instance(profile.name, _attr(p.to_api(), "memorySliceStart"), profile.size))
    layouts = 0

    def grow(chosen: list[int], left: list[Fraction]) -> None:
        nonlocal layouts
        layouts += 1
        for i in range(chosen[-1] + 1 if chosen else 0, len(parts)):
            after = [x - y for x, y in zip(left, uses[i], strict=True)]
            fits = min(after) >= 0
            assert fits == _layout_ok(model, [instances[j] for j in (*chosen, i)]), [instances[j] for j in (*chosen, i)]
            if fits:
                grow([*chosen, i], after)

    grow([], total)
    assert layouts > 50


def test_overlapping_3g_and_4g_on_an_a100_cannot_both_be_allocated() -> None:
    found = inv.from_fake(inv.parse_fake({"devices": 1, "migModel": "A100-40GB"}), NODE)
    by = found.by_name()
    (counter_set,) = found.counter_sets
    model = mig.MODELS["A100-40GB"]
    assert not _fits(model, [by["gpu-0-mig-3g-20gb-0"], by["gpu-0-mig-4g-20gb-0"]], counter_set)
    assert _fits(model, [by["gpu-0-mig-3g-20gb-4"], by["gpu-0-mig-4g-20gb-0"]], counter_set)


def _mig_claim(*wanted: str) -> Any:
    """A claim with one request per ``profile`` or ``profile@start`` (any start when none is given)."""
    from accelsched.dra import objects

    requests = []
    for i, want in enumerate(wanted):
        profile, _, start = want.partition("@")
        cel = f'device.attributes["{DRIVER}"].profile == "{profile}"'
        if start:
            cel += f' && device.attributes["{DRIVER}"].memorySliceStart == {start}'
        requests.append(
            {"name": f"r{i}", "exactly": {"deviceClassName": "mig", "selectors": [{"cel": {"expression": cel}}]}}
        )
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "d"},
        "spec": {"devices": {"requests": requests}},
    }
    return objects.parse_resource_claim(doc, "test")


def test_the_allocator_never_hands_out_overlapping_mig_placements() -> None:
    """The published slices, parsed as the scheduler reads them, through the structured allocator."""
    from accelsched.dra import objects
    from accelsched.dra.allocated import AllocatedState
    from accelsched.dra.allocator import Allocator

    found = inv.from_fake(inv.parse_fake({"devices": 1, "migModel": "A100-40GB"}), NODE)
    slices = [objects.parse_resource_slice(s, "published") for s in inv.resource_slices(found, DRIVER, NODE)]
    expression = f'device.driver == "{DRIVER}" && device.attributes["accelsched.io"].kind == "mig"'
    mig_class = objects.parse_device_class(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "mig"},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }
    )

    def allocate(*wanted: str) -> list[str] | None:
        done = Allocator({"mig": mig_class}, slices).allocate(NODE, {}, [_mig_claim(*wanted)], AllocatedState())
        return None if done is None else [r.device for r in done[0].results]

    assert allocate("3g.20gb@0", "4g.20gb@0") is None  # they share memory slices 0-3
    assert allocate("3g.20gb", "4g.20gb") == ["gpu-0-mig-3g-20gb-4", "gpu-0-mig-4g-20gb-0"]
    assert allocate("7g.40gb", "1g.5gb") is None
    assert allocate(*["1g.5gb"] * 7) is not None and allocate(*["1g.5gb"] * 8) is None
    assert allocate("4g.20gb", "2g.10gb", "1g.5gb") is not None and allocate("4g.20gb", "3g.20gb", "1g.5gb") is None


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["dra-driver", "--fake", "2"], env={"NODE_NAME": ""})
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "accelsched: error: --node-name: --node-name is required (the DaemonSet passes $(NODE_NAME))"
    ]
    bad = tmp_path / "fake.yaml"
    bad.write_text("devices: -1\n")
    result = runner.invoke(cli, ["dra-driver", "--node-name", NODE, "--fake-inventory", str(bad), "--no-publish"])
    assert result.exit_code == 2 and "devices: must be between 0 and 1024" in result.output
    assert len(result.output.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------- deploy/dra


DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "dra"


def _docs(name: str) -> list[dict]:
    import yaml

    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def test_the_shipped_device_classes_select_what_the_driver_publishes() -> None:
    """Each class, parsed and compiled as the scheduler does, picks exactly its kind from published slices."""
    from accelsched.dra import objects
    from accelsched.dra.cel import compile_selector

    found = inv.from_fake(inv.parse_fake({"devices": 2, "nics": 1, "migModel": "H100-80GB"}), NODE)
    driver = "dra.accelsched.io"  # deploy/dra/driver.yaml's --driver-name
    slices = [objects.parse_resource_slice(s) for s in inv.resource_slices(found, driver, NODE)]
    devices = [d for s in slices for d in s.devices]
    chosen = {}
    for doc in _docs("deviceclasses.yaml"):
        device_class = objects.parse_device_class(doc, "deviceclasses.yaml")
        selectors = [compile_selector(e) for e in device_class.selectors]
        chosen[device_class.name] = [d.name for d in devices if all(s.matches(d, driver) for s in selectors)]
    assert chosen["accelerator.accelsched.io"] == ["gpu-0", "gpu-1"]
    assert chosen["nic.accelsched.io"] == ["nic-0"]
    assert len(chosen["mig.accelsched.io"]) == 2 * 18 and all("-mig-" in n for n in chosen["mig.accelsched.io"])


def test_the_daemonset_mounts_the_kubelet_folders_the_driver_uses() -> None:
    docs = {d["kind"]: d for d in _docs("driver.yaml")}
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"][:2] == ["accelsched", "dra-driver"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    defaults = DriverConfig(node_name=NODE)
    for folder in (defaults.plugins_dir, defaults.registry_dir, defaults.cdi_dir):
        assert paths[mounts[folder]] == folder, folder  # the host's folder, at the same path in the container
    assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]
    rules = {(r["apiGroups"][0], res): set(r["verbs"]) for r in docs["ClusterRole"]["rules"] for res in r["resources"]}
    assert {"get"} <= rules[("resource.k8s.io", "resourceclaims")]
    assert {"list", "create", "update", "delete"} <= rules[("resource.k8s.io", "resourceslices")]
    assert {"get"} <= rules[("", "nodes")]


def test_the_scheduler_reads_the_published_slices_of_a_sysfs_node(tmp_path: Path) -> None:
    """What the driver publishes for the dgx fixture, dumped as `kubectl get -o yaml` would, loads in accelsched
    (validated as the API server would) as DRA devices of the node, not as topology-layout slices."""
    from accelsched.api import goyaml
    from accelsched.api.loader import load
    from accelsched.dra.driver.main import DEFAULT_DRIVER
    from accelsched.topology.layout import TOPOLOGY_DRIVER

    assert DEFAULT_DRIVER != TOPOLOGY_DRIVER
    slices = inv.resource_slices(inv.from_sysfs(sb.dgx_like(tmp_path / "sys")), DEFAULT_DRIVER, NODE)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}, "status": {"allocatable": {"cpu": "8"}}}
    path = tmp_path / "cluster.yaml"
    path.write_text(goyaml.dump({"apiVersion": "v1", "kind": "List", "items": [node, *slices]}))
    inputs = load([path])
    devices = [d.name for s in inputs.dra.slices.values() for d in s.devices]
    assert len(devices) == 8 * 19 + 4
