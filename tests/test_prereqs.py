"""A fresh machine without a test's prerequisite: the test skips naming what to install, and fails under CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # a pytest run in a subprocess: seconds, not milliseconds

REPO = Path(__file__).resolve().parent.parent


def _run_browser_test(ci: bool, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "ACCELSCHED_REQUIRE_ALL", "ACCELSCHED_SKIP_BROWSER")}
    env["ACCELSCHED_CHROMIUM"] = str(tmp_path / "no-such-chromium")
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rsf",
            "-p",
            "no:cacheprovider",
            "-m",
            "integration",
            "tests/ui/test_ui_browser.py::test_lab_demo_map_shows_every_node_and_device_with_its_holder",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_missing_chromium_skips_with_the_install_line(tmp_path: Path) -> None:
    proc = _run_browser_test(ci=False, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout
    assert "apt-get install -y chromium" in proc.stdout


def test_missing_chromium_fails_under_ci(tmp_path: Path) -> None:
    proc = _run_browser_test(ci=True, tmp_path=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "CI=true: every test must run here" in proc.stdout
