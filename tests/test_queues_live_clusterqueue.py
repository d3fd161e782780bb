"""The Workload door's ClusterQueue status (live/clusterqueuestatus.py) and finished Workloads, without an API
server: what Kueue's ClusterQueue controller writes and what its workload controller drops, as Kueue's own
performance runner reads them (benchmarks/kueueperf.py)."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_queues_live import TWO_TEAMS, _workload_doc, cluster_of

from accelsched.live import clusterqueuestatus
from accelsched.live import convert as live_convert

ADMISSION = {
    "clusterQueue": "team-a",
    "podSetAssignments": [{"name": "main", "flavors": {"cpu": "a100", "nvidia.com/gpu": "a100"}, "count": 2}],
}
RESERVED = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "m"}
FINISHED = {"type": "Finished", "status": "True", "reason": "ByTest", "message": "By test runner"}


def _session(docs: list[dict]):
    snap = cluster_of(TWO_TEAMS)
    del snap.kueue["Job"]  # the queues' usage is the Workloads' alone
    snap.kueue["Workload"] = docs
    session = live_convert.start_session(live_convert.convert(snap, {"accelsched"}))
    queues = {q["metadata"]["name"]: q for q in snap.kueue["ClusterQueue"]}
    return session.queues, queues, {f"{d['metadata']['namespace']}/{d['metadata']['name']}": d for d in docs}


def test_cluster_queue_status_counts_and_usage_as_kueues_controller_writes_them() -> None:
    # team a (8 GPUs nominal, cohort research with team b's 8): 6 x 2 GPUs running borrows 4; 1 x 2 more fits
    # (borrowing 6 in all); 3 x 2 does not.
    running = _workload_doc("running", 6, admission=ADMISSION, conditions=[RESERVED])
    docs = [running, _workload_doc("fits", 1), _workload_doc("waits", 3)]
    result, queues, store = _session(docs)
    patches = clusterqueuestatus.status_patches(result, queues, store, {"accelsched"}, now="T1")
    assert set(patches) == {"team-a"}  # team b holds no Workload of ours: Kueue's controller writes its status
    status = patches["team-a"]["status"]
    assert (status["pendingWorkloads"], status["reservingWorkloads"], status["admittedWorkloads"]) == (1, 2, 2)
    (flavor,) = status["flavorsReservation"]
    assert flavor["name"] == "a100"
    by_name = {r["name"]: r for r in flavor["resources"]}
    assert [r["name"] for r in flavor["resources"]] == ["cpu", "memory", "nvidia.com/gpu"]  # sorted, as getUsage
    assert by_name["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "total": "14", "borrowed": "6"}
    assert by_name["cpu"] == {"name": "cpu", "total": "4"}  # under its 96 nominal: no borrowed
    assert by_name["memory"] == {"name": "memory", "total": "0"}
    assert status["flavorsUsage"] == status["flavorsReservation"]  # no admission checks
    (active,) = status["conditions"]
    assert active == {
        "type": "Active",
        "status": "True",
        "reason": "Ready",
        "message": "Can admit new workloads",
        "lastTransitionTime": "T1",
    }

    # Once written, the same round writes nothing; a change of counts writes again, keeping the Active time.
    queues["team-a"] = {**queues["team-a"], "status": status}
    assert clusterqueuestatus.status_patches(result, queues, store, {"accelsched"}) == {}
    queues["team-a"] = {**queues["team-a"], "status": {**status, "pendingWorkloads": 3}}
    again = clusterqueuestatus.status_patches(result, queues, store, {"accelsched"}, now="T2")
    assert again["team-a"]["status"]["pendingWorkloads"] == 1
    assert again["team-a"]["status"]["conditions"][0]["lastTransitionTime"] == "T1"


def test_a_finished_workload_neither_waits_nor_holds_quota() -> None:
    # Kueue's runner finishes an admitted Workload with Finished=True and leaves its admission: the workload
    # controller takes it out of the cache, so its quota is free for the next one.
    done = _workload_doc("done", 6, admission=ADMISSION, conditions=[RESERVED, FINISHED])
    running = _workload_doc("running", 6, admission=ADMISSION, conditions=[RESERVED])
    result, queues, store = _session([done, running, _workload_doc("next", 2)])
    outcomes = {o.info.name: o for o in result.outcomes}
    assert "done" not in outcomes
    assert outcomes["next"].admitted  # 12 + 4 of the cohort's 16 GPUs: fits only without the finished one's 12
    status = clusterqueuestatus.status_patches(result, queues, store, {"accelsched"})["team-a"]["status"]
    assert (status["pendingWorkloads"], status["reservingWorkloads"]) == (0, 2)


def test_only_a_status_change_of_a_cluster_queue_does_not_rebuild() -> None:
    snap = cluster_of(TWO_TEAMS)
    queue = snap.kueue["ClusterQueue"][0]
    written = {**queue, "metadata": {**queue["metadata"], "resourceVersion": "9"}, "status": {"pendingWorkloads": 1}}
    assert clusterqueuestatus.status_only(queue, written)
    edited = {**queue, "spec": {**queue["spec"], "stopPolicy": "Hold"}}
    assert not clusterqueuestatus.status_only(queue, edited)


def _reclaim_case() -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Two teams, team b reclaiming: a borrower admitted with 4 of team b's GPUs, and team b's owner asking its own
    8 back (the borrower is preempted). The Workloads are the caller's to put in."""
    snap = cluster_of(TWO_TEAMS)
    del snap.kueue["Job"]
    (team_b,) = [q for q in snap.kueue["ClusterQueue"] if q["metadata"]["name"] == "team-b"]
    team_b["spec"]["preemption"] = {"reclaimWithinCohort": "Any"}
    borrower = _workload_doc("borrower", 6, admission=ADMISSION, conditions=[RESERVED])  # 12: 4 of team b's
    owner = _workload_doc("owner", 4, namespace="team-b")  # team b's own 8 back: the borrower is preempted
    return snap, borrower, owner


def test_preempted_workloads_hold_back_admissions_in_their_cohort_tree_only() -> None:
    from accelsched.live import workloadstatus

    snap, borrower, owner = _reclaim_case()
    snap.kueue["Workload"] = [borrower, owner]
    result = live_convert.start_session(live_convert.convert(snap, {"accelsched"})).queues
    store = {"team-a/borrower": borrower, "team-b/owner": owner}
    _, holding = workloadstatus.preemptions(result, store, {"accelsched"})
    assert holding == {"team-a/borrower"}
    trees = workloadstatus.trees_of(result, holding)
    assert trees == {"research"}  # team a's and team b's cohort
    (waits,) = workloadstatus.status_writes(result, store, {"accelsched"}, blocked=trees)  # the owner waits
    assert waits.name == "owner" and "admission" not in waits.patch["status"]  # told it waits for the preemption
    elsewhere = workloadstatus.status_writes(result, store, {"accelsched"}, blocked={"another-cohort"})
    assert [w.name for w in elsewhere] == ["owner"] and "admission" in elsewhere[0].patch["status"]


def test_the_last_workload_finished_brings_its_queues_counts_back_to_zero() -> None:
    # The runner's recorder stops once no active ClusterQueue reports pending or reserving workloads: the queue of
    # finished Workloads alone (none of them an outcome any more) is still written, with zeros.
    done = _workload_doc("done", 6, admission=ADMISSION, conditions=[RESERVED, FINISHED])
    result, queues, store = _session([done])
    queues["team-a"] = {**queues["team-a"], "status": {"pendingWorkloads": 0, "reservingWorkloads": 1}}
    status = clusterqueuestatus.status_patches(result, queues, store, {"accelsched"})["team-a"]["status"]
    assert (status["pendingWorkloads"], status["reservingWorkloads"], status["admittedWorkloads"]) == (0, 0, 0)
    assert {r["name"]: r["total"] for r in status["flavorsUsage"][0]["resources"]}["nvidia.com/gpu"] == "0"


def test_the_status_last_sent_stands_for_a_cache_that_does_not_show_it_yet() -> None:
    done = _workload_doc("done", 6, admission=ADMISSION, conditions=[RESERVED, FINISHED])
    result, queues, store = _session([done])
    (zeros,) = clusterqueuestatus.status_patches(result, queues, store, {"accelsched"}).values()
    queues["team-a"] = {**queues["team-a"], "status": zeros["status"]}  # the cache: zeros, as written long ago
    sent = {"team-a": {**zeros["status"], "reservingWorkloads": 1}}  # since then one was sent, not seen yet
    again = clusterqueuestatus.status_patches(result, queues, store, {"accelsched"}, written=sent)
    assert again["team-a"]["status"]["reservingWorkloads"] == 0  # written again: the cache alone would say "same"
    assert clusterqueuestatus.status_patches(result, queues, store, {"accelsched"}) == {}


def test_a_refused_stale_workload_write_brings_a_new_decision() -> None:
    # The door's own pending-message write changes the Workload without a rebuild (_on_workload lets it pass): a
    # later round's write from the older copy is refused (409), and nothing else would decide the workload again.
    from kubernetes import client as k8s

    from accelsched.live import workloadstatus
    from accelsched.live.kube import ApiError, Kube
    from accelsched.live.scheduler import LiveScheduler

    live = LiveScheduler(Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))))

    def conflict(*_: object, **__: object) -> None:
        raise ApiError(409, "the object has been modified", "Conflict")

    live.kube.patch = conflict  # type: ignore[method-assign]
    live.dirty = False
    live._write_workload_status(workloadstatus.StatusWrite("team-a", "w", {"status": {}}))
    assert live.dirty and live.rebuild_reason == "workload status conflict: not in the cache" and live.wake.is_set()


def test_an_admission_left_beside_quota_reserved_false_holds_nothing() -> None:
    # Kueue's runner ends an eviction by unsetting the reservation (QuotaReserved=False, "Evicted by the test
    # runner") and leaves status.admission in place: the workload waits again, its quota free.
    from accelsched.live import workloadstatus

    unset = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "Evicted by the test runner"}
    evicted = _workload_doc("evicted", 6, admission=ADMISSION, conditions=[unset])
    running = _workload_doc("running", 6, admission=ADMISSION, conditions=[RESERVED])
    result, queues, store = _session([evicted, running])
    outcomes = {o.info.name: o for o in result.outcomes}
    assert outcomes["running"].admitted and outcomes["evicted"].info.admitted is None
    assert not outcomes["evicted"].admitted  # 12 + 12 > the cohort's 16: it waits, as a new workload would
    status = clusterqueuestatus.status_patches(result, queues, store, {"accelsched"})["team-a"]["status"]
    assert (status["pendingWorkloads"], status["reservingWorkloads"]) == (1, 1)
    # Once it fits (the running one finished), it is admitted again: written, not skipped as reserved already.
    done = {**running, "status": {**running["status"], "conditions": [RESERVED, FINISHED]}}
    result, queues, store = _session([evicted, done])
    (write,) = workloadstatus.status_writes(result, store, {"accelsched"})
    assert write.name == "evicted" and write.patch["status"]["admission"]["clusterQueue"] == "team-a"


def test_what_fits_beside_a_preempted_workload_still_holding_its_quota_is_admitted_and_the_preemptor_waits() -> None:
    """Kueue's cache keeps a preempted workload's usage until its job lets go, and admits beside it what fits: the
    door writes those admissions (fitting_beside) and holds back only the ones that would overdraw with it."""
    from accelsched.live import workloadstatus

    snap, borrower, owner = _reclaim_case()
    small = _workload_doc("small", 1)  # 2 GPUs in team a: 14 of the cohort's 16 beside the borrower
    snap.kueue["Workload"] = [borrower, owner, small]
    result = live_convert.start_session(live_convert.convert(snap, {"accelsched"})).queues
    store = {"team-a/borrower": borrower, "team-b/owner": owner, "team-a/small": small}
    assert {o.info.name for o in result.outcomes if o.admitted} == {"owner", "small"}
    _, holding = workloadstatus.preemptions(result, store, {"accelsched"})
    assert holding == {"team-a/borrower"}
    usage = {name: dict(node.usage) for name, node in result.tree.cluster_queues.items()}
    allowed = workloadstatus.fitting_beside(result, store, holding, ())
    assert allowed == {"team-a/small"}  # the owner (8 more: 22 of 16) waits for the borrower to let go
    assert {name: dict(node.usage) for name, node in result.tree.cluster_queues.items()} == usage  # left as found
    trees = workloadstatus.trees_of(result, holding)
    writes = workloadstatus.status_writes(result, store, {"accelsched"}, blocked=trees, allowed=allowed)
    assert [w.name for w in writes if "admission" in w.patch["status"]] == ["small"]
    # With the small one's admission in flight, nothing more fits: it is counted as held.
    assert workloadstatus.fitting_beside(result, store, holding, {"team-a/small"}) == set()


ROUND = st.lists(
    st.tuples(st.sampled_from(["arrive", "arrive", "finish", "delete"]), st.integers(0, 3), st.integers(0, 2)),
    min_size=1,
    max_size=4,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 14), st.lists(ROUND, min_size=1, max_size=8))
def test_the_cluster_queue_status_kept_from_round_to_round_is_the_one_counted_from_every_outcome(
    workloads: int, rounds: list[list[tuple[str, int, int]]]
) -> None:
    """The Workload door keeps each ClusterQueue's counts across the rounds it follows in place (Counts) and finds
    its queues of ours through a witness: after every round of Workloads arriving, finishing (preempting and
    preempted among them: three priorities, reclaimWithinCohort Any) and deleted, the counts are those summed over
    every outcome, and the patches it sent are those worked out from scratch from what it read."""
    from benchmarks.doorround import CLASSES, Door

    with mock.patch("accelsched.live.clusterqueuestatus.time.strftime", return_value="T"):
        door = Door(workloads, cohorts=2, per_cohort=2)
        live, followed = door.live, 0
        store = live.kueue["Workload"].store
        for ops in rounds:
            for op, a, b in ops:
                if op == "arrive":
                    door.event("ADDED", door.new(CLASSES[b][0], door.queues[a]), None)
                    continue
                keys = [k for k in store if (k in door.admitted()) == (op == "finish")]
                if keys:
                    key = keys[(3 * a + b) % len(keys)]
                    door.finish(key) if op == "finish" else door.event("DELETED", store[key], None)
            written, cluster_queues = dict(live._cq_written), dict(live.kueue["ClusterQueue"].store)
            followed += not live.sync_session()
            result = live.session.queues
            assert clusterqueuestatus.statuses(result, live._cq_counts) == clusterqueuestatus.statuses(result)
            sent = {args[1]: args[2] for key, args in door.sent if key.startswith("clusterqueue:")}
            assert sent == clusterqueuestatus.status_patches(
                result, cluster_queues, store, {"accelsched"}, written=written
            )
            door.apply_writes()
    assert followed == len(rounds)  # each round was followed in place: the kept counts were the ones read


def test_queue_status_goes_on_its_own_lane_not_behind_the_workloads_writes() -> None:
    """ClusterQueue status writes go to the queue status lane: behind the Pending conditions on the report pool they
    lagged seconds, and Kueue's performance runner reads usage and the end of its run from them."""
    from benchmarks.doorround import CLASSES, Door
    from tests.test_live_workloaddeltas import _Held

    door = Door(2, cohorts=1, per_cohort=2)
    live = door.live
    del live._submit_latest  # the door's own, not the benchmark's recorder
    live.writes, live.queue_status_writes = workloads, queues = _Held(), _Held()  # type: ignore[assignment]
    live.workload_writes = workloads  # type: ignore[assignment]
    door.event("ADDED", door.new(CLASSES[0][0], door.queues[0]), None)
    live.sync_session()
    live.deferred_status.run_all()  # its usage batched first, as Kueue's controller batches it
    assert queues.keys and all(k.startswith("clusterqueue:") for k in queues.keys)
    assert workloads.keys and not any(k.startswith("clusterqueue:") for k in workloads.keys)


def test_a_cluster_queues_usage_is_written_once_a_batch_period_as_kueues_controller_batches_it() -> None:
    """Kueue reconciles a ClusterQueue UpdatesBatchPeriod (1 s) after a Workload event, the events of that second
    making one status update: the rounds of that second write its status once, the last round's. A status whose
    conditions change (a ClusterQueue new to the door) goes at once."""
    from benchmarks.doorround import CLASSES, Door
    from tests.test_live_workloaddeltas import _Held

    door = Door(2, cohorts=1, per_cohort=2)
    live = door.live
    del live._submit_latest
    live.writes, live.queue_status_writes = _Held(), _Held()  # type: ignore[assignment]
    live.workload_writes = live.writes  # type: ignore[assignment]
    queues: _Held = live.queue_status_writes  # type: ignore[assignment]
    for _ in range(3):
        door.event("ADDED", door.new(CLASSES[0][0], door.queues[0]), None)
        live.sync_session()
        assert not queues.keys and len(live.deferred_status) == 1  # waiting; a later round's replaces it
    (key,) = [k for k in live._latest if k.startswith("clusterqueue:")]
    live.deferred_status.run_all()
    assert queues.keys == [key]
    _, _, name, patch = live._latest.pop(key)  # the lane's write takes it (_write_latest)
    assert patch["status"] == clusterqueuestatus.statuses(live.session.queues)[name] | {
        "conditions": patch["status"]["conditions"]
    }

    # Its Active condition not shown yet (a ClusterQueue Kueue reconciles on its own event): at once.
    cq = door.live.kueue["ClusterQueue"].store[name]
    cq["status"] = {}
    door.event("ADDED", door.new(CLASSES[0][0], door.queues[0]), None)
    live.sync_session()
    assert queues.keys == [key, key] and not len(live.deferred_status)
