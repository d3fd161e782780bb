"""The accelsched command line: schedule, explain, demo. Bad input is one line on stderr and exit code 2."""

from __future__ import annotations

import gc
import json
import sys

import click

from accelsched import listen, report
from accelsched.api import goyaml, limits
from accelsched.api.loader import load
from accelsched.api.reader import paused_gc
from accelsched.dra.driver.command import dra_driver
from accelsched.engine import Session, config_from
from accelsched.errors import InputError
from accelsched.explain import explain_pod
from accelsched.sim.command import simulate
from accelsched.terminal import bad_input_exits, console
from accelsched.ui.command import ui

files_option = click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Kubernetes YAML: Nodes, Pods, workloads, PriorityClasses, kind: List (repeatable; - for stdin).",
)
kubeconfig_option = click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account).",
)
from_cluster_option = click.option(
    "--from-cluster", is_flag=True, help="Read the live cluster (read-only) instead of files: what-if on its snapshot."
)


def _session_from(
    files: tuple[str, ...], from_cluster: bool, kubeconfig: str | None, config: str | None, seed: int
) -> Session:
    """The session of FILEs, or of the live cluster's snapshot (``--from-cluster``/``--kubeconfig``)."""
    if from_cluster or kubeconfig:
        if files:
            raise InputError("give either -f FILE or --from-cluster/--kubeconfig, not both", field="-f")
        from accelsched.live.kube import ApiError, Kube, api_client
        from accelsched.live.whatif import session_from_cluster

        try:
            with paused_gc():
                session, converted = session_from_cluster(Kube(api_client(kubeconfig)), config_from(config), seed)
            gc.freeze()
        except ApiError as exc:
            raise InputError(f"cannot read the cluster: {exc}", source=kubeconfig or "kubeconfig") from None
        for obj, error in converted.errors.items():
            click.echo(f"accelsched: warning: left out {obj}: {error}", err=True)
        return session
    if not files:
        raise InputError("no input: give -f FILE (repeatable) or --from-cluster", field="-f")
    with paused_gc():
        session = Session.start(load(files), config_from(config), seed)
    gc.freeze()  # what was read lives until exit: later collections need not walk it again
    return session


config_option = click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False),
    help="A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1).",
)
seed_option = click.option("--seed", type=int, default=0, show_default=True, help="Seed for breaking score ties.")
score_all_nodes_option = click.option(
    "--score-all-nodes",
    is_flag=True,
    help="Filter and score every node for every pod (default: stop at percentageOfNodesToScore as kube-scheduler).",
)


def _set_limits(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> None:
    try:
        limits.configure(limits.parse_overrides(value))
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


limit_option = click.option(
    "--limit",
    multiple=True,
    metavar="NAME=N",
    expose_value=False,
    callback=_set_limits,
    help="Raise an input limit (repeatable), NAME one of "
    + ", ".join(f"{n} (default {getattr(limits.DEFAULTS, n)})" for n in limits.NAMES)
    + ". What each bounds: docs/input.md.",
)


def _warn_ignored(session: Session) -> None:
    if session.inputs.ignored:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(session.inputs.ignored.items()))
        click.echo(f"accelsched: note: ignored objects that do not affect placement: {kinds}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="accelsched")
def main() -> None:
    """Get accelerator workloads onto the right hardware in Kubernetes, and say why."""


@main.command()
@files_option
@from_cluster_option
@kubeconfig_option
@config_option
@seed_option
@score_all_nodes_option
@limit_option
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
@click.option(
    "--reasons", is_flag=True, help="-o json: add each pod's per-node reasons (memory grows with Pending pods x nodes)."
)
@bad_input_exits
def schedule(
    files: tuple[str, ...],
    from_cluster: bool,
    kubeconfig: str | None,
    config: str | None,
    seed: int,
    score_all_nodes: bool,
    output: str,
    reasons: bool,
) -> None:
    """Place the pending pods of FILEs (or of the live cluster) in queue order, as kube-scheduler would."""
    session = _session_from(files, from_cluster, kubeconfig, config, seed)
    session.scheduler.score_all_nodes = score_all_nodes
    session.scheduler.keep_diagnosis = reasons
    _warn_ignored(session)
    results = session.rejected + session.schedule()
    if output == "json":
        body = {**report.to_json(results, session.cluster, reasons), **report.queues_json(session.queues)}
        click.echo(json.dumps(body, indent=2))
    elif output == "yaml":
        click.echo(goyaml.dump(report.to_objects(results, session.cluster), sort_keys=False), nl=False)
    else:
        report.print_tables(console(), results, session.cluster)
        report.print_queue_tables(console(), session.queues)


@main.command()
@click.argument("pod")
@files_option
@from_cluster_option
@kubeconfig_option
@config_option
@seed_option
@score_all_nodes_option
@limit_option
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@bad_input_exits
def explain(
    pod: str,
    files: tuple[str, ...],
    from_cluster: bool,
    kubeconfig: str | None,
    config: str | None,
    seed: int,
    score_all_nodes: bool,
    output: str,
) -> None:
    """Why POD (name or namespace/name) is Pending, or why it went where it went: node by node."""
    session = _session_from(files, from_cluster, kubeconfig, config, seed)
    session.scheduler.score_all_nodes = score_all_nodes
    explanation = explain_pod(session, pod)
    if explanation is None:
        raise InputError(
            f"no pod {pod!r} in the input (use namespace/name when the name is ambiguous)", obj=f"Pod {pod}"
        )
    if output == "json":
        click.echo(json.dumps(explanation.to_json(), indent=2))
        return
    report.print_explanation(console(), explanation)


@main.command()
@click.option(
    "--sysfs-root", default="/", show_default=True, type=click.Path(file_okay=False), help="Root of the /sys tree."
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json", "yaml", "nrt", "resourceslice"]),
    default="table",
    show_default=True,
)
@click.option("--node-name", default=None, help="Node name for nrt/resourceslice output (default: this host's name).")
@click.option("--resource-name", default=None, help="Extended resource the accelerators back (default: by vendor).")
@click.option("--policy", default="none", show_default=True, help="Topology Manager policy to publish in the NRT.")
@click.option("--scope", default="container", show_default=True, help="Topology Manager scope to publish in the NRT.")
@bad_input_exits
def topology(
    sysfs_root: str, output: str, node_name: str | None, resource_name: str | None, policy: str, scope: str
) -> None:
    """Discover NUMA nodes, accelerators and NICs from /sys: a topo matrix, or objects the scheduler reads."""
    import socket

    from accelsched.topology import render
    from accelsched.topology.sysfs import discover

    render.check_topology_manager(policy, scope)  # before /sys is read: the flags are wrong whatever it holds
    topo = discover(sysfs_root)
    for warning in topo.warnings:
        click.echo(f"accelsched: warning: {warning}", err=True)
    name = node_name or socket.gethostname()
    if output == "json":
        click.echo(json.dumps(render.to_json(topo), indent=2))
    elif output == "yaml":
        click.echo(goyaml.dump(topo.to_dict(), sort_keys=False), nl=False)
    elif output == "nrt":
        click.echo(goyaml.dump(render.to_nrt(topo, name, resource_name, policy, scope), sort_keys=False), nl=False)
    elif output == "resourceslice":
        click.echo(goyaml.dump(render.to_resource_slice(topo, name, resource_name), sort_keys=False), nl=False)
    else:
        out = console()
        out.print(render.matrix(topo), highlight=False)
        out.print(render.numa_table(topo))


@main.command()
@click.option("--step", type=int, default=None, help="Run the scenario up to this step only.")
@click.option("--seed", type=int, default=0, show_default=True)
@bad_input_exits
def demo(step: int | None, seed: int) -> None:
    """The built-in lab: capacity, taints, cordon, anti-affinity across PDUs, and binding consuming devices."""
    from accelsched.demo import run_demo

    run_demo(console(), last_step=step, seed=seed)


@main.command("device-plugin")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="Plugin config YAML (the ConfigMap).")
@click.option("--resource-name", default=None, help="Extended resource to advertise, e.g. qualcomm.com/ai-accelerator.")
@click.option("--source", type=click.Choice(["sysfs", "fake"]), default=None, help="Where devices come from.")
@click.option("--socket-dir", default=None, help="The kubelet's device-plugins folder (kubelet.sock lives there).")
@click.option("--sysfs-root", default=None, help="Root of the /sys tree for --source sysfs.")
@click.option("--metrics-address", default=None, help="Address for /healthz and /metrics.")
@click.option("--metrics-port", type=int, default=None, help="Port for /healthz and /metrics (0: a free port).")
@click.option(
    "--node-name",
    default="",
    help="This node: write which device IDs are healthy to its accelsched.io/devices annotation.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    help="Credentials for --node-name (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account).",
)
@bad_input_exits
def device_plugin(
    config_file: str | None,
    resource_name: str | None,
    source: str | None,
    socket_dir: str | None,
    sysfs_root: str | None,
    metrics_address: str | None,
    metrics_port: int | None,
    node_name: str,
    kubeconfig: str | None,
) -> None:
    """Run a kubelet device plugin (v1beta1 gRPC) advertising this node's accelerators; flags override --config."""
    from accelsched.deviceplugin.main import run

    overrides = {
        "resourceName": resource_name,
        "source": source,
        "socketDir": socket_dir,
        "sysfs.root": sysfs_root,
        "metrics.address": metrics_address,
        "metrics.port": metrics_port,
    }
    sys.exit(run(config_file, overrides, node_name, kubeconfig))


@main.command()
@kubeconfig_option
@config_option
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for breaking score ties.")
@score_all_nodes_option
@click.option("--leader-elect", is_flag=True, help="Only the holder of a coordination.k8s.io Lease schedules.")
@click.option("--leader-elect-lease-duration", type=float, default=15.0, show_default=True, help="Seconds.")
@click.option("--leader-elect-renew-deadline", type=float, default=10.0, show_default=True, help="Seconds.")
@click.option("--leader-elect-retry-period", type=float, default=2.0, show_default=True, help="Seconds.")
@click.option("--leader-elect-resource-name", default="accelsched", show_default=True)
@click.option("--leader-elect-resource-namespace", default="kube-system", show_default=True)
@click.option("--identity", default=None, help="Leader election identity (default: hostname_<random>).")
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=10251,
    show_default=True,
    help="/metrics, /healthz, /readyz (0: any)",
)
@click.option("--metrics-address", default="0.0.0.0", show_default=True)
@click.option(
    "--debug-state-remote", is_flag=True, help="Serve /debug/state to every client (default: loopback clients only)."
)
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info")
@bad_input_exits
def run(
    kubeconfig: str | None,
    config: str | None,
    seed: int,
    score_all_nodes: bool,
    leader_elect: bool,
    leader_elect_lease_duration: float,
    leader_elect_renew_deadline: float,
    leader_elect_retry_period: float,
    leader_elect_resource_name: str,
    leader_elect_resource_namespace: str,
    identity: str | None,
    metrics_port: int,
    metrics_address: str,
    debug_state_remote: bool,
    log_level: str,
) -> None:
    """Run as a secondary scheduler on a live cluster: schedule and bind the pods of this scheduler's names."""
    from accelsched.live.app import RunOptions, run_scheduler

    listen.check_host(metrics_address, "--metrics-address")
    options = RunOptions(
        kubeconfig=kubeconfig,
        config=config,
        seed=seed,
        score_all_nodes=score_all_nodes,
        leader_elect=leader_elect,
        lease_duration=leader_elect_lease_duration,
        renew_deadline=leader_elect_renew_deadline,
        retry_period=leader_elect_retry_period,
        lease_name=leader_elect_resource_name,
        lease_namespace=leader_elect_resource_namespace,
        identity=identity,
        metrics_port=metrics_port,
        metrics_address=metrics_address,
        debug_state_remote=debug_state_remote,
        log_level=log_level,
    )
    sys.exit(run_scheduler(options))


main.add_command(simulate)  # accelsched simulate: policy comparison on GPU traces (accelsched/sim/command.py)
main.add_command(dra_driver)  # accelsched dra-driver: the DRA kubelet plugin (accelsched/dra/driver/command.py)
main.add_command(ui)  # accelsched ui: the read-only web page (accelsched/ui/command.py, server.py)

if __name__ == "__main__":
    main()
