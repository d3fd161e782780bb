"""``python -m benchmarks.fabric_kueue``: accelsched's fabric placement side by side with the real Kueue v0.19.2 TAS.

    python -m benchmarks.fabric_kueue                 # 5 seeded fabrics, 8 big gangs each
    python -m benchmarks.fabric_kueue --seeds 1 --gangs 4 --blocks 1
    python -m benchmarks.fabric_kueue --request slices   # block, rack, preferred-rack or slices (of 4 per rack)

Each trial is one fabric: blocks x racks (4) x hosts (4) of 8 GPUs, a seeded share of each host already taken
(given as a smaller allocatable, so that both sides read the same free shape without a scheduler for the
background), and a sequence of gangs of pods of 4 GPUs with ranks by ``batch.kubernetes.io/job-completion-index``,
each asking (``--request``): ``block``, 4 to 16 pods required in one block; ``rack``, 2 to 8 pods required in one
rack; ``preferred-rack``, 4 to 16 pods preferred in one rack; ``slices``, 4 to 16 pods required in one block in
slices of 4 pods each required in one rack.

- Kueue: the controller (conformance/kueue's process: its CRDs, internal certificates, TopologyAwareScheduling on
  by default since 0.14) against the test API server (tests/live/controlplane.py) with a Topology (block, rack,
  hostname), a ResourceFlavor with that topologyName, a ClusterQueue whose GPU quota is twice the free GPUs (so
  only the topology decides), a LocalQueue, the Nodes, and one Workload per gang, created one at a time, each
  waited for until Kueue admits it or says why not (then it is deleted: a gang that does not fit holds nothing).
  An admitted Workload's ``status.admission.podSetAssignments[0].topologyAssignment`` lists hosts and pod counts;
  Kueue's TopologyUngater gives ranks to those domains in that order, so rank r's host is read off the list.
- accelsched: the same Topology, Nodes and gangs (a PodGroup and an Indexed Job each, with Kueue's
  podset annotations for the same request) through the engine, gangs in the same order.

Printed per trial and in total: gangs placed, gangs both placed (and of those, on the very same hosts rank by
rank), racks and hosts used by the gangs both placed, rank crossings of racks and hosts. The goal (issue 26):
never more domains, never fewer gangs placed, fewer rank crossings.

Needs the Kueue binary (``make kueue``) and conformance/kueue (the queues branch); exits 2 with why when absent.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelsched.api.loader import Document, Inputs, build_inputs
from accelsched.engine import Session
from benchmarks.fabric import BLOCK, GPU, GPUS, HOST, INDEX, PER_POD, RACK, crossings, indexed_job
from benchmarks.harness import Unavailable, kueue_binary, kueue_control_plane

RACKS, HOSTS = 4, 4
POOL = "fabric.accelsched.io/pool"  # the ResourceFlavor's nodeLabels (required with a topologyName)
NAMESPACE = "fabric"
KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"


@dataclass(frozen=True)
class Request:
    """One kind of topology request, as Kueue's Workload field and as the pod template's annotations."""

    kueue: dict[str, Any]
    annotations: dict[str, str]
    sizes: tuple[int, ...]


ANNOTATION = "kueue.x-k8s.io/podset-"
REQUESTS = {
    "block": Request({"required": BLOCK}, {f"{ANNOTATION}required-topology": BLOCK}, (4, 8, 12, 16)),
    "rack": Request({"required": RACK}, {f"{ANNOTATION}required-topology": RACK}, (2, 4, 6, 8)),
    "preferred-rack": Request({"preferred": RACK}, {f"{ANNOTATION}preferred-topology": RACK}, (4, 8, 12, 16)),
    "slices": Request(
        {"required": BLOCK, "podSetSliceRequiredTopology": RACK, "podSetSliceSize": 4},
        {
            f"{ANNOTATION}required-topology": BLOCK,
            f"{ANNOTATION}slice-required-topology": RACK,
            f"{ANNOTATION}slice-size": "4",
        },
        (4, 8, 12, 16),
    ),
}


@dataclass
class Fabric:
    """One trial's input: hosts with their free GPUs, the gangs (name, pods) in arrival order, and what they ask."""

    free: dict[str, int]
    gangs: list[tuple[str, int]]
    request: Request


@dataclass
class Outcome:
    """Per gang: the host of each rank (rank order), or None when not placed."""

    hosts: dict[str, list[str] | None] = field(default_factory=dict)


def fabric(seed: int, blocks: int, gangs: int, request: Request) -> Fabric:
    rng = random.Random(seed)
    free = {
        f"b{b}-r{r}-h{h}": GPUS - rng.choice([0, 0, 0, 4, 8])
        for b in range(blocks)
        for r in range(RACKS)
        for h in range(HOSTS)
    }
    return Fabric(free, [(f"g{g}", rng.choice(request.sizes)) for g in range(gangs)], request)


def labels(host: str) -> dict[str, str]:
    b, r, _ = host.split("-")
    return {BLOCK: b, RACK: f"{b}-{r}", HOST: host, POOL: "tas"}


def topology() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "fabric"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]},
    }


# ------------------------------------------------------------------------------------------------ accelsched


def accelsched(case: Fabric) -> Outcome:
    docs: list[dict[str, Any]] = [topology()]
    for host, free in case.free.items():
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": host, "labels": labels(host)},
                "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(free)}},
            }
        )
    for name, pods in case.gangs:
        docs.append(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"minMember": pods},
            }
        )
        docs.append(indexed_job(name, pods, PER_POD, case.request.annotations))
    inputs = build_inputs([Document(d, "fabric.yaml", d["kind"]) for d in docs], base=Inputs())
    members: dict[str, list] = {}
    for r in Session.start(inputs).schedule():
        members.setdefault(r.pod.labels["scheduling.x-k8s.io/pod-group"], []).append(r)
    out = Outcome()
    for name, _ in case.gangs:
        rs = sorted(members.get(name, []), key=lambda r: int(r.pod.labels[INDEX]))
        out.hosts[name] = [r.node for r in rs] if rs and all(r.node for r in rs) else None
    return out


# ------------------------------------------------------------------------------------------------ Kueue


class RealKueue:
    """etcd, kube-apiserver and the Kueue controller; ``run`` answers one Fabric in its own namespace."""

    def __init__(self, workdir: Path) -> None:
        self._process, self.cp = kueue_control_plane(workdir)
        self._binary, self.workdir = kueue_binary(self._process), workdir
        self.kueue: Any = None
        self.trials = 0

    def __enter__(self) -> RealKueue:
        from controlplane import apply_crds

        from accelsched.live import kube as k

        self.cp.start()
        self.api = k.api_client(str(self.cp.kubeconfig), pool_size=8)
        self.kube = k.Kube(self.api)
        apply_crds(self.api, self._process.write_crds(self.workdir / "crds"))
        self.kueue = self._process.KueueProcess(self._binary, self.cp.kubeconfig, self.kube, self.workdir).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.kueue is not None:
            self.kueue.stop()
        self.cp.stop()

    def _resource(self, plural: str, namespaced: bool = False) -> Any:
        from accelsched.live import kube as k

        return k.Resource(KUEUE_API, plural, namespaced=namespaced)

    def run(self, case: Fabric, timeout: float = 30.0) -> Outcome:
        """Each trial has its own flavor, queues, namespace and pool label value, so trials never share nodes."""
        from controlplane import ensure_namespace, make_node

        self.trials += 1
        tag = f"t{self.trials}"
        ns = f"{NAMESPACE}-{tag}"
        ensure_namespace(self.api, ns)
        for host, free in case.free.items():
            make_node(
                self.api,
                f"{tag}-{host}",
                {**labels(host), HOST: f"{tag}-{host}", POOL: tag},
                capacity={"cpu": "64", "memory": "512Gi", "pods": "110", GPU: free},
            )
        total = 2 * sum(case.free.values())  # quota never binds: the topology decides
        objects = [
            ("topologies", None, {**topology(), "metadata": {"name": "fabric"}}),
            (
                "resourceflavors",
                None,
                {"metadata": {"name": tag}, "spec": {"nodeLabels": {POOL: tag}, "topologyName": "fabric"}},
            ),
            (
                "clusterqueues",
                None,
                {
                    "metadata": {"name": tag},
                    "spec": {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                        "resourceGroups": [
                            {
                                "coveredResources": [GPU],
                                "flavors": [{"name": tag, "resources": [{"name": GPU, "nominalQuota": str(total)}]}],
                            }
                        ],
                    },
                },
            ),
            ("localqueues", ns, {"metadata": {"name": "lq"}, "spec": {"clusterQueue": tag}}),
        ]
        for plural, namespace, body in objects:
            body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": _kind(plural), **body}
            try:
                self.kube.create(self._resource(plural, namespace is not None), body, namespace)
            except Exception as exc:  # the shared Topology exists from the first trial on
                if getattr(exc, "status", None) != 409:
                    raise
        self._wait_active(tag, timeout)
        out = Outcome()
        for name, pods in case.gangs:
            out.hosts[name] = self._admit(ns, name, pods, case.request, tag, timeout)
        return out

    def _wait_active(self, cq: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.kube.get(self._resource("clusterqueues"), cq).get("status") or {}
            if any(c["type"] == "Active" and c["status"] == "True" for c in status.get("conditions") or []):
                return
            time.sleep(0.2)
        raise RuntimeError(f"ClusterQueue {cq} not active after {timeout:.0f}s:\n{self.kueue.log_tail()}")

    def _admit(self, ns: str, name: str, pods: int, request: Request, tag: str, timeout: float) -> list[str] | None:
        """Create the gang's Workload and wait for Kueue's decision: the host of each rank, or None."""
        wl = self._resource("workloads", namespaced=True)
        template = {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {GPU: str(PER_POD)}}}],
            }
        }
        self.kube.create(
            wl,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {"name": name},
                "spec": {
                    "queueName": "lq",
                    "podSets": [
                        {
                            "name": "main",
                            "count": pods,
                            "template": template,
                            "topologyRequest": {**request.kueue, "podIndexLabel": INDEX},
                        }
                    ],
                },
            },
            ns,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.kube.get(wl, name, ns).get("status") or {}
            if status.get("admission"):
                return _ranks(status["admission"]["podSetAssignments"][0]["topologyAssignment"], f"{tag}-")
            if any(
                c["type"] == "QuotaReserved" and c["status"] == "False" and c.get("message")
                for c in status.get("conditions") or []
            ):
                # Withdrawn, as a gang that does not fit holds nothing on accelsched's side either; left queued,
                # Kueue retries it beside the next gang and the sequence is no longer one decision at a time.
                self.kube.delete(wl, name, ns)
                return None
            time.sleep(0.1)
        raise RuntimeError(f"Workload {ns}/{name}: no decision after {timeout:.0f}s:\n{self.kueue.log_tail()}")


def _kind(plural: str) -> str:
    return {
        "topologies": "Topology",
        "resourceflavors": "ResourceFlavor",
        "clusterqueues": "ClusterQueue",
        "localqueues": "LocalQueue",
    }[plural]


def _ranks(assignment: dict[str, Any], prefix: str) -> list[str]:
    """Expand a v1beta2 TopologyAssignment (slices of domains, values per level, pod counts) into the host of each
    rank, in the order Kueue lists the domains; only the hostname level is read (Kueue assigns only hostnames when
    the Topology has that level)."""
    level = assignment["levels"].index(HOST)
    hosts: list[str] = []
    for piece in assignment["slices"]:
        n = piece["domainCount"]
        values = piece["valuesPerLevel"][level]
        if "universal" in values:
            names = [values["universal"]] * n
        else:
            ind = values["individual"]
            names = [f"{ind.get('prefix') or ''}{root}{ind.get('suffix') or ''}" for root in ind["roots"]]
        counts = piece["podCounts"]
        per = [counts["universal"]] * n if "universal" in counts else counts["individual"]
        for host, count in zip(names, per, strict=True):
            hosts += [host.removeprefix(prefix)] * count
    return hosts


# ------------------------------------------------------------------------------------------------ comparison


def compare(ours: Outcome, theirs: Outcome) -> dict[str, int]:
    """Totals over the gangs: placed by each, and racks, hosts and rank crossings over the gangs both placed."""
    figures = dict.fromkeys(
        (
            "gangs",
            "placed_accelsched",
            "placed_kueue",
            "both",
            "same_hosts",
            "racks_accelsched",
            "racks_kueue",
            "hosts_accelsched",
            "hosts_kueue",
            "rack_x_accelsched",
            "rack_x_kueue",
            "host_x_accelsched",
            "host_x_kueue",
        ),
        0,
    )
    for name, a in ours.hosts.items():
        b = theirs.hosts[name]
        figures["gangs"] += 1
        figures["placed_accelsched"] += a is not None
        figures["placed_kueue"] += b is not None
        if a is None or b is None:
            continue
        figures["both"] += 1
        figures["same_hosts"] += a == b
        for side, hosts in (("accelsched", a), ("kueue", b)):
            figures[f"racks_{side}"] += len({h.rsplit("-", 1)[0] for h in hosts})
            figures[f"hosts_{side}"] += len(set(hosts))
            figures[f"rack_x_{side}"] += crossings(hosts, 2)
            figures[f"host_x_{side}"] += crossings(hosts, 3)
    return figures


def side_by_side(
    seeds: list[int], blocks: int, gangs: int, workdir: Path, request: str = "block"
) -> list[dict[str, int]]:
    with RealKueue(workdir) as kueue:
        rows = []
        for seed in seeds:
            case = fabric(seed, blocks, gangs, REQUESTS[request])
            rows.append({"seed": seed, **compare(accelsched(case), kueue.run(case))})
        return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fabric_kueue", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--gangs", type=int, default=8)
    parser.add_argument("--request", choices=sorted(REQUESTS), default="block")
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="fabric-kueue-") as tmp:
            rows = side_by_side(list(range(args.seeds)), args.blocks, args.gangs, Path(tmp), args.request)
    except Unavailable as exc:
        print(f"benchmarks.fabric_kueue: {exc}", file=sys.stderr)
        return 2
    keys = [k for k in rows[0] if k != "seed"]
    print("seed " + " ".join(f"{k:>17}" for k in keys))
    for row in rows:
        print(f"{row['seed']:>4} " + " ".join(f"{row[k]:>17}" for k in keys))
    print("all  " + " ".join(f"{sum(r[k] for r in rows):>17}" for k in keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
