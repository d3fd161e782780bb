"""The real kube-scheduler v1.36.3 scheduling scenarios through a real kube-apiserver: the oracle's reference side.

One etcd + kube-apiserver for the whole run (tests/live/controlplane.py), one kube-scheduler process per scheduler
config group. Scenarios run one after another, each with fresh names. Before a scenario's pending pods are created,
a probe pod proves the scheduler's cache holds exactly this scenario's nodes (and, since pod events arrive in
order, the bound pods created before it): it tolerates everything, selects this scenario's nodes by label and asks
for a resource no node has, so a synced cache answers ``0/N nodes are available: N Insufficient <probe>``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from accelsched.live import kube as k
from accelsched.live.kube import ApiError, Kube, api_client
from conformance import configs, dra
from conformance.outcome import PodOutcome
from conformance.scenario import JSON, KIND_ORDER, Scenario, key, namespaces_of, rename, renaming

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "live"))  # the control plane helper lives with the live tests

from controlplane import ControlPlane, find_binaries  # noqa: E402

SCENARIO_LABEL = "conformance.accelsched.io/scenario"
PROBE_RESOURCE = "conformance.accelsched.io/probe"
PROBE_CLASS = "conformance-probe"  # preemptionPolicy Never: a probe never evicts anything
# No kube-controller-manager or kubelet runs here, so the admission plugins that wait for them are off: nodes are
# created Ready (no not-ready taint to remove) and pods need no ServiceAccount object.
APISERVER_ARGS = ("--disable-admission-plugins=TaintNodesByCondition,ServiceAccount",)

RESOURCES = {
    "Node": k.NODES,
    "Namespace": k.NAMESPACES,
    "Pod": k.PODS,
    "PriorityClass": k.Resource("/apis/scheduling.k8s.io/v1", "priorityclasses", namespaced=False),
    "PersistentVolume": k.Resource("/api/v1", "persistentvolumes", namespaced=False),
    "PersistentVolumeClaim": k.Resource("/api/v1", "persistentvolumeclaims"),
    "StorageClass": k.Resource("/apis/storage.k8s.io/v1", "storageclasses", namespaced=False),
    "CSINode": k.Resource("/apis/storage.k8s.io/v1", "csinodes", namespaced=False),
    "CSIDriver": k.Resource("/apis/storage.k8s.io/v1", "csidrivers", namespaced=False),
    "CSIStorageCapacity": k.Resource("/apis/storage.k8s.io/v1", "csistoragecapacities"),
    "RuntimeClass": k.Resource("/apis/node.k8s.io/v1", "runtimeclasses", namespaced=False),
    "DeviceClass": k.Resource("/apis/resource.k8s.io/v1", "deviceclasses", namespaced=False),
    "ResourceSlice": k.Resource("/apis/resource.k8s.io/v1", "resourceslices", namespaced=False),
    "ResourceClaim": k.Resource("/apis/resource.k8s.io/v1", "resourceclaims"),
    "ResourceClaimTemplate": k.Resource("/apis/resource.k8s.io/v1", "resourceclaimtemplates"),
}
SHARED_KINDS = ("PriorityClass", "CSIDriver", "RuntimeClass")  # the same in every scenario: created once, never deleted
STORAGE_KINDS = ("PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode", "CSIStorageCapacity")
STORAGE_SETTLE_SECONDS = 0.2
DRA_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
# The probe proves the node and pod informers; kube-scheduler's DRA informers (slices, classes, claims) are others.
DRA_SETTLE_SECONDS = 0.15
# Status is dropped on create: patched after (a bound pod's phase and startTime, claims' and volumes' phases).
STATUS_KINDS = ("PersistentVolume", "PersistentVolumeClaim", "Pod")


class OracleError(RuntimeError):
    """The real side could not decide a scenario (a timeout, a refused object); the message says which."""


class PodWatch:
    """One watch over every pod of the cluster, kept in a dict; waiters block on a condition until a predicate on
    a pod holds (no polling of the API server)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.pods: dict[str, JSON] = {}
        self.gone: set[str] = set()
        self.changed = threading.Condition()
        self.stopped = False
        listing = kube.list(k.PODS)
        self.version = listing["metadata"]["resourceVersion"]
        for pod in listing["items"]:
            self.pods[key(pod)] = pod
        self.thread = threading.Thread(target=self._run, daemon=True, name="conformance-podwatch")
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped:
            try:
                for event in self.kube.watch(k.PODS, self.version, 60):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        self.version = self.kube.list(k.PODS, limit=1)["metadata"]["resourceVersion"]
                        break
                    self.version = (obj.get("metadata") or {}).get("resourceVersion", self.version)
                    if event.get("type") == "BOOKMARK":
                        continue
                    with self.changed:
                        name = key(obj)
                        if event.get("type") == "DELETED":
                            self.pods.pop(name, None)
                            self.gone.add(name)
                        else:
                            self.pods[name] = obj
                            self.gone.discard(name)
                        self.changed.notify_all()
            except ApiError:
                if not self.stopped:
                    time.sleep(0.1)

    def wait(self, name: str, predicate: Any, timeout: float) -> JSON | None:
        """The pod once ``predicate(pod)`` holds, or None after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                pod = self.pods.get(name)
                if pod is not None and predicate(pod):
                    return pod
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.changed.wait(left)

    def snapshot(self, names: list[str]) -> dict[str, JSON | None]:
        with self.changed:
            return {n: self.pods.get(n) for n in names}

    def quiet(self, seconds: float, timeout: float) -> None:
        """Return once no pod changed for ``seconds`` (or after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while time.monotonic() < deadline:
                if not self.changed.wait(min(seconds, max(0.0, deadline - time.monotonic()))):
                    return

    def stop(self) -> None:
        self.stopped = True


def condition(pod: JSON, type_: str = "PodScheduled") -> JSON | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return None


def decided(pod: JSON) -> bool:
    """Bound, nominated, or marked PodScheduled=False by the scheduler (or the API server, for gates)."""
    if (pod.get("spec") or {}).get("nodeName") or (pod.get("status") or {}).get("nominatedNodeName"):
        return True
    c = condition(pod)
    return bool(c and c.get("status") == "False")


def _victim(pod: JSON | None) -> bool:
    if pod is None:
        return True
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return True
    c = condition(pod, "DisruptionTarget")
    return bool(c and c.get("status") == "True")


class KubeScheduler:
    """The real kube-scheduler as a child process, with a KubeSchedulerConfiguration written for it."""

    def __init__(self, binary: Path, kubeconfig: Path, workdir: Path, group: str) -> None:
        self.group = group
        self.config_path = workdir / f"kube-scheduler-{group}.yaml"
        doc = configs.kube_scheduler_config(group, str(kubeconfig))
        self.config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
        self.log_path = workdir / f"kube-scheduler-{group}.log"
        args = [str(binary), f"--config={self.config_path}", "--secure-port=0", "--v=1"]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)


class RealCluster:
    """The control plane, the pod watch and (per config group) a kube-scheduler; ``run`` decides one scenario."""

    def __init__(self, workdir: Path, workers: int = 8) -> None:
        self.workdir = workdir
        bin_dir = find_binaries()
        self.cp = ControlPlane(workdir / "cp", bin_dir, extra_apiserver_args=APISERVER_ARGS)
        self.workers = workers
        self.kube: Kube | None = None
        self.watch: PodWatch | None = None
        self.scheduler: KubeScheduler | None = None
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="conformance-api")
        self.counter = itertools.count()
        self.run_tag = os.urandom(2).hex()
        self.shared: set[str] = set()

    def start(self) -> RealCluster:
        self.cp.start()
        self.kube = Kube(api_client(str(self.cp.kubeconfig), pool_size=self.workers * 2))
        self.watch = PodWatch(self.kube)
        probe_class = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                       "metadata": {"name": PROBE_CLASS}, "value": 0, "preemptionPolicy": "Never"}
        self._create(probe_class, [])
        return self

    def stop(self) -> None:
        if self.scheduler:
            self.scheduler.stop()
            self.scheduler = None
        if self.watch:
            self.watch.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.cp.stop()

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def use_config(self, group: str) -> None:
        """(Re)start kube-scheduler with the config of ``group`` unless it already runs with it."""
        if self.scheduler and self.scheduler.group == group and self.scheduler.alive():
            return
        if self.scheduler:
            self.scheduler.stop()
        assert self.cp.bin_dir is not None
        self.scheduler = KubeScheduler(self.cp.bin_dir / "kube-scheduler", self.cp.kubeconfig, self.workdir, group)

    # ------------------------------------------------------------------------------------------ one scenario

    def run(self, scenario: Scenario, timeout: float = 10.0, settle: float = 0.0) -> list[PodOutcome]:
        """Create the scenario, prove the scheduler synced, then create its pending pods one at a time and record
        each first decision. Everything is force-deleted afterwards, also on failure."""
        assert self.kube is not None and self.watch is not None
        self.use_config(scenario.config)
        tag = f"c{self.run_tag}-{next(self.counter)}"
        names = renaming(scenario, tag)
        back = {v: k_ for k_, v in names.items()}
        objects = [rename(o, names) for o in scenario.objects]
        pending = [rename(o, names) for o in scenario.pending]
        for node in objects:
            if node["kind"] == "Node":
                node["metadata"].setdefault("labels", {})[SCENARIO_LABEL] = tag
        created: list[JSON] = []
        try:
            self._create_all(objects, created)
            self._sync(tag, len(scenario.nodes), timeout)
            if any(o["kind"] in STORAGE_KINDS for o in objects):
                # The probe proves the node and pod caches only; the storage informers get a moment more.
                settle = max(settle, STORAGE_SETTLE_SECONDS)
            if any(o["kind"] in DRA_KINDS for o in objects):
                settle = max(settle, DRA_SETTLE_SECONDS)
            if settle:
                time.sleep(settle)
            bound = [key(o) for o in objects if o["kind"] == "Pod"]
            outcomes = []
            for pod in pending:
                outcome = self._decide(pod, bound, created, back, timeout)
                # A DRA error message names claims, requests, pools by their unique names: back to canonical.
                outcome.message = outcome.message.replace(f"{tag}-", "")
                outcomes.append(outcome)
                if outcome.node:  # a later pod may preempt it: it is a bound pod from now on
                    bound.append(key(pod))
            return outcomes
        finally:
            self._delete(created)

    def _create_all(self, objects: list[JSON], created: list[JSON]) -> None:
        assert self.kube is not None
        kube = self.kube
        for ns in namespaces_of(objects):
            self._create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, created)
        # Creation order matters only by kind (namespaces before pods, nodes before the pods bound to them).
        by_kind: dict[str, list[JSON]] = {}
        for obj in objects:
            by_kind.setdefault(obj["kind"], []).append(obj)
        for kind in KIND_ORDER:
            batch = by_kind.pop(kind, [])
            if kind in SHARED_KINDS:
                batch = [o for o in batch if (kind, o["metadata"]["name"]) not in self.shared]
            list(self.pool.map(lambda o: self._create(o, created), batch))
        if by_kind:
            raise OracleError(f"kinds the oracle cannot create: {sorted(by_kind)}")
        # An allocated claim's status (reservedFor names its bound pods by uid): written once the pods exist.
        uids = {key(o): o["metadata"].get("uid", "") for o in created if o["kind"] == "Pod"}
        claims = [o for o in created if o["kind"] == "ResourceClaim" and o.get("status")]
        list(self.pool.map(lambda o: dra.write_claim_status(kube, RESOURCES["ResourceClaim"], o, uids), claims))

    def _create(self, obj: JSON, created: list[JSON]) -> None:
        assert self.kube is not None
        kind = obj["kind"]
        resource = RESOURCES[kind]
        ns = (obj.get("metadata") or {}).get("namespace")
        try:
            made = self.kube.create(resource, obj, ns)
        except ApiError as exc:
            if exc.status == 409 and kind in SHARED_KINDS:
                self.shared.add((kind, obj["metadata"]["name"]))
                return
            raise OracleError(f"the API server refused {kind} {key(obj)}: {exc.message}") from None
        if kind in SHARED_KINDS:
            self.shared.add((kind, obj["metadata"]["name"]))
            return
        obj.setdefault("metadata", {})["uid"] = (made.get("metadata") or {}).get("uid", "")
        created.append(obj)
        if kind in STATUS_KINDS and obj.get("status"):
            self.kube.patch(resource, obj["metadata"]["name"], {"status": obj["status"]}, ns, sub="status",
                            content_type="application/merge-patch+json")

    def _sync(self, tag: str, nodes: int, timeout: float) -> None:
        """Create probe pods until one is answered with exactly this scenario's nodes (see the module docstring)."""
        assert self.kube is not None and self.watch is not None
        ns = "default"
        prefix, want = f"0/{nodes} nodes are available: ", f"{nodes} Insufficient {PROBE_RESOURCE}"
        deadline = time.monotonic() + timeout
        for attempt in itertools.count():
            name = f"probe-{tag}-{attempt}"
            self.kube.create(k.PODS, probe_pod(name, tag), ns)
            pod = self.watch.wait(f"{ns}/{name}", decided, max(0.1, deadline - time.monotonic()))
            self.kube.request("DELETE", k.PODS.path(ns, name), {"gracePeriodSeconds": 0})
            message = (condition(pod) or {}).get("message", "") if pod else ""
            if message.startswith(prefix) and want in message.split(". ")[0]:
                return
            if time.monotonic() > deadline:
                alive = "" if self.scheduler and self.scheduler.alive() else " (kube-scheduler exited)"
                tail = self.scheduler.log_tail() if self.scheduler else ""
                raise OracleError(f"kube-scheduler did not sync{alive}: last probe said {message!r}\n{tail}")
            time.sleep(0.02)

    def _decide(
        self, pod: JSON, bound: list[str], created: list[JSON], back: dict[str, str], timeout: float
    ) -> PodOutcome:
        assert self.kube is not None and self.watch is not None
        name = key(pod)
        self._create(pod, created)
        if (pod.get("spec") or {}).get("resourceClaims"):
            # No kube-controller-manager runs: play its resourceclaim controller for the pod's templates.
            created.extend(dra.make_template_claims(self.kube, RESOURCES, pod))
        seen = self.watch.wait(name, decided, timeout if not _claims(pod) else 0.5)
        if seen is None and _claims(pod):
            # A pod whose claims need binding waits in PreBind for a PV controller or provisioner (none runs
            # here): the decision shows on the claims (selected-node) or the PVs (claimRef) instead.
            deadline = time.monotonic() + timeout
            while seen is None and time.monotonic() < deadline:
                chosen = self._volume_node(pod, created)
                if chosen:
                    # Play the PV controller for the static bindings, as a cluster has one: the claims become bound,
                    # so kube-scheduler's PreBind finishes and later pods see them bound (accelsched offline binds
                    # them at PreBind too). Dynamic provisions keep their selected-node annotation: no provisioner.
                    if self._complete_static_bindings(pod):
                        self.watch.wait(name, lambda p: bool((p.get("spec") or {}).get("nodeName")), 5.0)
                    return PodOutcome(pod=_canonical_key(name, back), node=back.get(chosen, chosen))
                seen = self.watch.wait(name, decided, 0.1)
        if seen is None:
            raise OracleError(f"no decision for pod {name} after {timeout:.0f}s")
        node = (seen.get("spec") or {}).get("nodeName") or ""
        nominated = (seen.get("status") or {}).get("nominatedNodeName") or ""
        cond = condition(seen) or {}
        out = PodOutcome(
            pod=_canonical_key(name, back),
            node=back.get(node, node),
            message=str(cond.get("message") or "") if not node else "",
            reason=str(cond.get("reason") or "") if not node else "",
        )
        if node and _has_dra(seen):
            out.claims = dra.read_allocations(self.kube, RESOURCES["ResourceClaim"], seen, back)
        if nominated and not node:
            # Victims are marked (DisruptionTarget) and deleted asynchronously: wait until the pods are quiet.
            self.watch.quiet(0.15, 3.0)
            snap = self.watch.snapshot(bound)
            victims = sorted(n for n, p in snap.items() if _victim(p))
            out.message = out.reason = ""
            if not victims:
                # No preemption: kube-scheduler nominates the node it is binding to while PreBind waits (volumes).
                if _claims(pod) and self._complete_static_bindings(pod):
                    self.watch.wait(name, lambda p: bool((p.get("spec") or {}).get("nodeName")), 5.0)
                out.node = back.get(nominated, nominated)
                if _has_dra(seen) or _extended_requests(seen):  # DRA's PreBind writes the allocations, then binds
                    done = self.watch.wait(name, lambda p: bool((p.get("spec") or {}).get("nodeName")), timeout)
                    if done is None:
                        raise OracleError(f"pod {name} nominated to {nominated} but never bound (PreBind failed?)")
                    if _has_dra(done):  # an extended resource claim shows in the status only once PreBind patched it
                        out.claims = dra.read_allocations(self.kube, RESOURCES["ResourceClaim"], done, back)
                return out
            out.nominated = back.get(nominated, nominated)
            out.victims = [_canonical_key(v, back) for v in victims]
            # Let the preemption finish as it does offline: the victims go, the preemptor is bound.
            for v in victims:
                ns, _, vname = v.partition("/")
                with contextlib.suppress(ApiError):
                    self.kube.request("DELETE", k.PODS.path(ns, vname), {"gracePeriodSeconds": 0})
                bound.remove(v)
                # The resourceclaim controller's part: the victim's reservations go, unreserved claims are freed.
                dra.release_claims(self.kube, RESOURCES["ResourceClaim"], snap.get(v))
            again = self.watch.wait(name, lambda p: bool((p.get("spec") or {}).get("nodeName")), timeout)
            got = ((again or {}).get("spec") or {}).get("nodeName") or ""
            out.node = back.get(got, got)
            if got and again is not None and _has_dra(again):
                out.claims = dra.read_allocations(self.kube, RESOURCES["ResourceClaim"], again, back)
        return out

    def _volume_node(self, pod: JSON, created: list[JSON]) -> str:
        """The node kube-scheduler chose for a pod stuck in VolumeBinding's PreBind, or ''."""
        assert self.kube is not None
        ns = pod["metadata"]["namespace"]
        for claim in _claims(pod):
            pvc = self.kube.get(RESOURCES["PersistentVolumeClaim"], claim, ns)
            node = ((pvc.get("metadata") or {}).get("annotations") or {}).get("volume.kubernetes.io/selected-node")
            if node:
                return str(node)
        pvs = self.kube.list(RESOURCES["PersistentVolume"])["items"]
        for pv in pvs:
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if ref.get("namespace") == ns and ref.get("name") in _claims(pod) and ref.get("uid"):
                # kube-scheduler's binder set this claimRef (with the claim's uid); the generator's carry none.
                terms = (((pv["spec"].get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")) or []
                for expr in (e for t in terms for e in t.get("matchExpressions") or []):
                    if expr.get("key") == "kubernetes.io/hostname" and expr.get("values"):
                        return str(expr["values"][0])
        return ""

    def _complete_static_bindings(self, pod: JSON) -> bool:
        """What the PV controller does for a PV kube-scheduler's binder gave a claimRef: the claim gets the volume
        name and the bind-completed annotations, both objects phase Bound. True when it bound a claim."""
        assert self.kube is not None
        ns, claims, done = pod["metadata"]["namespace"], set(_claims(pod)), False
        for pv in self.kube.list(RESOURCES["PersistentVolume"])["items"]:
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if ref.get("namespace") != ns or ref.get("name") not in claims or not ref.get("uid"):
                continue
            pvc = self.kube.get(RESOURCES["PersistentVolumeClaim"], ref["name"], ns)
            if (pvc.get("spec") or {}).get("volumeName"):
                continue
            name = pv["metadata"]["name"]
            annotations = {"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"}
            merge = "application/merge-patch+json"
            self.kube.patch(RESOURCES["PersistentVolumeClaim"], ref["name"],
                            {"metadata": {"annotations": annotations}, "spec": {"volumeName": name}}, ns,
                            content_type=merge)
            status = {"phase": "Bound", "accessModes": pv["spec"].get("accessModes") or [],
                      "capacity": pv["spec"].get("capacity") or {}}
            self.kube.patch(RESOURCES["PersistentVolumeClaim"], ref["name"], {"status": status}, ns, sub="status",
                            content_type=merge)
            self.kube.patch(RESOURCES["PersistentVolume"], name, {"status": {"phase": "Bound"}}, None, sub="status",
                            content_type=merge)
            done = True
        return done

    def _delete(self, created: list[JSON]) -> None:
        """Force-delete what the scenario created: pods first (grace 0: no kubelet finishes a graceful delete)."""
        assert self.kube is not None
        kube = self.kube

        def delete(obj: JSON) -> None:
            meta = obj["metadata"]
            resource = RESOURCES[obj["kind"]]
            if obj["kind"] == "ResourceClaim":  # kube-scheduler's delete-protection finalizer would keep it
                with contextlib.suppress(ApiError):
                    kube.patch(resource, meta["name"], {"metadata": {"finalizers": None}}, meta.get("namespace"),
                               content_type="application/merge-patch+json")
            with contextlib.suppress(ApiError):
                kube.request("DELETE", resource.path(meta.get("namespace"), meta["name"]), {"gracePeriodSeconds": 0})

        order = ("Pod", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "DeviceClass",
                 "PersistentVolumeClaim", "CSIStorageCapacity", "PersistentVolume", "Node", "CSINode",
                 "StorageClass", "Namespace")
        for kind in order:
            batch = [o for o in created if o["kind"] == kind]
            if kind == "Namespace":
                # No namespace controller here: a deleted namespace would stay Terminating. Empty ones are harmless.
                continue
            list(self.pool.map(delete, batch))
        if self.watch:
            self.watch.gone.clear()


def _claims(pod: JSON) -> list[str]:
    return [v["persistentVolumeClaim"]["claimName"] for v in (pod.get("spec") or {}).get("volumes") or []
            if v.get("persistentVolumeClaim")]


def _has_dra(pod: JSON) -> bool:
    status = pod.get("status") or {}
    return bool((pod.get("spec") or {}).get("resourceClaims") or status.get("extendedResourceClaimStatus"))


def _extended_requests(pod: JSON) -> bool:
    """Whether the pod requests an extended resource, which a DeviceClass may serve through DRA."""
    return any("/" in name for c in (pod.get("spec") or {}).get("containers") or []
               for name in ((c.get("resources") or {}).get("requests") or {}))


def _canonical_key(name: str, back: dict[str, str]) -> str:
    ns, _, pod = name.partition("/")
    return f"{back.get(ns, ns)}/{pod}"


def probe_pod(name: str, tag: str) -> JSON:
    """Fits no node (a resource none has), looks only at this scenario's nodes, never preempts, tolerates all."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "priorityClassName": PROBE_CLASS,
            "tolerations": [{"operator": "Exists"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": SCENARIO_LABEL, "operator": "In", "values": [tag]}]}
                        ]
                    }
                }
            },
            "containers": [
                {
                    "name": "probe",
                    "image": "registry.example.com/probe:1",
                    "resources": {"requests": {PROBE_RESOURCE: "1"}, "limits": {PROBE_RESOURCE: "1"}},
                }
            ],
        },
    }


def dump(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
