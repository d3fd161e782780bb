"""``accelsched ui --from-cluster`` in a real browser against a real kube-apiserver: a bind made through the API
shows on the page, in place, within 2 seconds.

The UI runs as the command runs it (accelsched/ui/command.py): a LiveSource over a ReadOnlyKube lists and watches
the cluster, publishes each new state to a Hub, and the server streams version events to the page, which fetches
the delta and redraws the changed node. Nothing here writes through the UI; the test itself binds the pod through
the pods/binding subresource as a scheduler does, then times the page until the node's cell names the pod.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from controlplane import ACCELERATOR

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "tests" / "ui") not in sys.path:  # the browser helpers live with the browser tests
    sys.path.insert(0, str(REPO / "tests" / "ui"))

import browserkit  # noqa: E402
import prereqs  # noqa: E402  (tests/, on the path through tests/live/conftest.py)

if TYPE_CHECKING:  # not imported at run time: with tests/ui in the same run, "conftest" may name tests/ui's
    from conftest import KubeContext

pytestmark = pytest.mark.integration

BIND_DEADLINE_S = 2.0


@pytest.fixture(scope="module")
def live_browser() -> Iterator[Any]:
    why = browserkit.missing()
    if why:
        prereqs.missing(f"the browser tests cannot run: {why}", "ACCELSCHED_SKIP_BROWSER")
    chromium = browserkit.acquire()  # the one of tests/ui's fixtures when both folders run in one session
    try:
        yield chromium
    finally:
        browserkit.release()


@pytest.fixture
def live_page(live_browser: Any, tmp_path: Path) -> Iterator[Any]:
    with browserkit.watched_page(live_browser, browserkit.PageWatch(), tmp_path / "page.png") as page:
        yield page


@pytest.fixture
def live_ui(kube: KubeContext) -> Iterator[Any]:
    """A started UI over the cluster, as ``accelsched ui --kubeconfig K --port 0`` builds it: (url, hub)."""
    from accelsched.live.kube import api_client
    from accelsched.ui.hub import Hub
    from accelsched.ui.live import LiveSource, ReadOnlyKube
    from accelsched.ui.server import start_in_thread

    source = LiveSource(ReadOnlyKube(api_client(str(kube.kubeconfig))))
    hub = Hub(source.start())
    source.follow(hub)
    url, stop = start_in_thread(hub, "127.0.0.1", 0)
    try:
        yield url if url.endswith("/") else url + "/", hub
    finally:
        stop()
        source.stop()


def pod_body(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/infer:1",
                    "resources": {
                        "requests": {"cpu": "1", ACCELERATOR: "2"},
                        "limits": {ACCELERATOR: "2"},
                    },
                }
            ]
        },
    }


def holder_on(node: str, key: str) -> str:
    return (
        f"[...document.querySelectorAll('#map .cell[data-device^=\"{node}/\"]')]"
        f".some(c => c.getAttribute('data-holder') === {key!r})"
    )


def test_a_bind_through_the_api_shows_on_the_page_within_2s(
    kube: KubeContext, live_ui: tuple[str, Any], live_page: Any
) -> None:
    url, hub = live_ui
    page = live_page
    kube.make_node("ui-live-a", capacity={ACCELERATOR: 4})
    kube.make_node("ui-live-b", capacity={ACCELERATOR: 4})
    name = "ui-live-pod"
    key = f"{kube.namespace}/{name}"
    kube.core.create_namespaced_pod(kube.namespace, pod_body(name, kube.namespace))

    page.goto(url)
    browserkit.wait_rendered(page)
    # the live source saw both nodes and the pod (the page followed: no reload)
    page.wait_for_selector('#map .node-row[data-node="ui-live-b"]', timeout=10_000)
    deadline = time.monotonic() + 10
    while not ({"ui-live-a", "ui-live-b"} <= set(hub.view()["order"]) and key in hub.run.placements()):
        assert time.monotonic() < deadline, "the live source never published both nodes and the pod"
        time.sleep(0.05)
    page.wait_for_selector(f'#pending .pending-item[data-key="{key}"], #map .cell[data-holder="{key}"]')
    # the engine's run puts the pending pod somewhere; bind it to the other node, so only the bind can put it there
    simulated = hub.run.placements()[key]
    target = "ui-live-a" if simulated == "ui-live-b" else "ui-live-b"
    assert not page.evaluate(holder_on(target, key))
    version = int(page.evaluate("document.body.dataset.version"))

    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": kube.namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": target},
    }
    began = time.monotonic()
    kube.core.create_namespaced_pod_binding(name, kube.namespace, binding, _preload_content=False)
    page.wait_for_function(f"() => {holder_on(target, key)}", polling="raf", timeout=10_000)
    elapsed = time.monotonic() - began
    print(f"the page showed the bind after {elapsed * 1000:.0f} ms")
    assert elapsed < BIND_DEADLINE_S, f"the page showed the bind after {elapsed:.2f}s"
    assert int(page.evaluate("document.body.dataset.version")) > version
    assert hub.run.placements()[key] == target
    # bound, not placed by a simulation: the pod panel says so
    page.locator(f'#map .cell[data-device^="{target}/"][data-holder="{key}"]').first.click()
    page.wait_for_function(
        "() => { const f = document.querySelector('#pod-panel [data-field=\"phase\"]');"
        " return f && f.textContent.trim() === 'Bound'; }"
    )
    assert browserkit.text_of(page, '#pod-panel [data-field="node"]') == target
