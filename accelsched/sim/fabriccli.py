"""``simulate --fabric``'s options, their checks and its table: the command's part that sim/fabric.py does not
need (sim/command.py only adds these options and calls ``table``/``run``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from accelsched.errors import InputError
from accelsched.sim import fabric
from accelsched.sim.trace import Nodes, Pods

HEADER = [
    "policy",
    "request",
    "gangs",
    "big gangs",
    "big p50 wait s",
    "big p95 wait s",
    "NVLink domains used / min",
    "over min mean",
    "over min max",
    "stranded free nodes",
    "mean alloc",
    "never ran",
    "s/run",
]


def options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The --fabric options, added to ``simulate``; they reach it as keyword arguments."""
    rule = fabric.GangRule()
    decorators = [
        click.option(
            "--fabric",
            is_flag=True,
            help="Replay on the trace's clock (as --mode timeline) on a cluster of blocks and NVLink domains, "
            "with the trace's multi-GPU pods as gangs (docs/simulate.md).",
        ),
        click.option(
            "--domain-size",
            type=click.IntRange(1, 100_000),
            default=18,
            show_default=True,
            help="--fabric: nodes per NVLink domain (nvidia.com/gpu.clique).",
        ),
        click.option(
            "--block-domains",
            type=click.IntRange(1, 100_000),
            default=4,
            show_default=True,
            help="--fabric: NVLink domains per block.",
        ),
        click.option(
            "--gang-gpus",
            type=click.IntRange(2, 8),
            default=rule.gang_gpus,
            show_default=True,
            help="--fabric: pods asking for at least this many GPUs become gangs.",
        ),
        click.option(
            "--gang-window",
            type=click.IntRange(0, 10**9),
            default=rule.window,
            show_default=True,
            metavar="SECONDS",
            help="--fabric: same-shape pods arriving within this of a gang's first pod join it (trace clock).",
        ),
        click.option(
            "--gang-scale",
            type=click.IntRange(1, 256),
            default=rule.scale,
            show_default=True,
            help="--fabric: pods of its gang each trace pod stands for.",
        ),
        click.option(
            "--big-gang",
            type=click.IntRange(1, 10**6),
            default=rule.big,
            show_default=True,
            help="--fabric: gangs of at least this many pods are reported as big.",
        ),
        click.option(
            "--gang-topology",
            default="required,none",
            show_default=True,
            help="--fabric: the gangs' requests to compare: required (one NVLink domain, else one block), "
            "preferred (an NVLink domain), none (pod by pod, all or nothing); comma list.",
        ),
    ]
    for decorate in reversed(decorators):
        command = decorate(command)
    return command


def parse_topologies(text: str) -> list[str]:
    out = [t.strip() for t in text.split(",") if t.strip()]
    for t in out:
        if t not in fabric.TOPOLOGIES:
            raise InputError(f"unknown request {t!r} (known: {', '.join(fabric.TOPOLOGIES)})", field="--gang-topology")
    if not out:
        raise InputError("names no request", field="--gang-topology")
    return list(dict.fromkeys(out))


def rule_of(opts: dict[str, Any]) -> fabric.GangRule:
    return fabric.GangRule(opts["gang_gpus"], opts["gang_window"], opts["gang_scale"], opts["big_gang"])


def run(
    nodes: Nodes,
    pods: Pods,
    policies: list[str],
    seeds: list[int],
    tie_break: str,
    compress: float,
    opts: dict[str, Any],
    advance: Callable[[], None] = lambda: None,
) -> tuple[fabric.Fabric, list[dict]]:
    """Every policy x request x seed; one row of figures per policy and request."""
    if pods.creation is None:
        raise InputError("has no creation_time/deletion_time columns; --fabric replays on them", source=pods.source)
    topologies = parse_topologies(opts["gang_topology"])
    layout = fabric.group_nodes(nodes, opts["domain_size"], opts["block_domains"])
    rule = rule_of(opts)
    rows = []
    for policy in policies:
        for topology in topologies:
            runs = []
            for seed in seeds:
                run = fabric.replay_fabric(nodes, pods, policy, seed, rule, layout, topology, tie_break, compress)
                runs.append(run)
                advance()
            rows.append(fabric.figures(runs))
    return layout, rows


def table(rows: list[dict]) -> list[list[str]]:
    return [
        [
            r["policy"],
            r["topology"],
            str(r["gangs"]),
            f"{r['big_gangs_placed']}/{r['big_gangs']}",
            f"{r['big_gang_wait_p50_s']:.0f}",
            f"{r['big_gang_wait_p95_s']:.0f}",
            f"{r['domains_used']} / {r['domains_minimum']}",
            f"{r['domains_over_minimum_mean']:.2f}",
            str(r["domains_over_minimum_max"]),
            f"{r['stranded_free_nodes_mean']:.1f}",
            f"{r['mean_allocation']:.1%}",
            str(r["pods_never_ran"]),
            f"{r['seconds']:.1f}",
        ]
        for r in rows
    ]


def describe(layout: fabric.Fabric, nodes: Nodes, opts: dict[str, Any]) -> dict:
    """The fabric and the gang rule, for the JSON output and the notes under the table."""
    return {
        "nodes": nodes.n,
        "nvlink_domains": len(layout.domains),
        "blocks": len(layout.blocks),
        "domain_size": opts["domain_size"],
        "block_domains": opts["block_domains"],
        "topology": fabric.topology_doc(),
        "gang_rule": asdict(rule_of(opts)),
    }


def note(about: dict, pods: Pods, compress: float, seeds: list[int]) -> str:
    rule = about["gang_rule"]
    return (
        f"{pods.n} pods of {Path(pods.source).name} (arrivals compressed x{compress:g}) on {about['nodes']} nodes in "
        f"{about['nvlink_domains']} NVLink domains of up to {about['domain_size']} nodes and {about['blocks']} blocks. "
        f"Gangs: pods asking for >= {rule['gang_gpus']} GPUs, of one shape, within {rule['window']} s of the first, "
        f"each standing for {rule['scale']} pods; big: >= {rule['big']} pods. Waits pooled over seeds "
        f"{seeds[0]}..{seeds[-1]}. Stranded free nodes: on average while a gang waits, the free nodes in NVLink "
        "domains too broken for any queued gang."
    )
