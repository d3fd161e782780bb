"""Kueue's Workload events, against the real Kueue v0.19.2: one scenario played twice on one API server, first with
Kueue admitting, then (Kueue stopped) with ``accelsched run``'s queue door; each Workload's events must read the
same, but for the names of the objects, their UIDs and the seconds waited (live/workloadevents.py).

The scenario: a ClusterQueue ``a`` with two flavors (``small``, 1 cpu of its own; ``big``, none of its own) and a
ClusterQueue ``b`` lending the 2 cpu of ``big`` it has, which may reclaim them. w1 (1 cpu) fits ``small``; w2
(1 cpu) does not and borrows ``big`` (its QuotaReserved event lists the flavors considered); w3 (5 cpu) fits
nowhere (a Pending warning); then b's owner (2 cpu) reclaims what w2 borrowed (Preempted and EvictedDueToPreempted
on w2, PreemptedWorkload on the owner), and once w2 is gone the owner is admitted."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # conformance/ is not an installed package: import it from the checkout
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from livekit import real_kueue, running_scheduler, wait_for  # noqa: E402

from accelsched.live import kube as k  # noqa: E402
from accelsched.live.kueue import API_VERSIONS, RESOURCES  # noqa: E402
from conformance.kueue.real import KueueCluster  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.kueue_oracle]

WORKLOAD = RESOURCES["Workload"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with real_kueue(tmp_path_factory.mktemp("kueue-events")) as c:
        yield c


class Play:
    """The scenario's objects under ``prefix`` (its namespace, flavors, ClusterQueues and cohort)."""

    def __init__(self, cluster: KueueCluster, prefix: str, scheduler: str) -> None:
        assert cluster.kube is not None
        self.kube, self.prefix, self.scheduler = cluster.kube, prefix, scheduler
        self.cluster = cluster
        self.ns = prefix

    def create(self, kind: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        return self.kube.create(RESOURCES[kind], {"apiVersion": API_VERSIONS[kind], "kind": kind, **body}, namespace)

    def set_up(self) -> None:
        self.kube.create(k.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}})
        p = self.prefix
        for flavor in ("small", "big"):
            self.create("ResourceFlavor", {"metadata": {"name": f"{p}-{flavor}"}, "spec": {}})
        self.create("ClusterQueue", {"metadata": {"name": f"{p}-a"}, "spec": {
            "cohortName": p, "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": f"{p}-small", "resources": [{"name": "cpu", "nominalQuota": "1"}]},
                {"name": f"{p}-big", "resources": [{"name": "cpu", "nominalQuota": "0"}]}]}]}})
        self.create("ClusterQueue", {"metadata": {"name": f"{p}-b"}, "spec": {
            "cohortName": p, "namespaceSelector": {}, "preemption": {"reclaimWithinCohort": "Any"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": f"{p}-big", "resources": [{"name": "cpu", "nominalQuota": "2"}]}]}]}})
        for lq, cq in (("jobs", "a"), ("owners", "b")):
            self.create("LocalQueue", {"metadata": {"name": lq, "namespace": self.ns},
                                       "spec": {"clusterQueue": f"{p}-{cq}"}}, self.ns)
        wait_for("the queues taken in", self._queues_active, timeout=60)

    def _queues_active(self) -> bool:
        if self.scheduler != "kueue":
            return True  # accelsched reads them from its cache; without Kueue no controller marks them Active
        for kind, name, ns in (("ClusterQueue", f"{self.prefix}-a", None), ("ClusterQueue", f"{self.prefix}-b", None),
                               ("LocalQueue", "jobs", self.ns), ("LocalQueue", "owners", self.ns)):
            doc = self.kube.get(RESOURCES[kind], name, ns)
            active = [c for c in (doc.get("status") or {}).get("conditions") or [] if c["type"] == "Active"]
            if not active or active[0]["status"] != "True":
                return False
        return True

    def workload(self, name: str, cpu: int, queue: str = "jobs") -> None:
        pod = {"schedulerName": self.scheduler if self.scheduler != "kueue" else "default-scheduler",
               "restartPolicy": "Never",
               "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                               "resources": {"requests": {"cpu": str(cpu)}}}]}
        spec = {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": pod}}]}
        self.create("Workload", {"metadata": {"name": name, "namespace": self.ns}, "spec": spec}, self.ns)

    def get(self, name: str) -> dict[str, Any]:
        return self.kube.get(WORKLOAD, name, self.ns)

    def condition(self, name: str, kind: str) -> dict[str, Any]:
        conditions = (self.get(name).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == kind), {})

    def play(self) -> None:
        self.workload("w1", 1)
        wait_for("w1 admitted", lambda: self.get("w1").get("status", {}).get("admission"))
        self.workload("w2", 1)
        wait_for("w2 admitted", lambda: self.get("w2").get("status", {}).get("admission"))
        self.workload("w3", 5)
        wait_for("w3 pending", lambda: self.condition("w3", "QuotaReserved").get("reason") == "Pending")
        self.workload("owner", 2, queue="owners")
        wait_for("w2 evicted", lambda: self.condition("w2", "Evicted").get("status") == "True", timeout=60)
        # the owner told it waits for the preemption (the door writes that a moment later than Kueue: queuedoor's
        # PENDING_CONDITION_DELAY), before w2 lets go
        wait_for("the owner pending", lambda: self.condition("owner", "QuotaReserved").get("reason") == "Pending")
        self.kube.delete(WORKLOAD, "w2", self.ns)  # its job stopped and gone: the quota it held is free
        wait_for("the owner admitted", lambda: self.get("owner").get("status", {}).get("admission"), timeout=60)
        wait_for("the events written", lambda: len(self.events()) >= 10, timeout=30)
        time.sleep(2)  # any late one

    def events(self) -> list[dict[str, Any]]:
        items = self.kube.list(k.EVENTS, self.ns).get("items") or []
        return [e for e in items if (e.get("regarding") or {}).get("kind") == "Workload"]

    def said(self) -> dict[str, list[tuple[str, str, str, str]]]:
        """Per Workload, its events (type, reason, reporting controller, note) in the order they were first
        recorded, each once; the play's names, the Workloads' UIDs and the seconds waited written the same for
        both plays. Each once: Kueue records its Pending event on every retry, a new Event where the Workload's
        resourceVersion moved on since the last (client-go's series key holds the object's version), where the door
        records one per condition it writes (live/workloadevents.py)."""
        uids: dict[str, str] = {}
        for e in self.events():
            uids[e["regarding"]["uid"]] = e["regarding"]["name"]
        out: dict[str, list[tuple[str, str, str, str]]] = {}
        for e in sorted(self.events(), key=lambda e: e["eventTime"]):
            note = e["note"].replace(self.prefix, "P")
            for uid, name in uids.items():
                note = note.replace(uid, f"<uid of {name}>")
            note = re.sub(r"wait time since queued was \d+s", "wait time since queued was Ns", note)
            row = (e["type"], e["reason"], e["reportingController"], note)
            rows = out.setdefault(e["regarding"]["name"], [])
            if row not in rows:
                rows.append(row)
        return out


def test_accelscheds_workload_events_read_as_kueues(cluster: KueueCluster) -> None:
    kueues = Play(cluster, f"kev-{cluster.run_tag}-k", "kueue")
    kueues.set_up()
    kueues.play()
    want = kueues.said()
    assert cluster.kueue is not None
    cluster.kueue.stop()  # from here on the queue door alone admits
    cluster.kueue = None

    ours = Play(cluster, f"kev-{cluster.run_tag}-a", "accelsched")
    ours.set_up()
    with running_scheduler(cluster.cp.kubeconfig):
        ours.play()
    got = ours.said()
    # The scenario does what it is meant to: each kind of event is there on Kueue's side.
    reasons = {row[1] for rows in want.values() for row in rows}
    assert {"QuotaReserved", "Admitted", "Pending", "Preempted", "EvictedDueToPreempted",
            "PreemptedWorkload"} <= reasons, want
    assert any("Flavors considered" in row[3] for row in want["w2"]), want["w2"]
    for name in sorted(set(want) | set(got)):  # per Workload, so that a difference names it and shows both lists
        assert got.get(name) == want.get(name), (name, *got.get(name, []), "KUEUE", *want.get(name, []))
