"""benchmarks/admitted.py without a control plane: the openb segment both systems get, and accelsched's offline
side (admitted means placed: nothing admitted stays unplaced, every workload runs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from benchmarks import admitted


def test_segment_and_offline_side(tmp_path: Path) -> None:
    seg = admitted.segment(nodes=8, workloads=60, arrive=10, run_time=10, seed=0)
    assert seg.nodes.n == 8 and set(seg.nodes.gpus.tolist()) == {admitted.GPUS}
    assert seg.pods.n == 60 and set(seg.pods.num_gpu.tolist()) <= {1, 2, 4, 8}
    assert seg.arrival == sorted(seg.arrival) and max(seg.arrival) < 10
    assert min(seg.run) >= 5 and max(seg.run) <= 40 and np.median(seg.run) >= 5
    assert all(m % admitted.PER_UNIT == 0 for m in seg.gpu_milli)  # hundredths lose nothing
    # the two quota files hold the same GPUs: accelsched's in GPUs, Kueue's in hundredths
    gpus = int(seg.nodes.gpus.sum())
    ours = list(yaml.safe_load_all(admitted.queues_yaml(gpus, 1, 1, milli=False)))[1]
    theirs = list(yaml.safe_load_all(admitted.queues_yaml(gpus, 1, 1, milli=True)))[1]
    quota = {r["name"]: r["nominalQuota"] for r in ours["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota == {"nvidia.com/gpu": gpus}
    quota = {r["name"]: r["nominalQuota"] for r in theirs["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota[admitted.SHARE] == gpus * 100
    figures = admitted.accelsched(seg, tmp_path)
    assert figures.ran == 60 and figures.stuck == figures.stuck_end == 0
    assert figures.waited_for_room > 0  # the segment contends: quota alone would have admitted unplaceable ones
    assert 0 < figures.allocation <= 1 and figures.makespan_s >= max(seg.arrival)
