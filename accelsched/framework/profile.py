"""Scheduling profiles: plugin instances per extension point, resolved from a registry and a plugin config.

This is kube-scheduler's framework/runtime side of profiles: it knows the extension points and how enabled,
disabled and multiPoint sets merge, but not which plugins exist. The registry and the default plugin set come from
the caller (accelsched.plugins.registry, through accelsched.config), so the framework never imports a plugin.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelsched.errors import InputError
from accelsched.framework import interface as fw

Factory = Callable[[dict, Any], Any]
Registry = Mapping[str, Factory]

# Extension point name in the config -> the protocol a plugin must satisfy to sit there.
EXTENSION_POINTS: dict[str, type] = {
    "preEnqueue": fw.PreEnqueuePlugin,
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
PASSIVE_POINTS = ("postBind", "multiPoint")


MAX_NODE_SCORE = 100
# kube-scheduler's MaxTotalScore guards an int64 sum; accelsched multiplies a plugin's scores (at most MaxNodeScore,
# 100) by its weight in the plugin's own dtype, which may be int32: the sum of weight x 100 must fit int32.
MAX_TOTAL_SCORE = 2**31 - 1


@dataclass
class Profile:
    """One scheduling profile: plugin instances per extension point, in order, and score weights."""

    scheduler_name: str
    points: dict[str, list[Any]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None  # overrides SchedulerConfig's when set (0 too: adaptive)

    def at(self, point: str) -> list[Any]:
        return self.points.get(point, [])


@dataclass
class SchedulerConfig:
    profiles: dict[str, Profile]
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    percentage_of_nodes_to_score: int = 0  # KubeSchedulerConfiguration's; 0: the adaptive default
    # clientConnection.qps and burst (v1 defaults 50 and 100): live mode's client throttle (live/kube.py Throttle)
    client_qps: float = 50.0
    client_burst: int = 100


def _implements(plugin: Any, point: str) -> bool:
    return isinstance(plugin, EXTENSION_POINTS[point])


def build_profile(
    scheduler_name: str,
    plugins_cfg: Mapping[str, Any] | None = None,
    plugin_args: Mapping[str, dict] | None = None,
    handle: Any = None,
    where: str = "",
    *,
    registry: Registry,
    defaults: Sequence[tuple[str, int]],
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
            if name != "*" and name not in registry:
                raise InputError(
                    f"unknown plugin {name!r} (known: {', '.join(registry)})",
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
            instances[name] = registry[name](dict(args), handle)
        return instances[name]

    # mergePluginSet (apis/config/v1/default_plugins.go): a default plugin enabled again keeps its place with the new
    # entry's weight; the other custom plugins follow the defaults in their own order.
    multi_disabled = {n for n, _ in entries("multiPoint", "disabled")}
    multi: list[tuple[str, int]] = []
    custom = dict(entries("multiPoint", "enabled"))
    if "*" not in multi_disabled:
        multi = [(n, custom.get(n, w)) for n, w in defaults if n not in multi_disabled]
    placed = {n for n, _ in multi}
    multi += [(n, w) for n, w in entries("multiPoint", "enabled") if n not in placed]

    profile = Profile(scheduler_name)
    for point in EXTENSION_POINTS:
        disabled = {n for n, _ in entries(point, "disabled")}
        enabled = entries(point, "enabled")
        for name, _ in enabled:
            if not _implements(instance(name), point):
                raise InputError(
                    f"plugin {name} does not implement {point}",
                    source=where,
                    obj=f"profile {scheduler_name}",
                    field=f"plugins.{point}.enabled",
                )
        # expandMultiPointPlugins (framework/runtime): the point's own entries that override a multiPoint plugin come
        # first, in the point's order; then the multiPoint plugins; then the point's other entries.
        from_multi = []
        if "*" not in disabled:
            from_multi = [n for n, _ in multi if n not in disabled and _implements(instance(n), point)]
        overrides = [(n, w) for n, w in enabled if n in from_multi]
        rest = [(n, w) for n, w in enabled if n not in from_multi]
        explicit = {n for n, _ in enabled}
        weight_of = dict(multi)
        chosen = overrides + [(n, weight_of[n]) for n in from_multi if n not in explicit] + rest
        profile.points[point] = [instance(n) for n, _ in chosen]
        if point == "score":
            for n, w in chosen:
                profile.weights[n] = w or 1  # a zero weight is not allowed: kube-scheduler makes it 1
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
