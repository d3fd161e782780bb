"""The load run at the integration suite's size (100 nodes, 500 pods) through the real API server; the full
1,000 nodes / 5,000 pods is ``python -m benchmarks.live``. Every pod must be bound; speed is printed only."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import KubeContext
from controlplane import REPO

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import live


def test_load_run_binds_every_pod(kube: KubeContext, tmp_path: Path) -> None:
    figures = live.run(str(kube.kubeconfig), nodes=100, pods=500, workdir=tmp_path, timeout=300)
    print(figures)
    assert "failed" not in figures, figures
    assert figures["e2e"]["bound"] == 500 and figures["preloaded"]["bound"] == 500
    assert figures["e2e"]["pods_per_s"] > 0 and figures["preloaded"]["pods_per_s"] > 0
