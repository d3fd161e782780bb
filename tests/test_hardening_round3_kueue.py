"""Regression tests for what issue 28's fuzz pass over Kueue's objects (tests/test_fuzz.py, ``mutate_kueue``) found:
each a bad input that did not end in exit 2 with one line naming the file, the object and the field.
"""

from __future__ import annotations

from pathlib import Path

from cli_limits import assert_bad_input, run_limited

CORPUS = Path(__file__).resolve().parent / "fuzz_corpus" / "queues"


def test_topology_without_api_version_is_refused_not_read_past() -> None:
    # Before: is_topology wanted kueue.x-k8s.io in the apiVersion, so a Topology without one fell through to the
    # kinds read past (exit 0) and the gangs naming its levels silently lost them.
    path = str(CORPUS / "topology-without-apiversion.yaml")
    out = run_limited(["schedule", "-f", path, "-o", "json"], timeout=20)
    assert_bad_input(
        out, path, "Topology fabric: apiVersion: is required (served for Topology: kueue.x-k8s.io/v1beta2)"
    )
