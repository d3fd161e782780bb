"""``accelsched ui``: serve the accelerator map, why Pending and what-if as a local, read-only web page.

Everything that can be wrong with the input (a bad file, a step out of range, credentials, a port in use) is found
before the server starts, and is one line and exit code 2, as in every other command. The server's modules
(starlette, uvicorn) are imported only here, when the command runs, so ``accelsched --help`` stays fast.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from accelsched import listen
from accelsched.errors import InputError
from accelsched.terminal import bad_input_exits


def _echo_ready(url: str) -> None:
    click.echo(f"accelsched ui: serving {url} (read-only; Ctrl-C to stop)")
    sys.stdout.flush()


def _check_sources(files: tuple[str, ...], live: bool, demo: bool, step: int | None, sim: str | None) -> None:
    chosen = [name for name, on in (("-f", bool(files)), ("--from-cluster", live), ("--demo", demo)) if on]
    if len(chosen) > 1:
        raise InputError(f"give one of -f FILE, --from-cluster/--kubeconfig or --demo, not {' and '.join(chosen)}")
    if not chosen and sim is None:
        raise InputError("no input: give -f FILE (repeatable), --from-cluster, --demo or --sim DIR", field="-f")
    if step is not None and not demo:
        raise InputError("--step goes with --demo", field="--step")


@click.command("ui")
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Kubernetes YAML: Nodes, Pods, workloads (repeatable; - for stdin), shown after scheduling.",
)
@click.option("--from-cluster", is_flag=True, help="Follow the live cluster through watches (read-only).")
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Kubeconfig of the cluster (implies --from-cluster; default: $KUBECONFIG, ~/.kube/config, in-cluster).",
)
@click.option("--demo", is_flag=True, help="The lab scenario of `accelsched demo`.")
@click.option("--step", type=click.IntRange(min=1), default=None, help="With --demo: the lab after this step only.")
@click.option(
    "--sim",
    "sim_dir",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="A `simulate --out DIR` folder, shown at /sim.",
)
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False),
    help="A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for breaking score ties.")
@click.option("--group-by", default=None, help="Node label the map groups rows by (default: PDU, rack, zone, ...).")
@click.option(
    "--address",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (loopback by default; elsewhere the page has no login: a warning says so).",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="Port (0: a free one).")
@click.option("--once", is_flag=True, help="Print the page's state (GET /api/state as JSON) and exit, serving nothing.")
@bad_input_exits
def ui(
    files: tuple[str, ...],
    from_cluster: bool,
    kubeconfig: str | None,
    demo: bool,
    step: int | None,
    sim_dir: str | None,
    config: str | None,
    seed: int,
    group_by: str | None,
    address: str,
    port: int,
    once: bool,
) -> None:
    """Serve a local web page: the accelerator map, why pods are Pending, and what-if (nothing is ever written)."""
    live = from_cluster or kubeconfig is not None
    _check_sources(files, live, demo, step, sim_dir)
    listen.check_host(address, "--address")
    if group_by is not None:
        from accelsched.api.validation import label_key_problem

        problem = label_key_problem(group_by)
        if problem:
            raise InputError(f"{group_by[:80]!r}: {problem}", field="--group-by")
    from accelsched.engine import config_from
    from accelsched.ui import state as ui_state
    from accelsched.ui.hub import Hub

    scheduler_config = config_from(config)
    sim = None
    if sim_dir is not None:
        from accelsched.ui import simview

        sim = simview.load(sim_dir)  # a folder without results is bad input now, not a 400 later

    source: Any = None
    raw: Any = None
    if live:
        from accelsched.live.kube import api_client
        from accelsched.ui.live import LiveSource, ReadOnlyKube

        source = LiveSource(ReadOnlyKube(api_client(kubeconfig)))
        raw = source.start()
    elif demo:
        raw = ui_state.DemoState.lab(step, seed=seed)
    elif files:
        raw = ui_state.FilesState.load(list(files))
    try:
        hub = None if raw is None else Hub(raw, scheduler_config, seed, group_by)
        if hub is not None:
            for warning in hub.view().get("warnings") or []:
                click.echo(f"accelsched: warning: {warning}", err=True)
            if group_by is not None and not any(group_by in n.labels for n in hub.run.session.cluster.nodes):
                # Not an error: a live cluster may gain such nodes later; the map shows one group meanwhile.
                click.echo(f"accelsched: warning: --group-by: no node has the label {group_by}", err=True)
        if once:
            body = hub.view() if hub is not None else sim
            click.echo(json.dumps(body, separators=(",", ":"), allow_nan=False))
            return
        from accelsched.api import reader
        from accelsched.ui import server

        # the first run's objects live as long as the page: frozen, so an explain or what-if meets no full
        # collection of them (at 5,000 nodes with a backlog one took an explain from 0.1 s to 0.6 s of CPU)
        reader.freeze_heap()
        if source is not None:
            source.follow(hub)
        server.serve(hub, address, port, sim_dir, _echo_ready, sim=sim)
    finally:
        if source is not None:
            source.stop()
