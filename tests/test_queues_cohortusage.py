"""Fairness over time across a cohort's ClusterQueues (queues/cohortusage.py): accelsched's extension, off by
default, turned on by an annotation on the root Cohort."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from accelsched.api import loader
from accelsched.errors import InputError
from accelsched.queues import cohortusage
from accelsched.queues.incremental import OpenAdmission
from accelsched.queues.workloads import Info, PodSet
from accelsched.sim import queues as sim_queues
from benchmarks.cohortfairness import QUEUES, report, synthetic, tenant_queues, with_cohort_quota, with_history

KUEUE = "kueue.x-k8s.io/v1beta2"


def _objects(tmp_path: Path, half_life: str | None) -> list[dict]:
    """Two ClusterQueues with no quota of their own under the Cohort pool (8 cpu), fair sharing on."""
    quota = [{"name": "cpu", "nominalQuota": "8"}]
    groups = [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": quota}]}]
    meta: dict[str, Any] = {"name": "pool"}
    if half_life is not None:
        meta["annotations"] = {cohortusage.ANNOTATION: half_life}
    docs: list[dict] = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        },
        {
            "apiVersion": KUEUE,
            "kind": "Cohort",
            "metadata": meta,
            "spec": {"resourceGroups": groups},
        },
    ]  # fmt: skip
    for team in ("a", "b"):
        zero = [{"name": "cpu", "nominalQuota": "0"}]
        spec = {
            "cohortName": "pool",
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": zero}]}],
        }
        docs.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": team}, "spec": spec})
        lq = {"name": team, "namespace": "default"}
        docs.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": lq, "spec": {"clusterQueue": team}})
    return docs


def _open(tmp_path: Path, half_life: str | None) -> OpenAdmission:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(_objects(tmp_path, half_life)))
    return OpenAdmission(loader.load([path]).queues)


def _submit(run: OpenAdmission, name: str, team: str, order: int) -> None:
    run.submit(Info("default", name, team, [PodSet("main", 1, {"cpu": 8000})], 0, f"{order:04d}", order))


@pytest.mark.parametrize(("half_life", "first"), [(None, "a-1"), ("30s", "b-1")])
def test_the_cluster_queue_that_used_the_cohort_yields_to_the_other_while_its_history_lasts(
    tmp_path: Path, half_life: str | None, first: str
) -> None:
    """a used the whole cohort for 100 s while b was idle. Then one workload of each waits for it: Kueue's
    tournament sees two equal shares (both at 0, each head asking for all of it) and goes by creation (a-1);
    with the history, a's share counts its decayed usage and b-1 goes first."""
    run = _open(tmp_path, half_life)
    run.advance(0.0)
    _submit(run, "a-0", "a", 0)
    ((held,), _) = run.run_cycles()
    run.advance(100.0)
    run.finish(held)
    _submit(run, "a-1", "a", 1)
    _submit(run, "b-1", "b", 2)
    admitted, _ = run.run_cycles()
    assert [o.info.name for o in admitted] == [first]
    if half_life is not None:
        assert run.cohort_history is not None
        # 100 s of 8 cpu (8000 millicores) with a 30 s half-life: 1 - 0.5^(100/30) of the way to 8000
        assert run.cohort_history.usage(run.tree.cluster_queues["a"]) == {
            ("default", "cpu"): round(8000 * (1 - 0.5 ** (100 / 30)))
        }


def test_without_the_annotation_there_is_no_history(tmp_path: Path) -> None:
    assert _open(tmp_path, None).cohort_history is None


@pytest.mark.parametrize(("value", "message"), [("soon", "is not a duration"), ("0s", "must be greater than 0")])
def test_a_bad_half_life_names_the_annotation(tmp_path: Path, value: str, message: str) -> None:
    with pytest.raises(
        InputError, match=rf"Cohort pool: metadata\.annotations\[{cohortusage.ANNOTATION}\]: .*{message}"
    ):
        _open(tmp_path, value)


def test_a_late_tenant_catches_up_with_the_history_and_not_without() -> None:
    """benchmarks.cohortfairness --synthetic at a tiny size: A alone holds the 8-GPU cohort for an hour, then B
    submits as much as A. Kueue's tournament splits the freed GPUs by current usage (B reaches half and stays
    there); with the history B also gets A's decayed head start back: more GPU-hours for B and a smaller gap to
    the weighted ideal over the window. Ignoring the history makes the two runs the same and this fails."""
    nodes, pods, tenant = synthetic(gpus=8, run=600, arrive=3600, span=3 * 3600)
    objects = with_cohort_quota(sim_queues.load_queues(QUEUES), 8)
    a, b = tenant_queues(objects, 2)
    queue_of = [(a, b)[k] for k in tenant]
    got = {}
    for label, objs in (("kueue", objects), ("history", with_history(objects, 1800.0))):
        run = sim_queues.replay(nodes, pods, objs, queue_of, "fgd", 42)
        got[label] = report(label, run)
    late = objects.local_queues[b].cluster_queue
    assert got["history"][late]["hours"] > got["kueue"][late]["hours"]
    assert got["history"][late]["gap"] < got["kueue"][late]["gap"]
    # the same GPUs ran: only who ran them changed
    assert sum(t["hours"] for t in got["history"].values()) == pytest.approx(
        sum(t["hours"] for t in got["kueue"].values())
    )
