"""Device plugin edges without a kubelet: the wire format and its stubs, the config, the sources, the CLI."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sysfs_builder as sb
import yaml
from click.testing import CliRunner
from google.protobuf.descriptor import FieldDescriptor
from kubelet_peer import KubeletPeer

from accelsched.cli import main
from accelsched.deviceplugin import config as plugin_config
from accelsched.deviceplugin import gen
from accelsched.deviceplugin.inventory import units_by_resource
from accelsched.deviceplugin.proto import api_pb2 as pb
from accelsched.deviceplugin.sources import FakeSource, SysfsSource
from accelsched.errors import InputError

# ---------------------------------------------------------------------------------------------- wire format

# From the reference (k8s.io/kubelet deviceplugin/v1beta1 api.proto): message -> {field: (number, type)}, the type
# written as in the .proto ("repeated" included, maps as map<key, value>).
UPSTREAM_FIELDS = {
    "DevicePluginOptions": {"pre_start_required": (1, "bool"), "get_preferred_allocation_available": (2, "bool")},
    "RegisterRequest": {
        "version": (1, "string"),
        "endpoint": (2, "string"),
        "resource_name": (3, "string"),
        "options": (4, "DevicePluginOptions"),
    },
    "Empty": {},
    "ListAndWatchResponse": {"devices": (1, "repeated Device")},
    "TopologyInfo": {"nodes": (1, "repeated NUMANode")},
    "NUMANode": {"ID": (1, "int64")},
    "Device": {"ID": (1, "string"), "health": (2, "string"), "topology": (3, "TopologyInfo")},
    "PreStartContainerRequest": {"devices_ids": (1, "repeated string")},
    "PreStartContainerResponse": {},
    "PreferredAllocationRequest": {"container_requests": (1, "repeated ContainerPreferredAllocationRequest")},
    "ContainerPreferredAllocationRequest": {
        "available_deviceIDs": (1, "repeated string"),
        "must_include_deviceIDs": (2, "repeated string"),
        "allocation_size": (3, "int32"),
    },
    "PreferredAllocationResponse": {"container_responses": (1, "repeated ContainerPreferredAllocationResponse")},
    "ContainerPreferredAllocationResponse": {"deviceIDs": (1, "repeated string")},
    "AllocateRequest": {"container_requests": (1, "repeated ContainerAllocateRequest")},
    "ContainerAllocateRequest": {"devices_ids": (1, "repeated string")},
    "CDIDevice": {"name": (1, "string")},
    "AllocateResponse": {"container_responses": (1, "repeated ContainerAllocateResponse")},
    "ContainerAllocateResponse": {
        "envs": (1, "map<string, string>"),
        "mounts": (2, "repeated Mount"),
        "devices": (3, "repeated DeviceSpec"),
        "annotations": (4, "map<string, string>"),
        "cdi_devices": (5, "repeated CDIDevice"),
    },
    "Mount": {"container_path": (1, "string"), "host_path": (2, "string"), "read_only": (3, "bool")},
    "DeviceSpec": {"container_path": (1, "string"), "host_path": (2, "string"), "permissions": (3, "string")},
}
SCALARS = {
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_INT64: "int64",
}


def proto_type(f: FieldDescriptor) -> str:
    """A field's type as the .proto writes it; an unexpected scalar type reads as its descriptor number."""
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
        return f"map<{proto_type(key)}, {proto_type(value)}>"
    name = f.message_type.name if f.message_type is not None else SCALARS.get(f.type, f"type {f.type}")
    return f"repeated {name}" if f.is_repeated else name


def test_proto_matches_upstream_names_numbers_types_and_rpc_paths() -> None:
    assert pb.DESCRIPTOR.package == "v1beta1"
    messages = {
        name: {f.name: (f.number, proto_type(f)) for f in m.fields}
        for name, m in pb.DESCRIPTOR.message_types_by_name.items()
    }
    assert messages == UPSTREAM_FIELDS
    services = {
        s.name: {m.name: (m.input_type.name, m.output_type.name, m.server_streaming) for m in s.methods}
        for s in pb.DESCRIPTOR.services_by_name.values()
    }
    assert services == {
        "Registration": {"Register": ("RegisterRequest", "Empty", False)},
        "DevicePlugin": {
            "GetDevicePluginOptions": ("Empty", "DevicePluginOptions", False),
            "ListAndWatch": ("Empty", "ListAndWatchResponse", True),
            "GetPreferredAllocation": ("PreferredAllocationRequest", "PreferredAllocationResponse", False),
            "Allocate": ("AllocateRequest", "AllocateResponse", False),
            "PreStartContainer": ("PreStartContainerRequest", "PreStartContainerResponse", False),
        },
    }


def test_the_type_check_tells_repeated_single_and_map_apart() -> None:
    """proto_type sees repeatedness and maps, so the comparison above fails when a field loses either."""
    fields = pb.ContainerAllocateResponse.DESCRIPTOR.fields_by_name
    assert (proto_type(fields["envs"]), proto_type(fields["mounts"])) == ("map<string, string>", "repeated Mount")
    assert proto_type(pb.Device.DESCRIPTOR.fields_by_name["ID"]) == "string"
    assert proto_type(pb.ContainerAllocateRequest.DESCRIPTOR.fields_by_name["devices_ids"]) == "repeated string"


def test_committed_stubs_are_what_the_proto_generates() -> None:
    pytest.importorskip("grpc_tools")
    assert gen.stale() == [], "run make proto (python -m accelsched.deviceplugin.gen) and commit the stubs"


def test_generator_check_notices_a_stub_edited_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("grpc_tools")
    proto_dir = tmp_path / gen.PROTO.parent
    shutil.copytree(gen.PACKAGE_ROOT / gen.PROTO.parent, proto_dir, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(gen, "PACKAGE_ROOT", tmp_path)
    assert gen.main(["gen", "--check"]) == 0
    stub = proto_dir / "api_pb2_grpc.py"
    stub.write_text(stub.read_text().replace("/v1beta1.DevicePlugin/Allocate", "/v1beta1.DevicePlugin/Alocate"))
    assert gen.stale() == ["api_pb2_grpc.py"]
    assert gen.main(["gen", "--check"]) == 1
    assert gen.main(["gen"]) == 0  # make proto puts it right
    assert gen.stale() == []


# ---------------------------------------------------------------------------------------------- config


def write(tmp_path: Path, doc: Any) -> str:
    path = tmp_path / "device-plugin.yaml"
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    return str(path)


@pytest.mark.parametrize(
    ("doc", "field", "words"),
    [
        ({"resourceName": "gpu"}, "resourceName", "not an extended resource name"),
        ({"source": "nvml"}, "source", "unknown source 'nvml'"),
        ({"colour": "red"}, "(top level)", "unknown field(s) colour"),
        ({"fake": {"devices": -1}}, "fake.devices", "must be 0..1024"),
        ({"fake": {"health": [{"device": "x-0", "health": "Sick"}]}}, "fake.health[0].health", "Healthy, Unhealthy"),
        ({"fake": {"devices": 2, "numa": [0]}}, "fake.numa", "one NUMA node (0..1023) per device (2)"),
        ({"allocate": {"envVar": "A-B"}}, "allocate.envVar", "not an environment variable name"),
        ({"allocate": {"permissions": "rwx"}}, "allocate.permissions", "letters of rwm"),
        ({"allocate": {"deviceNodes": ["/dev/x{minor}"]}}, "allocate.deviceNodes[0]", "{index}, {id}, {accel}"),
        ({"allocate": {"deviceNodes": ["dev/accel{accel}"]}}, "allocate.deviceNodes", "must be an absolute path"),
        ({"allocate": {"sharedDeviceNodes": ["qaic_ctl"]}}, "allocate.sharedDeviceNodes", "must be an absolute"),
        ({"allocate": {"sharedDeviceNodes": ["/dev/x{index}"]}}, "allocate.sharedDeviceNodes", "nothing is filled"),
        ({"allocate": {"cdiKind": "1vendor.com/gpu"}}, "allocate.cdiKind", "starts with a letter"),
        ({"allocate": {"cdiKind": "vendor.com/gpu-"}}, "allocate.cdiKind", "ends with a"),
        (
            {"source": "sysfs", "partitioning": {"mode": "mig", "model": "A100-40GB", "dynamic": False}},
            "partitioning.mode",
            "mig is advertise-only (source: fake)",
        ),
        (
            {"allocate": {"mounts": [{"hostPath": "rel", "containerPath": "/x"}]}},
            "allocate.mounts[0].hostPath",
            "absolute",
        ),
        ({"metrics": {"port": 70000}}, "metrics.port", "0..65535"),
        ({"healthIntervalSeconds": "5s"}, "healthIntervalSeconds", "must be int or float"),
    ],
)
def test_bad_config_names_file_and_field(tmp_path: Path, doc: dict[str, Any], field: str, words: str) -> None:
    path = write(tmp_path, doc)
    with pytest.raises(InputError) as info:
        plugin_config.load(path)
    assert info.value.source == path
    assert info.value.field == field
    assert words in info.value.message


def test_flags_override_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, {"resourceName": "a.com/x", "source": "fake", "sysfs": {"vendors": ["0x17cb"]}})
    cfg = plugin_config.load(path, {"resourceName": "b.com/y", "sysfs.root": "/host", "metrics.port": 0})
    assert (cfg.resource_name, cfg.source, cfg.sysfs.root, cfg.sysfs.vendors, cfg.metrics_port) == (
        "b.com/y",
        "fake",
        "/host",
        (0x17CB,),
        0,
    )
    assert cfg.fake.id_prefix == "y"


def test_fake_health_schedule_must_name_a_device() -> None:
    cfg = plugin_config.parse(
        {"fake": {"devices": 2, "idPrefix": "q", "health": [{"device": "q-2", "health": "Unhealthy"}]}}
    )
    with pytest.raises(InputError) as info:
        FakeSource(cfg.fake)
    assert info.value.field == "fake.health[0].device" and "q-0, q-1" in info.value.message


@pytest.mark.parametrize(
    ("partitioning", "field", "words"),
    [
        ({"mode": "slices", "resource": "a.com/s", "units": 4}, "partitioning.mode", "cannot be advertised"),
        ({"mode": "mig", "model": "A100-40GB"}, "partitioning.dynamic", "set dynamic: false"),
        ({"mode": "mig", "model": "A100-40GB", "dynamic": False}, "partitioning.instances", "no MIG instances"),
        (
            {"mode": "mig", "model": "A100-40GB", "dynamic": False, "instances": {"gpu-0": ["3g.20gb@2"]}},
            "partitioning.instances.gpu-0",
            "cannot start at slice 2",
        ),
        ({"mode": "timeslicing", "replicas": 0}, "partitioning.replicas", "1..64"),
        (
            {"mode": "timeslicing", "replicas": 2, "devices": ["gpu-7"]},
            "partitioning.devices",
            "unknown device(s) gpu-7",
        ),
    ],
)
def test_bad_partitioning_names_the_field(partitioning: dict[str, Any], field: str, words: str) -> None:
    cfg = plugin_config.parse(
        {
            "resourceName": "nvidia.com/gpu",
            "source": "fake",
            "fake": {"devices": 2, "idPrefix": "gpu"},
            "partitioning": partitioning,
        },
        "cm.yaml",
    )
    with pytest.raises(InputError) as info:
        units_by_resource(cfg, FakeSource(cfg.fake).devices())
    assert (info.value.source, info.value.field) == ("cm.yaml", field)
    assert words in info.value.message


def test_a_replica_id_over_63_characters_is_refused() -> None:
    prefix = "x" * 60  # x...-0 fits in 63, x...-0::0 does not
    cfg = plugin_config.parse(
        {"fake": {"devices": 1, "idPrefix": prefix}, "partitioning": {"mode": "timeslicing", "replicas": 2}}, "cm.yaml"
    )
    with pytest.raises(InputError) as info:
        units_by_resource(cfg, FakeSource(cfg.fake).devices())
    assert info.value.field == "partitioning" and "longer than the kubelet's 63 characters" in info.value.message


def test_mig_instance_ids_are_not_cdi_device_names() -> None:
    """'@' is not allowed in a CDI device name: with a cdiKind, MIG instances would be refused by the runtime."""
    doc = {
        "resourceName": "nvidia.com/gpu",
        "source": "fake",
        "fake": {"devices": 1, "idPrefix": "gpu"},
        "partitioning": {
            "mode": "mig",
            "model": "A100-40GB",
            "strategy": "mixed",
            "dynamic": False,
            "instances": {"gpu-0": ["1g.5gb@0"]},
        },
        "allocate": {"envVar": "NVIDIA_VISIBLE_DEVICES", "cdiKind": "nvidia.com/gpu"},
    }
    cfg = plugin_config.parse(doc, "cm.yaml")
    with pytest.raises(InputError) as info:
        units_by_resource(cfg, FakeSource(cfg.fake).devices())
    assert (info.value.source, info.value.field) == ("cm.yaml", "allocate.cdiKind")
    assert "nvidia.com/gpu=gpu-0:1g.5gb@0 is not a CDI device name" in info.value.message
    # PCI addresses and the plugin's own IDs are CDI names, so whole devices and replicas keep theirs.
    assert all(plugin_config.CDI_DEVICE_NAME_RE.match(n) for n in ("0000:01:00.0", "qaic-3", "gpu-0"))
    del doc["allocate"]["cdiKind"]
    cfg = plugin_config.parse(doc, "cm.yaml")
    assert [u.id for u in units_by_resource(cfg, FakeSource(cfg.fake).devices())["nvidia.com/mig-1g.5gb"]] == [
        "gpu-0:1g.5gb@0"
    ]


def test_mig_single_strategy_advertises_instances_as_the_gpu_resource() -> None:
    cfg = plugin_config.parse(
        {
            "resourceName": "nvidia.com/gpu",
            "source": "fake",
            "fake": {"devices": 1, "idPrefix": "gpu"},
            "partitioning": {
                "mode": "mig",
                "model": "A100-40GB",
                "strategy": "single",
                "profile": "1g.5gb",
                "dynamic": False,
                "instances": {"gpu-0": ["1g.5gb@0", "1g.5gb@1"]},
            },
        }
    )
    units = units_by_resource(cfg, FakeSource(cfg.fake).devices())
    assert {r: [u.id for u in us] for r, us in units.items()} == {
        "nvidia.com/gpu": ["gpu-0:1g.5gb@0", "gpu-0:1g.5gb@1"]
    }


# ---------------------------------------------------------------------------------------------- sources


def test_fake_source_places_devices_on_numa_nodes_and_switches() -> None:
    cfg = plugin_config.parse({"fake": {"devices": 6, "idPrefix": "a", "numaNodes": 2, "devicesPerSwitch": 2}})
    devices = FakeSource(cfg.fake).devices()
    assert [d.numa_node for d in devices] == [0, 0, 0, 1, 1, 1]
    from accelsched.topology.model import pcie_link

    assert pcie_link(devices[0].pci, devices[1].pci) == "PIX"  # one switch
    assert pcie_link(devices[1].pci, devices[2].pci) == "PHB"  # two switches under one root complex
    assert pcie_link(devices[2].pci, devices[3].pci) == "SYS"  # across the socket link


def test_sysfs_source_finds_accelerators_with_numa_and_filters_vendors(tmp_path: Path) -> None:
    sb.with_drivers(tmp_path, sb.qaic_box, "qaic")
    source = SysfsSource(plugin_config.SysfsConfig(root=str(tmp_path)))
    assert [(d.id, d.index, d.numa_node) for d in source.devices()] == [
        ("0000:01:00.0", 0, 0),
        ("0000:02:00.0", 1, 0),
        ("0000:81:00.0", 2, 1),
        ("0000:82:00.0", 3, 1),
    ]
    assert source.health() == dict.fromkeys(sb.QAIC_CARDS, True)
    nvidia_only = SysfsSource(plugin_config.SysfsConfig(root=str(tmp_path), vendors=(sb.NVIDIA,)))
    assert nvidia_only.devices() == []


def test_sysfs_health_follows_driver_binding_and_unplug(tmp_path: Path) -> None:
    b = sb.with_drivers(tmp_path, sb.qaic_box, "qaic")
    source = SysfsSource(plugin_config.SysfsConfig(root=str(tmp_path)))
    b.unbind("0000:02:00.0")
    b.unplug("0000:81:00.0")
    assert source.health() == {"0000:01:00.0": True, "0000:02:00.0": False, "0000:81:00.0": False, "0000:82:00.0": True}
    b.bind("0000:02:00.0", "qaic")
    assert source.health()["0000:02:00.0"] is True
    unchecked = SysfsSource(plugin_config.SysfsConfig(root=str(tmp_path), require_driver=False))
    b.unbind("0000:02:00.0")
    assert unchecked.health()["0000:02:00.0"] is True


def test_sysfs_device_nodes_are_read_from_the_accel_and_drm_folders(tmp_path: Path) -> None:
    b = sb.with_drivers(tmp_path, sb.dgx_like, "nvidia")
    gpu = sb.DGX_GPUS[1]
    b.device_node(gpu, "drm", "card3", dev="226:3").device_node(gpu, "drm", "renderD131", dev="226:131")
    b.device_node(sb.DGX_GPUS[2], "accel", "accel5", dev="261:5")
    source = SysfsSource(plugin_config.SysfsConfig(root=str(tmp_path)))
    devices = {d.id: d for d in source.devices()}
    assert source.device_nodes(devices[gpu]) == {"card": 3, "render": 131}
    assert source.device_nodes(devices[sb.DGX_GPUS[2]]) == {"accel": 5}
    assert source.device_nodes(devices[sb.DGX_GPUS[0]]) == {}
    b.unplug(gpu)
    assert source.device_nodes(devices[gpu]) == {}


# ---------------------------------------------------------------------------------------------- CLI


@pytest.fixture
def socket_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="dp-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "accelsched.cli", "device-plugin", *args]


def test_cli_bad_config_exits_2_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, {"source": "fake", "fake": {"devices": 2, "numa": [0]}})
    result = CliRunner().invoke(main, ["device-plugin", "--config", path])
    assert result.exit_code == 2
    why = "must list one NUMA node (0..1023) per device (2), got [0]"
    assert result.stderr.strip().splitlines() == [f"accelsched: error: {path}: DevicePluginConfig: fake.numa: {why}"]


def test_cli_socket_dir_must_exist(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-kubelet-here")
    result = CliRunner().invoke(main, ["device-plugin", "--source", "fake", "--socket-dir", missing])
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"accelsched: error: (flags): DevicePluginConfig: socketDir: {missing} is not a dir"
    )


def test_cli_socket_path_too_long_exits_2_naming_the_field(socket_dir: str) -> None:
    resource = "a" * 40 + ".example.com/" + "b" * 60
    result = CliRunner().invoke(
        main, ["device-plugin", "--source", "fake", "--resource-name", resource, "--socket-dir", socket_dir]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("accelsched: error: (flags): DevicePluginConfig: resourceName: socket path ")
    assert "a unix socket path holds at most 107" in result.stderr


@pytest.mark.integration  # a real process (about 3 s, most of it importing): SIGTERM and socket clean-up
def test_cli_serves_registers_and_stops_on_sigterm(tmp_path: Path, socket_dir: str) -> None:
    kubelet = KubeletPeer(socket_dir).start()
    path = write(tmp_path, {"fake": {"devices": 3}, "watchIntervalSeconds": 0.05})
    proc = subprocess.Popen(
        cli(
            *("--config", path, "--source", "fake", "--resource-name", "example.com/accel"),
            *("--socket-dir", socket_dir, "--metrics-address", "127.0.0.1", "--metrics-port", "0"),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        request = kubelet.next_registration(timeout=30)
        assert (request.resource_name, request.endpoint) == ("example.com/accel", "accelsched-example.com_accel.sock")
        assert kubelet.next_endpoint().next_list() == dict.fromkeys(["accel-0", "accel-1", "accel-2"], "Healthy")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "registered example.com/accel with the kubelet" in err
        assert not os.path.exists(os.path.join(socket_dir, request.endpoint))
    finally:
        if proc.poll() is None:
            proc.kill()
        kubelet.stop()


# ---------------------------------------------------------------------------------------------- deploy

REPO = Path(__file__).resolve().parents[1]


def test_shipped_daemonset_runs_the_plugin_with_its_configmap() -> None:
    docs = list(yaml.safe_load_all((REPO / "deploy" / "device-plugin-daemonset.yaml").read_text()))
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    cfg = plugin_config.parse(yaml.safe_load(cm["data"]["config.yaml"]), "deploy/device-plugin-daemonset.yaml")
    assert (cfg.resource_name, cfg.source, cfg.socket_dir) == (
        "qualcomm.com/ai-accelerator",
        "sysfs",
        plugin_config.KUBELET_DEVICE_PLUGIN_DIR,
    )
    # The node the qaic driver made for each card, read from sysfs, not the card's place in the plugin's list.
    assert cfg.allocate.device_nodes == ("/dev/accel/accel{accel}",)
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"][:2] == ["accelsched", "device-plugin"]
    config_path = container["command"][container["command"].index("--config") + 1]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts[os.path.dirname(config_path)]]["configMap"]["name"] == cm["metadata"]["name"]
    assert os.path.basename(config_path) in cm["data"]
    assert volumes[mounts[cfg.socket_dir]]["hostPath"]["path"] == cfg.socket_dir
    assert volumes[mounts[f"{cfg.sysfs.root}/sys"]]["hostPath"]["path"] == "/sys"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["ports"][0]["containerPort"] == cfg.metrics_port
    # The image the DaemonSet names is built from the Dockerfile at the repository root.
    assert "pip install" in (REPO / "Dockerfile").read_text()


@pytest.mark.integration  # about 10 s of RPCs: the figures command runs end to end
def test_device_plugin_figures_command_prints_every_figure() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.device_plugin"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    for row in ("Allocate, 2 devices, 1 client", "32 concurrent clients", "8 of 64 (greedy)", "ListAndWatch update"):
        assert row in result.stdout
