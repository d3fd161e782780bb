"""Small synthetic traces in the openb CSV format, for the simulator's tests."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

MODELS = ("T4", "V100M32", "G2")
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)


NODE_CPUS = (16000, 32000, 64000, 96000)
TIGHT_CPUS = (8000, 12000, 16000)  # CPU runs out before the GPUs do: CPU decides what fits and how FGD scores


def write_trace(
    directory: Path, seed: int, nodes: int = 24, pods: int = 260, node_cpus: tuple[int, ...] = NODE_CPUS
) -> tuple[Path, Path]:
    """A crowded little cluster: 1/2/4/8-GPU nodes of three models, and pods of every kind (CPU-only, shares,
    whole and multi-GPU, some restricted to GPU models), with creation and deletion times."""
    rng = random.Random(seed)
    node_lines = [NODE_HEADER]
    names = rng.sample(range(1000), nodes)  # name order is not file order: tie-breaking by name must use names
    for i in range(nodes):
        gpus = rng.choice((1, 2, 4, 8, 8))
        cpu = rng.choice(node_cpus)
        node_lines.append(f"node-{names[i]:03d},{cpu},{rng.choice((65536, 262144))},{gpus},{rng.choice(MODELS)}")
    pod_lines = [POD_HEADER]
    t = 0
    for i in range(pods):
        kind = rng.random()
        if kind < 0.15:
            num, milli = 0, 0
        elif kind < 0.65:
            num, milli = 1, rng.choice((100, 250, 460, 500, 810))
        elif kind < 0.9:
            num, milli = 1, 1000
        else:
            num, milli = rng.choice((2, 4, 8)), 1000
        spec = rng.choice(("", "", "", "T4", "V100M32|G2"))
        t += rng.randrange(0, 50)
        end = t + rng.randrange(10, 2000)
        cpu = rng.choice((0, 2000, 4000, 8000, 12000))
        memory = rng.choice((2048, 8192, 16384))
        pod_lines.append(f"pod-{i:04d},{cpu},{memory},{num},{milli},{spec},LS,Running,{t},{end},{t}")
    node_path, pod_path = directory / f"nodes-{seed}.csv", directory / f"pods-{seed}.csv"
    node_path.write_text("\n".join(node_lines) + "\n")
    pod_path.write_text("\n".join(pod_lines) + "\n")
    return node_path, pod_path


def trace_folder(directory: Path, seed: int, nodes: int = 24, pods: int = 260) -> Path:
    """A data folder as ``simulate --data-dir`` expects it (the node list under its openb name); returns the pod
    list."""
    node_path, pod_path = write_trace(directory, seed, nodes, pods)
    (directory / "openb_node_list_gpu_node.csv").write_text(node_path.read_text())
    return pod_path


def openb_slice(max_cpu: int | None, pods: int, seed: int = 42, tail: bool = False):
    """A real slice of the openb default trace: its nodes with at most ``max_cpu`` milli-CPU (the CPU-tight ones:
    8-32 cores for 1-4 GPUs; None: every node) and the first (``tail``: last) ``pods`` of its pods in the seed's
    inflated order. It reads the copy inside the package (accelsched/data)."""
    from accelsched.sim.replay import inflate
    from accelsched.sim.trace import Nodes, load_nodes, load_pods, trace_paths

    node_path, pod_path = trace_paths("openb", "default")
    every, trace = load_nodes(node_path), load_pods(pod_path)
    keep = np.flatnonzero(every.cpu <= (max_cpu or every.cpu.max()))
    nodes = Nodes(
        [every.names[i] for i in keep],
        every.cpu[keep],
        every.memory[keep],
        every.gpus[keep],
        every.model[keep],
        every.models,
        every.source,
    )
    order = inflate(trace, every.gpu_milli_capacity, 1.3, seed)
    return nodes, trace.take(order[-pods:] if tail else order[:pods])
