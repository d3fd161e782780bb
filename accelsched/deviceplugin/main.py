"""``accelsched device-plugin``: load the config, serve until SIGTERM or SIGINT, then clean up the sockets."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Mapping
from functools import partial
from typing import Any

from accelsched.deviceplugin.config import load
from accelsched.deviceplugin.plugin import DevicePluginManager
from accelsched.deviceplugin.publish import NodePublisher
from accelsched.errors import InputError


def run(
    config_file: str | None, overrides: Mapping[str, Any], node_name: str = "", kubeconfig: str | None = None
) -> int:
    """Serve until a signal; returns the exit code. Bad config raises InputError (exit 2 in the CLI).

    With ``node_name`` (the DaemonSet passes ``--node-name $(NODE_NAME)``, from the downward API) the healthy
    device IDs are also written to that Node for the scheduler (publish.py), with the in-cluster credentials or
    ``kubeconfig``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = load(config_file, overrides)
    if not os.path.isdir(config.socket_dir):
        raise InputError(
            f"{config.socket_dir} is not a directory (mount the kubelet's device-plugins folder there)",
            source=config.source_file,
            obj="DevicePluginConfig",
            field="socketDir",
        )
    publisher = None
    if node_name:
        from accelsched.live.kube import Kube, api_client

        kube = Kube(api_client(kubeconfig, pool_size=2))
        publisher = partial(NodePublisher, kube, node_name)
    manager = DevicePluginManager(config, publisher=publisher)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    manager.start()
    log = logging.getLogger("accelsched.deviceplugin")
    if not manager.inventory.devices:
        log.warning(
            "no devices found by the %s source: advertising 0 (check sysfs.vendors and the /sys mount)", config.source
        )
    log.info(
        "advertising %s from %s (%d devices)",
        ", ".join(manager.resources),
        config.source,
        len(manager.inventory.devices),
    )
    done.wait()
    log.info("stopping")
    manager.stop()
    return 0
