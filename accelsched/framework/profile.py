"""Scheduling profiles: the plugin registry, the default profile, and KubeSchedulerConfiguration loading.

The default profile is kube-scheduler's (reference/kube-scheduler.md) restricted to the plugins accelsched
has, plus DeviceAllocation at Reserve. A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) can
enable, disable and reweight plugins per extension point or through multiPoint, and configure their args.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelsched.api import reader
from accelsched.errors import InputError
from accelsched.framework import interface as fw
from accelsched.plugins import (
    defaultbinder,
    defaultpreemption,
    deviceallocation,
    devicepartition,
    gpushare,
    interpodaffinity,
    nodeaffinity,
    nodename,
    noderesources,
    noderesourcetopology,
    nodeunschedulable,
    podtopologyspread,
    queuesort,
    tainttoleration,
)

Factory = Callable[[dict, Any], Any]

REGISTRY: dict[str, Factory] = {
    queuesort.NAME: queuesort.new,
    nodeunschedulable.NAME: nodeunschedulable.new,
    nodename.NAME: nodename.new,
    tainttoleration.NAME: tainttoleration.new,
    nodeaffinity.NAME: nodeaffinity.new,
    noderesources.FIT_NAME: noderesources.new_fit,
    noderesourcetopology.NAME: noderesourcetopology.new,
    devicepartition.NAME: devicepartition.new,
    deviceallocation.NAME: deviceallocation.new,
    podtopologyspread.NAME: podtopologyspread.new,
    interpodaffinity.NAME: interpodaffinity.new,
    defaultpreemption.NAME: defaultpreemption.new,
    noderesources.BALANCED_NAME: noderesources.new_balanced,
    defaultbinder.NAME: defaultbinder.new,
}
# The FGD paper's placement policies (FGDScore, BestFitScore, ...): score plugins like any other, off by default.
REGISTRY.update(gpushare.FACTORIES)

# kube-scheduler's MultiPoint defaults in order, with score weights (0: not a score plugin by default).
DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    (queuesort.NAME, 0),
    (nodeunschedulable.NAME, 0),
    (nodename.NAME, 0),
    (tainttoleration.NAME, 3),
    (nodeaffinity.NAME, 2),
    (noderesources.FIT_NAME, 1),
    (noderesourcetopology.NAME, 2),
    (devicepartition.NAME, 1),
    (deviceallocation.NAME, 0),
    (podtopologyspread.NAME, 2),
    (interpodaffinity.NAME, 2),
    (defaultpreemption.NAME, 0),
    (noderesources.BALANCED_NAME, 1),
    (defaultbinder.NAME, 0),
)

# Extension point name in the config -> the protocol a plugin must satisfy to sit there.
EXTENSION_POINTS: dict[str, type] = {
    "queueSort": fw.QueueSortPlugin,
    "preFilter": fw.PreFilterPlugin,
    "filter": fw.FilterPlugin,
    "postFilter": fw.PostFilterPlugin,
    "preScore": fw.PreScorePlugin,
    "score": fw.ScorePlugin,
    "reserve": fw.ReservePlugin,
    "permit": fw.PermitPlugin,
    "preBind": fw.PreBindPlugin,
    "bind": fw.BindPlugin,
}
# Accepted for compatibility; accelsched has no plugins there yet, so they may only be listed empty.
PASSIVE_POINTS = ("preEnqueue", "postBind", "multiPoint")

CONFIG_API_VERSION = "kubescheduler.config.k8s.io/v1"
_TOP_LEVEL = {
    "apiVersion",
    "kind",
    "parallelism",
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
    "delayCacheUntilActive",
}  # the v1 KubeSchedulerConfiguration's fields (healthz/metricsBindAddress left with v1beta3)
_PROFILE_FIELDS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}


@dataclass
class Profile:
    """One scheduling profile: plugin instances per extension point, in order, and score weights."""

    scheduler_name: str
    points: dict[str, list[Any]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)

    def at(self, point: str) -> list[Any]:
        return self.points.get(point, [])


@dataclass
class SchedulerConfig:
    profiles: dict[str, Profile]
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0


def _implements(plugin: Any, point: str) -> bool:
    return isinstance(plugin, EXTENSION_POINTS[point])


def build_profile(
    scheduler_name: str,
    plugins_cfg: Mapping[str, Any] | None = None,
    plugin_args: Mapping[str, dict] | None = None,
    handle: Any = None,
    where: str = "",
) -> Profile:
    """Resolve enabled/disabled/multiPoint like kube-scheduler's mergePlugins, then instantiate."""
    plugins_cfg = plugins_cfg or {}
    plugin_args = plugin_args or {}
    for point in plugins_cfg:
        if point not in EXTENSION_POINTS and point not in PASSIVE_POINTS:
            raise InputError(
                f"unknown extension point {point!r}",
                source=where,
                obj=f"profile {scheduler_name}",
                field=f"plugins.{point}",
            )

    def entries(point: str, key: str) -> list[tuple[str, int]]:
        block = plugins_cfg.get(point) or {}
        if not isinstance(block, Mapping):
            raise InputError(
                "must be a mapping", source=where, obj=f"profile {scheduler_name}", field=f"plugins.{point}"
            )
        out = []
        for i, item in enumerate(block.get(key) or []):
            path = f"plugins.{point}.{key}[{i}]"
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise InputError("needs a plugin name", source=where, obj=f"profile {scheduler_name}", field=path)
            name = item["name"]
            if name != "*" and name not in REGISTRY:
                raise InputError(
                    f"unknown plugin {name!r} (known: {', '.join(REGISTRY)})",
                    source=where,
                    obj=f"profile {scheduler_name}",
                    field=f"{path}.name",
                )
            weight = item.get("weight", 0)
            if not isinstance(weight, int) or isinstance(weight, bool) or weight < 0:
                raise InputError(
                    f"weight must be a non-negative integer, got {weight!r}",
                    source=where,
                    obj=f"profile {scheduler_name}",
                    field=f"{path}.weight",
                )
            out.append((name, weight))
        return out

    instances: dict[str, Any] = {}

    def instance(name: str) -> Any:
        if name not in instances:
            args = plugin_args.get(name) or {}
            instances[name] = REGISTRY[name](dict(args), handle)
        return instances[name]

    multi_disabled = {n for n, _ in entries("multiPoint", "disabled")}
    multi: list[tuple[str, int]] = []
    if "*" not in multi_disabled:
        multi = [(n, w) for n, w in DEFAULT_PLUGINS if n not in multi_disabled]
    for name, weight in entries("multiPoint", "enabled"):
        multi = [(n, w) for n, w in multi if n != name] + [(name, weight)]

    profile = Profile(scheduler_name)
    for point in EXTENSION_POINTS:
        disabled = {n for n, _ in entries(point, "disabled")}
        enabled = entries(point, "enabled")
        explicit = {n for n, _ in enabled}
        chosen: list[tuple[str, int]] = []
        if "*" not in disabled:
            chosen = [
                (n, w) for n, w in multi if n not in disabled and n not in explicit and _implements(instance(n), point)
            ]
        for name, weight in enabled:
            if not _implements(instance(name), point):
                raise InputError(
                    f"plugin {name} does not implement {point}",
                    source=where,
                    obj=f"profile {scheduler_name}",
                    field=f"plugins.{point}.enabled",
                )
            chosen.append((name, weight))
        profile.points[point] = [instance(n) for n, _ in chosen]
        if point == "score":
            for n, w in chosen:
                profile.weights[n] = w or dict(DEFAULT_PLUGINS).get(n) or 1
            # kube-scheduler's getValidScoreWeights: the weighted scores must not overflow (see MAX_TOTAL_SCORE).
            if sum(profile.weights.values()) * MAX_NODE_SCORE > MAX_TOTAL_SCORE:
                raise InputError(
                    "total score of Score plugins could overflow",
                    source=where,
                    obj=f"profile {scheduler_name}",
                    field="plugins.score.enabled",
                )
    if len(profile.at("queueSort")) != 1:
        raise InputError(
            "exactly one queueSort plugin must be enabled",
            source=where,
            obj=f"profile {scheduler_name}",
            field="plugins.queueSort",
        )
    if not profile.at("bind"):
        raise InputError(
            "at least one bind plugin must be enabled",
            source=where,
            obj=f"profile {scheduler_name}",
            field="plugins.bind",
        )
    return profile


def default_config(handle: Any = None, names: tuple[str, ...] = ("default-scheduler", "accelsched")) -> SchedulerConfig:
    """Without a config file: the default profile, served under the default name and accelsched's own."""
    return SchedulerConfig({name: build_profile(name, handle=handle) for name in names})


def kube_scheduler_config(handle: Any = None) -> SchedulerConfig:
    """What the default kube-scheduler does: counts extended resources, knows nothing of NUMA or NICs.

    Used to show side by side where the stock scheduler would bind a pod (and the kubelet then reject it)."""
    plugins = {
        "filter": {"disabled": [{"name": noderesourcetopology.NAME}]},
        "score": {"disabled": [{"name": noderesourcetopology.NAME}]},
        "preScore": {"disabled": [{"name": noderesourcetopology.NAME}]},
        "preFilter": {"disabled": [{"name": noderesourcetopology.NAME}]},
    }
    args = {deviceallocation.NAME: {"topologyAware": False}}
    return SchedulerConfig({"default-scheduler": build_profile("default-scheduler", plugins, args, handle)})


def load_config(path: str | Path, handle: Any = None) -> SchedulerConfig:
    """Read a KubeSchedulerConfiguration file as the manifests are read (api/reader.py: UTF-8 or UTF-16 with a
    BOM, duplicate keys and alias bombs refused, as kube-scheduler's strict decoding does), then parse_config."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=source) from None
    reader.check_size(len(data), source)
    docs = reader.parse(reader.decode(data, source), source)
    if len(docs) > 1:
        raise InputError(f"holds {len(docs)} documents; a KubeSchedulerConfiguration file holds one", source=source)
    return parse_config(docs[0] if docs else None, source, handle)


def parse_config(doc: Any, source: str = "", handle: Any = None) -> SchedulerConfig:
    """Decode strictly and validate as kube-scheduler does (types as in config/v1, then validation.go and
    validation_pluginargs.go), then build the profiles. The first problem is an InputError naming the field path."""
    if not isinstance(doc, Mapping):
        raise InputError("is not a KubeSchedulerConfiguration mapping", source=source)
    if doc.get("kind") != "KubeSchedulerConfiguration":
        raise InputError(
            f"kind must be KubeSchedulerConfiguration, got {doc.get('kind')!r}", source=source, obj=OBJ, field="kind"
        )
    if doc.get("apiVersion") != CONFIG_API_VERSION:
        raise InputError(
            f"apiVersion must be {CONFIG_API_VERSION}, got {doc.get('apiVersion')!r}",
            source=source,
            obj=OBJ,
            field="apiVersion",
        )
    top = _Fields(source, doc, "", _TOP_LEVEL)
    if top.doc.get("extenders"):
        raise top.error("extenders", "scheduler extenders are not supported; write a plugin instead")
    validate_top_level(top)
    raw_profiles = top.list("profiles") or [{}]
    profiles: dict[str, Profile] = {}
    first_name: dict[str, int] = {}
    queue_sorts: list[Any] = []
    for i, raw in enumerate(raw_profiles):
        p = _Fields(source, raw, f"profiles[{i}]", _PROFILE_FIELDS)
        name = p.string("schedulerName", DEFAULT_SCHEDULER_NAME if len(raw_profiles) == 1 else None)
        if not name:
            raise p.error("schedulerName", "Required value")
        if name != name.strip() or not DNS1123_SUBDOMAIN_RE.fullmatch(name) or len(name) > 253:
            # kube-scheduler only asks for a non-empty name, but a pod's spec.schedulerName must be a DNS-1123
            # subdomain (pod validation), so no pod could ever ask for this profile.
            raise p.error("schedulerName", f"Invalid value: {_go(name)}: {DNS1123_SUBDOMAIN_MESSAGE}")
        if name in first_name:
            raise p.error("schedulerName", f"Duplicate value: {_go(name)} (as profiles[{first_name[name]}])")
        first_name[name] = i
        percentage = p.integer("percentageOfNodesToScore", INT32, None)
        if percentage is not None and not 0 <= percentage <= 100:
            raise p.error("percentageOfNodesToScore", f"Invalid value: {percentage}: not in valid range [0-100]")
        plugins = _plugins(p)
        args = _plugin_config(p, handle)
        queue_sorts.append((plugins.get("queueSort"), args.get(queuesort.NAME)))
        try:
            profiles[name] = build_profile(name, plugins, args, handle, source)
        except InputError as exc:
            exc.source = exc.source or source
            raise
    for i, queue_sort in enumerate(queue_sorts[1:], 1):
        if queue_sort != queue_sorts[0]:
            raise InputError(
                "must be the same for all profiles", source=source, obj=OBJ, field=f"profiles[{i}].plugins.queueSort"
            )
    return SchedulerConfig(
        profiles,
        float(top.integer("podInitialBackoffSeconds", INT64, DEFAULT_POD_INITIAL_BACKOFF_SECONDS)),
        float(top.integer("podMaxBackoffSeconds", INT64, DEFAULT_POD_MAX_BACKOFF_SECONDS)),
    )


# -- strict decoding and validation ----------------------------------------------------------------------------

OBJ = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_PARALLELISM = 16
DEFAULT_POD_INITIAL_BACKOFF_SECONDS, DEFAULT_POD_MAX_BACKOFF_SECONDS = 1, 10
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
# A Go time.Duration is int64 nanoseconds: kube-scheduler multiplies the backoff seconds into one (and Python's
# timed waits stop at threading.TIMEOUT_MAX, the same 292 years), so a longer backoff is refused here.
MAX_DURATION_SECONDS = (2**63 - 1) // 10**9
# kube-scheduler's MaxTotalScore guards an int64 sum; accelsched multiplies a plugin's scores (at most MaxNodeScore,
# 100) by its weight in the plugin's own dtype, which may be int32: the sum of weight x 100 must fit int32.
MAX_NODE_SCORE = 100
MAX_TOTAL_SCORE = 2**31 - 1
DNS1123_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_RE = re.compile(rf"{DNS1123_LABEL}(?:\.{DNS1123_LABEL})*")
DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start"
    " and end with an alphanumeric character (the spec.schedulerName a pod can ask for)"
)
# Plugins without an args type in kube-scheduler or in accelsched: a pluginConfig for them must carry no args.
NO_ARGS = frozenset({queuesort.NAME, nodeunschedulable.NAME, nodename.NAME, defaultbinder.NAME})
# NodeAffinityArgs.addedAffinity exists in kube-scheduler but accelsched does not apply it: refused, not ignored.
UNSUPPORTED_ARGS = {nodeaffinity.NAME: "addedAffinity"}
_GO_DURATION_RE = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_GO_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_LEADER_ELECTION = {
    "leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock", "resourceName",
    "resourceNamespace",
}  # fmt: skip
_CLIENT_CONNECTION = {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}


def _go(value: Any) -> str:
    """A value the way field.Invalid prints it (%#v): strings quoted, numbers bare."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)


class _Fields:
    """Strict, typed access to one mapping of the config at ``path`` (what the v1 types and strict decoding allow:
    an unknown field, a float or string where an int belongs, .inf or .nan, are errors)."""

    def __init__(self, source: str, doc: Any, path: str, fields: set[str]) -> None:
        self.source, self.path = source, path
        if doc is None:
            doc = {}
        if not isinstance(doc, Mapping):
            raise self.error("", f"must be a mapping, got {_type_name(doc)}")
        unknown = sorted(map(str, set(doc) - fields))
        if unknown:
            raise self.error(unknown[0], f"unknown field(s) {', '.join(unknown)}")
        self.doc = doc

    def error(self, name: str, message: str) -> InputError:
        return InputError(message, source=self.source, obj=OBJ, field=_join(self.path, name) or "(top level)")

    def value(self, name: str, kinds: tuple[type, ...], want: str, default: Any) -> Any:
        value = self.doc.get(name)
        if value is None:
            return default
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise self.error(name, f"must be {want}, got {_type_name(value)} {_short(value)}")
        return value

    def integer(self, name: str, bits: tuple[int, int], default: Any) -> Any:
        value = self.value(name, (int,), "an integer", default)
        if value is not default and not bits[0] <= value <= bits[1]:
            size = 32 if bits == INT32 else 64
            raise self.error(name, f"{_short(value)} does not fit an int{size}")
        return value

    def number(self, name: str, default: float) -> float:
        value = self.value(name, (int, float), "a number", default)
        if (isinstance(value, float) and not math.isfinite(value)) or abs(value) > 3.4e38:  # float32, as qps
            raise self.error(name, f"must be a finite float32, got {value}")
        return float(value)

    def boolean(self, name: str, default: Any) -> Any:
        return self.value(name, (bool,), "true or false", default)

    def string(self, name: str, default: Any) -> Any:
        return self.value(name, (str,), "a string", default)

    def list(self, name: str) -> list[Any]:
        return self.value(name, (list,), "a list", None) or []

    def duration(self, name: str, default: float) -> float:
        """A metav1.Duration: a Go duration string such as 15s, 1m30s or 100ms, in seconds."""
        text = self.string(name, None)
        if text is None:
            return default
        body = text[1:] if text[:1] in "+-" else text
        parts = _GO_DURATION_RE.findall(body)
        if body == "0":
            return 0.0
        if not parts or "".join(n + u for n, u in parts) != body:
            raise self.error(name, f"{_go(text)} is not a duration like 15s, 1m30s or 100ms")
        seconds = sum(float(n) * _GO_DURATION_UNITS[u] for n, u in parts)
        if seconds > MAX_DURATION_SECONDS:
            raise self.error(name, f"{_go(text)} is longer than a Go time.Duration holds")
        return -seconds if text.startswith("-") else seconds

    def sub(self, name: str, fields: set[str]) -> _Fields:
        return _Fields(self.source, self.doc.get(name), _join(self.path, name), fields)


def _join(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", float: "a float"}.get(
        type(value), type(value).__name__
    )


def _short(value: Any) -> str:
    if isinstance(value, int) and value.bit_length() > 100:  # str() of a 5,000-digit int is itself an error
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate_top_level(top: _Fields) -> None:
    """ValidateKubeSchedulerConfiguration for the fields outside the profiles, after v1 defaulting."""
    parallelism = top.integer("parallelism", INT32, DEFAULT_PARALLELISM)
    if parallelism <= 0:
        raise top.error("parallelism", f"Invalid value: {parallelism}: should be an integer value greater than zero")
    percentage = top.integer("percentageOfNodesToScore", INT32, None)
    if percentage is not None and not 0 <= percentage <= 100:
        raise top.error("percentageOfNodesToScore", f"Invalid value: {percentage}: not in valid range [0-100]")
    initial = top.integer("podInitialBackoffSeconds", INT64, DEFAULT_POD_INITIAL_BACKOFF_SECONDS)
    maximum = top.integer("podMaxBackoffSeconds", INT64, DEFAULT_POD_MAX_BACKOFF_SECONDS)
    if initial <= 0:
        raise top.error("podInitialBackoffSeconds", f"Invalid value: {initial}: must be greater than 0")
    if maximum < initial:
        raise top.error(
            "podMaxBackoffSeconds",
            f"Invalid value: {maximum}: must be greater than or equal to PodInitialBackoffSeconds",
        )
    for name, value in (("podInitialBackoffSeconds", initial), ("podMaxBackoffSeconds", maximum)):
        if value > MAX_DURATION_SECONDS:
            raise top.error(
                name, f"Invalid value: {value}: must be at most {MAX_DURATION_SECONDS} (a Go time.Duration)"
            )
    for name in ("enableProfiling", "enableContentionProfiling", "delayCacheUntilActive"):
        top.boolean(name, None)
    client = top.sub("clientConnection", _CLIENT_CONNECTION)
    for name in ("kubeconfig", "acceptContentTypes", "contentType"):
        client.string(name, "")
    client.number("qps", 50.0)
    burst = client.integer("burst", INT32, 100)
    if burst < 0:
        raise client.error("burst", f"Invalid value: {burst}: must be non-negative")
    _validate_leader_election(top.sub("leaderElection", _LEADER_ELECTION))


def _validate_leader_election(le: _Fields) -> None:
    """component-base's ValidateLeaderElectionConfiguration, with kube-scheduler's v1 defaults filled in."""
    durations = {
        name: le.duration(name, default)
        for name, default in (("leaseDuration", 15.0), ("renewDeadline", 10.0), ("retryPeriod", 2.0))
    }
    lock = le.string("resourceLock", "leases")
    name = le.string("resourceName", "kube-scheduler")
    namespace = le.string("resourceNamespace", "kube-system")
    if not le.boolean("leaderElect", True):
        return
    for field_name, seconds in durations.items():
        if seconds <= 0:
            raise le.error(field_name, f"Invalid value: {le.doc.get(field_name)!r}: must be greater than zero")
    if durations["leaseDuration"] <= durations["renewDeadline"]:
        raise le.error("leaseDuration", "must be greater than `RenewDeadline`")
    for field_name, value in (("resourceLock", lock), ("resourceNamespace", namespace), ("resourceName", name)):
        if not value:
            raise le.error(field_name, "Required value")
    if lock != "leases":
        raise le.error("resourceLock", f'Invalid value: {_go(lock)}: resourceLock value must be "leases"')


def _plugins(p: _Fields) -> dict[str, Any]:
    """profiles[i].plugins strictly decoded: PluginSets of {name, weight (int32)}; a plugin listed twice in one
    set is kube-scheduler's "already registered"."""
    plugins = p.sub("plugins", set(EXTENSION_POINTS) | set(PASSIVE_POINTS) | _UNSUPPORTED_POINTS)
    out: dict[str, Any] = {}
    for point in plugins.doc:
        if point in _UNSUPPORTED_POINTS:
            raise plugins.error(point, f"extension point {point} is not supported by accelsched")
        pset = plugins.sub(point, {"enabled", "disabled"})
        out[point] = {}
        for key in ("enabled", "disabled"):
            seen: dict[str, int] = {}
            items = []
            for j, raw in enumerate(pset.list(key)):
                item = _Fields(p.source, raw, f"{pset.path}.{key}[{j}]", {"name", "weight"})
                name = item.string("name", "")
                if not name:
                    raise item.error("name", "Required value")
                weight = item.integer("weight", INT32, None)
                if key == "enabled" and name in seen:
                    raise item.error("name", f'plugin "{name}" already registered (as {key}[{seen[name]}])')
                seen[name] = j
                items.append({"name": name} if weight is None else {"name": name, "weight": weight})
            out[point][key] = items
    return out


_UNSUPPORTED_POINTS = {"placementGenerate", "placementScore"}


def _plugin_config(p: _Fields, handle: Any) -> dict[str, dict]:
    """profiles[i].pluginConfig: one entry per plugin (kube-scheduler: Duplicate value), args a mapping whose
    kind/apiVersion, when given, are the plugin's; each entry's args are validated by building the plugin, as
    kube-scheduler decodes and validates every pluginConfig whether or not the plugin is enabled."""
    args: dict[str, dict] = {}
    for j, raw in enumerate(p.list("pluginConfig")):
        pc = _Fields(p.source, raw, f"{p.path}.pluginConfig[{j}]", {"name", "args"})
        name = pc.string("name", "")
        if name not in REGISTRY:
            raise pc.error("name", f"unknown plugin {name!r} (known: {', '.join(REGISTRY)})")
        if name in args:
            raise pc.error("name", f"Duplicate value: {_go(name)}")
        raw_args = pc.doc.get("args") or {}
        if not isinstance(raw_args, Mapping):
            raise pc.error("args", f"must be a mapping, got {_type_name(raw_args)}")
        kind, version = raw_args.get("kind"), raw_args.get("apiVersion")
        if kind is not None and kind != f"{name}Args":
            raise pc.error("args.kind", f"Invalid value: {_go(kind)}: has to match plugin args ({name}Args)")
        if version is not None and version != CONFIG_API_VERSION:
            raise pc.error("args.apiVersion", f"must be {CONFIG_API_VERSION}, got {_go(version)}")
        plain = {k: v for k, v in raw_args.items() if k not in ("apiVersion", "kind")}
        if name in NO_ARGS and plain:
            raise pc.error("args", f"plugin {name} takes no args, got {', '.join(sorted(map(str, plain)))}")
        if name in UNSUPPORTED_ARGS and plain:
            raise pc.error(
                f"args.{sorted(map(str, plain))[0]}", f"{name} args ({UNSUPPORTED_ARGS[name]}) are not supported"
            )
        _KUBE_ARGS_CHECKS.get(name, lambda _pc, _args: None)(pc, plain)
        try:
            REGISTRY[name](dict(plain), handle)
        except InputError as exc:
            exc.source = exc.source or p.source
            exc.obj = exc.obj or OBJ
            exc.field = _join(pc.path, exc.field) if exc.field else pc.path
            raise
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
            raise pc.error("args", f"invalid args: {exc}") from None
        args[name] = plain
    return args


# -- validation_pluginargs.go checks the plugins' own parsers do not make ----------------------------------------

QUALIFIED_NAME_RE = re.compile(r"(?:[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _label_name_error(value: Any) -> str:
    """metav1validation.ValidateLabelName: a qualified name (optional DNS subdomain prefix, a name of <= 63)."""
    if not isinstance(value, str):
        return f"must be a string, got {_type_name(value)}"
    prefix, _, name = value.rpartition("/")
    if not QUALIFIED_NAME_RE.fullmatch(value) or len(name) > 63 or len(prefix) > 253:
        return (
            f"Invalid value: {_go(value)}: name part must consist of alphanumeric characters, '-', '_' or '.', and"
            " must start and end with an alphanumeric character (with an optional DNS subdomain prefix and '/')"
        )
    return ""


def _check_fit_args(pc: _Fields, args: Mapping[str, Any]) -> None:
    """ValidateNodeResourcesFitArgs: ignored resources are label names, groups have no '/', shape points are
    integers, and requestedToCapacityRatio only goes with its type."""
    for key in ("ignoredResources", "ignoredResourceGroups"):
        values = args.get(key) or []
        if not isinstance(values, list):
            raise pc.error(f"args.{key}", f"must be a list, got {_type_name(values)}")
        for i, value in enumerate(values):
            if key == "ignoredResourceGroups" and isinstance(value, str) and "/" in value:
                raise pc.error(
                    f"args.{key}[{i}]", f"Invalid value: {_go(value)}: resource group name can't contain '/'"
                )
            problem = _label_name_error(value)
            if problem:
                raise pc.error(f"args.{key}[{i}]", problem)
    strategy = args.get("scoringStrategy")
    if strategy is None:
        return
    if not isinstance(strategy, Mapping):
        raise pc.error("args.scoringStrategy", f"must be a mapping, got {_type_name(strategy)}")
    _check_resources(pc, strategy.get("resources"), "args.scoringStrategy.resources", weight_one=False)
    ratio = strategy.get("requestedToCapacityRatio")
    path = "args.scoringStrategy.requestedToCapacityRatio"
    if ratio is None:
        return
    if strategy.get("type") != noderesources.REQUESTED_TO_CAPACITY_RATIO:
        raise pc.error(path, "Forbidden: must be nil when type is not RequestedToCapacityRatio")
    if not isinstance(ratio, Mapping) or not isinstance(ratio.get("shape", []), list):
        raise pc.error(path, "must be a mapping with a shape list")
    for i, point in enumerate(ratio.get("shape") or []):
        for key in ("utilization", "score"):
            value = point.get(key) if isinstance(point, Mapping) else None
            if not isinstance(value, int) or isinstance(value, bool):
                raise pc.error(
                    f"{path}.shape[{i}].{key}", f"must be an integer, got {_type_name(value)} {_short(value)}"
                )


def _check_resources(pc: _Fields, resources: Any, path: str, weight_one: bool) -> None:
    """Resource specs {name, weight}: names are strings, listed once; Balanced's weights must be 1."""
    if not isinstance(resources, list):
        return  # absent, or the plugin's parser names the wrong type
    seen: set[str] = set()
    for i, item in enumerate(resources):
        if not isinstance(item, Mapping):
            raise pc.error(f"{path}[{i}]", f"must be a mapping, got {_type_name(item)}")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise pc.error(
                f"{path}[{i}].name", "Required value" if not name else f"must be a string, got {_short(name)}"
            )
        if name in seen:
            raise pc.error(f"{path}[{i}].name", f"Duplicate value: {_go(name)}")
        seen.add(name)
        weight = item.get("weight", 1)
        if weight_one and weight != 1:
            raise pc.error(f"{path}[{i}].weight", f"Invalid value: {_short(weight)}: must be 1")


def _check_balanced_args(pc: _Fields, args: Mapping[str, Any]) -> None:
    """ValidateNodeResourcesBalancedAllocationArgs: each resource once, weight 1."""
    _check_resources(pc, args.get("resources"), "args.resources", weight_one=True)


_KUBE_ARGS_CHECKS: dict[str, Callable[[_Fields, Mapping[str, Any]], None]] = {
    noderesources.FIT_NAME: _check_fit_args,
    noderesources.BALANCED_NAME: _check_balanced_args,
}
