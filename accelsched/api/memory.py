"""Inputs too big for the machine: an estimate of the memory an input takes, against what this process may use.

Past what the machine holds, reading a large cluster dump ends with the kernel's OOM killer (no message at all) or a
MemoryError traceback half-way. Both are known before the work: the memory a read takes grows with the input's
bytes, and what the objects keep afterwards with the nodes and pods in it. So the input is refused first, exit 2,
with the estimate and what is available named. What is available is the least of the cgroup's memory limit less
its usage (v2 ``memory.max``/``memory.current``, v1 ``memory.limit_in_bytes``/``memory.usage_in_bytes``), the
address-space limit (``RLIMIT_AS``) less this process's size, and the kernel's ``MemAvailable``.

The estimates are deliberately low (a refusal must mean "certainly does not fit", never "might not"): a
15,000-node, 100,000-pod cluster dump (about 0.75 GiB of kubectl JSON) is estimated at 2.2 GiB to read and 0.4 GiB
more to build (tests/test_hardening_round3.py). The Scheduler's own memory (per Pending pod) is not counted here.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsched.api import limits
from accelsched.errors import InputError

# Peak memory while one file becomes dicts and lists (its text, the decoded str and the object tree at once), per
# byte of input. Measured on benchmarks/cli.py's cluster_objects (kubectl-style Nodes and ReplicaSet Pods) at
# 500/5,000/500, 2,000/20,000/2,000, 4,000/0/0, 500/20,000/0 and 500/0/20,000 nodes/bound/pending pods, as
# VmHWM (after /proc/self/clear_refs) less the imports' VmRSS around api.loader.load: JSON as kubectl prints it
# (four-space indent) took 3.8 bytes per input byte at every size; the same objects as multi-document YAML
# (denser text) 9.8-10.4. Kept below the measurement.
JSON_READ_BYTES_PER_BYTE = 3.0
YAML_READ_BYTES_PER_BYTE = 8.0
# What building the engine's objects adds to the parsed documents (loader.build_inputs), measured as VmRSS after
# api.loader.load less after reader.parse of the same file (gc'd, the text freed), on the same inputs: 2.3 KB per
# Node (4,000 nodes: 9 MB), 4.3 KB per Pod (500 nodes and 20,000 pods: 87 MB). A pod a workload expands to
# (Deployment replicas, a DaemonSet's pod per node) is a new document too: its template's tree (a small template,
# about 2 KB) and the Pod. Kept below the measurement.
NODE_BYTES = 2_000
POD_BYTES = 4_000
EXPANDED_POD_BYTES = 6_000
_CGROUP_FILES = (("memory.max", "memory.current"), ("memory.limit_in_bytes", "memory.usage_in_bytes"))  # v2, v1
# cgroup v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages): anything past this is none.
_NO_LIMIT = 1 << 60


@dataclass(frozen=True)
class Available:
    """Bytes this process may still take, and which limit says so (for the error message)."""

    bytes: int
    what: str


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _cgroup_dirs() -> list[Path]:
    """This process's cgroup folders (v2 unified, then v1 memory), as /proc/self/cgroup names them."""
    root = Path("/sys/fs/cgroup")
    out = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            out.append(root / path.lstrip("/"))
        elif "memory" in controllers.split(","):
            out.append(root / "memory" / path.lstrip("/"))
    return [*out, root, root / "memory"]  # a container's namespace shows its own cgroup at the root


def _cgroup() -> Available | None:
    for folder in _cgroup_dirs():
        for limit_file, usage_file in _CGROUP_FILES:
            limit = _read_int(folder / limit_file)  # "max" (v2, no limit) is not digits: None
            if limit is None or limit >= _NO_LIMIT:
                continue
            used = _read_int(folder / usage_file) or 0
            return Available(max(0, limit - used), f"the cgroup's memory limit {gib(limit)} less {gib(used)} in use")
    return None


def _address_space() -> Available | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None
    return Available(max(0, soft - size), f"the address-space limit (RLIMIT_AS) {gib(soft)} less {gib(size)} mapped")


def _mem_available() -> Available | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                kib = int(line.split()[1])
                return Available(kib * 1024, f"MemAvailable {gib(kib * 1024)}")
    except (OSError, ValueError, IndexError):
        pass
    return None


def available() -> Available | None:
    """The tightest of the limits that apply, or None where none can be read."""
    found = [a for a in (_cgroup(), _address_space(), _mem_available()) if a is not None]
    return min(found, key=lambda a: a.bytes) if found else None


def gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def read_estimate(size: int, json: bool) -> int:
    """Peak bytes to read and parse ``size`` bytes of JSON (or YAML)."""
    return int(size * (JSON_READ_BYTES_PER_BYTE if json else YAML_READ_BYTES_PER_BYTE))


def build_estimate(nodes: int, pods: int, expanded: int) -> int:
    """Bytes building ``nodes`` Nodes, ``pods`` Pods and ``expanded`` pods of workloads adds to their documents."""
    return nodes * NODE_BYTES + pods * POD_BYTES + expanded * EXPANDED_POD_BYTES


def _count(spec: Any, key: str) -> int:
    """A workload's pod count, read loosely: what is not a count within the ``pods`` limit is the workload's own
    error (api/workloads.py words it), not counted here."""
    value = spec.get(key, 1) if isinstance(spec, Mapping) else 1
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 < value <= limits.current().pods
    return value if ok else 0


def check_documents(docs: Iterable[Any]) -> None:
    """Before the documents (``loader.Document``) become objects: refuse when building them cannot fit, naming the
    file that asks for the most. Counts: replicas or parallelism per workload, a DaemonSet's pod per node."""
    nodes = pods = expanded = 0
    daemonsets: list[str] = []
    by_source: dict[str, int] = {}
    for d in docs:
        if d.kind == "Node":
            nodes += 1
            by_source[d.source] = by_source.get(d.source, 0) + NODE_BYTES
        elif d.kind == "Pod":
            pods += 1
            by_source[d.source] = by_source.get(d.source, 0) + POD_BYTES
        elif d.kind == "DaemonSet":
            daemonsets.append(d.source)
        elif d.kind in ("Deployment", "ReplicaSet", "StatefulSet", "ReplicationController", "Job"):
            spec = d.doc.get("spec") if isinstance(d.doc, Mapping) else None
            count = _count(spec, "parallelism" if d.kind == "Job" else "replicas")
            expanded += count
            by_source[d.source] = by_source.get(d.source, 0) + count * (POD_BYTES + EXPANDED_POD_BYTES)
    for source in daemonsets:
        expanded += nodes
        by_source[source] = by_source.get(source, 0) + nodes * (POD_BYTES + EXPANDED_POD_BYTES)
    if not by_source:
        return
    what = f"building {nodes} nodes, {pods} pods and {expanded} pods of workloads"
    check(build_estimate(nodes, pods + expanded, expanded), what, source=max(by_source, key=by_source.__getitem__))


def check(estimate: int, what: str, source: str = "", field: str = "") -> None:
    """InputError when ``estimate`` bytes are more than this process may take now."""
    have = available()
    if have is None or estimate <= have.bytes:
        return
    raise InputError(
        f"{what} would take about {gib(estimate)} of memory, more than is available ({have.what}); give it a "
        "machine with more memory, or less input",
        source=source,
        field=field,
    )


def stream_budget() -> int | None:
    """Bytes a pipe or device may deliver before reading more could not fit (None: no limit known): the text,
    read as JSON, the cheapest to parse."""
    have = available()
    return None if have is None else int(have.bytes / (1 + JSON_READ_BYTES_PER_BYTE))
