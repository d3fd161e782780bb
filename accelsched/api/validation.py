"""Manifests validated as the API server would: strict OpenAPI schema (unknown fields, types) plus its rules.

A what-if answer about a cluster that cannot exist is worse than an error, so every object read from a file is
checked against the schema of the pinned Kubernetes version (``schema.json.gz``, made by hack/gen-schema.py
from the real OpenAPI spec and our CRDs), as ``kubectl apply`` does with its strict field validation:

- the apiVersion must serve the kind (``x-kubernetes-group-version-kind``);
- no unknown fields (``metadata.labelss``), except under x-kubernetes-preserve-unknown-fields;
- JSON types as Go's decoder reads them: a number is no string (YAML reads ``1.10`` as the number 1.1, so an
  unquoted label value is refused, as the API server refuses it), int32 fields fit in int32;
- required fields, and the enums of the fields the scheduler acts on (taint effects, operators, policies);
- the API server's semantic rules (k8s.io/apimachinery/pkg/util/validation) for names (DNS-1123 subdomain or
  label, as each kind's validation asks), label keys and values, annotation keys, selectors and tolerations.

Objects from a live API server were validated by it and skip this. The walk is a plain loop over the object's
own fields with the schema pre-resolved into Python objects, and paths are only built when something is wrong,
so a typical pod costs some tens of microseconds.
"""

from __future__ import annotations

import datetime
import difflib
import functools
import gzip
import json
import re
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from typing import Any

from accelsched.api import quantity
from accelsched.api.selectors import parse_int64
from accelsched.errors import InputError, Where, clipped, quoted

# Type codes of the compact schema (hack/gen-schema.py documents the forms).
_SCALARS = ("s", "t", "i32", "i64", "n", "b", "q", "ios", "o", "any")
_S, _T, _I32, _I64, _N, _B, _Q, _IOS, _O, _ANY = range(len(_SCALARS))
# Python types the YAML and JSON loaders give that Go's decoder accepts for each scalar (bool is no int).
_ACCEPTS: tuple[tuple[type, ...], ...] = (
    (str,),
    (str, datetime.datetime, datetime.date),  # the reader keeps timestamps as text; PyYAML's own loader does not
    (int,),
    (int,),
    (int, float),
    (bool,),
    (str, int, float),
    (str, int),
    (dict,),
    (),
)
_EXPECTED = (
    "a string",
    "a date-time string",
    "an integer",
    "an integer",
    "a number",
    "true or false",
    "a quantity (a string such as 500m or 1Gi, or a number)",
    "an integer or a string",
    "an object",
    "",
)
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

# Timestamps and quantities already found well-formed (cluster dumps repeat them: "110", "0", one stamp per
# minute): a set lookup instead of a regex match. Bounded, so a hostile input cannot grow it without end.
_SEEN_GOOD: tuple[set[str], set[str]] = (set(), set())  # [False]: date-times, [True]: quantities
_SEEN_MAX = 65536
# metav1.Time and MicroTime decode with time.Parse(time.RFC3339, ...).
_RFC3339_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})")

# ---------------------------------------------------------------------------------------------- API server rules
# Messages as k8s.io/apimachinery/pkg/api/validate/content builds them (RegexError with examples).
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = f"({_LABEL_KEY_FMT})?"
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_KEY_RE = re.compile(_LABEL_KEY_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # content.RegexError appends "', " after every example, so two read "'my-name',  or '123-abc', regex ..."
    # (confirmed against kube-apiserver 1.36.3).
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _syntax(max_length: int, pattern: re.Pattern[str], message: str) -> Callable[[str], str | None]:
    """A checker in the shape of content.IsDNS1123Label & co: the length first, then the pattern."""

    def problem(value: str) -> str | None:
        if len(value) > max_length:
            return f"must be no more than {max_length} characters"
        return None if pattern.fullmatch(value) else message

    return problem


dns1123_subdomain_problem = _syntax(
    253,
    _DNS1123_SUBDOMAIN_RE,
    _regex_error(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
        "and must start and end with an alphanumeric character",
        _DNS1123_SUBDOMAIN_FMT,
        "example.com",
    ),
)
dns1123_label_problem = _syntax(
    63,
    _DNS1123_LABEL_RE,
    _regex_error(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character",
        _DNS1123_LABEL_FMT,
        "my-name",
        "123-abc",
    ),
)
dns1035_label_problem = _syntax(
    63,
    _DNS1035_LABEL_RE,
    _regex_error(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
        "alphabetic character, and end with an alphanumeric character",
        _DNS1035_LABEL_FMT,
        "my-name",
        "abc-123",
    ),
)


_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)


@functools.lru_cache(maxsize=4096)
def label_key_problem(key: str) -> str | None:
    """content.IsLabelKey (a qualified name): an optional DNS subdomain prefix and '/', then a name of <= 63."""
    parts = key.split("/")
    if len(parts) > 2:
        return (
            "a valid label key "
            + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        )
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            return "prefix part must be non-empty"
        problem = dns1123_subdomain_problem(parts[0])
        if problem:
            return f"prefix part {problem}"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _LABEL_KEY_RE.fullmatch(name):
        return "name part " + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
    return None


label_value_problem = functools.lru_cache(maxsize=4096)(
    _syntax(
        63,
        _LABEL_VALUE_RE,
        _regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character",
            _LABEL_VALUE_FMT,
            "MyValue",
            "my_value",
            "12345",
        ),
    )
)


def path_segment_problem(name: str) -> str | None:
    """content.IsPathSegmentName: RBAC names such as ``system:controller:attachdetach-controller``."""
    if name in (".", ".."):
        return f"may not be '{name}'"
    for bad in ("/", "%"):
        if bad in name:
            return f"may not contain '{bad}'"
    return None


# Each kind's name rule, as its ValidateObjectMeta call names it (NameIsDNSSubdomain unless listed).
_NAME_RULES: dict[str, Callable[[str], str | None]] = {
    "Namespace": dns1123_label_problem,  # ValidateNamespaceName
    "StatefulSet": dns1123_label_problem,  # ValidateStatefulSetName
    "Service": dns1035_label_problem,  # ValidateServiceName
    # ValidateRBACName (pkg/apis/rbac/validation): path segment names
    **dict.fromkeys(("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"), path_segment_problem),
}
_CLUSTER_SCOPED = {
    "Node", "Namespace", "PriorityClass", "NodeResourceTopology", "ResourceSlice", "PersistentVolume",
    "StorageClass", "CSIDriver", "CSINode", "RuntimeClass", "ClusterRole", "ClusterRoleBinding",
    "CustomResourceDefinition", "DeviceClass",
    "ResourceFlavor", "ClusterQueue", "Cohort", "WorkloadPriorityClass",  # Kueue's (accelsched/queues)
    "HyperNode",  # Volcano's (accelsched/fabric/hypernode.py)
}  # fmt: skip


class _Invalid(Exception):
    """Raised inside the walk; containers add their key while it unwinds, so paths cost nothing when valid."""

    def __init__(self, message: str, *path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = list(path)  # innermost first


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _wrong_type(code: int, value: Any) -> _Invalid:
    got = _type_name(value)
    hint = ""
    if code == _S and isinstance(value, (int, float, bool)):
        hint = " (quote it in YAML: an unquoted 1.10, 08 or true is not a string)"
    return _Invalid(f"must be {_EXPECTED[code]}, got {got} {clipped(json.dumps(value, default=str))}{hint}")


def _unsupported(value: str, allowed: Iterable[str]) -> _Invalid:
    shown = ", ".join(f'"{a}"' for a in allowed if a)
    return _Invalid(f'Unsupported value: "{clipped(value)}": supported values: {shown}')


# ---------------------------------------------------------------------------------------------- the compiled schema


class _Object:
    __slots__ = ("check", "name", "props", "required")

    def __init__(self, name: str) -> None:
        self.name = name
        self.props: dict[str, Any] = {}
        self.required: tuple[str, ...] = ()
        self.check: Callable[[dict[str, Any]], None] | None = None


class _Array:
    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item


class _Map:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Enum:
    __slots__ = ("values",)

    def __init__(self, values: list[str]) -> None:
        self.values = tuple(values)


def _check_scalar(code: int, value: Any) -> None:
    if type(value) not in _ACCEPTS[code]:
        if code == _ANY or (code == _O and isinstance(value, Mapping)):
            return
        raise _wrong_type(code, value)
    if code in (_I32, _I64):
        lo, hi = _INT32 if code == _I32 else _INT64
        if not lo <= value <= hi:
            raise _Invalid(f"must fit in {'int32' if code == _I32 else 'int64'}, got {value}")
    elif code in (_T, _Q) and type(value) is str:
        seen = _SEEN_GOOD[code == _Q]
        if value in seen:
            return
        if code == _T and value and not _RFC3339_RE.fullmatch(value):
            raise _Invalid(f"{quoted(value)} is not an RFC 3339 date-time (e.g. 2026-01-02T15:04:05Z)")
        # Quantity.UnmarshalJSON trims surrounding space first; the bounds are checked where the quantity is used.
        if code == _Q and not quantity.GRAMMAR.fullmatch(value.strip()):
            raise _Invalid(f"{quoted(value)} is not a valid quantity (examples: 500m, 2, 1.5Gi, 1e3)")
        if len(seen) < _SEEN_MAX:
            seen.add(value)


def _check(node: Any, value: Any) -> None:
    """Raise _Invalid when ``value`` (not None) does not fit ``node``."""
    t = type(node)
    if t is int:
        if node != _S or type(value) is not str:  # a plain string needs nothing more
            _check_scalar(node, value)
    elif t is _Object:
        _check_object(node, value)
    elif t is _Array:
        _check_array(node, value)
    elif t is _Map:
        _check_map(node, value)
    elif t is _Enum:
        if type(value) is not str:
            raise _wrong_type(_S, value)
        if value not in node.values:
            raise _unsupported(value, node.values)


def _check_array(node: _Array, value: Any) -> None:
    if type(value) is not list:
        raise _Invalid(f"must be a list, got {_type_name(value)}")
    item = node.item
    if item == _S and type(item) is int:  # lists of strings (args, image names, finalizers): no call per item
        for i, x in enumerate(value):
            if type(x) is not str and x is not None:
                raise _Invalid(_wrong_type(_S, x).message, f"[{i}]")
        return
    objects = type(item) is _Object
    for i, x in enumerate(value):
        if x is None:
            continue
        try:
            if objects:
                _check_object(item, x)
            else:
                _check(item, x)
        except _Invalid as exc:
            exc.path.append(f"[{i}]")
            raise


def _check_map(node: _Map, value: Any) -> None:
    if type(value) is not dict and not isinstance(value, Mapping):
        raise _Invalid(f"must be an object, got {_type_name(value)}")
    inner = node.value
    strings = inner == _S
    for k, x in value.items():
        if x is None or (strings and type(x) is str):
            continue
        try:
            _check(inner, x)
        except _Invalid as exc:
            exc.path.append(f"[{k}]")
            raise


def _check_object(node: _Object, value: Any) -> None:
    if type(value) is not dict and not isinstance(value, Mapping):
        raise _Invalid(f"must be an object, got {_type_name(value)}")
    props = node.props
    for k, x in value.items():
        sub = props.get(k)
        if sub is None:
            close = difflib.get_close_matches(str(k), list(props), n=1)
            raise _Invalid("unknown field" + (f" (did you mean {close[0]}?)" if close else ""), str(k))
        if x is None:
            continue  # Go's decoder reads null as the zero value
        t = type(sub)
        try:
            if t is int:
                if sub != _S or type(x) is not str:  # a plain string needs nothing more: the common case
                    _check_scalar(sub, x)
            elif t is _Object:
                _check_object(sub, x)
            else:
                _check(sub, x)
        except _Invalid as exc:
            exc.path.append(k)
            raise
    for r in node.required:
        if value.get(r) is None:
            raise _Invalid("Required value", r)
    if node.check is not None:
        node.check(value)


class Schema:
    """The compact schema, resolved into checkers once per process."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.kubernetes = doc["kubernetes"]
        self.kinds: dict[str, dict[str, str]] = doc["kinds"]
        self._raw = doc["defs"]
        # Object definitions become one shared _Object each (some refer to themselves); the few others (maps,
        # free objects) are inlined where they are used.
        self._defs: dict[str, _Object] = {
            n: _Object(n) for n, raw in self._raw.items() if isinstance(raw, dict) and "p" in raw
        }
        for name, obj in self._defs.items():
            self._fill(obj, self._raw[name])
        for name, hook in _HOOKS.items():
            if name in self._defs:
                self._defs[name].check = hook
        self._roots = {(kind, v): self._defs[d] for kind, vs in self.kinds.items() for v, d in vs.items()}

    def _fill(self, obj: _Object, raw: Any) -> None:
        obj.props = {k: self._node(v) for k, v in raw.get("p", {}).items()}
        obj.required = tuple(raw.get("q", ()))

    def _node(self, raw: Any) -> Any:
        if isinstance(raw, str):
            return _SCALARS.index(raw)
        if "r" in raw:
            return self._defs.get(raw["r"]) or self._node(self._raw[raw["r"]])
        if "a" in raw:
            return _Array(self._node(raw["a"]))
        if "m" in raw:
            return _Map(self._node(raw["m"]))
        if "e" in raw:
            return _Enum(raw["e"])
        obj = _Object("")
        self._fill(obj, raw)
        return obj

    def root(self, kind: str, api_version: str) -> _Object | None:
        return self._roots.get((kind, api_version))


@functools.lru_cache(maxsize=1)
def schema() -> Schema:
    data = resources.files("accelsched.api").joinpath("schema.json.gz").read_bytes()
    return Schema(json.loads(gzip.decompress(data)))


# ---------------------------------------------------------------------------------------------- semantic hooks


def _check_labels(labels: Mapping[Any, Any], field: str) -> None:
    for k, v in labels.items():
        k = str(k)  # YAML may give a number or boolean key; kubectl's YAML-to-JSON makes it a string
        problem = label_key_problem(k)
        if problem is None and v is not None:
            problem = label_value_problem(v)
            if problem:
                problem = f'Invalid value: "{clipped(str(v))}": {problem}'
        elif problem:
            problem = f'Invalid value: "{clipped(k)}": {problem}'
        if problem:
            raise _Invalid(problem, f"[{clipped(k)}]", field)


def _object_meta(meta: dict[str, Any]) -> None:
    """ValidateObjectMeta's rules that do not depend on the kind: labels, annotations, namespace."""
    labels = meta.get("labels")
    if labels:
        _check_labels(labels, "labels")
    annotations = meta.get("annotations")
    if annotations:
        size = 0
        for k, v in annotations.items():
            k = str(k)
            problem = label_key_problem(k.lower())
            if problem:
                raise _Invalid(f'Invalid value: "{clipped(k)}": {problem}', f"[{clipped(k)}]", "annotations")
            # Bytes, as Go's len() counts them (a euro sign is three).
            size += len(k.encode("utf-8", "surrogatepass")) + len((v or "").encode("utf-8", "surrogatepass"))
        if size > TOTAL_ANNOTATION_SIZE_LIMIT:
            raise _Invalid(f"Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes", "annotations")
    namespace = meta.get("namespace")
    if namespace:
        problem = dns1123_label_problem(namespace)
        if problem:
            raise _Invalid(f'Invalid value: "{clipped(namespace)}": {problem}', "namespace")


def _requirement_values(req: Mapping[str, Any], numeric: bool) -> None:
    op, values = req.get("operator"), req.get("values") or ()
    if op in ("In", "NotIn") and not values:
        raise _Invalid("Required value: must be specified when `operator` is 'In' or 'NotIn'", "values")
    if op in ("Exists", "DoesNotExist") and values:
        raise _Invalid("Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'", "values")
    if numeric and op in ("Gt", "Lt"):
        if len(values) != 1:
            raise _Invalid("Required value: must be specified single value when `operator` is 'Lt' or 'Gt'", "values")
        if parse_int64(values[0]) is None:
            raise _Invalid(f'Invalid value: "{clipped(str(values[0]))}": must be an integer', "[0]", "values")


def _label_selector_requirement(req: dict[str, Any]) -> None:
    key = req.get("key") or ""
    problem = label_key_problem(key)
    if problem:
        raise _Invalid(f'Invalid value: "{clipped(key)}": {problem}', "key")
    _requirement_values(req, numeric=False)


def _node_selector_requirement(req: dict[str, Any]) -> None:
    key = req.get("key") or ""
    problem = label_key_problem(key)
    if problem:
        raise _Invalid(f'Invalid value: "{clipped(key)}": {problem}', "key")
    _requirement_values(req, numeric=True)


def _label_selector(selector: dict[str, Any]) -> None:
    labels = selector.get("matchLabels")
    if labels:
        _check_labels(labels, "matchLabels")


def _toleration(tol: dict[str, Any]) -> None:
    """validateTolerations: a key is a qualified name; Exists takes no value; an empty key needs Exists."""
    key, op, value = tol.get("key") or "", tol.get("operator") or "Equal", tol.get("value") or ""
    if key:
        problem = label_key_problem(key)
        if problem:
            raise _Invalid(f'Invalid value: "{clipped(key)}": {problem}', "key")
    elif op != "Exists":
        raise _Invalid(f'Invalid value: "{clipped(op)}": operator must be Exists when `key` is empty', "operator")
    if op == "Exists" and value:
        raise _Invalid(
            f"Invalid value: \"{clipped(value)}\": value must be empty when `operator` is 'Exists'", "operator"
        )


def _taint(taint: dict[str, Any]) -> None:
    key = taint.get("key") or ""
    problem = label_key_problem(key)
    if problem:
        raise _Invalid(f'Invalid value: "{clipped(key)}": {problem}', "key")
    value = taint.get("value")
    if value:
        problem = label_value_problem(value)
        if problem:
            raise _Invalid(f'Invalid value: "{clipped(value)}": {problem}', "value")


def _pod_spec(spec: dict[str, Any]) -> None:
    selector = spec.get("nodeSelector")
    if selector:
        _check_labels(selector, "nodeSelector")


_HOOKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": _object_meta,
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector": _label_selector,
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement": _label_selector_requirement,
    "io.k8s.api.core.v1.NodeSelectorRequirement": _node_selector_requirement,
    "io.k8s.api.core.v1.Toleration": _toleration,
    "io.k8s.api.core.v1.Taint": _taint,
    "io.k8s.api.core.v1.PodSpec": _pod_spec,
}


# ---------------------------------------------------------------------------------------------- entry points


def _describe(kind: str, doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata")
    name = namespace = ""
    if isinstance(meta, Mapping):
        name = meta.get("name") if isinstance(meta.get("name"), str) else ""
        namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""
        if not namespace and kind not in _CLUSTER_SCOPED:
            namespace = "default"
    if not name:
        return kind
    name, namespace = clipped(name), clipped(namespace)  # the name may be what is wrong, and megabytes long
    return f"{kind} {namespace}/{name}" if namespace and kind not in _CLUSTER_SCOPED else f"{kind} {name}"


def _join(path: list[str]) -> str:
    out = ""
    for part in reversed(path):
        out += part if part.startswith("[") or not out else "." + part
    return out


def validate_object(doc: Mapping[str, Any], source: str, kind: str | None = None) -> None:
    """Check one object as the API server would on create; raise InputError naming file, object and field.

    Kinds the schema does not know (other CRDs) pass: the API server of a cluster that has them would decide.
    """
    kind = kind or str(doc.get("kind"))
    versions = schema().kinds.get(kind)
    if versions is None:
        return
    where = Where(source, _describe(kind, doc))
    api_version = doc.get("apiVersion")
    if not api_version:
        raise where.error("apiVersion", f"is required (served for {kind}: {', '.join(versions)})")
    root = schema().root(kind, api_version) if isinstance(api_version, str) else None
    if root is None:
        raise where.error(
            "apiVersion",
            f'no matches for kind "{kind}" in version "{api_version}" (served: {", ".join(versions)})',
        )
    try:
        try:
            _check_object(root, doc)
        except RecursionError:  # a schema that refers to itself (a CRD's openAPIV3Schema) nested past the stack
            raise _Invalid("is nested too deeply to validate") from None
        meta = doc.get("metadata") or {}
        name = meta.get("name")
        if not name and not meta.get("generateName"):
            raise _Invalid("Required value: name or generateName is required", "name", "metadata")
        if name:
            problem = _NAME_RULES.get(kind, dns1123_subdomain_problem)(name)
            if problem:
                raise _Invalid(f'Invalid value: "{clipped(name)}": {problem}', "name", "metadata")
    except _Invalid as exc:
        raise where.error(_join(exc.path), exc.message) from None


def validate_documents(docs: Iterable[Any], kinds_to_skip: Iterable[str] = ()) -> None:
    """Validate read documents (loader.Document: .doc, .source, .kind) in order; the first problem is raised."""
    skip = set(kinds_to_skip)
    for d in docs:
        if d.kind not in skip:
            validate_object(d.doc, d.source, d.kind)


__all__ = [
    "InputError",
    "Schema",
    "dns1035_label_problem",
    "dns1123_label_problem",
    "dns1123_subdomain_problem",
    "label_key_problem",
    "label_value_problem",
    "schema",
    "validate_documents",
    "validate_object",
]
