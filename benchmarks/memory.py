"""``python -m benchmarks.memory``: what reading a cluster dump really takes, beside api/memory.py's estimates.

    python -m benchmarks.memory                   # three sizes of kubectl JSON and YAML (a couple of minutes)
    python -m benchmarks.memory --sizes 500x5000x500 --format yaml

Each size (nodes x bound pods x pending pods, benchmarks/cli.py's objects) is written once, then loaded in a fresh
child: its peak (VmHWM after /proc/self/clear_refs) less the imports, and the VmRSS load leaves, per input byte and
per object, with what api/memory.py estimates. The estimates must stay below the measurements (a refusal means
"certainly does not fit"); the table says so per row. Measured, never asserted: the exit status is 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.cli import cluster_objects, write_kubectl_json, write_yaml

ROOT = Path(__file__).resolve().parent.parent


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def child(path: str) -> None:
    """Runs in the fresh interpreter: load ``path`` as ``schedule -f`` does, print the figures as JSON."""
    import accelsched.cli  # noqa: F401  (the imports a run has, so they are not counted as the input's)
    from accelsched.api.loader import load

    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here
    base = _status("VmRSS")
    inputs = load([path])
    print(json.dumps({"peak": _status("VmHWM") - base, "kept": _status("VmRSS") - base,
                      "nodes": len(inputs.nodes), "pods": len(inputs.pods)}))  # fmt: skip


def measure(spec: str, fmt: str, folder: Path) -> dict:
    from accelsched.api import memory

    nodes, bound, pending = (int(n) for n in spec.split("x"))
    path = folder / f"c{spec}.{fmt}"
    if not path.exists():
        (write_kubectl_json if fmt == "json" else write_yaml)(path, cluster_objects(nodes, bound, pending))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.memory", "--child", str(path)], capture_output=True, text=True, env=env
    )
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    got = json.loads(out.stdout.strip().splitlines()[-1])
    size = path.stat().st_size
    got["bytes"] = size
    got["estimate"] = memory.read_estimate(size, json=fmt == "json")
    return got


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["500x5000x500", "2000x20000x2000", "4000x0x0"])
    parser.add_argument("--format", choices=["json", "yaml", "both"], default="both")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    table = Table(title="Reading a cluster dump: measured peak against api/memory.py's read estimate")
    for column in ("input", "format", "MiB", "peak MiB", "peak/byte", "estimate MiB", "kept KB/object", "below"):
        table.add_column(column, justify="right")
    formats = ["json", "yaml"] if args.format == "both" else [args.format]
    with tempfile.TemporaryDirectory(prefix="accelsched-memory-") as tmp:
        for spec in args.sizes:
            for fmt in formats:
                r = measure(spec, fmt, Path(tmp))
                objects = max(1, r["nodes"] + r["pods"])
                table.add_row(
                    spec, fmt, f"{r['bytes'] >> 20}", f"{r['peak'] >> 20}", f"{r['peak'] / r['bytes']:.2f}",
                    f"{r['estimate'] >> 20}", f"{r['kept'] / objects / 1000:.1f}",
                    "yes" if r["estimate"] <= r["peak"] else "NO",
                )  # fmt: skip
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
