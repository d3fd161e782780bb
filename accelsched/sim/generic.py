"""The trace as Kubernetes objects, scheduled by the framework's own Scheduler (the generic path).

Nodes become Nodes with the ``milli`` partition annotation (GPU-milli shares, as the trace measures them), their
GPU model as the ``accelsched.io/gpu-model`` label, and no pod-count limit (the trace has none); pods request
``accelsched.io/gpu-milli`` (a share of one GPU) or whole ``nvidia.com/gpu``, and a ``gpu_spec`` becomes required
node affinity on the model label. Any KubeSchedulerConfiguration profile can then be replayed, and the fast path
is tested against this one. ``devices="dra"`` models the same GPUs with DRA instead (sim/dra.py): ResourceSlices,
a DeviceClass, and one ResourceClaim per GPU pod in place of the annotation and the extended resources.
"""

from __future__ import annotations

import numpy as np

from accelsched.api.objects import Node, Pod, parse_node, parse_pod
from accelsched.cluster.state import ClusterState
from accelsched.config import build_profile
from accelsched.devices.partition import GPU_RESOURCE, MILLI_RESOURCE, PARTITION_ANNOTATION
from accelsched.framework.profile import SchedulerConfig
from accelsched.framework.scheduler import Scheduler
from accelsched.plugins.gpushare import MODEL_LABEL, gpu_free_row
from accelsched.sim import dra as sim_dra
from accelsched.sim import fragmentation as frag
from accelsched.sim.policies import POLICIES
from accelsched.sim.replay import sim_node_names
from accelsched.sim.trace import MAX_GPUS_PER_NODE, MILLI, Nodes, Pods

SCHEDULER_NAME = "accelsched-sim"
POD_LIMIT = "100000"
DEVICE_MODELS = ("device-plugin", "dra")  # simulate --devices: extended resources (the default), or DRA


def trace_nodes(nodes: Nodes, names: list[str] | None = None, partitions: bool = True) -> list[Node]:
    """The trace's nodes as Node objects, named ``names`` (default: the trace's names) in the trace's order.
    ``partitions``: their GPUs as the milli partition annotation (off with DRA: the slices publish them)."""
    out = []
    for i, name in enumerate(names or nodes.names):
        meta: dict = {"name": name, "labels": {MODEL_LABEL: nodes.models[int(nodes.model[i])]}}
        if nodes.gpus[i] and partitions:
            meta["annotations"] = {PARTITION_ANNOTATION: f"mode: milli\ndevices: {int(nodes.gpus[i])}"}
        doc = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": meta,
            "status": {
                "allocatable": {
                    "cpu": f"{int(nodes.cpu[i])}m",
                    "memory": f"{int(nodes.memory[i])}Mi",
                    "pods": POD_LIMIT,
                }
            },
        }
        out.append(parse_node(doc, nodes.source))
    return out


def trace_pod(pods: Pods, i: int, name: str, claim_template: str | None = None) -> Pod:
    """Pod ``i`` of the trace. Its GPUs as extended resources, or (``claim_template``) one ResourceClaim made from
    that template, which then also carries the gpu_spec."""
    requests = {"cpu": f"{int(pods.cpu[i])}m", "memory": f"{int(pods.memory[i])}Mi"}
    num, milli = int(pods.num_gpu[i]), int(pods.gpu_milli[i])
    resources: dict = {"requests": requests}
    spec: dict = {
        "schedulerName": SCHEDULER_NAME,
        "containers": [{"name": "main", "image": "trace", "resources": resources}],
    }
    models = pods.specs[int(pods.spec[i])]
    if claim_template is not None and num:
        spec["resourceClaims"], resources["claims"] = sim_dra.pod_claim_fields(claim_template)
        models = frozenset()
    elif num == 1 and milli < MILLI:
        requests[MILLI_RESOURCE] = str(milli)
    elif num:
        requests[GPU_RESOURCE] = str(num)
    if models:
        term = {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": sorted(models)}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    meta = {"name": name, "namespace": "default"}
    if claim_template is not None:  # the claim made from the template names its pod by uid
        meta["uid"] = f"uid-{name}"
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def policy_config(policy_key: str, typical: frag.TypicalPods, seed: int = 0) -> SchedulerConfig:
    """The default profile with every score plugin off but the policy's (as the paper's experiments run)."""
    name = POLICIES[policy_key].name
    plugins = {
        "multiPoint": {"enabled": [{"name": name}]},
        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": name, "weight": 1}]},
    }
    args: dict[str, dict] = {}
    if policy_key == "fgd":
        args[name] = {"typicalPods": typical_args(typical)}
    if policy_key == "random":
        args[name] = {"seed": seed}
    return SchedulerConfig({SCHEDULER_NAME: build_profile(SCHEDULER_NAME, plugins, args)})


def typical_args(typical: frag.TypicalPods) -> list[dict]:
    """TypicalPods as FGDScore's ``typicalPods`` plugin args, each with its gpu_spec's models as given. Not the
    models of this cluster it accepts: a shape that accepts none of them (a T4-only pod on a cluster without T4s)
    cannot run on any node, so all their free GPU milli is fragment for it, and no list of this cluster's models
    says so (an empty one, like none, means any model)."""
    if len(typical.specs) != typical.size:
        raise ValueError("typical pods without their gpu_spec (build them with fragmentation.from_shapes)")
    out = []
    for t, spec in enumerate(typical.specs):
        item = {"cpuMilli": int(typical.cpu[t]), "numGpu": int(typical.num_gpu[t]), "weight": int(typical.weight[t])}
        if typical.num_gpu[t]:
            item["gpuMilli"] = int(typical.milli[t])
        if spec:
            item["gpuModels"] = sorted(spec)
        out.append(item)
    return out


class GenericEngine:
    """Replays pods one at a time through Scheduler.schedule_one (no retries: a pod that fits nowhere fails).

    ``devices="dra"``: the GPUs are DRA devices and each GPU pod's request a claim (sim/dra.py); ``sharing`` says
    whether the devices are shareable (consumable ``milli``), needed when any pod asks for a share of a GPU."""

    def __init__(
        self,
        nodes: Nodes,
        config: SchedulerConfig,
        seed: int,
        tie_break: str = "paper",
        devices: str = "device-plugin",
        sharing: bool = True,
    ) -> None:
        if devices not in DEVICE_MODELS:
            raise ValueError(f"devices must be one of {DEVICE_MODELS}, not {devices!r}")
        self.nodes = nodes
        # "paper": the nodes carry the names the paper's simulator gives them and the Scheduler takes the smallest.
        names = sim_node_names(nodes.names, tie_break, seed)
        self.cluster = ClusterState(trace_nodes(nodes, names, partitions=devices == "device-plugin"))
        self.dra: sim_dra.DRADevices | None = None
        if devices == "dra":
            self.dra = sim_dra.DRADevices.attach(self.cluster, nodes, list(names), sharing, MAX_GPUS_PER_NODE)
        # Every node scored, as the FGD paper's simulator does (and FastEngine, which must place alike).
        self.scheduler = Scheduler(
            self.cluster, config, seed, "random" if tie_break == "random" else "name", score_all_nodes=True
        )
        self.allocated = 0

    def pod(self, pods: Pods, i: int, name: str) -> Pod:
        """Pod ``i`` of ``pods`` as this engine's device model asks for GPUs (with DRA, its claim created)."""
        if self.dra is None or not pods.num_gpu[i]:
            return trace_pod(pods, i, name)
        num, milli, spec = int(pods.num_gpu[i]), int(pods.gpu_milli[i]), int(pods.spec[i])
        pod = trace_pod(pods, i, name, self.dra.template(num, milli, spec, pods.specs[spec]))
        self.dra.create_claims(pod)
        return pod

    def schedule(self, pod: Pod, gpu_request: int) -> tuple[int, tuple[int, ...]] | None:
        """(node index, GPU indices) where the pod was bound, or None."""
        result = self.scheduler.schedule_one(pod)
        if not result.scheduled:
            if self.dra is not None:
                self.dra.failed(pod)
            return None
        self.allocated += gpu_request
        node = self.cluster.index[result.node]
        if self.dra is not None:
            return node, self.dra.bound(pod, node)
        ids = [d for ids in result.devices.values() for d in ids]
        return node, tuple(sorted(int(d.split(":")[0].removeprefix("gpu-")) for d in ids))

    def remove(self, pod: Pod, gpu_request: int) -> None:
        """A bound pod leaves (is deleted): off its node, and with DRA its claim deleted and its devices freed, as
        the resourceclaim controller does (Scheduler.evict with delete)."""
        node = self.scheduler.evict(pod, delete=True)
        self.scheduler._dra_undo.pop(pod.key, None)  # deleted for good: nothing to restore
        pod.node_name = ""
        self.allocated -= gpu_request
        if self.dra is not None:
            self.dra.released(pod, node)

    def gpu_free(self) -> np.ndarray:
        if self.dra is not None:
            return self.dra.gpu_free.copy()
        out = np.zeros((self.cluster.n, MAX_GPUS_PER_NODE), dtype=np.int64)
        for i in range(self.cluster.n):
            out[i] = gpu_free_row(self.cluster, i)[0]
        return out

    def fragmentation(self, typical: frag.TypicalPods) -> float:
        """Cluster fragmentation in milli (from scratch: for profiles the fast path does not know)."""
        cpu = self.cluster.column("cpu")
        return float(frag.node_fragmentation(self.gpu_free(), self.cluster.free[cpu], self.nodes.model, typical).sum())
