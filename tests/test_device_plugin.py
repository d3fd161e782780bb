"""The device plugin over real unix-socket gRPC, against a kubelet-side peer (tests/kubelet_peer.py).

Each test gets its own device-plugins folder. Health flaps are driven by a manual clock and one explicit health
step (``refresh``), so nothing here sleeps and hopes; every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
import sysfs_builder as sb
from kubelet_peer import WAIT, Endpoint, KubeletPeer

from accelsched.deviceplugin import config as plugin_config
from accelsched.deviceplugin import registration
from accelsched.deviceplugin.plugin import DevicePluginManager
from accelsched.deviceplugin.proto import api_pb2 as pb
from accelsched.deviceplugin.proto import api_pb2_grpc as pb_grpc
from accelsched.errors import InputError

RESOURCE = "qualcomm.com/ai-accelerator"
QAIC = [f"qaic-{i}" for i in range(8)]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def socket_dir() -> Iterator[str]:
    # Short path: a unix socket path must fit in 108 bytes, pytest's tmp_path may not.
    path = tempfile.mkdtemp(prefix="dp-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def peer(socket_dir: str) -> Iterator[KubeletPeer]:
    kubelet = KubeletPeer(socket_dir).start()
    yield kubelet
    kubelet.stop()


def fake_config(socket_dir: str, **extra: Any) -> plugin_config.PluginConfig:
    doc: dict[str, Any] = {
        "resourceName": RESOURCE,
        "source": "fake",
        "socketDir": socket_dir,
        "healthIntervalSeconds": 3600,  # the tests take health steps themselves
        "watchIntervalSeconds": 0.02,
        "fake": {
            "devices": 8,
            "idPrefix": "qaic",
            "numaNodes": 2,
            "devicesPerSwitch": 2,
            "health": [
                {"afterSeconds": 10, "device": "qaic-1", "health": "Unhealthy"},
                {"afterSeconds": 20, "device": "qaic-1", "health": "Healthy"},
            ],
        },
        "allocate": {
            "envVar": "QAIC_VISIBLE_DEVICES",
            "deviceNodes": ["/dev/accel/accel{index}"],
            "sharedDeviceNodes": ["/dev/qaic_ctl"],
            "mounts": [{"hostPath": "/opt/qti-aic", "containerPath": "/opt/qti-aic", "readOnly": True}],
            "cdiKind": "qualcomm.com/accel",
        },
        "metrics": {"enabled": False},  # the HTTP tests turn it on
    }
    doc.update(extra)
    return plugin_config.parse(doc, "test-config.yaml")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def plugin(socket_dir: str, peer: KubeletPeer, clock: Clock) -> Iterator[DevicePluginManager]:
    manager = DevicePluginManager(fake_config(socket_dir), clock=clock)
    manager.start()
    yield manager
    manager.stop()


def allocate(ep: Endpoint, *containers: list[str]) -> pb.AllocateResponse:
    request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=c) for c in containers])
    return ep.stub.Allocate(request, timeout=WAIT)


def preferred(ep: Endpoint, available: list[str], size: int, must: list[str] = ()) -> list[str]:  # type: ignore[assignment]
    request = pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=available, must_include_deviceIDs=list(must), allocation_size=size
            )
        ]
    )
    return list(ep.stub.GetPreferredAllocation(request, timeout=WAIT).container_responses[0].deviceIDs)


def rpc_error(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def http_get(manager: DevicePluginManager, path: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{manager.http.port}{path}"  # type: ignore[union-attr]
    try:
        with urllib.request.urlopen(url, timeout=WAIT) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def until(check: Callable[[], bool]) -> bool:
    """True once ``check`` holds, False after WAIT seconds: for state the plugin sets just after an RPC returns
    (the kubelet may already have dialled back before the plugin counts its registration)."""
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def metric(manager: DevicePluginManager, name: str, **labels: str) -> float | None:
    return manager.metrics.registry.get_sample_value(name, labels)


# ---------------------------------------------------------------------------------------------- registration


def test_registers_with_the_kubelet_fields_it_checks(plugin: DevicePluginManager, peer: KubeletPeer) -> None:
    request = peer.next_registration()
    assert request.version == "v1beta1"
    assert request.resource_name == RESOURCE
    assert request.options.get_preferred_allocation_available is True
    assert request.options.pre_start_required is False
    # The endpoint is a file name relative to the folder, and the plugin serves there.
    assert "/" not in request.endpoint
    assert os.path.exists(os.path.join(peer.socket_dir, request.endpoint))
    ep = peer.next_endpoint()
    assert ep.options.get_preferred_allocation_available is True
    assert until(lambda: metric(plugin, "accelsched_device_plugin_registrations_total", resource=RESOURCE) == 1)


def test_list_and_watch_sends_the_full_list_with_numa_topology(plugin: DevicePluginManager, peer: KubeletPeer) -> None:
    ep = peer.next_endpoint()
    response = ep.lists.get(timeout=WAIT)
    assert [d.ID for d in response.devices] == QAIC
    assert {d.health for d in response.devices} == {"Healthy"}
    numa = {d.ID: [n.ID for n in d.topology.nodes] for d in response.devices}
    assert numa == {f"qaic-{i}": [i // 4] for i in range(8)}


def test_list_and_watch_reports_both_edges_of_a_health_flap(
    plugin: DevicePluginManager, peer: KubeletPeer, clock: Clock
) -> None:
    ep = peer.next_endpoint()
    assert ep.next_list()["qaic-1"] == "Healthy"
    # Both steps are taken before the stream is read: neither may be merged away.
    clock.now = 10
    assert plugin.refresh() == ["qaic-1"]
    clock.now = 20
    assert plugin.refresh() == ["qaic-1"]
    assert plugin.refresh() == []  # no change, nothing sent
    down, up = ep.next_list(), ep.next_list()
    assert down == {**dict.fromkeys(QAIC, "Healthy"), "qaic-1": "Unhealthy"}
    assert up == dict.fromkeys(QAIC, "Healthy")
    plugin.stop()  # ends the stream: once the kubelet side saw it end, every list the plugin sent is in ep.lists
    assert ep.ended.wait(WAIT)
    assert ep.lists.empty()  # nothing for the unchanged step


def test_unhealthy_device_is_refused_by_allocate_and_counted(
    plugin: DevicePluginManager, peer: KubeletPeer, clock: Clock
) -> None:
    ep = peer.next_endpoint()
    clock.now = 10
    plugin.refresh()
    assert metric(plugin, "accelsched_device_plugin_devices", resource=RESOURCE, health="Unhealthy") == 1
    assert metric(plugin, "accelsched_device_plugin_devices", resource=RESOURCE, health="Healthy") == 7
    err = rpc_error(lambda: allocate(ep, ["qaic-0", "qaic-1"]))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "unhealthy device(s): qaic-1" in err.details()
    clock.now = 20
    plugin.refresh()
    assert allocate(ep, ["qaic-0", "qaic-1"]).container_responses[0].envs["QAIC_VISIBLE_DEVICES"] == "qaic-0,qaic-1"


# ---------------------------------------------------------------------------------------------- Allocate


def test_allocate_returns_env_device_nodes_mounts_and_cdi_names(plugin: DevicePluginManager, peer: KubeletPeer) -> None:
    ep = peer.next_endpoint()
    response = allocate(ep, ["qaic-2", "qaic-5"], ["qaic-7"])
    first, second = response.container_responses
    assert dict(first.envs) == {"QAIC_VISIBLE_DEVICES": "qaic-2,qaic-5"}
    assert [(d.host_path, d.container_path, d.permissions) for d in first.devices] == [
        ("/dev/accel/accel2", "/dev/accel/accel2", "rw"),
        ("/dev/accel/accel5", "/dev/accel/accel5", "rw"),
        ("/dev/qaic_ctl", "/dev/qaic_ctl", "rw"),
    ]
    assert [(m.host_path, m.container_path, m.read_only) for m in first.mounts] == [
        ("/opt/qti-aic", "/opt/qti-aic", True)
    ]
    assert [c.name for c in first.cdi_devices] == ["qualcomm.com/accel=qaic-2", "qualcomm.com/accel=qaic-5"]
    assert dict(second.envs) == {"QAIC_VISIBLE_DEVICES": "qaic-7"}
    assert metric(plugin, "accelsched_device_plugin_allocations_total", resource=RESOURCE) == 2


@pytest.mark.parametrize(
    ("containers", "code", "words"),
    [
        ([["qaic-0", "gpu-9"]], grpc.StatusCode.NOT_FOUND, "unknown device ID(s) 'gpu-9'"),
        ([[]], grpc.StatusCode.INVALID_ARGUMENT, "lists no devices_ids"),
        ([], grpc.StatusCode.INVALID_ARGUMENT, "no container_requests"),
        ([["qaic-0", "qaic-0"]], grpc.StatusCode.INVALID_ARGUMENT, "listed twice"),
        # Thousands of unknown IDs: a few are named, so the status still fits in the trailers (8 KiB).
        ([["x" * 10000, *(f"u{i}" for i in range(3000))]], grpc.StatusCode.NOT_FOUND, "'u3' and 2996 more"),
    ],
)
def test_bad_allocate_is_a_grpc_error_and_the_plugin_keeps_serving(
    plugin: DevicePluginManager, peer: KubeletPeer, containers: list[list[str]], code: grpc.StatusCode, words: str
) -> None:
    ep = peer.next_endpoint()
    err = rpc_error(lambda: allocate(ep, *containers))
    assert err.code() == code
    assert words in err.details() and RESOURCE in err.details()
    assert metric(plugin, "accelsched_device_plugin_allocation_errors_total", resource=RESOURCE, code=code.name) == 1
    assert allocate(ep, ["qaic-3"]).container_responses[0].envs["QAIC_VISIBLE_DEVICES"] == "qaic-3"


def test_one_hundred_concurrent_allocates(plugin: DevicePluginManager, peer: KubeletPeer) -> None:
    ep = peer.next_endpoint()
    asks = [[QAIC[i % 8], QAIC[(i * 3 + 1) % 8]] if i % 8 != (i * 3 + 1) % 8 else [QAIC[i % 8]] for i in range(100)]
    with ThreadPoolExecutor(max_workers=32) as pool:
        answers = list(pool.map(lambda ids: allocate(ep, ids), asks))
    for ids, answer in zip(asks, answers, strict=True):
        assert answer.container_responses[0].envs["QAIC_VISIBLE_DEVICES"] == ",".join(ids)
    assert metric(plugin, "accelsched_device_plugin_allocations_total", resource=RESOURCE) == 100


# ---------------------------------------------------------------------------------------------- GetPreferredAllocation


def test_preferred_allocation_keeps_a_pair_behind_one_switch(plugin: DevicePluginManager, peer: KubeletPeer) -> None:
    ep = peer.next_endpoint()
    # qaic-2k and qaic-2k+1 share a switch (PIX); NUMA 0 holds qaic-0..3.
    assert preferred(ep, ["qaic-0", "qaic-2", "qaic-3", "qaic-5"], 2) == ["qaic-2", "qaic-3"]
    # must_include: the rest sits beside what the kubelet already decided.
    assert preferred(ep, QAIC, 2, must=["qaic-5"]) == ["qaic-4", "qaic-5"]
    assert preferred(ep, QAIC, 3, must=["qaic-6", "qaic-0"]) == ["qaic-0", "qaic-1", "qaic-6"]
    # Four stay on one NUMA node rather than crossing the socket link.
    assert preferred(ep, ["qaic-1", "qaic-2", "qaic-3", "qaic-4", "qaic-5", "qaic-6", "qaic-7"], 4) == QAIC[4:8]
    # Ties go to packing beside devices in use: qaic-0 is taken, so its switch partner qaic-1 is used first.
    assert preferred(ep, ["qaic-1", "qaic-4", "qaic-5"], 1) == ["qaic-1"]


def test_preferred_allocation_does_not_pack_beside_an_unhealthy_device(
    plugin: DevicePluginManager, peer: KubeletPeer, clock: Clock
) -> None:
    ep = peer.next_endpoint()
    # qaic-1 and qaic-4 are missing from available: both in use, so qaic-0 and qaic-5 tie; the first wins.
    available = ["qaic-0", "qaic-2", "qaic-3", "qaic-5", "qaic-6", "qaic-7"]
    assert preferred(ep, available, 1) == ["qaic-0"]
    clock.now = 10
    assert plugin.refresh() == ["qaic-1"]
    # Now qaic-1 is missing because it is unhealthy, not because a container uses it: pack beside qaic-4 instead.
    assert preferred(ep, available, 1) == ["qaic-5"]


@pytest.mark.parametrize(
    ("available", "size", "must", "code", "words"),
    [
        (["qaic-0", "qaic-1"], 3, [], grpc.StatusCode.INVALID_ARGUMENT, "allocation_size 3 is more than the 2"),
        (["qaic-0", "nope"], 1, [], grpc.StatusCode.NOT_FOUND, "unknown device ID(s) 'nope'"),
        (["qaic-0", "qaic-1"], 1, ["qaic-2"], grpc.StatusCode.INVALID_ARGUMENT, "not available: qaic-2"),
        (["qaic-0", "qaic-1"], 1, ["qaic-0", "qaic-1"], grpc.StatusCode.INVALID_ARGUMENT, "do not fit"),
        (["qaic-0"], 0, [], grpc.StatusCode.INVALID_ARGUMENT, "allocation_size must be > 0"),
    ],
)
def test_bad_preferred_allocation_is_a_grpc_error_and_the_plugin_keeps_serving(
    plugin: DevicePluginManager,
    peer: KubeletPeer,
    available: list[str],
    size: int,
    must: list[str],
    code: grpc.StatusCode,
    words: str,
) -> None:
    ep = peer.next_endpoint()
    err = rpc_error(lambda: preferred(ep, available, size, must))
    assert err.code() == code
    assert words in err.details()
    assert preferred(ep, ["qaic-0", "qaic-1"], 1) == ["qaic-0"]


# ---------------------------------------------------------------------------------------------- restarts


def test_registers_again_after_the_kubelet_restarts(plugin: DevicePluginManager, peer: KubeletPeer) -> None:
    first = peer.next_registration()
    peer.next_endpoint()
    peer.restart()  # every socket in the folder is deleted, kubelet.sock is new
    again = peer.next_registration()
    assert (again.endpoint, again.resource_name) == (first.endpoint, first.resource_name)
    ep = peer.next_endpoint()
    assert ep.next_list() == dict.fromkeys(QAIC, "Healthy")
    assert allocate(ep, ["qaic-4"]).container_responses[0].envs["QAIC_VISIBLE_DEVICES"] == "qaic-4"
    assert until(lambda: metric(plugin, "accelsched_device_plugin_registrations_total", resource=RESOURCE) == 2)
    assert plugin.ready() == (True, "ok")


def test_plugin_restart_while_the_kubelet_stays_up(socket_dir: str, peer: KubeletPeer, clock: Clock) -> None:
    first = DevicePluginManager(fake_config(socket_dir), clock=clock)
    first.start()
    peer.next_registration()
    old = peer.next_endpoint()
    assert old.next_list()["qaic-0"] == "Healthy"
    first.stop()
    assert not os.path.exists(os.path.join(socket_dir, first.servers[0].endpoint))  # cleaned up
    second = DevicePluginManager(fake_config(socket_dir), clock=clock)
    second.start()
    try:
        assert peer.next_registration().resource_name == RESOURCE
        ep = peer.next_endpoint()
        assert ep.next_list() == dict.fromkeys(QAIC, "Healthy")
        assert allocate(ep, ["qaic-0"]).container_responses[0].envs["QAIC_VISIBLE_DEVICES"] == "qaic-0"
    finally:
        second.stop()


def test_waits_for_the_kubelet_and_readyz_says_why(socket_dir: str, clock: Clock) -> None:
    config = fake_config(socket_dir, metrics={"address": "127.0.0.1", "port": 0})
    manager = DevicePluginManager(config, clock=clock)
    manager.start()
    kubelet = KubeletPeer(socket_dir)
    try:
        assert http_get(manager, "/healthz") == (200, "ok")  # the process serves
        code, body = http_get(manager, "/readyz")
        assert (code, body) == (503, f"{RESOURCE}: not registered with the kubelet")
        kubelet.start()  # the watch loop sees kubelet.sock appear and registers
        assert kubelet.next_registration().resource_name == RESOURCE
        kubelet.next_endpoint()
        assert until(lambda: http_get(manager, "/readyz") == (200, "ok"))
        code, body = http_get(manager, "/metrics")
        assert code == 200
        assert f'accelsched_device_plugin_devices{{health="Healthy",resource="{RESOURCE}"}} 8.0' in body
        assert f'accelsched_device_plugin_registrations_total{{resource="{RESOURCE}"}} 1.0' in body
    finally:
        manager.stop()
        kubelet.stop()


def test_registers_again_when_only_kubelet_sock_is_new(plugin: DevicePluginManager, peer: KubeletPeer) -> None:
    """A kubelet that restarts without deleting the plugins' sockets: only kubelet.sock's identity tells."""
    first = peer.next_registration()
    peer.next_endpoint()
    ours = os.stat(os.path.join(peer.socket_dir, first.endpoint)).st_ino
    peer.replace_socket()  # kubelet.sock is new and never missing; our socket is untouched
    assert peer.next_registration().resource_name == RESOURCE
    ep = peer.next_endpoint()
    assert ep.next_list() == dict.fromkeys(QAIC, "Healthy")
    assert os.stat(os.path.join(peer.socket_dir, first.endpoint)).st_ino == ours  # registered, not re-served
    assert until(lambda: metric(plugin, "accelsched_device_plugin_registrations_total", resource=RESOURCE) == 2)


def test_registers_again_when_the_kubelet_drops_it_without_a_word(
    plugin: DevicePluginManager, peer: KubeletPeer
) -> None:
    """The kubelet disconnects a plugin's client (its runClient after another stream on the resource ended): the
    plugin, registered but watched by nobody, registers again after a grace period."""
    peer.next_registration()
    first = peer.next_endpoint()
    assert first.next_list() == dict.fromkeys(QAIC, "Healthy")
    peer.drop(RESOURCE)
    assert first.ended.wait(WAIT)
    assert peer.next_registration().resource_name == RESOURCE
    again = peer.next_endpoint()
    assert again.next_list() == dict.fromkeys(QAIC, "Healthy")
    assert until(lambda: metric(plugin, "accelsched_device_plugin_registrations_total", resource=RESOURCE) == 2)
    assert plugin.servers[0].service.streams == 1


def test_the_kubelet_peer_fails_register_when_it_cannot_dial_the_plugin(socket_dir: str) -> None:
    """As the kubelet's connectClient: Register answers only after dialling back, and fails if it cannot."""
    kubelet = KubeletPeer(socket_dir, dial_timeout=0.2).start()
    try:
        err = rpc_error(lambda: registration.register(socket_dir, "nobody-serves-this.sock", RESOURCE))
        assert err.code() == grpc.StatusCode.UNKNOWN
        assert "failed to dial device plugin" in err.details()
        assert kubelet.next_registration().endpoint == "nobody-serves-this.sock"
    finally:
        kubelet.stop()


def test_two_instances_on_one_folder_settle_and_the_newest_serves(
    socket_dir: str, peer: KubeletPeer, clock: Clock
) -> None:
    """A second instance (a surge rollout, a stray process) takes the socket over; the first stands down instead
    of taking it back, so the two never trade the socket and registrations settle.

    The kubelet may answer the new instance's Register with its old client still connected at that path (no new
    connection); when the old instance stops serving, the kubelet drops the client, and the new instance, watched
    by nobody, registers once more. So two or three registrations, then none."""
    old = DevicePluginManager(fake_config(socket_dir), clock=clock)
    old.start()
    new = DevicePluginManager(fake_config(socket_dir), clock=clock)
    try:
        peer.next_endpoint()
        new.start()
        ep = peer.next_endpoint()
        path = new.servers[0].path
        inode = os.stat(path).st_ino
        assert until(lambda: old.servers[0].superseded)
        settled = peer.registrations.qsize()
        assert settled in (2, 3)
        for _ in range(5):  # beside both watch loops, explicit steps: none may serve or register again
            old.check_kubelet()
            new.check_kubelet()
        assert peer.registrations.qsize() == settled
        assert os.stat(path).st_ino == inode
        assert new.ready() == (True, "ok")
        assert old.ready() == (False, f"{RESOURCE}: another instance took over its socket {path}")
        assert ep.next_list() == dict.fromkeys(QAIC, "Healthy")
        assert allocate(ep, ["qaic-2"]).container_responses[0].envs["QAIC_VISIBLE_DEVICES"] == "qaic-2"
        old.stop()
        assert os.stat(path).st_ino == inode  # stopping the old one leaves the new one's socket in place
        assert allocate(ep, ["qaic-3"]).container_responses[0].envs["QAIC_VISIBLE_DEVICES"] == "qaic-3"
    finally:
        old.stop()
        new.stop()
    assert not os.path.exists(path)


def test_a_dead_kubelets_socket_is_refused_at_once_and_readyz_says_so(socket_dir: str, clock: Clock) -> None:
    """kubelet.sock left by a dead kubelet: Register fails with UNAVAILABLE at once (no wait_for_ready, which
    would hold every step until its deadline and read DEADLINE_EXCEEDED)."""
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(os.path.join(socket_dir, "kubelet.sock"))  # bound, never listening
    manager = DevicePluginManager(fake_config(socket_dir, watchIntervalSeconds=3600), clock=clock)
    try:
        manager.start()
        ok, why = manager.ready()
        assert not ok
        assert why.startswith(f"{RESOURCE}: not registered with the kubelet (UNAVAILABLE: ")
    finally:
        manager.stop()
        stale.close()


class HungKubelet(pb_grpc.RegistrationServicer):
    """Accepts Register and never answers (a wedged kubelet)."""

    def __init__(self) -> None:
        self.called = threading.Event()
        self.cancelled = threading.Event()

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        self.called.set()
        while context.is_active():
            time.sleep(0.01)
        self.cancelled.set()
        context.abort(grpc.StatusCode.CANCELLED, "gone")


def test_stop_cancels_a_register_the_kubelet_never_answers(socket_dir: str, clock: Clock) -> None:
    hung = HungKubelet()
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_RegistrationServicer_to_server(hung, server)
    server.add_insecure_port(f"unix://{os.path.join(socket_dir, 'kubelet.sock')}")
    server.start()
    manager = DevicePluginManager(fake_config(socket_dir), clock=clock)
    starting = threading.Thread(target=manager.start, daemon=True)
    try:
        starting.start()
        assert hung.called.wait(WAIT)
        stopping = threading.Thread(target=manager.stop, daemon=True)
        stopping.start()
        # Generous: the call is cancelled within a poll (50 ms); holding on to it would take its whole deadline.
        stopping.join(3)
        assert not stopping.is_alive()
        assert hung.cancelled.wait(WAIT)  # the kubelet saw the call cancelled, not timed out later
        starting.join(WAIT)
        assert manager.registered == {RESOURCE: False}
    finally:
        server.stop(0).wait()


def test_a_refused_register_is_retried_with_capped_exponential_backoff(
    socket_dir: str, peer: KubeletPeer, clock: Clock
) -> None:
    peer.refuse = "no thanks"
    manager = DevicePluginManager(fake_config(socket_dir, watchIntervalSeconds=3600), clock=clock)
    retry = Clock()
    manager.backoff = registration.Backoff(1.0, cap=8.0, clock=retry)
    attempts_at = []
    try:
        manager.start()  # attempt at t=0
        for t in range(0, 40):
            retry.now = t
            manager.check_kubelet()
            manager.check_kubelet()  # a second step at the same moment never retries early
            while not peer.registrations.empty():
                peer.registrations.get_nowait()
                attempts_at.append(t)
        # The start's attempt at t=0, then 1, 2, 4, 8 seconds apart, and 8 (the cap) from there on.
        assert attempts_at == [0, 1, 3, 7, 15, 23, 31, 39]
        assert manager.ready() == (False, f"{RESOURCE}: not registered with the kubelet (UNKNOWN: no thanks)")
        peer.refuse = None
        retry.now = 100
        manager.check_kubelet()
        assert manager.ready() == (True, "ok")
        peer.replace_socket()  # a new kubelet: registered again at once, whatever the backoff said
        assert until(lambda: metric(manager, "accelsched_device_plugin_registrations_total", resource=RESOURCE) == 1)
    finally:
        manager.stop()


def test_a_socket_path_over_the_unix_limit_is_a_config_error(socket_dir: str) -> None:
    resource = "a" * 40 + ".example.com/" + "b" * 60
    with pytest.raises(InputError) as info:
        DevicePluginManager(fake_config(socket_dir, resourceName=resource))
    assert (info.value.source, info.value.field) == ("test-config.yaml", "resourceName")
    assert "a unix socket path holds at most 107: shorten resourceName" in info.value.message
    deep = os.path.join(socket_dir, "d" * 90)
    with pytest.raises(InputError) as info:
        DevicePluginManager(fake_config(deep))
    assert info.value.field == "socketDir"


# ---------------------------------------------------------------------------------------------- partitions


def test_time_slicing_replicas_are_advertised_and_shown_once(socket_dir: str, peer: KubeletPeer, clock: Clock) -> None:
    config = fake_config(socket_dir, partitioning={"mode": "timeslicing", "replicas": 2})
    manager = DevicePluginManager(config, clock=clock)
    manager.start()
    try:
        ep = peer.next_endpoint()
        devices = ep.next_list()
        assert list(devices) == [f"qaic-{i}::{n}" for i in range(8) for n in range(2)]
        both = allocate(ep, ["qaic-3::0", "qaic-3::1"]).container_responses[0]
        assert both.envs["QAIC_VISIBLE_DEVICES"] == "qaic-3"
        assert [d.host_path for d in both.devices] == ["/dev/accel/accel3", "/dev/qaic_ctl"]
        # A replica is as healthy as its device.
        clock.now = 10
        manager.refresh()
        sick = ep.next_list()
        assert [i for i, h in sick.items() if h == "Unhealthy"] == ["qaic-1::0", "qaic-1::1"]
    finally:
        manager.stop()


def test_mig_mixed_strategy_registers_one_resource_per_profile(
    socket_dir: str, peer: KubeletPeer, clock: Clock
) -> None:
    config = fake_config(
        socket_dir,
        resourceName="nvidia.com/gpu",
        fake={"devices": 2, "idPrefix": "gpu"},
        partitioning={
            "mode": "mig",
            "model": "A100-40GB",
            "strategy": "mixed",
            "dynamic": False,
            "instances": {"gpu-0": ["3g.20gb@4", "2g.10gb@2", "1g.5gb@0", "1g.5gb@1"], "gpu-1": ["7g.40gb@0"]},
        },
        allocate={"envVar": "NVIDIA_VISIBLE_DEVICES"},
    )
    manager = DevicePluginManager(config, clock=clock)
    manager.start()
    try:
        names = sorted(peer.next_registration().resource_name for _ in range(4))
        assert names == [
            "nvidia.com/mig-1g.5gb",
            "nvidia.com/mig-2g.10gb",
            "nvidia.com/mig-3g.20gb",
            "nvidia.com/mig-7g.40gb",
        ]
        endpoints = [peer.next_endpoint() for _ in range(4)]
        one_g = next(ep for ep in endpoints if ep.request.resource_name == "nvidia.com/mig-1g.5gb")
        assert one_g.next_list() == {"gpu-0:1g.5gb@0": "Healthy", "gpu-0:1g.5gb@1": "Healthy"}
        answer = allocate(one_g, ["gpu-0:1g.5gb@1"]).container_responses[0]
        assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == "gpu-0:1g.5gb@1"
        err = rpc_error(lambda: allocate(one_g, ["gpu-1:7g.40gb@0"]))  # another resource's ID
        assert err.code() == grpc.StatusCode.NOT_FOUND
    finally:
        manager.stop()


# ---------------------------------------------------------------------------------------------- real /sys trees


def test_sysfs_source_over_grpc_topology_aware_choice_and_driver_health(
    tmp_path: Path, socket_dir: str, peer: KubeletPeer
) -> None:
    machine = sb.with_drivers(tmp_path, sb.dgx_like, "nvidia")
    config = plugin_config.parse(
        {
            "resourceName": "nvidia.com/gpu",
            "source": "sysfs",
            "sysfs": {"root": str(tmp_path), "vendors": ["0x10de"]},
            "socketDir": socket_dir,
            "healthIntervalSeconds": 3600,
            "allocate": {"envVar": "NVIDIA_VISIBLE_DEVICES", "deviceNodes": ["/dev/nvidia{index}"]},
            "metrics": {"enabled": False},
        }
    )
    manager = DevicePluginManager(config)
    manager.start()
    try:
        ep = peer.next_endpoint()
        listed = ep.lists.get(timeout=WAIT)
        assert [(d.ID, [n.ID for n in d.topology.nodes]) for d in listed.devices] == [
            (gpu, [0 if i < 4 else 1]) for i, gpu in enumerate(sb.DGX_GPUS)
        ]
        gpus = sb.DGX_GPUS
        # The scheduler's allocator: the partner behind the same switch, then the socket-0 switch tree.
        assert preferred(ep, gpus, 2, must=[gpus[2]]) == [gpus[2], gpus[3]]
        assert preferred(ep, gpus, 4) == gpus[:4]
        # Socket 1's two switches hang off different root complexes (NODE), so a pair stays on one switch.
        assert preferred(ep, gpus[4:], 2, must=[gpus[6]]) == [gpus[6], gpus[7]]
        answer = allocate(ep, [gpus[5]]).container_responses[0]
        assert (answer.envs["NVIDIA_VISIBLE_DEVICES"], [d.host_path for d in answer.devices]) == (
            gpus[5],
            ["/dev/nvidia5"],
        )
        machine.unbind(gpus[5])  # the driver lets go of the card
        assert manager.refresh() == [gpus[5]]
        assert ep.next_list()[gpus[5]] == "Unhealthy"
        assert rpc_error(lambda: allocate(ep, [gpus[5]])).code() == grpc.StatusCode.FAILED_PRECONDITION
        machine.bind(gpus[5], "nvidia")
        assert manager.refresh() == [gpus[5]]
        assert ep.next_list()[gpus[5]] == "Healthy"
    finally:
        manager.stop()


def test_device_nodes_are_the_numbers_the_driver_gave_read_from_sysfs(
    tmp_path: Path, socket_dir: str, peer: KubeletPeer
) -> None:
    machine = sb.with_drivers(tmp_path, sb.qaic_box, "qaic")
    cards = sb.QAIC_CARDS
    # The driver numbered the cards in its own probe order, not bus order; the last has no node yet.
    for bdf, n in zip(cards, (2, 0, 1), strict=False):
        machine.device_node(bdf, "accel", f"accel{n}", dev=f"261:{n}")
    config = plugin_config.parse(
        {
            "resourceName": RESOURCE,
            "source": "sysfs",
            "sysfs": {"root": str(tmp_path), "vendors": ["0x17cb"]},
            "socketDir": socket_dir,
            "healthIntervalSeconds": 3600,
            "allocate": {
                "envVar": "QAIC_VISIBLE_DEVICES",
                "deviceNodes": ["/dev/accel/accel{accel}"],
                "sharedDeviceNodes": ["/dev/qaic_ctl"],
            },
            "metrics": {"enabled": False},
        }
    )
    manager = DevicePluginManager(config)
    manager.start()
    try:
        ep = peer.next_endpoint()
        answer = allocate(ep, [cards[0], cards[1]]).container_responses[0]
        assert [d.host_path for d in answer.devices] == ["/dev/accel/accel2", "/dev/accel/accel0", "/dev/qaic_ctl"]
        err = rpc_error(lambda: allocate(ep, [cards[3]]))
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert f"device {cards[3]} has no accel* device node in sysfs" in err.details()
        machine.device_node(cards[3], "accel", "accel3", dev="261:3")  # read at Allocate time, not at start
        answer = allocate(ep, [cards[3]]).container_responses[0]
        assert [d.host_path for d in answer.devices] == ["/dev/accel/accel3", "/dev/qaic_ctl"]
    finally:
        manager.stop()
