"""Kueue's Configuration, as far as admission reads it: fairSharing and admissionFairSharing.

Kueue takes its configuration from a file (the kueue-manager-config ConfigMap in a cluster); here it is one more
document of the input: ``apiVersion: config.kueue.x-k8s.io/v1beta2`` (or ``v1beta1``), ``kind: Configuration``.
Its other fields (webhooks, integrations, metrics, ...) do not change admission and are read past.

- ``fairSharing`` (apis/config/v1beta2 FairSharing): in v1beta2 fair sharing is on when the field is present and
  ``preemptionStrategies`` is required; in v1beta1 it is on with ``enable: true``, the strategies defaulting to
  both, in order (v1beta1 defaults.go). Either way the list must be one of Kueue's valid sets
  (pkg/config/validation.go validateFairSharing).
- ``featureGates``: ``PrioritizePreemptorWorkloads`` is honoured (its default, off, otherwise),
  ``AdmissionFairSharing`` (beta, on by default: false turns admissionFairSharing off), and
  ``ConcurrentAdmission`` and ``MultiKueueOrchestratedPreemption`` (alpha, off by default) as far as either turns on
  the Workloads' preemption gates (queues.preemptiongates; not the variants of concurrent admission, nor MultiKueue);
- ``admissionFairSharing``: usageHalfLifeTime, usageSamplingInterval (default 5m) and resourceWeights, checked as
  validateAdmissionFairSharing checks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelsched.config.fields import Fields, go_value
from accelsched.errors import InputError
from accelsched.queues import preemptiongates

GROUP = "config.kueue.x-k8s.io"
KIND = "Configuration"
VERSIONS = ("v1beta1", "v1beta2")
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
DEFAULT_STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
VALID_STRATEGY_SETS = ((LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,), (LESS_THAN_INITIAL_SHARE,), DEFAULT_STRATEGIES)
PRIORITIZE_PREEMPTOR = "PrioritizePreemptorWorkloads"
ADMISSION_FAIR_SHARING = "AdmissionFairSharing"
DEFAULT_SAMPLING_INTERVAL = 300.0  # seconds (v1beta2 defaults.go: 5min)
_NEGATIVE = "must be greater than or equal to 0"


@dataclass(frozen=True)
class AdmissionFairSharing:
    usage_half_life: float  # seconds
    usage_sampling_interval: float
    resource_weights: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class KueueConfig:
    """What admission reads of Kueue's Configuration: fair sharing off and no AFS unless the document says so."""

    fair_sharing: tuple[str, ...] | None = None  # the preemption strategies; None: fair sharing off
    admission_fair_sharing: AdmissionFairSharing | None = None
    # featureGates.PrioritizePreemptorWorkloads (alpha, off by default): a workload waiting for its victims goes
    # before the other heads of its cohort, so a victim requeued meanwhile cannot take back the room
    prioritize_preemptor: bool = False
    source: str = ""
    # featureGates.ConcurrentAdmission or MultiKueueOrchestratedPreemption (alpha, off by default): a closed
    # preemption gate keeps a workload from preempting (queues.preemptiongates)
    preemption_gates: bool = False


def is_config(doc: Mapping[str, Any]) -> bool:
    api_version = doc.get("apiVersion")
    return doc.get("kind") == KIND and isinstance(api_version, str) and api_version.split("/", 1)[0] == GROUP


class _Fields(Fields):
    """Fields, with errors naming Kueue's Configuration instead of a KubeSchedulerConfiguration."""

    def __init__(self, source: str, doc: Any, path: str, fields: set[str], obj: str) -> None:
        self.obj = obj
        super().__init__(source, doc, path, fields)

    def error(self, name: str, message: str) -> InputError:
        where = ".".join(p for p in (self.path, name) if p) or "(top level)"
        return InputError(message, source=self.source, obj=self.obj, field=where)


def parse(doc: Mapping[str, Any], source: str = "") -> KueueConfig:
    """The fair-sharing parts of a Configuration document; an InputError naming the field for a bad one."""
    meta = doc.get("metadata")
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""  # Kueue's own file usually has none
    obj = f"{KIND} {name}".strip()
    version = str(doc.get("apiVersion")).split("/", 1)[-1]
    if version not in VERSIONS:
        raise InputError(
            f'no kind "{KIND}" is registered for version "{doc.get("apiVersion")}" (served: '
            f"{', '.join(GROUP + '/' + v for v in VERSIONS)})",
            source=source,
            obj=obj,
            field="apiVersion",
        )
    strategies = _fair_sharing(doc.get("fairSharing"), version, source, obj)
    afs = _admission_fair_sharing(doc.get("admissionFairSharing"), source, obj)
    gates = doc.get("featureGates") or {}
    if not isinstance(gates, Mapping) or not all(isinstance(v, bool) for v in gates.values()):
        raise InputError(
            "must be a map of feature names to true or false", source=source, obj=obj, field="featureGates"
        )
    if not gates.get(ADMISSION_FAIR_SHARING, True):
        afs = None  # afs.Enabled: the configuration and the gate (beta, on by default)
    # Other gates are read past: those that change admission keep Kueue's defaults here (docs/queues.md).
    gated = any(gates.get(name, False) for name in preemptiongates.FEATURE_GATES)
    return KueueConfig(strategies, afs, bool(gates.get(PRIORITIZE_PREEMPTOR, False)), source, gated)


def _fair_sharing(raw: Any, version: str, source: str, obj: str) -> tuple[str, ...] | None:
    if raw is None:
        return None
    fields = {"preemptionStrategies"} | ({"enable"} if version == "v1beta1" else set())
    fs = _Fields(source, raw, "fairSharing", fields, obj)
    if version == "v1beta1" and not fs.boolean("enable", False):
        return None  # Convert_v1beta1_Configuration_To_v1beta2: fair sharing off, strategies dropped
    listed = fs.list("preemptionStrategies")
    for i, s in enumerate(listed):
        if not isinstance(s, str):
            raise fs.error(f"preemptionStrategies[{i}]", f"must be a string, got {go_value(s)}")
    strategies = tuple(listed)
    if not strategies:
        if version == "v1beta1":
            return DEFAULT_STRATEGIES
        raise fs.error("preemptionStrategies", "Required value: must be specified")
    if strategies not in VALID_STRATEGY_SETS:
        shown = ", ".join(f'"{",".join(s)}"' for s in VALID_STRATEGY_SETS)
        raise fs.error(
            "preemptionStrategies",
            f"Unsupported value: []{version}.PreemptionStrategy{{{', '.join(map(go_value, strategies))}}}: "
            f"supported values: {shown}",
        )
    return strategies


def _admission_fair_sharing(raw: Any, source: str, obj: str) -> AdmissionFairSharing | None:
    if raw is None:
        return None
    path = "admissionFairSharing"
    afs = _Fields(source, raw, path, {"usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"}, obj)
    half_life = afs.duration("usageHalfLifeTime", 0.0)
    if half_life < 0:
        raise afs.error("usageHalfLifeTime", f"Invalid value: {go_value(raw['usageHalfLifeTime'])}: {_NEGATIVE}")
    interval = afs.duration("usageSamplingInterval", 0.0) or DEFAULT_SAMPLING_INTERVAL  # cmp.Or: 0 is unset
    if interval < 0:
        value = go_value(raw["usageSamplingInterval"])
        raise afs.error("usageSamplingInterval", f"Invalid value: {value}: must be greater than 0")
    raw_weights = afs.value("resourceWeights", (Mapping,), "a mapping", {})
    weights = _Fields(source, raw_weights, f"{path}.resourceWeights", set(map(str, raw_weights)), obj)
    out: dict[str, float] = {}
    for resource in map(str, raw_weights):
        weight = weights.number(resource, 1.0)
        if weight < 0:
            raise weights.error(resource, f"Invalid value: {weight}: {_NEGATIVE}")
        out[resource] = weight
    return AdmissionFairSharing(half_life, interval, out)
