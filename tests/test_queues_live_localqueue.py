"""Admission fair sharing in live mode, without an API server: the usage kept across rounds and sessions and decayed
on the door's clock (a fake one here: no sleeping), and the LocalQueue status Kueue's LocalQueue controller writes
(live/localqueuestatus.py). The cohort history of accelsched's fairness over time (queues/cohortusage.py) is kept
and decayed the same way."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import pytest
from kubernetes import client as k8s
from test_crds import _strict
from test_fabric_crd import kueue_crd_versions

from accelsched.live import kueue as live_kueue
from accelsched.live import localqueuestatus
from accelsched.live.kube import Kube
from accelsched.live.scheduler import LiveScheduler
from accelsched.queues import cohortusage

T0 = 1767261600.0  # 2026-01-01T10:00:00Z
HOUR = 3600.0
CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
admissionFairSharing:
  usageHalfLifeTime: 1h
  usageSamplingInterval: 5m
  resourceWeights: {cpu: 0}
"""


def _objects(local_queue_status: dict[str, dict[str, str]]) -> dict[str, list[dict[str, Any]]]:
    """One 8-GPU ClusterQueue with admission fair sharing, team-a's and team-b's LocalQueues on it (``main``),
    each with the consumed resources given in its status (none when not given)."""

    def meta(name: str, namespace: str | None = None) -> dict[str, Any]:
        return {"name": name, **({"namespace": namespace} if namespace else {}), "resourceVersion": "1"}

    def local_queue(namespace: str) -> dict[str, Any]:
        doc = {"kind": "LocalQueue", "metadata": meta("main", namespace), "spec": {"clusterQueue": "research"}}
        if namespace in local_queue_status:
            afs = {"consumedResources": local_queue_status[namespace], "lastUpdate": "2026-01-01T09:00:00Z"}
            doc["status"] = {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": afs}}
        return doc

    quota = [{"name": "cpu", "nominalQuota": 64}, {"name": "nvidia.com/gpu", "nominalQuota": 8}]
    cluster_queue = {
        "kind": "ClusterQueue",
        "metadata": meta("research"),
        "spec": {
            "namespaceSelector": {},
            "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
            "resourceGroups": [
                {"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": "a100", "resources": quota}]}
            ],
        },
    }
    config = {
        "kind": "ConfigMap",
        "metadata": meta(live_kueue.CONFIG_MAP, live_kueue.CONFIG_NAMESPACE),
        "data": {live_kueue.CONFIG_KEY: CONFIG},
    }
    return {
        "ResourceFlavor": [{"kind": "ResourceFlavor", "metadata": meta("a100"), "spec": {}}],
        "ClusterQueue": [cluster_queue],
        "LocalQueue": [local_queue("team-a"), local_queue("team-b")],
        live_kueue.CONFIG: [config],
    }


def _workload(name: str, namespace: str, created: str, admitted: bool = False) -> dict[str, Any]:
    """Four pods of 1 cpu and 2 GPUs: the whole ClusterQueue's 8 GPUs."""
    container = {"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}}
    template = {"spec": {"schedulerName": "accelsched", "containers": [container]}}
    doc: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "generation": 1,
            "resourceVersion": "7",
            "uid": f"u-{name}",
            "creationTimestamp": created,
        },
        "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 4, "template": template}]},
    }
    if admitted:
        assignment = {"name": "main", "flavors": {"cpu": "a100", "nvidia.com/gpu": "a100"}, "count": 4}
        reserved = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "m"}
        doc["status"] = {
            "admission": {"clusterQueue": "research", "podSetAssignments": [assignment]},
            "conditions": [reserved],
        }
    return doc


def _node() -> dict[str, Any]:
    allocatable = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}
    labels = {"kubernetes.io/hostname": "gpu-node-1"}
    return {
        "kind": "Node",
        "metadata": {"name": "gpu-node-1", "labels": labels},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def live_of() -> Iterator[Callable[..., tuple[LiveScheduler, list]]]:
    """``_live``, each scheduler made stopped when the test ends (its writes are done at once: nothing waits)."""
    made: list[LiveScheduler] = []

    def make(objects: dict[str, list[dict[str, Any]]], workloads: list[dict[str, Any]]) -> tuple[LiveScheduler, list]:
        live, sent = _live(objects, workloads)
        made.append(live)
        return live, sent

    yield make
    for live in made:
        live.stopped.set()
        live._pool.shutdown(wait=True)
        live._report_pool.shutdown(wait=True)


def _live(objects: dict[str, list[dict[str, Any]]], workloads: list[dict[str, Any]]) -> tuple[LiveScheduler, list]:
    """A never-started scheduler whose caches hold ``objects`` and ``workloads``, its writes done at once and
    recorded (path, body), its admission fair sharing clock a fake one at T0."""
    live = LiveScheduler(Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))))
    live.afs_clock = _Clock()
    sent: list[tuple[str, Any]] = []
    live.kube.request = lambda method, path, body=None, **_: sent.append((path, body))  # type: ignore[method-assign]
    live._submit_latest = lambda key, fn, *args, **_lane: fn(*args)  # type: ignore[method-assign]
    live.nodes.store["gpu-node-1"] = _node()
    for ns in ("team-a", "team-b"):
        live.namespaces.store[ns] = {"kind": "Namespace", "metadata": {"name": ns, "labels": {}}}
    for kind, items in {**objects, "Workload": workloads}.items():
        for doc in items:
            meta = doc["metadata"]
            live.kueue[kind].store[f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]] = doc
    return live, sent


def _local_queue_writes(sent: list) -> dict[str, Any]:
    """The LocalQueue status patches sent, by namespace, the last of each."""
    out = {}
    for path, body in sent:
        if "/localqueues/" in path:
            out[path.split("/namespaces/")[1].split("/")[0]] = body["status"]["fairSharing"]
    return out


def _finish(live: LiveScheduler, key: str) -> None:
    """The Workload ``key`` turns Finished=True (Kueue's runner, or the job's end), as the informer hands it over."""
    old = live.kueue["Workload"].store[key]
    done = copy.deepcopy(old)
    done["metadata"]["resourceVersion"] = "8"
    finished = {"type": "Finished", "status": "True", "reason": "ByTest", "message": "done"}
    done["status"]["conditions"].append(finished)
    live.kueue["Workload"].store[key] = done
    live._on_workload("MODIFIED", done, old)


@pytest.mark.parametrize(("elapsed", "first"), [(0.0, "b-next"), (2 * HOUR, "a-next")])
def test_usage_decays_on_the_clock_between_rounds_and_changes_which_local_queue_goes_first(
    live_of: Any, elapsed: float, first: str
) -> None:
    # team-a used 10 GPUs recently (its status); team-b none, but it runs 8 now. Both wait for the whole queue,
    # team-a's earlier (Kueue's classic order would take it). At once, team-b's usage (0) is the lower: its
    # workload goes first. Two half-lives later team-a's has decayed to 2.5 and team-b's grown to 6 (toward what
    # it runs): team-a's goes first. A door that did not decay between rounds would admit team-b's both times.
    objects = _objects({"team-a": {"nvidia.com/gpu": "10"}})
    running = _workload("b-running", "team-b", "2026-01-01T08:00:00Z", admitted=True)
    a_next = _workload("a-next", "team-a", "2026-01-01T09:00:00Z")
    b_next = _workload("b-next", "team-b", "2026-01-01T09:30:00Z")
    live, sent = live_of(objects, [running, a_next, b_next])
    assert live.sync_session()  # the first session: both wait for b-running's quota
    admission = live._open
    assert admission is not None and not any(o.admitted for o in admission.outcomes if "next" in o.info.name)
    # The LocalQueue controller's first reconcile: each queue's status as seeded, at the clock's time.
    assert _local_queue_writes(sent) == {
        "team-a": {
            "weightedShare": 0,
            "admissionFairSharingStatus": {
                "consumedResources": {"nvidia.com/gpu": "10"},
                "lastUpdate": "2026-01-01T10:00:00Z",
            },
        },
        "team-b": {
            "weightedShare": 0,
            "admissionFairSharingStatus": {"consumedResources": {}, "lastUpdate": "2026-01-01T10:00:00Z"},
        },
    }
    sent.clear()
    live.afs_clock.now = T0 + elapsed  # type: ignore[attr-defined]
    _finish(live, "team-b/b-running")
    assert not live.sync_session()  # followed in place: the same open admission, its ledger moved on
    assert live._open is admission
    admitted = sorted(o.info.name for o in admission.outcomes if o.admitted)
    assert admitted == [first]
    written = _local_queue_writes(sent)
    if not elapsed:
        assert written == {}  # no sample due: Kueue's controller writes every usageSamplingInterval
        return
    # 24 samples of 5 minutes, composed: 10 x 0.25 and 8 x 0.75 GPUs (cpu 4 x 0.75), at the last sample's time
    assert written["team-a"]["admissionFairSharingStatus"] == {
        "consumedResources": {"nvidia.com/gpu": "2500m"},
        "lastUpdate": "2026-01-01T12:00:00Z",
    }
    assert written["team-b"]["admissionFairSharingStatus"]["consumedResources"] == {
        "cpu": "3",
        "nvidia.com/gpu": "6",
    }


def test_the_usage_outlives_a_rebuilt_session_as_kueues_ledger_outlives_its_cycles(live_of: Any) -> None:
    # An admission's entry penalty is settled into its LocalQueue's consumed resources; a rebuild (any cluster
    # event) must go on from there, not seed again from a status written before it.
    objects = _objects({"team-a": {"nvidia.com/gpu": "1"}})
    live, sent = live_of(objects, [_workload("a-next", "team-a", "2026-01-01T09:00:00Z")])
    live.sync_session()
    (admitted,) = [body for path, body in sent if "/workloads/" in path]  # the API server takes the write
    store = live.kueue["Workload"].store
    store["team-a/a-next"] = _merged(store["team-a/a-next"], {"status": admitted["status"]})
    ledger = live._afs_ledger
    assert ledger is not None and live._open is not None and live._open.afs is ledger
    after_admission = dict(ledger.entries["team-a/main"].consumed)
    penalty = 8 * (1 - 0.5 ** (300 / 3600))  # alpha(usageSamplingInterval) x the workload's 8 GPUs
    assert after_admission["nvidia.com/gpu"] == pytest.approx(1 + penalty)
    live.afs_clock.now = T0 + 60  # type: ignore[attr-defined]
    live._invalidate("a node changed")
    assert live.sync_session()  # rebuilt: a new admission, the same ledger
    assert live._open is not None and live._open.afs is ledger and live._afs_ledger is ledger
    assert ledger.entries["team-a/main"].consumed == after_admission
    # A LocalQueue deleted loses its entry (its controller's Delete); its seed is read again if it comes back.
    del live.kueue["LocalQueue"].store["team-a/main"]
    live._invalidate("a LocalQueue deleted")
    live.sync_session()
    assert "team-a/main" not in ledger.entries


FAIR_SHARING = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
"""


def _cohort_objects() -> dict[str, list[dict[str, Any]]]:
    """Kueue's fair sharing on; team-a's and team-b's ClusterQueues (no quota of their own) share the 8 GPUs of the
    Cohort pool, whose history has a half-life of an hour; each team's LocalQueue ``main`` points at its own."""
    objects = _objects({})
    (config,) = objects[live_kueue.CONFIG]
    config["data"] = {live_kueue.CONFIG_KEY: FAIR_SHARING}
    (cluster_queue,) = objects["ClusterQueue"]
    (group,) = cluster_queue["spec"]["resourceGroups"]
    quota = group["flavors"][0]["resources"]
    pool = {"name": "pool", "resourceVersion": "1", "annotations": {cohortusage.ANNOTATION: "1h"}}
    cohort = {"kind": "Cohort", "metadata": pool, "spec": {"resourceGroups": [copy.deepcopy(group)]}}
    queues = []
    for team in ("team-a", "team-b"):
        cq = copy.deepcopy(cluster_queue)
        cq["metadata"]["name"] = team
        del cq["spec"]["admissionScope"]
        cq["spec"]["cohortName"] = "pool"
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] = [{**r, "nominalQuota": 0} for r in quota]
        queues.append(cq)
    for local_queue in objects["LocalQueue"]:
        local_queue["spec"]["clusterQueue"] = local_queue["metadata"]["namespace"]
    return {**objects, "Cohort": [cohort], "ClusterQueue": queues}


@pytest.mark.parametrize(("idle", "first"), [(0.0, "b-next"), (10 * HOUR, "a-next")])
def test_the_cohort_history_outlives_a_rebuilt_session_and_decays_on_the_clock(
    live_of: Any, idle: float, first: str
) -> None:
    # team-a runs the whole cohort for an hour (its first session); then it finishes and, ``idle`` later, a workload
    # of each team waits for the 8 GPUs, in a session rebuilt from the cache. Kueue's tournament sees two equal
    # shares and goes by creation (team-a's); the history kept from the earlier sessions adds team-a's decayed hour
    # (4 GPUs of 8 at once): team-b's goes first. Ten half-lives later it has decayed to nothing: team-a's goes.
    # A door that started each session from an empty history would admit team-a's both times.
    running = _workload("a-running", "team-a", "2026-01-01T08:00:00Z", admitted=True)
    running["status"]["admission"]["clusterQueue"] = "team-a"
    live, _ = live_of(_cohort_objects(), [running])
    assert live.sync_session()
    history = live._cohort_history
    assert history is not None and live._open is not None and live._open.cohort_history is history
    assert history.now == T0 and set(history.half_life) == {"team-a", "team-b"}
    live.afs_clock.now = T0 + HOUR  # type: ignore[attr-defined]
    _finish(live, "team-a/a-running")
    live._invalidate("a node changed")
    assert live.sync_session()  # a new session, the same history: team-a's hour at 8 GPUs, one half-life
    assert live._open is not None and live._open.cohort_history is history
    assert history.usage(history.tree.cluster_queues["team-a"])[("a100", "nvidia.com/gpu")] == 4
    live.afs_clock.now = T0 + HOUR + idle  # type: ignore[attr-defined]
    store = live.kueue["Workload"].store
    store["team-a/a-next"] = _workload("a-next", "team-a", "2026-01-01T09:00:00Z")
    store["team-b/b-next"] = _workload("b-next", "team-b", "2026-01-01T09:30:00Z")
    live._invalidate("Workloads added")
    assert live.sync_session()
    admission = live._open
    assert admission is not None and admission.cohort_history is history
    assert [o.info.name for o in admission.outcomes if o.admitted] == [first]


def test_the_cohort_history_drops_a_cluster_queue_that_left_the_annotated_tree(live_of: Any) -> None:
    running = _workload("a-running", "team-a", "2026-01-01T08:00:00Z", admitted=True)
    running["status"]["admission"]["clusterQueue"] = "team-a"
    live, _ = live_of(_cohort_objects(), [running])
    live.sync_session()
    history = live._cohort_history
    live.afs_clock.now = T0 + HOUR  # type: ignore[attr-defined]
    live._invalidate("a node changed")
    live.sync_session()
    assert history is not None and set(history.decayed) == {"team-a", "team-b"}
    assert history.decayed["team-a"]
    team_b = live.kueue["ClusterQueue"].store["team-b"]
    team_b["spec"] = {k: v for k, v in team_b["spec"].items() if k != "cohortName"}  # out of the pool
    live._invalidate("a ClusterQueue changed")
    live.sync_session()
    assert live._cohort_history is history and set(history.decayed) == {"team-a"}
    del live.kueue["Cohort"].store["pool"]  # no Cohort asks for a history: none is kept
    live._invalidate("a Cohort deleted")
    live.sync_session()
    assert live._cohort_history is None


def test_the_status_has_kueues_field_names_quantity_formats_and_time_format() -> None:
    doc = {"metadata": {"name": "main", "namespace": "team-a"}}
    consumed = {"cpu": 1.5, "memory": 34359738368.0, "nvidia.com/gpu": 2 * 0.00034376390587387284, "example.com/x": 0.0}
    patch = localqueuestatus.status_patch(doc, consumed, T0 + 0.9)
    # Kueue's LocalQueueFairSharingStatus (weightedShare required beside it by the CRD) and
    # LocalQueueAdmissionFairSharingStatus; resource.MulByFloat's DecimalSI at nano precision, rounded down
    # (Kueue's TestMulByFloat: 2 x 0.00034376390587387284 is 687527n); metav1.Time in whole seconds.
    assert patch == {
        "status": {
            "fairSharing": {
                "weightedShare": 0,
                "admissionFairSharingStatus": {
                    "consumedResources": {
                        "cpu": "1500m",
                        "example.com/x": "0",
                        "memory": "34359738368",
                        "nvidia.com/gpu": "687527n",
                    },
                    "lastUpdate": "2026-01-01T10:00:00Z",
                },
            }
        }
    }
    # A resource gone from the ledger is taken out (a merge patch keeps what it does not name); the share stays.
    doc["status"] = {
        "fairSharing": {
            "weightedShare": 7,
            "admissionFairSharingStatus": patch["status"]["fairSharing"]["admissionFairSharingStatus"],
        }
    }
    again = localqueuestatus.status_patch(doc, {"cpu": 1.0}, T0)["status"]["fairSharing"]
    assert again["weightedShare"] == 7
    assert again["admissionFairSharingStatus"]["consumedResources"] == {
        "example.com/x": None,
        "memory": None,
        "nvidia.com/gpu": None,
        "cpu": "1",
    }


def _merged(target: Any, patch: Any) -> Any:
    """A JSON merge patch applied (RFC 7386), as the API server applies the door's."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merged(out.get(key), value)
    return out


def test_the_written_status_is_valid_for_kueues_local_queue_crd() -> None:
    # Kueue's own CRD, strictly (no field it does not know): weightedShare required beside the admission fair
    # sharing status, consumedResources and lastUpdate required in it, each quantity matching its pattern.
    schema = _strict(kueue_crd_versions("config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml")["v1beta2"])
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "main"}}
    doc["spec"] = {"clusterQueue": "research"}
    samples = [{"cpu": 1.5, "memory": 2.5e10, "nvidia.com/gpu": 6.1e-7}, {"cpu": 0.25}, {}]
    for consumed in samples:
        doc = _merged(doc, localqueuestatus.status_patch(doc, consumed, T0))
        jsonschema.validate(doc, schema)
        assert set(doc["status"]["fairSharing"]["admissionFairSharingStatus"]["consumedResources"]) == set(consumed)


def test_only_local_queues_holding_a_workload_of_ours_are_written(live_of: Any) -> None:
    objects = _objects({})
    theirs = _workload("theirs", "team-b", "2026-01-01T09:00:00Z")
    theirs["spec"]["podSets"][0]["template"]["spec"]["schedulerName"] = "default-scheduler"
    live, sent = live_of(objects, [_workload("a-next", "team-a", "2026-01-01T09:00:00Z"), theirs])
    live.sync_session()
    assert set(_local_queue_writes(sent)) == {"team-a"}  # team-b's is Kueue's controller's to write
    (path,) = [p for p, _ in sent if "/localqueues/" in p]
    assert path == "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/main/status"


def test_the_second_door_writes_its_local_queues_and_pushes_one_penalty_per_reservation(live_of: Any) -> None:
    # No Kueue installed: a pod with the queue label, asking for accelsched, is a workload the door admits.
    live, sent = live_of(_objects({}), [])
    requests = {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "team-b",
            "uid": "uid-p",
            "labels": {"kueue.x-k8s.io/queue-name": "main"},
        },
        "spec": {"schedulerName": "accelsched", "containers": [{"name": "c", "resources": requests}]},
        "status": {"phase": "Pending"},
    }
    live.pods.store["team-b/p"] = pod
    live.sync_session()
    assert live.session is not None and live.session.queues is not None
    (outcome,) = live.session.queues.outcomes
    assert outcome.admitted
    written = _local_queue_writes(sent)
    assert set(written) == {"team-b"}  # team-a holds nothing of ours
    # The first reconcile's sample (its seed: nothing yet); the admission's penalty is in the ledger.
    assert written["team-b"]["admissionFairSharingStatus"]["consumedResources"] == {}
    ledger = live._afs_ledger
    assert ledger is not None
    charged = dict(ledger.entries["team-b/main"].consumed)
    assert charged["nvidia.com/gpu"] == pytest.approx(2 * (1 - 0.5 ** (300 / 3600)))
    # Rebuilt before its pod was placed (not due this round): admitted again from scratch, it is the same
    # reservation, and Kueue pushes one penalty per reservation.
    live.afs_clock.now = T0 + 60  # type: ignore[attr-defined]
    live._invalidate("a node changed")
    assert live.sync_session()
    assert next(iter(live.session.queues.outcomes)).admitted
    assert ledger.entries["team-b/main"].consumed == charged


def test_a_local_queue_status_change_alone_does_not_rebuild(live_of: Any) -> None:
    live, _ = live_of(_objects({}), [])
    old = live.kueue["LocalQueue"].store["team-a/main"]
    written = {**old, "metadata": {**old["metadata"], "resourceVersion": "2"}, "status": {"fairSharing": {}}}
    live.dirty = False
    live._on_cluster_queue("MODIFIED", written, old)
    assert not live.dirty
    edited = {**old, "spec": {"clusterQueue": "elsewhere"}}
    live._on_cluster_queue("MODIFIED", edited, old)
    assert live.dirty
