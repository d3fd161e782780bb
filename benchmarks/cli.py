"""``python -m benchmarks.cli``: the real ``accelsched schedule`` process end to end, on generated manifests.

    python -m benchmarks.cli                    # both workloads at full size (about a minute with generation)
    python -m benchmarks.cli --quick            # 1/10 sizes, a smoke test
    python -m benchmarks.cli --workload dump --phases --json out/cli.json

The engine benchmarks (``python -m benchmarks``) time ``Scheduler.run`` only; this one times what a user waits
for: ``accelsched schedule -f FILE -o json > /dev/null`` as a subprocess (interpreter start, imports, reading and
parsing the file, validation, admission, Session start, scheduling, printing). Two workloads:

- ``pending``: 5,000 nodes and 10,000 pending pods as multi-document YAML (what people ``kubectl apply``);
  target >= 680 pods/s end to end (kube-scheduler's SchedulingBasic rate at 5,000 nodes);
- ``dump``: ``kubectl get nodes,pods -A -o json`` of a busy cluster, one JSON ``kind: List`` of 5,000 nodes,
  50,000 bound and 5,000 pending pods, objects as the API server returns them; target under 15 s.

``--phases`` also runs the same steps in a child with a CPU timer around each (parse, validate, build, admit,
Session start, schedule, print), so a slow phase is visible. The table gives the child's CPU seconds beside the
wall clock: on a shared machine the wall clock also counts waiting for a core. Speed is reported, never
asserted; the exit status is 1 only when the command failed or did not schedule every pending pod.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from accelsched.api import goyaml

ROOT = Path(__file__).resolve().parent.parent
ACCELERATOR = "qualcomm.com/ai-accelerator"
ACCELERATORS_PER_NODE = 8
ZONES = 3
RACKS_PER_ZONE = 40
IMAGES = [
    ("registry.k8s.io/kube-proxy:v1.36.3", 31_000_000),
    ("registry.k8s.io/pause:3.10", 320_000),
    ("docker.io/library/nginx:1.27", 72_000_000),
    ("ghcr.io/example/trainer:2.4.1", 8_400_000_000),
    ("ghcr.io/example/inference:1.9.0", 5_100_000_000),
    ("quay.io/prometheus/node-exporter:v1.8.2", 12_000_000),
]


# ---------------------------------------------------------------------------------------------- objects


def node_object(i: int) -> dict[str, Any]:
    """A Node as ``kubectl get node -o json`` shows it: labels, taints on a few, capacity/allocatable with an
    accelerator resource, conditions, addresses, images, nodeInfo."""
    name = f"node-{i:05d}"
    zone = f"zone-{i % ZONES}"
    capacity = {
        "cpu": "64",
        "memory": "527988104Ki",
        "ephemeral-storage": "1921802432Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "pods": "110",
        ACCELERATOR: str(ACCELERATORS_PER_NODE),
    }
    allocatable = {**capacity, "cpu": "63500m", "memory": "517502344Ki", "ephemeral-storage": "1771134920441"}
    stamp = "2026-11-02T08:14:55Z"
    conditions = [
        {
            "type": t,
            "status": "False",
            "reason": f"Kubelet{r}",
            "message": m,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        for t, r, m in (
            ("MemoryPressure", "HasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "HasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "HasSufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
    )
    spec: dict[str, Any] = {"podCIDR": f"10.{i // 250}.{i % 250}.0/24", "providerID": f"metal://{name}"}
    if i % 20 == 19:  # a few nodes are reserved for a team: tainted, and labelled for its pods
        spec["taints"] = [{"key": "dedicated", "value": "research", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"6c1a{i:08x}-0000-4000-8000-{i:012x}",
            "resourceVersion": str(1_000_000 + i),
            "creationTimestamp": "2026-10-01T10:00:00Z",
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "ai100-x8",
                "topology.kubernetes.io/region": "region-1",
                "topology.kubernetes.io/zone": zone,
                "example.com/rack": f"{zone}-rack-{i // ZONES % RACKS_PER_ZONE}",
                "accelerator": "ai100",
                **({"dedicated": "research"} if i % 20 == 19 else {}),
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": spec,
        "status": {
            "addresses": [
                {"address": f"10.128.{i // 250}.{i % 250}", "type": "InternalIP"},
                {"address": name, "type": "Hostname"},
            ],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": [
                {"names": [image, f"{image.split(':')[0]}@sha256:{i:064x}"], "sizeBytes": size}
                for image, size in IMAGES
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"b00t{i:028x}",
                "containerRuntimeVersion": "containerd://2.1.4",
                "kernelVersion": "6.8.0-60-generic",
                "kubeProxyVersion": "",
                "kubeletVersion": "v1.36.3",
                "machineID": f"{i:032x}",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 24.04.2 LTS",
                "systemUUID": f"{i:08x}-0000-0000-0000-000000000000",
            },
        },
    }


# (cpu, memory, accelerators) of the pod shapes, cycled through: most pods are CPU-only services, some ask for
# one or two accelerators (inference), a few for a whole node's worth (training).
SHAPES = [
    ("2", "4Gi", 0),
    ("500m", "1Gi", 0),
    ("4", "16Gi", 1),
    ("1", "2Gi", 0),
    ("8", "64Gi", 2),
    ("250m", "512Mi", 0),
    ("2", "8Gi", 0),
    ("16", "128Gi", 8),
    ("1", "4Gi", 1),
    ("100m", "256Mi", 0),
]


def pod_object(i: int, node: str | None, rng: random.Random) -> dict[str, Any]:
    """A Pod of a ReplicaSet as the API server returns it: bound (Running, on ``node``) or Pending."""
    cpu, memory, accel = SHAPES[i % len(SHAPES)]
    app = f"app-{i % 97}"
    namespace = f"team-{i % 13}"
    rs = f"{app}-{(i % 97) * 7919 % 100000:05x}"
    name = f"{rs}-{i:06x}"
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    if accel:
        requests[ACCELERATOR] = str(accel)
    limits = {"memory": memory, **({ACCELERATOR: str(accel)} if accel else {})}
    tolerations = [
        {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
        {
            "effect": "NoExecute",
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "tolerationSeconds": 300,
        },
    ]
    if i % 31 == 0:
        tolerations.append({"key": "dedicated", "operator": "Equal", "value": "research", "effect": "NoSchedule"})
    container = {
        "name": "main",
        "image": IMAGES[2 + i % 3][0],
        "imagePullPolicy": "IfNotPresent",
        "args": ["--port=8080", f"--replica={i}"],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
            {"name": "LOG_LEVEL", "value": "info"},
        ],
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 10,
            "failureThreshold": 3,
            "successThreshold": 1,
            "timeoutSeconds": 1,
        },
        "resources": {"requests": requests, "limits": limits},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "kube-api-access", "readOnly": True}
        ],
    }
    spec: dict[str, Any] = {
        "containers": [container],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": tolerations,
        "volumes": [
            {
                "name": "kube-api-access",
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
                    ],
                },
            }
        ],
    }
    if i % 7 == 0:
        spec["nodeSelector"] = {"topology.kubernetes.io/zone": f"zone-{rng.randrange(ZONES)}"}
    stamp = "2026-11-20T12:00:00Z"
    if node is not None:
        spec["nodeName"] = node
        status: dict[str, Any] = {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp}
                for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "image": container["image"],
                    "imageID": f"sha256:{i:064x}",
                    "containerID": f"containerd://{i:064x}",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": stamp}},
                }
            ],
            "hostIP": f"10.128.0.{i % 250}",
            "podIP": f"10.{i % 200}.{i // 200 % 250}.{i % 250}",
            "qosClass": "Burstable",
            "startTime": stamp,
        }
    else:
        status = {"phase": "Pending", "qosClass": "Burstable"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{rs}-",
            "namespace": namespace,
            "uid": f"{i:08x}-0000-4000-8000-{i:012x}",
            "resourceVersion": str(2_000_000 + i),
            "creationTimestamp": stamp,
            "labels": {"app": app, "pod-template-hash": rs.rsplit("-", 1)[1], "team": namespace},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "ReplicaSet",
                    "name": rs,
                    "uid": f"{i % 97:08x}-1111-4000-8000-000000000000",
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def _bound_nodes(nodes: int, bound: int) -> list[str]:
    """Where the bound pods run: round robin, so each node holds bound/nodes pods (well within capacity)."""
    return [f"node-{(i * 7) % nodes:05d}" for i in range(bound)]


def cluster_objects(nodes: int, bound: int, pending: int, seed: int = 1) -> list[dict[str, Any]]:
    """Nodes, then the bound pods, then the pending ones (their schedulerName is the default scheduler).

    Bound pods ask for no accelerators beyond what their node has: shape 7 (a whole node) is only pending.
    """
    rng = random.Random(seed)
    out = [node_object(i) for i in range(nodes)]
    where = _bound_nodes(nodes, bound)
    used: dict[str, int] = {}
    j = 0
    for i in range(bound):
        # Bound pods: no training pods, and never more accelerators than the node has (the kubelet admitted them).
        room = ACCELERATORS_PER_NODE - used.get(where[i], 0)
        while SHAPES[j % len(SHAPES)][2] >= 2 or SHAPES[j % len(SHAPES)][2] > room:
            j += 1
        used[where[i]] = ACCELERATORS_PER_NODE - room + SHAPES[j % len(SHAPES)][2]
        out.append(pod_object(j, where[i], rng))
        j += 1
    out += [pod_object(j + k, None, rng) for k in range(pending)]
    return out


def write_yaml(path: Path, docs: list[dict[str, Any]]) -> None:
    """Multi-document YAML, the way people keep manifests."""
    with path.open("w") as f:
        yaml.dump_all(docs, f, Dumper=goyaml.SafeDumper, sort_keys=False)


def write_kubectl_json(path: Path, docs: list[dict[str, Any]]) -> None:
    """One ``kind: List``, indented by four spaces like ``kubectl get -o json``."""
    doc = {"apiVersion": "v1", "items": docs, "kind": "List", "metadata": {"resourceVersion": ""}}
    with path.open("w") as f:
        json.dump(doc, f, indent=4)
        f.write("\n")


# ---------------------------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class CliWorkload:
    name: str
    description: str
    nodes: int
    bound: int
    pending: int
    suffix: str
    write: Callable[[Path, list[dict[str, Any]]], None]
    target: str
    meets: Callable[[float, int], bool]  # (seconds, pending pods) -> meets the target

    def scaled(self, quick: bool) -> tuple[int, int, int]:
        return (
            (self.nodes // 10, self.bound // 10, self.pending // 10)
            if quick
            else (self.nodes, self.bound, self.pending)
        )

    def generate(self, directory: Path, quick: bool) -> Path:
        nodes, bound, pending = self.scaled(quick)
        path = directory / f"{self.name}-{nodes}n-{bound}b-{pending}p{self.suffix}"
        if not path.exists():
            partial = path.with_suffix(path.suffix + ".partial")
            self.write(partial, cluster_objects(nodes, bound, pending))
            partial.replace(path)
        return path


PODS_PER_S_TARGET = 680.0
DUMP_TARGET_S = 15.0
WORKLOADS = [
    CliWorkload(
        "pending",
        "5,000 nodes x 10,000 pending pods, multi-document YAML",
        5000,
        0,
        10000,
        ".yaml",
        write_yaml,
        f">= {PODS_PER_S_TARGET:g} pods/s",
        lambda s, n: n / s >= PODS_PER_S_TARGET,
    ),
    CliWorkload(
        "dump",
        "kubectl get nodes,pods -A -o json: 5,000 nodes, 50,000 bound + 5,000 pending pods",
        5000,
        50000,
        5000,
        ".json",
        write_kubectl_json,
        f"< {DUMP_TARGET_S:g} s",
        lambda s, n: s < DUMP_TARGET_S,
    ),
]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def run_cli(path: Path, timeout: float | None) -> dict[str, Any]:
    """``accelsched schedule -f PATH -o json`` as a fresh process, its stdout to a file (not kept in a pipe)."""
    cmd = [sys.executable, "-m", "accelsched.cli", "schedule", "-f", str(path), "-o", "json"]
    with tempfile.TemporaryFile() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=_env(), stdout=out, stderr=subprocess.PIPE, timeout=timeout)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.seek(0)
        body = out.read()
    # CPU time too: on a shared machine the wall clock also counts waiting for a core.
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    result: dict[str, Any] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "rc": proc.returncode}
    if proc.returncode != 0:
        result["error"] = proc.stderr.decode(errors="replace").strip()[-2000:]
        return result
    pods = json.loads(body)["pods"]
    result["scheduled"] = sum(1 for p in pods if p["node"])
    result["pending_after"] = sum(1 for p in pods if not p["node"])
    result["output_bytes"] = len(body)
    return result


# ---------------------------------------------------------------------------------------------- phases


def phases(path: str) -> dict[str, float]:
    """The CLI's steps in this process, each timed in CPU seconds (steady on a shared machine): what fraction
    of the whole each one takes.

    ``parse`` is reading, decoding and parsing the file (api/reader.py); ``validate`` the API-server validation of
    the documents (loader.validation.validate_documents); ``build`` the objects (objects.parse_*, workloads,
    topology); ``admit`` admission (loader._admit). Validation and admission run inside reading and building
    and are timed by wrapping them, then reported apart (not counted twice).
    """
    t_start = time.process_time()
    from accelsched import report
    from accelsched.api import loader
    from accelsched.api.reader import paused_gc
    from accelsched.engine import Session

    t_import = time.process_time()
    spent = {"admit": 0.0, "validate": 0.0}

    def timed(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            t = time.process_time()
            try:
                return func(*args)
            finally:
                spent[name] += time.process_time() - t

        return wrapper

    real_admit, real_validate = loader._admit, loader.validation.validate_documents
    loader._admit = timed("admit", real_admit)  # type: ignore[assignment]
    loader.validation.validate_documents = timed("validate", real_validate)  # type: ignore[assignment]
    try:
        t0 = time.process_time()
        docs = loader.read_documents(path)
        t1 = time.process_time()
        validate_s = spent["validate"]
        inputs = loader.build_inputs(docs)
        t2 = time.process_time()
    finally:
        loader._admit = real_admit  # type: ignore[assignment]
        loader.validation.validate_documents = real_validate  # type: ignore[assignment]
    with paused_gc():  # as cli._session_from does
        session = Session.start(inputs)
    gc.freeze()
    t3 = time.process_time()
    results = session.rejected + session.schedule()
    t4 = time.process_time()
    with open(os.devnull, "w") as sink:
        sink.write(json.dumps(report.to_json(results, session.cluster), indent=2) + "\n")
    t5 = time.process_time()
    return {
        "import_s": round(t_import - t_start, 3),
        "parse_s": round(t1 - t0 - validate_s, 3),
        "validate_s": round(spent["validate"], 3),
        "build_s": round(t2 - t1 - spent["admit"] - (spent["validate"] - validate_s), 3),
        "admit_s": round(spent["admit"], 3),
        "session_s": round(t3 - t2, 3),
        "schedule_s": round(t4 - t3, 3),
        "print_s": round(t5 - t4, 3),
        "total_s": round(t5 - t_start, 3),
    }


def run_phases(path: Path, timeout: float | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.cli", "--phases-child", str(path)]
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-2000:]}
    return json.loads(proc.stdout)


PHASES = ("import_s", "parse_s", "validate_s", "build_s", "admit_s", "session_s", "schedule_s", "print_s")


def render(rows: list[dict[str, Any]], console: Console) -> None:
    table = Table(title="accelsched schedule -f FILE -o json > /dev/null, end to end", title_justify="left")
    cols = (
        "workload",
        "file MiB",
        "nodes",
        "bound",
        "pending",
        "scheduled",
        "wall s",
        "CPU s",
        "pods/s",
        "target",
        "met",
    )
    for col in cols:
        table.add_column(col, justify="left" if col == "workload" else "right")
    for r in rows:
        ok = r.get("met")
        table.add_row(
            r["workload"],
            f"{r['file_mib']:.0f}",
            str(r["nodes"]),
            str(r["bound"]),
            str(r["pending"]),
            str(r.get("scheduled", "-")),
            f"{r['wall_s']:.2f}",
            f"{r.get('cpu_s', 0):.2f}",
            f"{r.get('pods_per_s', 0):,.0f}",
            r["target"],
            "[green]yes[/]" if ok else "[red]no[/]",
        )
    console.print(table)
    with_phases = [r for r in rows if "phases" in r and "error" not in r["phases"]]
    if with_phases:
        table = Table(
            title="Phases (CPU s in one process, timed around each step; % of their total)", title_justify="left"
        )
        table.add_column("workload")
        for p in PHASES:
            table.add_column(p.removesuffix("_s"), justify="right")
        for r in with_phases:
            ph = r["phases"]
            total = sum(ph[p] for p in PHASES) or 1.0
            table.add_row(r["workload"], *(f"{ph[p]:.2f}s {100 * ph[p] / total:.0f}%" for p in PHASES))
        console.print(table)
    for r in rows:
        if "error" in r:
            console.print(f"[red]{r['workload']}[/]: {r['error']}", markup=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cli", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1/10 of the sizes, a smoke test")
    parser.add_argument("--workload", action="append", choices=[w.name for w in WORKLOADS], help="repeatable")
    parser.add_argument("--phases", action="store_true", help="also time each step in a separate child")
    parser.add_argument("--repeat", type=int, default=1, metavar="N", help="N runs each; the median wall is kept")
    parser.add_argument("--dir", metavar="DIR", help="where generated inputs are kept [a temporary folder]")
    parser.add_argument("--timeout", type=float, default=None, metavar="S", help="per-run time limit (seconds)")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON to PATH")
    parser.add_argument("--phases-child", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phases_child:
        print(json.dumps(phases(args.phases_child)))
        return 0
    console = Console() if sys.stdout.isatty() else Console(width=200)
    progress = Console(stderr=True, log_path=False)
    chosen = [w for w in WORKLOADS if not args.workload or w.name in args.workload]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="accelsched-bench-cli-") as tmp:
        directory = Path(args.dir) if args.dir else Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        for w in chosen:
            nodes, bound, pending = w.scaled(args.quick)
            t0 = time.perf_counter()
            path = w.generate(directory, args.quick)
            progress.log(
                f"{w.name}: {path.name} ({path.stat().st_size / 2**20:.0f} MiB) ready in "
                f"{time.perf_counter() - t0:.1f}s; running accelsched schedule ..."
            )
            runs = [run_cli(path, args.timeout) for _ in range(max(1, args.repeat))]
            runs.sort(key=lambda r: r["wall_s"])
            run = next((r for r in runs if "error" in r), runs[(len(runs) - 1) // 2])
            row: dict[str, Any] = {
                "workload": w.name,
                "description": w.description,
                "quick": args.quick,
                "file_mib": round(path.stat().st_size / 2**20, 1),
                "nodes": nodes,
                "bound": bound,
                "pending": pending,
                "target": w.target,
                "wall_s_samples": [r["wall_s"] for r in runs],
                **run,
            }
            row["pods_per_s"] = round(pending / run["wall_s"], 1)
            row["met"] = "error" not in run and w.meets(run["wall_s"], pending)
            if args.phases:
                row["phases"] = run_phases(path, args.timeout)
            progress.log(f"{w.name}: {run['wall_s']:.2f}s wall, {row['pods_per_s']:,.0f} pods/s")
            rows.append(row)
    render(rows, console)
    console.print(
        f"[dim]{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; wall: the whole "
        "process (start, imports, read, validate, admit, schedule, print); pods/s: pending pods / wall.[/]"
    )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"workloads": rows}, indent=2) + "\n")
    bad = [r for r in rows if "error" in r or r.get("pending_after")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
