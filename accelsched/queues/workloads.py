"""The workloads Kueue would queue: Workload objects, and the pods, pod groups and Jobs carrying a queue name.

Named as Kueue's controllers name them (pkg/controller/jobframework/workload_names.go): a Job's Workload is
``job-<name>-<hash>`` and a plain pod's ``pod-<name>-<hash>``, the hash the first 5 hex digits of the SHA-1 of
kind, group, name and uid, one per line; a pod group's Workload is the group's name
(``kueue.x-k8s.io/pod-group-name``). A pod group has one pod set per pod shape, named by Kueue's role hash
(pkg/util/pod GenerateRoleHash); a Job and a plain pod have one pod set, ``main``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from accelsched.api import objects, quantity
from accelsched.api.objects import Pod
from accelsched.api.selectors import NodeSelectorTerm, Toleration
from accelsched.errors import InputError
from accelsched.queues import api

_HASH_LENGTH = 5
_MAX_PREFIX = 253 - 1 - _HASH_LENGTH  # maxWorkloadNameLength (ShortWorkloadNames off) less "-" and the hash
# (kind, group) of the owners Kueue names workloads after.
POD_GVK = ("Pod", "")
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
JOB_GVK = ("Job", "batch")
FINISHED = "Finished"  # kueue.WorkloadFinished


@dataclass
class PodSet:
    """One pod set: ``count`` pods of one shape (its per-pod requests and what flavor matching reads)."""

    name: str
    count: int
    requests: dict[str, int]
    tolerations: tuple[Toleration, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] | None = None
    pods: list[Pod] = field(default_factory=list)  # its pods in the input (none for a bare Workload object)


@dataclass
class Info:
    """A workload as the queues see it (Kueue's workload.Info)."""

    namespace: str
    name: str
    queue_name: str
    pod_sets: list[PodSet]
    priority: int = 0
    created: str = ""  # creationTimestamp; with ``order`` (the input's order) it is the queue order
    order: int = 0
    uid: str = ""  # the Workload's own uid, when the input has the Workload (else the API server would make one)
    job_uid: str = ""  # its owner's (Kueue's kueue.x-k8s.io/job-uid label): the Job's, or the pod's
    admitted: dict[str, dict[str, str]] | None = None  # pod set -> resource -> flavor, when it runs already
    waiting: str = ""  # why Kueue has made no Workload yet (a pod group short of its total count)
    # Evicted (Evicted=True) while it still holds its reservation: its job has not let go yet (an input read off a
    # cluster in the middle of a preemption). Kueue's preemptors target such a workload first (CandidatesOrdering).
    evicted: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pods(self) -> list[Pod]:
        return [p for ps in self.pod_sets for p in ps.pods]

    def equivalence(self) -> tuple:
        """The scheduling equivalence class (computeSchedulingHash): priority and each pod set's name, count,
        requests and what flavor matching reads. Workloads of one class fit or not alike."""
        shapes = tuple(
            (ps.name, ps.count, tuple(sorted(ps.requests.items())), repr(ps.tolerations),
             tuple(sorted(ps.node_selector.items())), repr(ps.required_terms))
            for ps in self.pod_sets
        )  # fmt: skip
        return (self.priority, shapes)


def workload_name(owner_name: str, owner_uid: str, gvk: tuple[str, str]) -> str:
    """GetWorkloadNameForOwnerWithGVK: ``<kind>-<owner name>`` cut to fit, a dash, and 5 hex digits of the hash."""
    kind, group = gvk
    digest = hashlib.sha1("\n".join((kind, group, owner_name, owner_uid)).encode()).hexdigest()
    return f"{(kind.lower() + '-' + owner_name)[:_MAX_PREFIX]}-{digest[:_HASH_LENGTH]}"


# ---------------------------------------------------------------------------------------------- pod shapes


def _canonical(name: str, raw: Any) -> str:
    """resource.Quantity's canonical String() of a request as written (its JSON form in Kueue's role hash)."""
    exact = quantity.parse_fraction(raw)
    binary = isinstance(raw, str) and raw.strip().endswith("i")
    if binary and exact.denominator == 1 and (exact <= -1024 or exact >= 1024):
        whole = int(exact)
        for suffix, shift in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
            if whole % (1 << shift) == 0:
                return f"{whole >> shift}{suffix}"
        return str(whole)
    exponent = -9
    while exponent < 18 and (exact / Fraction(10) ** (exponent + 3)).denominator == 1:
        exponent += 3
    mantissa = exact / Fraction(10) ** exponent
    if mantissa.denominator != 1:  # finer than a nano: resource.Quantity rounds up
        mantissa = Fraction(math.ceil(mantissa))
    suffix = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}[exponent]
    return f"{int(mantissa)}{suffix}" if mantissa else "0"


def _sorted(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A Go map as json.Marshal writes it: keys in order (structs keep their field order, so no global sort)."""
    return {str(k): mapping[k] for k in sorted(mapping, key=str)}


def _containers_shape(containers: Any) -> list[dict[str, Any]] | None:
    """ContainersShape: each container's requests (defaulted from limits, as the API server does) and ports."""
    if not containers:
        return None
    out = []
    for c in containers:
        res = (c.get("resources") or {}) if isinstance(c, Mapping) else {}
        requests = dict(res.get("requests") or {})
        for name, limit in (res.get("limits") or {}).items():
            requests.setdefault(name, limit)
        ports = [  # corev1.ContainerPort's field order; protocol defaulted to TCP
            {
                **({"name": p["name"]} if p.get("name") else {}),
                **({"hostPort": p["hostPort"]} if p.get("hostPort") else {}),
                "containerPort": p.get("containerPort", 0),
                "protocol": p.get("protocol") or "TCP",
                **({"hostIP": p["hostIP"]} if p.get("hostIP") else {}),
            }
            for p in c.get("ports") or []
        ]
        shaped = _sorted({str(k): _canonical(str(k), v) for k, v in requests.items()})
        out.append({"ports": ports or None, "resources": {"requests": shaped or None}})
    return out


def _tolerations_shape(tolerations: Any) -> list[dict[str, Any]] | None:
    keys = ("key", "operator", "value", "effect", "tolerationSeconds")  # corev1.Toleration's field order
    return [{k: t[k] for k in keys if t.get(k) not in (None, "")} for t in tolerations] if tolerations else None


def role_hash(spec: Mapping[str, Any], priority: int) -> str:
    """GenerateRoleHash: 8 hex digits of the SHA-256 of the pod's shape as Go's json.Marshal writes it.

    Byte-exact for what pods usually carry (requests and limits, ports, nodeSelector, tolerations, priority:
    checked against Kueue's own function); affinity, topology spread constraints and resource claims are written
    in the manifest's key order where Go keeps its struct order, so pods using them get a hash of their own,
    consistent within a run, not necessarily Kueue's."""
    shape: dict[str, Any] = {
        "affinity": spec.get("affinity"),
        "containers": _containers_shape(spec.get("containers")),
        "initContainers": _containers_shape(spec.get("initContainers")),
        "nodeSelector": _sorted(spec["nodeSelector"]) if spec.get("nodeSelector") else None,
        "overhead": _sorted({k: _canonical(k, v) for k, v in spec["overhead"].items()})
        if spec.get("overhead")
        else None,
        "priority": priority,
        "resourceClaims": spec.get("resourceClaims") or None,
        "runtimeClassName": spec.get("runtimeClassName"),
        "tolerations": _tolerations_shape(spec.get("tolerations")),
        "topologySpreadConstraints": spec.get("topologySpreadConstraints") or None,
    }
    if spec.get("resources") is not None:
        requests = (spec.get("resources") or {}).get("requests") or {}
        shape["resources"] = _sorted({k: _canonical(k, v) for k, v in requests.items()}) or None
    text = json.dumps({"spec": _sorted(shape)}, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _pod_set(name: str, pods: list[Pod]) -> PodSet:
    first = pods[0]
    requests = {r: v for r, v in first.requests.items() if v and r != quantity.PODS}
    return PodSet(
        name, len(pods), requests, first.tolerations, dict(first.node_selector), first.required_node_affinity, pods
    )


def _template_pod_set(obj: api.WorkloadObject, spec: api.PodSetSpec) -> PodSet:
    """A Workload's pod set, its template read as a pod would be (requests as admission defaults them): read once
    per WorkloadObject (its ``template_pod_sets``), each Info getting its own copy."""
    read = obj.template_pod_sets.get(spec.name)
    if read is None:
        read = obj.template_pod_sets[spec.name] = _read_template(obj, spec)
    return PodSet(
        read.name, read.count, dict(read.requests), read.tolerations, dict(read.node_selector), read.required_terms
    )


def _read_template(obj: api.WorkloadObject, spec: api.PodSetSpec) -> PodSet:
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{obj.name}-{spec.name}", "namespace": obj.namespace},
        "spec": (spec.template or {}).get("spec") or {},
    }
    try:
        pod = objects.parse_pod(doc, obj.source)
    except InputError as exc:
        where = objects.describe("Workload", obj.namespace, obj.name)
        raise InputError(
            exc.message, source=obj.source, obj=where, field=f"spec.podSets[{spec.name}].template.{exc.field}"
        ) from None
    ps = _pod_set(spec.name, [pod])
    ps.count, ps.pods = spec.count, []
    return ps


# ---------------------------------------------------------------------------------------------- finding them


def _priority(labels: Mapping[str, str], pod: Pod, queues: api.QueueObjects) -> int:
    """WorkloadPriorityClass (the kueue.x-k8s.io/priority-class label) first, else the pod's own priority."""
    wpc = queues.priority_classes.get(labels.get(api.PRIORITY_CLASS_LABEL, ""))
    return wpc.value if wpc is not None else pod.priority


def _admitted_on(pods: list[Pod]) -> bool:
    return any(p.node_name for p in pods)


def finished(obj: api.WorkloadObject) -> bool:
    """Finished=True (workload.IsFinished): Kueue's workload controller takes it out of the queues and the cache, so
    it neither waits nor holds quota, whatever its status.admission still says."""
    return _has(obj, FINISHED, "True")


def _released(obj: api.WorkloadObject) -> bool:
    """QuotaReserved=False beside a status.admission left in place: the reservation was unset (an evicted workload
    whose job was stopped), which Kueue reads from the condition (workload.HasQuotaReservation), not the field."""
    return _has(obj, "QuotaReserved", "False")


def _has(obj: api.WorkloadObject, type_: str, status: str) -> bool:
    """Whether the Workload has a condition of ``type_`` with ``status``."""
    return any(c.get("type") == type_ and c.get("status") == status for c in _conditions(obj))


def _conditions(obj: api.WorkloadObject) -> list[Mapping[str, Any]]:
    return [c for c in obj.conditions if isinstance(c, Mapping)]


def find(queues: api.QueueObjects, pods: list[Pod]) -> list[Info]:
    """Every workload of the input, in input order: Workload objects first, then those made from pods. A Workload
    object Kueue made for a Job, pod or pod group of the input (a cluster dump holds both) is that workload: its
    pods join it, matched by name, rather than making a second one."""
    infos = _find(queues, pods)
    made = sum(not finished(obj) for obj in queues.workloads.values())  # the Workload objects' infos come first
    objects_by_key = {i.key: i for i in infos[:made]}
    out = infos[:made]
    for info in infos[made:]:
        own = objects_by_key.get(info.key)
        if own is None:
            out.append(info)
            continue
        for ps in own.pod_sets:
            ps.pods = [p for derived in info.pod_sets if derived.name == ps.name for p in derived.pods]
        if own.admitted is None and any(p.node_name for p in own.pods):
            own.admitted = {}
    return out


def _find(queues: api.QueueObjects, pods: list[Pod]) -> list[Info]:
    infos: list[Info] = []
    for obj in queues.workloads.values():
        if finished(obj):
            continue
        info = Info(
            obj.namespace,
            obj.name,
            obj.queue_name,
            [_template_pod_set(obj, ps) for ps in obj.pod_sets],
            obj.priority or 0,
            obj.created,
            len(infos),
            obj.uid,
            obj.labels.get(JOB_UID_LABEL, ""),
        )
        if obj.admission and not _released(obj):
            info.admitted = {
                str(psa.get("name")): {str(r): str(f) for r, f in (psa.get("flavors") or {}).items()}
                for psa in obj.admission.get("podSetAssignments") or []
            }
            info.evicted = _has(obj, "Evicted", "True")
        infos.append(info)
    groups: dict[tuple[str, str], list[Pod]] = {}
    jobs: dict[tuple[str, str], list[Pod]] = {}
    for pod in pods:
        if pod.terminal:
            continue
        job_key = f"{pod.namespace}/{pod.owner_name}"
        if pod.owner_kind == "Job" and job_key in queues.jobs:
            jobs.setdefault((pod.namespace, pod.owner_name), []).append(pod)
        elif api.QUEUE_NAME_LABEL in pod.labels and api.POD_GROUP_NAME_LABEL in pod.labels:
            groups.setdefault((pod.namespace, pod.labels[api.POD_GROUP_NAME_LABEL]), []).append(pod)
        elif api.QUEUE_NAME_LABEL in pod.labels:
            name = workload_name(pod.name, pod.uid, POD_GVK)
            sets = [(api.DEFAULT_POD_SET_NAME, [pod])]
            infos.append(_from_pods(name, pod.labels, sets, queues, len(infos), pod.uid))
    for (namespace, job), members in jobs.items():
        labels = queues.jobs[f"{namespace}/{job}"]
        uid = _owner_uid(members[0])
        sets = [(api.DEFAULT_POD_SET_NAME, members)]
        info = _from_pods(workload_name(job, uid, JOB_GVK), labels, sets, queues, len(infos), uid)
        # The Job's whole count, made or not yet (a cluster's Job controller makes its pods one by one).
        info.pod_sets[0].count = max(info.pod_sets[0].count, queues.job_pods.get(f"{namespace}/{job}", 0))
        infos.append(info)
    for (_, group), members in groups.items():
        by_role: dict[str, list[Pod]] = {}
        for pod in members:
            spec = pod.raw.get("spec") or {}
            by_role.setdefault(role_hash(spec, pod.priority), []).append(pod)
        info = _from_pods(group, members[0].labels, sorted(by_role.items()), queues, len(infos), members[0].uid)
        total = members[0].annotations.get(api.POD_GROUP_TOTAL_COUNT_ANNOTATION, "")
        if total.isdigit() and int(total) > len(members):
            info.waiting = f"pod group {group} has {len(members)} of its {total} pods"
        infos.append(info)
    return infos


def _owner_uid(pod: Pod) -> str:
    for ref in (pod.raw.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("kind") == pod.owner_kind:
            return str(ref.get("uid") or "")
    return ""


def _from_pods(
    name: str,
    labels: Mapping[str, str],
    sets: list[tuple[str, list[Pod]]],
    queues: api.QueueObjects,
    order: int,
    job_uid: str,
) -> Info:
    first = sets[0][1][0]
    meta = first.raw.get("metadata") or {}
    info = Info(
        first.namespace,
        name,
        labels.get(api.QUEUE_NAME_LABEL, ""),
        [_pod_set(set_name, pods) for set_name, pods in sets],
        _priority(labels, first, queues),
        str(meta.get("creationTimestamp") or ""),
        order,
        "",
        job_uid,
    )
    if _admitted_on(info.pods):
        info.admitted = {}  # flavors found from the nodes (admission.py)
    return info
