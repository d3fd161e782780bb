"""``accelsched device-plugin``: load the config, serve until SIGTERM or SIGINT, then clean up the sockets."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Mapping
from typing import Any

from accelsched.deviceplugin.config import load
from accelsched.deviceplugin.plugin import DevicePluginManager


def run(config_file: str | None, overrides: Mapping[str, Any]) -> int:
    """Serve until a signal; returns the exit code. Bad config raises InputError (exit 2 in the CLI)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = load(config_file, overrides)
    manager = DevicePluginManager(config)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    manager.start()
    log = logging.getLogger("accelsched.deviceplugin")
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
