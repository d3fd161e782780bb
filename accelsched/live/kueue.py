"""Live mode's queue side: the Kueue objects (and the fabric objects beside them) read from the cluster.

One list of what to read, used by every live reader (``accelsched run``'s informers, the web view's, and
``schedule``/``explain --from-cluster``), so all three see the same objects. Each object goes through the file
reader's path (live.convert's Snapshot -> loader Documents -> accelsched/queues and accelsched/fabric), so the
checks and the semantics are the file mode's; one the parsers reject is left out and reported, the rest is used.

Every resource here is optional: a cluster without Kueue's CRDs (or Volcano's) answers 404 and is served as
before. Kueue's kinds are read at ``kueue.x-k8s.io/v1beta2`` (the storage version of Kueue v0.19.2). Volcano's
HyperNodes (``topology.volcano.sh/v1alpha1``) are passed on under their kind; where no parser knows the kind, the
loader reads past it as any other unknown kind. Jobs are read only when they carry the queue-name label: Kueue makes
one workload of a Job's pods, named after the Job (queues/workloads.py), and the pods do not carry the label.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from accelsched.api.loader import Document
from accelsched.fabric import levels as fabric_levels
from accelsched.live.kube import JSON, ApiError, Kube, Resource
from accelsched.queues import api as queue_api

API = f"/apis/{queue_api.API_VERSION}"
HYPERNODE_API_VERSION = "topology.volcano.sh/v1alpha1"
JOB = "Job"
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
}
# The list and watch query of a kind (only the queued Jobs: a cluster's other Jobs are no business of the queues).
QUERIES: dict[str, dict[str, str]] = {JOB: {"label_selector": queue_api.QUEUE_NAME_LABEL}}
API_VERSIONS = {kind: queue_api.API_VERSION for kind in RESOURCES} | {
    "HyperNode": HYPERNODE_API_VERSION,
    JOB: "batch/v1",
}


def documents(objects: Mapping[str, Iterable[JSON]], source: str) -> list[Document]:
    """The objects (kind -> list) as the loader's documents, each with its kind and apiVersion (a list's items
    may lack them). Jobs are not documents here: the loader would make pods of them, and in a cluster the Job
    controller has made them already (live.convert reads their labels)."""
    out = []
    for kind, items in objects.items():
        if kind == JOB:
            continue
        for doc in items:
            if doc.get("kind") != kind or not doc.get("apiVersion"):
                doc = {**doc, "kind": kind, "apiVersion": doc.get("apiVersion") or API_VERSIONS[kind]}
            out.append(Document(doc, source, kind))
    return out


def list_objects(kube: Kube) -> dict[str, list[JSON]]:
    """Every kind of RESOURCES listed once (a resource not served: none), for the one-shot readers."""
    out: dict[str, list[JSON]] = {}
    for kind, resource in RESOURCES.items():
        try:
            out[kind] = kube.list(resource, **QUERIES.get(kind, {})).get("items") or []
        except ApiError as exc:
            if exc.status != 404:
                raise
            out[kind] = []
    return out
