"""Seeded random scenarios, one class per semantic accelsched claims; the same seed always gives the same scenarios.

Clusters are small (2-8 nodes, 0-12 bound pods, 1-3 pending pods) so a disagreement is cheap to shrink. Bound pods
are only placed where they fit: kube-scheduler keeps an over-committed bound pod in its cache, a kubelet would
reject it, and accelsched models the kubelet (admission), which is not what this oracle compares.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conformance import configs, dra
from conformance.objects import (
    ACCELERATOR,
    GPU,
    HOSTNAME,
    NEVER_CLASS,
    ZONE,
    container,
    namespace,
    node,
    pod,
    priority_classes,
)
from conformance.scenario import JSON, MAIN_NAMESPACE, Scenario

OTHER_NAMESPACE = "ns-other"
ZONES = ("zone-a", "zone-b", "zone-c")
RACK = "example.com/rack"
APPS = ("web", "db", "cache")
UNADVERTISED = "example.com/fpga"
RUNTIME_CLASS = "conformance-overhead"
OVERHEAD = {"cpu": "250m", "memory": "64Mi"}
CSI_DRIVER = "csi.example.com"


@dataclass
class Builder:
    """A scenario under construction, with what the class builders need (node capacity left, names)."""

    rng: random.Random
    klass: str
    nodes: list[JSON] = field(default_factory=list)
    free: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> resource -> free (milli for cpu)
    objects: list[JSON] = field(default_factory=list)
    bound: list[JSON] = field(default_factory=list)
    pending: list[JSON] = field(default_factory=list)
    config: str = "default"
    namespace_labels: dict[str, str] = field(default_factory=dict)  # more labels on the main namespace

    def pick(self, seq: Any) -> Any:
        return self.rng.choice(list(seq))

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # -- nodes -------------------------------------------------------------------------------------------------

    def add_nodes(self, count: int | None = None, extended: bool = False, pods: str | None = None) -> None:
        count = count or self.rng.randint(2, 8)
        for i in range(count):
            name = f"node-{i}"
            cpu = self.pick((2, 4, 8, 16))
            mem = self.pick((4, 8, 16, 32))
            alloc = {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": pods or self.pick(("110", "110", "4")),
                     "ephemeral-storage": f"{self.pick((20, 100))}Gi"}
            if extended and self.chance(0.7):
                alloc[self.pick((ACCELERATOR, GPU))] = str(self.pick((1, 2, 4, 8)))
            labels = {ZONE: ZONES[i % 3] if count > 2 else ZONES[i], RACK: f"rack-{i % 2}"}
            if self.chance(0.3):
                del labels[ZONE]  # a node without the zone label (spread: missing required label)
            if self.chance(0.5):
                labels["example.com/tier"] = self.pick(("gold", "silver"))
            if self.chance(0.3):
                labels["example.com/cores"] = str(self.pick((8, 16, 32)))
            n = node(name, alloc, labels)
            self.nodes.append(n)
            self.free[name] = {r: _amount(r, v) for r, v in alloc.items()}

    # -- pods --------------------------------------------------------------------------------------------------

    def requests(self, extended: bool = False) -> dict[str, str]:
        req = {"cpu": self.pick(("100m", "250m", "500m", "1", "1500m", "2", "3")),
               "memory": self.pick(("128Mi", "512Mi", "1Gi", "2Gi", "4Gi"))}
        if self.chance(0.2):
            req["ephemeral-storage"] = self.pick(("1Gi", "10Gi", "50Gi"))
        if extended and self.chance(0.5):
            req[self.pick((ACCELERATOR, GPU))] = str(self.pick((1, 2, 4)))
        if self.chance(0.15):
            del req["memory"]
        return req

    def place(self, body: JSON, nodes: list[str] | None = None) -> bool:
        """Bind ``body`` (a pod) to a random node where it fits; False (and not added) if none."""
        need = _pod_request(body)
        fits = [n for n in (nodes or list(self.free)) if all(self.free[n].get(r, 0) >= v for r, v in need.items())]
        if not fits:
            return False
        where = self.pick(fits)
        for r, v in need.items():
            self.free[where][r] -= v
        body["spec"]["nodeName"] = where
        body["spec"].setdefault("terminationGracePeriodSeconds", 3600)
        # Running since a distinct time, in bind order: preemption ranks equal-priority victims by start time
        # (MoreImportantPod), and without one kube-scheduler compares time.Now() values (no stable order).
        seconds = len(self.bound)
        body["status"] = {"phase": "Running", "startTime": f"2026-01-01T00:{seconds // 60:02d}:{seconds % 60:02d}Z"}
        self.bound.append(body)
        return True

    def scenario(self, seed: int) -> Scenario:
        objects = [*priority_classes(), namespace(MAIN_NAMESPACE, {"team": "main", **self.namespace_labels}),
                   namespace(OTHER_NAMESPACE, {"team": "other"}), *self.objects, *self.nodes, *self.bound]
        return Scenario(self.klass, self.config, objects, self.pending, seed)


def _amount(resource: str, value: str) -> int:
    from accelsched.api import quantity

    return quantity.parse(resource, value)


def _pod_request(body: JSON) -> dict[str, int]:
    """max(sum of app containers + sidecars, each init container + the sidecars before it) + overhead, and 1 pod."""
    spec = body["spec"]
    total: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in spec.get("initContainers") or []:
        req = {r: _amount(r, v) for r, v in ((c.get("resources") or {}).get("requests") or {}).items()}
        if c.get("restartPolicy") == "Always":
            for r, v in req.items():
                sidecars[r] = sidecars.get(r, 0) + v
        else:
            for r in set(req) | set(sidecars):
                init_peak[r] = max(init_peak.get(r, 0), req.get(r, 0) + sidecars.get(r, 0))
    for c in spec["containers"]:
        for r, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[r] = total.get(r, 0) + _amount(r, v)
    for r, v in sidecars.items():
        total[r] = total.get(r, 0) + v
    for r, v in init_peak.items():
        total[r] = max(total.get(r, 0), v)
    for r, v in (spec.get("overhead") or {}).items():
        total[r] = total.get(r, 0) + _amount(r, v)
    total["pods"] = 1
    return total


# ---------------------------------------------------------------------------------------------------------------
# Classes: each fills a Builder. Pending pods come last, created (and scheduled) in list order.


def simple_pod(b: Builder, name: str, extended: bool = False, **spec: Any) -> JSON:
    labels = {"app": b.pick(APPS)}
    return pod(name, [container("main", b.requests(extended))], labels=labels, **spec)


def fill_bound(b: Builder, count: int | None = None, make: Callable[[Builder, str], JSON] | None = None) -> None:
    for i in range(b.rng.randint(0, 12) if count is None else count):
        b.place((make or simple_pod)(b, f"bound-{i}"))


def cls_resources(b: Builder) -> None:
    b.add_nodes(extended=True)
    fill_bound(b, make=lambda b, n: simple_pod(b, n, extended=True))
    for i in range(b.rng.randint(1, 3)):
        containers = [container("main", b.requests(extended=True))]
        if b.chance(0.3):
            containers.append(container("second", b.requests()))
        spec: JSON = {}
        if b.chance(0.35):
            spec["initContainers"] = [container("init", b.requests())]
        if b.chance(0.3):
            spec.setdefault("initContainers", []).append(
                container("sidecar", {"cpu": b.pick(("100m", "1")), "memory": "256Mi"}, restart_policy="Always"))
        if b.chance(0.2):
            spec["runtimeClassName"] = RUNTIME_CLASS
            spec["overhead"] = dict(OVERHEAD)
        if b.chance(0.08):
            containers[0]["resources"]["requests"][UNADVERTISED] = "1"
            containers[0]["resources"].setdefault("limits", {})[UNADVERTISED] = "1"
        b.pending.append(pod(f"pod-{i}", containers, labels={"app": b.pick(APPS)}, **spec))


def _taint(b: Builder) -> JSON:
    t = {"key": b.pick(("dedicated", "example.com/gpu", "maintenance")), "effect":
         b.pick(("NoSchedule", "NoExecute", "PreferNoSchedule"))}
    if b.chance(0.7):
        t["value"] = b.pick(("a", "b"))
    return t


def _toleration(b: Builder) -> JSON:
    tol: JSON = {"key": b.pick(("dedicated", "example.com/gpu", "maintenance", "")), "operator":
                 b.pick(("Equal", "Exists"))}
    if tol["key"] == "":
        tol["operator"] = "Exists"
    if tol["operator"] == "Equal":
        tol["value"] = b.pick(("a", "b"))
    if b.chance(0.6):
        tol["effect"] = b.pick(("NoSchedule", "NoExecute", "PreferNoSchedule"))
        if tol["effect"] == "NoExecute" and b.chance(0.5):
            tol["tolerationSeconds"] = 60
    return tol


def cls_taints(b: Builder) -> None:
    b.add_nodes()
    for n in b.nodes:
        if b.chance(0.6):
            n["spec"]["taints"] = [_taint(b) for _ in range(b.rng.randint(1, 2))]
            seen = set()
            n["spec"]["taints"] = [t for t in n["spec"]["taints"]
                                   if (t["key"], t["effect"]) not in seen and not seen.add((t["key"], t["effect"]))]
    fill_bound(b)
    for i in range(b.rng.randint(1, 3)):
        tolerations = [_toleration(b) for _ in range(b.rng.randint(0, 3))]
        b.pending.append(simple_pod(b, f"pod-{i}", tolerations=tolerations))


def cls_cordon(b: Builder) -> None:
    b.add_nodes()
    for n in b.nodes:
        if b.chance(0.5):
            n["spec"]["unschedulable"] = True
            if b.chance(0.5):
                n["spec"]["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    fill_bound(b)
    for i in range(b.rng.randint(1, 3)):
        tol = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
        b.pending.append(simple_pod(b, f"pod-{i}", tolerations=tol if b.chance(0.3) else None))


def _node_expr(b: Builder) -> JSON:
    kind = b.pick(("zone", "tier", "cores", "rack", "host"))
    if kind == "zone":
        op = b.pick(("In", "NotIn", "Exists", "DoesNotExist"))
        expr = {"key": ZONE, "operator": op}
        if op in ("In", "NotIn"):
            expr["values"] = b.rng.sample(ZONES, b.rng.randint(1, 2))
        return expr
    if kind == "tier":
        return {"key": "example.com/tier", "operator": b.pick(("In", "NotIn")), "values": [b.pick(("gold", "silver"))]}
    if kind == "cores":
        return {"key": "example.com/cores", "operator": b.pick(("Gt", "Lt")), "values": [b.pick(("8", "16", "20"))]}
    if kind == "rack":
        return {"key": RACK, "operator": "In", "values": [b.pick(("rack-0", "rack-1"))]}
    return {"key": HOSTNAME, "operator": b.pick(("In", "NotIn")), "values": [b.pick(n["metadata"]["name"]
                                                                                      for n in b.nodes)]}


def _node_term(b: Builder) -> JSON:
    term: JSON = {"matchExpressions": [_node_expr(b) for _ in range(b.rng.randint(1, 2))]}
    if b.chance(0.15):
        term["matchFields"] = [{"key": "metadata.name", "operator": b.pick(("In", "NotIn")),
                                "values": [b.pick(n["metadata"]["name"] for n in b.nodes)]}]
    return term


def cls_nodeaffinity(b: Builder) -> None:
    b.add_nodes()
    fill_bound(b)
    for i in range(b.rng.randint(1, 3)):
        spec: JSON = {}
        if b.chance(0.4):
            spec["nodeSelector"] = b.pick(({ZONE: b.pick(ZONES)}, {"example.com/tier": "gold"}, {RACK: "rack-1"}))
        affinity: JSON = {}
        if b.chance(0.6):
            affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [_node_term(b) for _ in range(b.rng.randint(1, 2))]}
        if b.chance(0.6):
            affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": b.rng.randint(1, 100), "preference": _node_term(b)} for _ in range(b.rng.randint(1, 3))]
        if affinity:
            spec["affinity"] = {"nodeAffinity": affinity}
        b.pending.append(simple_pod(b, f"pod-{i}", **spec))


def _pod_term(b: Builder) -> JSON:
    term: JSON = {"topologyKey": b.pick((HOSTNAME, ZONE, RACK)),
                  "labelSelector": {"matchLabels": {"app": b.pick(APPS)}}}
    if b.chance(0.2):
        term["labelSelector"] = {"matchExpressions": [{"key": "app", "operator": b.pick(("In", "NotIn")),
                                                       "values": [b.pick(APPS)]}]}
    if b.chance(0.15):
        term["namespaces"] = [b.pick((MAIN_NAMESPACE, OTHER_NAMESPACE))]
    elif b.chance(0.1):
        term["namespaceSelector"] = b.pick(({}, {"matchLabels": {"team": "other"}}))
    return term


def _pod_affinity(b: Builder, bound: bool) -> JSON | None:
    out: JSON = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        block: JSON = {}
        if b.chance(0.25 if bound and kind == "podAffinity" else 0.45):
            block["requiredDuringSchedulingIgnoredDuringExecution"] = [_pod_term(b)]
        if b.chance(0.4):
            block["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": b.rng.randint(1, 100), "podAffinityTerm": _pod_term(b)} for _ in range(b.rng.randint(1, 2))]
        if block:
            out[kind] = block
    return out or None


def cls_podaffinity(b: Builder) -> None:
    b.add_nodes()

    def make(b: Builder, name: str) -> JSON:
        ns = OTHER_NAMESPACE if b.chance(0.2) else MAIN_NAMESPACE
        body = pod(name, [container("main", b.requests())], namespace=ns, labels={"app": b.pick(APPS)})
        if b.chance(0.35):
            aff = _pod_affinity(b, bound=True)
            if aff:
                # Bound pods carry no required affinity of their own (it was satisfied once; keep them realistic).
                aff.pop("podAffinity", None)
                if aff:
                    body["spec"]["affinity"] = aff
        return body

    fill_bound(b, make=make)
    for i in range(b.rng.randint(1, 3)):
        aff = _pod_affinity(b, bound=False)
        b.pending.append(simple_pod(b, f"pod-{i}", affinity=aff))


def _spread(b: Builder) -> JSON:
    c: JSON = {"maxSkew": b.pick((1, 1, 2)), "topologyKey": b.pick((ZONE, HOSTNAME, RACK)),
               "whenUnsatisfiable": b.pick(("DoNotSchedule", "ScheduleAnyway")),
               "labelSelector": {"matchLabels": {"app": b.pick(APPS)}}}
    if c["whenUnsatisfiable"] == "DoNotSchedule" and b.chance(0.3):
        c["minDomains"] = b.pick((2, 3, 4))
    if b.chance(0.25):
        c["nodeAffinityPolicy"] = b.pick(("Honor", "Ignore"))
    if b.chance(0.25):
        c["nodeTaintsPolicy"] = b.pick(("Honor", "Ignore"))
    if b.chance(0.2):
        c["matchLabelKeys"] = ["version"]
    return c


def cls_spread(b: Builder) -> None:
    b.add_nodes()
    for n in b.nodes:
        if b.chance(0.15):
            n["spec"]["taints"] = [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]

    def make(b: Builder, name: str) -> JSON:
        return pod(name, [container("main", b.requests())],
                   labels={"app": b.pick(APPS), "version": b.pick(("v1", "v2"))})

    fill_bound(b, make=make)
    for i in range(b.rng.randint(1, 3)):
        spec: JSON = {"topologySpreadConstraints": _unique_spread([_spread(b) for _ in range(b.rng.randint(1, 2))])}
        if b.chance(0.3):
            spec["nodeSelector"] = {RACK: "rack-0"}
        body = simple_pod(b, f"pod-{i}", **spec)
        body["metadata"]["labels"]["version"] = b.pick(("v1", "v2"))
        for c in spec["topologySpreadConstraints"]:
            c["labelSelector"]["matchLabels"]["app"] = body["metadata"]["labels"]["app"] if b.chance(0.7) else \
                c["labelSelector"]["matchLabels"]["app"]
        b.pending.append(body)


def _unique_spread(cs: list[JSON]) -> list[JSON]:
    seen = set()
    out = []
    for c in cs:
        k = (c["topologyKey"], c["whenUnsatisfiable"])
        if k not in seen:
            seen.add(k)
            out.append(c)
    return out


def _ports(b: Builder) -> list[JSON]:
    out = []
    for _ in range(b.rng.randint(1, 2)):
        p: JSON = {"containerPort": b.pick((80, 8080, 9000)), "hostPort": b.pick((8080, 8081, 9000))}
        if b.chance(0.3):
            p["protocol"] = b.pick(("UDP", "TCP"))
        if b.chance(0.25):
            p["hostIP"] = b.pick(("127.0.0.1", "0.0.0.0", "10.0.0.1"))
        out.append(p)
    ports, hosts = set(), set()
    kept = []
    for p in out:
        proto = p.get("protocol", "TCP")
        if (p["containerPort"], proto) in ports or (p["hostPort"], proto) in hosts:
            continue
        ports.add((p["containerPort"], proto))
        hosts.add((p["hostPort"], proto))
        kept.append(p)
    return kept


def cls_hostports(b: Builder) -> None:
    b.add_nodes()

    def make(b: Builder, name: str) -> JSON:
        ports = _ports(b) if b.chance(0.6) else None
        return pod(name, [container("main", b.requests(), ports=ports)], labels={"app": b.pick(APPS)})

    fill_bound(b, make=make)
    for i in range(b.rng.randint(1, 3)):
        b.pending.append(pod(f"pod-{i}", [container("main", b.requests(), ports=_ports(b))]))


IMAGES = ("registry.example.com/train:1", "registry.example.com/infer:2", "registry.example.com/tiny:3")
IMAGE_SIZES = (30 * 1024**2, 400 * 1024**2, 2 * 1024**3)


def cls_images(b: Builder) -> None:
    b.add_nodes()
    for n in b.nodes:
        have = [i for i in range(len(IMAGES)) if b.chance(0.4)]
        if have:
            n["status"]["images"] = [{"names": [IMAGES[i]], "sizeBytes": IMAGE_SIZES[i]} for i in have]
    fill_bound(b)
    for i in range(b.rng.randint(1, 3)):
        cs = [container("main", b.requests(), image=b.pick(IMAGES))]
        if b.chance(0.3):
            cs.append(container("side", {"cpu": "100m"}, image=b.pick(IMAGES)))
        b.pending.append(pod(f"pod-{i}", cs))


def cls_gates(b: Builder) -> None:
    b.add_nodes()
    fill_bound(b)
    for i in range(b.rng.randint(1, 3)):
        gates = [{"name": "example.com/quota"}] if b.chance(0.5) else None
        b.pending.append(simple_pod(b, f"pod-{i}", schedulingGates=gates))


def cls_preemption(b: Builder) -> None:
    b.add_nodes(extended=True)

    def make(b: Builder, name: str) -> JSON:
        cls = b.pick(("low", "low", "mid", None))
        return simple_pod(b, name, extended=True, priorityClassName=cls)

    fill_bound(b, count=b.rng.randint(3, 12), make=make)
    for i in range(b.rng.randint(1, 2)):
        cls = b.pick(("high", "high", "mid", NEVER_CLASS))
        body = simple_pod(b, f"pod-{i}", extended=True, priorityClassName=cls)
        # Big enough to need room: most of a node's cpu.
        body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = b.pick(("2", "3", "6", "12"))
        b.pending.append(body)


def cls_volumes(b: Builder) -> None:
    b.add_nodes()
    b.objects.extend([
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "sc-local"},
         "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "sc-csi"},
         "provisioner": CSI_DRIVER, "volumeBindingMode": "WaitForFirstConsumer",
         "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": list(b.rng.sample(ZONES, 2))}]}]},
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": CSI_DRIVER},
         "spec": {"attachRequired": True, "storageCapacity": True, "podInfoOnMount": False}},
    ])
    names = [n["metadata"]["name"] for n in b.nodes]
    limit = b.pick((1, 2, 8))
    for n in names:
        b.objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": n},
                          "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": n, "topologyKeys": [ZONE],
                                                "allocatable": {"count": limit}}]}})
    for z in ZONES:
        if b.chance(0.6):
            b.objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                              "metadata": {"name": f"cap-{z}", "namespace": MAIN_NAMESPACE},
                              "storageClassName": "sc-csi", "capacity": b.pick(("5Gi", "50Gi")),
                              "nodeTopology": {"matchLabels": {ZONE: z}}})
    claims: list[str] = []
    pv_count = b.rng.randint(1, 4)
    for i in range(pv_count):
        host = b.pick(names)
        pv: JSON = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{i}"},
                    "spec": {"capacity": {"storage": b.pick(("10Gi", "100Gi"))},
                             "accessModes": [b.pick(("ReadWriteOnce", "ReadWriteOncePod"))],
                             "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "sc-local",
                             "local": {"path": f"/mnt/disk{i}"},
                             "nodeAffinity": {"required": {"nodeSelectorTerms": [
                                 {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [host]}]}]}}},
                    "status": {"phase": "Available"}}
        if b.chance(0.5):  # bound to a claim already
            claim = f"claim-{i}"
            pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": MAIN_NAMESPACE, "name": claim}
            pv["status"] = {"phase": "Bound"}
            # What the PV controller writes once it bound them; without it kube-scheduler treats the claim as
            # unbound (prebound), so leave it off now and then.
            bound_by = {"pv.kubernetes.io/bind-completed": "yes"} if b.chance(0.9) else {}
            b.objects.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                              "metadata": {"name": claim, "namespace": MAIN_NAMESPACE, "annotations": bound_by},
                              "spec": {"accessModes": pv["spec"]["accessModes"], "storageClassName": "sc-local",
                                       "volumeName": f"pv-{i}", "resources": {"requests": {"storage": "10Gi"}}},
                              "status": {"phase": "Bound", "accessModes": pv["spec"]["accessModes"],
                                         "capacity": pv["spec"]["capacity"]}})
            claims.append(claim)
        b.objects.append(pv)
    for i in range(b.rng.randint(0, 2)):
        claim = f"wffc-{i}"
        sc = b.pick(("sc-local", "sc-csi"))
        b.objects.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                          "metadata": {"name": claim, "namespace": MAIN_NAMESPACE},
                          "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": sc,
                                   "resources": {"requests": {"storage": b.pick(("1Gi", "20Gi"))}}}})
        claims.append(claim)
    fill_bound(b, count=b.rng.randint(0, 6))
    # A bound pod may already use a bound claim (ReadWriteOncePod conflicts, attach counts).
    bound_claims = [c for c in claims if c.startswith("claim-")]
    if b.bound and bound_claims and b.chance(0.5):
        user = b.pick(b.bound)
        user["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": b.pick(bound_claims)}}]
    for i in range(b.rng.randint(1, 2)):
        body = simple_pod(b, f"pod-{i}")
        if claims:
            chosen = b.rng.sample(claims, min(len(claims), b.rng.randint(1, 2)))
            body["spec"]["volumes"] = [{"name": f"v{j}", "persistentVolumeClaim": {"claimName": c}}
                                       for j, c in enumerate(chosen)]
        b.pending.append(body)


CLASSES: dict[str, tuple[Callable[[Builder], None], int]] = {
    "resources": (cls_resources, 4),
    "taints": (cls_taints, 2),
    "cordon": (cls_cordon, 1),
    "nodeaffinity": (cls_nodeaffinity, 3),
    "podaffinity": (cls_podaffinity, 3),
    "spread": (cls_spread, 3),
    "hostports": (cls_hostports, 1),
    "images": (cls_images, 1),
    "gates": (cls_gates, 1),
    "preemption": (cls_preemption, 3),
    "volumes": (cls_volumes, 2),
}
# The classes drawn when none are named (the DRA ones are drawn as a group of their own, --dra N).
CLASSIC = list(CLASSES)
CLASSES.update(dra.CLASSES)
# Named groups of classes for --classes: ``dra`` is every DRA class, ``all`` every class.
GROUPS = {dra.GROUP: list(dra.CLASSES), "all": list(CLASSES)}
# Config groups and their weights; a scenario in the ``profiles`` group sends each pod to a random profile.
CONFIG_WEIGHTS = {"default": 14, "weighted": 2, "ratio": 2, "profiles": 2}


def runtime_class() -> JSON:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": RUNTIME_CLASS},
            "handler": "runc", "overhead": {"podFixed": dict(OVERHEAD)}}


def generate(count: int, seed: int = 0, classes: list[str] | None = None) -> list[Scenario]:
    """``count`` scenarios, classes drawn by weight (only ``classes`` when given), each from its own seed."""
    names = [n for c in (classes or CLASSIC) for n in GROUPS.get(c, [c])]
    unknown = [c for c in names if c not in CLASSES]
    if unknown:
        raise ValueError(f"unknown scenario classes {unknown} (known: {', '.join(CLASSES)})")
    weights = [CLASSES[c][1] for c in names]
    top = random.Random(seed)
    out = []
    for _ in range(count):
        klass = top.choices(names, weights)[0]
        group = top.choices(list(CONFIG_WEIGHTS), list(CONFIG_WEIGHTS.values()))[0]
        sub = top.randrange(2**32)
        b = Builder(random.Random(sub), klass, config=group)
        CLASSES[klass][0](b)
        if group == "profiles":
            for p in b.pending:
                p["spec"]["schedulerName"] = b.pick(configs.profile_names(group))
        sc = b.scenario(sub)
        if any(p["spec"].get("runtimeClassName") for p in sc.pending):
            sc.objects.insert(0, runtime_class())
        out.append(sc)
    return out
