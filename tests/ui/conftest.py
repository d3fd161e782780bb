"""Fixtures for the browser tests of ``accelsched ui``: the real server on loopback, the real page in Chromium.

Every test collected under tests/ui/ is marked ``integration`` (as tests/live/ does), so ``pytest -m "not
integration"`` never starts a browser. A missing Playwright or Chromium skips the tests with the sentence that says
what to install (`make test` installs Chromium where it can), and fails them under CI (tests/prereqs.py); a
Chromium that does not start always fails; ``ACCELSCHED_SKIP_BROWSER=1`` (a local opt-out) always skips.

Fixtures:
- ``browser`` (session): headless Debian Chromium through Playwright's sync API (tests/ui/browserkit.py).
- ``page_watch``/``page`` (function): a fresh browser context per test; console errors, uncaught page errors and
  dialogs fail the test at teardown (a test that provokes a console error calls ``page_watch.allow(regex)``), and
  a full-page screenshot is saved as ``page.png`` under the test's tmp_path.
- ``ui_server`` (function): a factory ``ui_server(state, config=None, seed=0, group_by=None) -> UiServer`` that
  starts accelsched/ui/server.py's app in a thread on 127.0.0.1, port 0, over a ``hub.Hub``; stopped at teardown.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

UI_DIR = Path(__file__).resolve().parent
for folder in (UI_DIR, UI_DIR.parent):  # browserkit.py, tests/prereqs.py
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import browserkit  # noqa: E402
import prereqs  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if UI_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.integration)


def _unavailable(message: str) -> None:
    if os.environ.get("ACCELSCHED_SKIP_BROWSER") == "1":
        pytest.skip(f"ACCELSCHED_SKIP_BROWSER=1: {message}")
    pytest.fail(f"the browser tests cannot run: {message} (ACCELSCHED_SKIP_BROWSER=1 skips them)", pytrace=False)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    why = browserkit.missing()
    if why:
        prereqs.missing(f"the browser tests cannot run: {why}", "ACCELSCHED_SKIP_BROWSER")
    from playwright.sync_api import Error

    try:
        chromium = browserkit.acquire()
    except Error as e:
        _unavailable(f"Chromium at {browserkit.CHROMIUM} did not start: {e}")
    try:
        yield chromium
    finally:
        browserkit.release()


@pytest.fixture
def page_watch() -> browserkit.PageWatch:
    return browserkit.PageWatch()


@pytest.fixture
def page(browser: Any, page_watch: browserkit.PageWatch, tmp_path: Path) -> Iterator[Any]:
    with browserkit.watched_page(browser, page_watch, tmp_path / "page.png") as p:
        yield p


@dataclass
class UiServer:
    url: str  # http://127.0.0.1:PORT/ (with the trailing slash)
    hub: Any  # accelsched.ui.hub.Hub
    stop: Callable[[], None]

    def at(self, path: str) -> str:
        return self.url.rstrip("/") + "/" + path.lstrip("/")


@pytest.fixture
def ui_server() -> Iterator[Callable[..., UiServer]]:
    from accelsched.ui.hub import Hub
    from accelsched.ui.server import start_in_thread

    started: list[UiServer] = []

    def start(state: Any, config: Any = None, seed: int = 0, group_by: str | None = None) -> UiServer:
        hub = Hub(state, config, seed, group_by)
        url, stop = start_in_thread(hub, address="127.0.0.1", port=0)
        server = UiServer(url if url.endswith("/") else url + "/", hub, stop)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for s in reversed(started):
            s.stop()
