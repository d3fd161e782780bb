"""Small synthetic traces in the openb CSV format, for the simulator's tests."""

from __future__ import annotations

import random
from pathlib import Path

MODELS = ("T4", "V100M32", "G2")
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)


def write_trace(directory: Path, seed: int, nodes: int = 24, pods: int = 260) -> tuple[Path, Path]:
    """A crowded little cluster: 1/2/4/8-GPU nodes of three models, and pods of every kind (CPU-only, shares,
    whole and multi-GPU, some restricted to GPU models), with creation and deletion times."""
    rng = random.Random(seed)
    node_lines = [NODE_HEADER]
    names = rng.sample(range(1000), nodes)  # name order is not file order: tie-breaking by name must use names
    for i in range(nodes):
        gpus = rng.choice((1, 2, 4, 8, 8))
        cpu = rng.choice((16000, 32000, 64000, 96000))
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
    """A data folder as ``simulate --data`` expects it (the node list under its openb name); returns the pod list."""
    node_path, pod_path = write_trace(directory, seed, nodes, pods)
    (directory / "openb_node_list_gpu_node.csv").write_text(node_path.read_text())
    return pod_path
