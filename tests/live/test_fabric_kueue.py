"""accelsched's fabric placement against the real Kueue v0.19.2 TAS on small fabrics (benchmarks/fabric_kueue.py):
the same Topology, Nodes and sequence of big gangs required in one block (whole, or in slices per rack);
accelsched never places fewer gangs and, over the gangs both place, never uses more racks or hosts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # benchmarks/ and conformance/ are not installed packages
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import prereqs  # noqa: E402

from benchmarks import fabric_kueue  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("request_kind", ["block", "slices"])
def test_accelsched_never_places_fewer_gangs_nor_uses_more_domains_than_kueue(
    request_kind: str, tmp_path: Path
) -> None:
    try:
        import conformance.kueue.process  # noqa: F401
    except ImportError:
        pytest.skip("conformance/kueue (the real Kueue's process) comes with the queues branch")
    try:
        rows = fabric_kueue.side_by_side([0, 1, 2], blocks=2, gangs=6, workdir=tmp_path, request=request_kind)
    except fabric_kueue.Unavailable as exc:
        prereqs.missing(str(exc), "ACCELSCHED_SKIP_LIVE")
    for row in rows:
        assert row["placed_kueue"] > 0, row  # Kueue answered: the comparison is not empty
        assert row["placed_accelsched"] >= row["placed_kueue"], row
        assert row["racks_accelsched"] <= row["racks_kueue"], row
        assert row["hosts_accelsched"] <= row["hosts_kueue"], row
