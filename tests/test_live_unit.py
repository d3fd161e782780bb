"""Live mode's pure logic, without an API server: object conversion (the same engine as offline), gangs arriving
one pod at a time, backoffs, the Lease rules, events and conditions, the cache's event routing, metrics/health.

Everything that talks to an API server is tested against the real one in tests/live/."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client as k8s

from accelsched import report
from accelsched.api.loader import read_documents
from accelsched.engine import Session, schedule
from accelsched.live import convert as live_convert
from accelsched.live.backoff import Backoff, PodBackoff, pod_backoff
from accelsched.live.events import (
    NOTE_LIMIT,
    disruption_patch,
    event_body,
    preempted_message,
    scheduled_message,
    truncate,
    unschedulable_patch,
)
from accelsched.live.kube import PODS, Kube, _camel
from accelsched.live.leaderelection import ElectionConfig, held_by_other, micro_time, next_spec, released_spec
from accelsched.live.logs import JSONFormatter
from accelsched.live.metrics import HealthServer, Metrics
from accelsched.live.podjson import as_bound, node_changed
from accelsched.live.scheduler import Decision, LiveScheduler

ROOT = Path(__file__).resolve().parent.parent
LAB = [ROOT / "examples/lab" / f for f in ("00-nodes.yaml", "02-train-16.yaml", "03-maintenance.yaml", "06-fill.yaml")]
ACCEL = "qualcomm.com/ai-accelerator"


def snapshot_of(paths: list[Path]) -> live_convert.Snapshot:
    """What the API server would serve for these files: plain JSON dicts by kind."""
    snap = live_convert.Snapshot()
    for path in paths:
        for d in read_documents(path):
            doc = json.loads(json.dumps(d.doc))
            {"Node": snap.nodes, "Pod": snap.pods, "PodGroup": snap.pod_groups, "Namespace": snap.namespaces}[
                d.kind
            ].append(doc)
    return snap


def pod(name: str, accel: int = 1, group: str | None = None, node: str = "", scheduler: str = "accelsched") -> dict:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    spec: dict = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", ACCEL: str(accel)}}}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels},
        "spec": spec,
    }


def node(name: str, accel: int = 4) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110", ACCEL: str(accel)}},
    }


def group(name: str, min_member: int) -> dict:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member},
    }


# ---------------------------------------------------------------------------------------------- conversion


def test_live_conversion_schedules_the_lab_exactly_as_offline() -> None:
    _, offline = schedule(LAB)
    converted = live_convert.convert(snapshot_of(LAB))
    session = Session.start(converted.inputs)
    session.scheduler.groups = converted.groups
    live = session.schedule()
    assert [report.pod_json(r) for r in live] == [report.pod_json(r) for r in offline]
    assert any(r.scheduled for r in live) and any(not r.scheduled for r in live)


def test_conversion_takes_only_its_scheduler_names_pending_pods_but_accounts_every_bound_pod() -> None:
    snap = live_convert.Snapshot(
        nodes=[node("n1", 4)],
        pods=[pod("ours"), pod("theirs", scheduler="default-scheduler"), pod("bound", 3, node="n1", scheduler="x")],
    )
    converted = live_convert.convert(snap, {"accelsched"})
    assert [p.name for p in converted.inputs.pending] == ["ours"]
    session = Session.start(converted.inputs)
    (result,) = session.schedule()
    assert result.node == "n1" and result.devices == {ACCEL: ["ai-accelerator-3"]}  # 0-2 held by "bound"


def test_a_bad_object_is_left_out_with_its_error_and_the_rest_is_scheduled() -> None:
    bad_node = node("broken")
    bad_node["status"]["allocatable"][ACCEL] = "-1"
    bad_pod = pod("bad")
    bad_pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    snap = live_convert.Snapshot(nodes=[node("n1"), bad_node], pods=[pod("good"), bad_pod])
    converted = live_convert.convert(snap, {"accelsched"})
    assert set(converted.errors) == {"Node broken", "Pod default/bad"}
    assert "status.allocatable" in converted.errors["Node broken"]
    assert "spec.containers[0].resources.requests[cpu]" in converted.errors["Pod default/bad"]
    assert [n.name for n in converted.inputs.nodes] == ["n1"]
    assert [p.name for p in converted.inputs.pending] == ["good"]


def test_bound_pods_on_a_vanished_node_are_not_accounted() -> None:
    snap = live_convert.Snapshot(nodes=[node("n1")], pods=[pod("orphan", node="gone")])
    converted = live_convert.convert(snap)
    assert converted.orphans == ["default/orphan"] and converted.inputs.pods == []


def test_gang_with_fewer_pods_than_min_member_waits_instead_of_being_an_error() -> None:
    snap = live_convert.Snapshot(
        nodes=[node("n1", 8)], pods=[pod("a-0", group="a"), pod("a-1", group="a")], pod_groups=[group("a", 4)]
    )
    converted = live_convert.convert(snap)
    assert converted.inputs.pending == []
    assert converted.waiting == {  # Coscheduling's PreFilter message, as offline (issue 28)
        f"default/a-{i}": f"0/1 nodes are available: pre-filter pod a-{i} cannot find enough sibling pods, current"
        " pods number: 2, minMember of group: 4."
        for i in range(2)
    }


def test_members_already_bound_count_toward_min_member() -> None:
    pods = [pod("a-0", 2, "a", node="n1"), pod("a-1", 2, "a", node="n1"), pod("a-2", 2, "a"), pod("a-3", 2, "a")]
    converted = live_convert.convert(
        live_convert.Snapshot(nodes=[node("n1", 4), node("n2", 4)], pods=pods, pod_groups=[group("a", 4)])
    )
    assert converted.groups["default/a"].min_member == 2
    session = Session.start(converted.inputs)
    session.scheduler.groups = converted.groups
    results = session.schedule()
    assert {r.pod.name: r.node for r in results} == {"a-2": "n2", "a-3": "n2"}


def test_labelled_pods_without_a_pod_group_are_one_gang_of_all_of_them() -> None:
    snap = live_convert.Snapshot(nodes=[node("n1", 4)], pods=[pod(f"j-{i}", 2, "job") for i in range(3)])
    converted = live_convert.convert(snap)
    session = Session.start(converted.inputs)
    session.scheduler.groups = converted.groups
    results = session.schedule()
    assert converted.groups["default/job"].min_member == 3
    assert not any(r.scheduled for r in results)  # 3 x 2 cards on a 4-card node: none, not two
    assert results[0].message.startswith("gang default/job needs 3 pods x 2 qualcomm.com/ai-accelerator")


# ---------------------------------------------------------------------------------------------- backoff


def test_pod_backoff_doubles_from_initial_to_max_like_kube_scheduler() -> None:
    assert [pod_backoff(n) for n in range(7)] == [0, 1, 2, 4, 8, 10, 10]
    b = PodBackoff(1.0, 10.0)
    assert b.ready_at("u") == 0.0
    b.failed("u", 100.0)
    assert b.ready_at("u") == 101.0
    b.failed("u", 101.5)
    assert b.ready_at("u") == 103.5
    b.forget("u")
    assert b.ready_at("u") == 0.0


def test_reconnect_backoff_grows_to_its_maximum_and_resets() -> None:
    b = Backoff(0.2, 1.0)
    assert [b.next() for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    b.reset()
    assert b.next() == 0.2


# ---------------------------------------------------------------------------------------------- leader election


def test_lease_held_by_another_until_its_record_is_unchanged_for_a_lease_duration() -> None:
    spec = {"holderIdentity": "a", "leaseDurationSeconds": 15}
    assert held_by_other(spec, "b", observed_at=100.0, now=114.9)
    assert not held_by_other(spec, "b", observed_at=100.0, now=115.1)
    assert not held_by_other(spec, "a", observed_at=100.0, now=101.0)  # our own lease
    assert not held_by_other({"holderIdentity": ""}, "b", observed_at=100.0, now=100.0)  # released


def test_next_spec_keeps_acquire_time_on_renew_and_counts_transitions_on_takeover() -> None:
    first = next_spec(None, "a", 15, 1000.0)
    assert first["holderIdentity"] == "a" and first["leaseTransitions"] == 0
    assert first["acquireTime"] == first["renewTime"] == micro_time(1000.0) == "1970-01-01T00:16:40.000000Z"
    renewed = next_spec(first, "a", 15, 1002.0)
    assert renewed["acquireTime"] == first["acquireTime"] and renewed["renewTime"] == micro_time(1002.0)
    assert renewed["leaseTransitions"] == 0
    taken = next_spec(renewed, "b", 15, 1020.0)
    assert taken["holderIdentity"] == "b" and taken["leaseTransitions"] == 1
    assert taken["acquireTime"] == micro_time(1020.0)


def test_taking_a_released_lease_is_a_transition_and_a_release_stamps_its_times() -> None:
    held = next_spec(None, "a", 15, 1000.0)
    released = released_spec(held, 1010.0)
    assert (released["holderIdentity"], released["leaseDurationSeconds"]) == ("", 1)
    assert released["renewTime"] == released["acquireTime"] == micro_time(1010.0)
    assert released["leaseTransitions"] == 0
    taken = next_spec(released, "b", 15, 1011.0)
    assert (taken["holderIdentity"], taken["leaseTransitions"]) == ("b", 1)  # client-go: the holder changed
    assert next_spec(released, "a", 15, 1011.0)["leaseTransitions"] == 1  # even back to the one who released it


def test_election_timings_must_nest() -> None:
    ElectionConfig(lease_duration=15, renew_deadline=10, retry_period=2).check()
    with pytest.raises(ValueError, match="lease duration > renew deadline > retry period"):
        ElectionConfig(lease_duration=5, renew_deadline=10, retry_period=2).check()


# ---------------------------------------------------------------------------------------------- events


def test_events_are_kube_scheduler_shaped() -> None:
    obj = pod("p")
    scheduled = event_body(
        obj, "Scheduled", scheduled_message("default", "p", "n1"), "accelsched", now=0.0, hostname="host-1"
    )
    assert scheduled["note"] == "Successfully assigned default/p to n1"
    assert (scheduled["type"], scheduled["action"]) == ("Normal", "Binding")
    # One recorder per profile: the controller is the schedulerName, the instance <controller>-<hostname>.
    assert (scheduled["reportingController"], scheduled["reportingInstance"]) == ("accelsched", "accelsched-host-1")
    assert "related" not in scheduled
    assert scheduled["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "default",
        "name": "p",
        "uid": "uid-p",
        "resourceVersion": None,
    }
    failed = event_body(obj, "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.", "accelsched")
    assert (failed["type"], failed["action"]) == ("Warning", "Scheduling")
    preemptor = pod("q")
    preempted = event_body(obj, "Preempted", preempted_message("uid-q", "n1"), "accelsched", related=preemptor)
    assert (preempted["type"], preempted["action"]) == ("Normal", "Preempting")
    assert preempted["note"] == "Preempted by pod uid-q on node n1"
    assert (preempted["related"]["name"], preempted["related"]["uid"]) == ("q", "uid-q")
    (disruption,) = disruption_patch("accelsched", now=0.0)["status"]["conditions"]
    assert (disruption["reason"], disruption["message"]) == (
        "PreemptionByScheduler",
        "accelsched: preempting to accommodate a higher priority pod",
    )
    assert len(truncate("x" * 5000).encode()) == NOTE_LIMIT
    condition = unschedulable_patch("why", now=0.0)["status"]["conditions"][0]
    assert condition == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "why",
        "lastProbeTime": None,
        "lastTransitionTime": "1970-01-01T00:00:00Z",
    }


# ---------------------------------------------------------------------------------------------- the cache


@pytest.fixture
def live() -> LiveScheduler:
    """A scheduler that is never started: only its event routing is exercised (no server behind it)."""
    return LiveScheduler(Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))))


def test_pending_pods_of_other_schedulers_are_ignored(live: LiveScheduler) -> None:
    live._on_pod("ADDED", pod("mine"), None)
    live._on_pod("ADDED", pod("theirs", scheduler="default-scheduler"), None)
    assert list(live.new_pending) == ["default/mine"]


def test_scheduling_gated_pods_are_not_queued_until_their_gates_are_removed(live: LiveScheduler) -> None:
    gated = pod("g")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    live._on_pod("ADDED", gated, None)
    live._on_pod("MODIFIED", {**gated, "status": {"phase": "Pending"}}, gated)  # a status update: still gated
    assert live.new_pending == {} and list(live.gated) == ["default/g"]
    live._pending_gauge()
    assert live.metrics.registry.get_sample_value("scheduler_pending_pods", {"queue": "gated"}) == 1
    ungated = {**gated, "spec": {k: v for k, v in gated["spec"].items() if k != "schedulingGates"}}
    live._on_pod("MODIFIED", ungated, gated)
    assert list(live.new_pending) == ["default/g"] and live.gated == {}


def test_waiting_gang_members_count_as_gated_only(live: LiveScheduler) -> None:
    live.waiting = {"default/a": "pod group default/g has 1 of minMember 2 pods; waiting for the rest"}
    live.unschedulable = {"default/a": pod("a"), "default/b": pod("b")}
    live._pending_gauge()
    value = live.metrics.registry.get_sample_value
    assert value("scheduler_pending_pods", {"queue": "gated"}) == 1
    assert value("scheduler_pending_pods", {"queue": "unschedulable"}) == 1


def test_our_own_status_update_does_not_requeue_an_unschedulable_pod(live: LiveScheduler) -> None:
    obj = pod("p")
    live.unschedulable["default/p"] = obj
    updated = {**obj, "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}
    live._on_pod("MODIFIED", updated, obj)
    assert live.new_pending == {} and live.unschedulable["default/p"] is updated


def test_a_node_joining_wakes_unschedulable_pods_and_is_taken_in_place_next_round(live: LiveScheduler) -> None:
    live.dirty = False
    live.unschedulable["default/p"] = pod("p")
    live._on_node("ADDED", node("n2"), None)
    assert not live.dirty and "default/p" in live.backing_off and not live.unschedulable
    assert live._changed_nodes == {"n2": True}


def test_a_cluster_event_wakes_unschedulable_pods_and_marks_the_session_stale(live: LiveScheduler) -> None:
    live.dirty = False
    live.unschedulable["default/p"] = pod("p")
    live._on_other("ADDED", {"kind": "StorageClass", "metadata": {"name": "fast"}}, None)
    assert live.dirty and "default/p" in live.backing_off and not live.unschedulable


def test_node_heartbeats_are_not_cluster_events(live: LiveScheduler) -> None:
    old = node("n1")
    beat = {**old, "status": {**old["status"], "conditions": [{"type": "Ready", "lastHeartbeatTime": "t2"}]}}
    assert not node_changed(old, beat)
    more = {**old, "status": {**old["status"], "allocatable": {**old["status"]["allocatable"], ACCEL: "8"}}}
    assert node_changed(old, more)
    live.dirty = False
    live._on_node("MODIFIED", beat, old)
    assert not live.dirty


def test_our_confirmed_bind_needs_nothing_and_a_foreign_bind_is_applied_in_place(live: LiveScheduler) -> None:
    obj = pod("p")
    live.dirty = False
    live.assumed["default/p"] = Decision(live_convert.objects.parse_pod(obj), "n1", 0.0)
    live._on_pod("MODIFIED", {**obj, "spec": {**obj["spec"], "nodeName": "n1"}}, obj)
    assert not live.dirty and "default/p" not in live.assumed
    other = pod("q")
    live._on_pod("MODIFIED", {**other, "spec": {**other["spec"], "nodeName": "n1"}}, other)
    assert not live.dirty and list(live._changed_pods) == ["default/q"]  # applied in place next round


def test_a_pod_recreated_under_its_name_during_an_outage_is_a_new_pod_and_frees_the_old_reservation(
    live: LiveScheduler,
) -> None:
    """Our bind of web-0 went out, the watch died before its event came; meanwhile web-0 was deleted and
    recreated (new uid). The relist reports the old pod deleted and the new one added; the old decision is
    dropped, so the new pod is scheduled and the old reservation is not accounted."""
    old = pod("web-0")
    old["metadata"]["resourceVersion"] = "10"
    live.pods.store["default/web-0"] = old
    live.nodes.store["n1"] = node("n1")
    live.assumed["default/web-0"] = Decision(live_convert.objects.parse_pod(old), "n1", 0.0)
    new = pod("web-0")
    new["metadata"].update(uid="uid-NEW", resourceVersion="20")
    live.pods._replace([new])
    assert live.new_pending == {"default/web-0": new} and live.assumed == {}
    (shown,) = live._snapshot().pods
    assert shown["metadata"]["uid"] == "uid-NEW" and not shown["spec"].get("nodeName")
    assert [p.uid for p in live._pods_for({"default/web-0": new}, rebuilt=False)] == ["uid-NEW"]


def test_an_assumed_decision_is_used_only_for_the_pod_with_its_uid(live: LiveScheduler) -> None:
    old = pod("web-0")
    live.assumed["default/web-0"] = Decision(live_convert.objects.parse_pod(old), "n1", 0.0)
    new = pod("web-0")
    new["metadata"]["uid"] = "uid-NEW"
    live.pods.store["default/web-0"] = new  # the watch saw only the new pod (its DELETED event lost)
    (shown,) = live._snapshot().pods
    assert not shown["spec"].get("nodeName") and live.assumed == {}


def test_an_informer_that_loses_its_server_is_not_watching_until_it_relists() -> None:
    import threading

    from accelsched.live.informer import Informer

    informer = Informer(unreachable(), PODS, lambda *_: None, threading.RLock(), backoff=Backoff(0.01, 0.05))
    informer.synced.set()
    informer.watching.set()  # as if it had listed before the server went away
    informer.start()
    try:
        assert _eventually(lambda: not informer.watching.is_set())
        assert informer.synced.is_set()  # listed once; only the "current" state is lost
    finally:
        informer.stop()


def test_an_informer_stops_while_its_last_watch_has_ended_and_the_next_is_not_open() -> None:
    """CI: stop() came while the informer's last watch had ended (the API server killed) and its next request
    waited (a 429 retried, the throttle): urllib3 answers shutdown() of a response whose socket is gone with
    ValueError, which stop() raised."""
    import threading

    import urllib3

    from accelsched.live.informer import Informer

    informer = Informer(unreachable(), PODS, lambda *_: None, threading.RLock())
    ended = urllib3.response.HTTPResponse(body=b"")  # a response whose connection is gone
    with pytest.raises(ValueError):
        ended.shutdown()
    informer._opened(ended)
    informer.stop()  # no error
    assert informer._stop.is_set()


def test_nothing_is_decided_while_a_watch_is_down_and_a_lost_bind_answer_keeps_the_reservation(
    live: LiveScheduler,
) -> None:
    """The loop holds while any cache is not watching; a bind answered with a transport error may have been
    done, so the pod stays assumed (its room held) until the server answers a GET (here it never does)."""
    import threading

    live.nodes.store["n1"] = node("n1")
    live.pods.store["default/p"] = obj = pod("p")
    live.new_pending["default/p"] = obj
    for informer in live.informers:
        informer.synced.set()
        informer.watching.set()
    live.pods.watching.clear()  # the pods watch is down
    live._thread = threading.Thread(target=live._loop, daemon=True)
    live._thread.start()
    try:
        assert not live.watching
        assert not _eventually(lambda: live.assumed, timeout=0.5) and "default/p" in live.new_pending
        live.pods.watching.set()  # relisted
        assert _eventually(lambda: "default/p" in live.assumed)
        assert not _eventually(lambda: "default/p" not in live.assumed or live.backing_off, timeout=0.8)
        assert live.in_flight == {"uid-p"}
    finally:
        live.stop()


def unreachable() -> Kube:
    return Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9")), timeout=2.0)


def _eventually(condition, timeout: float = 5.0) -> bool:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def test_assumed_pods_are_accounted_as_bound_with_their_devices() -> None:
    obj = pod("p")
    decision = Decision(live_convert.objects.parse_pod(obj), "n1", 0.0, {"accelsched.io/devices": '{"x": ["a"]}'})
    bound = as_bound(obj, decision)
    assert bound["spec"]["nodeName"] == "n1" and bound["metadata"]["annotations"]["accelsched.io/devices"]
    assert "nodeName" not in obj["spec"]  # the cache's object is untouched


def test_query_names_and_paths() -> None:
    assert _camel({"field_selector": "a", "limit": 5}) == {"fieldSelector": "a", "limit": 5}
    assert PODS.path("ns", "p", "binding") == "/api/v1/namespaces/ns/pods/p/binding"
    assert PODS.path() == "/api/v1/pods"


# ---------------------------------------------------------------------------------------------- operability


def test_health_ready_and_metrics_endpoints() -> None:
    metrics = Metrics()
    state = {"ready": False}
    server = HealthServer(metrics, lambda: (state["ready"], "caches not synced"), port=0, host="127.0.0.1")
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert urllib.request.urlopen(f"{base}/healthz").read() == b"ok"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{base}/readyz")
        assert err.value.code == 503
        state["ready"] = True
        assert urllib.request.urlopen(f"{base}/readyz").status == 200
        metrics.schedule_attempts.labels("scheduled", "accelsched").inc(3)
        metrics.attempt_duration.labels("scheduled", "accelsched").observe(0.002)
        metrics.pending_pods.labels("unschedulable").set(2)
        text = urllib.request.urlopen(f"{base}/metrics").read().decode()
        assert 'scheduler_schedule_attempts_total{profile="accelsched",result="scheduled"} 3.0' in text
        assert 'scheduler_scheduling_attempt_duration_seconds_bucket{le="0.002",profile="accelsched"' in text
        assert 'scheduler_pending_pods{queue="unschedulable"} 2.0' in text
    finally:
        server.stop()


def test_healthz_fails_when_the_scheduling_loop_stalls_or_ends(live: LiveScheduler) -> None:
    import threading
    import time

    server = HealthServer(live.metrics, live.ready, port=0, host="127.0.0.1", healthy=live.healthy)
    server.start()
    release = threading.Event()
    live._thread = threading.Thread(target=release.wait, daemon=True)  # a loop stuck in one turn
    live._thread.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert urllib.request.urlopen(f"{base}/healthz").read() == b"ok"
        live._beat = time.monotonic() - 600
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{base}/healthz")
        assert err.value.code == 500 and b"stalled" in err.value.read()
        release.set()
        live._thread.join()
        assert live.healthy() == (False, "scheduling loop ended")
    finally:
        release.set()
        server.stop()


def test_logs_are_json_lines_with_the_extra_fields() -> None:
    record = logging.LogRecord("accelsched.live", logging.WARNING, "", 0, "binding not done", None, None)
    record.pod = "default/p"
    line = json.loads(JSONFormatter().format(record))
    assert line["level"] == "warning" and line["msg"] == "binding not done" and line["pod"] == "default/p"
    assert line["ts"].endswith("Z")


def test_the_shipped_scheduler_config_serves_accelsched_only() -> None:
    import yaml

    from accelsched.config import parse_config

    configmap = yaml.safe_load((ROOT / "deploy/scheduler/config.yaml").read_text())
    config = parse_config(yaml.safe_load(configmap["data"]["config.yaml"]), "deploy/scheduler/config.yaml")
    assert set(config.profiles) == {"accelsched"}
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (1.0, 10.0)


def test_preemption_live_binds_only_what_was_decided_before_the_first_preemptor(live: LiveScheduler) -> None:
    """Offline the engine evicts victims in memory and places the preemptor at once; live the victims still run
    until deleted, so the preemptor is nominated instead of bound, and later decisions (made on room that is
    still taken) go back to the queue."""

    def prio(doc: dict, value: int) -> dict:
        doc["spec"]["priority"] = value
        return doc

    objs = {
        "low": prio(pod("low", 2, node="n1"), 0),
        "early": prio(pod("early", 1), 200),
        "high": prio(pod("high", 2), 100),
        "later": prio(pod("later", 1), 0),
    }
    live.pods.store.update({f"default/{name}": obj for name, obj in objs.items()})
    live.session = None
    live._rebuild(live_convert.Snapshot(nodes=[node("n1", 2), node("n2", 2)], pods=list(objs.values())))
    results = live._run([p for p in live.session.inputs.pending])
    assert [(d.pod.name, d.node) for d in live._decided] == [("early", "n2"), ("high", "n1"), ("later", "n2")]
    bind, victims = live._preemption(results)
    assert [d.pod.name for d in bind] == ["early"] and victims == {"default/low"}
    assert "default/high" in live.unschedulable and "default/later" in live.new_pending and live.dirty
    live.stopped.set()
    live._pool.shutdown(wait=True)  # its eviction and nomination requests fail (no server): logged, not raised


def test_a_preemptor_is_not_tried_while_its_nominated_node_has_a_terminating_pod(live: LiveScheduler) -> None:
    victim = pod("low", 2, node="n1")
    victim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    preemptor = pod("high", 2)
    preemptor["status"] = {"nominatedNodeName": "n1"}
    for obj in (victim, preemptor):
        seen(live, "ADDED", obj)
    live._rebuild(live_convert.Snapshot(nodes=[node("n1", 2)], pods=[victim, preemptor]))
    assert live._pods_for({"default/high": preemptor}, rebuilt=True) == []
    assert "default/high" in live.unschedulable
    seen(live, "DELETED", victim)  # gone: tried again
    assert [p.name for p in live._pods_for({"default/high": preemptor}, rebuilt=True)] == ["high"]


def test_a_nominated_pod_holds_its_room_against_pods_of_lower_or_equal_priority(live: LiveScheduler) -> None:
    """kube-scheduler's RunFilterPluginsWithNominatedPods: the room a preemptor's victims freed is not taken by a
    pod of lower or equal priority arriving meanwhile (a preemption cascade); a higher-priority pod may."""

    def prio(doc: dict, value: int) -> dict:
        doc["spec"]["priority"] = value
        return doc

    high = prio(pod("high"), 1000)
    high["status"] = {"nominatedNodeName": "n1"}
    objs = {"high": high, "late": prio(pod("late"), 0), "peer": prio(pod("peer"), 1000), "top": prio(pod("top"), 2000)}
    for obj in objs.values():
        seen(live, "ADDED", obj)
    snapshot = live_convert.Snapshot(nodes=[node("n1", 1)], pods=list(objs.values()))

    def placed(*names: str) -> dict[str, str | None]:
        live._rebuild(snapshot)
        pods = [p for p in live.session.inputs.pending if p.name in names]
        results = live._run(pods, live._nominations())
        assert not live.session.cluster.pod_node.keys() - {f"default/{r.pod.name}" for r in results if r.scheduled}
        return {r.pod.name: r.node for r in results}

    assert placed("late") == {"late": None} and placed("peer") == {"peer": None}
    assert placed("top") == {"top": "n1"}  # higher than the nominated pod: not held back by it
    assert placed("high", "late") == {"high": "n1", "late": None}  # the preemptor takes its own room
    seen(live, "MODIFIED", {**high, "status": {}})
    assert placed("late") == {"late": "n1"}  # no nomination, nothing held


def seen(live: LiveScheduler, kind: str, obj: dict) -> None:
    """A watch event as the pods informer applies it: the store, then the handler."""
    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    with live.lock:
        old = live.pods.store.get(key)
        if kind == "DELETED":
            live.pods.store.pop(key, None)
        else:
            live.pods.store[key] = obj
        live._on_pod(kind, obj, old)


def test_run_with_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: x, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: x, user: u}}]\n"
    )
    config = tmp_path / "sched.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: accelsched\n  plugins: {filter: {enabled: [{name: Nope}]}}\n"
    )
    broken = tmp_path / "broken-kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    for args, where in (
        (["--kubeconfig", str(kubeconfig), "--config", str(config)], str(config)),
        (["--kubeconfig", str(broken)], str(broken)),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "accelsched.cli", "run", "--metrics-port", "0", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"accelsched: error: {where}: ")


@pytest.mark.parametrize(
    "text",
    ["garbage: [", "[]", "just a string", "apiVersion: v1\nclusters: 5\ncurrent-context: a\n", "{current-context: 7}"],
)
def test_a_malformed_kubeconfig_is_bad_input_naming_the_file(tmp_path: Path, text: str) -> None:
    from accelsched.errors import InputError
    from accelsched.live.kube import api_client

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(text)
    with pytest.raises(InputError) as refused:
        api_client(str(kubeconfig))
    line = str(refused.value)
    assert line.startswith(f"{kubeconfig}: cannot load cluster credentials: ") and "\n" not in line


def test_a_bound_pods_deletion_wakes_only_the_unschedulable_pods_it_may_help(live: LiveScheduler) -> None:
    """kube-scheduler's AssignedPodDelete hint: a pod that only node-object filters rejected stays; any other, or
    one whose rejection is not known for this very pod (another uid), is woken. A node event wakes them all."""
    inputs = live_convert.convert(live_convert.Snapshot(nodes=[node("n1")]), {"accelsched"}).inputs
    live.session = Session.start(inputs, live.config)
    keys = ("static", "fit", "unknown", "recreated")
    live.unschedulable = {f"default/{name}": pod(name) for name in keys}
    anywhere = live.signatures.of(live_convert.parse_pod(pod("any"), "test"))  # no selector, no tolerations
    live.rejected_by = {
        "default/static": ("uid-static", frozenset({"NodeAffinity", "TaintToleration"}), anywhere),
        "default/fit": ("uid-fit", frozenset({"NodeResourcesFit", "NodeAffinity"}), anywhere),
        "default/recreated": ("uid-an-earlier-pod", frozenset({"NodeAffinity"}), anywhere),
    }
    live._on_pod("DELETED", pod("gone", node="n1"), None)
    assert sorted(live.backing_off) == ["default/fit", "default/recreated", "default/unknown"]
    assert list(live.unschedulable) == ["default/static"]
    live._on_node("ADDED", node("n2"), None)
    assert not live.unschedulable and "default/static" in live.backing_off


def test_a_node_event_wakes_a_pod_only_node_filters_rejected_when_that_node_passes_them(live: LiveScheduler) -> None:
    """live.nodehint: a pod that a dedicated pool's selector and taint kept out is not woken by a plain node
    joining (kube-scheduler's TaintToleration hint alone would requeue it), nor by one leaving; it is by a pool
    node it tolerates, and by a relabelled node that now matches. A pod rejected by any other filter is woken."""
    inputs = live_convert.convert(live_convert.Snapshot(nodes=[node("n1")]), {"accelsched"}).inputs
    live.session = Session.start(inputs, live.config)
    pooled = pod("pooled")
    pooled["spec"]["nodeSelector"] = {"pool": "training"}
    tolerant = pod("tolerant")
    tolerant["spec"]["nodeSelector"] = {"pool": "training"}
    tolerant["spec"]["tolerations"] = [{"key": "pool", "operator": "Equal", "value": "training"}]
    fit = pod("fit")

    def reject(obj: dict, plugins: set[str]) -> None:
        key = f"default/{obj['metadata']['name']}"
        live.unschedulable[key] = obj
        parsed = live_convert.parse_pod(obj, "test")
        live.rejected_by[key] = (parsed.uid, frozenset(plugins), live.signatures.of(parsed))

    def woken_by(kind: str, obj: dict, old: dict | None = None) -> list[str]:
        live.backing_off.clear()
        for each, plugins in ((pooled, {"NodeAffinity", "TaintToleration"}), (tolerant, {"NodeAffinity"})):
            reject(each, plugins)
        reject(fit, {"NodeResourcesFit"})
        live._on_node(kind, obj, old)
        return sorted(key.split("/")[1] for key in live.backing_off)

    assert woken_by("ADDED", node("plain")) == ["fit"]
    assert woken_by("DELETED", node("n1"), node("n1")) == ["fit"]
    dedicated = node("pool-1")
    dedicated["metadata"]["labels"] = {"pool": "training"}
    dedicated["spec"] = {"taints": [{"key": "pool", "value": "training", "effect": "NoSchedule"}]}
    assert woken_by("ADDED", dedicated) == ["fit", "tolerant"]
    relabelled = node("n1")
    relabelled["metadata"]["labels"] = {"pool": "training"}
    assert woken_by("MODIFIED", relabelled, node("n1")) == ["fit", "pooled", "tolerant"]


class _EventSink:
    """The two calls the Recorder makes on a Kube, recorded (what an API server would have been sent)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def create(self, resource, body, namespace=None):
        self.calls.append(("create", body["note"]))
        return {"metadata": {"name": f"ev-{len(self.calls)}"}}

    def patch(self, resource, name, body, namespace=None, content_type=None):
        self.calls.append(("patch", body["series"]["count"]))
        return {}


def test_a_repeated_event_is_written_as_client_go_writes_its_series(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelsched.live import events as live_events

    clock = [1000.0]
    monkeypatch.setattr(live_events.time, "monotonic", lambda: clock[0])
    sink = _EventSink()
    recorder = live_events.Recorder(sink)  # type: ignore[arg-type]
    obj = pod("p")
    for _ in range(50):  # a Pending pod retried on every cluster event, a second apart
        recorder.event(obj, "FailedScheduling", "0/1 nodes are available.")
        clock[0] += 1.0
    # The Event, and its series' count once (the first repeat); the other 48 repeats are counted in memory only.
    assert sink.calls == [("create", "0/1 nodes are available."), ("patch", 2)]
    for _ in range(20):  # the series runs on, a retry every 100 s: its count is written after 30 minutes
        clock[0] += 100.0
        recorder.event(obj, "FailedScheduling", "0/1 nodes are available.")
    assert sink.calls[2:] == [("patch", 2 + 48 + 18)]  # the 18th retry is 1,800 s after the count 2 was written
    clock[0] += live_events.SERIES_WINDOW + 1  # it ended; its last count, then a new Event
    recorder.event(obj, "FailedScheduling", "0/1 nodes are available.")
    assert sink.calls[2:] == [("patch", 68), ("patch", 70), ("create", "0/1 nodes are available.")]
    recorder.event(obj, "FailedScheduling", "0/1 nodes are available.")
    recorder.event(obj, "FailedScheduling", "0/1 nodes are available.")
    clock[0] += live_events.SERIES_WINDOW + 61
    recorder.event(pod("q"), "FailedScheduling", "other")  # an ended series' last count is written (finishSeries)
    assert sink.calls[5:] == [("patch", 2), ("patch", 3), ("create", "other")]


def test_the_backoff_pool_is_looked_through_when_a_pod_enters_it_or_its_earliest_backoff_is_over(
    live: LiveScheduler,
) -> None:
    a, b, c = pod("a"), pod("b"), pod("c")
    uid = {key: f"uid-{key}" for key in ("a", "b", "c")}  # pod()'s uids
    live.backoff.failed(uid["a"], 100.0)  # one failure: 1 s, due at 101
    live.backoff.failed(uid["b"], 100.0)
    live.backoff.failed(uid["b"], 100.0)  # two: 2 s, due at 102
    live.backing_off.update({"default/a": a, "default/b": b})
    assert live._due_from_backoff(100.5) == {} and live._next_ready == 101.0
    live.backoff.failed(uid["b"], 100.0)  # its backoff grew without it entering: not looked at before 101
    assert live._due_from_backoff(100.9) == {}
    assert live._due_from_backoff(101.0) == {"default/a": a}
    del live.backing_off["default/a"]  # taken by the round
    live.backing_off["default/c"] = c  # never failed: due at once, though the earliest seen is at 104
    assert live._next_ready == 104.0 and live._next_wake() == 0.01
    assert live._due_from_backoff(101.5) == {"default/c": c}


class _Throttling:
    """A loopback HTTP server that answers 429 (with ``retry_after`` as Retry-After, if any) to its first
    ``refusals`` requests and the list after: the API server while a watch cache (re)initializes."""

    def __init__(self, refusals: int, retry_after: str | None = "0", status: int = 429) -> None:
        import http.server
        import threading

        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                refused = outer.requests <= refusals
                body = json.dumps(
                    {"kind": "Status", "code": status, "message": "storage is (re)initializing"}
                    if refused
                    else {"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": []}
                ).encode()
                self.send_response(status if refused else 200)
                if refused and retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        host = f"http://127.0.0.1:{self.server.server_address[1]}"
        configuration = k8s.Configuration(host=host)
        configuration.retries = False  # as api_client() configures it: urllib3 must not retry on its own
        self.kube = Kube(k8s.ApiClient(configuration), timeout=5.0)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    ("refusals", "retry_after", "status", "requests", "answer"),
    [
        (3, "0", 429, 4, 200),  # retried as client-go does, the list returned
        (10, "0", 429, 11, 200),  # client-go's ten retries
        (11, "0", 429, 11, 429),  # then the 429 is the caller's
        (2, None, 429, 1, 429),  # no Retry-After: not asked to come back
        (2, "soon", 429, 1, 429),  # not whole seconds: client-go does not wait on it either
        (2, "0", 500, 1, 500),  # a 5xx may have been acted on: the caller decides (a bind is confirmed by a GET)
    ],
)
def test_kube_retries_a_429_with_retry_after_like_client_go(
    refusals: int, retry_after: str | None, status: int, requests: int, answer: int
) -> None:
    """CI once failed on a list answered 429 "storage is (re)initializing" (a Workload watch cache re-initializing
    as Kueue started): client-go would have waited its Retry-After and asked again."""
    from accelsched.live.kube import ApiError

    server = _Throttling(refusals, retry_after, status)
    try:
        if answer == 200:
            assert server.kube.list(PODS, "default")["metadata"]["resourceVersion"] == "7"
        else:
            with pytest.raises(ApiError) as raised:
                server.kube.list(PODS, "default")
            assert raised.value.status == answer and "storage is (re)initializing" in raised.value.message
        assert server.requests == requests
    finally:
        server.close()


class _Clock:
    """time for live.kube's Throttle: monotonic() reads it, sleep() advances it and is recorded."""

    def __init__(self) -> None:
        self.now, self.slept = 100.0, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_the_client_throttle_is_client_gos_token_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full bucket of ``burst`` goes out at once; then one request per 1/qps seconds; tokens refill while idle,
    never past the burst."""
    from accelsched.live import kube as live_kube

    clock = _Clock()
    monkeypatch.setattr(live_kube, "time", clock)
    throttle = live_kube.Throttle(qps=10.0, burst=3)
    for _ in range(5):
        throttle.wait()
    assert clock.slept == [0.1, 0.1]
    clock.now += 60.0  # idle a minute: the bucket is full again, and no fuller
    clock.slept.clear()
    for _ in range(4):
        throttle.wait()
    assert clock.slept == [0.1]


def test_a_spare_token_is_taken_only_when_one_is_free_and_nobody_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Throttle.spare: a token free now is taken (0.0); else the wait until one is, none taken, so the requests
    waiting their turn keep theirs; ``Kube.request(spare=True)`` then raises Busy and sends nothing."""
    from accelsched.live import kube as live_kube

    clock = _Clock()
    monkeypatch.setattr(live_kube, "time", clock)
    throttle = live_kube.Throttle(qps=10.0, burst=2)
    assert throttle.spare() == 0.0 and throttle.spare() == 0.0
    assert throttle.spare() == pytest.approx(0.1)  # empty: not taken
    throttle.wait()  # a normal request takes the next token, waiting for it
    assert clock.slept == [pytest.approx(0.1)]
    clock.now += 0.05
    assert throttle.spare() == pytest.approx(0.05)  # the bucket is still behind
    clock.now += 0.05
    assert throttle.spare() == 0.0
    kube = live_kube.Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9")), qps=10.0, burst=1)
    path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads/w/status"
    kube.throttle(path).wait()
    with pytest.raises(live_kube.Busy):
        kube.request("PATCH", path, body={}, spare=True)


def test_live_mode_takes_the_configs_client_qps_and_burst_as_kube_scheduler_builds_its_clients(tmp_path: Path) -> None:
    """clientConnection's qps and burst (v1 defaults 50 and 100; 0 is unset), one throttle per API group version
    (a clientset's typed clients) and per kind of Kueue's (controller-runtime's clients): the informers and writes
    share theirs, events and leader election have their own; a negative qps turns it off, as in client-go."""
    from accelsched.live.leaderelection import ElectionConfig as Election

    config = tmp_path / "config.yaml"
    cases = (("", (50.0, 100)), ("{qps: 0, burst: 0}", (50.0, 100)), ("{qps: 5.5, burst: 7}", (5.5, 7)))
    pods, binding = "/api/v1/namespaces/a/pods", "/api/v1/namespaces/a/pods/p/binding"
    workloads = "/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads/w/status"
    cluster_queue = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/q/status"
    for connection, want in cases:
        config.write_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            + (f"clientConnection: {connection}\n" if connection else "")
            + "profiles: [{schedulerName: accelsched}]\n"
        )
        live = LiveScheduler(unreachable(), str(config), election=Election("l", "kube-system", "me", 15, 10, 2))
        clients = [live.kube, live.recorder.kube, live.elector.kube]  # type: ignore[union-attr]
        throttles = [c.throttle(pods) for c in clients]
        assert all(t is not None and (t.qps, t.burst) == want for t in throttles), connection
        assert len({id(t) for t in throttles}) == 3
        assert live.kube.throttle(binding) is throttles[0] and live.kube.throttle(workloads) is not throttles[0]
        # Kueue's kinds one each, as Kueue's controller-runtime clients: a Workload's status and a ClusterQueue's
        assert live.kube.throttle(workloads) is live.kube.throttle("/apis/kueue.x-k8s.io/v1beta2/workloads")
        assert live.kube.throttle(workloads) is not live.kube.throttle(cluster_queue)
        assert live.kube.throttle("/apis/resource.k8s.io/v1/resourceclaims") is live.kube.throttle(
            "/apis/resource.k8s.io/v1/namespaces/a/resourceclaims/c/status"
        ) is not live.kube.throttle(pods)
        assert all(i.kube is live.kube for i in live.informers)
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection: {qps: -1}\n"
    )
    assert LiveScheduler(unreachable(), str(config)).kube.throttle(pods) is None
