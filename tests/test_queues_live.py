"""Kueue's objects in live mode, without an API server: what the informers hold goes through the file reader's
path (live/kueue.py, live/convert.py), so a cluster's queues are admitted as `schedule -f` admits the same YAML.

The readers against the real API server are in tests/live/test_live_kueue.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kubernetes import client as k8s

from accelsched.api.loader import load, read_documents
from accelsched.engine import Session
from accelsched.framework.scheduler import ScheduleResult
from accelsched.live import convert as live_convert
from accelsched.live import kueue as live_kueue
from accelsched.live import snapshot as live_snapshot
from accelsched.live.kube import Kube
from accelsched.live.scheduler import LiveScheduler
from accelsched.queues import report as queue_report

ROOT = Path(__file__).resolve().parent.parent
TWO_TEAMS = ROOT / "examples/queues/two-teams.yaml"


def cluster_of(path: Path) -> live_convert.Snapshot:
    """What a cluster holds after `kubectl apply -f path` with the Job controller running: the nodes, namespaces
    and Kueue's objects as written, the Jobs, and the pods the Job controller made (the file reader's, with their
    owner references)."""
    snap = live_convert.Snapshot()
    for d in read_documents(path):
        doc = json.loads(json.dumps(d.doc))
        if d.kind in live_kueue.RESOURCES:
            snap.kueue.setdefault(d.kind, []).append(doc)
        elif d.kind in ("Node", "Namespace"):
            (snap.nodes if d.kind == "Node" else snap.namespaces).append(doc)
    snap.pods = [json.loads(json.dumps(p.raw)) for p in load([path]).pods]
    return snap


def test_a_clusters_queues_are_admitted_as_the_file_reader_admits_the_same_objects() -> None:
    offline = Session.start(load([TWO_TEAMS]))
    converted = live_convert.convert(cluster_of(TWO_TEAMS))
    assert not converted.errors
    live = live_convert.start_session(converted)
    assert live.queues is not None
    assert queue_report.workloads_json(live.queues) == queue_report.workloads_json(offline.queues)
    assert queue_report.cluster_queues_json(live.queues) == queue_report.cluster_queues_json(offline.queues)
    admitted = {w["name"].split("-")[1]: w["admitted"] for w in queue_report.workloads_json(live.queues)}
    assert admitted == {"pretrain": True, "finetune": True, "eval": True, "ablation": False}


def test_without_the_queued_job_its_pods_are_not_one_workload() -> None:
    # The Job carries the queue name, its pods do not: without the Job object there is no workload to admit.
    snap = cluster_of(TWO_TEAMS)
    del snap.kueue["Job"]
    live = live_convert.start_session(live_convert.convert(snap))
    assert live.queues is not None and queue_report.workloads_json(live.queues) == []


def _object(kind: str, name: str, spec: dict, namespace: str | None = None) -> dict:
    meta = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {"apiVersion": live_kueue.API_VERSIONS[kind], "kind": kind, "metadata": meta, "spec": spec}


def test_a_bad_kueue_object_is_left_out_named_and_the_rest_is_read() -> None:
    snap = cluster_of(TWO_TEAMS)
    bad_queue = json.loads(json.dumps(snap.kueue["ClusterQueue"][1]))
    bad_queue["metadata"]["name"] = "broken"
    bad_queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "-9"
    # A quantity the CRD's schema lets through, that admission cannot read (the file reader refuses it there).
    container = {"name": "c", "resources": {"requests": {"memory": "1e999999"}}}
    template = {"spec": {"containers": [container]}}
    bad_workload = _object(
        "Workload",
        "bad",
        {"queueName": "jobs", "podSets": [{"name": "main", "count": 1, "template": template}]},
        "team-a",
    )
    snap.kueue["ClusterQueue"].append(bad_queue)
    snap.kueue["Workload"] = [bad_workload]
    converted = live_convert.convert(snap)
    assert set(converted.errors) == {"ClusterQueue broken", "Workload team-a/bad"}
    assert "nominalQuota" in converted.errors["ClusterQueue broken"]
    assert "spec.podSets[main].template" in converted.errors["Workload team-a/bad"]
    assert set(converted.inputs.queues.cluster_queues) == {"team-a", "team-b"}
    assert live_convert.start_session(converted).queues is not None


def test_topologies_are_read_and_hypernodes_are_passed_on_under_their_kind() -> None:
    topology = _object(
        "Topology", "fabric", {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}
    )
    hypernode = {
        "apiVersion": live_kueue.HYPERNODE_API_VERSION,
        "metadata": {"name": "s0"},  # a list's item may lack its kind: it is filled in
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "gpu-node-1"}}}]},
    }
    snap = live_convert.Snapshot(kueue={"Topology": [topology], "HyperNode": [hypernode]})
    docs = live_kueue.documents(snap.kueue, live_convert.SOURCE)
    assert [(d.kind, d.doc["apiVersion"]) for d in docs] == [
        ("Topology", "kueue.x-k8s.io/v1beta2"),
        ("HyperNode", "topology.volcano.sh/v1alpha1"),
    ]
    converted = live_convert.convert(snap)
    assert not converted.errors
    # the file reader's HyperNode parser (fabric/hypernode) turns the tree into a Topology of its tiers
    assert [t.name for t in converted.inputs.topologies] == ["fabric", "hypernodes"]


def test_every_live_reader_lists_the_same_kueue_resources() -> None:
    kube = Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9")))
    scheduler = LiveScheduler(kube)
    try:
        assert {kind: i.resource for kind, i in scheduler.kueue.items()} == live_kueue.RESOURCES
        assert all(i.optional for i in scheduler.kueue.values())
        assert set(scheduler.kueue.values()) <= set(scheduler.informers)
    finally:
        scheduler.stop()
    # the web view, the kubectl plugin and --from-cluster list one table (live/snapshot.py): the scheduler's own
    table = {name: (resource, optional, query) for name, resource, optional, query in live_snapshot.resources()}
    for kind, resource in live_kueue.RESOURCES.items():
        assert table[kind] == (resource, True, {})
    assert {resource for resource, _, _ in table.values()} <= {i.resource for i in scheduler.informers}


# ---------------------------------------------------------------------------------------------- door 2: queued pods


def _live_two_teams() -> tuple[LiveScheduler, live_convert.Snapshot]:
    """A never-started scheduler whose caches hold the two-teams cluster, its pods asking for accelsched."""
    live = LiveScheduler(Kube(k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))))
    snap = cluster_of(TWO_TEAMS)
    for obj in snap.pods:
        obj["spec"]["schedulerName"] = "accelsched"
        obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")  # the API server gives each one
        live.pods.store[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = obj
        live._on_pod("ADDED", obj, None)
    for kind, items in snap.kueue.items():
        live.kueue[kind].store.update({f"{o['metadata'].get('namespace')}/{o['metadata']['name']}": o for o in items})
    return live, snap


def test_queued_pods_are_admitted_before_placement_and_the_held_ones_say_why_without_looking_unschedulable() -> None:
    live, snap = _live_two_teams()
    try:
        live._rebuild(snap)
        due = dict(live.new_pending)
        pods = live._pods_for(due, rebuilt=True)
        tried = sorted(p.owner_name for p in pods)
        assert tried == ["eval", "finetune", "pretrain", "pretrain"]
        assert all(p.node_selector.get("cloud.provider.com/accelerator") == "nvidia-a100" for p in pods)  # flavor's
        (held,) = [key for key in due if key not in {p.key for p in pods}]
        assert held.startswith("team-a/ablation-") and held in live.unschedulable
        assert live.queue_held[held] == (
            "waiting for quota in ClusterQueue team-a: couldn't assign flavors to pod set main: "
            "insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed"
        )
        live._pending_gauge()
        assert live.metrics.registry.get_sample_value("scheduler_pending_pods", {"queue": "gated"}) == 1
        assert live.metrics.registry.get_sample_value("scheduler_pending_pods", {"queue": "unschedulable"}) == 0
    finally:
        live.stopped.set()
        live._pool.shutdown(wait=True)  # the condition write fails (no server): logged, not raised


def test_a_queued_pod_not_in_the_session_waits_for_a_rebuild_that_admits_it() -> None:
    live, snap = _live_two_teams()
    try:
        live._rebuild(snap)
        late = json.loads(json.dumps(snap.pods[0]))
        late["metadata"].update(name="late", uid="late-uid", labels={"kueue.x-k8s.io/queue-name": "jobs"})
        late["metadata"].pop("ownerReferences", None)
        live.dirty = False
        assert live._pods_for({"team-a/late": late}, rebuilt=False) == []
        assert live.dirty and live.rebuild_reason == "queued pod to admit" and "team-a/late" in live.new_pending
        live.new_pending.clear()
        assert live._pods_for({"team-a/late": late}, rebuilt=True) == []  # rebuilt without it: the same
        assert "team-a/late" in live.new_pending
        # Not queued (no label, no queued Job): placed as without Kueue.
        plain = {**late, "metadata": {**late["metadata"], "name": "plain", "labels": {}}}
        assert [p.name for p in live._pods_for({"team-a/plain": plain}, rebuilt=False)] == ["plain"]
    finally:
        live.stopped.set()
        live._pool.shutdown(wait=True)


def test_a_workload_admitted_and_not_placeable_gives_its_quota_back_and_waits_for_room() -> None:
    live, snap = _live_two_teams()
    try:
        live._rebuild(snap)
        pods = live._pods_for(dict(live.new_pending), rebuilt=True)
        (ablation,) = [key for key in live.queue_held if key.startswith("team-a/ablation-")]  # 4 more needed
        (finetune,) = [p for p in pods if p.owner_name == "finetune"]  # team-a's 4, borrowed from team-b
        reason = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
        live.dirty = False
        assert live._wait_for_room(ScheduleResult(finetune, message=reason))
        room = (
            f"waiting for room: quota in ClusterQueue team-a admits it but no node can take it whole ({reason}); "
            "its quota is given back until capacity frees"
        )
        assert live.queue_held[finetune.key] == room and finetune.key in live.unschedulable
        assert live.dirty
        # The rebuild admits without it: the quota it gave back goes to the next in line, ablation.
        live._rebuild(snap)
        assert live.queue_held == {finetune.key: room}
        assert ablation in live.queue_admitted
        # A pod of a workload not admitted by this door is no room wait (it fails as without queues).
        (other,) = [p for p in pods if p.owner_name == "eval"]
        live.queue_admitted.pop(other.key)
        assert not live._wait_for_room(ScheduleResult(other, message=reason))
        # A cluster event frees room: it goes back to its queue, and the next rebuild admits it again.
        live.dirty = False
        live._wake_unschedulable(pod_deleted=True)
        assert live.dirty and not live.room_waits and finetune.key in live.backing_off
        live._rebuild(snap)
        assert finetune.key in live.queue_admitted
    finally:
        live.stopped.set()
        live._pool.shutdown(wait=True)


def test_held_pods_message_names_the_cluster_queue_once() -> None:
    message = "couldn't assign flavors to pod set main: insufficient quota"
    assert live_kueue.waiting_message("team-a", message) == f"waiting for quota in ClusterQueue team-a: {message}"
    behind = "waiting for quota in ClusterQueue team-a: queued behind workload ns/w"
    assert live_kueue.waiting_message("team-a", behind) == behind
    assert live_kueue.waiting_message("", "LocalQueue jobs doesn't exist") == "LocalQueue jobs doesn't exist"


def test_the_view_offers_a_topologys_levels_as_groupings_narrowest_first() -> None:
    from accelsched.fabric.levels import Topology
    from accelsched.ui.view import group_keys

    class Node:
        def __init__(self, name: str, **labels: str) -> None:
            self.labels = {"kubernetes.io/hostname": name, **labels}

    nodes = [Node(f"n{i}", block="b0", rack=f"r{i}", zone_like="z") for i in range(2)]  # racks of one node each
    fabric = Topology("fabric", ("block", "rack", "kubernetes.io/hostname"))
    assert group_keys(nodes) == ["block", "zone_like"]  # a key unique per node groups nothing
    assert group_keys(nodes, [fabric]) == ["rack", "block", "zone_like"]


def test_a_pod_whose_job_is_not_seen_yet_waits_for_it_a_while_then_is_taken_as_unqueued() -> None:
    from accelsched.live import queuedoor

    live, snap = _live_two_teams()
    try:
        live._rebuild(snap)
        job_pod = next(o for o in snap.pods if o["metadata"]["name"].startswith("ablation"))
        key = f"team-a/{job_pod['metadata']['name']}"
        jobs = live.kueue["Job"].store
        job = jobs.pop("team-a/ablation")  # its Job's event has not arrived
        assert live._pods_for({key: job_pod}, rebuilt=True) == []
        assert key in live.backing_off and live.backoff.ready_at(job_pod["metadata"]["uid"]) > 0
        jobs["team-a/ablation"] = job  # seen: queued, and held as before
        assert live._pods_for({key: job_pod}, rebuilt=True) == [] and key in live.queue_held
        jobs.pop("team-a/ablation")
        live._job_unknown[job_pod["metadata"]["uid"]] = -queuedoor.JOB_GRACE_SECONDS  # long gone: an orphan
        assert [p.key for p in live._pods_for({key: job_pod}, rebuilt=True)] == [key]
    finally:
        live.stopped.set()
        live._pool.shutdown(wait=True)


def test_a_jobs_workload_counts_the_jobs_pods_not_only_those_made_yet() -> None:
    snap = cluster_of(TWO_TEAMS)
    (pretrain,) = [j for j in snap.kueue["Job"] if j["metadata"]["name"] == "pretrain"]
    assert pretrain["spec"]["parallelism"] == 2
    second = [p for p in snap.pods if p["metadata"]["name"].startswith("pretrain-")][1]
    snap.pods.remove(second)  # the Job controller makes it later
    session = live_convert.start_session(live_convert.convert(snap))
    (workload,) = [o for o in session.queues.outcomes if o.info.name.startswith("job-pretrain-")]
    assert [ps.count for ps in workload.info.pod_sets] == [2] and len(workload.info.pods) == 1


# ---------------------------------------------------------------------------------------------- door 1: Workloads


def _workload_doc(
    name: str, accelerators: int, scheduler: str = "accelsched", namespace: str = "team-a", **status: object
) -> dict:
    container = {"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(accelerators)}}}
    template = {"spec": {"schedulerName": scheduler, "containers": [container]}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "generation": 1, "resourceVersion": "7", "uid": f"u-{name}"},
        "spec": {"queueName": "jobs", "podSets": [{"name": "main", "count": 2, "template": template}]},
        **({"status": dict(status)} if status else {}),
    }


def test_workload_objects_get_the_status_kueues_scheduler_writes_once() -> None:
    from accelsched.live import workloadstatus

    snap = cluster_of(TWO_TEAMS)
    del snap.kueue["Job"]  # team a's quota is the Workloads' alone
    earlier = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Inadmissible",  # its LocalQueue was missing before: the reason changes, the status does not
        "message": "old",
        "lastTransitionTime": "T0",
    }
    docs = {
        "fits": _workload_doc("fits", 4),
        "waits": _workload_doc("waits", 6, conditions=[earlier]),
        "kueues": _workload_doc("kueues", 1, scheduler="default-scheduler"),
    }
    snap.kueue["Workload"] = list(docs.values())
    session = live_convert.start_session(live_convert.convert(snap))
    store = {f"team-a/{name}": doc for name, doc in docs.items()}
    writes = {w.name: w for w in workloadstatus.status_writes(session.queues, store, {"accelsched"}, now="T1")}
    assert set(writes) == {"fits", "waits"}  # the third asks for another scheduler: Kueue's to admit
    fits = writes["fits"].patch
    assert fits["metadata"] == {"resourceVersion": "7"}
    assert fits["status"]["admission"] == {
        "clusterQueue": "team-a",
        "podSetAssignments": [
            {
                "name": "main",
                "flavors": {"cpu": "a100", "nvidia.com/gpu": "a100"},
                "resourceUsage": {"cpu": "2", "nvidia.com/gpu": "8"},
                "count": 2,
            }
        ],
    }
    assert [(c["type"], c["status"], c["reason"], c["lastTransitionTime"]) for c in fits["status"]["conditions"]] == [
        ("QuotaReserved", "True", "QuotaReserved", "T1"),
        ("Admitted", "True", "Admitted", "T1"),
    ]
    (waits,) = writes["waits"].patch["status"]["conditions"]
    assert "admission" not in writes["waits"].patch["status"]
    assert (waits["status"], waits["reason"], waits["observedGeneration"]) == ("False", "Pending", 1)
    assert waits["lastTransitionTime"] == "T0"  # the status did not change: SetStatusCondition keeps the time
    assert waits["message"].startswith("couldn't assign flavors to pod set main: insufficient unused quota")

    # Written: nothing more to write (the admitted one holds its reservation, the other says the same already).
    store["team-a/fits"] = {**docs["fits"], "status": {"admission": fits["status"]["admission"]}}
    store["team-a/waits"] = {**docs["waits"], "status": {"conditions": [waits]}}
    assert workloadstatus.status_writes(session.queues, store, {"accelsched"}) == []
    # A new message alone (say "N more needed" after another workload finished) is not written: a deep queue would
    # rewrite every waiting workload on each admission.
    store["team-a/waits"] = {**docs["waits"], "status": {"conditions": [{**waits, "message": "older"}]}}
    assert workloadstatus.status_writes(session.queues, store, {"accelsched"}) == []


def test_a_pending_workloads_new_message_alone_changes_nothing_admission_reads() -> None:
    from accelsched.live import workloadstatus

    def pending(message: str) -> dict:
        return {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message}

    old = _workload_doc("w", 1, conditions=[pending("2 more needed")])
    assert workloadstatus.pending_message_only(old, _workload_doc("w", 1, conditions=[pending("1 more needed")]))
    reserved = {**pending(""), "status": "True", "reason": "QuotaReserved"}
    assert not workloadstatus.pending_message_only(old, _workload_doc("w", 1, conditions=[reserved]))
    assert not workloadstatus.pending_message_only(old, _workload_doc("w", 2, conditions=[pending("2 more needed")]))
    finished = {"type": "Finished", "status": "True", "reason": "Succeeded", "message": ""}
    both = [pending("2 more needed"), finished]
    assert not workloadstatus.pending_message_only(old, _workload_doc("w", 1, conditions=both))


def test_run_leaves_out_pending_workloads_of_other_schedulers_but_counts_them_once_admitted() -> None:
    snap = cluster_of(TWO_TEAMS)
    del snap.kueue["Job"]
    admission = {
        "clusterQueue": "team-a",
        "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "a100"}}],
    }
    snap.kueue["Workload"] = [
        _workload_doc("mine", 4),
        _workload_doc("pending", 1, scheduler="default-scheduler"),
        _workload_doc("running", 1, scheduler="default-scheduler", admission=admission),
    ]
    run = live_convert.convert(snap, {"accelsched"}).inputs.queues.workloads
    assert set(run) == {"team-a/mine", "team-a/running"}
    what_if = live_convert.convert(snap).inputs.queues.workloads  # every pending workload, as every pending pod
    assert set(what_if) == {"team-a/mine", "team-a/pending", "team-a/running"}


def reclaimed_borrower(borrower_changes: Callable[[dict], None] | None = None) -> tuple[Session, dict[str, dict]]:
    """two-teams' Workloads alone: team-a's borrower (running with 12 GPUs, 4 of them team-b's) and team-b's owner
    (8: its own), whose queue may reclaim: the owner preempts the borrower. The session and the cache's store."""
    snap = cluster_of(TWO_TEAMS)
    del snap.kueue["Job"]
    (team_b,) = [q for q in snap.kueue["ClusterQueue"] if q["metadata"]["name"] == "team-b"]
    team_b["spec"]["preemption"] = {"reclaimWithinCohort": "Any"}
    flavors = {"cpu": "a100", "nvidia.com/gpu": "a100"}
    admission = {"clusterQueue": "team-a", "podSetAssignments": [{"name": "main", "flavors": flavors, "count": 2}]}
    reserved = {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": "m",
        "lastTransitionTime": "T0",
    }
    borrower = _workload_doc("borrower", 6, admission=admission, conditions=[reserved])  # 12: 4 of team b's
    if borrower_changes is not None:
        borrower_changes(borrower)
    owner = _workload_doc("owner", 4, namespace="team-b")  # 8: team b's own, 4 of them lent
    snap.kueue["Workload"] = [borrower, owner]
    session = live_convert.start_session(live_convert.convert(snap, {"accelsched"}))
    return session, {"team-a/borrower": borrower, "team-b/owner": owner}


def test_a_preempted_workload_object_is_told_so_and_nothing_is_admitted_on_its_room_until_it_lets_go() -> None:
    from accelsched.live import workloadstatus

    session, store = reclaimed_borrower()
    writes, holding = workloadstatus.preemptions(session.queues, store, {"accelsched"}, now="T1")
    assert holding == {"team-a/borrower"}
    (write,) = writes
    assert write.name == "borrower" and "admission" not in write.patch["status"]  # the reconciler releases it
    by_type = {c["type"]: c for c in write.patch["status"]["conditions"]}
    assert (by_type["Preempted"]["status"], by_type["Preempted"]["reason"]) == ("True", "InCohortReclamation")
    assert (by_type["Evicted"]["status"], by_type["Evicted"]["reason"]) == ("True", "Preempted")
    assert by_type["Evicted"]["message"].startswith("Preempted to accommodate a workload (UID: u-owner")
    assert by_type["QuotaReserved"]["status"] == "True"  # untouched: still reserved until released
    (waiting,) = workloadstatus.status_writes(session.queues, store, {"accelsched"}, preempting=len(holding))
    # the owner waits for the room, told so as Kueue tells a preemptor
    assert waiting.name == "owner" and "admission" not in waiting.patch["status"]
    (told,) = waiting.patch["status"]["conditions"]
    assert (told["type"], told["status"], told["reason"]) == ("QuotaReserved", "False", "Pending")
    assert told["message"].endswith(". Pending the preemption of 1 workload(s)")
    store["team-b/owner"] = {**store["team-b/owner"], "status": {"conditions": [told]}}
    assert workloadstatus.status_writes(session.queues, store, {"accelsched"}, preempting=len(holding)) == []
    once_released = workloadstatus.status_writes(session.queues, store, {"accelsched"})
    assert [w.name for w in once_released] == ["owner"] and "admission" in once_released[0].patch["status"]


def _kueue_config_map(text: str, name: str = live_kueue.CONFIG_MAP) -> dict:
    meta = {"name": name, "namespace": live_kueue.CONFIG_NAMESPACE}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {live_kueue.CONFIG_KEY: text}}


KUEUE_CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
manageJobsWithoutQueueName: false
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare]
admissionFairSharing:
  usageHalfLifeTime: 1h
  resourceWeights: {nvidia.com/gpu: 4}
"""


def test_kueues_configuration_is_read_from_its_config_map() -> None:
    snap = cluster_of(TWO_TEAMS)
    other = _kueue_config_map("fairSharing: {}", name="something-else")  # another ConfigMap of kueue-system
    snap.kueue[live_kueue.CONFIG] = [other, _kueue_config_map(KUEUE_CONFIG)]
    converted = live_convert.convert(snap)
    assert not converted.errors
    config = converted.inputs.queues.config
    assert config.fair_sharing == ("LessThanOrEqualToFinalShare",)
    assert config.admission_fair_sharing is not None
    assert (config.admission_fair_sharing.usage_half_life, dict(config.admission_fair_sharing.resource_weights)) == (
        3600.0,
        {"nvidia.com/gpu": 4.0},
    )
    # without the ConfigMap (or with text that is no YAML mapping) Kueue's defaults hold: fair sharing off
    for items in ([], [_kueue_config_map(": not yaml :")], [other]):
        snap.kueue[live_kueue.CONFIG] = items
        assert live_convert.convert(snap).inputs.queues.config.fair_sharing is None


def test_a_bad_field_of_kueues_config_map_is_named() -> None:
    snap = cluster_of(TWO_TEAMS)
    bad = KUEUE_CONFIG.replace("[LessThanOrEqualToFinalShare]", "[Nope]")
    snap.kueue[live_kueue.CONFIG] = [_kueue_config_map(bad)]
    converted = live_convert.convert(snap)
    (message,) = converted.errors.values()
    assert "fairSharing.preemptionStrategies" in message
    assert converted.inputs.queues.config.fair_sharing is None  # left out, the rest read
    assert set(converted.inputs.queues.cluster_queues) == {"team-a", "team-b"}
