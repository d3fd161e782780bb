"""Fuzzing every input path through the real CLI: mutated manifests, configs, CSVs and sysfs trees either work
(exit 0) or get exactly one line ``accelsched: error: FILE: ...`` and exit 2 (design.md, principle 6), never a
traceback, a hang or a memory blow-up.

Mutations start from every example input (examples/lab, deploy/**, their embedded KubeSchedulerConfiguration and
device-plugin config) and from the small seeds in tests/fuzz_corpus/seeds: keys deleted, duplicated and misspelt,
values of the wrong type, extreme numbers and strings, YAML-level tricks (duplicate keys, anchors and aliases, deep
nesting) and byte-level corruption (non-UTF-8, truncation, UTF-16 with a BOM).

Two variants. The fast one runs in-process through click's CliRunner with values that cannot hang or exhaust
memory even where a limit is missing (small multipliers, no huge exponents), derandomized so every run tries the
same inputs. The slow one (``-m integration``) adds the dangerous values (``1e3000000``, ``replicas: 100000000``,
alias bombs, 10,000-deep nesting, FIFOs, ``/dev/zero``) and runs each case forked under ``RLIMIT_AS`` (2 GiB over
the test process) and a timeout (tests/cli_limits.py). Inputs that once failed live in
tests/fuzz_corpus/index.yaml and are replayed, bounded, by ``test_corpus_case``. Set ``ACCELSCHED_FUZZ_SAVE=DIR``
to keep every violating mutant for the corpus.

Beyond the files (issue 28): the web page's HTTP routes, every one with random query strings, methods and what-if
bodies, against a real server (each answer a 4xx with a JSON error or a success, never a 5xx, in bounded time);
and ``accelsched run``'s conversion of the objects an API server lists, shaped as an older or newer server might
(fields absent, unknown fields, nulls, other types): never an exception, a bad object left out and named, an
unknown field no reason to leave one out, and the engine schedules the rest. Live cases found are replayed from
tests/fuzz_corpus/live/index.yaml by ``test_live_corpus_case``.

Kueue's objects (issue 28): tests/fuzz_corpus/seeds/queues.yaml (every kind read, in one cluster),
examples/queues and the fabric lab's Topology, through ``schedule`` and ``explain``, with the generic mutations and
``mutate_kueue``'s (references to missing objects, duplicate names, cohort loops, odd quotas, thousands of
queues); a misspelt field of a Kueue kind must be refused. Helm values are fuzzed in tests/test_fuzz_helm.py.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import reprlib
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sysfs_builder
import yaml
from cli_limits import Outcome, contract_violation, invoke, run_limited
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from accelsched.deviceplugin import config as plugin_config
from accelsched.errors import InputError
from accelsched.sim.command import simulate

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
CORPUS = TESTS / "fuzz_corpus"
SEEDS = CORPUS / "seeds"
NODES = str(ROOT / "examples/lab/00-nodes.yaml")
TENANT = str(ROOT / "deploy/tenant-inference.yaml")
SAVE = os.environ.get("ACCELSCHED_FUZZ_SAVE")

# -- what to mutate -------------------------------------------------------------------------------------------------

MANIFESTS = sorted(
    str(p.relative_to(ROOT)) for p in [*(ROOT / "examples/lab").glob("*.yaml"), *(ROOT / "deploy").rglob("*.yaml")]
)
# The files a manifest needs beside it to be valid (default: the lab's nodes), so mutants reach past the first error.
CONTEXT = {
    "examples/lab/00-nodes.yaml": [TENANT],
    "examples/lab/04-cordon-node-b.yaml": [],
    "examples/lab/09-gangs.yaml": [str(ROOT / "examples/lab/07-topology.yaml")],
    "tests/fuzz_corpus/seeds/cluster.yaml": [],
    "tests/fuzz_corpus/seeds/queues.yaml": [],
    "examples/queues/two-teams.yaml": [],
}
# Keys under these are user data (label keys, resource names, annotation keys), not schema fields.
FREE_FORM = frozenset(
    {"labels", "annotations", "nodeSelector", "matchLabels", "data", "binaryData", "stringData", "capacity",
     "allocatable", "requests", "limits", "attributes", "partitioning", "args", "properties", "schema", "nodeLabels"}
)  # fmt: skip
# Kueue's kinds accelsched reads (accelsched/queues, fabric/levels.py), checked against Kueue's CRDs.
KUEUE_KINDS = frozenset(
    {"ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass", "Workload", "Topology"}
)
# Kinds whose schema accelsched reads and validates as the API server does: a misspelt field must be refused.
STRICT_KINDS = frozenset(
    {"Pod", "Node", "Namespace", "PriorityClass", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job",
     "ReplicationController", "KubeSchedulerConfiguration", "DevicePluginConfig", "ResourceSlice", "PodGroup",
     "NodeResourceTopology", *KUEUE_KINDS}
)  # fmt: skip
# Fields that multiply work: huge values here are where limits matter.
MULTIPLIERS = frozenset(
    {"replicas", "parallelism", "completions", "minMember", "devices", "units", "numaNodes", "devicesPerSwitch",
     "capacity", "allocatable", "available", "qualcomm.com/ai-accelerator", "example.com/accel", "nvidia.com/gpu",
     "pods", "cpu", "memory", "value", "maxSkew", "weight", "percentageOfNodesToScore", "count", "nominalQuota",
     "borrowingLimit", "lendingLimit", "priority", "maxPriorityThreshold"}
)  # fmt: skip


class Embedded(dict):
    """A YAML document inside a string (an annotation, a ConfigMap's data): mutated like any mapping, then
    written back as a string, so the parsers of annotations and embedded configs get fuzzed too."""


def _embed(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _embed(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_embed(v) for v in node]
    if isinstance(node, str) and "\n" in node and ":" in node:
        try:
            inner = yaml.safe_load(node)
        except yaml.YAMLError:
            return node
        if isinstance(inner, dict):
            return Embedded(_embed(inner))
    return node


def _materialize(node: Any, memo: dict[int, Any] | None = None) -> Any:
    """Embedded documents back to strings; shared containers stay shared (an alias bomb stays a few lines)."""
    memo = {} if memo is None else memo
    if id(node) in memo:
        return memo[id(node)]
    if isinstance(node, Embedded):
        out: Any = yaml.safe_dump(_materialize(dict(node), memo), sort_keys=False, allow_unicode=True)
    elif isinstance(node, dict):
        out = {k: _materialize(v, memo) for k, v in node.items()}
    elif isinstance(node, list):
        out = [_materialize(v, memo) for v in node]
    else:
        return node
    memo[id(node)] = out
    return out


def _paths(node: Any, prefix: tuple = (), seen: set[int] | None = None) -> list[tuple]:
    """Every key and index path; a container met twice (an alias) is walked once."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return []
    seen.add(id(node))
    out: list[tuple] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        out.append((*prefix, key))
        if isinstance(value, dict | list):
            out.extend(_paths(value, (*prefix, key), seen))
    return out


def _parent(root: Any, path: tuple) -> Any:
    for key in path[:-1]:
        root = root[key]
    return root


def _free_form(path: tuple) -> bool:
    return any(isinstance(k, str) and k in FREE_FORM for k in path[:-1])


def _kind_of(docs: list[Any], path: tuple, default: str) -> str:
    """The kind of the object ``path`` is in (a List's item, or the document; ``default`` when it has none)."""
    doc = docs[path[0]]
    if isinstance(doc, dict) and len(path) > 2 and path[1] == "items" and isinstance(doc.get("items"), list):
        item = doc["items"][path[2]] if isinstance(path[2], int) and path[2] < len(doc["items"]) else None
        return str(item.get("kind")) if isinstance(item, dict) else ""
    return str(doc.get("kind", default)) if isinstance(doc, dict) else ""


# -- values ---------------------------------------------------------------------------------------------------------

SENTINEL_DEEP = "__h6_deep_nesting__"
SENTINEL_BIGINT = "__h6_bigint__"
EXTREME_STRINGS = [
    "", " ", "x" * 10_000, "a\nb", "trailing\n", "\ufeffbom", "ñame-ü", "名前", "🙂", "-bad-", "UPPER_case", "a/b/c",
    "a" * 64, "a" * 254, "a" * 64 + "." + "b" * 200, "1.10", "yes", "no", "on", "null", "~", "0x10", "0o17",
    "..", "a b", "a:b", "-", "*", "\x00", "\t", "\u2028", "${HOME}", "{{x}}", "[", "&a", "*a", "!!binary", "%",
]  # fmt: skip
TAME_NUMBERS = [0, -1, 1, 3, 64, -0.0, 0.5, 1.5, 1e-9, math.inf, -math.inf, math.nan]
TAME_QUANTITIES = [SENTINEL_BIGINT, "1e999", "-1", "9223372036854775808", "18446744073709551616", "1e-9", "500m",
                   "0.5", "1Ki", "1.5Gi", "2 cores", "1E3", "+5", "1_000", "0x10", ".5", "5.", "1e", "Ki", "1k",
                   "1Kb"]  # fmt: skip
TAME_MULTIPLIERS = [-1, 0, 100, "100", "-1", 1.5, math.inf, math.nan, "1e999", "9223372036854775808"]
RISKY = [
    2**63 - 1, 2**63, 2**64, -(2**63), 10**400, 1e308, 100_000_000, 2_147_483_647, SENTINEL_DEEP,
    "1e999999", "1e3000000", "1e9999999", "9" * 5000, "9223372036854775807", "0-99999999", "0-4294967295",
]  # fmt: skip


def _alias_bomb() -> list:
    """Nine levels of nine aliases: a few hundred bytes of YAML, 9**9 strings if anything expands it."""
    level: list = ["lol"] * 9
    for _ in range(8):
        level = [level] * 9
    return level


def values(risky: bool, aliases: bool = True) -> st.SearchStrategy[Any]:
    """Values to put where a field was; ``aliases``: the risky ones include a YAML alias bomb (shared containers),
    which a file can hold (the reader refuses it) but an API server's JSON cannot (it decodes to a tree)."""
    tame = st.one_of(
        st.sampled_from([None, True, False, [], {}, [1, "a"], {"a": 1}, {"a": {"b": [None]}}]),
        st.sampled_from(TAME_NUMBERS),
        st.sampled_from(EXTREME_STRINGS),
        st.sampled_from(TAME_QUANTITIES),
        st.integers(-5, 100),
        st.text(max_size=12),
        st.lists(st.one_of(st.integers(-2, 8), st.text(max_size=4)), max_size=3),
        st.dictionaries(st.text(max_size=5), st.one_of(st.integers(-2, 8), st.text(max_size=4)), max_size=2),
    )
    if not risky:
        return tame
    # Half the values dangerous: one_of flattens ``tame``'s branches, which would leave these one draw in a hundred.
    dangerous = st.one_of(st.sampled_from(RISKY), st.builds(_alias_bomb)) if aliases else st.sampled_from(RISKY)
    return st.booleans().flatmap(lambda pick: dangerous if pick else tame)


# -- mutation operators ---------------------------------------------------------------------------------------------


def _short(value: Any) -> str:
    return reprlib.repr(value)[:60]  # bounded: the alias bomb's full repr is 9**9 strings


def _typo(draw: st.DrawFn, key: Any) -> Any:
    text = str(key)
    return draw(
        st.sampled_from(
            [text + text[-1:] if text else "x", text[:-1], text.upper(), text + " ", "\ufeff" + text, text + "é", ""]
        )
    )


@dataclass
class Mutant:
    """One mutated input: the bytes and what was done (shown when a case fails)."""

    data: bytes
    steps: list[str] = field(default_factory=list)
    typo_in_strict_field: bool = False  # a misspelt schema field: must be refused, not only survived

    def __repr__(self) -> str:
        return f"Mutant({len(self.data)} bytes: {'; '.join(self.steps)})"


def _mutate_tree(draw: st.DrawFn, docs: list[Any], risky: bool, steps: list[str], default_kind: str) -> bool:
    """One structural mutation in place; returns whether it misspelt a field of a strict kind."""
    paths = _paths(docs)
    if not paths:
        docs.append(draw(values(risky)))
        steps.append("add a document")
        return False
    op = draw(st.sampled_from(["delete", "duplicate", "rename", "set", "set", "set", "multiplier"]))
    if op == "multiplier":
        hits = [p for p in paths if isinstance(p[-1], str) and p[-1] in MULTIPLIERS]
        if hits:
            path = draw(st.sampled_from(hits))
            pool = [*RISKY[:8], "100000000", "1e9"] if risky else TAME_MULTIPLIERS
            value = draw(st.sampled_from(pool))
            _parent(docs, path)[path[-1]] = value
            steps.append(f"set {path} to {_short(value)}")
            return False
        op = "set"
    path = paths[draw(st.integers(0, len(paths) - 1))]
    parent = _parent(docs, path)
    key = path[-1]
    if op == "delete":
        del parent[key]
        steps.append(f"delete {path}")
    elif op == "duplicate":
        if isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
            steps.append(f"duplicate list item {path}")
        else:
            new = _typo(draw, key)
            parent[new] = copy.deepcopy(parent[key])
            steps.append(f"copy {path} to key {new!r}")
    elif op == "rename" and isinstance(parent, dict):
        new = _typo(draw, key)
        if new in parent:
            return False
        # Keep the key order: a misspelt key stays where the field was.
        items = [(new if k == key else k, v) for k, v in parent.items()]
        parent.clear()
        parent.update(items)
        steps.append(f"rename {path} to {new!r}")
        strict = not _free_form(path) and _kind_of(docs, path, default_kind) in STRICT_KINDS
        return strict and bool(new) and new == str(key) + str(key)[-1:] and not isinstance(parent, Embedded)
    else:
        value = draw(values(risky))
        parent[key] = value
        steps.append(f"set {path} to {_short(value)}")
    return False


_KEY_LINE = re.compile(r"^(\s*)([A-Za-z0-9_./-]+):(\s+\S.*)?$")


def _mutate_text(draw: st.DrawFn, text: str, steps: list[str]) -> str:
    op = draw(st.sampled_from(["duplicate key", "crlf", "tab indent", "anchor", "document marker"]))
    lines = text.split("\n")
    if op == "duplicate key":
        keyed = [i for i, line in enumerate(lines) if _KEY_LINE.match(line) and ": |" not in line]
        if keyed:
            i = draw(st.sampled_from(keyed))
            m = _KEY_LINE.match(lines[i])
            assert m is not None
            value = draw(st.sampled_from(["", ' "1"', " 0", " [a]", " {}", " x", m.group(3) or ""]))
            lines.insert(i + 1, f"{m.group(1)}{m.group(2)}:{value}")
            steps.append(f"duplicate key {m.group(2)!r} at line {i + 1}")
            return "\n".join(lines)
    if op == "crlf":
        steps.append("CRLF line ends")
        return text.replace("\n", "\r\n")
    if op == "tab indent" and len(lines) > 1:
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = "\t" + lines[i]
        steps.append(f"tab at line {i + 1}")
        return "\n".join(lines)
    if op == "anchor":
        valued = [i for i, line in enumerate(lines) if (m := _KEY_LINE.match(line)) and m.group(3) and "|" not in line]
        if len(valued) >= 2:
            a, b = sorted(draw(st.lists(st.sampled_from(valued), min_size=2, max_size=2, unique=True)))
            ma, mb = _KEY_LINE.match(lines[a]), _KEY_LINE.match(lines[b])
            assert ma is not None and mb is not None
            lines[a] = f"{ma.group(1)}{ma.group(2)}: &h6 {ma.group(3).strip()}"
            lines[b] = f"{mb.group(1)}{mb.group(2)}: *h6"
            steps.append(f"alias line {b + 1} to the value of line {a + 1}")
            return "\n".join(lines)
    steps.append("'---' in the middle")
    i = draw(st.integers(0, len(lines)))
    lines.insert(i, "---")
    return "\n".join(lines)


def _mutate_bytes(draw: st.DrawFn, data: bytes, steps: list[str]) -> bytes:
    op = draw(st.sampled_from(["invalid utf-8", "truncate", "utf-16", "latin-1", "bom", "nul", "control"]))
    at = draw(st.integers(0, len(data)))
    if op == "invalid utf-8":
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\xc0\x80", b"\xf8\x88\x80\x80\x80"]))
        steps.append(f"bytes {bad!r} at offset {at}")
        return data[:at] + bad + data[at:]
    if op == "truncate":
        steps.append(f"truncate at byte {at}")
        return data[:at]
    if op == "utf-16":
        codec = draw(st.sampled_from(["utf-16", "utf-16-be", "utf-32"]))
        steps.append(f"encoded as {codec}")
        return data.decode("utf-8", "replace").encode(codec)
    if op == "latin-1":
        steps.append("Latin-1 with an é")
        text = data.decode("utf-8", "replace")
        return (text[:at] + "é" + text[at:]).encode("latin-1", "replace")
    if op == "bom":
        steps.append("UTF-8 BOM")
        return b"\xef\xbb\xbf" + data
    if op == "nul":
        steps.append(f"NUL at offset {at}")
        return data[:at] + b"\x00" + data[at:]
    char = draw(st.sampled_from(["\x85", "\u2028", "\ufffe", "\x1b[31m", "\x7f"]))
    steps.append(f"control character {char!r} at offset {at}")
    text = data.decode("utf-8", "replace")
    return (text[:at] + char + text[at:]).encode("utf-8", "surrogatepass")


def _dump(docs: list[Any]) -> str:
    text = yaml.safe_dump_all([_materialize(d) for d in docs], sort_keys=False, allow_unicode=True, width=4096)
    text = text.replace(SENTINEL_DEEP, "[" * 10_000 + "]" * 10_000)
    return text.replace(SENTINEL_BIGINT, "1" + "0" * 5000)


Semantic = Callable[[st.DrawFn, list[Any], bool, list[str]], None]


@st.composite
def mutants(
    draw: st.DrawFn, seed_text: str, risky: bool, default_kind: str = "", semantic: Semantic | None = None
) -> Mutant:
    """A mutant of ``seed_text`` (YAML): tree mutations (``semantic`` ones, which know the kinds, among them),
    then maybe a text-level and a byte-level one."""
    steps: list[str] = []
    docs = [_embed(d) for d in yaml.safe_load_all(seed_text)]
    typo = False
    layers = draw(st.sets(st.sampled_from(["tree", "text", "bytes"]), min_size=1))
    if "tree" in layers:
        for _ in range(draw(st.integers(1, 2))):
            if semantic is not None and draw(st.booleans()):
                semantic(draw, docs, risky, steps)
                continue
            typo |= _mutate_tree(draw, docs, risky, steps, default_kind)
        text = _dump(docs)
    else:
        text = seed_text
    if "text" in layers:
        text = _mutate_text(draw, text, steps)
        typo = False
    data = text.encode("utf-8", "surrogatepass")
    if "bytes" in layers:
        data = _mutate_bytes(draw, data, steps)
        typo = False
    return Mutant(data, steps, typo)


# -- targets --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One input to mutate and how the CLI is run on it; ``names``: the files an error line may start with."""

    name: str
    text: str
    argv: Callable[[str], list[str]]
    context: tuple[str, ...] = ()
    suffix: str = ".yaml"

    def names(self, mutant: str) -> list[str]:
        return [mutant, *self.context]

    def __repr__(self) -> str:
        return self.name


def _manifest_target(rel: str) -> Target:
    context = tuple(CONTEXT.get(rel, [NODES]))
    return Target(rel, (ROOT / rel).read_text(), lambda p: ["schedule", *_files(context), "-f", p, "-o", "json"],
                  context)  # fmt: skip


def _files(paths: Sequence[str]) -> list[str]:
    return [arg for p in paths for arg in ("-f", p)]


def _embedded(path: str, kind: str) -> str:
    """The YAML inside a ConfigMap of ``path`` (its data's first key)."""
    for doc in yaml.safe_load_all((ROOT / path).read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            text = next(iter(doc["data"].values()))
            if kind in text or kind == "":
                return text
    raise LookupError(path)


MANIFEST_TARGETS = [_manifest_target(rel) for rel in [*MANIFESTS, "tests/fuzz_corpus/seeds/cluster.yaml"]]
CONFIG_TARGETS = [
    Target(name, text, lambda p: ["schedule", "-f", NODES, "-f", TENANT, "--config", p, "-o", "json"], (NODES, TENANT))
    for name, text in (
        ("deploy/scheduler/config.yaml", _embedded("deploy/scheduler/config.yaml", "KubeSchedulerConfiguration")),
        ("seeds/scheduler-config.yaml", (SEEDS / "scheduler-config.yaml").read_text()),
    )
]
PLUGIN_SEEDS = {
    "deploy/device-plugin-daemonset.yaml": _embedded("deploy/device-plugin-daemonset.yaml", ""),
    "seeds/device-plugin.yaml": (SEEDS / "device-plugin.yaml").read_text(),
}


def _save(target: str, mutant: Mutant, suffix: str) -> None:
    if not SAVE:
        return
    folder = Path(SAVE)
    folder.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9.-]+", "_", target)
    path = folder / f"{stem}-{abs(hash(mutant.data)) % 10**8:08d}{suffix}"
    path.write_bytes(mutant.data)
    path.with_suffix(path.suffix + ".txt").write_text("\n".join(mutant.steps) + "\n")


def check_target(target: Target, mutant: Mutant, bounded: bool) -> None:
    """Write the mutant, run the CLI on it and check the contract (and, for a misspelt field, the refusal)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        path = str(Path(tmp) / f"mutant{target.suffix}")
        Path(path).write_bytes(mutant.data)
        args = target.argv(path)
        out = run_limited(args, timeout=20) if bounded else invoke(args)
    why = contract_violation(out, target.names(path))
    if why is None and mutant.typo_in_strict_field and out.exit_code != 2:
        why = "a misspelt field was accepted (exit 0): the API server refuses unknown fields"
    if why is not None:
        _save(target.name, mutant, target.suffix)
    assert why is None, f"{target.name}: {why}; mutations: {mutant.steps}\n{out.describe()}"


# Hypothesis: derandomized (the same cases every run, no example database), a generous deadline per case.
FAST = settings(
    derandomize=True,
    database=None,
    deadline=5000,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failing case prints its mutations, and stays fast
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def slow(examples: int) -> settings:
    return settings(FAST, max_examples=examples, deadline=None)


@pytest.mark.parametrize("target", MANIFEST_TARGETS, ids=lambda t: t.name)
@settings(FAST, max_examples=6)
@given(data=st.data())
def test_mutated_manifest_is_accepted_or_one_line_error(target: Target, data: st.DataObject) -> None:
    check_target(target, data.draw(mutants(target.text, risky=False)), bounded=False)


@pytest.mark.parametrize("target", CONFIG_TARGETS, ids=lambda t: t.name)
@settings(FAST, max_examples=20)
@given(data=st.data())
def test_mutated_scheduler_config_is_accepted_or_one_line_error(target: Target, data: st.DataObject) -> None:
    check_target(target, data.draw(mutants(target.text, risky=False)), bounded=False)


@pytest.mark.integration
@pytest.mark.parametrize("target", MANIFEST_TARGETS + CONFIG_TARGETS, ids=lambda t: t.name)
@settings(slow(60))
@given(data=st.data())
def test_mutated_input_bounded_slow(target: Target, data: st.DataObject) -> None:
    check_target(target, data.draw(mutants(target.text, risky=True)), bounded=True)


# -- a misspelt field, everywhere the schema is strict ----------------------------------------------------------------


def strict_fields(text: str, default_kind: str = "") -> list[tuple]:
    """Every key path of a schema field (not user data, not inside an embedded document) of a strict kind."""
    docs = [_embed(d) for d in yaml.safe_load_all(text)]
    return [
        p
        for p in _paths(docs)
        if isinstance(p[-1], str)
        and isinstance(_parent(docs, p), dict)
        and not _free_form(p)
        and _kind_of(docs, p, default_kind) in STRICT_KINDS
    ]


def misspelt(text: str, path: tuple) -> bytes:
    """``text`` with the key at ``path`` doubled in its last letter (``labels`` -> ``labelss``), in place."""
    docs = [_embed(d) for d in yaml.safe_load_all(text)]
    parent = _parent(docs, path)
    items = [(k + k[-1] if k == path[-1] else k, v) for k, v in parent.items()]
    parent.clear()
    parent.update(items)
    return _dump(docs).encode()


CLUSTER = MANIFEST_TARGETS[-1]
SCHEDULER_CONFIG = CONFIG_TARGETS[-1]


@pytest.mark.parametrize(
    ("target", "path"),
    [(t, p) for t in (CLUSTER, SCHEDULER_CONFIG) for p in strict_fields(t.text)],
    ids=lambda v: v.name if isinstance(v, Target) else ".".join(map(str, v)),
)
def test_misspelt_field_is_refused(target: Target, path: tuple) -> None:
    """kubectl apply and kube-scheduler decode strictly: an unknown field is an error, not a field left out."""
    mutant = Mutant(misspelt(target.text, path), [f"misspell {path}"], typo_in_strict_field=True)
    check_target(target, mutant, bounded=False)


@pytest.mark.parametrize("path", strict_fields(PLUGIN_SEEDS["seeds/device-plugin.yaml"], "DevicePluginConfig"),
                         ids=lambda p: ".".join(map(str, p)))  # fmt: skip
def test_misspelt_device_plugin_field_is_refused(path: tuple) -> None:
    text = PLUGIN_SEEDS["seeds/device-plugin.yaml"]
    check_plugin_config("seeds/device-plugin.yaml", Mutant(misspelt(text, path), [f"misspell {path}"], True))


# -- Kueue's objects: references, names and cohorts (issue 28) ------------------------------------------------------

# The fields of Kueue's kinds that name another object: a mutation points one at nothing, at a name the API server
# refuses, or (cohorts) back up the tree.
KUEUE_REFERENCES = {
    "ClusterQueue": [("spec", "cohortName"), ("spec", "resourceGroups", 0, "flavors", 0, "name")],
    "Cohort": [("spec", "parentName"), ("spec", "resourceGroups", 0, "flavors", 0, "name")],
    "LocalQueue": [("spec", "clusterQueue")],
    "ResourceFlavor": [("spec", "topologyName")],
    "Workload": [("spec", "queueName"), ("spec", "priorityClassRef", "name")],
    "Job": [("metadata", "labels", "kueue.x-k8s.io/queue-name"),
            ("metadata", "labels", "kueue.x-k8s.io/priority-class")],
    "Pod": [("metadata", "labels", "kueue.x-k8s.io/queue-name"),
            ("metadata", "labels", "kueue.x-k8s.io/pod-group-name"),
            ("metadata", "annotations", "kueue.x-k8s.io/pod-group-total-count")],
}  # fmt: skip
KUEUE_NAMES = ["missing", "", "Bad Name!", "a" * 254, "a" * 64, "team-a", "research", "root", "a100", "fabric", "名前",
               "a.b", "-x", "jobs"]  # fmt: skip
KUEUE_QUANTITIES = [*TAME_QUANTITIES, 0, -1, 2**63, "1e3", "8Ei", "9Ei", "0.001m", "1n", "1.0000000001"]


def _objects(docs: list[Any]) -> list[dict[str, Any]]:
    """The objects of a manifest: its documents, and the items of a List."""
    out = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out += [item for item in doc["items"] if isinstance(item, dict)]
        elif isinstance(doc, dict):
            out.append(doc)
    return out


def _kind(obj: dict[str, Any]) -> str:
    """The kind as a string (a mutation may have made it a list)."""
    return obj["kind"] if isinstance(obj.get("kind"), str) else ""


def _set_path(obj: dict[str, Any], path: tuple, value: Any) -> bool:
    """Set ``path`` in ``obj`` where everything above it exists; returns whether it did."""
    node: Any = obj
    for key in path[:-1]:
        if isinstance(node, list):
            node = node[key] if key < len(node) else None
        elif isinstance(node, dict):
            node = node.get(key)
    if not isinstance(node, dict):  # the paths end in a mapping's key
        return False
    node[path[-1]] = value
    return True


def mutate_kueue(draw: st.DrawFn, docs: list[Any], risky: bool, steps: list[str]) -> None:
    """One mutation that knows Kueue: a reference to a missing or badly named object, two objects of one name, a
    cohort loop, an odd quota, many queues."""
    objects = _objects(docs)
    kueue = [o for o in objects if _kind(o) in KUEUE_KINDS]
    if not kueue:
        steps.append("no Kueue object to mutate")
        return
    op = draw(st.sampled_from(["reference", "reference", "duplicate name", "cohort loop", "quota", "many queues"]))
    if op == "reference":
        obj = draw(st.sampled_from([o for o in objects if _kind(o) in KUEUE_REFERENCES] or kueue))
        path = draw(st.sampled_from(KUEUE_REFERENCES.get(_kind(obj), [("spec", "x")])))
        value = draw(st.sampled_from(KUEUE_NAMES) | values(risky))
        if _set_path(obj, path, value):
            steps.append(f"{obj.get('kind')} {path} -> {_short(value)}")
    elif op == "duplicate name":
        obj = draw(st.sampled_from(kueue))
        twin = copy.deepcopy(obj)
        if draw(st.booleans()) and isinstance(twin.get("spec"), dict):
            twin["spec"][draw(st.sampled_from(["x", "queueingStrategy", "parentName"]))] = draw(values(False))
        docs.append(twin)
        steps.append(f"a second {obj.get('kind')} of the same name")
    elif op == "cohort loop":
        # root -> research -> root, or a cohort its own parent, or a ClusterQueue naming itself as its cohort.
        cohorts = [o for o in kueue if _kind(o) == "Cohort"]
        queues = [o for o in kueue if _kind(o) == "ClusterQueue"]
        names = [str((o.get("metadata") or {}).get("name")) for o in cohorts]
        if cohorts and draw(st.booleans()):
            obj = draw(st.sampled_from(cohorts))
            parent = draw(st.sampled_from(names))
            obj.setdefault("spec", {})["parentName"] = parent
            steps.append(f"Cohort {obj['metadata'].get('name')} parentName -> {parent}")
        else:
            for i, name in enumerate(["loop-a", "loop-b"]):
                docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name},
                             "spec": {"parentName": ["loop-b", "loop-a"][i]}})  # fmt: skip
            for q in queues[:1]:
                q.setdefault("spec", {})["cohortName"] = "loop-a"
            steps.append("cohorts loop-a and loop-b each other's parent")
    elif op == "quota":
        limits = ("nominalQuota", "borrowingLimit", "lendingLimit")
        quotas = [(o, p) for o in kueue for p in _paths(o) if p[-1] in limits]
        if quotas:
            obj, path = quotas[draw(st.integers(0, len(quotas) - 1))]
            value = draw(st.sampled_from(KUEUE_QUANTITIES if not risky else [*KUEUE_QUANTITIES, *RISKY[:8]]))
            _parent(obj, path)[path[-1]] = value
            steps.append(f"{obj.get('kind')} {path} -> {_short(value)}")
    else:
        queues = [o for o in kueue if _kind(o) in ("ClusterQueue", "LocalQueue", "ResourceFlavor", "Cohort")]
        if queues:
            obj = draw(st.sampled_from(queues))
            n = draw(st.sampled_from([2, 50, 1000] if not risky else [1000, 20000]))
            for i in range(n):
                twin = copy.deepcopy(obj)
                twin.setdefault("metadata", {})["name"] = f"{(obj.get('metadata') or {}).get('name')}-{i}"
                docs.append(twin)
            steps.append(f"{n} copies of {obj.get('kind')} under other names")


QUEUE_SEEDS = ["tests/fuzz_corpus/seeds/queues.yaml", "examples/queues/two-teams.yaml",
               "examples/lab/12-fabric-nodes.yaml"]  # fmt: skip
QUEUE_TARGETS = [_manifest_target(rel) for rel in QUEUE_SEEDS] + [
    # context: a mutant that drops the pod is refused naming it ("Pod team-a/group-0: no pod ... in the input")
    Target("explain:" + rel, (ROOT / rel).read_text(), lambda p, pod=pod: ["explain", pod, "-f", p, "-o", "json"],
           (f"Pod {pod}:",))
    for rel, pod in (("tests/fuzz_corpus/seeds/queues.yaml", "team-a/group-0"),
                     ("examples/queues/two-teams.yaml", "team-a/job-ablation"))
]  # fmt: skip


@pytest.mark.parametrize("target", QUEUE_TARGETS, ids=lambda t: t.name)
@settings(FAST, max_examples=15)
@given(data=st.data())
def test_mutated_kueue_objects_are_accepted_or_one_line_error(target: Target, data: st.DataObject) -> None:
    check_target(target, data.draw(mutants(target.text, risky=False, semantic=mutate_kueue)), bounded=False)


@pytest.mark.integration
@pytest.mark.parametrize("target", QUEUE_TARGETS, ids=lambda t: t.name)
@settings(slow(60))
@given(data=st.data())
def test_mutated_kueue_objects_bounded_slow(target: Target, data: st.DataObject) -> None:
    check_target(target, data.draw(mutants(target.text, risky=True, semantic=mutate_kueue)), bounded=True)


QUEUES = QUEUE_TARGETS[0]


@pytest.mark.parametrize("path", strict_fields(QUEUES.text), ids=lambda p: ".".join(map(str, p)))
def test_misspelt_kueue_field_is_refused(path: tuple) -> None:
    """Kueue's CRDs are structural: the API server prunes nothing, kubectl apply refuses an unknown field."""
    check_target(QUEUES, Mutant(misspelt(QUEUES.text, path), [f"misspell {path}"], typo_in_strict_field=True), False)


# -- device-plugin --config: the loader itself -----------------------------------------------------------------------


def check_plugin_config(name: str, mutant: Mutant) -> None:
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_bytes(mutant.data)
        start = time.perf_counter()
        try:
            plugin_config.load(str(path))
            error = None
        except InputError as exc:
            error = exc
        except Exception as exc:  # anything else is the bug the fuzzer looks for
            _save(name, mutant, ".yaml")
            raise AssertionError(f"{name}: {type(exc).__name__} escaped load(); mutations: {mutant.steps}") from exc
        seconds = time.perf_counter() - start
    problems = []
    if error is not None and (not str(error).startswith(str(path)) or re.search(r"[\r\n]", str(error))):
        problems.append(f"error does not start with the file or is not one line: {str(error)!r:.300}")
    if error is None and mutant.typo_in_strict_field:
        problems.append("a misspelt field was accepted")
    if seconds > 5:
        problems.append(f"took {seconds:.1f}s")
    if problems:
        _save(name, mutant, ".yaml")
    assert not problems, f"{name}: {problems}; mutations: {mutant.steps}"


@pytest.mark.parametrize("name", sorted(PLUGIN_SEEDS))
@settings(FAST, max_examples=40)
@given(data=st.data())
def test_mutated_device_plugin_config_loads_or_names_the_field(name: str, data: st.DataObject) -> None:
    # load() parses only (no devices are made), so the dangerous values are safe to try in-process here.
    mutant = data.draw(mutants(PLUGIN_SEEDS[name], risky=True, default_kind="DevicePluginConfig"))
    check_plugin_config(name, mutant)


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(PLUGIN_SEEDS))
@settings(slow(400))
@given(data=st.data())
def test_mutated_device_plugin_config_slow(name: str, data: st.DataObject) -> None:
    check_plugin_config(name, data.draw(mutants(PLUGIN_SEEDS[name], risky=True, default_kind="DevicePluginConfig")))


# -- topology --sysfs-root: mutated fixture trees --------------------------------------------------------------------

TREES = {"qaic_box": sysfs_builder.qaic_box, "nic_on_other_socket": sysfs_builder.nic_on_other_socket,
         "no_numa": sysfs_builder.no_numa}  # fmt: skip
SYSFS_TAME = ["", "\n", "garbage", "0x", "-1", "-2", "99999999999999999999", "0-3,x", "3-0", "0-", ",", "0,,1",
              "+1", "1_0", "0x" + "f" * 40, "\x00", "\xff", "x" * 100_000, "9" * 5000, "Node 0 MemTotal: kB",
              "Node 0 MemTotal: " + "9" * 5000 + " kB", "Node 0 MemTotal: -5 kB", "10 20 x", "10 " * 5000,
              "0x0302", "0x120000", "0xffffff", "1-0", "0-7\n8-15", "ñ"]  # fmt: skip
SYSFS_RISKY = ["0-99999999", "0-4294967295", "0-" + "9" * 30, "1e9"]


@st.composite
def sysfs_mutations(draw: st.DrawFn, risky: bool) -> tuple[str, list[tuple[str, int, Any]]]:
    """A tree name and 1-3 edits: (op, file index, argument). Indexes are taken modulo the tree's file count."""
    ops = ["write", "write", "write", "delete", "directory", "self-link", "dangling", "bytes"]
    if risky:
        ops += ["fifo", "dev-zero", "write-risky"]
    edits = draw(st.lists(st.tuples(st.sampled_from(ops), st.integers(0, 10_000), st.sampled_from(SYSFS_TAME)),
                          min_size=1, max_size=3))  # fmt: skip
    return draw(st.sampled_from(sorted(TREES))), edits


def _apply_sysfs(root: Path, edits: list[tuple[str, int, Any]], risky_pick: Callable[[int], str]) -> list[str]:
    steps = []
    for op, index, arg in edits:
        files = sorted(p for p in (root / "sys").rglob("*") if p.is_file() and not p.is_symlink())
        if not files:
            break
        path = files[index % len(files)]
        rel = path.relative_to(root)
        if op in ("write", "write-risky"):
            content = risky_pick(index) if op == "write-risky" else arg
            path.write_text(content, encoding="utf-8", errors="surrogateescape")
            steps.append(f"write {content!r:.40} to {rel}")
        elif op == "bytes":
            path.write_bytes(b"\xff\xfe\x00" + path.read_bytes()[:3])
            steps.append(f"binary garbage in {rel}")
        else:
            path.unlink()
            if op == "directory":
                path.mkdir()
            elif op == "self-link":
                path.symlink_to(path.name)
            elif op == "dangling":
                path.symlink_to("no-such-file")
            elif op == "fifo":
                os.mkfifo(path)
            elif op == "dev-zero":
                path.symlink_to("/dev/zero")
            steps.append(f"{op} at {rel}")
    return steps


def check_sysfs(tree: str, edits: list[tuple[str, int, Any]], bounded: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="fuzz-sysfs-") as tmp:
        root = Path(tmp)
        TREES[tree](root)
        steps = _apply_sysfs(root, edits, lambda i: SYSFS_RISKY[i % len(SYSFS_RISKY)])
        args = ["topology", "--sysfs-root", str(root), "-o", "json"]
        out = run_limited(args, timeout=20) if bounded else invoke(args)
        why = contract_violation(out, [str(root)])
    assert why is None, f"{tree}: {why}; edits: {steps}\n{out.describe()}"


@settings(FAST, max_examples=15)
@given(case=sysfs_mutations(risky=False))
def test_mutated_sysfs_tree_is_discovered_or_one_line_error(case: tuple[str, list]) -> None:
    check_sysfs(*case, bounded=False)


@pytest.mark.integration
@settings(slow(400))
@given(case=sysfs_mutations(risky=True))
def test_mutated_sysfs_tree_bounded_slow(case: tuple[str, list]) -> None:
    check_sysfs(*case, bounded=True)


# -- simulate --pods PATH.csv ---------------------------------------------------------------------------------------

SIM_NODES = "sn,cpu_milli,memory_mib,gpu,model\nn-0,32000,65536,2,T4\nn-1,64000,131072,4,G2\n"
SIM_PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    "p0,4000,8192,1,500,T4|G2,LS,Running,10,99,10\n"
    "p1,2000,4096,1,1000,,BE,Running,20,,20\n"
    "p2,1000,1024,0,0,,LS,Running,30,40,30\n"
    "p3,8000,8192,2,1000,G2,LS,Running,40,90,40\n"
)
CSV_VALUES = ["", "+5", "1_000", "-1", "1e3", "0x10", "1.5", " 7", "7 ", "nan", "inf", "9" * 30, "9" * 5000, "a,b",
              '"q"', "ñ", "\x00", "T4|", "|", "Running", "LS", "1001", "9"]  # fmt: skip


def _data_option() -> str:
    """The option naming the trace folder (``--data`` until packaging renames it)."""
    names = {opt for p in simulate.params for opt in getattr(p, "opts", [])}
    return "--data-dir" if "--data-dir" in names else "--data"


@st.composite
def csv_mutants(draw: st.DrawFn) -> tuple[str, list[str]]:
    rows = [line.split(",") for line in SIM_PODS.strip().split("\n")]
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["cell", "cell", "cell", "drop row", "dup row", "dup column", "drop column",
                                   "extra cell", "header typo"]))  # fmt: skip
        r = draw(st.integers(1, len(rows) - 1)) if len(rows) > 1 else 0
        c = draw(st.integers(0, len(rows[0]) - 1))
        if op == "cell" and len(rows) > 1:
            rows[r][c % len(rows[r])] = draw(st.sampled_from(CSV_VALUES))
        elif op == "drop row" and len(rows) > 1:
            del rows[r]
        elif op == "dup row" and len(rows) > 1:
            rows.insert(r, list(rows[r]))
        elif op == "dup column":
            for row in rows:
                row.insert(c, row[c % len(row)] if row else "")
        elif op == "drop column":
            for row in rows:
                if len(row) > c:
                    del row[c]
        elif op == "extra cell" and len(rows) > 1:
            rows[r].append("x")
        elif op == "header typo":
            rows[0][c % len(rows[0])] += rows[0][c % len(rows[0])][-1:]
        steps.append(f"{op} r{r} c{c}")
    return "\n".join(",".join(row) for row in rows) + "\n", steps


def check_simulate(csv: str, steps: list[str], bounded: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="fuzz-sim-") as tmp:
        folder = Path(tmp)
        (folder / "openb_node_list_gpu_node.csv").write_text(SIM_NODES)
        pods = folder / "pods.csv"
        pods.write_text(csv, encoding="utf-8", errors="surrogateescape")
        args = ["simulate", _data_option(), str(folder), "--pods", str(pods), "--seeds", "1", "--policy", "bestfit",
                "--jobs", "1", "-o", "json"]  # fmt: skip
        out = run_limited(args, timeout=20) if bounded else invoke(args)
        why = contract_violation(out, [str(pods)])
    assert why is None, f"simulate: {why}; mutations: {steps}\n{out.describe()}"


@settings(FAST, max_examples=25)
@given(case=csv_mutants())
def test_mutated_pod_csv_simulates_or_one_line_error(case: tuple[str, list[str]]) -> None:
    check_simulate(*case, bounded=False)


@pytest.mark.integration
@settings(slow(300))
@given(case=csv_mutants())
def test_mutated_pod_csv_bounded_slow(case: tuple[str, list[str]]) -> None:
    check_simulate(*case, bounded=True)


# -- the corpus: inputs that once broke the contract, replayed bounded ----------------------------------------------


def _corpus() -> list[dict[str, Any]]:
    index = CORPUS / "index.yaml"
    return yaml.safe_load(index.read_text()) or [] if index.exists() else []


def _resolve(arg: str, file: Path) -> str:
    if arg == "{file}":
        return str(file)
    candidate = ROOT / arg
    return str(candidate) if "/" in arg and candidate.exists() else arg


@pytest.mark.parametrize("case", _corpus(), ids=lambda c: c["file"])
def test_corpus_case(case: dict[str, Any]) -> None:
    file = CORPUS / case["file"]
    args = [_resolve(a, file) for a in case["args"]]
    out: Outcome = run_limited(args, timeout=float(case.get("timeout", 10)))
    why = contract_violation(out, [str(file)])
    assert why is None, f"{case['file']} ({case.get('why', '')}): {why}\n{out.describe()}"
    if "exit" in case:
        assert out.exit_code == case["exit"], f"{case['file']}: want exit {case['exit']}\n{out.describe()}"


# -- the UI's HTTP routes: every route, random query strings and bodies -------------------------------------------

UI_PATHS = [
    "/",
    "/sim",
    "/static/index.html",
    "/static/../x",
    "/api/state",
    "/api/pod",
    "/api/explain",
    "/api/whatif",
    "/api/sim",
    "/api/nope",
    "/favicon.ico",
]  # fmt: skip  (/api/events streams: not fuzzed)
UI_PARAMS = ["since", "key", "pod", "actions", "x", ""]
UI_VALUES = [*EXTREME_STRINGS, "default/train-a-0", "default/", "/", "1", "-1", "99999999999999999999999", "1e3",
             "0x10", "%", "%zz", "%ff%fe", "%00", "+", "&", "=", "%E2%80%A8"]  # fmt: skip
UI_NODES = ["node-a", "node-b", "", "nope", "x" * 300]


def _query(draw: st.DrawFn) -> str:
    """A query string: parameter names and values percent-encoded as a client would, or raw escapes left in."""
    from urllib.parse import quote

    pairs = draw(
        st.lists(
            st.tuples(
                st.sampled_from(UI_PARAMS) | st.text(max_size=6), st.sampled_from(UI_VALUES) | st.text(max_size=20)
            ),
            max_size=4,
        )
    )
    raw = draw(st.booleans())  # "%zz" and "%ff" as they are: the server decodes what it is given
    enc = (lambda s: quote(s, safe="%")) if raw else (lambda s: quote(s, safe=""))
    return "&".join(f"{enc(k)}={enc(v)}" if draw(st.booleans()) else enc(k) for k, v in pairs)


def _json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    scalars = (
        st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=12)
    )
    return st.recursive(
        scalars | st.sampled_from(UI_NODES),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=max_leaves,
    )


@st.composite
def whatif_bodies(draw: st.DrawFn) -> tuple[bytes, str]:
    """A what-if body: actions shaped like the page's (each field sometimes wrong), any JSON, or bytes that are
    not JSON; with the content type the page sends, or another."""
    kind = draw(st.sampled_from(["actions", "actions", "json", "bytes"]))
    if kind == "actions":
        actions = []
        for _ in range(draw(st.integers(0, 3))):
            op = draw(st.sampled_from(["cordon", "uncordon", "drain", "taint", "add", "delete", ""]))
            action: dict[str, Any] = {"op": op}
            if op == "add":
                action["node"] = draw(st.sampled_from(UI_NODES) | _json_values(3))
                action["count"] = draw(st.sampled_from([1, 2, 0, -1, 10**9, "2", None, 1.5]))
            else:
                nodes = st.lists(st.sampled_from(UI_NODES), max_size=3) | st.fixed_dictionaries(
                    {
                        "label": st.sampled_from(["pdu", "topology.kubernetes.io/zone", "Bad Key!", ""]),
                        "value": st.sampled_from(["pdu-1", "a", "", "Bad Value!"]) | _json_values(2),
                    }
                )
                action["nodes"] = draw(nodes | _json_values(3))
            if op == "taint" or draw(st.integers(0, 5)) == 0:
                action["taint"] = draw(
                    st.sampled_from(["gpu=bad:NoSchedule", "k:NoExecute", "x", "", "=:"]) | _json_values(3)
                )
            if draw(st.integers(0, 6)) == 0:
                action[draw(st.text(max_size=6))] = draw(_json_values(2))
            actions.append(action)
        body: Any = {"actions": actions}
        if draw(st.integers(0, 6)) == 0:
            body[draw(st.text(max_size=6))] = 1
        data = json.dumps(body).encode()
    elif kind == "json":
        data = json.dumps(draw(_json_values())).encode()
    else:
        data = draw(st.binary(max_size=64) | st.sampled_from([b"{", b"[" * 5000, b"\xff\xfe{}", b"", b"null"]))
    ctype = draw(st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", ""]))
    return data, ctype


@dataclass(frozen=True)
class UIRequest:
    method: str
    path: str
    body: bytes = b""
    content_type: str = ""

    def __repr__(self) -> str:
        return f"{self.method} {self.path[:300]} body={self.body[:200]!r} content-type={self.content_type!r}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))  # as SkewCase's: never Hypothesis' field by field pretty-printing


@st.composite
def ui_requests(draw: st.DrawFn) -> UIRequest:
    path = draw(st.sampled_from(UI_PATHS))
    method = (
        "POST"
        if path == "/api/whatif" and draw(st.integers(0, 4))
        else draw(st.sampled_from(["GET", "GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"]))
    )
    query = _query(draw)
    target = f"{path}?{query}" if query or draw(st.booleans()) else path
    if method == "POST":
        body, ctype = draw(whatif_bodies())
        return UIRequest(method, target, body, ctype)
    return UIRequest(method, target)


@dataclass
class UIServer:
    port: int

    def send(self, req: UIRequest, timeout: float = 20.0) -> tuple[int, str, bytes, float]:
        import http.client

        start = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            headers = {"Host": f"127.0.0.1:{self.port}"}
            if req.content_type:
                headers["Content-Type"] = req.content_type
            conn.request(req.method, req.path, body=req.body if req.method == "POST" else None, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            return resp.status, resp.getheader("content-type") or "", body, time.perf_counter() - start
        finally:
            conn.close()


@pytest.fixture(scope="module")
def ui_server() -> Any:
    from accelsched.ui import server
    from accelsched.ui.hub import Hub
    from accelsched.ui.state import FilesState

    hub = Hub(FilesState.load([NODES, TENANT]))
    url, stop = server.start_in_thread(hub)
    try:
        yield UIServer(int(url.rstrip("/").rsplit(":", 1)[1]))
    finally:
        stop()


def check_ui_request(served: UIServer, req: UIRequest, seconds: float = 20.0) -> None:
    """Never a 5xx; an error is JSON ``{"error": "..."}``; every answer in bounded time."""
    status, ctype, body, took = served.send(req, timeout=seconds)
    why = None
    if status >= 500:
        why = f"status {status}"
    elif status >= 400 and req.method != "HEAD":
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if (
            not ctype.startswith("application/json")
            or not isinstance(parsed, dict)
            or not isinstance(parsed.get("error"), str)
        ):
            why = f"status {status} without a JSON error body ({ctype}: {body[:200]!r})"
    elif took > seconds:
        why = f"took {took:.1f}s"
    if why is not None and SAVE:
        _save("ui-http", Mutant(repr(req).encode(), [repr(req)]), ".txt")
    assert why is None, f"{req!r}: {why}"


@settings(FAST, max_examples=120)
@given(req=ui_requests())
def test_ui_routes_answer_4xx_json_never_500(ui_server: UIServer, req: UIRequest) -> None:
    check_ui_request(ui_server, req)


@pytest.fixture(scope="module")
def ui_server_bounded() -> Any:
    """The server in a forked child under RLIMIT_AS (2 GiB over the test process), as the CLI's slow fuzz runs: a
    request that blows up memory kills the child, and every later request fails to connect."""
    import resource
    import signal

    from accelsched.ui import server
    from accelsched.ui.hub import Hub
    from accelsched.ui.state import FilesState

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            size = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            resource.setrlimit(resource.RLIMIT_AS, (size + (2 << 30), size + (2 << 30)))
            url, _ = server.start_in_thread(Hub(FilesState.load([NODES, TENANT])))
            os.write(write_end, url.encode())
            signal.pause()
        finally:
            os._exit(1)
    os.close(write_end)
    url = os.read(read_end, 200).decode()
    os.close(read_end)
    try:
        assert url, "the bounded UI server did not start"
        yield UIServer(int(url.rstrip("/").rsplit(":", 1)[1]))
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


@pytest.mark.integration
@settings(slow(400))
@given(req=ui_requests())
def test_ui_routes_bounded_slow(ui_server_bounded: UIServer, req: UIRequest) -> None:
    # The bound catches a hang or a runaway request, not slowness: a what-if takes seconds on a loaded 2-core machine.
    check_ui_request(ui_server_bounded, req, seconds=60.0)


# -- accelsched run: objects as older or newer API servers shape them -----------------------------------------------

# What another server version may hand the informers: a field it does not have yet (absent), one it added
# (unknown), null where a list or map belongs (an omitempty slip), or another type (a CRD's preserved field).
SKEW_VALUES = [None, [], {}, "", 0, -1, "x", True, 1.5, [None], {"newField": {"x": 1}}, "9" * 40, ["a", 1]]
LIVE_FILES = [p for p in sorted((ROOT / "examples/lab").glob("*.yaml")) if p.name != "04-cordon-node-b.yaml"]


def _live_objects() -> dict[str, list[dict[str, Any]]]:
    """The lab's objects as the API server would list them (workloads left out: its controllers make the pods)."""
    from accelsched.api.loader import read_documents

    out: dict[str, list[dict[str, Any]]] = {}
    for path in LIVE_FILES:
        for d in read_documents(path):
            out.setdefault(d.kind, []).append(copy.deepcopy(dict(d.doc)))
    return out


LIVE_OBJECTS = _live_objects()
LIVE_KINDS = sorted(k for k in LIVE_OBJECTS if k not in ("Deployment", "PriorityClass"))


@dataclass
class SkewCase:
    objects: dict[str, list[dict[str, Any]]]
    mutated: dict[tuple[str, int], set[str]]  # (kind, index) -> the operations applied to that object
    steps: list[str]

    def __repr__(self) -> str:
        return f"SkewCase({'; '.join(self.steps)})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Hypothesis prints a case by its steps: pretty-printing its objects (deeply nested risky values) took
        tens of minutes."""
        printer.text(repr(self))

    def snapshot(self) -> Any:
        from accelsched.live import convert as live_convert

        o = self.objects
        dra = {k: o[k] for k in ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate") if k in o}
        return live_convert.Snapshot(
            nodes=o.get("Node", []), pods=o.get("Pod", []), namespaces=o.get("Namespace", []),
            pod_groups=o.get("PodGroup", []), topologies=o.get("NodeResourceTopology", []), dra=dra,
        )  # fmt: skip


@st.composite
def skew_cases(draw: st.DrawFn, risky: bool = False) -> SkewCase:
    objects = copy.deepcopy(LIVE_OBJECTS)
    mutated: dict[tuple[str, int], set[str]] = {}
    steps: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(LIVE_KINDS))
        i = draw(st.integers(0, len(objects[kind]) - 1))
        obj = objects[kind][i]
        paths = [p for p in _paths(obj) if p[:1] not in (("apiVersion",), ("kind",))]
        if not paths:
            continue
        path = draw(st.sampled_from(paths))
        parent = _parent(obj, path)
        op = draw(st.sampled_from(["absent", "unknown", "skew", "skew"]))
        if op == "unknown" and isinstance(parent, dict) and not _free_form((*path[:-1], "x")):
            # Copies: sampled_from hands out the same list or dict each time, which a later mutation would change.
            parent[draw(st.sampled_from(["newField", "xFuture", "status2"]))] = copy.deepcopy(
                draw(st.sampled_from(SKEW_VALUES))
            )
        elif op in ("absent", "unknown"):
            op = "absent"
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(
                draw(st.sampled_from(SKEW_VALUES) | (values(True, aliases=False) if risky else st.nothing()))
            )
        mutated.setdefault((kind, i), set()).add(op)
        steps.append(f"{op} {kind}[{i}] {path}")
    return SkewCase(objects, mutated, steps)


def check_live_conversion(case: SkewCase) -> None:
    """convert() never raises: an object it cannot use is left out with one line naming it, every object the
    mutations did not touch is kept, and the engine schedules what convert kept without a traceback."""
    from accelsched.engine import Session
    from accelsched.live import convert as live_convert

    converted = live_convert.convert(case.snapshot())
    for obj, message in converted.errors.items():
        assert obj and message and "\n" not in message, f"{case!r}: {obj}: {message!r}"
    # A field a newer server added is no reason to leave an object out (no strict decoding of a watch).
    newer = {
        live_convert._describe(case.objects[kind][i], kind)
        for (kind, i), ops in case.mutated.items()
        if ops == {"unknown"}
    }
    assert not newer & set(converted.errors), f"{case!r}: left out for an unknown field: {converted.errors}"
    kept = {n.name for n in converted.inputs.nodes}
    names = [
        n["metadata"]["name"] for i, n in enumerate(case.objects.get("Node", [])) if ("Node", i) not in case.mutated
    ]
    duplicated = {n for n in names if names.count(n) > 1}
    assert set(names) - duplicated <= kept, f"{case!r}: unmutated nodes left out; errors {converted.errors}"
    session = Session.start(converted.inputs)
    session.scheduler.groups = converted.groups
    session.scheduler.gang_gates.update(converted.waiting)
    session.schedule()


@settings(FAST, max_examples=40)
@given(case=skew_cases())
def test_live_objects_of_another_server_version_are_used_or_left_out_named(case: SkewCase) -> None:
    check_live_conversion(case)


@pytest.mark.integration
@settings(slow(300))
@given(case=skew_cases(risky=True))
def test_live_objects_of_another_server_version_bounded_slow(case: SkewCase) -> None:
    """The risky values too (huge integers, deep nesting; no alias-shared containers: the informers' objects are
    decoded JSON, trees), each case forked under RLIMIT_AS and
    a timeout, as the CLI's slow fuzz runs."""
    import pickle

    with tempfile.TemporaryFile() as result:
        pid = os.fork()
        if pid == 0:  # the child: bounded memory, its verdict written back
            import resource
            import traceback

            code = 0
            try:
                limit = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE") + (2 << 30)
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                check_live_conversion(case)
            except BaseException:
                result.write(pickle.dumps(traceback.format_exc()[-3000:]))
                result.flush()
                code = 1
            os._exit(code)
        deadline = time.monotonic() + 60
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        if done[0] == 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(f"{case!r}: took more than 60 s")
        result.seek(0)
        failure = result.read()
    assert done[1] == 0, f"{case!r}: {pickle.loads(failure) if failure else 'killed'}"


def _live_corpus() -> list[dict[str, Any]]:
    index = CORPUS / "live" / "index.yaml"
    return yaml.safe_load(index.read_text()) or [] if index.exists() else []


@pytest.mark.parametrize("case", _live_corpus(), ids=lambda c: c["file"])
def test_live_corpus_case(case: dict[str, Any]) -> None:
    from accelsched.api.loader import read_documents
    from accelsched.engine import Session
    from accelsched.live import convert as live_convert

    objects: dict[str, list[dict[str, Any]]] = {}
    for d in read_documents(CORPUS / "live" / case["file"]):
        objects.setdefault(d.kind, []).append(dict(d.doc))
    converted = live_convert.convert(SkewCase(objects, {}, []).snapshot())
    assert sorted(converted.errors) == sorted(case["left_out"]), converted.errors
    results = Session.start(converted.inputs).schedule()
    assert all(r.scheduled for r in results), [r.message for r in results]
