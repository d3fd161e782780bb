"""Every recorded Kueue oracle case (tests/kueue_cases/, shrunk from a disagreement with the real Kueue v0.19.2 by
``python -m conformance.kueue --shrink``) replayed through accelsched: each workload must be admitted (or not), with
the flavors and the condition reasons and messages the real Kueue recorded. A deliberate difference (docs/queues.md)
carries ``xfail: <reason>`` in its outcome document and is expected to fail (strict)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # conformance/ is not an installed package: import it from the checkout
    sys.path.insert(0, str(REPO))

from conformance.kueue import cases  # noqa: E402

CASES = sorted((Path(__file__).parent / "kueue_cases").glob("*.yaml"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_accelsched_matches_the_recorded_kueue(path: Path) -> None:
    case, header = cases.read(path)
    if header.get("xfail"):
        pytest.xfail(str(header["xfail"]))  # documented in docs/queues.md
    assert case.diffs() == []
