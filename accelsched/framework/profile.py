"""Scheduling profiles: the plugin registry, the default profile, and KubeSchedulerConfiguration loading.

The default profile is kube-scheduler's (reference/kube-scheduler.md) restricted to the plugins accelsched
has, plus DeviceAllocation at Reserve. A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) can
enable, disable and reweight plugins per extension point or through multiPoint, and configure their args.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

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
    "healthzBindAddress",
    "metricsBindAddress",
    "enableProfiling",
    "enableContentionProfiling",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
    "delayCacheUntilActive",
}
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
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=source) from None
    try:
        doc = yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise InputError(f"malformed YAML{where}: {getattr(exc, 'problem', None) or exc}", source=source) from None
    return parse_config(doc, source, handle)


def parse_config(doc: Any, source: str = "", handle: Any = None) -> SchedulerConfig:
    obj = "KubeSchedulerConfiguration"
    if not isinstance(doc, Mapping):
        raise InputError("is not a KubeSchedulerConfiguration mapping", source=source)
    if doc.get("kind") != "KubeSchedulerConfiguration":
        raise InputError(
            f"kind must be KubeSchedulerConfiguration, got {doc.get('kind')!r}", source=source, obj=obj, field="kind"
        )
    if doc.get("apiVersion") != CONFIG_API_VERSION:
        raise InputError(
            f"apiVersion must be {CONFIG_API_VERSION}, got {doc.get('apiVersion')!r}",
            source=source,
            obj=obj,
            field="apiVersion",
        )
    unknown = set(doc) - _TOP_LEVEL
    if unknown:
        raise InputError(
            f"unknown field(s) {', '.join(sorted(unknown))}", source=source, obj=obj, field=sorted(unknown)[0]
        )
    if doc.get("extenders"):
        raise InputError(
            "scheduler extenders are not supported; write a plugin instead", source=source, obj=obj, field="extenders"
        )
    raw_profiles = doc.get("profiles") or [{"schedulerName": "default-scheduler"}]
    if not isinstance(raw_profiles, list):
        raise InputError("must be a list", source=source, obj=obj, field="profiles")
    profiles: dict[str, Profile] = {}
    for i, p in enumerate(raw_profiles):
        path = f"profiles[{i}]"
        if not isinstance(p, Mapping):
            raise InputError("must be a mapping", source=source, obj=obj, field=path)
        unknown = set(p) - _PROFILE_FIELDS
        if unknown:
            raise InputError(
                f"unknown field(s) {', '.join(sorted(unknown))}",
                source=source,
                obj=obj,
                field=f"{path}.{sorted(unknown)[0]}",
            )
        name = p.get("schedulerName") or "default-scheduler"
        if name in profiles:
            raise InputError(f"duplicate schedulerName {name!r}", source=source, obj=obj, field=f"{path}.schedulerName")
        args: dict[str, dict] = {}
        for j, pc in enumerate(p.get("pluginConfig") or []):
            if not isinstance(pc, Mapping) or pc.get("name") not in REGISTRY:
                raise InputError(
                    f"unknown plugin {pc.get('name') if isinstance(pc, Mapping) else pc!r}",
                    source=source,
                    obj=obj,
                    field=f"{path}.pluginConfig[{j}].name",
                )
            pc_args = pc.get("args") or {}
            if not isinstance(pc_args, Mapping):
                raise InputError("must be a mapping", source=source, obj=obj, field=f"{path}.pluginConfig[{j}].args")
            args[pc["name"]] = {k: v for k, v in pc_args.items() if k not in ("apiVersion", "kind")}
        try:
            profiles[name] = build_profile(name, p.get("plugins"), args, handle, source)
        except InputError as exc:
            exc.source = exc.source or source
            raise
    return SchedulerConfig(
        profiles,
        float(doc.get("podInitialBackoffSeconds", 1)),
        float(doc.get("podMaxBackoffSeconds", 10)),
    )
