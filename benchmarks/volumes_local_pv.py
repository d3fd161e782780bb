"""Pods/s of the volume plugins: N nodes with one local PV each, P pods with WaitForFirstConsumer claims, then P
pods without volumes. ``python benchmarks/volumes_local_pv.py 5000 500``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from builders import node, pod, start
from test_volumes import pv, pvc, storage_class, with_claims


def main(n: int, p: int) -> None:
    docs = [node(f"n{i}") for i in range(n)] + [storage_class()]
    docs += [pv(f"pv{i}", "100Gi", on=f"n{i}") for i in range(n)]
    docs += [pvc(f"c{j}") for j in range(p)] + [with_claims(pod(f"p{j}"), f"c{j}") for j in range(p)]
    docs += [pod(f"plain{j}") for j in range(p)]
    session = start(*docs)
    pods = session.inputs.pending
    with_volumes, plain = [q for q in pods if q.volumes], [q for q in pods if not q.volumes]
    t0 = time.perf_counter()
    bound = sum(r.scheduled for r in session.schedule(with_volumes))
    t1 = time.perf_counter()
    session.schedule(plain)
    t2 = time.perf_counter()
    print(f"{n} nodes: {len(with_volumes) / (t1 - t0):.0f} pods/s with local-PV claims ({bound} bound), "
          f"{len(plain) / (t2 - t1):.0f} pods/s without volumes")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000, int(sys.argv[2]) if len(sys.argv) > 2 else 500)
