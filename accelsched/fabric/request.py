"""What a workload asks of the fabric: Kueue's podset annotations (checked as Kueue's webhook checks them), the
1.36 PodGroup's ``schedulingConstraints.topology``, accelsched's own annotations, and each pod's rank.

Kueue reads the annotations on a PodSet's template (a Job's ``spec.template``, a pod group's pods); here they are
read on a PodGroup or on the gang's pods (a Job's pods carry its template's annotations).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from accelsched.errors import Where
from accelsched.fabric import levels

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
ANNOTATIONS = (REQUIRED, PREFERRED, UNCONSTRAINED, SLICE_REQUIRED, SLICE_SIZE)

# Rank labels, most significant first: a JobSet's job index, then the pod's index within its Job or replica type.
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
# Kubeflow's rank 0 lives in the Master (PyTorchJob) or Launcher (MPIJob) replica: it comes first.
_FIRST_REPLICA_TYPES = ("master", "launcher")
_BOOL_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_BOOL_FALSE = ("0", "f", "F", "FALSE", "false", "False")  # strconv.ParseBool


@dataclass(frozen=True)
class TopologyRequest:
    """kueue.PodSetTopologyRequest: required or preferred at one level (or unconstrained), optional slices."""

    required: str = ""
    preferred: str = ""
    unconstrained: bool = False
    slice_level: str = ""
    slice_size: int = 0

    @property
    def level(self) -> str:
        return self.required or self.preferred

    def __bool__(self) -> bool:
        return bool(self.required or self.preferred or self.slice_level)


def parse_annotations(
    annotations: Mapping[str, str], where: Where, path: str = "metadata.annotations"
) -> TopologyRequest:
    """ValidateTASPodSetRequest (pkg/controller/jobframework/tas_validation.go): the first problem, worded as
    Kueue's webhook words it, on the annotation's field."""
    found = {key: annotations[key] for key in ANNOTATIONS if key in annotations}
    if not found:
        return TopologyRequest()

    def field(key: str) -> str:
        return f"{path}[{key}]"

    if sum(key in found for key in (REQUIRED, PREFERRED, UNCONSTRAINED)) > 1:
        raise where.error(
            path,
            f'Invalid value: "object": must not contain more than one topology annotation: '
            f'["{REQUIRED}", "{PREFERRED}", "{UNCONSTRAINED}"]',
        )
    for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
        if key in found and (problem := levels.label_key_problem(found[key])):
            raise where.error(field(key), f'Invalid value: "{found[key]}": {problem}')
    unconstrained = found.get(UNCONSTRAINED)
    if unconstrained is not None and unconstrained not in _BOOL_TRUE + _BOOL_FALSE:
        raise where.error(field(UNCONSTRAINED), f'Invalid value: "{unconstrained}": must be a boolean value')
    size = 0
    if SLICE_SIZE in found:
        text = found[SLICE_SIZE]
        try:
            size = int(text, 10)
        except ValueError:
            raise where.error(field(SLICE_SIZE), f'Invalid value: "{text}": must be a numeric value') from None
        if not -(2**31) <= size < 2**31 or text.strip() != text or "_" in text:
            raise where.error(field(SLICE_SIZE), f'Invalid value: "{text}": must be a numeric value')
        if size < 1:
            raise where.error(field(SLICE_SIZE), f'Invalid value: "{text}": must be greater than or equal to 1')
    if SLICE_REQUIRED in found and SLICE_SIZE not in found:
        raise where.error(field(SLICE_SIZE), f"Required value: must be set when '{SLICE_REQUIRED}' is specified")
    if SLICE_SIZE in found and SLICE_REQUIRED not in found:
        raise where.error(field(SLICE_SIZE), f"Forbidden: may not be set when '{SLICE_REQUIRED}' is not specified")
    return TopologyRequest(
        required=found.get(REQUIRED, ""),
        preferred=found.get(PREFERRED, ""),
        unconstrained=unconstrained in _BOOL_TRUE,
        slice_level=found.get(SLICE_REQUIRED, ""),
        slice_size=size,
    )


def check_count(request: TopologyRequest, count: int, where: Where, path: str = "metadata.annotations") -> None:
    """ValidateSliceSizeAnnotationUpperBound: a slice may not be larger than the pod set."""
    if request.slice_size > count:
        raise where.error(
            f"{path}[{SLICE_SIZE}]",
            f'Invalid value: "{request.slice_size}": must not be greater than pod set count {count}',
        )


def rank(labels: Mapping[str, str], annotations: Mapping[str, str], name: str) -> tuple:
    """A pod's place in its gang's rank order: (JobSet job index, Kubeflow rank-0 replica first, index within its
    Job or replica type, name). Pods without rank labels keep their name order."""

    def index(key: str) -> int:
        value = labels.get(key, annotations.get(key, ""))
        return int(value) if value.isdigit() else -1

    replica_type = labels.get(REPLICA_TYPE, "").lower()
    within = max(index(COMPLETION_INDEX), index(REPLICA_INDEX))
    return (index(JOBSET_JOB_INDEX), replica_type not in _FIRST_REPLICA_TYPES, within, name)
