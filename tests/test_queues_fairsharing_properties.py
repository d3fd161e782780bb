"""Properties of admission with Kueue's fair sharing on, over random cohort trees, weights and workloads.

- quota is never overdrawn: after admission no ClusterQueue uses more than it may (``available`` is never
  negative: nominal quota, what the cohort lends, the borrowing limit), and no cohort more than its subtree holds;
- preemption does not loop (no workload preempts the same victim twice, the victim readmitted in between: a
  preempt/readmit cycle; no two workloads preempt each other) where Kueue's rules converge: queues sharing one
  resource, with the PrioritizePreemptorWorkloads gate on, and no preemption within a ClusterQueue;
- the tree's usage is exactly that of the admitted workloads.

Elsewhere Kueue's own rules can loop, and this model follows them (found by this test, each case worked through
by hand from fair_sharing.go, preemption.go, fair_sharing_iterator.go and the queue manager; not run against the
real Kueue):
- with the gate off (Kueue's default), a victim requeued while its preemptor waits competes with it in the next
  cycle's tournament and can win it (a tie in share goes to the priority, then the creation time), taking the
  room back; the gate (alpha) exists for this (Kueue#6929, #7101);
- with two resources a share is the *dominant* resource's, so a victim's queue can keep its share after losing a
  workload that uses another resource (LessThanOrEqualToFinalShare passes on the tie), and two queues can preempt
  each other on different resources under rule S2-b;
- a preemption within a ClusterQueue (a higher priority evicting the workload that had reclaimed the room) frees
  room a victim of the other queue is readmitted into, to be reclaimed again.
In 4,000 generated scenarios of every class, 14 looped (about 0.4%). The other classes are checked for
everything but the loop.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from accelsched.api import loader
from accelsched.queues import admission, quota
from accelsched.queues.resources import value

KUEUE = "kueue.x-k8s.io/v1beta2"
RESOURCES = ("cpu", "example.com/gpu")
WITHIN = ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]


def _resources(nominals: dict[str, int], borrowing: int | None) -> list[dict[str, Any]]:
    out = []
    for name in nominals:
        q: dict[str, Any] = {"name": name, "nominalQuota": nominals[name]}
        if borrowing is not None:
            q["borrowingLimit"] = borrowing
        out.append(q)
    return out


@st.composite
def scenarios(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A root cohort with quota of its own, an optional sub-cohort, 2-4 ClusterQueues, running workloads that fit
    (admitted in order against the tree, as a live cluster would hold them) and pending ones. Half of them are
    of the class that must converge (one resource, PrioritizePreemptorWorkloads on, no preemption within a
    ClusterQueue)."""
    converging = draw(st.booleans())
    docs: list[dict[str, Any]] = [
        {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
         "fairSharing": {"preemptionStrategies": draw(st.sampled_from(
             [["LessThanOrEqualToFinalShare", "LessThanInitialShare"], ["LessThanOrEqualToFinalShare"],
              ["LessThanInitialShare"]]))},
         "featureGates": {"PrioritizePreemptorWorkloads": converging or draw(st.booleans())}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
    ]  # fmt: skip
    resources = RESOURCES[: 1 if converging else draw(st.integers(1, 2))]
    cohorts = ["root"] + (["sub"] if draw(st.booleans()) else [])
    weights = st.sampled_from(["0", "0.5", "1", "2"] if draw(st.integers(0, 3)) == 0 else ["0.5", "1", "2"])
    for name in cohorts:
        spec: dict[str, Any] = {"fairSharing": {"weight": draw(weights)}}
        own = draw(st.integers(0, 2))
        if own:
            spec["resourceGroups"] = [{"coveredResources": list(resources), "flavors": [
                {"name": "default", "resources": _resources(dict.fromkeys(resources, own), None)}]}]  # fmt: skip
        if name == "sub":
            spec["parentName"] = "root"
        docs.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec})
    names = [f"cq{i}" for i in range(draw(st.integers(2, 4)))]
    for name in names:
        borrowing = draw(st.sampled_from([None, None, 0, 1, 3]))
        nominals = {r: draw(st.integers(0, 3)) for r in resources}
        spec = {
            "cohortName": draw(st.sampled_from(cohorts)),
            "namespaceSelector": {},
            "queueingStrategy": draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])),
            "fairSharing": {"weight": draw(weights)},
            "preemption": {
                "withinClusterQueue": "Never" if converging else draw(st.sampled_from(WITHIN)),
                "reclaimWithinCohort": draw(st.sampled_from(["Never", "LowerPriority", "Any", "Any"])),
            },
            "resourceGroups": [{"coveredResources": list(resources), "flavors": [
                {"name": "default", "resources": _resources(nominals, borrowing)}]}],
        }  # fmt: skip
        docs.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
        docs.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": "default"},
                     "spec": {"clusterQueue": name}})  # fmt: skip
    tree = quota.build(loader.build_inputs([loader.Document(d, "x", d["kind"]) for d in docs]).queues)
    for i in range(draw(st.integers(3, 14))):
        cq = draw(st.sampled_from(names))
        requests = {r: draw(st.integers(0, 3)) for r in resources}
        if not any(requests.values()):
            requests["cpu"] = 1
        node = tree.cluster_queues[cq]
        amounts = {("default", r): value(r, str(v)) for r, v in requests.items()}  # Kueue's units (cpu in m)
        running = draw(st.integers(0, 3)) > 0 and all(node.available(fr) >= v for fr, v in amounts.items())
        if running:
            for fr, v in amounts.items():
                node.add_usage(fr, v)
        docs.append(_workload(f"w{i}", cq, requests, draw(st.integers(0, 3)), i, running))
    return docs


def _workload(name: str, cq: str, requests: dict[str, int], priority: int, i: int, running: bool) -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"requests": {r: str(v) for r, v in requests.items()}}}
    pod_set = {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
    doc: dict[str, Any] = {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "uid": name,
                     "creationTimestamp": f"2026-01-01T00:00:{i:02d}Z"},
        "spec": {"queueName": cq, "priority": priority, "podSets": [pod_set]},
    }  # fmt: skip
    if running:
        doc["status"] = {"admission": {"clusterQueue": cq, "podSetAssignments": [
            {"name": "main", "flavors": dict.fromkeys(requests, "default"), "count": 1}]}}  # fmt: skip
    return doc


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_fair_sharing_never_overdraws_quota_and_never_preempts_in_a_loop(docs: list[dict[str, Any]]) -> None:
    inputs = loader.build_inputs([loader.Document(d, "x", d["kind"]) for d in docs])
    evictions: list[tuple[str, str]] = []  # (preemptor, victim): the preemptor's UID is its name here
    real_evict = admission.Outcome.evict

    def counting_evict(self: admission.Outcome, reason: str, message: str) -> None:
        evictions.append((message.split("(UID: ", 1)[1].split(",", 1)[0], self.info.name))
        real_evict(self, reason, message)

    with mock.patch.object(admission.Outcome, "evict", counting_evict):
        result = admission.admit(inputs.queues, inputs.pods, inputs.namespaces, inputs.nodes)
    for name, node in result.tree.cluster_queues.items():
        for fr in node.quotas:
            assert node.available(fr) >= 0, f"{name} overdraws {fr}: usage {node.usage.get(fr, 0)}"
    for name, node in result.tree.cohorts.items():
        if node.parent is None:
            for fr, held in node.subtree.items():
                assert node.usage.get(fr, 0) <= held, f"cohort {name} overdraws {fr}"
    one_resource = all(
        len(d["spec"]["resourceGroups"][0]["coveredResources"]) == 1 for d in docs if d["kind"] == "ClusterQueue"
    )
    gate = docs[0]["featureGates"]["PrioritizePreemptorWorkloads"]
    within = any(d["spec"]["preemption"]["withinClusterQueue"] != "Never" for d in docs if d["kind"] == "ClusterQueue")
    if one_resource and gate and not within:  # see the module docstring
        assert len(evictions) == len(set(evictions)), f"a preemption repeats: {evictions}"
        assert not any((v, p) in evictions for p, v in evictions), f"two workloads preempt each other: {evictions}"
    admitted = {o.info.name for o in result.outcomes if o.admitted}
    usage = {name: dict(node.usage) for name, node in result.tree.cluster_queues.items()}
    expected: dict[str, dict[tuple[str, str], int]] = {name: {} for name in usage}
    for o in result.outcomes:
        if o.info.name in admitted:
            for ps in o.info.pod_sets:
                for r, v in ps.requests.items():
                    fr = (o.flavors[ps.name][r], r)
                    expected[o.cluster_queue][fr] = expected[o.cluster_queue].get(fr, 0) + v * ps.count
    for name in usage:  # the tree holds exactly what the admitted workloads use
        assert {k: v for k, v in usage[name].items() if v} == {k: v for k, v in expected[name].items() if v}
