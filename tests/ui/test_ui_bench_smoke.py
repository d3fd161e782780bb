"""``python -m benchmarks.ui`` runs end to end at the lab's size and reports every figure; speed is never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accelsched.ui.state import DemoState

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_ui_benchmark_at_the_lab_size(browser: Any, tmp_path: Path) -> None:
    # `browser` only gates the test: no Playwright or Chromium fails (or, opted out, skips) it as the others
    out = tmp_path / "ui.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.ui", "--sizes", "lab", "--repeat", "1", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    (row,) = doc["rows"]
    assert "error" not in row, row
    assert row["size"] == "lab" and row["update_mode"] == "publish"
    assert row["nodes"] == len(DemoState.lab().nodes()) and row["devices"] > 0 and row["pending"] > 0
    figures = ("first_render_ms", "update_ms", "scroll_ms_median", "publish_s", "json_kib", "gzip_kib", "explain_ms")
    whatifs = ("whatif_ms", *(f"whatif_{op}_ms" for op in ("cordon", "drain", "add")), "whatif_server_ms")
    for figure in (*figures, *whatifs, "whatif_server_cpu_ms"):
        assert row[figure] > 0, (figure, row)
    assert row["gzip_kib"] < row["json_kib"]
    assert "first render ms" in proc.stdout and "update after bind ms" in proc.stdout
    assert "explain ms" in proc.stdout and "what-if ms" in proc.stdout and "what-if in server ms" in proc.stdout
