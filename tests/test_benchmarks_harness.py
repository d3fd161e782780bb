"""benchmarks/harness.py's start of the live benchmarks against Kueue: the process module and the control plane."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.harness import Unavailable, kueue_binary, kueue_control_plane


@pytest.fixture(autouse=True)
def _own_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # the helper puts tests/live on it


def test_kueue_control_plane_without_conformance_kueue_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes the import fail as it does in a checkout without conformance/kueue
    monkeypatch.setitem(sys.modules, "conformance.kueue", None)
    with pytest.raises(Unavailable, match="conformance/kueue is not in this checkout"):
        kueue_control_plane(tmp_path)


def test_kueue_control_plane_gives_the_process_module_and_an_unstarted_control_plane(tmp_path: Path) -> None:
    try:
        process, cp = kueue_control_plane(tmp_path)
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert process.__name__ == "conformance.kueue.process" and hasattr(process, "KueueProcess")
    assert cp.workdir == tmp_path / "cp" and (cp.bin_dir / "kube-apiserver").is_file()
    assert not (tmp_path / "cp").exists()  # nothing started
    try:
        binary = kueue_binary(process)
    except Unavailable as exc:
        assert "hack/build-controlplane.sh kueue" in str(exc)
    else:
        assert binary.is_file()
