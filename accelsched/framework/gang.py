"""Gang scheduling: a PodGroup's members are placed together in one decision, or none is.

Members join a gang with the label ``scheduling.x-k8s.io/pod-group: <name>``, the scheduler-plugins
Coscheduling convention; the ``PodGroup`` (``scheduling.x-k8s.io/v1alpha1``) gives ``minMember``. A Job whose
pods carry the label without a PodGroup object is a gang of all its pods.

Why this cannot deadlock: when the first member of a gang leaves the queue, every pending member leaves with
it, and the whole gang is decided in one go. Each member runs a full cycle (so later members see earlier ones'
capacity, devices and anti-affinity), stops after Permit, and is held. If at least minMember are held they are
all bound; otherwise every held member is rolled back (Unreserve, forget) before anything else is scheduled.
Two gangs therefore never interleave, nothing is held across cycles (no timeout to wait for), and a gang that
passes an aggregate capacity check but cannot be placed fails once and waits, instead of looping.

The upstream gang API of Kubernetes 1.36 (``scheduling.k8s.io/v1alpha2``, feature gates GenericWorkload and
GangScheduling) is read beside it: a ``PodGroup`` with ``spec.schedulingPolicy.gang.minCount`` (or ``basic``: no
gang), usually stamped from a ``Workload``'s ``podGroupTemplates`` (``spec.podGroupTemplateRef``), and pods that
name it in ``spec.schedulingGroup.podGroupName``. Such a gang is placed the same way, in one decision; its pods
get the GangScheduling plugin's wording (PreEnqueue while too few pods or no PodGroup exist, Permit when it
does not fit) rather than ours, and ``schedulingConstraints.topology[0].key`` is its required topology.

A PodGroup may ask that all members share one topology domain: annotation ``accelsched.io/required-topology:
<node label key>`` (or ``accelsched.io/preferred-topology``, which falls back to the whole cluster). Domains are
tried tightest-fitting first, so a gang does not take a big domain when a smaller one holds it. Kueue's podset
annotations (``kueue.x-k8s.io/podset-required-topology``, ``-preferred-topology``, ``-slice-required-topology`` with
``-slice-size``) on the PodGroup or on its pods ask the same on a multi-level fabric (framework.fabric): fewest
domains at each level, slices whole, ranks in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelsched.api import quantity
from accelsched.api.objects import Pod, metadata
from accelsched.api.validation import dns1123_label_problem, dns1123_subdomain_problem, label_key_problem
from accelsched.errors import Where
from accelsched.fabric import hypernode
from accelsched.fabric import request as fabric_request

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
REQUIRED_TOPOLOGY = "accelsched.io/required-topology"
PREFERRED_TOPOLOGY = "accelsched.io/preferred-topology"
GANG = "Coscheduling"
GANG_SCHEDULING = "GangScheduling"  # the upstream plugin (pkg/scheduler/framework/plugins/gangscheduling)
WORKLOAD_API = "scheduling.k8s.io/v1alpha2"
WORKLOAD_GROUP = WORKLOAD_API.split("/")[0]
# GangScheduling's PreEnqueue and Permit statuses, and the pod group cycle's (schedule_one_podgroup.go), verbatim
# (the typo is upstream's). Checked against the real kube-scheduler v1.36.3 (tests/live/test_live_workload_gangs.py).
MISSING_POD_GROUP = 'waiting for pods\'s pod group "{name}" to appear in scheduling queue'
TOO_FEW_PODS = "waiting for minCount pods from a gang to appear in scheduling queue"
PERMIT_WAIT = "waiting for minCount pods from a gang to be scheduled"
POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"
# Coscheduling's PreFilter when fewer pods carry the label than minMember (scheduler-plugins pkg/coscheduling/core
# PodGroupManager.PreFilter), verbatim: the gang waits, Pending, until more pods come.
NOT_ENOUGH_SIBLINGS = (
    "pre-filter pod {pod} cannot find enough sibling pods, current pods number: {count}, "
    "minMember of group: {min_member}"
)
# What a member that fit gets when its gang did not: the group error, the Permit status and the FitError of a
# Wait with no rejection (framework.FitError with NumAllNodes 1), joined as kube-scheduler joins them.
FEASIBLE_MEMBER = (
    f"{POD_GROUP_UNSCHEDULABLE}, {PERMIT_WAIT}, one or more plugins asked to wait and no plugin rejected pod"
)


@dataclass(frozen=True)
class PodGroup:
    namespace: str
    name: str
    min_member: int
    timeout_seconds: int | None = None
    required_topology: str = ""
    preferred_topology: str = ""
    min_resources: tuple[tuple[str, int], ...] = ()  # spec.minResources, canonical units, sorted by name
    upstream: bool = False  # a scheduling.k8s.io/v1alpha2 PodGroup (GangScheduling's wording), not scheduler-plugins'
    gang: bool = True  # schedulingPolicy.gang (False: basic, each pod on its own)
    slice_topology: str = ""  # kueue.x-k8s.io/podset-slice-required-topology: each slice inside one such domain
    slice_size: int = 0  # kueue.x-k8s.io/podset-slice-size

    @property
    def key(self) -> str:
        return pod_group_key(self.namespace, self.name, self.upstream)


def pod_group_key(namespace: str, name: str, upstream: bool) -> str:
    """A PodGroup's identity in the maps of gangs: ``namespace/name`` for scheduler-plugins' (the label's), and
    the API group before it for ``scheduling.k8s.io``'s. An object is its group, kind, namespace and name: a
    ``scheduling.x-k8s.io`` PodGroup g and a ``scheduling.k8s.io`` PodGroup g in one namespace are two gangs."""
    return f"{WORKLOAD_GROUP}/{namespace}/{name}" if upstream else f"{namespace}/{name}"


def key_parts(key: str) -> tuple[str, str]:
    """(namespace, name) of a ``pod_group_key`` (a namespace holds no ".", so the API group prefix is unambiguous)."""
    namespace, name = key.removeprefix(f"{WORKLOAD_GROUP}/").split("/", 1)
    return namespace, name


def parse_pod_group(doc: Mapping[str, Any], source: str = "") -> PodGroup:
    """Either API's PodGroup, told apart by apiVersion."""
    if doc.get("apiVersion") == WORKLOAD_API:
        return parse_workload_pod_group(doc, source)
    where, name, namespace, meta = metadata(doc, source, "PodGroup", namespaced=True)
    spec = doc.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise where.error("spec", "must be a mapping")
    min_member = spec.get("minMember", 1)
    if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 1:
        raise where.error("spec.minMember", f"must be a whole number >= 1, got {min_member!r}")
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0):
        raise where.error("spec.scheduleTimeoutSeconds", f"must be a whole number >= 0, got {timeout!r}")
    min_resources = spec.get("minResources") or {}
    if not isinstance(min_resources, Mapping):
        raise where.error("spec.minResources", "must be a mapping of resource name to quantity")
    resources = []
    for res, value in sorted(min_resources.items()):
        try:
            resources.append((str(res), quantity.parse(str(res), value)))
        except ValueError as exc:
            raise where.error(f"spec.minResources[{res}]", str(exc)) from None
    annotations = meta.get("annotations") or {}
    kueue = fabric_request.parse_annotations(annotations, where)  # Kueue's podset annotations, as its webhook
    fabric_request.check_count(kueue, min_member, where)
    for annotation in (REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY):
        if key := str(annotations.get(annotation, "")):  # the node label whose values are the domains
            _checked(where, f"metadata.annotations[{annotation}]", key, label_key_problem)
    required = str(annotations.get(REQUIRED_TOPOLOGY, "")) or kueue.required
    preferred = str(annotations.get(PREFERRED_TOPOLOGY, "")) or kueue.preferred
    if str(doc.get("apiVersion", "")).split("/", 1)[0] == hypernode.PODGROUP_GROUP:  # Volcano's PodGroup
        volcano = hypernode.network_topology(where, spec)
        required, preferred = required or volcano[0], preferred or volcano[1]
    if required and preferred:
        raise where.error(f"metadata.annotations[{PREFERRED_TOPOLOGY}]", f"cannot be set with {REQUIRED_TOPOLOGY}")
    return PodGroup(
        namespace,
        name,
        min_member,
        timeout,
        required,
        preferred,
        tuple(resources),
        slice_topology=kueue.slice_level,
        slice_size=kueue.slice_size,
    )


def _scheduling_policy(where: Where, spec: Mapping[str, Any], path: str) -> int | None:
    """minCount of ``schedulingPolicy.gang``, or None for ``basic``; exactly one must be set (a union)."""
    policy = spec.get("schedulingPolicy")
    if not isinstance(policy, Mapping):
        raise where.error(f"{path}.schedulingPolicy", "Required value")
    set_ = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if len(set_) != 1:
        raise where.error(f"{path}.schedulingPolicy", "Invalid value: must specify exactly one of: `basic`, `gang`")
    if set_[0] == "basic":
        return None
    gang = policy["gang"]
    count = gang.get("minCount") if isinstance(gang, Mapping) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise where.error(
            f"{path}.schedulingPolicy.gang.minCount", f"Invalid value: {count}: must be greater than or equal to 1"
        )
    return count


def _checked(where: Where, field: str, value: str, problem: Callable[[str], str | None]) -> str:
    """``value`` if ``problem`` finds nothing, else the API server's ``Invalid value: "<value>": <problem>``."""
    why = problem(value)
    if why:
        raise where.error(field, f"Invalid value: {json.dumps(value[:300])}: {why}")
    return value


def _topology_key(where: Where, spec: Mapping[str, Any], path: str) -> str:
    """schedulingConstraints.topology[0].key (TopologyAwareWorkloadScheduling): all members in one domain. Every
    entry's key is a label key (+k8s:format=k8s-label-key), as the API server checks them."""
    constraints = spec.get("schedulingConstraints") or {}
    topology = constraints.get("topology") if isinstance(constraints, Mapping) else None
    if not topology:
        return ""
    keys = []
    for i, item in enumerate(topology if isinstance(topology, list) else [None]):
        key = item.get("key") if isinstance(item, Mapping) else None
        field = f"{path}.schedulingConstraints.topology[{i}].key"
        if not isinstance(key, str) or not key:
            raise where.error(field, "Required value")
        keys.append(_checked(where, field, key, label_key_problem))
    return keys[0]


def parse_workload_pod_group(doc: Mapping[str, Any], source: str = "") -> PodGroup:
    """A ``scheduling.k8s.io/v1alpha2`` PodGroup: the scheduler reads its own spec (a Workload's template was
    copied into it when it was made), never the Workload."""
    where, name, namespace, _ = metadata(doc, source, "PodGroup", namespaced=True)
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        raise where.error("spec", "Required value")
    ref = spec.get("podGroupTemplateRef")
    if ref is not None:
        workload = ref.get("workload") if isinstance(ref, Mapping) else None
        if not isinstance(workload, Mapping):
            raise where.error("spec.podGroupTemplateRef.workload", "Required value")
        # workloadName names a Workload (a DNS subdomain), podGroupTemplateName one of its templates (a DNS label).
        names = (("workloadName", dns1123_subdomain_problem), ("podGroupTemplateName", dns1123_label_problem))
        for key, problem in names:
            field = f"spec.podGroupTemplateRef.workload.{key}"
            if not isinstance(workload.get(key), str) or not workload.get(key):
                raise where.error(field, "Required value")
            _checked(where, field, workload[key], problem)
    count = _scheduling_policy(where, spec, "spec")
    topology = _topology_key(where, spec, "spec")
    return PodGroup(namespace, name, count or 1, required_topology=topology, upstream=True, gang=count is not None)


def parse_workload(doc: Mapping[str, Any], source: str = "") -> tuple[str, ...]:
    """A ``Workload``: checked as the API server does (1-8 podGroupTemplates, unique names, one policy each);
    its template names are returned. The scheduler does not use it further: PodGroups carry their policy."""
    where, _, _, _ = metadata(doc, source, "Workload", namespaced=True)
    spec = doc.get("spec")
    templates = spec.get("podGroupTemplates") if isinstance(spec, Mapping) else None
    if not isinstance(templates, list) or not templates:
        raise where.error("spec.podGroupTemplates", "Required value")
    if len(templates) > 8:
        raise where.error("spec.podGroupTemplates", f"Too many: {len(templates)}: must have at most 8 items")
    names: list[str] = []
    for i, template in enumerate(templates):
        path = f"spec.podGroupTemplates[{i}]"
        if not isinstance(template, Mapping) or not isinstance(template.get("name"), str) or not template["name"]:
            raise where.error(f"{path}.name", "Required value")
        _checked(where, f"{path}.name", template["name"], dns1123_label_problem)
        if template["name"] in names:
            raise where.error(f"{path}", f'Duplicate value: {{"name":"{template["name"]}"}}')
        names.append(template["name"])
        _scheduling_policy(where, template, path)
        _topology_key(where, template, path)
    return tuple(names)


def group_key(pod: Pod) -> str | None:
    """The gang a pod belongs to: its upstream ``spec.schedulingGroup`` or the scheduler-plugins label."""
    if pod.scheduling_group:
        return pod_group_key(pod.namespace, pod.scheduling_group, True)
    name = pod.labels.get(POD_GROUP_LABEL)
    return pod_group_key(pod.namespace, name, False) if name else None


def group_key_of(obj: Mapping[str, Any]) -> str | None:
    """``group_key`` of a Pod object as the API server serves it (live mode and the what-if read raw pods)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    group = spec.get("schedulingGroup") if isinstance(spec, Mapping) else None
    namespace = (meta.get("namespace") if isinstance(meta, Mapping) else None) or "default"
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    if isinstance(name, str) and name:
        return pod_group_key(namespace, name, True)
    labels = (meta.get("labels") if isinstance(meta, Mapping) else None) or {}
    name = labels.get(POD_GROUP_LABEL) if isinstance(labels, Mapping) else None
    return pod_group_key(namespace, name, False) if isinstance(name, str) and name else None


def pre_enqueue(
    pods: list[Pod], groups: Mapping[str, PodGroup], bound: Mapping[str, int] | None = None
) -> dict[str, str]:
    """GangScheduling's PreEnqueue for pods of the upstream API: pod key -> why it is not queued (its PodGroup
    does not exist, or fewer than minCount of its pods do, bound ones included)."""
    counts: dict[str, int] = dict(bound or {})
    for pod in pods:
        if pod.scheduling_group:
            key = pod_group_key(pod.namespace, pod.scheduling_group, True)
            counts[key] = counts.get(key, 0) + 1
    out: dict[str, str] = {}
    for pod in pods:
        if not pod.scheduling_group:
            continue
        group = groups.get(key := pod_group_key(pod.namespace, pod.scheduling_group, True))
        if group is None or not group.upstream:
            out[pod.key] = MISSING_POD_GROUP.format(name=pod.scheduling_group)
        elif group.gang and counts.get(key, 0) < group.min_member:
            out[pod.key] = TOO_FEW_PODS
    return out


def bound_members(bound: list[Pod]) -> dict[str, int]:
    """Bound pods per gang: they count toward minCount (GangScheduling's AllPodsCount)."""
    out: dict[str, int] = {}
    for pod in bound:
        if (key := group_key(pod)) is not None:
            out[key] = out.get(key, 0) + 1
    return out


def implicit_groups(pods: list[Pod], groups: dict[str, PodGroup]) -> dict[str, PodGroup]:
    """Labelled pods without a PodGroup object (a Job with parallelism N): a gang of all of them. Upstream
    PodGroups with the basic policy are no gang and are left out."""
    counts: dict[str, int] = {}
    for pod in pods:
        key = group_key(pod)
        if key and key not in groups and not pod.scheduling_group:
            counts[key] = counts.get(key, 0) + 1
    out = {key: group for key, group in groups.items() if group.gang}
    for key, count in counts.items():
        namespace, name = key_parts(key)
        out[key] = PodGroup(namespace, name, count)
    return out


def describe_request(pods: list[Pod]) -> str:
    """``8 pods x 4 qualcomm.com/ai-accelerator``: the gang's per-member request, by its device resources."""
    first = pods[0].requests
    devices = {r: a for r, a in first.items() if quantity.is_extended(r)}
    shown = devices or {r: a for r, a in first.items() if r in (quantity.CPU, quantity.MEMORY)}
    parts = " + ".join(f"{quantity.format_quantity(r, a)} {r}" for r, a in sorted(shown.items())) or "nothing"
    return f"{len(pods)} pods x {parts}"


def domains(cluster_labels: np.ndarray, values: tuple[str, ...]) -> list[tuple[str, np.ndarray]]:
    """Each value of a topology key with the mask of its nodes."""
    return [(value, cluster_labels == code) for code, value in enumerate(values)]
