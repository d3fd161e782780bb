"""The ``accelsched dra-driver`` command line (only click here: gRPC and the rest load when the command runs)."""

from __future__ import annotations

import os
import sys

import click

from accelsched import listen
from accelsched.terminal import bad_input_exits


@click.command("dra-driver")
@click.option("--node-name", envvar="NODE_NAME", default="", help="This node (the DaemonSet passes $(NODE_NAME)).")
@click.option(
    "--driver-name", default="dra.accelsched.io", show_default=True, help="DRA driver name (slices, classes)."
)
@click.option("--plugins-dir", default="/var/lib/kubelet/plugins", show_default=True, help="Holds <driver>/dra.sock.")
@click.option(
    "--registry-dir", default="/var/lib/kubelet/plugins_registry", show_default=True, help="The kubelet's watch dir."
)
@click.option("--cdi-dir", default="/var/run/cdi", show_default=True, help="Where CDI specs of prepared claims go.")
@click.option("--sysfs-root", default="/", show_default=True, help="Root of the /sys tree to discover devices in.")
@click.option("--no-mig", is_flag=True, help="Publish MIG-capable GPUs as whole GPUs only.")
@click.option("--fake", "fake_devices", type=click.IntRange(0, 1024), default=None, help="N fake GPUs, no sysfs.")
@click.option(
    "--fake-inventory",
    type=click.Path(dir_okay=False),
    default=None,
    help="Fake inventory YAML (devices, model, memory, driverVersion, numaNodes, nics, migModel, missing), re-read"
    " every --interval.",
)
@click.option("--interval", type=click.FloatRange(0.05), default=10.0, show_default=True, help="Seconds per rescan.")
@click.option("--no-publish", is_flag=True, help="Do not write ResourceSlices (another component does).")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Default: in-cluster credentials.")
@bad_input_exits
def dra_driver(
    node_name: str,
    driver_name: str,
    plugins_dir: str,
    registry_dir: str,
    cdi_dir: str,
    sysfs_root: str,
    no_mig: bool,
    fake_devices: int | None,
    fake_inventory: str | None,
    interval: float,
    no_publish: bool,
    kubeconfig: str | None,
) -> None:
    """Run a DRA kubelet plugin: publish this node's ResourceSlices and prepare claims as CDI devices."""
    from accelsched.dra.driver.main import DriverConfig, run
    from accelsched.dra.inventory import FakeSpec
    from accelsched.errors import InputError

    if fake_devices is not None and fake_inventory:
        raise InputError("give --fake or --fake-inventory, not both", field="--fake")
    config = DriverConfig(
        node_name=node_name,
        driver=driver_name,
        plugins_dir=listen.socket_folder(plugins_dir),
        registry_dir=listen.socket_folder(registry_dir),
        cdi_dir=os.path.abspath(cdi_dir),
        sysfs_root=sysfs_root,
        mig=not no_mig,
        fake=FakeSpec(devices=fake_devices) if fake_devices is not None else None,
        fake_file=fake_inventory,
        interval=interval,
    )
    sys.exit(run(config, kubeconfig, publish=not no_publish))
