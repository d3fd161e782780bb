"""Kueue's objects in live mode, against the real kube-apiserver with Kueue v0.19.2's own CRDs (from its Go module,
as the Kueue oracle installs them) and no Kueue controller: the web view's queue panel and Topology domains, the
`--from-cluster` reader, and `accelsched run` admitting queued pods itself (issue 23's second door): two teams, one
borrowing the other's idle quota, the held pod's condition, and its admission once quota is freed."""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import ACCELERATOR, KubeContext
from controlplane import REPO, ControlPlane, apply_crds, ensure_namespace
from livekit import accel_pod, kube_for, node_of, pod_json, running_scheduler, wait_for

from accelsched.live import kube as k
from accelsched.live import kueue as live_kueue
from accelsched.live.kube import ApiError, Kube
from accelsched.live.whatif import session_from_cluster
from accelsched.queues import report as queue_report
from accelsched.ui import server
from accelsched.ui.hub import Hub
from accelsched.ui.live import LiveSource, ReadOnlyKube

if str(REPO) not in sys.path:  # conformance/ is not an installed package
    sys.path.insert(0, str(REPO))
from conformance.kueue import process as kueue_process

pytestmark = pytest.mark.integration

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
POOL = "accelsched.test/pool"
RACK = "accelsched.test/rack"


@pytest.fixture(scope="module")
def kueue_crds(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Kueue's CRDs as its kustomization makes them (conformance/kueue/process.py): v1beta2 is their storage
    version, so objects written and read at v1beta2 never call the conversion webhook (no Kueue runs here)."""
    from kubernetes import config

    with config.new_client_from_config(config_file=str(control_plane.kubeconfig)) as api:
        apply_crds(api, kueue_process.write_crds(tmp_path_factory.mktemp("kueue-crds")))


@dataclass
class Teams:
    """Two teams' namespaces, ClusterQueues in one cohort (each guaranteed ``quota`` accelerators, borrowing what
    the other leaves idle), a LocalQueue ``jobs`` in each namespace, one flavor over this test's nodes, and a
    Topology of racks; all named after the test's namespace, all deleted afterwards."""

    kube: KubeContext
    api: Kube
    quota: int = 4

    def __post_init__(self) -> None:
        self.prefix = self.kube.namespace
        self.cluster_scoped: list[tuple[str, str]] = []
        self.namespaces = {team: f"{self.prefix}-{team}" for team in ("a", "b")}

    def create(self, kind: str, body: dict[str, Any], namespace: str | None = None) -> None:
        body = {"apiVersion": live_kueue.API_VERSIONS[kind], "kind": kind, **body}
        self.api.create(live_kueue.RESOURCES[kind], body, namespace)
        if namespace is None:
            self.cluster_scoped.append((kind, body["metadata"]["name"]))

    def cluster_queue(self, team: str) -> str:
        return f"{self.prefix}-{team}"

    def set_up(self, nodes: int = 2, preemption: dict[str, Any] | None = None) -> None:
        for i in range(nodes):
            labels = {POOL: self.prefix, RACK: f"{self.prefix}-r{i}"}
            self.kube.make_node(f"{self.prefix}-n{i}", labels=labels, capacity={ACCELERATOR: self.quota})
        for namespace in self.namespaces.values():
            ensure_namespace(self.kube.api, namespace)
            ns = self.api.get(k.NAMESPACES, namespace)
            ns["metadata"].setdefault("labels", {})["team"] = namespace
            self.api.replace(k.NAMESPACES, namespace, ns)
        flavor = f"{self.prefix}-pool"
        self.create("ResourceFlavor", {"metadata": {"name": flavor}, "spec": {"nodeLabels": {POOL: self.prefix}}})
        self.create(
            "Topology",
            {"metadata": {"name": f"{self.prefix}-fabric"}, "spec": {"levels": [{"nodeLabel": RACK}]}},
        )
        for team, namespace in self.namespaces.items():
            resources = [{"name": "cpu", "nominalQuota": "10"}, {"name": ACCELERATOR, "nominalQuota": self.quota}]
            spec = {
                "cohortName": self.prefix,
                "namespaceSelector": {"matchLabels": {"team": namespace}},
                **({"preemption": preemption} if preemption else {}),
                "resourceGroups": [
                    {"coveredResources": ["cpu", ACCELERATOR], "flavors": [{"name": flavor, "resources": resources}]}
                ],
            }
            self.create("ClusterQueue", {"metadata": {"name": self.cluster_queue(team)}, "spec": spec})
            body = {
                "metadata": {"name": "jobs", "namespace": namespace},
                "spec": {"clusterQueue": self.cluster_queue(team)},
            }
            self.create("LocalQueue", body, namespace)

    def submit(self, team: str, name: str, accelerators: int) -> str:
        namespace = self.namespaces[team]
        self.api.create(k.PODS, accel_pod(name, namespace, accelerators, {QUEUE_LABEL: "jobs"}), namespace)
        return namespace

    def tear_down(self) -> None:
        from kubernetes import client

        core = client.CoreV1Api(self.kube.api)
        for namespace in self.namespaces.values():
            core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            for lq in self.api.list(live_kueue.RESOURCES["LocalQueue"], namespace).get("items") or []:
                self.api.delete(live_kueue.RESOURCES["LocalQueue"], lq["metadata"]["name"], namespace)
            core.delete_namespace(namespace)
        for kind, name in reversed(self.cluster_scoped):
            try:
                self.api.delete(live_kueue.RESOURCES[kind], name)
            except ApiError as exc:
                if exc.status != 404:
                    raise


@pytest.fixture
def teams(kube: KubeContext, kueue_crds: None) -> Iterator[Teams]:
    out = Teams(kube, kube_for(kube.kubeconfig))
    try:
        yield out
    finally:
        out.tear_down()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def _scheduled(pod: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"), {})


def test_the_queue_panel_and_topology_domains_show_the_clusters_kueue_objects(teams: Teams) -> None:
    teams.set_up()
    teams.submit("a", "first", 4)
    teams.submit("a", "second", 4)  # borrows team b's idle 4
    teams.submit("a", "third", 2)  # the cohort has nothing left
    cq_a = teams.cluster_queue("a")

    source = LiveSource(ReadOnlyKube.of(teams.api))
    hub = Hub(source.start(timeout=30))
    source.follow(hub)
    url, stop = server.start_in_thread(hub)
    try:
        view = _get(url + "api/state")
        panel = view["queues"]
        mine = {q["name"]: q for q in panel["clusterQueues"] if q["cohort"] == teams.prefix}
        assert set(mine) == {cq_a, teams.cluster_queue("b")}
        assert panel["admitted"][cq_a] == 2
        (queued,) = [w for w in panel["queued"] if w["clusterQueue"] == cq_a]
        assert queued["message"] == (
            f"couldn't assign flavors to pod set main: insufficient unused quota for {ACCELERATOR} in flavor "
            f"{teams.prefix}-pool, 2 more needed"
        )
        (cohort,) = [c for c in panel["cohorts"] if c["name"] == teams.prefix]
        assert cohort["usage"][f"{teams.prefix}-pool"][ACCELERATOR] == "8"
        assert RACK in view["groupKeys"]  # the Topology's level: its domains group the map
        assert view["groupKeys"].index(RACK) < view["groupKeys"].index(POOL)

        # A ClusterQueue edited live: the panel follows (quota raised, the third workload admitted).
        cq = teams.api.get(live_kueue.RESOURCES["ClusterQueue"], cq_a)
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] = 6
        teams.api.replace(live_kueue.RESOURCES["ClusterQueue"], cq_a, cq)
        wait_for(
            "the edited ClusterQueue on the page",
            lambda: _get(url + "api/state")["queues"]["admitted"].get(cq_a) == 3,
            timeout=10,
        )
    finally:
        stop()
        source.stop()

    # `schedule --from-cluster` reads the same objects and admits alike.
    session, converted = session_from_cluster(teams.api)
    assert not [e for e in converted.errors if teams.prefix in e]
    workloads = [w for w in queue_report.workloads_json(session.queues) if w["clusterQueue"] == cq_a]
    assert sorted(w["admitted"] for w in workloads) == [True, True, True]


def test_a_bad_kueue_object_is_left_out_and_the_rest_is_scheduled(teams: Teams, caplog: Any) -> None:
    teams.set_up(nodes=1)
    # The CRD's schema lets a lendingLimit above the nominal quota through; Kueue's webhook (not running here)
    # would refuse it, and so does the file reader: live leaves it out, naming it, and goes on.
    bad = f"{teams.prefix}-bad"
    resources = [{"name": ACCELERATOR, "nominalQuota": 1, "lendingLimit": 2}]
    groups = [
        {"coveredResources": [ACCELERATOR], "flavors": [{"name": f"{teams.prefix}-pool", "resources": resources}]}
    ]
    teams.create("ClusterQueue", {"metadata": {"name": bad}, "spec": {"cohortName": "x", "resourceGroups": groups}})
    namespace = teams.submit("a", "fits", 2)
    with running_scheduler(teams.kube.kubeconfig) as scheduler:
        wait_for("the queued pod bound", lambda: node_of(teams.api, namespace, "fits"), timeout=30)
        assert f"ClusterQueue {bad}" in scheduler.errors
        assert "lendingLimit" in scheduler.errors[f"ClusterQueue {bad}"]


def test_run_admits_queued_pods_borrowing_holding_and_readmitting_as_quota_is_freed(teams: Teams) -> None:
    teams.set_up()
    ns_a, ns_b = teams.namespaces["a"], teams.namespaces["b"]
    with running_scheduler(teams.kube.kubeconfig) as scheduler:
        teams.submit("a", "a1", 4)
        teams.submit("a", "a2", 4)  # team b's 4 are idle: borrowed
        wait_for("team a's pods bound", lambda: node_of(teams.api, ns_a, "a1") and node_of(teams.api, ns_a, "a2"))
        assert {node_of(teams.api, ns_a, "a1"), node_of(teams.api, ns_a, "a2")} == {
            f"{teams.prefix}-n0",
            f"{teams.prefix}-n1",
        }

        teams.submit("b", "b1", 2)  # its own quota is lent out, and nothing preempts: it waits
        held = wait_for("b1's condition", lambda: _scheduled(pod_json(teams.api, ns_b, "b1")).get("message"))
        condition = _scheduled(pod_json(teams.api, ns_b, "b1"))
        assert condition["status"] == "False"
        assert condition["reason"] == "SchedulingGated"  # not Unschedulable: no autoscaler adds nodes for it
        assert held == (
            f"waiting for quota in ClusterQueue {teams.cluster_queue('b')}: couldn't assign flavors to pod set "
            f"main: insufficient unused quota for {ACCELERATOR} in flavor {teams.prefix}-pool, 2 more needed"
        )
        assert not node_of(teams.api, ns_b, "b1")
        failed = [e for e in teams.api.list(k.EVENTS, ns_b).get("items") or [] if e.get("reason") == "FailedScheduling"]
        assert failed == []  # a quota wait is no scheduling failure

        # a2 finishes (deleted): the quota it borrowed is free, and b1 is admitted and placed.
        teams.api.request("DELETE", k.PODS.path(ns_a, "a2"), body={"gracePeriodSeconds": 0})
        wait_for("b1 bound once quota is freed", lambda: node_of(teams.api, ns_b, "b1"), timeout=30)
        assert f"{ns_b}/b1" not in scheduler.queue_held


def test_run_admits_only_what_it_can_place_a_workload_without_room_waits_for_it_gated(teams: Teams) -> None:
    """Admitted means placeable: both workloads fit team a's quota, the nodes take only one. The other gives its
    quota back and is held SchedulingGated, saying it waits for room (never Unschedulable, no FailedScheduling),
    and is admitted and placed once the first finishes."""
    teams.set_up()
    ns_a = teams.namespaces["a"]
    for node, used in ((f"{teams.prefix}-n0", 2), (f"{teams.prefix}-n1", 3)):  # free: 2 on n0, 1 on n1
        filler = accel_pod(f"filler-{node}", ns_a, used)
        filler["spec"]["nodeName"] = node  # bound already, outside the queues
        teams.api.create(k.PODS, filler, ns_a)
    with running_scheduler(teams.kube.kubeconfig) as scheduler:
        teams.submit("a", "w1", 2)
        teams.submit("a", "w2", 2)
        placed = wait_for(
            "one of the two bound", lambda: [w for w in ("w1", "w2") if node_of(teams.api, ns_a, w)], timeout=30
        )
        assert len(placed) == 1 and node_of(teams.api, ns_a, placed[0]) == f"{teams.prefix}-n0"
        other = "w2" if placed == ["w1"] else "w1"
        held = wait_for(
            f"{other}'s condition", lambda: _scheduled(pod_json(teams.api, ns_a, other)).get("message"), timeout=30
        )
        condition = _scheduled(pod_json(teams.api, ns_a, other))
        assert condition["status"] == "False"
        assert condition["reason"] == "SchedulingGated"
        assert held.startswith(
            f"waiting for room: quota in ClusterQueue {teams.cluster_queue('a')} admits it but no node can take it "
            "whole (0/2 nodes are available: "
        ), held
        assert held.endswith("; its quota is given back until capacity frees")
        assert f"Insufficient {ACCELERATOR}" in held
        assert not node_of(teams.api, ns_a, other)
        failed = [e for e in teams.api.list(k.EVENTS, ns_a).get("items") or [] if e.get("reason") == "FailedScheduling"]
        assert failed == []
        # its quota went back: the session's admission holds it out of the queue
        wait_for("the rebuilt session", lambda: f"{ns_a}/{other}" in (scheduler.session.queues.held() or {}))
        outcome = next(
            o for o in scheduler.session.queues.outcomes if f"{ns_a}/{other}" in {p.key for p in o.info.pods}
        )
        assert not outcome.admitted

        teams.api.request("DELETE", k.PODS.path(ns_a, placed[0]), body={"gracePeriodSeconds": 0})
        assert wait_for(f"{other} bound once room frees", lambda: node_of(teams.api, ns_a, other), timeout=30) == (
            f"{teams.prefix}-n0"
        )


def test_run_reclaims_borrowed_quota_stopping_the_borrower_as_kueue_does(teams: Teams) -> None:
    teams.set_up(preemption={"reclaimWithinCohort": "Any"})
    ns_a, ns_b = teams.namespaces["a"], teams.namespaces["b"]
    with running_scheduler(teams.kube.kubeconfig):
        teams.submit("a", "a1", 4)
        wait_for("a1 bound", lambda: node_of(teams.api, ns_a, "a1"))
        teams.submit("a", "a2", 4)  # borrows team b's idle 4
        wait_for("a2 bound", lambda: node_of(teams.api, ns_a, "a2"))

        teams.submit("b", "b1", 4)  # team b takes its quota back: a2, the borrower, is stopped
        stopping = wait_for(
            "a2 stopped", lambda: (p := pod_json(teams.api, ns_a, "a2"))["metadata"].get("deletionTimestamp") and p
        )
        (target,) = [c for c in stopping["status"]["conditions"] if c["type"] == "TerminationTarget"]
        b1 = pod_json(teams.api, ns_b, "b1")
        assert target["status"] == "True" and target["reason"] == "WorkloadEvictedDueToPreempted"
        assert target["message"] == (
            f"Preempted to accommodate a workload (UID: UNKNOWN, JobUID: {b1['metadata']['uid']}) due to "
            f"reclamation within the cohort; preemptor path: /{teams.prefix}/{teams.cluster_queue('b')}; "
            f"preemptee path: /{teams.prefix}/{teams.cluster_queue('a')}"
        )
        # Until a2 is gone its room is taken: b1 waits, saying so, and is not bound.
        waiting = wait_for("b1's condition", lambda: _scheduled(pod_json(teams.api, ns_b, "b1")).get("message"))
        assert waiting == (
            f"waiting for quota in ClusterQueue {teams.cluster_queue('b')}: Pending the preemption of 1 workload(s)"
        )
        assert not node_of(teams.api, ns_b, "b1") and node_of(teams.api, ns_a, "a1")
        # The kubelet's part (there is none here): the graceful deletion ends.
        teams.api.request("DELETE", k.PODS.path(ns_a, "a2"), body={"gracePeriodSeconds": 0})
        wait_for("b1 bound on a2's room", lambda: node_of(teams.api, ns_b, "b1") == stopping["spec"]["nodeName"])
        assert node_of(teams.api, ns_a, "a1")  # within its own quota: never touched


def test_run_admits_a_jobs_pods_as_one_workload(teams: Teams) -> None:
    teams.set_up()
    ns_a, ns_b = teams.namespaces["a"], teams.namespaces["b"]
    jobs = live_kueue.RESOURCES["Job"]
    with running_scheduler(teams.kube.kubeconfig):
        teams.submit("b", "b1", 4)  # team b uses its own: nothing to borrow
        wait_for("b1 bound", lambda: node_of(teams.api, ns_b, "b1"))
        template = accel_pod("worker", ns_a, 3)
        template["spec"]["restartPolicy"] = "Never"
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train", "namespace": ns_a, "labels": {QUEUE_LABEL: "jobs"}},
            "spec": {"parallelism": 2, "completions": 2, "template": {"spec": template["spec"]}},
        }
        job = teams.api.create(jobs, job, ns_a)
        # The Job controller's part (no kube-controller-manager here): its pods, owned by it, without its labels.
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": job["metadata"]["uid"]}
        for i in range(2):
            pod = accel_pod(f"train-{i}", ns_a, 3)
            pod["spec"]["restartPolicy"] = "Never"
            pod["metadata"]["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
            teams.api.create(k.PODS, pod, ns_a)
        # 2 x 3 = 6 is more than team a's 4 and b lends nothing: the Job waits whole (one pod alone would fit, and
        # the pods arrive one by one: the workload is the Job's count, as Kueue makes it from the Job).
        for i in range(2):
            held = wait_for(f"train-{i} held", lambda i=i: _scheduled(pod_json(teams.api, ns_a, f"train-{i}")))
            assert held.get("reason") == "SchedulingGated", held
            assert held["message"].startswith(f"waiting for quota in ClusterQueue {teams.cluster_queue('a')}: ")
            assert held["message"].endswith("2 more needed")
        teams.api.request("DELETE", k.PODS.path(ns_b, "b1"), body={"gracePeriodSeconds": 0})
        for i in range(2):
            wait_for(f"train-{i} bound", lambda i=i: node_of(teams.api, ns_a, f"train-{i}"))
        teams.api.delete(jobs, "train", ns_a)


def _workload(
    teams: Teams, team: str, name: str, accelerators: int, count: int = 1, scheduler: str = "accelsched"
) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "registry.example.com/train:1",
        "resources": {"requests": {"cpu": "100m", ACCELERATOR: str(accelerators)}},
    }
    spec = {"schedulerName": scheduler, "containers": [container]}
    pod_set = {"name": "main", "count": count, "template": {"spec": spec}}
    namespace = teams.namespaces[team]
    body = {"metadata": {"name": name, "namespace": namespace}, "spec": {"queueName": "jobs", "podSets": [pod_set]}}
    teams.create("Workload", body, namespace)
    return body


def _workload_status(teams: Teams, team: str, name: str) -> dict[str, Any]:
    return teams.api.get(live_kueue.RESOURCES["Workload"], name, teams.namespaces[team]).get("status") or {}


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def test_run_admits_workload_objects_writing_their_status_as_kueues_scheduler(teams: Teams) -> None:
    teams.set_up()
    cq_a = teams.cluster_queue("a")
    with running_scheduler(teams.kube.kubeconfig):
        _workload(teams, "a", "w1", 2, count=2)  # 4: team a's own
        _workload(teams, "a", "w2", 4)  # 4 more: borrowed from team b
        _workload(teams, "a", "w3", 1)  # nothing left in the cohort
        # Kueue's scheduler's to admit, not ours: while it waits it takes no quota from ours (team b's 4 stay lent).
        _workload(teams, "b", "kueues", 1, scheduler="default-scheduler")
        wait_for(
            "w1 and w2 admitted",
            lambda: all(_workload_status(teams, "a", w).get("admission") for w in ("w1", "w2")),
        )
        w1 = _workload_status(teams, "a", "w1")
        pool = f"{teams.prefix}-pool"
        assert w1["admission"] == {
            "clusterQueue": cq_a,
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {ACCELERATOR: pool, "cpu": pool},
                    "resourceUsage": {ACCELERATOR: "4", "cpu": "200m"},
                    "count": 2,
                }
            ],
        }
        reserved, ok = _condition(w1, "QuotaReserved"), _condition(w1, "Admitted")
        assert (reserved["status"], reserved["reason"], reserved["message"]) == (
            "True",
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {cq_a}",
        )
        assert (ok["status"], ok["reason"], ok["message"]) == ("True", "Admitted", "The workload is admitted")
        assert reserved["lastTransitionTime"] and "observedGeneration" in reserved
        pending = wait_for("w3's condition", lambda: _condition(_workload_status(teams, "a", "w3"), "QuotaReserved"))
        assert (pending["status"], pending["reason"], pending["message"]) == (
            "False",
            "Pending",
            f"couldn't assign flavors to pod set main: insufficient unused quota for {ACCELERATOR} in flavor {pool}, "
            "1 more needed",
        )
        assert "admission" not in _workload_status(teams, "a", "w3")
        assert _workload_status(teams, "b", "kueues") == {}

        # w2 is done (its Workload deleted, as Kueue's controllers finish it): w3 is admitted.
        teams.api.delete(live_kueue.RESOURCES["Workload"], "w2", teams.namespaces["a"])
        wait_for("w3 admitted", lambda: _workload_status(teams, "a", "w3").get("admission"))
        assert _condition(_workload_status(teams, "a", "w3"), "Admitted")["status"] == "True"


def test_from_cluster_reads_kueues_configuration_from_its_config_map(teams: Teams) -> None:
    """The kueue-manager-config ConfigMap's controller_manager_config.yaml, as Kueue's manifests install it: fair
    sharing and admission fair sharing on for --from-cluster (and run's and the web view's informers alike)."""
    teams.set_up(nodes=1)
    ensure_namespace(teams.kube.api, live_kueue.CONFIG_NAMESPACE)
    text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "fairSharing: {preemptionStrategies: [LessThanInitialShare]}\n"
        "admissionFairSharing: {usageHalfLifeTime: 10m, usageSamplingInterval: 1m}\n"
    )
    config_maps = k.Resource("/api/v1", "configmaps")
    meta = {"name": live_kueue.CONFIG_MAP, "namespace": live_kueue.CONFIG_NAMESPACE}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {live_kueue.CONFIG_KEY: text}}
    _, before = session_from_cluster(teams.api)
    assert before.inputs.queues.config.fair_sharing is None
    teams.api.create(config_maps, body, live_kueue.CONFIG_NAMESPACE)
    try:
        _, converted = session_from_cluster(teams.api)
        config = converted.inputs.queues.config
        assert config.fair_sharing == ("LessThanInitialShare",)
        assert config.admission_fair_sharing is not None
        assert config.admission_fair_sharing.usage_sampling_interval == 60.0
    finally:
        teams.api.delete(config_maps, live_kueue.CONFIG_MAP, live_kueue.CONFIG_NAMESPACE)
