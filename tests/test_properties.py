"""Properties over random small clusters, checked by an independent plain-Python model of the filters.

The model below re-implements, without touching accelsched's plugins, the Kubernetes rules the engine must obey:
- NodeResourcesFit (pkg/scheduler/framework/plugins/noderesources/fit.go): requested + request <= allocatable
  for every resource, pods included; extended resources are never overcommitted.
- TaintToleration / NodeUnschedulable (toleration.go ``ToleratesTaint``): NoSchedule and NoExecute taints must
  be tolerated; a cordoned node needs a toleration of ``node.kubernetes.io/unschedulable:NoSchedule``.
- NodeAffinity: spec.nodeSelector labels must all match.
- InterPodAffinity required anti-affinity, including its symmetry: no two pods in one topology domain where
  either one's term selects the other (in the term's namespaces: the owner's own when none are given).
- FitError (pkg/scheduler/framework/types.go): ``0/N nodes are available: <count reason>, ....``, every rejected
  node counted at least once.
Filters only get stricter as pods bind (capacity shrinks, anti-affinity domains fill), so a pod left Pending
must also fit nowhere in the final state.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from builders import ACCEL, HOSTNAME, ZONE, node, pod, reason_counts, session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelsched.framework.scheduler import ScheduleResult

UNSCHEDULABLE_TAINT = ("node.kubernetes.io/unschedulable", "", "NoSchedule")
TAINTS = [
    ("dedicated", "ml", "NoSchedule"),
    ("spot", "", "PreferNoSchedule"),
    ("maint", "", "NoExecute"),
    ("dedicated", "db", "NoSchedule"),
]
TOLERATIONS = [
    {"operator": "Exists"},
    {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists"},
    {"key": "maint", "operator": "Exists", "effect": "NoExecute"},
    {"key": "maint", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "db"},
]
MI = 2**20
GI = 2**30
PROPERTY_SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------- the model


@dataclass
class NodeSpec:
    name: str
    cpu: int  # millicores
    memory: int  # bytes
    pods: int
    accel: int
    labels: dict[str, str]
    taints: list[tuple[str, str, str]]
    cordoned: bool

    def to_dict(self) -> dict[str, Any]:
        extra = {ACCEL: self.accel} if self.accel else {}
        return node(
            self.name,
            cpu=f"{self.cpu}m",
            memory=str(self.memory),
            pods=self.pods,
            labels=self.labels,
            taints=[{"key": k, "value": v, "effect": e} if v else {"key": k, "effect": e} for k, v, e in self.taints],
            unschedulable=self.cordoned,
            **extra,
        )

    @property
    def all_labels(self) -> dict[str, str]:
        return {HOSTNAME: self.name, **self.labels}


@dataclass
class PodSpec:
    name: str
    namespace: str
    cpu: int  # millicores
    memory: int  # bytes
    accel: int
    labels: dict[str, str]
    tolerations: list[dict[str, str]]
    node_selector: dict[str, str]
    anti: list[tuple[str, str]] = field(default_factory=list)  # (app label value selected, topology key)

    def to_dict(self) -> dict[str, Any]:
        affinity = None
        if self.anti:
            terms = [{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key} for app, key in self.anti]
            affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}
        return pod(
            self.name,
            cpu=f"{self.cpu}m" if self.cpu else None,
            memory=str(self.memory) if self.memory else None,
            namespace=self.namespace,
            labels=self.labels,
            tolerations=self.tolerations,
            node_selector=self.node_selector,
            affinity=affinity,
            extra={ACCEL: self.accel} if self.accel else None,
        )


def tolerates(t: dict[str, str], taint: tuple[str, str, str]) -> bool:
    key, value, effect = taint
    if t.get("effect") and t["effect"] != effect:
        return False
    if t.get("key") and t["key"] != key:
        return False
    if t.get("operator", "Equal") == "Exists":
        return True
    return t.get("value", "") == value


def tolerated(p: PodSpec, taint: tuple[str, str, str]) -> bool:
    return any(tolerates(t, taint) for t in p.tolerations)


def static_ok(p: PodSpec, n: NodeSpec) -> bool:
    """The filters that do not depend on other pods: cordon, taints, nodeSelector."""
    if n.cordoned and not tolerated(p, UNSCHEDULABLE_TAINT):
        return False
    if any(e in ("NoSchedule", "NoExecute") and not tolerated(p, (k, v, e)) for k, v, e in n.taints):
        return False
    labels = n.all_labels
    return all(labels.get(k) == v for k, v in p.node_selector.items())


def selects(owner: PodSpec, other: PodSpec) -> list[str]:
    """The topology keys of ``owner``'s anti-affinity terms that select ``other``."""
    if owner.namespace != other.namespace:
        return []
    return [key for app, key in owner.anti if other.labels.get("app") == app]


def conflict(a: PodSpec, na: NodeSpec, b: PodSpec, nb: NodeSpec) -> bool:
    """Whether pods a (on na) and b (on nb) violate required anti-affinity, in either direction."""
    for owner, other in ((a, b), (b, a)):
        for key in selects(owner, other):
            va, vb = na.all_labels.get(key), nb.all_labels.get(key)
            if va is not None and va == vb:
                return True
    return False


def fits(p: PodSpec, n: NodeSpec, placed: list[tuple[PodSpec, NodeSpec]]) -> bool:
    """Every filter of the model, for pod p on node n next to the already placed pods."""
    if not static_ok(p, n):
        return False
    here = [q for q, m in placed if m.name == n.name]
    if len(here) + 1 > n.pods:
        return False
    if sum(q.cpu for q in here) + p.cpu > n.cpu:
        return False
    if sum(q.memory for q in here) + p.memory > n.memory:
        return False
    if sum(q.accel for q in here) + p.accel > n.accel:
        return False
    return not any(conflict(p, n, q, m) for q, m in placed)


# ---------------------------------------------------------------------------------------- strategies


@st.composite
def node_specs(draw: st.DrawFn) -> list[NodeSpec]:
    count = draw(st.integers(1, 8))
    out = []
    for i in range(count):
        labels = {}
        zone = draw(st.sampled_from(["a", "b", None]))
        if zone:
            labels[ZONE] = zone
        pool = draw(st.sampled_from(["x", "y", None]))
        if pool:
            labels["pool"] = pool
        out.append(
            NodeSpec(
                name=f"n{i}",
                cpu=draw(st.sampled_from([500, 1000, 2000, 4000])),
                memory=draw(st.sampled_from([1, 2, 4])) * GI,
                pods=draw(st.integers(1, 5)),
                accel=draw(st.sampled_from([0, 0, 1, 2, 4])),
                labels=labels,
                taints=draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)),
                cordoned=draw(st.booleans().map(lambda b: b and draw(st.booleans()))),
            )
        )
    return out


@st.composite
def pod_specs(draw: st.DrawFn) -> list[PodSpec]:
    count = draw(st.integers(1, 12))
    out = []
    for i in range(count):
        app = draw(st.sampled_from(["g1", "g2", None]))
        anti = draw(
            st.lists(st.tuples(st.sampled_from(["g1", "g2"]), st.sampled_from([HOSTNAME, ZONE])), max_size=1)
            if draw(st.booleans())
            else st.just([])
        )
        selector_choice = draw(st.sampled_from([{}, {}, {ZONE: "a"}, {"pool": "x"}, {ZONE: "b", "pool": "y"}]))
        out.append(
            PodSpec(
                name=f"p{i}",
                namespace=draw(st.sampled_from(["default", "default", "other"])),
                cpu=draw(st.sampled_from([0, 100, 250, 500, 1000, 2000])),
                memory=draw(st.sampled_from([0, 128, 512, 1024, 2048])) * MI,
                accel=draw(st.sampled_from([0, 0, 0, 1, 2, 3])),
                labels={"app": app} if app else {},
                tolerations=draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2, unique_by=lambda t: str(t))),
                node_selector=dict(selector_choice),
                anti=anti,
            )
        )
    return out


def schedule(nodes: list[NodeSpec], pods: list[PodSpec], seed: int = 0) -> list[ScheduleResult]:
    s = session([n.to_dict() for n in nodes], [p.to_dict() for p in pods], seed=seed)
    assert not s.rejected
    results = s.schedule()
    assert sorted(r.pod.name for r in results) == sorted(p.name for p in pods)
    return results


# ---------------------------------------------------------------------------------------- properties


@PROPERTY_SETTINGS
@given(node_specs(), pod_specs())
def test_no_overcommit_and_devices_are_exclusive(nodes: list[NodeSpec], pods: list[PodSpec]) -> None:
    by_pod = {p.name: p for p in pods}
    by_node = {n.name: n for n in nodes}
    used: dict[str, Counter[str]] = {n.name: Counter() for n in nodes}
    device_owner: dict[tuple[str, str], str] = {}
    for r in schedule(nodes, pods):
        if r.node is None:
            assert not r.devices
            continue
        p, n = by_pod[r.pod.name], by_node[r.node]
        used[n.name].update({"cpu": p.cpu, "memory": p.memory, "pods": 1, ACCEL: p.accel})
        if p.accel:
            ids = r.devices.get(ACCEL, [])
            assert len(ids) == p.accel, (r.pod.name, ids)
            assert len(set(ids)) == len(ids)
            assert set(ids) <= {f"ai-accelerator-{i}" for i in range(n.accel)}
            for d in ids:
                assert (n.name, d) not in device_owner, f"{d} on {n.name} given to {device_owner[(n.name, d)]} too"
                device_owner[(n.name, d)] = p.name
        else:
            assert not r.devices.get(ACCEL)
    for name, u in used.items():
        n = by_node[name]
        assert u["cpu"] <= n.cpu and u["memory"] <= n.memory and u["pods"] <= n.pods and u[ACCEL] <= n.accel, (name, u)


@PROPERTY_SETTINGS
@given(node_specs(), pod_specs())
def test_placements_satisfy_every_filter(nodes: list[NodeSpec], pods: list[PodSpec]) -> None:
    by_pod = {p.name: p for p in pods}
    by_node = {n.name: n for n in nodes}
    placed: list[tuple[PodSpec, NodeSpec]] = []
    results = schedule(nodes, pods)
    for r in results:  # in the order the pods were (last) attempted: bound pods in bind order
        if r.node is None:
            continue
        p, n = by_pod[r.pod.name], by_node[r.node]
        assert static_ok(p, n), (p, n)
        assert fits(p, n, placed), (p.name, n.name, [(q.name, m.name) for q, m in placed])
        placed.append((p, n))
    # Completeness: filters only tighten as pods bind, so a Pending pod fits nowhere at the end either.
    for r in results:
        if r.node is None:
            p = by_pod[r.pod.name]
            assert not any(fits(p, n, placed) for n in nodes), (p.name, [n.name for n in nodes if fits(p, n, placed)])


@PROPERTY_SETTINGS
@given(node_specs(), pod_specs(), st.integers(0, 2**16))
def test_same_input_and_seed_same_placements(nodes: list[NodeSpec], pods: list[PodSpec], seed: int) -> None:
    def outcome() -> list[tuple[str, str | None, dict[str, list[str]], str]]:
        return [(r.pod.name, r.node, r.devices, r.message) for r in schedule(nodes, pods, seed)]

    assert outcome() == outcome()


@PROPERTY_SETTINGS
@given(node_specs(), pod_specs())
def test_pending_message_counts_every_node(nodes: list[NodeSpec], pods: list[PodSpec]) -> None:
    for r in schedule(nodes, pods):
        if r.node is not None:
            assert r.message == ""
            continue
        assert r.message.startswith(f"0/{len(nodes)} nodes are available: "), r.message
        counts = reason_counts(r)
        assert sum(counts.values()) >= len(nodes), r.message
        # Every node is accounted for, and the per-node reasons add up to the message's counts.
        assert set(r.reasons) == {n.name for n in nodes}
        assert Counter(reason for rs in r.reasons.values() for reason in rs) == counts
