"""Kueue's events on the Workloads the queue door writes (live/workloadevents.py): which go with which status write,
their words (Kueue v0.19.2's format strings, pkg/scheduler and pkg/scheduler/preemption), the flavors considered
(flavorassigner's attempts), and the sink that writes them. tests/live/test_kueue_events.py holds them against
the real Kueue."""

from __future__ import annotations

import threading

from accelsched.live import convert as live_convert
from accelsched.live import workloadevents, workloadstatus
from accelsched.live.events import Recorder
from accelsched.queues.flavorassigner import AssignmentMode, Attempt, Mode
from tests.test_queues_live import TWO_TEAMS, _workload_doc, cluster_of, reclaimed_borrower


def _said(write: workloadstatus.StatusWrite, now: float = 0.0) -> list[tuple[str, str, str, str]]:
    return [(e.regarding["metadata"]["name"], e.type, e.reason, e.text(now)) for e in write.events]


def test_an_admission_carries_quota_reserved_and_admitted_and_a_refusal_a_pending_warning() -> None:
    snap = cluster_of(TWO_TEAMS)
    del snap.kueue["Job"]
    docs = {"fits": _workload_doc("fits", 4), "waits": _workload_doc("waits", 6)}
    docs["fits"]["metadata"]["creationTimestamp"] = "2026-12-07T10:00:00Z"
    docs["waits"]["metadata"]["creationTimestamp"] = "2026-12-07T10:00:01Z"
    snap.kueue["Workload"] = list(docs.values())
    session = live_convert.start_session(live_convert.convert(snap))
    store = {f"team-a/{name}": doc for name, doc in docs.items()}
    writes = {w.name: w for w in workloadstatus.status_writes(session.queues, store, {"accelsched"}, now="T1")}
    created = workloadevents._epoch("2026-12-07T10:00:00Z")
    assert created is not None
    assert _said(writes["fits"], created + 2.6) == [
        ("fits", "Normal", "QuotaReserved", "Quota reserved in ClusterQueue team-a, wait time since queued was 3s"),
        ("fits", "Normal", "Admitted", "Admitted by ClusterQueue team-a, wait time since reservation was 0s"),
    ]
    ((name, kind, reason, note),) = _said(writes["waits"])
    condition = writes["waits"].patch["status"]["conditions"][0]
    assert (name, kind, reason, note) == ("waits", "Warning", "Pending", condition["message"])
    assert note.startswith("couldn't assign flavors to pod set main: insufficient unused quota")


def test_the_wait_counts_from_the_last_requeue() -> None:
    doc = _workload_doc("w", 1)
    doc["metadata"]["creationTimestamp"] = "2026-12-07T10:00:00Z"
    requeued = {"type": "Requeued", "status": "True", "reason": "Preempted"}
    requeued["lastTransitionTime"] = "2026-12-07T10:01:00Z"
    doc["status"] = {"conditions": [requeued]}
    assert workloadevents.queued_since(doc) == workloadevents._epoch("2026-12-07T10:01:00Z")


def test_a_preemption_carries_kueues_three_events() -> None:
    session, store = reclaimed_borrower()
    (write,), _ = workloadstatus.preemptions(session.queues, store, {"accelsched"}, now="T1")
    message = next(c["message"] for c in write.patch["status"]["conditions"] if c["type"] == "Preempted")
    assert message.startswith("Preempted to accommodate a workload (UID: u-owner, JobUID: UNKNOWN)")
    priorities = (
        "preemptor effective priority: 0 (base: 0, boost: 0); preemptee effective priority: 0 (base: 0, boost: 0)"
    )
    assert _said(write) == [
        ("borrower", "Normal", "EvictedDueToPreempted", message),
        ("borrower", "Normal", "Preempted", f"{message}; {priorities}"),
        ("owner", "Normal", "PreemptedWorkload",
         f"Preempted workload team-a/borrower (UID: u-borrower) in ClusterQueue team-a; {priorities}"),
    ]  # fmt: skip
    assert {e.controller for e in write.events} == {workloadevents.ADMISSION}


def test_a_drain_by_a_stopped_queue_is_the_workload_controllers() -> None:
    doc = _workload_doc("w", 1)
    (event,) = workloadevents.drained(doc, "ClusterQueueStopped", "The ClusterQueue is stopped")
    assert (event.reason, event.controller) == ("EvictedDueToClusterQueueStopped", "kueue-workload-controller")


def test_flavors_considered_list_what_did_not_fit_or_fit_by_borrowing_as_kueue_formats_them() -> None:
    from accelsched.queues.flavorassigner import Assignment, PodSetAssignment

    full = Attempt("small", AssignmentMode.NO_FIT, 0, None, ("insufficient unused quota for cpu in flavor small",))
    assignment = Assignment(
        [
            PodSetAssignment("main", attempts=[full, Attempt("big", AssignmentMode.FIT, 1)]),
            PodSetAssignment("aux", attempts=[Attempt("small", AssignmentMode.FIT, 0)]),  # fits, lends nothing
            PodSetAssignment("ps2", attempts=[Attempt("big", AssignmentMode.PREEMPT, 0, Mode.RECLAIM, ("r1", "r2"))]),
        ]
    )
    assert assignment.considered() == (
        "main: small(NoFit;insufficient unused quota for cpu in flavor small), big(Fit;borrow=1) | "
        "ps2: big(preemptionMode=Reclaim;r1;r2)"
    )
    # mergeFlavorAttempts: the worse mode, the higher borrowing, the lesser possibility, the reasons of both
    merged = Attempt("f", AssignmentMode.PREEMPT, 1, Mode.RECLAIM, ("b",)).merged(
        Attempt("f", AssignmentMode.FIT, 2, Mode.NO_PREEMPTION_CANDIDATES, ("a", "b"))
    )
    assert merged == Attempt("f", AssignmentMode.PREEMPT, 2, Mode.NO_PREEMPTION_CANDIDATES, ("a", "b"))


def test_a_borrowing_admission_says_which_flavors_it_considered() -> None:
    snap = cluster_of(TWO_TEAMS)
    del snap.kueue["Job"]
    doc = _workload_doc("borrows", 6)  # 12 GPUs: team a's 8 and 4 of team b's
    snap.kueue["Workload"] = [doc]
    session = live_convert.start_session(live_convert.convert(snap))
    (write,) = workloadstatus.status_writes(session.queues, {"team-a/borrows": doc}, {"accelsched"})
    quota_reserved = write.events[0].text(0.0)
    assert quota_reserved.endswith("; Flavors considered: main: a100(Fit;borrow=1)"), quota_reserved


class _Events:
    """The calls a Recorder makes on a Kube, recorded; ``gate`` holds each create until set."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.gate = threading.Event()

    def create(self, resource, body, namespace=None):
        self.gate.wait(5)
        self.bodies.append(body)
        return {"metadata": {"name": f"ev-{len(self.bodies)}"}}


def test_the_sink_writes_in_order_as_kueues_recorder_and_drops_past_its_queue() -> None:
    kube = _Events()
    sink = workloadevents.EventSink(Recorder(kube), max_queued=2)  # type: ignore[arg-type]
    doc = _workload_doc("w", 1)
    events = [workloadevents.WorkloadEvent(doc, "Normal", f"R{i}", f"note {i}") for i in range(5)]
    try:
        sink.record(events[:1])  # taken by the thread at once (held at the API server)
        threading.Event().wait(0.2)
        sink.record(events[1:])  # two wait, two are dropped
        assert sink.dropped == 2
        kube.gate.set()
        for _ in range(50):
            if len(kube.bodies) == 3:
                break
            threading.Event().wait(0.1)
    finally:
        sink.stop()
    assert [b["reason"] for b in kube.bodies] == ["R0", "R1", "R2"]
    body = kube.bodies[0]
    assert body["regarding"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "namespace": "team-a", "name": "w",
        "uid": "u-w", "resourceVersion": "7",
    }  # fmt: skip
    assert (body["type"], body["action"], body["reportingController"]) == ("Normal", "R0", "kueue-admission")


def test_a_long_note_is_cut_as_kueue_cuts_it() -> None:
    note = workloadevents.truncate("x" * 2000)
    assert len(note) == 1024 and note.endswith("x ...")


def test_the_sink_holds_its_events_while_admissions_wait_for_their_lane(monkeypatch) -> None:
    monkeypatch.setattr(workloadevents, "BUSY_RECHECK_SECONDS", 0.05)
    kube = _Events()
    kube.gate.set()
    busy = threading.Event()
    busy.set()
    sink = workloadevents.EventSink(Recorder(kube), busy=busy.is_set)  # type: ignore[arg-type]
    try:
        sink.record([workloadevents.WorkloadEvent(_workload_doc("w", 1), "Normal", "R", "note")])
        threading.Event().wait(0.3)
        assert kube.bodies == []  # held while the lane is busy
        busy.clear()
        for _ in range(50):
            if kube.bodies:
                break
            threading.Event().wait(0.05)
    finally:
        sink.stop()
    assert [b["reason"] for b in kube.bodies] == ["R"]


def test_an_inadmissible_workload_is_the_workload_controllers_and_gets_no_event() -> None:
    snap = cluster_of(TWO_TEAMS)
    del snap.kueue["Job"]
    doc = _workload_doc("lost", 1)
    doc["spec"]["queueName"] = "nowhere"  # no such LocalQueue
    snap.kueue["Workload"] = [doc]
    session = live_convert.start_session(live_convert.convert(snap))
    (write,) = workloadstatus.status_writes(session.queues, {"team-a/lost": doc}, {"accelsched"})
    (condition,) = write.patch["status"]["conditions"]
    assert (condition["reason"], condition["message"]) == ("Inadmissible", "LocalQueue nowhere doesn't exist")
    assert write.events == ()
