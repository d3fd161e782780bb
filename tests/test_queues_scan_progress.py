"""When a workload's flavor scan starts over (Kueue's lastAssignmentOutdated, pkg/scheduler/scheduler.go): a scan
recorded more than a cycle ago resumes only while its ClusterQueue's AllocatableResourceGeneration has not moved.
The cache advances it in clusterQueue.deleteWorkload (pkg/cache/scheduler/clusterqueue.go): a workload leaving the
queue's quota, and also a reservation's echo (the workload controller's AddOrUpdateWorkload of the Workload the
scheduler assumed replaces the cached entry, deleting it first); and updateClusterQueueResourceNode advances every
ClusterQueue of a tree when one of its Cohort objects is reconciled (resource_node.go, updateCohortTreeResources).

Each test gives waiting workload w the progress a scan that stopped at f0 two cycles before leaves (LastAssignment:
f1 next), admits another workload, then tries w: with the generation moved it scans f0 and f1 again, and its message
names both."""

from __future__ import annotations

from pathlib import Path

import yaml

from accelsched.api import loader
from accelsched.queues.admission import Outcome
from accelsched.queues.incremental import OpenAdmission
from accelsched.queues.workloads import Info, PodSet

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"


def _cluster_queue(name: str, cohort: str, flavors: list[tuple[str, int]]) -> dict:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [{"name": f, "resources": [{"name": GPU, "nominalQuota": n}]} for f, n in flavors],
                }
            ],
        },
    }


def _open(tmp_path: Path, extra: list[dict]) -> OpenAdmission:
    docs = [
        *({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f}} for f in ("f0", "f1")),
        _cluster_queue("team-a", "mid", [("f0", 1), ("f1", 4)]),
        _cluster_queue("team-b", "mid", [("f0", 1)]),
        *(
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": f"lq-{t}", "namespace": "default"},
                "spec": {"clusterQueue": f"team-{t}"},
            }
            for t in ("a", "b")
        ),
        *extra,
    ]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return OpenAdmission(loader.load([path]).queues)


def _submit(run: OpenAdmission, name: str, queue: str, gpus: int, order: int) -> Outcome:
    return run.submit(Info("default", name, queue, [PodSet("main", 1, {GPU: gpus})], 0, f"{order:04d}", order))


def _retry_after_admission(run: OpenAdmission, queue: str) -> str:
    """The message of w (9 GPUs: no flavor holds them) tried after a 1-GPU workload of ``queue`` is admitted, its
    scan's progress recorded in the cycle before that admission."""
    before = run.generation.get("team-a", 0)
    first = _submit(run, "first", queue, 1, 0)
    assert run.run_cycles()[0] == [first]
    w = _submit(run, "w", "lq-a", 9, 1)
    w.last, w.last_cycle, w.last_generation = {(0, GPU): 0}, run.cycle - 1, before
    run.run_cycles()
    return next(c["message"] for c in w.conditions if c["type"] == "QuotaReserved")


def test_an_admission_in_its_queue_sends_a_scan_recorded_before_it_back_to_the_first_flavor(tmp_path: Path) -> None:
    message = _retry_after_admission(_open(tmp_path, []), "lq-a")
    assert "in flavor f0" in message and "in flavor f1" in message, message


def test_an_admission_under_a_cohort_object_sends_the_whole_trees_scans_back_to_the_first_flavor(
    tmp_path: Path,
) -> None:
    cohorts = [
        {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "org"}, "spec": {}},
        {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "mid"}, "spec": {"parentName": "org"}},
    ]
    message = _retry_after_admission(_open(tmp_path, cohorts), "lq-b")
    assert "in flavor f0" in message and "in flavor f1" in message, message


def test_without_a_cohort_object_an_admission_elsewhere_in_the_cohort_keeps_the_scans_progress(tmp_path: Path) -> None:
    message = _retry_after_admission(_open(tmp_path, []), "lq-b")
    assert "in flavor f0" not in message and "in flavor f1" in message, message
