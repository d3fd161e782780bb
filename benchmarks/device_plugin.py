"""``python -m benchmarks.device_plugin``: the device plugin's RPCs over a real unix socket, in figures.

A fake inventory (8 devices on 2 NUMA nodes in switch pairs, and a 64-device one for GetPreferredAllocation's greedy
path) is served exactly as in production; a client dials the socket like the kubelet. Printed: Allocate latency
(one client) and throughput (32 clients), GetPreferredAllocation latency, and how long a health change takes to
reach an open ListAndWatch stream. Nothing here is asserted: speed targets live in benchmarks, not in tests.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import grpc

from accelsched.deviceplugin import config as plugin_config
from accelsched.deviceplugin.config import HealthEvent
from accelsched.deviceplugin.plugin import DevicePluginManager
from accelsched.deviceplugin.proto import api_pb2 as pb
from accelsched.deviceplugin.proto import api_pb2_grpc as pb_grpc


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def timed(call: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        out.append(time.perf_counter() - t)
    return out


def pct(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(q * len(samples)))] * 1e3


def plugin(devices: int, socket_dir: str, clock: Clock, flaps: int = 0) -> DevicePluginManager:
    cfg = plugin_config.parse(
        {
            "resourceName": f"example.com/accel{devices}",
            "source": "fake",
            "socketDir": socket_dir,
            "healthIntervalSeconds": 3600,
            "fake": {"devices": devices, "idPrefix": "a", "numaNodes": 2, "devicesPerSwitch": 2},
            "allocate": {"deviceNodes": ["/dev/accel/accel{index}"]},
            "metrics": {"enabled": False},
        }
    )
    # One Unhealthy/Healthy edge per clock second, so each refresh is one change.
    cfg.fake.health = tuple(HealthEvent(k + 1, "a-1", k % 2 == 1) for k in range(flaps))
    manager = DevicePluginManager(cfg, clock=clock)
    manager.start()
    return manager


def main(argv: list[str] | None = None) -> None:
    args = argparse.ArgumentParser(description=__doc__).parse_args(argv)
    del args
    socket_dir = tempfile.mkdtemp(prefix="dp-bench-")
    clock = Clock()
    small, large = plugin(8, socket_dir, clock, flaps=200), plugin(64, socket_dir, Clock())
    rows: list[tuple[str, str]] = []
    try:
        stubs = {}
        for m in (small, large):
            channel = grpc.insecure_channel(f"unix://{m.servers[0].path}")
            stubs[m] = pb_grpc.DevicePluginStub(channel)
        stub = stubs[small]
        one = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["a-2", "a-3"])])
        stub.Allocate(one)  # warm the channel
        lat = timed(lambda: stub.Allocate(one), 2000)
        rows.append(("Allocate, 2 devices, 1 client", f"p50 {pct(lat, 0.5):.2f} ms, p99 {pct(lat, 0.99):.2f} ms"))
        n = 5000
        with ThreadPoolExecutor(max_workers=32) as pool:
            t = time.perf_counter()
            list(pool.map(lambda _: stub.Allocate(one), range(n)))
            rows.append(("Allocate, 32 concurrent clients", f"{n / (time.perf_counter() - t):,.0f} calls/s"))

        def prefer(s: pb_grpc.DevicePluginStub, ids: list[str], size: int) -> object:
            req = pb.ContainerPreferredAllocationRequest(available_deviceIDs=ids, allocation_size=size)
            return s.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[req]))

        ids8 = [f"a-{i}" for i in range(8)]
        lat = timed(lambda: prefer(stub, ids8, 4), 500)
        rows.append(("GetPreferredAllocation 4 of 8 (exhaustive)", f"p50 {pct(lat, 0.5):.2f} ms"))
        ids64 = [f"a-{i}" for i in range(64)]
        lat = timed(lambda: prefer(stubs[large], ids64, 8), 50)
        rows.append(("GetPreferredAllocation 8 of 64 (greedy)", f"p50 {pct(lat, 0.5):.2f} ms"))

        stream = stub.ListAndWatch(pb.Empty())
        received: list[float] = []
        got = threading.Event()

        def pump() -> None:
            try:
                for _ in stream:
                    received.append(time.perf_counter())
                    got.set()
            except grpc.RpcError:
                pass  # cancelled at the end

        threading.Thread(target=pump, daemon=True).start()
        got.wait(10)
        delays = []
        for k in range(200):
            got.clear()
            clock.now = k + 1
            t = time.perf_counter()
            small.refresh()
            got.wait(10)
            delays.append(received[-1] - t)
        stream.cancel()
        rows.append(
            ("health change -> ListAndWatch update", f"p50 {pct(delays, 0.5):.2f} ms, p99 {pct(delays, 0.99):.2f} ms")
        )
    finally:
        small.stop()
        large.stop()
    width = max(len(r[0]) for r in rows)
    print(f"device plugin over a unix socket ({time.strftime('%Y-%m-%d')}):")
    for name, figure in rows:
        print(f"  {name:<{width}}  {figure}")


if __name__ == "__main__":
    main()
