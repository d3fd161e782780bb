"""kube-scheduler's queue metrics (pending_pods, queue_incoming_pods_total, pod_scheduling_sli_duration_seconds) and
the /debug/state endpoint of ``accelsched run`` (accelsched/live/metrics.py, accelsched/live/debugstate.py).

Names, help and buckets are compared with tests/data/kube-scheduler-v1.36.3-queue-metrics.txt, recorded from the
real kube-scheduler v1.36.3's /metrics; the event labels below are the ones it printed there (UnschedulablePodAdd,
ScheduleAttemptFailure, UnschedulablePodUpdatePodSchedulingGatesEliminated, NodeUpdateNodeTaint); BackoffComplete,
UnschedulableTimeout and the AssignedPod* labels are written from framework/events.go (not in the recording).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from accelsched.live import debugstate
from accelsched.live import metrics as m
from accelsched.live.kube import Kube
from accelsched.live.metrics import DebugStateError, HealthServer, Metrics, QueueMetrics
from accelsched.live.scheduler import LiveScheduler

RECORDED = Path(__file__).resolve().parent / "data" / "kube-scheduler-v1.36.3-queue-metrics.txt"
ACCEL = "qualcomm.com/ai-accelerator"
MIRRORED = (
    "scheduler_pending_pods",
    "scheduler_queue_incoming_pods_total",
    "scheduler_pod_scheduling_sli_duration_seconds",
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds",
)


def _headers(text: str) -> dict[str, str]:
    """metric name -> its '# HELP' and '# TYPE' lines."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"# (HELP|TYPE) (\S+) (.*)", line)
        if match:
            out[match[2]] = out.get(match[2], "") + f"{match[1]} {match[3]}\n"
    return out


def _bounds(text: str, name: str) -> list[str]:
    """The ``le`` bounds of the first series of histogram ``name``."""
    bounds: list[str] = []
    for line in text.splitlines():
        match = re.match(rf'{name}_bucket\{{.*\ble="([^"]+)"', line)
        if match:
            if match[1] in bounds:
                break
            bounds.append(match[1])
    return bounds


def _value(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_help_type_and_buckets_are_kube_schedulers() -> None:
    recorded = RECORDED.read_text()
    metrics = Metrics()
    metrics.queue.moved("u", m.ACTIVE, m.POD_ADD)
    metrics.queue.attempted(["u"])
    metrics.queue.scheduled("u")
    metrics.pending_pods.labels(m.ACTIVE).set(0)
    metrics.schedule_attempts.labels("scheduled", "accelsched").inc()
    metrics.attempt_duration.labels("scheduled", "accelsched").observe(0.01)
    ours = metrics.render().decode()
    theirs_h, ours_h = _headers(recorded), _headers(ours)
    for name in MIRRORED:
        assert ours_h[name] == theirs_h[name], name
    for name in ("scheduler_pod_scheduling_sli_duration_seconds", "scheduler_scheduling_attempt_duration_seconds"):
        assert _bounds(ours, name) == _bounds(recorded, name) and _bounds(ours, name), name
    assert len(_bounds(ours, "scheduler_pod_scheduling_sli_duration_seconds")) == 21  # 20 and +Inf
    # The queue label values kube-scheduler uses for pending_pods.
    queues = {
        s.labels["queue"]
        for f in text_string_to_metric_families(recorded)
        for s in f.samples
        if f.name == "scheduler_pending_pods"
    }
    assert queues == {m.ACTIVE, m.BACKOFF, m.UNSCHEDULABLE, m.GATED}


def test_recorded_event_labels_are_the_ones_we_emit() -> None:
    recorded = {
        s.labels["event"]
        for f in text_string_to_metric_families(RECORDED.read_text())
        for s in f.samples
        if f.name == "scheduler_queue_incoming_pods"
    }
    assert {m.POD_ADD, m.ATTEMPT_FAILURE, m.GATES_ELIMINATED} <= recorded
    assert m.node_event("MODIFIED", _node(), _node(taints=[{"key": "k", "effect": "NoSchedule"}])) in recorded


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_queue_moves_are_counted_by_queue_and_event_and_the_sli_spans_every_attempt() -> None:
    metrics, clock = Metrics(), Clock()
    q = metrics.queue = QueueMetrics(metrics, clock)
    q.moved("a", m.ACTIVE, m.POD_ADD)
    clock.now += 1.0
    q.attempted(["a", "a-victim-not-queued"])
    q.failed("a", m.UNSCHEDULABLE, "0/1 nodes are available: 1 Insufficient cpu.")
    assert q.info("a").last_failure.startswith("0/1 nodes")
    q.woken("a", "NodeAdd", backoff_done=False)  # still backing off: to backoffQ
    q.due("a")  # its backoff over: BackoffComplete into activeQ
    clock.now += 2.5
    q.attempted(["a"])
    q.scheduled("a")
    assert _value(metrics, "scheduler_queue_incoming_pods_total", queue="active", event=m.POD_ADD) == 1
    assert _value(metrics, "scheduler_queue_incoming_pods_total", queue="unschedulable", event=m.ATTEMPT_FAILURE) == 1
    assert _value(metrics, "scheduler_queue_incoming_pods_total", queue="backoff", event="NodeAdd") == 1
    assert _value(metrics, "scheduler_queue_incoming_pods_total", queue="active", event=m.BACKOFF_COMPLETE) == 1
    sli = "scheduler_pod_scheduling_sli_duration_seconds"
    assert _value(metrics, f"{sli}_count", attempts="2") == 1
    assert _value(metrics, f"{sli}_sum", attempts="2") == pytest.approx(3.5)  # from first queued, not last attempt
    assert _value(metrics, f"{sli}_bucket", attempts="2", le="2.56") == 0
    assert _value(metrics, f"{sli}_bucket", attempts="2", le="5.12") == 1
    assert q.pods == {}  # bound: forgotten


def test_a_backoff_already_over_moves_to_active_and_attempts_cap_at_15_plus() -> None:
    metrics, clock = Metrics(), Clock()
    q = metrics.queue = QueueMetrics(metrics, clock)
    q.moved("b", m.ACTIVE, m.POD_ADD)
    for _ in range(16):
        q.attempted(["b"])
    q.woken("b", m.UNSCHEDULABLE_TIMEOUT, backoff_done=True)
    q.due("b")  # came straight to activeQ: no BackoffComplete
    q.scheduled("b")
    assert _value(metrics, "scheduler_queue_incoming_pods_total", queue="active", event=m.UNSCHEDULABLE_TIMEOUT) == 1
    assert _value(metrics, "scheduler_queue_incoming_pods_total", queue="active", event=m.BACKOFF_COMPLETE) == 0
    assert _value(metrics, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="15+") == 1
    assert m.attempts_label(14) == "14" and m.attempts_label(15) == "15+"


def test_a_gated_pod_is_not_timed_until_its_gates_are_removed() -> None:
    metrics, clock = Metrics(), Clock()
    q = metrics.queue = QueueMetrics(metrics, clock)
    q.moved("g", m.UNSCHEDULABLE, m.POD_ADD)
    clock.now += 60
    q.moved("g", m.ACTIVE, m.GATES_ELIMINATED)
    clock.now += 1
    q.attempted(["g"])
    q.scheduled("g")
    assert _value(metrics, "scheduler_pod_scheduling_sli_duration_seconds_sum", attempts="1") == pytest.approx(1.0)
    q.moved("gone", m.ACTIVE, m.POD_ADD)
    q.forget("gone")
    assert q.pods == {}


def _node(**spec: object) -> dict:
    return {
        "metadata": {"name": "n", "labels": {"a": "1"}},
        "spec": dict(spec),
        "status": {"allocatable": {"cpu": "1"}},
    }


def test_event_labels_follow_cluster_event_label() -> None:
    assert m.node_event("ADDED", None, _node()) == "NodeAdd"
    assert m.node_event("DELETED", None, _node()) == "NodeDelete"
    assert m.node_event("MODIFIED", _node(), _node(unschedulable=True)) == "NodeUpdateNodeTaint"
    relabelled = _node()
    relabelled["metadata"]["labels"] = {"a": "2"}
    assert m.node_event("MODIFIED", _node(), relabelled) == "NodeUpdateNodeLabel"
    assert (
        m.resource_event("ADDED", {"apiVersion": "v1", "kind": "PersistentVolumeClaim"}) == "PersistentVolumeClaimAdd"
    )
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup"}
    assert m.resource_event("MODIFIED", group) == "scheduling.x-k8s.io/PodGroupUpdate"
    assert m.resource_event("DELETED", {"metadata": {"name": "listed"}}) == "*Delete"
    bound = {"spec": {"nodeName": "n"}}
    assert m.pod_event("DELETED", bound, None) == m.ASSIGNED_POD_DELETE
    assert m.pod_event("MODIFIED", bound, {"spec": {}}) == m.ASSIGNED_POD_ADD
    assert m.pod_event("MODIFIED", bound, bound) == m.ASSIGNED_POD_UPDATE
    assert m.pod_event("ADDED", {"spec": {}}, None) == m.POD_ADD


# ---------------------------------------------------------------------------------------------- /debug/state


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture
def server():
    calls: list[dict] = []

    def state(params: dict[str, list[str]]) -> dict:
        calls.append(params)
        name = debugstate.parse_query(params)
        if name == "missing":
            raise DebugStateError(404, "node 'missing' not found\nsecond line never shown")
        return {"node": name}

    health = HealthServer(Metrics(), lambda: (True, "ok"), port=0, host="127.0.0.1", debug_state=state)
    health.start()
    yield health, calls
    health.stop()


def test_debug_state_answers_json_and_one_line_errors(server) -> None:
    health, calls = server
    assert _get(health.port, "/debug/state?node=n1") == (200, '{\n "node": "n1"\n}\n')
    assert _get(health.port, "/debug/state")[0] == 200
    assert _get(health.port, "/debug/state?node=missing") == (404, "node 'missing' not found\n")
    status, body = _get(health.port, "/debug/state?nod=n1")
    assert status == 400 and body == "unknown query parameter 'nod' (known: node)\n"
    assert _get(health.port, "/debug/state?node=a&node=b") == (400, "node: give one node name\n")
    assert _get(health.port, "/debug/state?node=") == (400, "node: empty name\n")
    status, body = _get(health.port, "/debug/state?node")  # no '=': a malformed query string
    assert status == 400 and body.startswith("bad query: ") and body.count("\n") == 1
    assert _get(health.port, "/debug/stat")[0] == 404
    assert _get(health.port, "/metrics")[0] == 200
    assert len(calls) == 6


def test_debug_state_is_for_loopback_clients_unless_opened() -> None:
    assert m._loopback("127.0.0.1") and m._loopback("::1") and m._loopback("127.5.0.1")
    assert not m._loopback("10.0.0.7") and not m._loopback("192.168.1.2") and not m._loopback("not-an-ip")


# ------------------------------------------------------------------------------- a scheduler's state, not started


def _pod(name: str, accel: int, node: str = "", devices: str = "") -> dict:
    spec: dict = {
        "schedulerName": "accelsched",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m", ACCEL: str(accel)}}}],
    }
    if node:
        spec["nodeName"] = node
    meta: dict = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if devices:
        meta["annotations"] = {"accelsched.io/devices": json.dumps({ACCEL: devices.split(",")})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def test_node_row_and_queue_from_a_live_schedulers_session() -> None:
    live = LiveScheduler(Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))))
    try:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"}]},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110", ACCEL: "4"}},
        }
        live.nodes.store["n1"] = node
        bound = _pod("running", 1, node="n1", devices=f"{ACCEL.rsplit('/', 1)[-1]}-2")
        live.pods.store["default/running"] = bound
        waiting = _pod("big", 8)
        live.pods.store["default/big"] = waiting
        live._on_node("ADDED", node, None)
        live._on_pod("ADDED", bound, None)
        live._on_pod("ADDED", waiting, None)
        with pytest.raises(DebugStateError) as no_session:
            debugstate.state(live, {})
        assert no_session.value.status == 503
        live.sync_session()
        body = debugstate.state(live, {"node": ["n1"]})
        row = body["node"]
        assert row["allocatable"] == {"cpu": "8", "memory": "16Gi", "pods": "110", ACCEL: "4"}
        assert row["requested"] == {"cpu": "1500m", "pods": "1", ACCEL: "1"}
        assert row["nonzeroRequested"]["cpu"] == "1500m"
        assert row["free"]["cpu"] == "6500m"
        assert row["labels"]["zone"] == "a" and row["labels"]["kubernetes.io/hostname"] == "n1"
        assert row["taints"] == [{"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"}]
        assert row["devices"][ACCEL]["held"] == {"ai-accelerator-2": "default/running"}
        assert "ai-accelerator-2" not in row["devices"][ACCEL]["free"] and len(row["devices"][ACCEL]["free"]) == 3
        assert [p["pod"] for p in row["pods"]] == ["default/running"]
        assert [p["pod"] for p in body["queue"]["active"]] == ["default/big"]
        with pytest.raises(DebugStateError) as unknown:
            debugstate.state(live, {"node": ["n9"]})
        assert unknown.value.status == 404
        assert _value(live.metrics, "scheduler_queue_incoming_pods_total", queue="active", event=m.POD_ADD) == 1
        # One round: the pod that cannot fit is tried once and waits as unschedulable with kube-scheduler's message
        # (its event and condition go to a server that is not there: written by the pool, errors only logged).
        live.schedule_pending()
        queue = debugstate.state(live, {})["queue"]
        assert queue["active"] == [] and [p["pod"] for p in queue["unschedulable"]] == ["default/big"]
        entry = queue["unschedulable"][0]
        assert entry["attempts"] == 1
        assert entry["lastFailure"].startswith(f"0/1 nodes are available: 1 Insufficient {ACCEL}.")  # the FitError
        incoming = "scheduler_queue_incoming_pods_total"
        assert _value(live.metrics, incoming, queue="unschedulable", event=m.ATTEMPT_FAILURE) == 1
        live._on_node("MODIFIED", node, {**node, "metadata": {"name": "n1", "labels": {"zone": "b"}}})
        assert _value(live.metrics, incoming, queue="backoff", event="NodeUpdateNodeLabel") == 1
        assert [p["pod"] for p in debugstate.state(live, {})["queue"]["backoff"]] == ["default/big"]
    finally:
        live.stop()


def test_unschedulable_pods_counts_each_rejecting_plugin_until_the_pod_is_popped_bound_or_deleted() -> None:
    """scheduler_unschedulable_pods as kube-scheduler's queue keeps it: +1 per rejecting plugin at the failure,
    -1 when the pod is popped for its next attempt, bound, or leaves the queue."""
    metrics = Metrics()
    q = metrics.queue

    def gauge(plugin: str) -> float:
        return _value(metrics, "scheduler_unschedulable_pods", plugin=plugin, profile="accelsched")

    for uid in ("a", "b"):
        q.moved(uid, m.ACTIVE, m.POD_ADD)
        q.attempted([uid])
    fit_and_taint = frozenset({"NodeResourcesFit", "TaintToleration"})
    q.failed("a", m.UNSCHEDULABLE, "0/2 nodes are available: ...", fit_and_taint, "accelsched")
    q.failed("b", m.UNSCHEDULABLE, "0/2 nodes are available: ...", frozenset({"NodeResourcesFit"}), "accelsched")
    assert (gauge("NodeResourcesFit"), gauge("TaintToleration")) == (2, 1)
    q.attempted(["a"])  # popped for another attempt
    assert (gauge("NodeResourcesFit"), gauge("TaintToleration")) == (1, 0)
    q.failed("a", m.UNSCHEDULABLE, "again", frozenset({"TaintToleration"}), "accelsched")
    q.failed("a", m.BACKOFF, "a failed binding: no plugin", frozenset(), "accelsched")  # replaces, never adds
    assert (gauge("NodeResourcesFit"), gauge("TaintToleration")) == (1, 0)
    q.failed("a", m.UNSCHEDULABLE, "again", frozenset({"TaintToleration"}), "accelsched")
    q.forget("a")  # deleted
    q.scheduled("b")  # bound
    assert (gauge("NodeResourcesFit"), gauge("TaintToleration")) == (0, 0)
