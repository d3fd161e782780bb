"""Every recorded conformance case (tests/conformance_cases/, shrunk from a disagreement with the real
kube-scheduler v1.36.3 by ``python -m conformance --shrink``) replayed through accelsched offline: accelsched must
decide as the real scheduler recorded. A case listed in docs/conformance.md as a deliberate difference carries
``xfail: <reason>`` in its outcome document and is expected to fail (strict)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # conformance/ is not an installed package: import it from the checkout
    sys.path.insert(0, str(REPO))

from conformance import cases, offline  # noqa: E402
from conformance.outcome import differences  # noqa: E402

# The DRA cases (dra-*.yaml) are replayed by tests/test_conformance_dra.py, which also checks their allocations.
CASES = sorted(p for p in (Path(__file__).parent / "conformance_cases").glob("*.yaml") if not p.name.startswith("dra-"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_accelsched_matches_the_recorded_kube_scheduler(path: Path) -> None:
    scenario, recorded, header = cases.read(path)
    assert recorded is not None, f"{path.name} has no recorded outcome: run python -m conformance record {path}"
    if header.get("xfail"):
        pytest.xfail(str(header["xfail"]))  # documented in docs/conformance.md
    try:
        ours = offline.run(scenario, {o.pod: o.node for o in recorded if o.node})
    except offline.AccelschedError as exc:
        pytest.fail(f"accelsched refused input the real API server took: {exc}")
    assert differences(recorded, ours) == []
