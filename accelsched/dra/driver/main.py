"""``accelsched dra-driver``: the parts put together, and the loop that keeps them current.

Start: load the checkpoint (a corrupt one stops the driver with exit 2: guessing would hand a device out twice),
remove CDI specs it does not back, scan the inventory, serve the DRA service on ``plugins/<driver>/dra.sock``, then
registration on ``plugins_registry/<driver>-reg.sock`` (in this order, so the kubelet never finds a registration
whose endpoint does not answer yet). Every ``interval`` seconds: scan again and publish the slices (a device that
disappeared or came back bumps the pool generation), and serve again any socket someone removed.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelsched.dra import inventory as inv
from accelsched.dra.driver import registration
from accelsched.dra.driver.cdi import DEFAULT_CDI_DIR, CDIWriter
from accelsched.dra.driver.checkpoint import Checkpoint, CheckpointError
from accelsched.dra.driver.prepare import ClaimSource, Preparer
from accelsched.dra.driver.proto import api_pb2_grpc as pb_grpc
from accelsched.dra.driver.proto import pluginregistration_pb2_grpc as reg_grpc
from accelsched.dra.driver.publish import SlicePublisher
from accelsched.dra.driver.server import DRAPluginService, SocketServer
from accelsched.errors import InputError

log = logging.getLogger("accelsched.dra.driver")
DEFAULT_DRIVER = "dra.accelsched.io"  # not accelsched.io: topology.render's layout slices use that name
CHECKPOINT_FILE = "checkpoint.json"
# resource.k8s.io driver names: a DNS subdomain, at most 63 characters (validation.go validateDriverName).
DRIVER_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass
class DriverConfig:
    node_name: str
    driver: str = DEFAULT_DRIVER
    plugins_dir: str = registration.DEFAULT_PLUGINS_DIR
    registry_dir: str = registration.DEFAULT_REGISTRY_DIR
    cdi_dir: str = DEFAULT_CDI_DIR
    sysfs_root: str = "/"
    mig: bool = True
    fake: inv.FakeSpec | None = None  # a fixed fake inventory (--fake N)
    fake_file: str | None = None  # a fake inventory re-read on every scan (devices come and go with it)
    interval: float = 10.0

    @property
    def service_socket(self) -> str:
        return registration.service_socket(self.plugins_dir, self.driver)

    @property
    def registration_socket(self) -> str:
        return registration.registration_socket(self.registry_dir, self.driver)

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.plugins_dir, self.driver, CHECKPOINT_FILE)


def read_fake_file(path: str) -> inv.FakeSpec:
    """The fake inventory file, read as manifests are (api/reader.py: size cap, encodings, duplicate keys)."""
    from accelsched.api import reader

    data = reader.read_input(path, path)
    docs = reader.parse(reader.decode(data, path), path)
    if len(docs) > 1:
        raise InputError(f"holds {len(docs)} documents; the fake inventory is one", source=path, obj="FakeInventory")
    return inv.parse_fake(docs[0] if docs else None, path)


def scanner(config: DriverConfig) -> Callable[[], inv.NodeInventory]:
    if config.fake_file:
        path = config.fake_file
        return lambda: inv.from_fake(read_fake_file(path), config.node_name)
    if config.fake is not None:
        spec = config.fake
        return lambda: inv.from_fake(spec, config.node_name)
    return lambda: inv.from_sysfs(config.sysfs_root, mig_enabled=config.mig)


class DRADriver:
    """One driver instance: the DRA and registration servers, the inventory, and (with ``kube``) the publisher."""

    def __init__(self, config: DriverConfig, claims: ClaimSource, kube: Any = None) -> None:
        self.config = config
        self.scan = scanner(config)
        self.inventory = self.scan()  # bad fake input fails here, before anything is served
        try:
            self.checkpoint = Checkpoint(config.checkpoint_path)
        except CheckpointError as exc:
            raise InputError(str(exc), source=config.checkpoint_path, obj="DRADriverCheckpoint") from None
        self.cdi = CDIWriter(config.driver, config.cdi_dir)
        self.preparer = Preparer(
            config.driver, config.node_name, lambda: self.inventory, claims, self.cdi, self.checkpoint
        )
        self.service = DRAPluginService(self.preparer)
        self.registration = registration.RegistrationService(config.driver, config.service_socket)
        self.dra_server = SocketServer(
            config.service_socket, lambda s: pb_grpc.add_DRAPluginServicer_to_server(self.service, s)
        )
        self.reg_server = SocketServer(
            config.registration_socket, lambda s: reg_grpc.add_RegistrationServicer_to_server(self.registration, s)
        )
        self.publisher = SlicePublisher(kube, config.driver, config.node_name) if kube is not None else None
        self.published = threading.Event()  # set after each successful publish
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> DRADriver:
        os.makedirs(os.path.dirname(self.config.checkpoint_path), exist_ok=True)
        for uid in self.preparer.remove_orphans():
            log.info("removed the CDI spec of claim %s: no checkpoint entry backs it", uid)
        self.dra_server.start()
        self.reg_server.start()
        self.publish()
        self._thread = threading.Thread(target=self._loop, name="dra-driver", daemon=True)
        self._thread.start()
        return self

    def publish(self) -> None:
        if self.publisher is not None and self.publisher.sync(self.inventory):
            self.published.set()

    def step(self) -> None:
        """One watch step: rescan, publish, and serve again a socket that was removed."""
        try:
            self.inventory = self.scan()
        except InputError as exc:  # a fake file edited into something bad: keep the last good inventory
            log.warning("inventory scan failed, keeping the last one: %s", exc)
        self.publish()
        for server in (self.dra_server, self.reg_server):
            if not server.intact():
                log.warning("%s is gone: serving it again", server.path)
                server.restart()

    def _loop(self) -> None:
        while not self._stop.wait(self.config.interval):
            try:
                self.step()
            except Exception:
                log.exception("watch step failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.reg_server.stop()  # first: the kubelet stops calling a driver it can no longer find
        self.dra_server.stop()


def run(config: DriverConfig, kubeconfig: str | None = None, publish: bool = True) -> int:
    """Serve until SIGTERM or SIGINT. Claims come from the API server (in-cluster credentials or ``kubeconfig``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from accelsched.dra.driver.prepare import ApiClaimSource
    from accelsched.live.kube import Kube, api_client

    if not config.node_name:
        raise InputError("--node-name is required (the DaemonSet passes $(NODE_NAME))", field="--node-name")
    if not DRIVER_NAME_RE.fullmatch(config.driver) or len(config.driver) > 63:
        raise InputError(
            f"{config.driver!r} is not a driver name (a DNS subdomain of at most 63 characters)", field="--driver-name"
        )
    scanner(config)()  # bad fake input is reported before any credentials are needed
    kube = Kube(api_client(kubeconfig, pool_size=4))
    driver = DRADriver(config, ApiClaimSource(kube), kube if publish else None)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    driver.start()
    log.info(
        "driver %s on node %s: %d devices, %d prepared claims; DRA service %s, registration %s",
        config.driver,
        config.node_name,
        len(driver.inventory.devices),
        len(driver.checkpoint.claims),
        config.service_socket,
        config.registration_socket,
    )
    done.wait()
    log.info("stopping")
    driver.stop()
    return 0
