"""kube-scheduler's validation of a KubeSchedulerConfiguration (validation.go) and of the plugins' args
(validation_pluginargs.go) where the plugins' own parsers do not already refuse the same input."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from accelsched.config.fields import (
    CLIENT_CONNECTION_FIELDS,
    DEFAULT_PARALLELISM,
    DEFAULT_POD_INITIAL_BACKOFF_SECONDS,
    DEFAULT_POD_MAX_BACKOFF_SECONDS,
    INT32,
    INT64,
    LEADER_ELECTION_FIELDS,
    MAX_DURATION_SECONDS,
    Fields,
    go_value,
    short,
    type_name,
)
from accelsched.plugins import noderesources


def validate_top_level(top: Fields) -> None:
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
    client = top.sub("clientConnection", CLIENT_CONNECTION_FIELDS)
    for name in ("kubeconfig", "acceptContentTypes", "contentType"):
        client.string(name, "")
    client.number("qps", 50.0)
    burst = client.integer("burst", INT32, 100)
    if burst < 0:
        raise client.error("burst", f"Invalid value: {burst}: must be non-negative")
    _validate_leader_election(top.sub("leaderElection", LEADER_ELECTION_FIELDS))


def client_connection(top: Fields) -> tuple[float, int]:
    """clientConnection's qps and burst after v1 defaulting (SetDefaults_KubeSchedulerConfiguration: 0 is unset,
    so 50 and 100); a negative qps turns the client's throttle off, as in client-go."""
    client = top.sub("clientConnection", CLIENT_CONNECTION_FIELDS)
    return client.number("qps", 50.0) or 50.0, client.integer("burst", INT32, 100) or 100


def _validate_leader_election(le: Fields) -> None:
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
        raise le.error("resourceLock", f'Invalid value: {go_value(lock)}: resourceLock value must be "leases"')


# -- validation_pluginargs.go checks the plugins' own parsers do not make ----------------------------------------

QUALIFIED_NAME_RE = re.compile(r"(?:[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _label_name_error(value: Any) -> str:
    """metav1validation.ValidateLabelName: a qualified name (optional DNS subdomain prefix, a name of <= 63)."""
    if not isinstance(value, str):
        return f"must be a string, got {type_name(value)}"
    prefix, _, name = value.rpartition("/")
    if not QUALIFIED_NAME_RE.fullmatch(value) or len(name) > 63 or len(prefix) > 253:
        return (
            f"Invalid value: {go_value(value)}: name part must consist of alphanumeric characters, '-', '_' or '.', and"
            " must start and end with an alphanumeric character (with an optional DNS subdomain prefix and '/')"
        )
    return ""


def _check_fit_args(pc: Fields, args: Mapping[str, Any]) -> None:
    """ValidateNodeResourcesFitArgs: ignored resources are label names, groups have no '/', shape points are
    integers, and requestedToCapacityRatio only goes with its type."""
    for key in ("ignoredResources", "ignoredResourceGroups"):
        values = args.get(key) or []
        if not isinstance(values, list):
            raise pc.error(f"args.{key}", f"must be a list, got {type_name(values)}")
        for i, value in enumerate(values):
            if key == "ignoredResourceGroups" and isinstance(value, str) and "/" in value:
                raise pc.error(
                    f"args.{key}[{i}]", f"Invalid value: {go_value(value)}: resource group name can't contain '/'"
                )
            problem = _label_name_error(value)
            if problem:
                raise pc.error(f"args.{key}[{i}]", problem)
    strategy = args.get("scoringStrategy")
    if strategy is None:
        return
    if not isinstance(strategy, Mapping):
        raise pc.error("args.scoringStrategy", f"must be a mapping, got {type_name(strategy)}")
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
                raise pc.error(f"{path}.shape[{i}].{key}", f"must be an integer, got {type_name(value)} {short(value)}")


def _check_resources(pc: Fields, resources: Any, path: str, weight_one: bool) -> None:
    """Resource specs {name, weight}: names are strings, listed once; Balanced's weights must be 1."""
    if not isinstance(resources, list):
        return  # absent, or the plugin's parser names the wrong type
    seen: set[str] = set()
    for i, item in enumerate(resources):
        if not isinstance(item, Mapping):
            raise pc.error(f"{path}[{i}]", f"must be a mapping, got {type_name(item)}")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise pc.error(
                f"{path}[{i}].name", "Required value" if not name else f"must be a string, got {short(name)}"
            )
        if name in seen:
            raise pc.error(f"{path}[{i}].name", f"Duplicate value: {go_value(name)}")
        seen.add(name)
        weight = item.get("weight", 1)
        if weight_one and weight != 1:
            raise pc.error(f"{path}[{i}].weight", f"Invalid value: {short(weight)}: must be 1")


def _check_balanced_args(pc: Fields, args: Mapping[str, Any]) -> None:
    """ValidateNodeResourcesBalancedAllocationArgs: each resource once, weight 1."""
    _check_resources(pc, args.get("resources"), "args.resources", weight_one=True)


KUBE_ARGS_CHECKS: dict[str, Callable[[Fields, Mapping[str, Any]], None]] = {
    noderesources.FIT_NAME: _check_fit_args,
    noderesources.BALANCED_NAME: _check_balanced_args,
}
