"""Loading a KubeSchedulerConfiguration into profiles built from the in-tree registry.

This is where kube-scheduler's scheduler.New meets NewInTreeRegistry: the one place that knows both the framework
(how profiles are built) and the plugins (accelsched.plugins.registry).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelsched.api import reader
from accelsched.config.fields import (
    DEFAULT_POD_INITIAL_BACKOFF_SECONDS,
    DEFAULT_POD_MAX_BACKOFF_SECONDS,
    DEFAULT_SCHEDULER_NAME,
    DNS1123_SUBDOMAIN_MESSAGE,
    DNS1123_SUBDOMAIN_RE,
    INT32,
    INT64,
    OBJ,
    Fields,
    go_value,
    join_path,
    type_name,
)
from accelsched.config.validation import KUBE_ARGS_CHECKS, client_connection, validate_top_level
from accelsched.errors import InputError
from accelsched.framework import profile as framework_profile
from accelsched.framework.profile import EXTENSION_POINTS, PASSIVE_POINTS, Profile, SchedulerConfig
from accelsched.plugins import deviceallocation, noderesourcetopology, queuesort
from accelsched.plugins.registry import DEFAULT_PLUGINS, NO_ARGS, REGISTRY, UNSUPPORTED_ARGS

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


def build_profile(
    scheduler_name: str,
    plugins_cfg: Mapping[str, Any] | None = None,
    plugin_args: Mapping[str, dict] | None = None,
    handle: Any = None,
    where: str = "",
) -> Profile:
    """A profile from the in-tree registry and kube-scheduler's default plugins (framework.profile.build_profile)."""
    return framework_profile.build_profile(
        scheduler_name, plugins_cfg, plugin_args, handle, where, registry=REGISTRY, defaults=DEFAULT_PLUGINS
    )


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
    data = reader.read_input(path, source)
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
    top = Fields(source, doc, "", _TOP_LEVEL)
    if top.doc.get("extenders"):
        raise top.error("extenders", "scheduler extenders are not supported; write a plugin instead")
    validate_top_level(top)
    raw_profiles = top.list("profiles") or [{}]
    profiles: dict[str, Profile] = {}
    first_name: dict[str, int] = {}
    queue_sorts: list[Any] = []
    for i, raw in enumerate(raw_profiles):
        p = Fields(source, raw, f"profiles[{i}]", _PROFILE_FIELDS)
        name = p.string("schedulerName", DEFAULT_SCHEDULER_NAME if len(raw_profiles) == 1 else None)
        if not name:
            raise p.error("schedulerName", "Required value")
        if name != name.strip() or not DNS1123_SUBDOMAIN_RE.fullmatch(name) or len(name) > 253:
            # kube-scheduler only asks for a non-empty name, but a pod's spec.schedulerName must be a DNS-1123
            # subdomain (pod validation), so no pod could ever ask for this profile.
            raise p.error("schedulerName", f"Invalid value: {go_value(name)}: {DNS1123_SUBDOMAIN_MESSAGE}")
        if name in first_name:
            raise p.error("schedulerName", f"Duplicate value: {go_value(name)} (as profiles[{first_name[name]}])")
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
        profiles[name].percentage_of_nodes_to_score = percentage
    for i, queue_sort in enumerate(queue_sorts[1:], 1):
        if queue_sort != queue_sorts[0]:
            raise InputError(
                "must be the same for all profiles", source=source, obj=OBJ, field=f"profiles[{i}].plugins.queueSort"
            )
    return SchedulerConfig(
        profiles,
        float(top.integer("podInitialBackoffSeconds", INT64, DEFAULT_POD_INITIAL_BACKOFF_SECONDS)),
        float(top.integer("podMaxBackoffSeconds", INT64, DEFAULT_POD_MAX_BACKOFF_SECONDS)),
        top.integer("percentageOfNodesToScore", INT32, 0),
        *client_connection(top),
    )


def _plugins(p: Fields) -> dict[str, Any]:
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
                item = Fields(p.source, raw, f"{pset.path}.{key}[{j}]", {"name", "weight"})
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


def _plugin_config(p: Fields, handle: Any) -> dict[str, dict]:
    """profiles[i].pluginConfig: one entry per plugin (kube-scheduler: Duplicate value), args a mapping whose
    kind/apiVersion, when given, are the plugin's; each entry's args are validated by building the plugin, as
    kube-scheduler decodes and validates every pluginConfig whether or not the plugin is enabled."""
    args: dict[str, dict] = {}
    for j, raw in enumerate(p.list("pluginConfig")):
        pc = Fields(p.source, raw, f"{p.path}.pluginConfig[{j}]", {"name", "args"})
        name = pc.string("name", "")
        if name not in REGISTRY:
            raise pc.error("name", f"unknown plugin {name!r} (known: {', '.join(REGISTRY)})")
        if name in args:
            raise pc.error("name", f"Duplicate value: {go_value(name)}")
        raw_args = pc.doc.get("args") or {}
        if not isinstance(raw_args, Mapping):
            raise pc.error("args", f"must be a mapping, got {type_name(raw_args)}")
        kind, version = raw_args.get("kind"), raw_args.get("apiVersion")
        if kind is not None and kind != f"{name}Args":
            raise pc.error("args.kind", f"Invalid value: {go_value(kind)}: has to match plugin args ({name}Args)")
        if version is not None and version != CONFIG_API_VERSION:
            raise pc.error("args.apiVersion", f"must be {CONFIG_API_VERSION}, got {go_value(version)}")
        plain = {k: v for k, v in raw_args.items() if k not in ("apiVersion", "kind")}
        if name in NO_ARGS and plain:
            raise pc.error("args", f"plugin {name} takes no args, got {', '.join(sorted(map(str, plain)))}")
        if name in UNSUPPORTED_ARGS and plain:
            raise pc.error(
                f"args.{sorted(map(str, plain))[0]}", f"{name} args ({UNSUPPORTED_ARGS[name]}) are not supported"
            )
        KUBE_ARGS_CHECKS.get(name, lambda _pc, _args: None)(pc, plain)
        try:
            REGISTRY[name](dict(plain), handle)
        except InputError as exc:
            exc.source = exc.source or p.source
            exc.obj = exc.obj or OBJ
            exc.field = join_path(pc.path, exc.field) if exc.field else pc.path
            raise
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
            raise pc.error("args", f"invalid args: {exc}") from None
        args[name] = plain
    return args
