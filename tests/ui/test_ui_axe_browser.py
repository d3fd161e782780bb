"""An accessibility audit of the web view with axe-core, in Debian's Chromium, in light and dark mode.

axe-core is vendored under tests/ui/vendor (MPL-2.0: ``axe.min.js`` keeps its licence header, ``LICENSE`` beside
it) and evaluated in the page by the test only; the server never serves it. Each view the issue names is audited as
the user reaches it: the lab map, the Pending list with a pod explained (the map's verdicts and the pod's funnel), a
node's drawer, the what-if panel with a result, the queue panel (Kueue's example) and ``/sim``. Any violation of
impact serious or critical fails the test, with axe's rule, help text and the first offending elements.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from browserkit import wait_rendered
from click.testing import CliRunner

from accelsched.cli import main
from accelsched.ui.server import start_in_thread
from accelsched.ui.state import DemoState, FilesState

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from sim_traces import trace_folder  # noqa: E402

pytestmark = pytest.mark.integration

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
AXE_VERSION = "4.14.1"  # npm pack axe-core@4.14.1
BLOCKING = {"serious", "critical"}
SCHEMES = ["light", "dark"]


def audit(page: Any, where: str) -> None:
    """Run axe on the whole document as it is now; fail on a serious or critical violation."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        # evaluated through the DevTools protocol, which the page's Content-Security-Policy (default-src 'self')
        # does not govern; a <script> tag (page.add_script_tag) would be refused, as it should be
        page.evaluate(AXE.read_text())
    assert page.evaluate("axe.version") == AXE_VERSION
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")

    def where_(node: dict[str, Any]) -> str:
        return " ".join(node["target"]) + " " + node.get("failureSummary", "").replace("\n", " ")

    found = [
        f"{v['id']} ({v['impact']}): {v['help']}: " + "; ".join(where_(n) for n in v["nodes"][:3])
        for v in result["violations"]
        if v["impact"] in BLOCKING
    ]
    assert not found, f"{where}:\n" + "\n".join(found)


def open_lab(ui_server: Any, page: Any, scheme: str) -> Any:
    server = ui_server(DemoState.lab(None))
    page.emulate_media(color_scheme=scheme)
    page.goto(server.url)
    wait_rendered(page)
    page.wait_for_selector("#map .node-row[data-node]")
    return server


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_lab_map_pending_list_and_explain_have_no_serious_violation(ui_server: Any, page: Any, scheme: str) -> None:
    open_lab(ui_server, page, scheme)
    audit(page, f"the lab map ({scheme})")
    page.locator("#pending .pending-item").first.click()
    page.wait_for_function("() => document.querySelectorAll('#map .node-row[data-feasible]').length > 0")
    page.wait_for_selector("#pending .pending-item.selected .pi-summary .fits")
    audit(page, f"the Pending list with a pod explained ({scheme})")
    page.locator("#map .node-row[data-feasible] .node-name").first.click()
    page.wait_for_selector("#node-panel:not([hidden])")
    audit(page, f"the explain verdict in the node drawer ({scheme})")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_whatif_panel_and_its_result_have_no_serious_violation(ui_server: Any, page: Any, scheme: str) -> None:
    open_lab(ui_server, page, scheme)
    page.check('.node-row[data-node="node-a"] input.select-node')
    page.click('#whatif button[data-op="drain"]')
    audit(page, f"the what-if panel with an action staged ({scheme})")
    page.click("#whatif-run")
    page.wait_for_selector("#whatif-result .wi-summary")
    audit(page, f"the what-if result and the map after it ({scheme})")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_queue_panel_has_no_serious_violation(ui_server: Any, page: Any, scheme: str) -> None:
    server = ui_server(FilesState.load([TESTS.parent / "examples" / "queues" / "two-teams.yaml"]))
    page.emulate_media(color_scheme=scheme)
    page.goto(server.url)
    wait_rendered(page)
    page.wait_for_selector("#queues-panel:not([hidden]) .queued li")
    audit(page, f"the queue panel ({scheme})")


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("sim")
    pods = trace_folder(tmp, 4, nodes=12, pods=120)
    out = tmp / "out"
    args = ["simulate", "--data", str(tmp), "--pods", str(pods), "--jobs", "1", "--policy", "fgd,bestfit"]
    result = CliRunner().invoke(main, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_sim_page_has_no_serious_violation(page: Any, sim_dir: Path, scheme: str) -> None:
    url, stop = start_in_thread(None, address="127.0.0.1", port=0, sim_dir=sim_dir)
    try:
        page.emulate_media(color_scheme=scheme)
        page.goto(url.rstrip("/") + "/sim")
        page.wait_for_selector("body[data-ready='true']")
        audit(page, f"/sim ({scheme})")
    finally:
        stop()
