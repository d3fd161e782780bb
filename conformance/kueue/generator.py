"""Seeded random Kueue scenarios: flavors, cohort trees, quotas with borrowing and lending limits, priorities,
creation order and preemption policies.

Each class leans on one part of Kueue's admission; all draw from the same pieces so that every scenario is a
valid set of v1beta2 objects (what Kueue's webhooks would accept and default: the oracle registers none).

- ``quota``: one ClusterQueue or a few without a cohort: flavors in order, several resources, pod sets;
- ``cohort``: ClusterQueues sharing a cohort with borrowingLimit and lendingLimit, both queueing strategies;
- ``tree``: Cohort objects with parents and quota of their own;
- ``preemption``: a second phase meets running workloads: withinClusterQueue, reclaimWithinCohort,
  borrowWithinCohort, priorities from WorkloadPriorityClasses;
- ``flavors``: flavor node labels against pod node selectors, taints against tolerations, flavorFungibility.

The ``preemptiongates`` class (run alone, against a Kueue started with the ConcurrentAdmission feature gate, and
accelsched given the same Configuration) is the ``preemption`` class leaning on preemption (``_gated``), with
Workload preemption gates: some workloads list a gate in ``spec.preemptionGates``, closed (no position) or opened
in ``status.preemptionGates`` (the harness writes that status once the workload exists, as the controller owning
the gate would).

The ``fairsharing`` class (run alone) makes most of its scenarios a contest (``_contest``): one ClusterQueue, the
hog, gets most of the first phase and borrows the cohort's idle quota; another, the claimant, with a small
nominal quota, gets most of the second, so it must borrow too and preempts by share (Kueue's
``InCohortFairSharing``) rather than only reclaiming its nominal quota (``InCohortReclamation``).
"""

from __future__ import annotations

import random
from typing import Any

from conformance.kueue.scenario import JSON, KUEUE, Scenario

CLASSES = ("quota", "cohort", "tree", "preemption", "flavors")
# Run alone, against a Kueue started with fair sharing on (accelsched given the same Configuration): preemption
# scenarios in a flat cohort or a tree, with fairSharing weights on ClusterQueues and Cohorts.
FAIR_SHARING = "fairsharing"
FAIR_SHARING_STRATEGIES = ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
# Run alone, against a Kueue started with the feature gate that turns preemption gates on (accelsched given the
# same Configuration): the preemption class with gated workloads.
PREEMPTION_GATES = "preemptiongates"
PREEMPTION_GATES_FEATURES = {"ConcurrentAdmission": True}
GATE = "orchestrator"
GATED = 0.6  # the chance that a workload lists the gate
GATE_OPEN = 0.3  # the chance that a gated workload's status opens it
WEIGHTS = ("0", "0.5", "1", "1", "2")
CONTEST = 0.6  # the share of fairsharing scenarios that are a contest (_contest)
CONTEST_QUEUE = 0.75  # the chance that a contest's workload goes to its phase's ClusterQueue
GPU = "nvidia.com/gpu"
RESOURCES = ("cpu", GPU, "memory")
PRIORITIES = {"low": 10, "mid": 100, "high": 1000}


def generate(count: int, seed: int, classes: list[str] | None = None) -> list[Scenario]:
    classes = classes or list(CLASSES)
    return [build(classes[i % len(classes)], seed * 1_000_003 + i) for i in range(count)]


def build(klass: str, seed: int) -> Scenario:
    if klass == PREEMPTION_GATES:
        return _gated(build("preemption", seed))
    rng = random.Random(seed)
    resources = [r for r in RESOURCES[: rng.choice((1, 2, 2, 3))]]
    fair = klass == FAIR_SHARING
    if klass in ("preemption", "tree", FAIR_SHARING) or rng.random() < 0.5:
        resources = [GPU, *[r for r in resources if r != GPU]][:2]
    contest = fair and rng.random() < CONTEST
    if contest and rng.random() < 0.5:
        resources = [GPU]  # no second resource to block the contested one
    # a contest mostly on one flavor: with more, the hog's first phase rarely fills the cohort
    flavors = [_flavor(rng, i, klass) for i in range(rng.choice((1, 2, 2, 3) if not contest else (1, 1, 2)))]
    objects: list[JSON] = list(flavors)
    priorities = sorted(rng.sample(sorted(PRIORITIES), rng.choice((0, 2, 3)))) if klass != "quota" else []
    objects += [{"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": p},
                 "value": PRIORITIES[p]} for p in priorities]
    queues = rng.choice((1, 2, 3) if klass in ("quota", "flavors") else (2, 3, 4) if not contest else (3, 4))
    cohorts: list[str | None] = [None]
    if klass in ("cohort", "preemption", "flavors"):
        cohorts = ["co"] if klass != "flavors" or rng.random() < 0.5 else [None]
    if fair:
        cohorts = ["co"]
    if klass == "tree" or (fair and rng.random() < 0.4):
        objects += _tree(rng, resources, [f["metadata"]["name"] for f in flavors], fair)
        cohorts = ["root", "left", "right"]
    cq_names = [f"cq{i}" for i in range(queues)]
    for name in cq_names:
        objects.append(_cluster_queue(rng, name, rng.choice(cohorts), klass, resources, flavors))
    for i, name in enumerate(cq_names):
        objects.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": f"lq{i}"},
                        "spec": {"clusterQueue": name}})
    if rng.random() < 0.05:  # a LocalQueue pointing at a ClusterQueue that does not exist
        objects.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq-missing"},
                        "spec": {"clusterQueue": "cq-missing"}})
    hog, claimant = _contest(rng, [o for o in objects if o["kind"] == "ClusterQueue"]) if contest else (0, 0)
    counter = iter(range(1000))

    def queue(phase: int) -> int | None:
        """A contest's workload: most of the first phase to the hog, none of it to the claimant; most of the
        second to the claimant. Other scenarios draw the queue in _workload."""
        if not contest:
            return None
        if rng.random() < CONTEST_QUEUE:
            return (hog, claimant)[phase]
        return rng.choice([i for i in range(queues) if phase or i != claimant])

    first = rng.randint(2, 6) if not fair else rng.randint(4, 8) if not contest else rng.randint(6, 10)
    phases = [[_workload(rng, next(counter), queues, klass, resources, priorities, flavors, queue(0), contest)
               for _ in range(first)]]
    if klass in ("preemption", FAIR_SHARING) or rng.random() < 0.3:
        phases.append([_workload(rng, next(counter), queues, klass, resources, priorities, flavors, queue(1), contest)
                       for _ in range(rng.randint(1, 3) if not contest else rng.randint(2, 3))])
    return Scenario(klass, seed, objects, phases)


def _gated(s: Scenario) -> Scenario:
    """The preemption scenario leaning on preemption, with some of its workloads gated (drawn from their own seed):
    every ClusterQueue preempts lower priorities within itself and reclaims within its cohort, the first phase's
    workloads have priority 10 and the second's 1000, so a second-phase workload that does not fit mostly has
    candidates: gated, it waits; open, it preempts."""
    rng = random.Random(s.seed + 7)
    for cq in (o for o in s.objects if o["kind"] == "ClusterQueue"):
        preemption = cq["spec"].setdefault("preemption", {})
        preemption["withinClusterQueue"] = "LowerPriority"
        if cq["spec"].get("cohortName"):
            preemption["reclaimWithinCohort"] = "Any"
    for phase, priority in zip(s.phases, (10, 1000), strict=False):
        for wl in phase:
            wl["spec"].pop("priorityClassRef", None)
            wl["spec"]["priority"] = priority
            if rng.random() < GATED:
                wl["spec"]["preemptionGates"] = [{"name": GATE}]
                if rng.random() < GATE_OPEN:
                    wl["status"] = {"preemptionGates": [
                        {"name": GATE, "position": "Open", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    s.klass = PREEMPTION_GATES
    return s


def _contest(rng: random.Random, cluster_queues: list[JSON]) -> tuple[int, int]:
    """A hog for the first phase (6 to 10 workloads) and a claimant for the second (2 or 3), both with a small
    nominal quota (0 to 2 of each resource, no limits), and a lender with a large one (4 to 8): the hog borrows
    the lender's idle quota, and the claimant must borrow too. The claimant has a weight above 0 and may reclaim
    within the cohort (the candidates of a fair-sharing preemption in another ClusterQueue are found under
    reclaimWithinCohort). A contest's workloads are small (``_workload``'s ``small``), so that the hog holds
    several and one of them makes room."""
    hog, claimant, lender = rng.sample(range(len(cluster_queues)), 3)
    for i, nominal in ((hog, (0, 1, 2)), (claimant, (0, 1, 2)), (lender, (4, 6, 8))):
        for group in cluster_queues[i]["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for q in flavor["resources"]:
                    q["nominalQuota"] = _amount(q["name"], rng.choice(nominal))
                    q.pop("borrowingLimit", None)
                    q.pop("lendingLimit", None)
    spec = cluster_queues[claimant]["spec"]
    preemption = spec.setdefault("preemption", {"withinClusterQueue": "Never"})
    preemption["reclaimWithinCohort"] = rng.choice(("LowerPriority", "Any", "Any", "Any"))
    # A claimant of weight 0 borrowing has an infinite share and never preempts by share (the hog's may be 0)
    spec["fairSharing"] = {"weight": rng.choice(("0.5", "1", "1", "2"))}
    return hog, claimant


def _flavor(rng: random.Random, i: int, klass: str) -> JSON:
    spec: JSON = {}
    if klass == "flavors":
        if rng.random() < 0.5:
            spec["nodeLabels"] = {"accel": rng.choice(("a100", "h100"))}
        if rng.random() < 0.3:
            spec["nodeTaints"] = [{"key": "spot", "value": "true", "effect": rng.choice(("NoSchedule", "NoExecute"))}]
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"f{i}"}, "spec": spec}


def _quota(rng: random.Random, resource: str, cohort: bool) -> JSON:
    nominal = rng.choice((0, 1, 2, 4, 4, 6, 8))
    q: JSON = {"name": resource, "nominalQuota": _amount(resource, nominal)}
    if cohort and rng.random() < 0.3:
        q["borrowingLimit"] = _amount(resource, rng.choice((0, 1, 2, 4)))
    if cohort and rng.random() < 0.3:
        q["lendingLimit"] = _amount(resource, rng.randint(0, nominal))
    return q


def _amount(resource: str, n: int) -> Any:
    return f"{n * 4}Gi" if resource == "memory" else n


def _groups(rng: random.Random, resources: list[str], flavor_names: list[str], cohort: bool) -> list[JSON]:
    chosen = rng.sample(flavor_names, rng.randint(1, len(flavor_names)))
    return [{"coveredResources": list(resources),
             "flavors": [{"name": f, "resources": [_quota(rng, r, cohort) for r in resources]} for f in chosen]}]


def _cluster_queue(rng: random.Random, name: str, cohort: str | None, klass: str, resources: list[str],
                   flavors: list[JSON]) -> JSON:
    names = [f["metadata"]["name"] for f in flavors]
    spec: JSON = {"resourceGroups": _groups(rng, resources, names, cohort is not None)}
    if cohort:
        spec["cohortName"] = cohort
    if rng.random() < 0.3:
        spec["queueingStrategy"] = "StrictFIFO"
    if klass in ("preemption", "tree", "cohort", FAIR_SHARING) and rng.random() < 0.8:
        preemption: JSON = {"withinClusterQueue": rng.choice(("Never", "LowerPriority", "LowerOrNewerEqualPriority"))}
        if cohort:
            preemption["reclaimWithinCohort"] = rng.choice(
                ("Never", "LowerPriority", "Any") if klass != FAIR_SHARING else ("LowerPriority", "Any", "Any"))
            if preemption["reclaimWithinCohort"] != "Never" and rng.random() < 0.4:
                borrow: JSON = {"policy": "LowerPriority"}
                if rng.random() < 0.5:
                    borrow["maxPriorityThreshold"] = rng.choice(sorted(PRIORITIES.values()))
                preemption["borrowWithinCohort"] = borrow
        spec["preemption"] = preemption
    if klass == FAIR_SHARING and rng.random() < 0.8:
        spec["fairSharing"] = {"weight": rng.choice(WEIGHTS)}
    if klass == "flavors" and rng.random() < 0.5:
        spec["flavorFungibility"] = {"whenCanBorrow": rng.choice(("MayStopSearch", "TryNextFlavor")),
                                     "whenCanPreempt": rng.choice(("MayStopSearch", "TryNextFlavor"))}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _tree(rng: random.Random, resources: list[str], flavor_names: list[str], fair: bool = False) -> list[JSON]:
    """root <- left, right: Cohort objects, some with quota of their own (and, for fair sharing, weights)."""
    out = []
    for name, parent in (("root", None), ("left", "root"), ("right", "root")):
        spec: JSON = {}
        if fair and parent and rng.random() < 0.6:
            spec["fairSharing"] = {"weight": rng.choice(WEIGHTS)}
        if parent:
            spec["parentName"] = parent
        if rng.random() < 0.4:
            spec["resourceGroups"] = _groups(rng, resources, flavor_names, parent is not None)
        out.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec})
    return out


def _workload(rng: random.Random, i: int, queues: int, klass: str, resources: list[str], priorities: list[str],
              flavors: list[JSON], queue: int | None = None, small: bool = False) -> JSON:
    pod_sets = []
    for j in range(rng.choice((1, 1, 1, 2) if not small else (1,))):
        amounts, counts = ((1, 1, 2, 3), (1, 1, 2, 3)) if not small else ((1, 1, 2), (1, 1, 2))
        requests = {r: str(_amount(r, rng.choice(amounts))) for r in resources if rng.random() < 0.85}
        requests = requests or {resources[0]: "1"}
        if rng.random() < 0.05:
            # A resource no ClusterQueue covers, alone in its pod set: beside covered ones, which of the pod set's
            # resources Kueue's message names depends on its walk of a Go map (random), so no answer is Kueue's.
            requests = {"example.com/foo": "1"}
        pod: JSON = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": requests}}], "restartPolicy": "Never"}
        if klass == "flavors" and rng.random() < 0.4:
            pod["nodeSelector"] = {"accel": rng.choice(("a100", "h100"))}
        if klass == "flavors" and rng.random() < 0.4:
            pod["tolerations"] = [{"key": "spot", "operator": "Exists"}]
        pod_sets.append({"name": "main" if j == 0 else f"ps{j}", "count": rng.choice(counts),
                         "template": {"spec": pod}})
    spec: JSON = {"queueName": f"lq{rng.randrange(queues) if queue is None else queue}", "podSets": pod_sets}
    if rng.random() < 0.03:
        spec["queueName"] = "lq-nowhere"
    if priorities and rng.random() < 0.8:
        p = rng.choice(priorities)
        spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": p}
        spec["priority"] = PRIORITIES[p]
    elif rng.random() < 0.2:
        spec["priority"] = rng.choice((0, 50, 500))
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": f"w{i}"}, "spec": spec}
