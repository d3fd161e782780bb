"""The Workload door kept open between rounds (live/workloaddeltas.py, queues.incremental.OpenAdmission.start):
Workloads arriving, finishing and letting go after a preemption are taken into the last rebuild's admission in
place, and what each such round writes is what a rebuild from the cache would write. Without an API server: the
writes are recorded, and the cache's events are fed to the door's handler as the informer would."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from accelsched.live import convert as live_convert
from accelsched.live import workloadstatus
from accelsched.live.scheduler import LiveScheduler
from accelsched.queues import admission as queue_admission
from accelsched.queues import report as queue_report
from accelsched.queues.incremental import OpenAdmission
from tests.test_live_workloadcache import _applied, _scheduler, _snapshot
from tests.test_queues_live import _workload_doc

FINISHED = {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done"}


def _door() -> tuple[LiveScheduler, list[workloadstatus.StatusWrite]]:
    """A live scheduler whose Workload status writes are recorded instead of sent."""
    live = _scheduler()
    sent: list[workloadstatus.StatusWrite] = []

    def record(key: str, fn: object, *args: object, **_lane: object) -> None:
        if key.startswith(("workload:", "pending:")):
            sent.append(args[0])  # type: ignore[arg-type]

    live._submit_latest = record  # type: ignore[method-assign]
    return live, sent


def _rebuild(live: LiveScheduler, shape: Any = None) -> None:
    """A rebuild from the cache (``shape``: changes the snapshot first, e.g. _lower_priority_first)."""
    with live.lock:
        docs = live._assumed_workloads()
    live.dirty = False
    snap = _snapshot(*docs)
    live._rebuild(shape(snap) if shape else snap, "test")


def _said(writes: list[workloadstatus.StatusWrite]) -> dict[str, tuple]:
    """Per Workload, what its last write says (admits, and each condition's type, status and reason)."""
    return {w.name: workloadstatus.written(w)[1] for w in writes}


def _from_scratch(store: dict[str, dict], shape: Any = None) -> dict[str, tuple]:
    """What a rebuild over the cache as it is writes."""
    live, sent = _door()
    live.kueue["Workload"].store.update(copy.deepcopy(store))
    _rebuild(live, shape)
    return _said(sent)


def _event(live: LiveScheduler, kind: str, new: dict, old: dict | None) -> None:
    key = f"{new['metadata']['namespace']}/{new['metadata']['name']}"
    with live.lock:
        live._on_workload(kind, new, old)
        live.kueue["Workload"].store[key] = new


def _evicted_doc(doc: dict, version: str) -> dict:
    """``doc`` at ``version``, evicted and holding no reservation (an eviction written from a version before any
    admission of it)."""
    out = copy.deepcopy(doc)
    out["metadata"]["resourceVersion"] = version
    out["status"] = {
        "conditions": [
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "m"},
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "m"},
        ]
    }
    return out


def _taken_in_place(live: LiveScheduler, sent: list, new: dict, old: dict) -> None:
    """``new`` (a MODIFIED event of ``old``, not recognised as our own write) is taken into the open admission by
    the next round: no rebuild. ``sent`` holds that round's writes."""
    live._status_in_flight.clear()
    rebuilds = live.rebuilds
    _event(live, "MODIFIED", new, old)
    key = f"{new['metadata']['namespace']}/{new['metadata']['name']}"
    assert not live.dirty and set(live._workload_changes) == {key}
    sent.clear()
    assert live._follow_workloads() and live.rebuilds == rebuilds


def test_the_open_admission_starts_as_admission_over_the_same_input() -> None:
    snap = _snapshot(_workload_doc("a", 4), _workload_doc("b", 6), _workload_doc("c", 2))
    inputs = live_convert.convert(snap, {"accelsched"}).inputs
    closed = queue_admission.admit(inputs.queues, inputs.pods, inputs.namespaces, inputs.nodes)
    inputs = live_convert.convert(snap, {"accelsched"}).inputs
    opened = OpenAdmission.start(inputs.queues, inputs.pods, inputs.namespaces, inputs.nodes)
    assert isinstance(opened.admission, OpenAdmission)
    assert queue_report.workloads_json(opened) == queue_report.workloads_json(closed)
    assert queue_report.cluster_queues_json(opened) == queue_report.cluster_queues_json(closed)


def test_workloads_arriving_and_finishing_are_followed_in_place_and_written_as_a_rebuild_writes() -> None:
    live, sent = _door()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)  # 8 GPUs: team-a's quota
    _rebuild(live)
    assert live._open is not None and _said(sent) == _from_scratch(store)
    (admit,) = sent
    echo = _applied(first, admit, "8")
    _event(live, "MODIFIED", echo, first)
    assert not live.dirty and not live._workload_changes  # our own write: nothing to take in

    # A Workload arrives: taken in place, no rebuild; it waits (the cohort lends team-a only 8 more GPUs).
    rebuilds = live.rebuilds
    second = _workload_doc("second", 6)
    _event(live, "ADDED", second, None)
    assert not live.dirty and set(live._workload_changes) == {"team-a/second"}
    sent.clear()
    assert live._follow_workloads()
    assert live.rebuilds == rebuilds and live.workload_rounds == 1
    assert _said(sent) == {k: v for k, v in _from_scratch(store).items() if k == "second"}
    assert not _said(sent)["second"][1]  # not admitted
    pending = _applied(second, sent[0], "9")
    _event(live, "MODIFIED", pending, second)

    # The first finishes: its quota is released in place and the second admitted, as a rebuild would.
    done = copy.deepcopy(echo)
    done["metadata"]["resourceVersion"] = "10"
    done["status"]["conditions"].append(FINISHED)
    _event(live, "MODIFIED", done, echo)
    assert not live.dirty and set(live._workload_changes) == {"team-a/first"}
    sent.clear()
    assert live._follow_workloads()
    assert live.rebuilds == rebuilds
    assert _said(sent) == _from_scratch(store) and _said(sent)["second"][1]  # admitted
    assert "team-a/first" not in live._open.by_key  # type: ignore[union-attr]


def test_a_change_the_door_does_not_follow_in_place_rebuilds() -> None:
    live, _ = _door()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    _rebuild(live)
    relabelled = copy.deepcopy(first)
    relabelled["metadata"]["resourceVersion"] = "8"
    relabelled["metadata"]["labels"] = {"team": "x"}
    _event(live, "MODIFIED", relabelled, first)
    assert live.dirty and not live._workload_changes
    assert live.rebuild_reason == "Workload modified: spec changed"  # what the rebuild's log line says


def test_a_round_followed_in_place_reads_what_changed_not_every_workload() -> None:
    """Ten Workloads wait (written Pending already) behind one running: one more arriving is tried, and the round
    works its writes out from the outcomes its cycles looked at (the new one alone), not from all twelve, and writes
    what a rebuild from the cache writes."""
    live, sent = _door()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    waiting = {f"team-a/w{i}": _workload_doc(f"w{i}", 5 + i) for i in range(10)}  # each tried: no two alike
    store.update(waiting)
    _rebuild(live)
    said = {w.name: w for w in sent}
    _event(live, "MODIFIED", _applied(first, said["first"], "8"), first)
    for i, doc in enumerate(waiting.values()):
        assert not workloadstatus.written(said[doc["metadata"]["name"]])[1][1]  # they wait
        _event(live, "MODIFIED", _applied(doc, said[doc["metadata"]["name"]], str(20 + i)), doc)
    assert not live.dirty and not live._workload_changes
    sent.clear()
    read = live.workload_outcomes_read

    _event(live, "ADDED", _workload_doc("tiny", 1), None)
    assert live._follow_workloads() and not live.dirty
    assert _said(sent) == _from_scratch(store) and "tiny" in _said(sent)
    assert len(live._open.outcomes) == 12  # type: ignore[union-attr]
    assert live.workload_outcomes_read - read == 1  # the new one: the others wait as inadmissible, not tried


def test_a_write_refused_as_stale_is_worked_out_again_for_that_workload_alone() -> None:
    """The admission write of a Workload is answered 409: the cache has moved on (here a Pending message written
    meanwhile, which needs no round of its own). No rebuild: the next round writes that Workload's admission again,
    from the version the cache has, as a rebuild would."""
    live, sent = _door()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    _rebuild(live)
    (admit,) = sent
    assert workloadstatus.written(admit)[1][1]
    message = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "an older round's"}
    moved = copy.deepcopy(first)
    moved["metadata"]["resourceVersion"] = "8"
    moved["status"] = {"conditions": [message]}
    _event(live, "MODIFIED", moved, first)
    assert not live.dirty and not live._workload_changes  # a Pending message alone: nothing to take in

    rebuilds = live.rebuilds
    live._conflicted("team-a/first", workloadstatus.written(admit)[0])  # what _write_workload_status does on 409
    assert not live.dirty and set(live._workload_changes) == {"team-a/first"}
    sent.clear()
    assert live._follow_workloads() and live.rebuilds == rebuilds
    (again,) = sent
    assert again.patch["metadata"]["resourceVersion"] == "8"
    assert _said(sent) == _from_scratch(store) and workloadstatus.written(again)[1][1]


class _Held:
    """A write lane that takes writes and runs none: a backlog on the report pool, as in Kueue's harness."""

    waiting = 0  # the admission lane's (live.writer.PriorityGate)

    def __init__(self) -> None:
        self.keys: list[str] = []

    def submit(self, key: str, fn: object, *args: object, priority: int = 0) -> None:
        self.keys.append(key)

    def report(self, key: str, fn: object, *args: object, subject: str = "") -> None:
        self.keys.append(key)


def test_an_admission_decided_while_the_pending_condition_waits_for_its_turn_goes_out_in_its_place() -> None:
    """The second Workload's Pending condition waits behind other reports, unsent; the first finishes and the next
    round admits the second from the version the Pending condition was decided from. The Pending condition is
    dropped and the admission goes out (before, the admission waited for the superseded message to be written and
    come back)."""
    live = _scheduler()
    live.writes = live.queue_status_writes = live.workload_writes = _Held()  # type: ignore[assignment]
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    _rebuild(live)
    echo = _applied(first, live._latest.pop("workload:team-a/first")[-1], "8")
    _event(live, "MODIFIED", echo, first)

    _event(live, "ADDED", _workload_doc("second", 6), None)
    assert live._follow_workloads()
    pending = live._latest["pending:team-a/second"][1]
    assert not workloadstatus.written(pending)[1][1]  # it waits: its Pending condition is queued, not sent

    done = copy.deepcopy(echo)
    done["metadata"]["resourceVersion"] = "10"
    done["status"]["conditions"].append(FINISHED)
    _event(live, "MODIFIED", done, echo)
    assert live._follow_workloads()
    assert "pending:team-a/second" not in live._latest
    (admit,) = live._latest["workload:team-a/second"][1:]
    assert workloadstatus.written(admit)[1][1] and admit.patch["metadata"]["resourceVersion"] == "7"
    assert "team-a/second" not in live._stale_workloads


def test_a_workload_arriving_while_its_class_is_set_aside_waits_untried_as_kueues_push_or_update_puts_it() -> None:
    """The second Workload does not fit (its Pending condition is written) and its equivalence class is bulk-moved
    to the inadmissible set. A third of the same shape arriving then is put there untried, as Kueue's PushOrUpdate
    puts one: no Pending condition of its own (in Kueue's performance harness each such arrival was tried and
    written, hundreds of writes a run), as a rebuild from the cache decides too. When the first finishes, the
    requeue tries them in order."""
    live, sent = _door()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    _rebuild(live)
    echo = _applied(first, sent[0], "8")
    _event(live, "MODIFIED", echo, first)
    second = _workload_doc("second", 6)
    _event(live, "ADDED", second, None)
    sent.clear()
    assert live._follow_workloads()
    assert set(_said(sent)) == {"second"} and not _said(sent)["second"][1]
    _event(live, "MODIFIED", _applied(second, sent[0], "9"), second)

    sent.clear()
    _event(live, "ADDED", _workload_doc("third", 6), None)
    assert live._follow_workloads() and not live.dirty
    assert not sent  # set aside untried: nothing to write
    assert _from_scratch(store).get("third") is None  # a rebuild from the cache writes nothing for it either
    third = live._open.by_key["team-a/third"]  # type: ignore[union-attr]
    assert not third.conditions and "equivalent workload team-a/second does not fit" in third.held_message


def _lower_priority_first(snap: live_convert.Snapshot) -> live_convert.Snapshot:
    """team-a's ClusterQueue preempts its own lower-priority workloads (withinClusterQueue LowerPriority)."""
    for cq in snap.kueue["ClusterQueue"]:
        if cq["metadata"]["name"] == "team-a":
            cq["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    return snap


def test_a_workload_evicted_already_and_still_holding_is_the_first_target_as_in_kueues_candidates_ordering() -> None:
    # CandidatesOrdering's first rule: a workload evicted already (its job has not let go) goes before the others,
    # here before the more recently admitted low one that the later rules pick (an input read off a cluster in the
    # middle of a preemption: `schedule --from-cluster`).
    def admitted(name: str, at: str, *extra: dict, team: str = "team-a") -> dict:
        reserved = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "m",
                    "lastTransitionTime": at}
        flavors = {"cpu": "a100", "memory": "a100", "nvidia.com/gpu": "a100"}
        admission = {"clusterQueue": team, "podSetAssignments": [{"name": "main", "count": 2, "flavors": flavors}]}
        return _workload_doc(name, 2, namespace=team, conditions=[reserved, *extra], admission=admission)

    evicted = {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "m",
               "lastTransitionTime": "2026-01-01T10:05:00Z"}
    high = _workload_doc("high-1", 2)
    high["spec"]["priority"] = 100
    full_b = [admitted(n, "2026-01-01T09:00:00Z", team="team-b") for n in ("b-1", "b-2")]
    for marked in (False, True):
        docs = [admitted("low-1", "2026-01-01T10:00:00Z", *([evicted] if marked else [])),
                admitted("low-2", "2026-01-01T10:01:00Z"), *copy.deepcopy(full_b), copy.deepcopy(high)]
        inputs = live_convert.convert(_lower_priority_first(_snapshot(*docs)), {"accelsched"}).inputs
        result = queue_admission.admit(inputs.queues, inputs.pods, inputs.namespaces, inputs.nodes)
        preempted = {o.info.name for o in result.outcomes if o.preempted}
        assert preempted == ({"low-1"} if marked else {"low-2"}), marked


class _AtOnce:
    """A write lane that runs each write as it is handed over."""

    waiting = 0

    def submit(self, key: str, fn: Any, *args: Any, priority: int = 0) -> None:
        fn(*args)

    def report(self, key: str, fn: Any, *args: Any, subject: str = "") -> None:
        fn(*args)


def test_a_pending_condition_waits_its_delay_and_is_never_written_when_the_workload_is_admitted_meanwhile() -> None:
    """Most Pending conditions are followed by their Workload's admission within a second or two in a queue that
    drains (Kueue's harness): each is held back PENDING_CONDITION_DELAY first, and an admission decided meanwhile
    takes its place. One still waiting is written when its time comes."""
    live = _scheduler()
    live.pending_condition_delay = 3600.0  # beyond the test: its waiting calls are run by hand below
    live.writes = live.queue_status_writes = live.workload_writes = _AtOnce()  # type: ignore[assignment]
    written: list[workloadstatus.StatusWrite] = []
    live._write_workload_status = lambda w, spare=False: written.append(w)  # type: ignore[method-assign]
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)  # 8 GPUs: team-a's quota
    _rebuild(live)
    echo = _applied(first, written[-1], "8")
    _event(live, "MODIFIED", echo, first)

    _event(live, "ADDED", _workload_doc("second", 6), None)  # 12 more: the cohort lends 8, it waits
    assert live._follow_workloads()
    assert [w.name for w in written] == ["first"] and len(live.deferred_reports) == 1
    assert not workloadstatus.written(live._latest["pending:team-a/second"][1])[1][1]

    done = copy.deepcopy(echo)  # the first finishes: the second is admitted before its Pending condition is due
    done["metadata"]["resourceVersion"] = "10"
    done["status"]["conditions"].append(FINISHED)
    _event(live, "MODIFIED", done, echo)
    assert live._follow_workloads()
    _event(live, "ADDED", _workload_doc("third", 4), None)  # 8 more beside the second's 12: it waits
    assert live._follow_workloads()

    live.deferred_reports.run_all()
    assert [(w.name, workloadstatus.written(w)[1][1]) for w in written] == [
        ("first", True),
        ("second", True),
        ("third", False),
    ]
    assert not live._latest and not len(live.deferred_reports)


def test_a_pending_condition_goes_out_on_a_spare_token_and_gives_its_turn_to_the_admission() -> None:
    """Past its delay, a Pending condition goes out only on a spare token of the Workload client's throttle
    (PENDING_SPARE_SECONDS): with the bucket drained by admissions it is not sent and waits its turn again, and an
    admission decided meanwhile replaces it, as within its delay. The client here points at a closed port: a write
    sent would fail and be taken as not made (_conflicted), not left waiting."""
    live = _scheduler()
    live.pending_condition_delay = 3600.0
    live.writes = live.queue_status_writes = live.workload_writes = _AtOnce()  # type: ignore[assignment]
    admitted: list[workloadstatus.StatusWrite] = []
    send = live._write_workload_status
    live._write_workload_status = lambda w, spare=False: send(w, spare) if spare else admitted.append(w)  # type: ignore[method-assign]
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    _rebuild(live)
    echo = _applied(first, admitted[-1], "8")
    _event(live, "MODIFIED", echo, first)
    _event(live, "ADDED", _workload_doc("second", 6), None)
    assert live._follow_workloads()
    throttle = live.kube.throttle("/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads/second/status")
    while not throttle.spare():  # the admissions of a busy round took every token
        pass
    live.deferred_reports.run_all()  # its delay is over: no spare token, so not sent, and due again
    fn, write, spare_until = live._latest["pending:team-a/second"]
    assert fn == live._write_pending and not workloadstatus.written(write)[1][1] and len(live.deferred_reports) == 1
    assert "team-a/second" not in live._stale_workloads

    done = copy.deepcopy(echo)  # the first finishes: the second's admission takes the Pending condition's place
    done["metadata"]["resourceVersion"] = "10"
    done["status"]["conditions"].append(FINISHED)
    _event(live, "MODIFIED", done, echo)
    assert live._follow_workloads()
    assert "pending:team-a/second" not in live._latest
    assert [(w.name, workloadstatus.written(w)[1][1]) for w in admitted] == [("first", True), ("second", True)]
    live._again("pending:team-a/second", 0.0, write, spare_until)  # superseded: not put back
    live.deferred_reports.run_all()
    assert not live._latest and not len(live.deferred_reports)


def test_the_echo_of_an_admission_no_longer_on_record_is_taken_in_place_not_rebuilt() -> None:
    """The door's admission comes back after its write in flight left the record (a later decision from the same
    version replaced it, or the cache moved past that version first): the cache now shows what the open admission
    holds, so nothing is rebuilt (at 1,000 ClusterQueues each such rebuild took seconds)."""
    live, sent = _door()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    _rebuild(live)
    (admit,) = sent
    live._status_in_flight.clear()
    _event(live, "MODIFIED", _applied(first, admit, "8"), first)
    assert not live.dirty and set(live._workload_changes) == {"team-a/first"}
    sent.clear()
    assert live._follow_workloads() and not sent  # the cache says what it holds: nothing to write

    # An eviction the open admission did not decide is not taken for one: rebuilt, its reason logged.
    evicted = _applied(first, admit, "9")
    evicted["status"]["conditions"].append(
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "by someone else"}
    )
    _event(live, "MODIFIED", evicted, _applied(first, admit, "8"))
    assert live.dirty and live.rebuild_reason.startswith("Workload modified: modified, not a release (+Evicted")


def test_a_write_refused_because_the_workload_finished_meanwhile_rebuilds_nothing() -> None:
    live, sent = _door()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    _rebuild(live)
    (admit,) = sent
    done = _applied(first, admit, "8")
    done["status"]["conditions"].append(FINISHED)
    _event(live, "MODIFIED", done, first)  # its job finished it before the door's write came back
    assert live._follow_workloads() and "team-a/first" not in live._open.by_key  # type: ignore[union-attr]
    live._conflicted("team-a/first", "7")  # a write decided from version 7, refused (409)
    assert not live.dirty and not live._workload_changes


@pytest.mark.parametrize("preempted", [True, False])
def test_an_eviction_that_superseded_its_unsent_admission_is_taken_in_place(preempted: bool) -> None:
    """The door admitted a Workload and evicted it before the admission's turn came: the eviction went out in its
    place, from the version before the admission. Its echo (never reserved, now Evicted) shows it waiting, as the
    open admission has it (preempted by the round that evicted it, or, after a rebuild that read it before the
    echo, a plain pending one): taken in place, not a rebuild (3 to 8 s each at 1,000 ClusterQueues)."""
    live, _ = _door()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    _rebuild(live)
    outcome = live._open.by_key["team-a/first"]  # type: ignore[union-attr]
    outcome.admitted, outcome.preempted = False, preempted
    evicted = _evicted_doc(first, "8")
    live._status_in_flight.clear()
    _event(live, "MODIFIED", evicted, first)
    assert not live.dirty and set(live._workload_changes) == {"team-a/first"}
    assert live._follow_workloads()


def test_a_reservation_seen_on_a_workload_held_waiting_is_held_in_place_as_a_rebuild_holds_it() -> None:
    """The open admission holds a Workload waiting, and the cache shows it reserved (an admission of ours whose write
    was no longer on record when it landed, after a rebuild that had read it pending): held as running in place,
    as the rebuild would hold it (0.2 to 6 s each at 1,000 ClusterQueues), and what comes next is decided as a
    rebuild decides it."""
    live, sent = _door()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)  # 8 GPUs: team-a's quota
    _rebuild(live)
    (admit,) = sent
    echo = _applied(first, admit, "8")
    _event(live, "MODIFIED", echo, first)
    second = _workload_doc("second", 6)  # 12 more: the cohort lends team-a 8
    _event(live, "ADDED", second, None)
    sent.clear()
    assert live._follow_workloads() and not live._open.by_key["team-a/second"].admitted  # type: ignore[union-attr]
    pending = _applied(second, sent[0], "9")
    _event(live, "MODIFIED", pending, second)

    reserved = copy.deepcopy(pending)
    reserved["metadata"]["resourceVersion"] = "10"
    reserved["status"] = {
        "admission": copy.deepcopy(echo["status"]["admission"]),
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "m"},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "m"},
        ],
    }
    rebuilds = live.rebuilds
    _taken_in_place(live, sent, reserved, pending)
    assert live._open.by_key["team-a/second"].admitted  # type: ignore[union-attr]
    assert not sent  # it holds its reservation: nothing to write

    # Both hold 20 GPUs of the 16 team-a may use: a third waits, in place as from scratch.
    third = _workload_doc("third", 1)
    _event(live, "ADDED", third, None)
    sent.clear()
    assert live._follow_workloads() and live.rebuilds == rebuilds
    assert _said(sent) == _from_scratch(store) and not _said(sent)["third"][1]


def _namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_a_namespace_added_beside_workload_objects_alone_is_taken_in_place() -> None:
    """Kueue's performance runner makes a namespace per ClusterQueue: with Workload objects alone (no pod in the
    cache) a new Namespace is taken into the session's cluster and the open admission in place, its labels as a
    rebuild reads them; with pods in the cache it rebuilds as before (their affinity may read it)."""
    live, _ = _door()
    live.kueue["Workload"].store["team-a/first"] = _workload_doc("first", 4)
    _rebuild(live)
    rebuilds = live.rebuilds
    with live.lock:
        live._on_namespace("ADDED", _namespace("team-c", tier="gold"), None)
    assert not live.dirty and not live.sync_session() and live.rebuilds == rebuilds
    labels = {"tier": "gold", "kubernetes.io/metadata.name": "team-c"}
    assert live.session.cluster.namespace_labels("team-c") == labels  # type: ignore[union-attr]
    assert live._open.namespace_labels["team-c"] == labels  # type: ignore[union-attr]

    live.pods.store["team-a/p"] = {"metadata": {"name": "p", "namespace": "team-a"}}
    with live.lock:
        live._on_namespace("ADDED", _namespace("team-d"), None)
    assert live.dirty and live.rebuild_reason.startswith("Namespace added")


def _local_queue(name: str, namespace: str = "team-a", cluster_queue: str = "team-a") -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def test_a_local_queue_added_before_its_workloads_is_taken_in_place() -> None:
    """A LocalQueue added (Kueue's runner makes one per ClusterQueue, then its Workloads) is taken into the open
    admission in place, and the Workloads naming it are admitted through it; one added after a Workload that
    named it (refused, "LocalQueue ... doesn't exist") rebuilds, so that the Workload is tried again."""
    live, sent = _door()
    live.kueue["Workload"].store["team-a/first"] = _workload_doc("first", 1)
    _rebuild(live)
    rebuilds = live.rebuilds
    with live.lock:
        live._on_cluster_queue("ADDED", _local_queue("extra"), None)
    assert not live.dirty and not live.sync_session() and live.rebuilds == rebuilds
    through = _workload_doc("through", 1)
    through["spec"]["queueName"] = "extra"
    sent.clear()
    _event(live, "ADDED", through, None)
    assert not live.sync_session() and live.rebuilds == rebuilds
    outcome = live._open.by_key["team-a/through"]  # type: ignore[union-attr]
    assert outcome.admitted and outcome.cluster_queue == "team-a"
    assert _said(sent)["through"][1]  # its admission written

    early = _workload_doc("early", 1)
    early["spec"]["queueName"] = "late"
    _event(live, "ADDED", early, None)
    assert not live.sync_session()
    assert not live._open.by_key["team-a/early"].admitted  # type: ignore[union-attr]
    with live.lock:
        live._on_cluster_queue("ADDED", _local_queue("late"), None)
    assert live.sync_session() and live.rebuilds == rebuilds + 1  # tried again from a rebuild


def test_an_eviction_seen_on_a_workload_held_admitted_by_an_unseen_decision_releases_it_in_place() -> None:
    """The open admission holds a Workload admitted by a write the cache never showed, and the Workload's next
    event shows it evicted, never reserved (an eviction from an earlier session that went out first). The cache
    moved past the version that admission was decided from, so its write cannot land: the Workload is released
    and tried again in place, and the round writes what a rebuild from the cache writes (3 s a rebuild at 1,000
    ClusterQueues)."""
    live, sent = _door()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    _rebuild(live)
    assert live._open.by_key["team-a/first"].admitted  # type: ignore[union-attr]
    _taken_in_place(live, sent, _evicted_doc(first, "8"), first)
    assert _said(sent) == _from_scratch(store) and _said(sent)["first"][1]  # admitted again, from version 8


def test_the_late_echo_of_an_admission_evicted_since_is_taken_in_place_and_the_eviction_written_from_it() -> None:
    """The open admission admits a Workload, then evicts it for a higher-priority one before the admission's echo
    is back (the eviction, decided from the version before the admission, is kept back: a 409 else). The echo
    shows the reservation the open admission counted until that eviction: taken in place (2 to 7 s a rebuild at
    1,000 ClusterQueues), and the round writes the eviction from the echo's version, as a rebuild from the cache
    writes it. A reservation it never gave (other flavors) is still rebuilt."""
    live, sent = _door()
    store = live.kueue["Workload"].store
    store["team-a/low"] = low = _workload_doc("low", 4)  # 8 GPUs: team-a's own
    store["team-a/other"] = other = _workload_doc("other", 4)  # 8 more: borrowed from team-b
    other["spec"]["priority"] = 50
    _rebuild(live, _lower_priority_first)
    admits = {w.name: w for w in sent}
    assert set(admits) == {"low", "other"}
    echo_other = _applied(other, admits["other"], "8")
    _event(live, "MODIFIED", echo_other, other)
    high = _workload_doc("high", 4)
    high["spec"]["priority"] = 100
    _event(live, "ADDED", high, None)
    sent.clear()
    assert live._follow_workloads()
    victim = live._open.by_key["team-a/low"]  # type: ignore[union-attr]
    assert victim.preempted and not victim.admitted  # low's admission never showed: the eviction is not written
    assert not any(w.name == "low" and workloadstatus.urgent(w) for w in sent)

    echo_low = _applied(low, admits["low"], "9")
    rebuilds = live.rebuilds
    _taken_in_place(live, sent, echo_low, low)
    assert live.rebuilds == rebuilds
    (eviction,) = [w for w in sent if w.name == "low"]
    assert eviction.patch["metadata"]["resourceVersion"] == "9"
    said = {c["type"]: (c["status"], c["reason"]) for c in eviction.patch["status"]["conditions"]}
    assert said["Evicted"] == ("True", "Preempted") and said["Preempted"][0] == "True"
    store["team-a/high"] = high
    assert _said([eviction])["low"] == _from_scratch(store, _lower_priority_first)["low"]

    # Other flavors than it gave: not that admission's echo, rebuilt.
    moved = copy.deepcopy(echo_low)
    moved["metadata"]["resourceVersion"] = "10"
    moved["status"]["admission"]["podSetAssignments"][0]["flavors"] = {"nvidia.com/gpu": "h100"}
    _event(live, "MODIFIED", moved, echo_low)
    assert live.dirty and "held waiting, preempted in team-a" in live.rebuild_reason



def test_an_earlier_pending_condition_landing_first_is_taken_in_place_and_the_admission_sent_again() -> None:
    """The open admission admitted a Workload, and a Pending condition of ours decided earlier from the same version
    landed first (the admission's write, from that version, cannot land then). The Workload waits before and after,
    as the cache has it: taken in place, and the round sends the admission again from the new version, as a
    rebuild from the cache would (0.6 s a rebuild at 1,000 ClusterQueues)."""
    live, sent = _door()
    store = live.kueue["Workload"].store
    store["team-a/first"] = first = _workload_doc("first", 4)
    _rebuild(live)
    assert _said(sent)["first"][1]  # admitted, its write decided from version 7
    pending = copy.deepcopy(first)
    pending["metadata"]["resourceVersion"] = "8"
    pending["status"] = {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "an earlier round's words"}
    ]}
    # The admission, decided from the version the Pending write in flight was decided from, was kept back and the
    # Workload marked stale (_status_writes_due): its next event is looked at even for a Pending message alone.
    live._stale_workloads.add("team-a/first")
    _taken_in_place(live, sent, pending, first)
    (again,) = sent
    assert again.patch["metadata"]["resourceVersion"] == "8" and again.patch["status"]["admission"]
    store["team-a/first"] = pending
    assert _said(sent) == _from_scratch(store)


class _Prioritised(_Held):
    """The admission lane, recording the priority each write is handed over with."""

    def __init__(self) -> None:
        super().__init__()
        self.priorities: dict[str, int] = {}

    def submit(self, key: str, fn: object, *args: object, priority: int = 0) -> None:
        self.priorities[key] = priority


def test_the_admission_lane_takes_evictions_first_and_admissions_by_their_workloads_priority() -> None:
    """While the API server takes the door's writes slower than it decides them (Kueue's harness, as its runner
    creates Workloads), those waiting go out by this priority (live.writer.PriorityGate): an eviction before every
    admission, since its cohort tree's admissions wait for the preempted to let go; then the Workload's own."""
    from accelsched.live.queuedoor import EVICTION_PRIORITY

    live = _scheduler()
    lane = _Prioritised()
    live.writes = live.queue_status_writes = _Held()  # type: ignore[assignment]
    live.workload_writes = lane  # type: ignore[assignment]
    store = live.kueue["Workload"].store
    for name, priority in (("low", 5), ("high", 7)):
        store[f"team-a/{name}"] = doc = _workload_doc(name, 2)
        doc["spec"]["priority"] = priority
    _rebuild(live)
    assert lane.priorities == {"workload:team-a/low": 5, "workload:team-a/high": 7}

    def admitted(name: str, team: str = "team-a") -> dict:
        reserved = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "m",
                    "lastTransitionTime": "2026-01-01T10:00:00Z"}
        flavors = {"cpu": "a100", "memory": "a100", "nvidia.com/gpu": "a100"}
        admission = {"clusterQueue": team, "podSetAssignments": [{"name": "main", "count": 2, "flavors": flavors}]}
        return _workload_doc(name, 2, namespace=team, conditions=[reserved], admission=admission)  # fmt: skip

    live = _scheduler()  # a cluster where a preemption is due
    lane = _Prioritised()
    live.writes = live.queue_status_writes = _Held()  # type: ignore[assignment]
    live.workload_writes = lane  # type: ignore[assignment]
    store = live.kueue["Workload"].store
    for doc in (admitted("low-1"), admitted("low-2"), admitted("b-1", "team-b"), admitted("b-2", "team-b")):
        store[f"{doc['metadata']['namespace']}/{doc['metadata']['name']}"] = doc
    store["team-a/high"] = high = _workload_doc("high", 2)
    high["spec"]["priority"] = 100
    _rebuild(live, _lower_priority_first)
    assert lane.priorities == {"workload:team-a/low-2": EVICTION_PRIORITY}  # high is admitted once low-2 lets go


def test_a_workload_preempted_before_its_admission_was_written_is_not_shown_evicted_nor_its_admission_sent() -> None:
    """While the API server takes the door's writes slower than it decides them, a lower-priority admission waits
    for its turn, and a higher-priority arrival preempts it meanwhile. It never held its quota as far as the cluster
    knows: its admission is dropped unsent and no eviction is written (Kueue forgets an admission it cannot apply),
    and the preemptor is admitted at once, with no job to wait for. Before, the eviction went out in the admission's
    place once the admission had waited IN_FLIGHT_SECONDS, showing Preempted=True on a Workload that never ran (463
    of the 483 evictions of a large-scale run); within them, the admission went out later and was evicted for real."""
    live = _scheduler()
    live.writes = live.queue_status_writes = live.workload_writes = _Held()  # type: ignore[assignment]
    store = live.kueue["Workload"].store

    def admitted(name: str) -> dict:
        reserved = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "m",
                    "lastTransitionTime": "2026-01-01T10:00:00Z"}
        flavors = {"cpu": "a100", "memory": "a100", "nvidia.com/gpu": "a100"}
        admission = {"clusterQueue": "team-b", "podSetAssignments": [{"name": "main", "count": 2, "flavors": flavors}]}
        return _workload_doc(name, 2, namespace="team-b", conditions=[reserved], admission=admission)  # fmt: skip

    for name in ("b-1", "b-2"):  # team-b uses its own quota: team-a cannot borrow
        store[f"team-b/{name}"] = admitted(name)
    _rebuild(live, _lower_priority_first)
    for name in ("low-1", "low-2"):
        _event(live, "ADDED", _workload_doc(name, 2), None)
    assert live._follow_workloads()
    assert {"workload:team-a/low-1", "workload:team-a/low-2"} <= set(live._latest)  # decided, not sent yet

    high = _workload_doc("high", 2)
    high["spec"]["priority"] = 100
    _event(live, "ADDED", high, None)
    assert live._follow_workloads() and not live.dirty
    assert "workload:team-a/low-2" not in live._latest and "team-a/low-2" not in live._assumed_admissions
    said = {k: workloadstatus.written(v[1])[1] for k, v in live._latest.items() if k.startswith("workload:")}
    assert said["workload:team-a/high"][1] and said["workload:team-a/low-1"][1]  # both admit
    assert not any(t in ("Evicted", "Preempted") and s == "True" for what in said.values() for t, s, _ in what[0])
    low_2 = live._open.by_key["team-a/low-2"]  # type: ignore[union-attr]
    assert low_2.preempted and not low_2.admitted  # waiting in its queue again


def test_past_its_window_a_pending_condition_still_waits_for_a_spare_token_while_admissions_wait_for_the_lane() -> (
    None
):
    """Under Kueue's own client throttle the door decides admissions far ahead of the Workload bucket: a Pending
    condition whose spare-token window is over still goes out only on a spare token while admissions or evictions
    wait for the admission lane (looking again every BACKLOG_RECHECK_SECONDS), and takes its turn once none do."""
    from accelsched.live import kube as k
    from accelsched.live.queuedoor import BACKLOG_RECHECK_SECONDS

    live = _scheduler()
    lane = _Held()
    live.writes = live.queue_status_writes = live.workload_writes = lane  # type: ignore[assignment]
    asked: list[bool] = []
    again: list[float] = []

    def write_status(write: workloadstatus.StatusWrite, spare: bool = False) -> None:
        asked.append(spare)
        if spare:
            raise k.Busy(0.02)  # the bucket has no token to spare

    live._write_workload_status = write_status  # type: ignore[method-assign]
    live._again = lambda key, delay, write, spare_until: again.append(delay)  # type: ignore[method-assign]
    pending = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "m"}
    write = workloadstatus.StatusWrite("team-a", "second", {"status": {"conditions": [pending]}})
    lane.waiting = 3  # admissions wait for the lane
    live._write_pending(write, spare_until=0.0)  # its window is long over
    assert asked == [True] and again == [BACKLOG_RECHECK_SECONDS]
    lane.waiting = 0
    live._write_pending(write, spare_until=0.0)
    assert asked == [True, False] and again == [BACKLOG_RECHECK_SECONDS]  # sent, taking its turn
