"""What a test needs that a fresh machine may lack: skip naming it in one line, or fail where everything must run.

`make test` installs or builds what it can (hack/test-deps.sh: hwloc, Chromium, the control plane), so on a root
machine with apt and Go nothing is missing. Elsewhere a test whose prerequisite is absent is skipped with the one
line that says what to install. Under CI (``CI=true``) or ``ACCELSCHED_REQUIRE_ALL=1`` an absent prerequisite is a
failure instead: CI installs everything, so a skip there would hide a broken install step. A prerequisite that is
present but fails (a build that breaks, a browser that does not start) always fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest


def strict() -> bool:
    """True where every test must run (CI), so a missing prerequisite fails rather than skips."""
    return os.environ.get("CI") == "true" or os.environ.get("ACCELSCHED_REQUIRE_ALL") == "1"


def missing(reason: str, opt_out: str | None = None) -> NoReturn:
    """Skip (or, under CI, fail) with ``reason``; ``opt_out`` names a variable that, set to 1, always skips."""
    if opt_out and os.environ.get(opt_out) == "1":
        pytest.skip(f"{opt_out}=1: {reason}")
    if strict():
        pytest.fail(f"{reason} (CI=true: every test must run here)", pytrace=False)
    pytest.skip(reason)


def no_go_toolchain() -> str | None:
    """Why the real components cannot be built here, or None when a Go toolchain is on PATH."""
    if shutil.which("go"):
        return None
    return "no Go toolchain on PATH to build the real components (Go >= 1.26; `make test` builds them when it is)"


BUILD_SCRIPT = Path(__file__).resolve().parent.parent / "hack" / "build-controlplane.sh"


def cached_binary(component: str, binary: str) -> Path:
    """``binary`` of a hack/build-controlplane.sh component, only if already built: the unit suite never builds
    (it stays fast; `make test` builds everything first). Missing, it skips naming the command (fails under CI)."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), "--check", component], capture_output=True, text=True)
    if proc.returncode != 0:
        missing(f"{binary} is not built (hack/build-controlplane.sh {component}, which `make test` runs first)")
    return Path(proc.stdout.strip()) / binary


def built_binary(component: str, binary: str, log_path: Path) -> Path:
    """``binary`` of a component, built first when missing (the integration suite): no Go toolchain skips (fails
    under CI); a build that fails always fails, with its log's tail."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "live"))
    from controlplane import ControlPlaneError, build_controlplane

    check = subprocess.run(["bash", str(BUILD_SCRIPT), "--check", component], capture_output=True, text=True)
    if check.returncode != 0 and (why := no_go_toolchain()):
        missing(why)
    try:
        return build_controlplane(log_path, component) / binary
    except ControlPlaneError as e:
        pytest.fail(f"building {component} failed: {e}", pytrace=False)
