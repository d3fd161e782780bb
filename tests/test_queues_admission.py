"""Kueue's admission in ``schedule -f``: small scenarios whose answers are worked out by hand from Kueue's rules.

Each test says why its answer is what Kueue would do (pkg/scheduler/scheduler.go, flavorassigner.go and
pkg/cache/scheduler/resource_node.go at v0.19.2); the messages are Kueue's format strings filled in by hand.
Amounts in messages are printed as Kueue prints them (cpu in millicores shown as "500m" or whole cores).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from accelsched.cli import main

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"


def node(name: str, gpus: int = 8, labels: dict | None = None, taints: list | None = None) -> dict:
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def flavor(name: str, labels: dict | None = None, taints: list | None = None) -> dict:
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = labels
    if taints:
        spec["nodeTaints"] = taints
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def quota(name: str, nominal: int | str, borrowing: int | None = None, lending: int | None = None) -> dict:
    out: dict[str, Any] = {"name": name, "nominalQuota": nominal}
    if borrowing is not None:
        out["borrowingLimit"] = borrowing
    if lending is not None:
        out["lendingLimit"] = lending
    return out


def cluster_queue(name: str, flavors: list[tuple[str, list[dict]]], cohort: str = "", **spec: Any) -> dict:
    covered = [q["name"] for q in flavors[0][1]]
    body: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": covered, "flavors": [{"name": f, "resources": r} for f, r in flavors]}],
        **spec,
    }
    if cohort:
        body["cohortName"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body}


def local_queue(name: str, cq: str, namespace: str = "default", **spec: Any) -> dict:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq, **spec},
    }


def job(
    name: str, queue: str, pods: int, gpus: int = 0, cpu: str = "1", namespace: str = "default", **labels: str
) -> dict:
    requests: dict[str, str] = {"cpu": cpu}
    if gpus:
        requests[GPU] = str(gpus)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": {"kueue.x-k8s.io/queue-name": queue, **labels},
        },
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "trainer",
                            "resources": {"requests": requests, "limits": {GPU: str(gpus)} if gpus else {}},
                        }
                    ],
                }
            },
        },
    }


def run(tmp_path: Path, docs: list[dict]) -> dict:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(main, ["schedule", "-f", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def workloads(out: dict) -> dict[str, dict]:
    return {w["name"]: w for w in out["workloads"]}


def quota_reserved(w: dict) -> tuple[str, str, str]:
    c = next(c for c in w["conditions"] if c["type"] == "QuotaReserved")
    return c["status"], c["reason"], c["message"]


def pods_of(out: dict, prefix: str) -> list[dict]:
    return [p for p in out["pods"] if p["name"].startswith(prefix + "-")]


def test_quota_admits_in_order_and_holds_the_rest_with_kueues_message(tmp_path: Path) -> None:
    """Nominal 8 GPUs, four jobs of 3 (one pod each): one head per cycle, 3 + 3 fit, the third needs 9 > 8. It is
    under nominal (8 >= 3) so Kueue asks its preemption oracle (no candidates: policies Never) and keeps the
    quota message: 3 requested on top of 6 used against 8 available is "1 more needed". BestEffortFIFO, and the
    fourth is of the third's equivalence class (same priority and shape: SchedulingEquivalenceHashing, on by
    default since v0.18): it goes to inadmissible with the third untried, without a condition."""
    docs = [
        node("n1"), node("n2"), flavor("default"),
        cluster_queue("team-a", [("default", [quota("cpu", 100), quota(GPU, 8)])]),
        local_queue("lq", "team-a"),
        *[job(f"j{i}", "lq", 1, gpus=3) for i in range(4)],
    ]  # fmt: skip
    out = run(tmp_path, docs)
    w = workloads(out)
    names = [x["name"] for x in out["workloads"]]
    assert all(n.startswith("job-j") for n in names)
    admitted = [n for n in names if w[n]["admitted"]]
    assert [n[: len("job-j0")] for n in admitted] == ["job-j0", "job-j1"]
    message = (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default, "
        "1 more needed"
    )
    third, fourth = names[2:]
    assert quota_reserved(w[third]) == ("False", "Pending", message)
    assert [c["type"] for c in w[third]["conditions"]] == ["QuotaReserved"]  # no Admitted condition (gate off)
    assert w[fourth]["conditions"] == [] and not w[fourth]["admitted"]
    assert quota_reserved(w[admitted[0]]) == ("True", "QuotaReserved", "Quota reserved in ClusterQueue team-a")
    assert w[admitted[0]]["flavors"] == {"main": {"cpu": "default", GPU: "default"}}
    for p in pods_of(out, "j2"):
        assert p["node"] is None and p["message"] == message
    for p in pods_of(out, "j3"):
        assert p["node"] is None and p["message"] == (
            f"waiting for quota in ClusterQueue team-a: an equivalent workload default/{third} does not fit"
        )
    assert all(p["node"] for p in pods_of(out, "j0") + pods_of(out, "j1"))
    cq = out["clusterQueues"][0]
    assert cq == {
        "name": "team-a",
        "cohort": None,
        "usage": {"default": {"cpu": "2", GPU: "6"}},
        "borrowed": {"default": {"cpu": "0", GPU: "0"}},
    }


def test_a_request_past_every_flavors_capacity_says_maximum_capacity(tmp_path: Path) -> None:
    """10 GPUs against a nominal of 8 with no cohort: PotentialAvailable is 8 < 10, so NoFit with the
    "previously considered podsets requests (0) + current podset request (10) > maximum capacity (8)" wording."""
    docs = [
        node("n1"), flavor("default"),
        cluster_queue("team-a", [("default", [quota("cpu", 100), quota(GPU, 8)])]),
        local_queue("lq", "team-a"), job("big", "lq", 5, gpus=2),
    ]  # fmt: skip
    w = next(iter(workloads(run(tmp_path, docs)).values()))
    assert quota_reserved(w)[2] == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor default, previously "
        "considered podsets requests (0) + current podset request (10) > maximum capacity (8)"
    )


def test_flavors_are_tried_in_order_and_the_admitted_flavor_steers_placement(tmp_path: Path) -> None:
    """on-demand (4 GPUs) then spot (8). Job a takes 4 on-demand; job b does not fit on-demand and whenCanBorrow/
    whenCanPreempt defaults move it to spot, where it fits. Kueue then puts the flavor's node labels into b's pod
    nodeSelector, so the engine places it on the spot node even though the on-demand node has room."""
    docs = [
        node("od", labels={"pool": "on-demand"}), node("sp", labels={"pool": "spot"}),
        flavor("on-demand", {"pool": "on-demand"}), flavor("spot", {"pool": "spot"}),
        cluster_queue("team-a", [("on-demand", [quota(GPU, 4)]), ("spot", [quota(GPU, 8)])]),
        local_queue("lq", "team-a"),
        job("a", "lq", 1, gpus=4, cpu="0"), job("b", "lq", 1, gpus=2, cpu="0"),
    ]  # fmt: skip
    docs[-1]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {GPU: "2"}
    docs[-2]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {GPU: "4"}
    out = run(tmp_path, docs)
    w = {n[:5]: x for n, x in workloads(out).items()}
    assert w["job-a"]["flavors"] == {"main": {GPU: "on-demand"}}
    assert w["job-b"]["flavors"] == {"main": {GPU: "spot"}}
    assert [p["node"] for p in pods_of(out, "a")] == ["od"]
    assert [p["node"] for p in pods_of(out, "b")] == ["sp"]


def test_a_cohort_lends_idle_quota_up_to_the_borrowing_limit(tmp_path: Path) -> None:
    """team-a and team-b (4 GPUs each) share a cohort of 8. team-a's job of 6 borrows 2 of team-b's idle GPUs:
    admitted, borrowed 2. With borrowingLimit 1 its most is 4 + 1 = 5 < 6: NoFit, maximum capacity (5)."""

    def docs(limit: int | None) -> list[dict]:
        return [
            node("n1"), flavor("gpu"),
            cluster_queue("team-a", [("gpu", [quota(GPU, 4, borrowing=limit)])], cohort="research"),
            cluster_queue("team-b", [("gpu", [quota(GPU, 4)])], cohort="research"),
            local_queue("lq", "team-a"), job("train", "lq", 3, gpus=2, cpu="0"),
        ]  # fmt: skip

    out = run(tmp_path, docs(None))
    assert next(iter(workloads(out).values()))["admitted"]
    cqs = {c["name"]: c for c in out["clusterQueues"]}
    assert cqs["team-a"]["usage"] == {"gpu": {GPU: "6"}} and cqs["team-a"]["borrowed"] == {"gpu": {GPU: "2"}}
    assert cqs["team-a"]["cohort"] == "research"
    w = next(iter(workloads(run(tmp_path, docs(1))).values()))
    assert not w["admitted"]
    assert quota_reserved(w)[2].endswith("current podset request (6) > maximum capacity (5)")


def test_a_lending_limit_keeps_the_rest_of_a_queues_quota_for_itself(tmp_path: Path) -> None:
    """team-b lends at most 1 of its 4 GPUs: the cohort holds 4 (team-a) + 1 = 5, so team-a's 6 exceed what it
    could ever use (5); with 5 requested it fits."""

    def docs(gpus: int) -> list[dict]:
        return [
            node("n1", gpus=16), flavor("gpu"),
            cluster_queue("team-a", [("gpu", [quota(GPU, 4)])], cohort="research"),
            cluster_queue("team-b", [("gpu", [quota(GPU, 4, lending=1)])], cohort="research"),
            local_queue("lq", "team-a"), job("train", "lq", 1, gpus=gpus, cpu="0"),
        ]  # fmt: skip

    assert not next(iter(workloads(run(tmp_path, docs(6))).values()))["admitted"]
    assert next(iter(workloads(run(tmp_path, docs(5))).values()))["admitted"]


def test_a_cohort_object_brings_quota_of_its_own_to_the_tree(tmp_path: Path) -> None:
    """A Cohort "org" with 2 GPUs of its own above team-a (4): team-a can use 6, not 7."""
    org = {
        "apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "org"},
        "spec": {"resourceGroups": [
            {"coveredResources": [GPU], "flavors": [{"name": "gpu", "resources": [quota(GPU, 2)]}]},
        ]},
    }  # fmt: skip

    def docs(gpus: int) -> list[dict]:
        return [
            node("n1", gpus=16), flavor("gpu"), org,
            cluster_queue("team-a", [("gpu", [quota(GPU, 4)])], cohort="org"),
            local_queue("lq", "team-a"), job("train", "lq", 1, gpus=gpus, cpu="0"),
        ]  # fmt: skip

    assert next(iter(workloads(run(tmp_path, docs(6))).values()))["admitted"]
    assert not next(iter(workloads(run(tmp_path, docs(7))).values()))["admitted"]


def _fifo(strategy: str) -> list[dict]:
    return [
        node("n1"), flavor("default"),
        cluster_queue("team-a", [("default", [quota("cpu", 4)])], queueingStrategy=strategy),
        local_queue("lq", "team-a"), job("big", "lq", 1, cpu="6"), job("small", "lq", 1, cpu="1"),
    ]  # fmt: skip


def test_best_effort_fifo_lets_a_smaller_workload_past_one_that_cannot_fit(tmp_path: Path) -> None:
    """big (6 cpu > 4) cannot ever fit; BestEffortFIFO moves it aside and admits small."""
    w = {n[:7]: x for n, x in workloads(run(tmp_path, _fifo("BestEffortFIFO"))).items()}
    assert not w["job-big"]["admitted"] and w["job-sma"]["admitted"]


def test_strict_fifo_blocks_the_queue_behind_its_head(tmp_path: Path) -> None:
    """StrictFIFO requeues the head at once: it stays the head and small is never tried (no condition); its pods
    say what they wait for."""
    out = run(tmp_path, _fifo("StrictFIFO"))
    w = {n[:7]: x for n, x in workloads(out).items()}
    assert not w["job-big"]["admitted"] and not w["job-sma"]["admitted"]
    assert w["job-sma"]["conditions"] == []
    big_name = next(n for n in workloads(out) if n.startswith("job-big"))
    assert pods_of(out, "small")[0]["message"] == (
        f"waiting for quota in ClusterQueue team-a: queued behind workload default/{big_name}"
    )


def test_a_workload_priority_class_goes_before_an_earlier_workload(tmp_path: Path) -> None:
    """Room for one of two 3-GPU jobs; the second carries kueue.x-k8s.io/priority-class high (1000): the queue
    orders by priority first, so it is admitted and the first waits."""
    docs = [
        node("n1"), flavor("default"),
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 1000},
        cluster_queue("team-a", [("default", [quota(GPU, 4), quota("cpu", 10)])]),
        local_queue("lq", "team-a"),
        job("first", "lq", 1, gpus=3), job("second", "lq", 1, gpus=3, **{"kueue.x-k8s.io/priority-class": "high"}),
    ]  # fmt: skip
    docs[2 + 1]["spec"]["resourceGroups"][0]["coveredResources"] = [GPU, "cpu"]
    w = {n[:8]: x for n, x in workloads(run(tmp_path, docs)).items()}
    assert w["job-seco"]["admitted"] and not w["job-firs"]["admitted"]


def test_queue_problems_are_reported_with_the_workload_controllers_words(tmp_path: Path) -> None:
    """A LocalQueue that does not exist, a stopped ClusterQueue, and a namespace outside the selector."""
    docs = [
        node("n1"), flavor("default"),
        cluster_queue("held", [("default", [quota("cpu", 10)])], stopPolicy="Hold"),
        cluster_queue("team-a", [("default", [quota("cpu", 10)])]),
        local_queue("lq-held", "held"), local_queue("lq-a", "team-a", namespace="other"),
        job("nolq", "missing", 1), job("stopped", "lq-held", 1), job("outsider", "lq-a", 1, namespace="other"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other", "labels": {"team": "b"}}},
    ]  # fmt: skip
    docs[3]["spec"]["namespaceSelector"] = {"matchLabels": {"team": "a"}}
    w = {n.split("-")[1]: x for n, x in workloads(run(tmp_path, docs)).items()}
    assert quota_reserved(w["nolq"]) == ("False", "Inadmissible", "LocalQueue missing doesn't exist")
    assert quota_reserved(w["stopped"]) == ("False", "Inadmissible", "ClusterQueue held is inactive")
    assert quota_reserved(w["outsider"]) == (
        "False",
        "Pending",
        "workload namespace doesn't match ClusterQueue selector",
    )


def test_an_untolerated_flavor_taint_is_skipped_and_worded_as_kueue_prints_it(tmp_path: Path) -> None:
    """The only flavor is tainted and the pods do not tolerate it: checkFlavorForPodSets stops there, with the
    taint printed as Go's %s prints a corev1.Taint value."""
    taint = {"key": "reserved", "value": "ml", "effect": "NoSchedule"}
    docs = [
        node("n1"), flavor("tainted", taints=[taint]),
        cluster_queue("team-a", [("tainted", [quota("cpu", 10)])]),
        local_queue("lq", "team-a"), job("j", "lq", 1),
    ]  # fmt: skip
    w = next(iter(workloads(run(tmp_path, docs)).values()))
    assert quota_reserved(w)[2] == (
        "couldn't assign flavors to pod set main: untolerated taint {reserved ml NoSchedule <nil>} in flavor tainted"
    )


def pod(name: str, gpus: int, node_name: str = "", queue: str = "lq", **labels: str) -> dict:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"limits": {GPU: str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    meta = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "labels": {"kueue.x-k8s.io/queue-name": queue, **labels},
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def test_a_running_workload_holds_its_quota(tmp_path: Path) -> None:
    """A pod already bound with the queue label is admitted already: its 6 GPUs count, so a new 4-GPU pod waits."""

    docs = [
        node("n1", gpus=16), flavor("default"),
        cluster_queue("team-a", [("default", [quota(GPU, 8)])]),
        local_queue("lq", "team-a"), pod("running", 6, "n1"), pod("new", 4),
    ]  # fmt: skip
    out = run(tmp_path, docs)
    w = {n.split("-")[1]: x for n, x in workloads(out).items()}
    assert w["running"]["admitted"] and not w["new"]["admitted"]
    assert quota_reserved(w["new"])[2].endswith(
        "insufficient unused quota for nvidia.com/gpu in flavor default, 2 more needed"
    )
    assert out["clusterQueues"][0]["usage"] == {"default": {GPU: "6"}}


def test_a_workload_object_is_admitted_by_its_own_name(tmp_path: Path) -> None:
    """A Workload (as Kueue's controllers write them) with 3 pods of 2 GPUs: 6 of 8, admitted, named as written."""
    wl = {
        "apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "wl-1", "namespace": "default"},
        "spec": {"queueName": "lq", "podSets": [{"name": "workers", "count": 3, "template": {"spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {GPU: "2"}, "limits": {GPU: "2"}}}],
        }}}]},
    }  # fmt: skip
    docs = [
        node("n1"),
        flavor("default"),
        cluster_queue("team-a", [("default", [quota(GPU, 8)])]),
        local_queue("lq", "team-a"),
        wl,
    ]
    out = run(tmp_path, docs)
    w = workloads(out)["wl-1"]
    assert w["admitted"] and w["flavors"] == {"workers": {GPU: "default"}}
    assert out["clusterQueues"][0]["usage"] == {"default": {GPU: "6"}}


def test_the_two_teams_example_borrows_idle_gpus_and_says_why_the_last_job_waits(tmp_path: Path) -> None:
    """examples/queues/two-teams.yaml, as its header says: cycle 1 admits each queue's head (pretrain 8 of
    team-a's 8, eval 4 of team-b's 8); cycle 2 finetune borrows 4 of team-b's idle 4; cycle 3 ablation finds the
    cohort's 16 used (its 4 are under team-a's nominal 8, so Kueue would look for preemption candidates: none)."""
    example = Path(__file__).resolve().parents[1] / "examples" / "queues" / "two-teams.yaml"
    out = run(tmp_path, list(yaml.safe_load_all(example.read_text())))
    admitted = {w["name"].rsplit("-", 1)[0]: w["admitted"] for w in out["workloads"]}
    assert admitted == {"job-pretrain": True, "job-finetune": True, "job-eval": True, "job-ablation": False}
    ablation = next(w for w in out["workloads"] if w["name"].startswith("job-ablation"))
    assert quota_reserved(ablation)[2] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor a100, "
        "4 more needed"
    )
    team_a = next(c for c in out["clusterQueues"] if c["name"] == "team-a")
    assert team_a["usage"]["a100"]["nvidia.com/gpu"] == "12" and team_a["borrowed"]["a100"]["nvidia.com/gpu"] == "4"
    placed = [p for p in out["pods"] if p["node"]]
    assert len(placed) == 4 and {p["node"] for p in placed} == {"gpu-node-1", "gpu-node-2"}


def test_within_cluster_queue_a_higher_priority_workload_preempts_a_running_lower_one(tmp_path: Path) -> None:
    """withinClusterQueue LowerPriority, nominal 8, "low" (priority 0) runs with 6. "high" (WorkloadPriorityClass
    100) wants 4: 2 available, 8 >= 4 so the oracle looks, finds low (same queue, lower priority): Preempt. low
    is evicted (InClusterQueue), high is admitted the next cycle and placed; low is requeued and, 6 wanted with 4
    left, waits "2 more needed" (it may not preempt high: higher priority)."""
    docs = [
        node("n1"), flavor("default"),
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 100},
        cluster_queue("team-a", [("default", [quota(GPU, 8)])], preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue("lq", "team-a"),
        pod("low", 6, "n1"), pod("high", 4, **{"kueue.x-k8s.io/priority-class": "high"}),
    ]  # fmt: skip
    out = run(tmp_path, docs)
    w = {n.split("-")[1]: x for n, x in workloads(out).items()}
    assert w["high"]["admitted"] and not w["high"]["preempted"]
    assert not w["low"]["admitted"] and w["low"]["preempted"]
    message = (
        "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: uid-high) due to prioritization in the "
        "ClusterQueue; preemptor path: /team-a; preemptee path: /team-a"
    )
    assert w["low"]["conditions"] == [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": (
            "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
            "default, 2 more needed")},
        {"type": "Admitted", "status": "False", "reason": "NoReservation",
         "message": "The workload has no reservation"},
        {"type": "Preempted", "status": "True", "reason": "InClusterQueue", "message": message},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": message},
        {"type": "Requeued", "status": "True", "reason": "Preempted", "message": message},
    ]  # fmt: skip
    pods = {p["name"]: p for p in out["pods"]}
    assert pods["high"]["node"] == "n1" and pods["low"]["node"] is None
    assert out["clusterQueues"][0]["usage"] == {"default": {GPU: "4"}}


def test_a_queue_reclaims_its_nominal_quota_from_a_borrowing_neighbour(tmp_path: Path) -> None:
    """team-a and team-b (4 GPUs each) in a cohort; team-b runs two 4-GPU pods (4 borrowed). team-a
    (reclaimWithinCohort Any) wants its 4: none available, within its nominal, so the oracle looks across the
    cohort: team-b is over its nominal, its most recently admitted workload goes (InCohortReclamation). team-a
    is admitted next cycle; the evicted one, back in team-b's queue, would have to borrow again: it waits."""
    docs = [
        node("n1"), flavor("gpu"),
        cluster_queue("team-a", [("gpu", [quota(GPU, 4)])], cohort="research",
                      preemption={"reclaimWithinCohort": "Any"}),
        cluster_queue("team-b", [("gpu", [quota(GPU, 4)])], cohort="research"),
        local_queue("lq-a", "team-a"), local_queue("lq-b", "team-b"),
        pod("b1", 4, "n1", queue="lq-b"), pod("b2", 4, "n1", queue="lq-b"), pod("a1", 4, queue="lq-a"),
    ]  # fmt: skip
    out = run(tmp_path, docs)
    w = {n.split("-")[1]: x for n, x in workloads(out).items()}
    assert w["a1"]["admitted"] and w["b1"]["admitted"]
    assert w["b2"]["preempted"] and not w["b2"]["admitted"]
    preempted = next(c for c in w["b2"]["conditions"] if c["type"] == "Preempted")
    assert preempted["reason"] == "InCohortReclamation"
    assert preempted["message"].endswith(
        "due to reclamation within the cohort; preemptor path: /research/team-a; preemptee path: /research/team-b"
    )
    assert quota_reserved(w["b2"])[2] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, "
        "4 more needed"
    )
    pods = {p["name"]: p["node"] for p in out["pods"]}
    assert pods["a1"] == "n1" and pods["b2"] is None
    cqs = {c["name"]: c["usage"]["gpu"][GPU] for c in out["clusterQueues"]}
    assert cqs == {"team-a": "4", "team-b": "4"}


def test_borrow_within_cohort_lets_a_borrowing_workload_preempt_lower_priority_borrowers(tmp_path: Path) -> None:
    """team-a (2 GPUs) and team-b (6) in a cohort of 8; team-b runs two 4-GPU pods (borrowing 2). "urgent"
    (priority 100) in team-a wants 4, so it must borrow 2: with borrowWithinCohort LowerPriority the oracle may
    take team-b's newest workload while borrowing (InCohortReclaimWhileBorrowing), after which the cohort has 4
    free. Without it (policy Never) a queue past its nominal may not preempt at all: it waits."""

    def docs(borrow_policy: str) -> list[dict]:
        preemption: dict[str, Any] = {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": borrow_policy}}
        return [
            node("n1"), flavor("gpu"),
            {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "urgent"}, "value": 100},
            cluster_queue("team-a", [("gpu", [quota(GPU, 2)])], cohort="research", preemption=preemption),
            cluster_queue("team-b", [("gpu", [quota(GPU, 6)])], cohort="research"),
            local_queue("lq-a", "team-a"), local_queue("lq-b", "team-b"),
            pod("b1", 4, "n1", queue="lq-b"), pod("b2", 4, "n1", queue="lq-b"),
            pod("urgent", 4, queue="lq-a", **{"kueue.x-k8s.io/priority-class": "urgent"}),
        ]  # fmt: skip

    out = run(tmp_path, docs("LowerPriority"))
    w = {n.split("-")[1]: x for n, x in workloads(out).items()}
    assert w["urgent"]["admitted"] and w["b1"]["admitted"] and w["b2"]["preempted"]
    preempted = next(c for c in w["b2"]["conditions"] if c["type"] == "Preempted")
    assert preempted["reason"] == "InCohortReclaimWhileBorrowing"
    assert "due to reclamation within the cohort while borrowing;" in preempted["message"]
    team_a = next(c for c in out["clusterQueues"] if c["name"] == "team-a")
    assert team_a["borrowed"] == {"gpu": {GPU: "2"}}

    w = {n.split("-")[1]: x for n, x in workloads(run(tmp_path, docs("Never"))).items()}
    assert not w["urgent"]["admitted"] and not w["b2"]["preempted"]
    assert quota_reserved(w["urgent"])[2].endswith(
        "insufficient unused quota for nvidia.com/gpu in flavor gpu, 4 more needed"
    )


def test_the_table_output_lists_workloads_and_what_each_queue_borrows(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "queues" / "two-teams.yaml"
    result = CliRunner().invoke(main, ["schedule", "-f", str(example)])
    assert result.exit_code == 0, result.output
    assert "Workloads (Kueue)" in result.output
    assert "nvidia.com/gpu 12/8 (4 borrowed)" in result.output
    rows = [line for line in result.output.splitlines() if "team-a/job-ablation" in line]
    assert len(rows) == 1 and " no " in rows[0] and "insufficient unused quota for nvidia.com/gpu" in rows[0]


def test_explain_says_a_held_pod_waits_for_its_workloads_admission_not_for_a_node(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "queues" / "two-teams.yaml"
    out = run(tmp_path, list(yaml.safe_load_all(example.read_text())))
    held = next(p for p in out["pods"] if p["node"] is None)
    workload = next(w["name"] for w in out["workloads"] if not w["admitted"])
    result = CliRunner().invoke(main, ["explain", f"{held['namespace']}/{held['name']}", "-f", str(example)])
    assert result.exit_code == 0, result.output
    assert "is gated" in result.output and "SchedulingGated" in result.output
    assert f"Kueue: workload team-a/{workload} is not admitted in ClusterQueue team-a" in result.output
    assert "Node by node" not in result.output  # never tried: no node was looked at


def test_hold_keeps_running_workloads_and_hold_and_drain_evicts_them(tmp_path: Path) -> None:
    """stopPolicy on the ClusterQueue: Hold admits nothing new but leaves the running pod; HoldAndDrain also
    evicts it (Evicted, reason ClusterQueueStopped, "The ClusterQueue is stopped"; not requeued), its pod off
    its node, and it waits as Inadmissible, "ClusterQueue team-a is inactive" (getQueueBlocker: a stopped
    ClusterQueue is not active in Kueue's cache)."""

    def docs(policy: str) -> list[dict]:
        return [
            node("n1"), flavor("default"),
            cluster_queue("team-a", [("default", [quota(GPU, 8)])], stopPolicy=policy),
            local_queue("lq", "team-a"), pod("running", 2, "n1"), pod("new", 2),
        ]  # fmt: skip

    out = run(tmp_path, docs("Hold"))
    w = {n.split("-")[1]: x for n, x in workloads(out).items()}
    assert w["running"]["admitted"] and not w["new"]["admitted"]
    assert quota_reserved(w["new"]) == ("False", "Inadmissible", "ClusterQueue team-a is inactive")
    out = run(tmp_path, docs("HoldAndDrain"))
    w = {n.split("-")[1]: x for n, x in workloads(out).items()}
    assert not w["running"]["admitted"] and not w["running"]["preempted"]
    conditions = {c["type"]: (c["status"], c["reason"], c["message"]) for c in w["running"]["conditions"]}
    assert conditions["Evicted"] == ("True", "ClusterQueueStopped", "The ClusterQueue is stopped")
    assert conditions["Requeued"][0] == "False"
    assert conditions["QuotaReserved"] == ("False", "Inadmissible", "ClusterQueue team-a is inactive")
    assert {p["name"]: p["node"] for p in out["pods"]}["running"] is None


def _group_pod(name: str, gpus: int, total: int) -> dict:
    doc = pod(name, gpus, **{"kueue.x-k8s.io/pod-group-name": "trainers"})
    doc["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": str(total)}
    return doc


def test_a_pod_group_is_one_workload_admitted_whole_or_not_at_all(tmp_path: Path) -> None:
    """Three pods of one shape in the group "trainers": one Workload named after the group, one pod set named
    by the shape's role hash, count 3. 3 x 2 = 6 GPUs fit a quota of 8 (all three placed) but not one of 4
    (none placed: maximum capacity 4)."""

    def docs(nominal: int) -> list[dict]:
        members = [_group_pod(f"t{i}", 2, 3) for i in range(3)]
        return [node("n1"), flavor("default"), cluster_queue("team-a", [("default", [quota(GPU, nominal)])]),
                local_queue("lq", "team-a"), *members]  # fmt: skip

    out = run(tmp_path, docs(8))
    (w,) = out["workloads"]
    assert w["name"] == "trainers" and w["admitted"]
    (pod_set,) = w["flavors"]
    assert len(pod_set) == 8 and all(c in "0123456789abcdef" for c in pod_set)
    assert all(p["node"] == "n1" for p in out["pods"])
    out = run(tmp_path, docs(4))
    (w,) = out["workloads"]
    assert not w["admitted"]
    assert quota_reserved(w)[2].startswith(f"couldn't assign flavors to pod set {pod_set}: insufficient quota")
    assert all(p["node"] is None for p in out["pods"])


def test_a_pod_group_short_of_its_total_count_has_no_workload_yet(tmp_path: Path) -> None:
    docs = [node("n1"), flavor("default"), cluster_queue("team-a", [("default", [quota(GPU, 8)])]),
            local_queue("lq", "team-a"), _group_pod("t0", 2, 4), _group_pod("t1", 2, 4)]  # fmt: skip
    out = run(tmp_path, docs)
    (w,) = out["workloads"]
    assert not w["admitted"] and w["conditions"] == []
    assert {p["message"] for p in out["pods"]} == {"pod group trainers has 2 of its 4 pods"}


def test_a_workload_with_an_admission_holds_its_flavors_quota(tmp_path: Path) -> None:
    """A Workload whose status.admission names flavor "spot" for its 3 x 2 GPUs runs already, so spot has 2 of
    its 8 left. A new 4-GPU job tries on-demand first (no quota: maximum capacity (0), NoFit, next flavor), then
    spot (2 more needed): it waits, and the message lists both flavors' reasons, sorted, as Kueue joins them."""
    running = {
        "apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "running", "namespace": "default"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 3, "template": {"spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {GPU: "2"}, "limits": {GPU: "2"}}}],
        }}}]},
        "status": {"admission": {"clusterQueue": "team-a", "podSetAssignments": [
            {"name": "main", "flavors": {GPU: "spot"}, "count": 3}]}},
    }  # fmt: skip
    docs = [
        node("n1"), flavor("on-demand"), flavor("spot"),
        cluster_queue("team-a", [("on-demand", [quota(GPU, 0)]), ("spot", [quota(GPU, 8)])]),
        local_queue("lq", "team-a"), running, job("new", "lq", 1, gpus=4, cpu="0"),
    ]  # fmt: skip
    docs[-1]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {GPU: "4"}
    out = run(tmp_path, docs)
    w = workloads(out)
    assert w["running"]["admitted"] and w["running"]["flavors"] == {"main": {GPU: "spot"}}
    new = next(x for n, x in w.items() if n.startswith("job-new"))
    assert quota_reserved(new)[2] == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor on-demand, "
        "previously considered podsets requests (0) + current podset request (4) > maximum capacity (0), "
        "insufficient unused quota for nvidia.com/gpu in flavor spot, 2 more needed"
    )


def test_a_cluster_queue_naming_a_missing_flavor_is_inactive(tmp_path: Path) -> None:
    docs = [node("n1"), cluster_queue("team-a", [("ghost", [quota(GPU, 8)])]), local_queue("lq", "team-a"),
            job("j", "lq", 1, gpus=1, cpu="0")]  # fmt: skip
    docs[-1]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {GPU: "1"}
    (w,) = run(tmp_path, docs)["workloads"]
    assert quota_reserved(w) == ("False", "Pending", "ClusterQueue team-a is inactive")


def test_a_workload_object_and_the_job_kueue_made_it_for_are_one_workload(tmp_path: Path) -> None:
    """A cluster dump holds the Job and the Workload Kueue made for it (named job-<name>-<hash>): one workload,
    its quota counted once, the Job's pods its pods."""
    first = run(tmp_path, [node("n1"), flavor("default"), cluster_queue("team-a", [("default", [quota(GPU, 8)])]),
                           local_queue("lq", "team-a"), job("train", "lq", 2, gpus=2, cpu="0")])  # fmt: skip
    name = first["workloads"][0]["name"]
    docs = [node("n1"), flavor("default"), cluster_queue("team-a", [("default", [quota(GPU, 8)])]),
            local_queue("lq", "team-a"), job("train", "lq", 2, gpus=2, cpu="0")]  # fmt: skip
    docs[-1]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {GPU: "2"}
    docs.append({
        "apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": "default"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2, "template": {"spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {GPU: "2"}, "limits": {GPU: "2"}}}],
        }}}]},
    })  # fmt: skip
    out = run(tmp_path, docs)
    assert [w["name"] for w in out["workloads"]] == [name] and out["workloads"][0]["admitted"]
    assert out["clusterQueues"][0]["usage"] == {"default": {GPU: "4"}}
    assert all(p["node"] == "n1" for p in out["pods"]) and len(out["pods"]) == 2


def test_without_kueues_objects_a_queue_label_is_inert(tmp_path: Path) -> None:
    """No ClusterQueue, LocalQueue or flavor in the input: nothing reads the label, a suspended Job stays
    suspended (no pods) and a labelled pod is scheduled as any other; the output has no queue keys."""
    out = run(tmp_path, [node("n1"), job("j", "lq", 2, gpus=1), pod("p", 1)])
    assert [p["name"] for p in out["pods"]] == ["p"] and out["pods"][0]["node"] == "n1"
    assert "workloads" not in out and "clusterQueues" not in out


def _pod_set(name: str, count: int, gpus: int) -> dict:
    return {"name": name, "count": count, "template": {"spec": {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {GPU: str(gpus)}}}]}}}  # fmt: skip


def test_a_second_scan_resumes_after_the_flavor_the_first_stopped_at(tmp_path: Path) -> None:
    """Kueue's LastAssignment (FlavorFungibility and FlavorFungibilityPreserveScanProgress, on by default). Flavors
    f0 (6 GPUs) then f1 (4). Pod set main (2 GPUs) fits f0 and the scan stops there; ps1 (3 x 2 = 6) then finds
    neither f0 (2 + 6 > 6) nor f1 (6 > 4): not admitted, but main's scan stopped before the last flavor, so the
    workload goes straight back to the head (requeueIfNotPresent: PendingFlavors). The second scan resumes main at
    f1 (2 of 4) and ps1 at f0 (6 of 6): admitted, main on f1. A first scan alone would never admit it."""
    wl = {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "wl-1", "namespace": "default"},
          "spec": {"queueName": "lq", "podSets": [_pod_set("main", 1, 2), _pod_set("ps1", 3, 2)]}}  # fmt: skip
    docs = [
        node("n1"), node("n2"), flavor("f0"), flavor("f1"),
        cluster_queue("team-a", [("f0", [quota(GPU, 6)]), ("f1", [quota(GPU, 4)])]),
        local_queue("lq", "team-a"), wl,
    ]  # fmt: skip
    w = workloads(run(tmp_path, docs))["wl-1"]
    assert w["admitted"] and w["flavors"] == {"main": {GPU: "f1"}, "ps1": {GPU: "f0"}}


def test_under_a_non_root_cohort_object_an_admission_retries_the_trees_inadmissible_workloads(tmp_path: Path) -> None:
    """team-a and team-b (4 GPUs each) share cohort org. Cycle 1: b1 (3, no borrowing) goes first and a1 (6,
    borrowing) no longer fits. Cycle 2: a1 alone sees 5 available, "1 more needed", and goes inadmissible
    (BestEffortFIFO) while b2 (1) is admitted beside it. Kueue's cohort controller reconciles, on every status update
    of a ClusterQueue, the queue's ancestor cohorts but the root (Cache.ClusterQueueAncestors), and a Cohort
    object's reconcile (AddOrUpdateCohort) requeues the tree's inadmissible workloads. With org a Cohort object
    under another (top), a1 is tried again after b2 and says "2 more needed". With org the root, or a cohort only
    named by the ClusterQueues (no object to reconcile), nothing requeues a1: "1 more needed" stays."""

    def cohort(name: str, parent: str = "") -> dict:
        return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name},
                "spec": {"parentName": parent} if parent else {}}  # fmt: skip

    def a1_message(cohorts: list[dict]) -> str:
        docs = [
            node("n1", gpus=16), flavor("gpu"), *cohorts,
            cluster_queue("team-a", [("gpu", [quota(GPU, 4)])], cohort="org"),
            cluster_queue("team-b", [("gpu", [quota(GPU, 4)])], cohort="org"),
            local_queue("lq-a", "team-a"), local_queue("lq-b", "team-b"),
            job("a1", "lq-a", 1, gpus=6, cpu="0"), job("b1", "lq-b", 1, gpus=3, cpu="0"),
            job("b2", "lq-b", 1, gpus=1, cpu="0"),
        ]  # fmt: skip
        w = {n[:6]: x for n, x in workloads(run(tmp_path, docs)).items()}
        assert w["job-b1"]["admitted"] and w["job-b2"]["admitted"] and not w["job-a1"]["admitted"]
        return quota_reserved(w["job-a1"])[2]

    needed = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, {}"
    assert a1_message([cohort("org", parent="top"), cohort("top")]) == needed.format("2 more needed")
    assert a1_message([cohort("org")]) == needed.format("1 more needed")
    assert a1_message([]) == needed.format("1 more needed")


def test_a_cohort_loop_after_an_admission_ends_with_its_queues_inactive(tmp_path: Path) -> None:
    """A ClusterQueue in a cohort loop (loop-a and loop-b each other's parent) is inactive, as Kueue makes it; an
    admission elsewhere asks the requeuer for each tree's root, and a loop has none: it must not walk forever (the
    Kueue-object fuzz found the hang)."""
    import yaml
    from click.testing import CliRunner

    from accelsched.cli import main

    example = Path(__file__).resolve().parent.parent / "examples/queues/two-teams.yaml"
    docs = [d for d in yaml.safe_load_all(example.read_text()) if d]
    next(d for d in docs if d.get("kind") == "ClusterQueue")["spec"]["cohortName"] = "loop-a"
    for name, parent in (("loop-a", "loop-b"), ("loop-b", "loop-a")):
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name},
                     "spec": {"parentName": parent}})  # fmt: skip
    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    out = CliRunner().invoke(main, ["schedule", "-f", str(path), "-o", "json"])
    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    team_a = [p for p in body["pods"] if p["namespace"] == "team-a"]
    assert team_a and all(p["node"] is None and p["message"] == "ClusterQueue team-a is inactive" for p in team_a)
    assert any(p["node"] for p in body["pods"] if p["namespace"] == "team-b")  # the other tree admits as before


def test_a_strict_fifo_head_stuck_after_a_resumed_scan_is_tried_again_from_the_first_flavor(tmp_path: Path) -> None:
    """Cohort org: team-a (StrictFIFO, no quota of its own on f0 or f1) and team-b (4 GPUs on f0). Cycle 1: a1 (4)
    fits f0 by borrowing team-b's idle GPUs and its scan stops there (MayStopSearch), f1 still to try; b1 (4, no
    borrowing) goes first and takes them, so a1 no longer fits. Cycle 2 resumes a1's scan at f1 (LastAssignment,
    one cycle old): nothing there either, and the scan leaves no flavor pending. Kueue requeues a StrictFIFO head
    at once and keeps trying it, so the next try scans f0 and f1 again: the message it settles on names both (the
    oracle's seed 7000108), not only f1."""

    def wl(name: str, queue: str) -> dict:
        return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": "default"},
                "spec": {"queueName": queue, "podSets": [_pod_set("main", 1, 4)]}}  # fmt: skip

    docs = [
        node("n1"), flavor("f0"), flavor("f1"),
        cluster_queue("team-a", [("f0", [quota(GPU, 0)]), ("f1", [quota(GPU, 0)])], cohort="org",
                      queueingStrategy="StrictFIFO"),
        cluster_queue("team-b", [("f0", [quota(GPU, 4)])], cohort="org"),
        local_queue("lq-a", "team-a"), local_queue("lq-b", "team-b"),
        wl("a1", "lq-a"), wl("b1", "lq-b"),
    ]  # fmt: skip
    out = workloads(run(tmp_path, docs))
    assert out["b1"]["admitted"] and not out["a1"]["admitted"]
    status, reason, message = quota_reserved(out["a1"])
    assert (status, reason) == ("False", "Pending")
    assert "in flavor f0" in message and "in flavor f1" in message, message
