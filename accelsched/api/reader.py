"""Manifest files to plain documents: bytes decoded as kubectl does, JSON by a JSON parser, YAML strictly.

What the API server's strict decoding refuses is refused here, with the file, the object and the line:

- text is UTF-8, or UTF-16 with a byte-order mark (kubectl's file reader honours a BOM, cli-runtime's
  ``unicode.BOMOverride``); anything else is an error naming the byte offset, never a traceback;
- a mapping key given twice is an error (YAML: ``key "cpu" already set in map``; JSON: ``duplicate field``),
  so ``requests: {cpu: "64", cpu: "1"}`` never schedules with one of the two silently;
- YAML aliases may not expand a document past go-yaml's bound ("document contains excessive aliasing"), and
  an anchor may not contain itself: an alias bomb is refused before anything copies it.

JSON (what ``kubectl get -o json`` prints) goes through the standard library's C decoder. YAML goes through
libyaml's event stream with a small builder (``_fast_yaml``) that does what PyYAML's SafeLoader does for plain
documents at about twice its speed; anything unusual (explicit tags, merge keys, complex keys, or any error)
is read again by the SafeLoader-based strict path (``_strict_yaml``), which alone words the errors.
"""

from __future__ import annotations

import codecs
import contextlib
import gc
import io
import json
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from accelsched.api import goyaml, limits, memory
from accelsched.errors import InputError, clipped, quoted

MERGE_TAG = "tag:yaml.org,2002:merge"
# go-yaml v2 (sigs.k8s.io/yaml's decoder, go.yaml.in/yaml/v2 decode.go): up to 400,000 decoded nodes 99% may come
# from alias expansion, from 4,000,000 on only 10%, scaled linearly between.
_ALIAS_RATIO_LOW, _ALIAS_RATIO_HIGH = 400_000, 4_000_000
# JSON that fails (bad syntax, a duplicate field) is read again as YAML, for YAML flow style and for the line of
# a duplicate; past this size that second read would take longer than it is worth, and the JSON error stands.
_REREAD_AS_YAML_CHARS = 16 << 20


# The longest integer literal read as a number (int64 has 19 digits; sign, underscores, 0x/0o/0b prefixes fit).
_MAX_INT_CHARS = 100


class _Fallback(Exception):
    """The fast YAML builder met something it leaves to the strict path."""


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection while a manifest becomes objects: reading builds millions of dicts and none
    of them is garbage yet, so each collection would only walk them again (a third of the time of a large read).
    Reference counting still frees what is dropped; the collector runs again afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def freeze_heap() -> None:
    """Collect once, then move every object alive into the collector's permanent generation (gc.freeze).

    A long-lived state (a 30,000-pod session and its caches, a web view's run) is millions of objects, and each
    of CPython's full collections walks all of them (about 0.5 s per million): one landing in a request (an
    explain, a what-if) or in the scheduling loop stalls it by that much. Frozen objects are still freed by
    reference counting when dropped; only cycles among them wait until the next call, which unfreezes first."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


# ---------------------------------------------------------------------------------------------- bytes to text


def decode(data: bytes, source: str) -> str:
    """UTF-8 (an optional BOM dropped) or UTF-16 with a BOM; otherwise an error naming the byte offset."""
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        raise InputError("is UTF-32 (byte-order mark at byte offset 0); manifests are UTF-8, or UTF-16", source=source)
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding, skip = ("utf-16-le" if data.startswith(codecs.BOM_UTF16_LE) else "utf-16-be"), 2
    else:
        encoding, skip = "utf-8", 3 if data.startswith(codecs.BOM_UTF8) else 0
    if encoding == "utf-8" and (nul := data.find(b"\x00")) >= 0:
        raise _nul_error(nul, data.count(b"\n", 0, nul) + 1, source)
    try:
        return data[skip:].decode(encoding)
    except UnicodeDecodeError as exc:
        offset = exc.start + skip
        line = data.count(b"\n", 0, offset) + 1 if encoding == "utf-8" else None
        at = f"byte offset {offset}" + (f" (line {line})" if line else "")
        raise InputError(
            f"is not {encoding.upper()[:6]} text: invalid byte 0x{data[offset]:02x} at {at}; "
            "manifests are UTF-8, or UTF-16 with a byte-order mark",
            source=source,
        ) from None


def _nul_error(offset: int, line: int, source: str) -> InputError:
    return InputError(
        f"is not UTF-8 text: a NUL byte at byte offset {offset} (line {line}); a binary "
        "file, or UTF-16 without a byte-order mark? Manifests are UTF-8, or UTF-16 with a byte-order mark",
        source=source,
    )


_READ_CHUNK = 1 << 20
_WIDE_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)  # UTF-32's start with these too


def read_input(path: str | Path, source: str) -> bytes:
    """The bytes of a file the user named (``-``: standard input), bounded by the ``input_bytes`` limit and by the
    memory reading it would take (api/memory.py).

    A regular file's size is known and checked before it is read. A pipe, FIFO or device (``<(cmd)``,
    ``/dev/zero``) is read in chunks and refused as soon as it passes either bound, or is plainly not text (a NUL
    byte where UTF-8 is read): never holding the whole limit in memory to find out."""
    try:
        if source == "-":
            return _read_stream(sys.stdin.buffer, source)
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return _read_stream(f, source)
            check_size(info.st_size, source)
            memory.check(memory.read_estimate(info.st_size, json=_starts_like_json(f)), "reading it", source)
            data = f.read()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=source) from None
    check_size(len(data), source)  # a file that grew while it was read
    return data


def _starts_like_json(f: BinaryIO) -> bool:
    head = f.read(4096).lstrip(b" \t\r\n\xef\xbb\xbf")
    f.seek(0)
    return head[:1] in (b"{", b"[")


def _read_stream(f: BinaryIO, source: str) -> bytes:
    budget = memory.stream_budget()
    out = io.BytesIO()
    total = lines = 0
    utf8: bool | None = None
    while chunk := f.read(_READ_CHUNK):
        if utf8 is None:
            utf8 = not chunk.startswith(_WIDE_BOMS)
        if utf8 and (nul := chunk.find(b"\x00")) >= 0:
            raise _nul_error(total + nul, lines + chunk.count(b"\n", 0, nul) + 1, source)
        total += len(chunk)
        lines += chunk.count(b"\n")
        check_size(total, source)
        if budget is not None and total > budget:
            memory.check(memory.read_estimate(total, json=True), f"more than {total} bytes from a pipe", source)
        out.write(chunk)
    return out.getvalue()


def check_size(size: int, source: str) -> None:
    """A file past the ``input_bytes`` limit is refused before it is read into memory."""
    too_big = limits.exceeded("size in bytes", size, "input_bytes")
    if too_big:
        raise InputError(too_big, source=source)


# ---------------------------------------------------------------------------------------------- text to documents


def parse(text: str, source: str) -> list[Any]:
    """Every document of ``text`` (None documents dropped), JSON when it starts like JSON, else YAML."""
    start = len(text) - len(text.lstrip())
    if text[start : start + 1] in ("{", "["):
        small = len(text) <= _REREAD_AS_YAML_CHARS
        try:
            return _json_documents(text, start)
        except (ValueError, RecursionError, _DuplicateField) as exc:
            # Not JSON after all? YAML flow style (``{kind: Pod, ...}``) also starts with a brace. And the YAML
            # reading of JSON names the line and the object of a duplicate field, a huge number or deep nesting.
            if small:
                try:
                    return _strict_yaml(text, source)
                except InputError:
                    if not isinstance(exc, json.JSONDecodeError):
                        raise
            raise InputError(_json_problem(exc), source=source) from None
    try:
        return _fast_yaml(text)
    except _Fallback:
        return _strict_yaml(text, source)


def _json_problem(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
    if isinstance(exc, _DuplicateField):
        return f'duplicate field "{clipped(str(exc.key))}" (strict decoding)'
    if isinstance(exc, RecursionError):
        return "malformed JSON: nesting too deep"
    return f"malformed JSON: a number is out of range ({exc})"  # int() past Python's digit limit


class _DuplicateField(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateField(key)
            seen.add(key)
    return out


def _no_constant(name: str) -> None:
    # Python's json reads NaN and Infinity; JSON (and the API server) does not.
    raise json.JSONDecodeError(f"{name} is not valid JSON", name, 0)


_JSON = json.JSONDecoder(object_pairs_hook=_unique_object, parse_constant=_no_constant)
_WS = re.compile(r"[ \t\n\r]*")


def _json_documents(text: str, start: int) -> list[Any]:
    """One JSON value or a stream of them (kubectl accepts concatenated objects), as the C decoder reads them."""
    out = []
    pos, end = start, len(text)
    while pos < end:
        value, pos = _JSON.raw_decode(text, pos)
        if value is not None:
            out.append(value)
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    return out


# ---------------------------------------------------------------------------------------------- YAML, fast


_SCALARS: dict[str, Any] = {}


def _plain_scalar(value: str) -> Any:
    """A plain (unquoted, untagged) scalar, as go-yaml v2 resolves it (api/goyaml.py); ``<<`` merges are left to
    the strict path."""
    if value == goyaml.MERGE:
        raise _Fallback
    try:
        return _SCALARS[value]
    except KeyError:
        pass
    result = goyaml.plain(value)
    # Numbers, booleans and null are shared, as YAML repeats them.
    if type(result) is not str and len(_SCALARS) < 100_000:
        _SCALARS[value] = result
    return result


def _alias_ratio_ok(aliased: int, decoded: int) -> bool:
    if aliased <= 100 or decoded <= 1000:
        return True
    if decoded <= _ALIAS_RATIO_LOW:
        allowed = 0.99
    elif decoded >= _ALIAS_RATIO_HIGH:
        allowed = 0.10
    else:
        allowed = 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)
    return aliased / decoded <= allowed


def _fast_yaml(text: str) -> list[Any]:
    """libyaml's events into dicts, lists and scalars; ``_Fallback`` at anything out of the ordinary.

    Aliases share the anchored object, as SafeLoader's do; ``decoded`` counts nodes as expanded, so an alias bomb
    is caught by its size, not by expanding it.
    """
    parser = yaml.CSafeLoader(text)
    get = parser.get_event
    missing = object()
    out: list[Any] = []
    try:
        get()  # StreamStartEvent
        while not isinstance(get(), StreamEndEvent):  # DocumentStartEvent, or the end
            anchors: dict[str, tuple[Any, int]] = {}
            open_anchors: dict[str, None] = {}
            # Frames: [container, key (missing until read), anchor, decoded at start]
            stack: list[list[Any]] = []
            decoded = aliased = 0
            while True:
                ev = get()
                kind = type(ev)
                if kind is ScalarEvent:
                    if ev.tag is not None:
                        raise _Fallback
                    value = _plain_scalar(ev.value) if ev.implicit[0] else ev.value
                    decoded += 1
                    if ev.anchor is not None:
                        anchors[ev.anchor] = (value, 1)
                elif kind is MappingStartEvent or kind is SequenceStartEvent:
                    if ev.tag is not None:
                        raise _Fallback
                    if stack and stack[-1][1] is missing and type(stack[-1][0]) is dict:
                        raise _Fallback  # a complex key
                    decoded += 1
                    if ev.anchor is not None:
                        open_anchors[ev.anchor] = None
                    stack.append([{} if kind is MappingStartEvent else [], missing, ev.anchor, decoded])
                    continue
                elif kind is MappingEndEvent or kind is SequenceEndEvent:
                    value, _, anchor, at = stack.pop()
                    if anchor is not None:
                        anchors[anchor] = (value, decoded - at + 1)
                        del open_anchors[anchor]
                elif kind is AliasEvent:
                    if ev.anchor not in anchors:  # undefined, or contains itself: the strict path words it
                        raise _Fallback
                    value, size = anchors[ev.anchor]
                    decoded += size
                    aliased += size
                    if not _alias_ratio_ok(aliased, decoded):
                        raise _Fallback
                else:
                    raise _Fallback
                if not stack:
                    break
                frame = stack[-1]
                container = frame[0]
                if type(container) is list:
                    container.append(value)
                elif frame[1] is missing:
                    if (kind is not ScalarEvent and kind is not AliasEvent) or value.__hash__ is None:
                        raise _Fallback
                    if type(value) is not str:  # ``y:`` or ``1:``: a JSON key, as sigs.k8s.io/yaml makes it
                        if value is None:
                            raise _Fallback
                        value = goyaml.json_key(value)
                    if value in container:
                        raise _Fallback  # a duplicate key: the strict path names it
                    frame[1] = value
                else:
                    container[frame[1]] = value
                    frame[1] = missing
            get()  # DocumentEndEvent
            if value is not None:
                out.append(value)
    except yaml.YAMLError:
        raise _Fallback from None
    finally:
        parser.dispose()
    return out


# ---------------------------------------------------------------------------------------------- YAML, strict


class _NodeProblem(Exception):
    """Something wrong at one node of a composed document: worded with the object and field path around it."""

    def __init__(self, node: Node, message: str) -> None:
        super().__init__(message)
        self.node, self.message = node, message


_GO_PLAIN_TAG = "tag:accelsched.io,2026:go-yaml-plain"
_STR_TAG = "tag:yaml.org,2002:str"


def _key_identity(node: ScalarNode) -> tuple[str, str]:
    """The JSON key a scalar key becomes (``y`` and ``"true"`` are one key), or its tag and text."""
    if node.tag == _GO_PLAIN_TAG:
        with contextlib.suppress(ValueError):  # a null key: refused once the mapping is built
            return (_STR_TAG, goyaml.json_key(goyaml.plain(node.value)))
    return (node.tag, node.value)


class _StrictLoader(yaml.CSafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (keys a ``<<`` merge brings in may be overridden,
    as the merge defines)."""

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[tuple[str, str], ScalarNode] = {}
            for key_node, _ in node.value:
                if isinstance(key_node, ScalarNode) and key_node.tag != MERGE_TAG:
                    first = seen.setdefault(_key_identity(key_node), key_node)
                    if first is not key_node:
                        raise _NodeProblem(
                            node,
                            f'line {key_node.start_mark.line + 1}: key "{clipped(key_node.value)}" already set in map '
                            f"(first at line {first.start_mark.line + 1})",
                        )
        mapping = super().construct_mapping(node, deep=deep)
        if all(type(k) is str for k in mapping):
            return mapping  # type: ignore[no-any-return]
        out: dict[str, Any] = {}
        for k, v in mapping.items():
            try:
                key = goyaml.json_key(k)
            except ValueError as exc:
                raise _NodeProblem(node, f"line {node.start_mark.line + 1}: {exc}") from None
            if key in out:
                raise _NodeProblem(node, f'line {node.start_mark.line + 1}: key "{clipped(key)}" already set in map')
            out[key] = v
        return out

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        # Plain scalars are typed as go-yaml v2 types them (api/goyaml.py), not by YAML 1.1's resolvers.
        if kind is ScalarNode and implicit[0] and value != goyaml.MERGE:
            return _GO_PLAIN_TAG
        return super().resolve(kind, value, implicit)  # type: ignore[no-any-return]

    def construct_go_plain(self, node: ScalarNode) -> Any:
        return goyaml.plain(node.value)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError):
            # SafeConstructor's own failures on explicitly tagged values (``!!bool abc``, ``!!int x``)
            line = node.start_mark.line + 1
            raise _NodeProblem(node, f"line {line}: cannot decode {quoted(node.value)} as {node.tag}") from None

    def construct_yaml_int(self, node: ScalarNode) -> int:
        # Past int64 no Kubernetes field holds it, and past Python's int-digit limit int() raises ValueError.
        if len(node.value) > _MAX_INT_CHARS:
            line = node.start_mark.line + 1
            raise _NodeProblem(node, f"line {line}: an integer of {len(node.value)} digits is out of range")
        return super().construct_yaml_int(node)  # type: ignore[no-any-return]


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)
_StrictLoader.add_constructor(_GO_PLAIN_TAG, _StrictLoader.construct_go_plain)


def _strict_yaml(text: str, source: str) -> list[Any]:
    loader = _StrictLoader(text)
    out: list[Any] = []
    may_alias = "&" in text
    try:
        while loader.check_node():
            root = loader.get_node()
            if may_alias:
                _check_aliases(root, source)
            try:
                doc = loader.construct_document(root)
            except _NodeProblem as problem:
                raise _node_error(root, problem, source) from None
            if doc is not None:
                out.append(doc)
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML{_yaml_problem(exc, text)}", source=source) from None
    finally:
        loader.dispose()
    return out


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """`` at line 3, column 7: what`` on one line, whichever of PyYAML's errors it is."""
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow: no mark, a position
        line = text.count("\n", 0, exc.position) + 1
        return f" at line {line} (character offset {exc.position}): {exc.reason} (#x{exc.character:04x})"
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"{where}: {' '.join(str(getattr(exc, 'problem', None) or exc).split())}"


def _children(node: Node) -> Iterator[tuple[Any, Node]]:
    if isinstance(node, MappingNode):
        for k, v in node.value:
            yield (k.value if isinstance(k, ScalarNode) else "?"), v
    elif isinstance(node, SequenceNode):
        yield from enumerate(node.value)


def _check_aliases(root: Node, source: str) -> None:
    """Refuse an anchor that contains itself and a document that aliases expand past go-yaml's bound."""
    sizes: dict[int, int] = {}
    in_progress: set[int] = set()
    aliased = 0

    def size(node: Node) -> int:
        nonlocal aliased
        ident = id(node)
        if ident in sizes:
            aliased += sizes[ident]  # the same node again: an alias
            return sizes[ident]
        if ident in in_progress:
            line = node.start_mark.line + 1
            raise InputError(f"line {line}: an anchor's value contains an alias of itself", source=source)
        in_progress.add(ident)
        total = 1
        if isinstance(node, MappingNode):
            for k, v in node.value:
                total += size(k) + size(v)
        elif isinstance(node, SequenceNode):
            for v in node.value:
                total += size(v)
        in_progress.discard(ident)
        sizes[ident] = total
        return total

    decoded = size(root)
    if not _alias_ratio_ok(aliased, decoded):
        raise InputError(
            f"document at line {root.start_mark.line + 1} contains excessive aliasing: aliases expand it to "
            f"{decoded} nodes, {aliased} of them copies (go-yaml's bound, as the API server reads YAML)",
            source=source,
        )


def _node_error(root: Node, problem: _NodeProblem, source: str) -> InputError:
    """``FILE: Pod ns/name: spec.containers[0].resources.requests: line 12: key "cpu" already set (line 11)``."""
    path = _path_to(root, problem.node) or []
    doc, prefix = root, ""
    if _scalar_child(root, "kind", "").endswith("List") and path[:1] == ["items"] and len(path) > 1:
        doc = dict(_children(_child(root, "items")))[path[1]]  # type: ignore[arg-type]
        prefix, path = f"items[{path[1]}]", path[2:]
    kind = _scalar_child(doc, "kind", "")
    meta = _child(doc, "metadata")
    name = _scalar_child(meta, "name", "") if meta is not None else ""
    namespace = _scalar_child(meta, "namespace", "") if meta is not None else ""
    obj = " ".join(p for p in (kind, f"{namespace}/{name}" if namespace else name) if p)
    field = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(path))
    return InputError(
        problem.message,
        source=f"{source} ({prefix})" if prefix else source,
        obj=obj or f"document at line {root.start_mark.line + 1}",
        field=field,
    )


def _child(node: Node | None, key: str) -> Node | None:
    if isinstance(node, MappingNode):
        for k, v in node.value:
            if isinstance(k, ScalarNode) and k.value == key:
                return v  # type: ignore[no-any-return]
    return None


def _scalar_child(node: Node | None, key: str, default: str) -> str:
    child = _child(node, key)
    return str(child.value) if isinstance(child, ScalarNode) else default


def _path_to(node: Node, target: Node) -> list[Any] | None:
    """The keys and indexes from ``node`` down to ``target`` (iterative: deep documents stay cheap)."""
    stack: list[tuple[Node, list[Any]]] = [(node, [])]
    seen: set[int] = set()
    while stack:
        current, path = stack.pop()
        if current is target:
            return path
        if id(current) in seen:
            continue
        seen.add(id(current))
        for key, child in _children(current):
            stack.append((child, [*path, key]))
    return None
