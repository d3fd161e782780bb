"""Live mode's queue side: the Kueue objects (and the fabric objects beside them) read from the cluster.

One list of what to read, used by every live reader (``accelsched run``'s informers, the web view's, and
``schedule``/``explain --from-cluster``), so all three see the same objects. Each object goes through the file
reader's path (live.convert's Snapshot -> loader Documents -> accelsched/queues and accelsched/fabric), so the
checks and the semantics are the file mode's; one the parsers reject is left out and reported, the rest is used.

Every resource here is optional: a cluster without Kueue's CRDs (or Volcano's) answers 404 and is served as
before. Kueue's kinds are read at ``kueue.x-k8s.io/v1beta2`` (the storage version of Kueue v0.19.2). Volcano's
HyperNodes (``topology.volcano.sh/v1alpha1``) are passed on under their kind; where no parser knows the kind, the
loader reads past it as any other unknown kind. Jobs are read because Kueue makes one workload of the pods of a Job
carrying the queue-name label, named after the Job (queues/workloads.py), and the pods do not carry the label: a
pod's Job must be known to tell whether the pod is queued (all Jobs are watched, so that one without the label is
known not to be, rather than not seen yet).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import yaml

from accelsched.api.loader import Document
from accelsched.api.objects import Pod
from accelsched.fabric import levels as fabric_levels
from accelsched.live.kube import JSON, ApiError, Kube, Resource
from accelsched.queues import api as queue_api
from accelsched.queues.admission import EVICTED, QueueResult

API = f"/apis/{queue_api.API_VERSION}"
HYPERNODE_API_VERSION = "topology.volcano.sh/v1alpha1"
JOB = "Job"
# Kueue's own Configuration (fair sharing, admission fair sharing), as Kueue's manifests install it: the
# controller_manager_config.yaml key of the kueue-manager-config ConfigMap in kueue-system. Only that namespace's
# ConfigMaps are listed (the namespace is in the path).
CONFIG = "KueueConfiguration"
CONFIG_NAMESPACE, CONFIG_MAP, CONFIG_KEY = "kueue-system", "kueue-manager-config", "controller_manager_config.yaml"
TERMINATION_TARGET = "TerminationTarget"  # pkg/controller/jobs/pod ConditionTypeTerminationTarget
WAITING = "waiting for quota"  # how a held pod's message starts (the queue layer's own, for a StrictFIFO wait)
# kind -> where it lives: the informers every live reader keeps (all optional).
RESOURCES = {
    "ResourceFlavor": Resource(API, "resourceflavors", namespaced=False),
    "ClusterQueue": Resource(API, "clusterqueues", namespaced=False),
    "Cohort": Resource(API, "cohorts", namespaced=False),
    "LocalQueue": Resource(API, "localqueues"),
    "WorkloadPriorityClass": Resource(API, "workloadpriorityclasses", namespaced=False),
    "Workload": Resource(API, "workloads"),
    fabric_levels.KIND: Resource(API, "topologies", namespaced=False),
    "HyperNode": Resource(f"/apis/{HYPERNODE_API_VERSION}", "hypernodes", namespaced=False),
    JOB: Resource("/apis/batch/v1", "jobs"),
    CONFIG: Resource(f"/api/v1/namespaces/{CONFIG_NAMESPACE}", "configmaps", namespaced=False),
}
API_VERSIONS = {kind: queue_api.API_VERSION for kind in RESOURCES} | {
    "HyperNode": HYPERNODE_API_VERSION,
    JOB: "batch/v1",
    CONFIG: "v1",
}


def documents(objects: Mapping[str, Iterable[JSON]], source: str) -> list[Document]:
    """The objects (kind -> list) as the loader's documents, each with its kind and apiVersion (a list's items
    may lack them). Jobs are not documents here: the loader would make pods of them, and in a cluster the Job
    controller has made them already (live.convert reads their labels)."""
    out = []
    for kind, items in objects.items():
        if kind == CONFIG:
            out += config_documents(items)
            continue
        if kind == JOB:
            continue
        for doc in items:
            if doc.get("kind") != kind or not doc.get("apiVersion"):
                doc = {**doc, "kind": kind, "apiVersion": doc.get("apiVersion") or API_VERSIONS[kind]}
            out.append(Document(doc, source, kind))
    return out


def config_documents(config_maps: Iterable[JSON]) -> list[Document]:
    """Kueue's Configuration from its ConfigMap, as a document of the input (queues.config reads it as it reads
    the file given with -f; a bad field is an error naming it). A ConfigMap without the key, or whose text is not
    one YAML mapping, gives none: Kueue itself would not have started with it."""
    for config_map in config_maps:
        if (config_map.get("metadata") or {}).get("name") != CONFIG_MAP:
            continue
        text = (config_map.get("data") or {}).get(CONFIG_KEY)
        try:
            doc = yaml.safe_load(text) if isinstance(text, str) else None
        except yaml.YAMLError:
            doc = None
        if isinstance(doc, dict):
            source = f"ConfigMap {CONFIG_NAMESPACE}/{CONFIG_MAP} ({CONFIG_KEY})"
            return [Document(doc, source, str(doc.get("kind") or ""))]
    return []


def list_objects(kube: Kube) -> dict[str, list[JSON]]:
    """Every kind of RESOURCES listed once (a resource not served: none), for the one-shot readers."""
    out: dict[str, list[JSON]] = {}
    for kind, resource in RESOURCES.items():
        try:
            out[kind] = kube.list(resource).get("items") or []
        except ApiError as exc:
            if exc.status != 404:
                raise
            out[kind] = []
    return out


# ---------------------------------------------------------------------------------------------- door 2: queued pods


def is_queued(obj: JSON, jobs: Mapping[str, JSON]) -> bool | None:
    """Whether a pod belongs to a workload the queues admit (queues/workloads.py): it carries the queue-name label,
    or its controller is a Job that does (``jobs``: the Jobs by namespace/name). None: its Job is not in ``jobs``
    (not seen yet, or gone)."""
    meta = obj.get("metadata") or {}
    if queue_api.QUEUE_NAME_LABEL in (meta.get("labels") or {}):
        return True
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") == JOB:
            job = jobs.get(f"{meta.get('namespace')}/{ref.get('name')}")
            return None if job is None else bool(queue_api.queue_name(job))
    return False


def waiting_message(cluster_queue: str, message: str) -> str:
    """A held pod's PodScheduled message: what its workload waits for, in Kueue's words, naming the ClusterQueue
    (a pod does not say which ClusterQueue its LocalQueue points at)."""
    if not cluster_queue or message.startswith(WAITING):
        return message
    return f"{WAITING} in ClusterQueue {cluster_queue}: {message}"


def held_pods(result: QueueResult, preempting: int = 0) -> dict[str, str]:
    """Pending pods (namespace/name) of workloads not admitted -> their PodScheduled message. ``preempting``: how
    many workloads admission stopped that still run; while they do, the pods of the workloads it admitted wait
    too (the room they were admitted to is still taken)."""
    out = {}
    for o in result.outcomes:
        if o.admitted and not preempting:
            continue
        why = f"Pending the preemption of {preempting} workload(s)" if o.admitted else o.held_message
        message = waiting_message(o.cluster_queue, why or "not admitted")
        out.update({p.key: message for p in o.info.pods if not p.node_name})
    return out


@dataclass(frozen=True)
class Stop:
    """A running pod of a workload admission stopped (preempted, or drained by a stopped queue): what Kueue's pod
    integration does to it (pod_controller.go Stop): the TerminationTarget condition, then a delete."""

    pod: Pod
    node: str
    workload: str  # namespace/name
    reason: str  # jobframework's StopReason: WorkloadEvictedDueTo<the Evicted condition's reason>
    message: str  # the Evicted condition's message


def stops(result: QueueResult, bound: Callable[[str], str]) -> list[Stop]:
    """The pods admission stopped that still run. ``bound``: a pod key -> its node in the cache ('' if none)."""
    out = []
    for o in result.outcomes:
        condition = next((c for c in o.conditions if c["type"] == EVICTED and c["status"] == "True"), None)
        if condition is None:
            continue
        reason = f"WorkloadEvictedDueTo{condition['reason']}"
        out += [Stop(p, node, o.info.key, reason, condition["message"]) for p in o.info.pods if (node := bound(p.key))]
    return out


def termination_target(stop: Stop, now: str) -> JSON:
    """The status patch Kueue's pod integration applies before deleting a stopped workload's pod."""
    condition = {
        "type": TERMINATION_TARGET,
        "status": "True",
        "reason": stop.reason,
        "message": stop.message,
        "lastTransitionTime": now,
    }
    return {"status": {"conditions": [condition]}}
