"""Kueue's objects (kueue.x-k8s.io/v1beta2) read from manifests, and refused as the CRD schema and Kueue's webhooks
refuse them: one line naming the file, the object and the field, exit code 2.

The good manifests are Kueue's own setup samples (single-clusterqueue-setup, cohort and flavor examples from its
docs); each bad case changes one field and expects the words of the check that catches it (the CRD's structural
schema, pattern, size or CEL rule, or the webhook in pkg/webhooks), with the field path the API server prints.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from accelsched.api.loader import load
from accelsched.cli import main
from accelsched.errors import InputError

SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: gpu-a100
spec:
  nodeLabels:
    cloud.provider.com/accelerator: nvidia-a100
  nodeTaints:
  - key: nvidia.com/gpu
    value: present
    effect: NoSchedule
  tolerations:
  - key: spot
    operator: Exists
    effect: NoSchedule
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: research
spec:
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: gpu-a100
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cluster-queue
spec:
  cohortName: research
  namespaceSelector: {}
  queueingStrategy: StrictFIFO
  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort:
      policy: LowerPriority
      maxPriorityThreshold: 100
    withinClusterQueue: LowerPriority
  flavorFungibility:
    whenCanBorrow: TryNextFlavor
    whenCanPreempt: TryNextFlavor
    preference: BorrowingOverPreemption
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: 9
        borrowingLimit: "2"
      - name: memory
        nominalQuota: 36Gi
        lendingLimit: 10Gi
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: gpu-a100
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 4
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: user-queue
spec:
  clusterQueue: cluster-queue
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: sample-priority
value: 10000
description: "Sample priority"
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: sample-workload
  namespace: default
spec:
  queueName: user-queue
  priorityClassRef:
    group: kueue.x-k8s.io
    kind: WorkloadPriorityClass
    name: sample-priority
  priority: 10000
  podSets:
  - name: main
    count: 3
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: dummy-job
          image: registry.k8s.io/e2e-test-images/agnhost:2.53
          resources:
            requests:
              cpu: "1"
              memory: 200Mi
"""


def _docs() -> list[dict]:
    return list(yaml.safe_load_all(SETUP))


def _load(tmp_path: Path, docs: list[dict]) -> object:
    path = tmp_path / "queues.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return load([path])


def _find(docs: list[dict], kind: str) -> dict:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] != "default-flavor")


def test_kueue_samples_are_read_with_their_defaults(tmp_path: Path) -> None:
    queues = _load(tmp_path, _docs()).queues
    cq = queues.cluster_queues["cluster-queue"]
    assert cq.cohort == "research" and cq.queueing_strategy == "StrictFIFO" and cq.stop_policy == "None"
    cpu, memory = cq.resource_groups[0].flavors[0].resources
    assert (cpu.nominal, cpu.borrowing_limit, cpu.lending_limit) == (9000, 2000, None)  # millicores, as Kueue
    assert (memory.nominal, memory.lending_limit) == (36 << 30, 10 << 30)
    assert cq.preemption.borrow_within_cohort == "LowerPriority" and cq.preemption.max_priority_threshold == 100
    assert cq.namespace_selector is not None and cq.namespace_selector.empty
    assert queues.cohorts["research"].resource_groups[0].flavors[0].resources[0].nominal == 8
    assert queues.flavors["gpu-a100"].node_labels == {"cloud.provider.com/accelerator": "nvidia-a100"}
    assert queues.local_queues["default/user-queue"].cluster_queue == "cluster-queue"
    assert queues.priority_classes["sample-priority"].value == 10000
    workload = queues.workloads["default/sample-workload"]
    assert workload.priority == 10000 and workload.pod_sets[0].count == 3


def test_a_cluster_queue_without_a_selector_or_strategy_takes_the_crd_defaults(tmp_path: Path) -> None:
    docs = _docs()
    spec = _find(docs, "ClusterQueue")["spec"]
    for key in ("namespaceSelector", "queueingStrategy", "preemption", "flavorFungibility"):
        del spec[key]
    cq = _load(tmp_path, docs).queues.cluster_queues["cluster-queue"]
    assert cq.queueing_strategy == "BestEffortFIFO"
    assert cq.namespace_selector is None  # nil: Kueue matches no namespace
    assert (cq.flavor_fungibility.when_can_borrow, cq.flavor_fungibility.when_can_preempt) == (
        "MayStopSearch",
        "TryNextFlavor",
    )
    assert cq.preemption.within_cluster_queue == "Never"


def _set(path: str, value: object):
    def change(doc: dict) -> None:
        keys = path.split(".")
        node = doc
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if value is _DELETE:
            del node[keys[-1]]
        elif isinstance(node, list):
            node[int(keys[-1])] = value
        else:
            node[keys[-1]] = value

    return change


_DELETE = object()
_CQ = "ClusterQueue cluster-queue"
_QUOTA = "spec.resourceGroups.0.flavors.0.resources"

BAD = [
    # the structural schema (types, enums, unknown fields)
    ("ClusterQueue", _set("spec.queueingStrategy", "Fifo"), _CQ, "spec.queueingStrategy",
     'Unsupported value: "Fifo": supported values: "StrictFIFO", "BestEffortFIFO"'),
    ("ClusterQueue", _set("spec.stopPolicy", "Drain"), _CQ, "spec.stopPolicy", 'Unsupported value: "Drain"'),
    ("ClusterQueue", _set("spec.cohort", "research"), _CQ, "spec.cohort", "unknown field"),
    ("LocalQueue", _set("spec.clusterQueue", 7), "LocalQueue default/user-queue", "spec.clusterQueue",
     "must be a string"),
    # the CRD's patterns, sizes and CEL rules
    ("ClusterQueue", _set("spec.cohortName", "Research_Team"), _CQ, "spec.cohortName",
     "Invalid value: \"Research_Team\": spec.cohortName in body should match '^[a-z0-9]"),
    ("ClusterQueue", _set("spec.resourceGroups.0.flavors.0.resources", [{"name": "cpu", "nominalQuota": 9}]), _CQ,
     "spec.resourceGroups[0]",
     'Invalid value: "object": flavors must have the same number of resources as the coveredResources'),
    ("ClusterQueue", _set("spec.resourceGroups.0.coveredResources", []), _CQ,
     "spec.resourceGroups[0].coveredResources", "should have at least 1 items"),
    ("ClusterQueue", _set("spec.cohortName", _DELETE), _CQ, "spec",
     'Invalid value: "object": borrowingLimit must be nil when cohort is empty'),
    ("ClusterQueue", _set("spec.preemption.reclaimWithinCohort", "Never"), _CQ, "spec.preemption",
     "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"),
    ("ClusterQueue", _set("spec.flavorFungibility.whenCanBorrow", "MayStopSearch"), _CQ, "spec.flavorFungibility",
     "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor"),
    ("ResourceFlavor", _set("spec.nodeLabels", {f"k{i}": "v" for i in range(9)}), "ResourceFlavor gpu-a100",
     "spec.nodeLabels", "Too many: 9: must have at most 8 items"),
    ("ResourceFlavor", _set("spec.nodeTaints.0.effect", "NoExecut"), "ResourceFlavor gpu-a100", "spec.nodeTaints",
     "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"),
    ("ResourceFlavor", _set("spec.topologyName", "default"), "ResourceFlavor gpu-a100", "", None),  # labels: fine
    ("Workload", _set("spec.podSets.0.name", "Main"), "Workload default/sample-workload", "spec.podSets[0].name",
     "in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"),
    ("Workload", _set("spec.priority", _DELETE), "Workload default/sample-workload", "spec",
     "priority should not be nil when priorityClassRef is set"),
    ("Workload", _set("spec.priorityClassRef.kind", "PriorityClass"), "Workload default/sample-workload",
     "spec.priorityClassRef", "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group"),
    # Kueue's webhooks
    ("ClusterQueue", _set(f"{_QUOTA}.0.nominalQuota", "-9"), _CQ, "spec.resourceGroups[0].flavors[0].resources[0]"
     ".nominalQuota", 'Invalid value: "-9": must be greater than or equal to 0'),
    ("ClusterQueue", _set(f"{_QUOTA}.1.lendingLimit", "40Gi"), _CQ,
     "spec.resourceGroups[0].flavors[0].resources[1].lendingLimit",
     'Invalid value: "40Gi": must be less than or equal to the nominalQuota'),
    ("ClusterQueue", _set(f"{_QUOTA}.1.name", "mem"), _CQ, "spec.resourceGroups[0].flavors[0].resources[1].name",
     'Invalid value: "mem": must match the name in coveredResources'),
    ("ClusterQueue", _set("spec.resourceGroups.1.coveredResources.0", "cpu"), _CQ,
     "spec.resourceGroups[1].coveredResources[0]", 'Duplicate value: "cpu"'),
    ("ClusterQueue", _set("spec.resourceGroups.1.flavors.0.name", "default-flavor"), _CQ,
     "spec.resourceGroups[1].flavors[0].name", 'Duplicate value: "default-flavor"'),
    ("Cohort", _set("spec.resourceGroups.0.flavors.0.resources.0.lendingLimit", 2), "Cohort research",
     "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", 'Invalid value: "2": must be nil when parent'
     " is empty"),
    ("ClusterQueue", _set("spec.fairSharing", {"weight": "-1"}), _CQ, "spec.fairSharing",
     'Invalid value: "-1": must be greater than or equal to 0'),
    ("Workload", _set("spec.podSets.0.template.spec.containers.0.resources.requests.pods", "1"),
     "Workload default/sample-workload", "spec.podSets[0].template.spec.containers[0].resources.requests[pods]",
     'Invalid value: "pods": the key is reserved for internal kueue use'),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "change", "obj", "field", "message"), BAD)
def test_bad_queue_objects_are_refused_naming_the_field(
    tmp_path: Path, kind: str, change, obj: str, field: str, message: str | None
) -> None:
    docs = _docs()
    change(_find(docs, kind))
    if message is None:
        _load(tmp_path, docs)  # the change is valid: no error
        return
    with pytest.raises(InputError) as info:
        _load(tmp_path, docs)
    assert info.value.obj == obj
    assert info.value.field == field
    assert message in info.value.message


def test_a_version_kueue_does_not_store_is_refused_by_name(tmp_path: Path) -> None:
    docs = _docs()
    _find(docs, "LocalQueue")["apiVersion"] = "kueue.x-k8s.io/v1alpha9"
    with pytest.raises(InputError) as info:
        _load(tmp_path, docs)
    assert info.value.field == "apiVersion"
    assert "kueue.x-k8s.io/v1beta2" in info.value.message


def test_the_cli_exits_2_with_one_line_for_a_bad_cluster_queue(tmp_path: Path) -> None:
    docs = _docs()
    _set(f"{_QUOTA}.0.nominalQuota", "-9")(_find(docs, "ClusterQueue"))
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(main, ["schedule", "-f", str(path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line]
    assert lines == [
        f"accelsched: error: {path}: ClusterQueue cluster-queue: spec.resourceGroups[0].flavors[0].resources[0]"
        '.nominalQuota: Invalid value: "-9": must be greater than or equal to 0'
    ]


def test_kueue_kinds_not_read_yet_are_read_past(tmp_path: Path) -> None:
    """An AdmissionCheck (not modelled yet) is counted among the ignored kinds, not an error."""
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "prov"},
        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"},
    }
    inputs = _load(tmp_path, [*_docs(), check])
    assert inputs.ignored["AdmissionCheck"] == 1
    assert "cluster-queue" in inputs.queues.cluster_queues
