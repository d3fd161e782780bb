"""Loading the Alibaba GPU trace (cluster-trace-gpu-v2023, "openb") into columns, with file:line errors.

The node list gives ``sn, cpu_milli, memory_mib, gpu, model``; a pod list gives ``name, cpu_milli, memory_mib,
num_gpu, gpu_milli`` and, except the multigpu variants, ``gpu_spec, qos, pod_phase, creation_time,
deletion_time, scheduled_time``. Everything is validated once here, so the replay trusts its arrays.

The openb trace ships inside the package (``accelsched/data/alibaba-gpu-v2023``: each CSV as ``.csv.xz``, with
its README and licence note), so ``simulate --trace openb`` runs after a pip install, in any folder.
``--data-dir`` or ``$ACCELSCHED_DATA_DIR`` points at another copy or another trace; every loader reads a
``.csv`` or a ``.csv.xz`` alike.
"""

from __future__ import annotations

import csv
import importlib.resources
import io
import lzma
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np

from accelsched.api import reader
from accelsched.errors import InputError

MILLI = 1000
MAX_GPUS_PER_NODE = 8
# Read where pip put it: a wheel is always unpacked onto the file system, so the resource is a real folder.
BUNDLED_DIR = Path(os.fspath(importlib.resources.files("accelsched"))) / "data" / "alibaba-gpu-v2023"
DATA_DIR_ENV = "ACCELSCHED_DATA_DIR"
NODE_LIST = "openb_node_list_gpu_node"
POD_LIST_PREFIX = "openb_pod_list_"
MAX_XZ_TEXT = 1 << 30  # bytes a .csv.xz may expand to: a corrupt or hostile file cannot fill memory
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
TIME_COLUMNS = ("creation_time", "deletion_time")


@dataclass
class Nodes:
    """GPU nodes as columns; ``models`` names the codes in ``model``."""

    names: list[str]
    cpu: np.ndarray  # milli-CPU
    memory: np.ndarray  # MiB
    gpus: np.ndarray  # GPUs per node
    model: np.ndarray  # index into models
    models: list[str]
    source: str = ""

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def gpu_milli_capacity(self) -> int:
        return int(self.gpus.sum()) * MILLI


@dataclass
class Pods:
    """Pods as columns. ``gpu_milli`` is the share of one GPU for a sharing pod (num_gpu == 1), 1000 for whole
    GPUs; ``spec`` indexes ``specs`` (a frozenset of allowed GPU models, empty: any)."""

    names: list[str]
    cpu: np.ndarray
    memory: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    spec: np.ndarray
    specs: list[frozenset[str]]
    creation: np.ndarray | None = None  # seconds; None when the file has no time columns
    deletion: np.ndarray | None = None  # seconds; -1 where the pod never ended in the trace
    source: str = ""
    lines: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # CSV line of each pod

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def gpu_request(self) -> np.ndarray:
        """Requested GPU milli per pod (num_gpu x 1000 for whole GPUs, gpu_milli for a share)."""
        return np.where(self.num_gpu == 1, self.gpu_milli, self.num_gpu * MILLI)

    def take(self, order: np.ndarray) -> Pods:
        """The pods in ``order`` (indices may repeat: inflated copies)."""

        def pick(column: np.ndarray | None) -> np.ndarray | None:
            return None if column is None else column[order]

        return Pods(
            [self.names[i] for i in order],
            self.cpu[order],
            self.memory[order],
            self.num_gpu[order],
            self.gpu_milli[order],
            self.spec[order],
            self.specs,
            pick(self.creation),
            pick(self.deletion),
            self.source,
            self.lines[order] if self.lines.size else self.lines,
        )


def open_csv(path: Path) -> TextIO:
    """A CSV file for reading, plain or ``.xz``. An xz file is expanded here, whole and bounded (the trace's
    largest is 0.7 MB), so a truncated or corrupt one is one error naming the file, not a traceback mid-rows."""
    if path.suffix != ".xz" and path.exists() and not path.is_file():
        # A pipe or device (``--pods <(xzcat ...)``, /dev/zero): csv would read one endless line into memory.
        # Read it as manifests are read (api/reader.py: in chunks, refused at a NUL or past the limits).
        source = str(path)
        return io.StringIO(reader.decode(reader.read_input(path, source), source), newline="")
    try:
        if path.suffix != ".xz":
            return path.open(newline="")
        # In chunks: read(MAX_XZ_TEXT + 1) would allocate the whole bound up front, whatever the file holds.
        data = bytearray()
        with lzma.open(path) as compressed:
            while len(data) <= MAX_XZ_TEXT and (chunk := compressed.read(1 << 20)):
                data += chunk
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None
    except (lzma.LZMAError, EOFError) as exc:
        raise InputError(f"not a valid xz file: {exc}", source=str(path)) from None
    if len(data) > MAX_XZ_TEXT:
        raise InputError(f"expands to more than {MAX_XZ_TEXT >> 20} MiB of CSV", source=str(path))
    try:
        return io.StringIO(data.decode("utf-8"), newline="")
    except UnicodeDecodeError as exc:
        raise InputError(f"byte {exc.start}: not UTF-8 text", source=str(path)) from None


def _rows(path: Path, required: tuple[str, ...]) -> tuple[list[str], list[tuple[int, list[str]]]]:
    with open_csv(path) as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
            if not header:
                raise InputError("is empty; expected a CSV header", source=f"{path}:1")
            header = [h.strip() for h in header]
            dup = next((h for i, h in enumerate(header) if h in header[:i]), None)
            if dup is not None:
                raise InputError(f"column {dup!r} appears twice in the header", source=f"{path}:1", field=dup)
            missing = [c for c in required if c not in header]
            if missing:
                raise InputError(
                    f"missing column(s) {', '.join(missing)} (header: {', '.join(header)})", source=f"{path}:1"
                )
            return header, [(reader.line_num, row) for row in reader if row]
        except csv.Error as exc:  # a field past csv's 128 KiB limit, a NUL byte, a broken quote
            raise InputError(f"malformed CSV: {exc}", source=f"{path}:{reader.line_num}") from None


# Trace numbers are plain decimal digits, as the trace writes them (int() would also take "+5", " 5", "1_000" and
# other scripts' digits). 10^12 bounds every count (cpu_milli, memory_mib, seconds) so that sums over a million rows
# still fit the int64 arrays they are kept in.
_DIGITS_RE = re.compile(r"[0-9]{1,13}")
MAX_TRACE_INT = 10**12


def _int(path: Path, line: int, row_name: str, column: str, text: str, low: int = 0, high: int | None = None) -> int:
    if not _DIGITS_RE.fullmatch(text):
        shown = text if len(text) <= 40 else text[:37] + "..."
        why = "is past the trace's limit of 10^12" if text.isdigit() and text.isascii() else "is not a whole number"
        raise InputError(f"{shown!r} {why}", source=f"{path}:{line}", obj=row_name, field=column)
    value = int(text)
    high = MAX_TRACE_INT if high is None else high
    if value < low or value > high:
        raise InputError(f"{value} must be in {low}..{high}", source=f"{path}:{line}", obj=row_name, field=column)
    return value


def load_nodes(path: str | Path) -> Nodes:
    path = Path(path)
    header, rows = _rows(path, NODE_COLUMNS)
    col = {c: header.index(c) for c in NODE_COLUMNS}
    names, cpu, mem, gpus, model = [], [], [], [], []
    models: dict[str, int] = {}
    for line, row in rows:
        if len(row) != len(header):
            raise InputError(f"has {len(row)} fields, the header has {len(header)}", source=f"{path}:{line}")
        name = row[col["sn"]].strip() or f"row {line}"
        names.append(name)
        cpu.append(_int(path, line, name, "cpu_milli", row[col["cpu_milli"]]))
        mem.append(_int(path, line, name, "memory_mib", row[col["memory_mib"]]))
        gpus.append(_int(path, line, name, "gpu", row[col["gpu"]], 0, MAX_GPUS_PER_NODE))
        model.append(models.setdefault(row[col["model"]].strip(), len(models)))
    if not names:
        raise InputError("has no nodes", source=str(path))
    if not any(gpus):
        # Every figure the simulator reports (allocation, fragmentation, the inflation target) is a share of GPU
        # capacity: with none there is nothing to compare.
        raise InputError(
            "no node has a GPU; the simulator compares GPU placement policies", source=str(path), field="gpu"
        )
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InputError(f"duplicate node {dup!r}", source=str(path), field="sn")
    return Nodes(
        names,
        np.array(cpu, np.int64),
        np.array(mem, np.int64),
        np.array(gpus, np.int64),
        np.array(model, np.int64),
        list(models),
        str(path),
    )


def load_pods(path: str | Path) -> Pods:
    path = Path(path)
    header, rows = _rows(path, POD_COLUMNS)
    col = {c: header.index(c) for c in header}
    timed = all(c in col for c in TIME_COLUMNS)
    names, cpu, mem, num, milli, spec, created, deleted, lines = [], [], [], [], [], [], [], [], []
    specs: dict[frozenset[str], int] = {frozenset(): 0}
    for line, row in rows:
        if len(row) != len(header):
            raise InputError(f"has {len(row)} fields, the header has {len(header)}", source=f"{path}:{line}")
        name = row[col["name"]].strip() or f"row {line}"
        where = f"{path}:{line}"
        n_gpu = _int(path, line, name, "num_gpu", row[col["num_gpu"]], 0, MAX_GPUS_PER_NODE)
        m_gpu = _int(path, line, name, "gpu_milli", row[col["gpu_milli"]], 0, MILLI)
        if n_gpu == 0 and m_gpu:
            raise InputError(f"{m_gpu} with num_gpu 0", source=where, obj=name, field="gpu_milli")
        if n_gpu and not m_gpu:
            raise InputError(f"0 with num_gpu {n_gpu}", source=where, obj=name, field="gpu_milli")
        if n_gpu > 1 and m_gpu != MILLI:
            raise InputError(
                f"{m_gpu} with num_gpu {n_gpu}: a multi-GPU pod takes whole GPUs (1000)",
                source=where,
                obj=name,
                field="gpu_milli",
            )
        names.append(name)
        lines.append(line)
        cpu.append(_int(path, line, name, "cpu_milli", row[col["cpu_milli"]]))
        mem.append(_int(path, line, name, "memory_mib", row[col["memory_mib"]]))
        num.append(n_gpu)
        milli.append(m_gpu)
        text = row[col["gpu_spec"]].strip() if "gpu_spec" in col else ""
        allowed = frozenset(m for m in text.split("|") if m)
        spec.append(specs.setdefault(allowed, len(specs)))
        if timed:
            created.append(_int(path, line, name, "creation_time", row[col["creation_time"]]))
            end = row[col["deletion_time"]].strip()
            deleted.append(_int(path, line, name, "deletion_time", end) if end else -1)
            if end and deleted[-1] < created[-1]:
                raise InputError(
                    f"{deleted[-1]} is before creation_time {created[-1]}",
                    source=where,
                    obj=name,
                    field="deletion_time",
                )
    if not names:
        raise InputError("has no pods", source=str(path))
    return Pods(
        names,
        np.array(cpu, np.int64),
        np.array(mem, np.int64),
        np.array(num, np.int64),
        np.array(milli, np.int64),
        np.array(spec, np.int64),
        list(specs),
        np.array(created, np.int64) if timed else None,
        np.array(deleted, np.int64) if timed else None,
        str(path),
        np.array(lines, np.int64),
    )


def data_dir(given: str | Path | None = None) -> Path:
    """The folder of trace files: ``--data-dir``, else ``$ACCELSCHED_DATA_DIR``, else the copy in the package."""
    if given:
        field_name, base = "--data-dir", Path(given)
    elif os.environ.get(DATA_DIR_ENV):
        field_name, base = DATA_DIR_ENV, Path(os.environ[DATA_DIR_ENV])
    else:
        return BUNDLED_DIR
    if not base.is_dir():
        raise InputError(f"{str(base)!r} is not a folder", field=field_name)
    return base


def trace_file(base: Path, stem: str) -> Path | None:
    """``stem.csv`` in ``base``, else ``stem.csv.xz``; None when neither is there."""
    for path in (base / f"{stem}.csv", base / f"{stem}.csv.xz"):
        if path.is_file():
            return path
    return None


def pod_lists(base: Path) -> list[str]:
    """The pod lists in a data folder, by the name ``--pods`` takes (default, gpushare40, ...)."""
    names = {p.name.removeprefix(POD_LIST_PREFIX).split(".")[0] for p in base.glob(f"{POD_LIST_PREFIX}*.csv*")}
    return sorted(n for n in names if trace_file(base, POD_LIST_PREFIX + n))


def trace_paths(trace: str, pods: str, data_dir_given: str | Path | None = None) -> tuple[Path, Path]:
    """``--trace openb --pods default`` -> the node list and ``openb_pod_list_default.csv`` (or ``.csv.xz``) in the
    data folder (see data_dir). ``--pods`` may also be a path to any pod CSV of the same format."""
    if trace != "openb":
        raise InputError(f"unknown trace {trace!r} (known: openb)", field="--trace")
    base = data_dir(data_dir_given)
    path = Path(pods) if pods.endswith((".csv", ".xz")) or "/" in pods else trace_file(base, POD_LIST_PREFIX + pods)
    if path is None:
        known = ", ".join(pod_lists(base)) or "none"
        raise InputError(f"no pod list {pods!r} in {base} (known: {known})", field="--pods")
    nodes = trace_file(base, NODE_LIST)
    if nodes is None:
        raise InputError(f"no node list {NODE_LIST}.csv (or .csv.xz) in {base}", field="--data-dir")
    return nodes, path
