"""The deep queue's live-mode costs, without an API server: Kueue's Workloads read once per resourceVersion
(live/workloadcache.py) admit exactly as read afresh, and Workload status writes in flight are not sent again,
while a decision made from an outdated version is made again on the workload's next event (live/queuedoor.py).

The drain itself, against the real API server, is ``python -m benchmarks.deepqueue``."""

from __future__ import annotations

import copy
import threading

from kubernetes import client as k8s

from accelsched.live import convert as live_convert
from accelsched.live import queuedoor, workloadstatus
from accelsched.live.kube import Kube
from accelsched.live.scheduler import LiveScheduler
from accelsched.live.workloadcache import ParsedByVersion
from accelsched.queues import report as queue_report
from tests.test_queues_live import TWO_TEAMS, _workload_doc, cluster_of


def _snapshot(*workloads: dict) -> live_convert.Snapshot:
    snap = cluster_of(TWO_TEAMS)
    del snap.kueue["Job"]  # team a's quota is the Workloads' alone
    snap.kueue["Workload"] = list(workloads)
    return snap


def _admitted(snap: live_convert.Snapshot, cache: ParsedByVersion | None) -> list[dict]:
    converted = live_convert.convert(snap, {"accelsched"}, workloads=cache)
    return queue_report.workloads_json(live_convert.start_session(converted).queues)


def test_a_workload_is_read_once_per_resource_version_and_admitted_as_if_read_afresh() -> None:
    docs = [_workload_doc(f"w{i}", 2 + i) for i in range(4)]
    snap = _snapshot(*docs)
    cache: ParsedByVersion = ParsedByVersion()
    fresh = _admitted(snap, None)
    assert _admitted(snap, cache) == fresh and cache.hits == 0
    assert _admitted(snap, cache) == fresh and cache.hits == 4  # the second round reads none again
    first = live_convert.convert(snap, {"accelsched"}, workloads=cache).inputs.queues.workloads["team-a/w0"]

    # A new version is read again (here: more pods), and the admission follows it.
    changed = copy.deepcopy(docs[0])
    changed["metadata"]["resourceVersion"] = "8"
    changed["spec"]["podSets"][0]["count"] = 4
    snap = _snapshot(changed, *docs[1:])
    again = live_convert.convert(snap, {"accelsched"}, workloads=cache).inputs.queues.workloads["team-a/w0"]
    assert again is not first and again.pod_sets[0].count == 4
    assert _admitted(snap, cache) == _admitted(snap, None) != fresh

    # A Workload gone is forgotten: the cache holds this round's objects only.
    live_convert.convert(_snapshot(*docs[1:]), {"accelsched"}, workloads=cache)
    hits = cache.hits
    live_convert.convert(_snapshot(changed, *docs[1:]), {"accelsched"}, workloads=cache)
    assert cache.hits == hits + 3


def test_a_bad_workload_is_left_out_with_the_same_error_when_read_from_the_cache() -> None:
    bad = _workload_doc("bad", 1)
    bad["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1e999999"
    unnamed = _workload_doc("unnamed", 1)
    unnamed["spec"]["podSets"][0]["count"] = -1
    snap = _snapshot(bad, unnamed, _workload_doc("good", 1))
    cache: ParsedByVersion = ParsedByVersion()
    expected = live_convert.convert(snap, {"accelsched"}).errors
    assert set(expected) == {"Workload team-a/bad", "Workload team-a/unnamed"}
    for _ in range(2):  # read, then from the cache
        converted = live_convert.convert(snap, {"accelsched"}, workloads=cache)
        assert converted.errors == expected
        assert set(converted.inputs.queues.workloads) == {"team-a/good"}
    assert cache.hits == 3


def _scheduler() -> LiveScheduler:
    return LiveScheduler(Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))))


def _write(doc: dict, admitted: bool) -> workloadstatus.StatusWrite:
    condition = {"type": "QuotaReserved", "status": str(admitted), "reason": "QuotaReserved" if admitted else "Pending"}
    status: dict = {"conditions": [condition]} | ({"admission": {"clusterQueue": "team-a"}} if admitted else {})
    meta = doc["metadata"]
    return workloadstatus.StatusWrite(
        meta["namespace"], meta["name"], {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": status}
    )


def test_a_status_write_in_flight_is_not_sent_again_and_another_from_its_version_waits_for_the_next_event() -> None:
    live = _scheduler()
    doc = _workload_doc("w", 1)
    pending, admit = _write(doc, False), _write(doc, True)
    assert live._status_writes_due([pending]) == [pending]
    # The next round decides from the same version (the write's event is not back): the same write is not sent...
    assert live._status_writes_due([pending]) == [] and not live._stale_workloads
    # ... and another would be answered 409: not sent, and the workload's next event rebuilds the session, even the
    # Pending message's own, which is otherwise left out.
    assert live._status_writes_due([admit]) == [] and live._stale_workloads == {"team-a/w"}
    written = copy.deepcopy(doc)
    written["metadata"]["resourceVersion"] = "8"
    written["status"] = {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]}
    assert workloadstatus.pending_message_only(doc, written)
    live.dirty = False
    with live.lock:
        live._on_workload("MODIFIED", written, doc)
    assert live.dirty and not live._stale_workloads
    assert not live._status_in_flight  # the cache shows the write: a round from now on decides from the new version
    # Without the mark, that event is left out as before.
    live.dirty = False
    with live.lock:
        live._on_workload("MODIFIED", written, doc)
    assert not live.dirty
    # A write from the new version goes out behind the first.
    assert live._status_writes_due([_write(written, True)]) == [_write(written, True)]
    # One whose event never comes (the API server took it as no change) stops holding the next back after a while.
    version, what, at = live._status_in_flight["team-a/w"]
    live._status_in_flight["team-a/w"] = (version, what, at - queuedoor.IN_FLIGHT_SECONDS)
    assert live._status_writes_due([_write(written, True)]) == [_write(written, True)]


def test_a_conflicting_status_write_is_decided_again_once_the_cache_has_the_change() -> None:
    live = _scheduler()
    doc = _workload_doc("w", 1)
    live.kueue["Workload"].store["team-a/w"] = doc
    live.dirty = False
    assert live._status_writes_due([_write(doc, True)])
    live._conflicted("team-a/w", "7")  # the change is not in the cache yet: wait for its event
    assert not live.dirty and live._stale_workloads == {"team-a/w"}
    assert not live._status_in_flight  # not made: the next decision is sent
    live._stale_workloads.clear()
    live.kueue["Workload"].store["team-a/w"] = {**doc, "metadata": {**doc["metadata"], "resourceVersion": "8"}}
    live.wake = threading.Event()
    live._conflicted("team-a/w", "7")  # it is: decide again now
    assert live.dirty and live.wake.is_set() and not live._stale_workloads


def test_pending_workloads_of_other_schedulers_are_left_out_from_the_cache_too() -> None:
    admission = {
        "clusterQueue": "team-a",
        "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "a100"}}],
    }
    snap = _snapshot(
        _workload_doc("mine", 4),
        _workload_doc("pending", 1, scheduler="default-scheduler"),
        _workload_doc("running", 1, scheduler="default-scheduler", admission=admission),
    )
    cache: ParsedByVersion = ParsedByVersion()
    expected = set(live_convert.convert(snap, {"accelsched"}).inputs.queues.workloads)
    assert expected == {"team-a/mine", "team-a/running"}
    for _ in range(2):
        assert set(live_convert.convert(snap, {"accelsched"}, workloads=cache).inputs.queues.workloads) == expected
    assert cache.hits == 3


def test_a_workload_whose_admission_write_is_in_flight_holds_its_quota_in_the_next_round() -> None:
    """Kueue's scheduler assumes a workload admitted in its cache at once. A round between our admission write and
    its event decides as if the write were in: here a workload of higher priority arriving then would otherwise
    take the quota too, and both writes land."""
    live = _scheduler()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)  # 8 GPUs: team-a's quota

    def round_writes() -> tuple[list[dict], list[workloadstatus.StatusWrite]]:
        with live.lock:
            docs = live._assumed_workloads()
        session = live_convert.start_session(live_convert.convert(_snapshot(*docs), {"accelsched"}))
        return queue_report.workloads_json(session.queues), workloadstatus.status_writes(
            session.queues, store, {"accelsched"}
        )

    _, writes = round_writes()
    (admit,) = live._status_writes_due(writes)
    assert "admission" in admit.patch["status"]

    second = _workload_doc("second", 8)  # 16 GPUs: all of the cohort's, were first's 8 free
    second["spec"]["priority"] = 100
    store["team-a/second"] = second
    assumed, writes = round_writes()
    written = copy.deepcopy(first)  # the cache once the write is in
    written["metadata"]["resourceVersion"] = "9"
    written["status"] = admit.patch["status"]
    session = live_convert.start_session(live_convert.convert(_snapshot(written, second), {"accelsched"}))
    assert assumed == queue_report.workloads_json(session.queues)
    assert not any("admission" in w.patch["status"] and w.name == "second" for w in writes)
    # Without the assumption the round differs: second admitted from the quota first's write is taking.
    raw = live_convert.start_session(live_convert.convert(_snapshot(first, second), {"accelsched"}))
    assert queue_report.workloads_json(raw.queues) != assumed

    # The write's event ends the assumption: the cache shows the admission itself.
    with live.lock:
        live._on_workload("MODIFIED", written, first)
        store["team-a/first"] = written
        assert live._assumed_workloads() == [written, second] and not live._assumed_admissions


def _applied(doc: dict, write: workloadstatus.StatusWrite, version: str) -> dict:
    """``doc`` as the API server has it once ``write`` (a merge patch of the status) is applied: a new version."""
    out = copy.deepcopy(doc)
    out["metadata"]["resourceVersion"] = version
    out["status"] = {**(out.get("status") or {}), **copy.deepcopy(write.patch["status"])}
    return out


def test_the_echo_of_our_own_admission_write_rebuilds_nothing_and_the_next_round_decides_the_same() -> None:
    """Kueue's scheduler is not woken by the event of its own status update (the workload is in its cache as
    admitted already); the door's round assumed the admission meanwhile, so a rebuild for the echo would decide
    exactly what the assumed round decided."""
    live = _scheduler()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    store["team-a/second"] = second = _workload_doc("second", 6)  # does not fit beside first
    with live.lock:
        docs = live._assumed_workloads()
    session = live_convert.start_session(live_convert.convert(_snapshot(*docs), {"accelsched"}))
    writes = live._status_writes_due(workloadstatus.status_writes(session.queues, store, {"accelsched"}))
    (admit,) = [w for w in writes if "admission" in w.patch["status"]]
    with live.lock:
        assumed = live._assumed_workloads()
    echo = _applied(first, admit, "9")
    live.dirty = False
    with live.lock:
        live._on_workload("MODIFIED", echo, first)
        store["team-a/first"] = echo
    assert not live.dirty and live.own_writes_seen == 1
    assert "team-a/first" not in live._status_in_flight  # later rounds decide from the new version
    fresh = live_convert.start_session(live_convert.convert(_snapshot(echo, second), {"accelsched"}))
    before = live_convert.start_session(live_convert.convert(_snapshot(*assumed), {"accelsched"}))
    assert queue_report.workloads_json(fresh.queues) == queue_report.workloads_json(before.queues)


def test_an_event_that_is_more_than_our_own_write_rebuilds() -> None:
    live = _scheduler()
    doc = _workload_doc("w", 1)
    admit = _write(doc, True)
    assert live._status_writes_due([admit]) == [admit]
    version, what, _ = live._status_in_flight["team-a/w"]
    echo = _applied(doc, admit, "8")
    assert workloadstatus.own_write_seen(doc, echo, version, what)
    finished = _applied(doc, admit, "8")  # the write and the job's finish in one step (a later version seen first)
    finished["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    assert not workloadstatus.own_write_seen(doc, finished, version, what)
    relabelled = _applied(doc, admit, "8")
    relabelled["metadata"]["labels"] = {"x": "y"}
    assert not workloadstatus.own_write_seen(doc, relabelled, version, what)
    moved_on = copy.deepcopy(doc)
    moved_on["metadata"]["resourceVersion"] = "8"  # decided from version 7: an echo from another version is not it
    assert not workloadstatus.own_write_seen(moved_on, _applied(moved_on, admit, "9"), version, what)
    released = _applied(doc, _write(doc, False), "8")  # a Pending write's echo where the admission was written
    assert not workloadstatus.own_write_seen(doc, released, version, what)
    live.dirty = False
    with live.lock:
        live._on_workload("MODIFIED", finished, doc)
    assert live.dirty and live.own_writes_seen == 0


def test_finished_workloads_are_left_out_of_a_round_and_admission_decides_the_same_without_them() -> None:
    """A finished Workload holds and waits for nothing (Kueue's workload controller drops it from its cache and
    queues): the round's snapshot leaves it out, and admission over the rest equals admission over everything."""
    live = _scheduler()
    store = live.kueue["Workload"].store
    flavors = [{"name": "main", "flavors": {"nvidia.com/gpu": "a100"}}]
    admission = {"clusterQueue": "team-a", "podSetAssignments": flavors}
    done = {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done"}
    reserved = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "q"}
    store["team-a/old"] = _workload_doc("old", 4, admission=admission, conditions=[reserved, done])
    store["team-a/running"] = _workload_doc("running", 2, admission=admission, conditions=[reserved])
    store["team-a/waits"] = _workload_doc("waits", 4)
    with live.lock:
        docs = live._assumed_workloads()
    assert [d["metadata"]["name"] for d in docs] == ["running", "waits"]
    every = live_convert.start_session(live_convert.convert(_snapshot(*store.values()), {"accelsched"}))
    kept = live_convert.start_session(live_convert.convert(_snapshot(*docs), {"accelsched"}))
    assert queue_report.workloads_json(kept.queues) == queue_report.workloads_json(every.queues)
    assert any(w["admitted"] for w in queue_report.workloads_json(kept.queues) if w["name"] == "waits")


def test_a_status_write_the_cache_shows_moved_on_is_taken_as_refused_without_a_request() -> None:
    """A write decided from version 7 while the cache already shows 8 (the runner finished it meanwhile) would be
    answered 409 by the API server: it is not sent, no request and no throttle token spent, and it is handled as a
    409 is (_conflicted: decided again from the cache). A write from the cache's version is sent."""
    live = _scheduler()
    requests: list[str] = []
    live.kube.request = lambda method, path, **_: requests.append(path)  # type: ignore[method-assign]
    store = live.kueue["Workload"].store
    doc = _workload_doc("w", 1)
    store["team-a/w"] = moved = copy.deepcopy(doc)
    moved["metadata"]["resourceVersion"] = "8"
    stale = _write(doc, True)
    assert live._status_writes_due([stale]) == [stale]
    live._write_workload_status(stale)
    assert requests == [] and live.stale_writes_skipped == 1
    assert "team-a/w" not in live._status_in_flight and "team-a/w" not in live._assumed_admissions
    fresh = _write(moved, True)
    live._write_workload_status(fresh)
    assert requests == ["/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads/w/status"]
    assert live.stale_writes_skipped == 1
