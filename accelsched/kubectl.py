"""kubectl-accelsched: the kubectl plugin (`kubectl accelsched explain | map | whatif drain`), read-only.

kubectl finds a plugin as an executable named ``kubectl-NAME`` on PATH and runs it with the rest of the command line;
the plugin reads the cluster itself. This one reads it as kubectl would: the current kubeconfig context (or
``--kubeconfig``, ``--context``), the context's namespace (or ``-n``, or ``-A`` for all), and only with get and list
(live mode's ReadOnlyKube refuses any other verb in the process). Each command lists the cluster once, runs the
same engine as `accelsched schedule --from-cluster` on that snapshot, and prints a table as `kubectl get` and
`kubectl top` do (or JSON with ``-o json``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

import click
from kubernetes import config as k8s_config

from accelsched.errors import InputError
from accelsched.terminal import bad_input_exits, console

DEFAULT_NAMESPACE = "default"


class Target:
    """Where kubectl would look: the kubeconfig file, the context, the namespace (None: all namespaces)."""

    def __init__(self, kubeconfig: str | None, context: str | None, namespace: str | None, all_namespaces: bool):
        self.kubeconfig = kubeconfig
        self.context = context
        self.all_namespaces = all_namespaces
        self._namespace = namespace

    @property
    def namespace(self) -> str | None:
        """-n, else the context's namespace, else "default" (kubectl's order); None with -A."""
        if self.all_namespaces:
            return None
        return self._namespace or self._context_namespace() or DEFAULT_NAMESPACE

    def _context_namespace(self) -> str | None:
        try:
            contexts, active = k8s_config.list_kube_config_contexts(config_file=self.kubeconfig)
        except (k8s_config.ConfigException, OSError, TypeError, ValueError):
            return None  # in-cluster, or no kubeconfig: kubectl's default namespace
        chosen = next((c for c in contexts if c.get("name") == self.context), None) if self.context else active
        return ((chosen or {}).get("context") or {}).get("namespace")

    def state(self) -> Any:
        """The cluster listed once, as the web view's live mode sees it (ui/live.py), through a read-only client."""
        from accelsched.live.kube import ApiError, Kube, api_client
        from accelsched.ui import live

        kube = live.ReadOnlyKube.of(Kube(api_client(self.kubeconfig, context=self.context)))
        try:
            return live.list_state(kube)
        except ApiError as exc:
            raise InputError(f"cannot read the cluster: {exc}", source=self.where()) from None

    def where(self) -> str:
        return self.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"


def kubectl_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """kubectl's own flags for where to look, on every command (kubectl passes them through to the plugin)."""
    for option in reversed(
        [
            click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Path to the kubeconfig file."),
            click.option("--context", help="The name of the kubeconfig context to use."),
            click.option("-n", "--namespace", help="The namespace (default: the context's, else default)."),
            click.option("-A", "--all-namespaces", is_flag=True, help="Across all namespaces."),
        ]
    ):
        func = option(func)
    return func


def _target(kubeconfig: str | None, context: str | None, namespace: str | None, all_namespaces: bool) -> Target:
    if kubeconfig and not os.path.isfile(kubeconfig):
        raise InputError("no such file", source=kubeconfig, field="--kubeconfig")
    return Target(kubeconfig, context, namespace, all_namespaces)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="accelsched")
def main() -> None:
    """accelsched from kubectl: why a pod is Pending, who holds which accelerator, what a drain would do.

    Read-only: nothing is ever written to the cluster."""


@main.command()
@click.argument("pod")
@kubectl_options
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@bad_input_exits
def explain(
    pod: str, kubeconfig: str | None, context: str | None, namespace: str | None, all_namespaces: bool, output: str
) -> None:
    """Why POD is Pending, or why it went where it went: node by node, with what would make it fit."""
    from accelsched.explain import explain_pod
    from accelsched.report import print_explanation

    target = _target(kubeconfig, context, namespace, all_namespaces)
    key = pod if "/" in pod or target.namespace is None else f"{target.namespace}/{pod}"
    session, _ = target.state().start()
    explanation = explain_pod(session, key)
    if explanation is None:
        where = "in any namespace" if target.namespace is None else f"in namespace {target.namespace}"
        raise InputError(f'pods "{pod}" not found {where}', obj=f"Pod {key}")
    if output == "json":
        click.echo(json.dumps(explanation.to_json(), indent=2))
        return
    print_explanation(console(), explanation)


@main.command("map")
@kubectl_options
@click.option("--group-by", help="Node label to group rows by (default: PDU, rack, zone, NVLink domain, ...).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@bad_input_exits
def map_(
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    all_namespaces: bool,
    group_by: str | None,
    output: str,
) -> None:
    """The accelerator map: each node's devices, how many are free, and which pods hold them.

    Nodes are cluster-wide; -n NAMESPACE names only that namespace's holders (the others count as "other")."""
    from accelsched.ui import hub

    target = _target(kubeconfig, context, namespace, all_namespaces)
    ns = namespace if namespace and not all_namespaces else None  # a node map shows every namespace unless -n
    view = hub.Hub(target.state(), group_by=group_by).view()
    rows = [map_row(node, view.get("groupBy"), ns) for node in view["nodes"]]
    if output == "json":
        click.echo(json.dumps({"groupBy": view.get("groupBy"), "nodes": rows}, indent=2))
        return
    _print_table(
        ["NODE", (view.get("groupBy") or "GROUP").rsplit("/", 1)[-1].upper(), "DEVICES", "USED", "FREE", "HOLDERS"],
        [
            [r["node"], r["group"] or "-", r["devices"] or "-", str(r["used"]), str(r["free"]), r["holders"] or "-"]
            for r in rows
        ],
    )


def map_row(node: dict[str, Any], group_by: str | None, namespace: str | None) -> dict[str, Any]:
    """One node of the web view's map as a table row: device kinds, used and free cells, holders with their count."""
    cells = [d for g in node.get("groups") or [] for s in g.get("switches") or [] for d in s.get("devices") or []]
    kinds = Counter(d.get("resource") or d.get("kind") or "device" for d in cells)
    held = [d for d in cells if d.get("holders")]
    holders: Counter[str] = Counter()
    for d in held:
        for h in d["holders"]:
            holders[h if namespace is None or h.startswith(f"{namespace}/") else "other"] += 1
    flags = (["cordoned"] if node.get("unschedulable") else []) + list(node.get("taints") or [])
    return {
        "node": node["name"] + (f" ({', '.join(flags)})" if flags else ""),
        "group": (node.get("labels") or {}).get(group_by or "", ""),
        "devices": ", ".join(f"{n} {res}" for res, n in kinds.items()),
        "used": len(held),
        "free": len(cells) - len(held),
        "holders": ", ".join(f"{h} x{n}" if n > 1 else h for h, n in sorted(holders.items())),
    }


@main.group()
def whatif() -> None:
    """What a change would do, computed on a copy: nothing is written to the cluster."""


@whatif.command()
@click.argument("nodes", nargs=-1, required=True)
@kubectl_options
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@bad_input_exits
def drain(
    nodes: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    all_namespaces: bool,
    output: str,
) -> None:
    """What `kubectl drain NODE...` would do: the pods that lose their place, move, or stay Pending after it."""
    from accelsched.ui import hub

    target = _target(kubeconfig, context, namespace, all_namespaces)
    result = hub.Hub(target.state()).whatif({"actions": [{"op": "drain", "nodes": list(nodes)}]})
    if output == "json":
        keep = ("actions", "notes", "lost", "moved", "placed", "evicted", "readOnly")
        click.echo(json.dumps({k: result[k] for k in keep}, indent=2))
        return
    out = console()
    out.print(result["readOnly"])
    for note in result["notes"]:
        out.print(f"note: {note}", soft_wrap=True, markup=False, highlight=False)
    rows = [[e["pod"], e["from"], "-", "loses its place", e.get("message") or ""] for e in result["lost"]]
    rows += [[e["pod"], e["from"], e["to"], "moves", ""] for e in result["moved"]]
    rows += [[e["pod"], "-", e["to"], "gets a place", ""] for e in result["placed"]]
    if not rows:
        out.print("No pod would lose its place or move.")
        return
    _print_table(["POD", "FROM", "TO", "WHAT", "WHY"], rows)


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    """Columns as `kubectl get` prints them: left-aligned, three spaces apart, no borders."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    for r in [header, *rows]:
        click.echo("   ".join([*(str(c).ljust(w) for c, w in zip(r, widths, strict=False)), str(r[-1])]).rstrip())


if __name__ == "__main__":  # python3 -m accelsched.kubectl (krew's shim, deploy/krew)
    main()
