"""Driving the real page in Debian's Chromium through Playwright: shared by tests/ui, tests/live and benchmarks/ui.py.

Why a module and not only fixtures: the live browser test (tests/live) and the benchmark open the same browser the
same way, and pytest fixtures of tests/ui/conftest.py are not visible there.

- :func:`launch` starts headless Chromium (``/usr/bin/chromium``, or ``$ACCELSCHED_CHROMIUM``); :func:`missing`
  says why it cannot (no playwright, no chromium) so callers fail or skip with that sentence; :func:`acquire` /
  :func:`release` share one browser between the fixtures of tests/ui and tests/live in one pytest process.
- :class:`PageWatch` records what must never happen on the page: console errors, uncaught exceptions, dialogs
  (an ``alert`` from injected markup is the XSS signal), and ``<img>`` elements with an ``onerror`` handler or
  ``src="x"`` (a MutationObserver installed before any script of the page runs).
- :func:`collect_map` scrolls the virtualized ``#map`` from top to bottom and returns every node row and device
  cell it rendered on the way (the DOM contract of accelsched/ui/static).
- :func:`small_png` turns a screenshot into a small palette PNG (the README's images).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("ACCELSCHED_CHROMIUM", "/usr/bin/chromium")
VIEWPORT = {"width": 1400, "height": 1000}

# Runs in every page before its own scripts: the record of markup a test's hostile strings must never create.
XSS_PROBE = """
(() => {
  window.__xss = [];
  const check = (el) => {
    if (!(el instanceof Element)) return;
    const all = [el, ...el.querySelectorAll('img, iframe, [onerror], [onload]')];
    for (const e of all) {
      const tag = e.tagName.toLowerCase();
      if (tag === 'iframe' || e.hasAttribute('onerror') || e.hasAttribute('onload') ||
          (tag === 'img' && e.getAttribute('src') === 'x')) {
        window.__xss.push(e.outerHTML.slice(0, 200));
      }
    }
  };
  new MutationObserver((records) => {
    for (const r of records) for (const n of r.addedNodes) check(n);
  }).observe(document, {childList: true, subtree: true});
})();
"""


def missing() -> str | None:
    """Why the browser cannot run here, or None when it can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed in this environment (pip install -e '.[dev]')"
    if not Path(CHROMIUM).is_file():
        return f"no Chromium at {CHROMIUM} (Debian: apt-get install -y chromium fonts-dejavu-core)"
    return None


def launch(playwright: Any) -> Any:
    """Headless Debian Chromium; ``--no-sandbox`` because CI runs as root in a container."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)


class _Shared:
    playwright: Any = None
    browser: Any = None
    users = 0


def acquire() -> Any:
    """The one browser of this process, started on first use. Playwright's sync API runs one event loop per thread,
    so a second ``sync_playwright()`` while the first runs fails: fixtures in different test folders (tests/ui's
    session fixture, tests/live's module fixture) share this one, counted, and the last :func:`release` stops it."""
    if _Shared.browser is None:
        from playwright.sync_api import sync_playwright

        pw = sync_playwright().start()
        try:
            _Shared.browser = launch(pw)
        except BaseException:
            pw.stop()
            raise
        _Shared.playwright = pw
    _Shared.users += 1
    return _Shared.browser


def release() -> None:
    _Shared.users -= 1
    if _Shared.users <= 0 and _Shared.browser is not None:
        browser, pw = _Shared.browser, _Shared.playwright
        _Shared.browser = _Shared.playwright = None
        _Shared.users = 0
        try:
            browser.close()
        finally:
            pw.stop()


@dataclass
class PageWatch:
    """Console errors, page errors and dialogs of one page; :meth:`problems` is what a test must fail on."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    allowed: list[re.Pattern[str]] = field(default_factory=list)

    def attach(self, page: Any) -> None:
        page.add_init_script(XSS_PROBE)
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.page_errors.append(str(exc)))
        page.on("dialog", self._dialog)

    def allow(self, pattern: str) -> None:
        """A console error the test provokes on purpose (a refused request logs 'Failed to load resource ...')."""
        self.allowed.append(re.compile(pattern))

    def _console(self, msg: Any) -> None:
        if msg.type == "error":
            self.console_errors.append(msg.text)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def problems(self) -> list[str]:
        out = [f"console error: {t}" for t in self.console_errors if not any(p.search(t) for p in self.allowed)]
        out += [f"page error: {t}" for t in self.page_errors]
        out += [f"dialog opened: {t}" for t in self.dialogs]
        return out


@contextmanager
def watched_page(browser: Any, watch: PageWatch, screenshot: Path) -> Iterator[Any]:
    """A page in a fresh context, watched by ``watch``; at the end a full-page screenshot (when it loaded one),
    then the test fails if the page reported console errors, page errors or dialogs."""
    import pytest

    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(15_000)
    watch.attach(page)
    try:
        yield page
    finally:
        try:
            if page.url.startswith("http"):
                page.screenshot(path=str(screenshot), full_page=True)
        finally:
            context.close()
    problems = watch.problems()
    if problems:
        pytest.fail("the page reported problems:\n" + "\n".join(problems), pytrace=False)


def xss_marks(page: Any) -> list[str]:
    """The elements XSS_PROBE saw created (outerHTML heads); [] on a clean page."""
    return page.evaluate("window.__xss || []")


def wait_rendered(page: Any, version: int | None = None, timeout: float = 15_000) -> int:
    """Wait for ``body[data-version]`` (at least ``version`` when given) and return it."""
    page.wait_for_function(
        "(v) => { const d = document.body && document.body.dataset.version;"
        " return d !== undefined && d !== '' && (v === null || Number(d) >= v); }",
        arg=version,
        timeout=timeout,
    )
    return int(page.evaluate("document.body.dataset.version"))


# Scrolls whichever element scrolls the map (the map itself or the document), a step at a time, two animation
# frames after each step so a virtualized list has drawn, and records what each position rendered.
_COLLECT = """
async () => {
  const map = document.querySelector('#map');
  if (!map) return {error: 'no #map'};
  const sc = map.scrollHeight > map.clientHeight + 1 ? map : document.scrollingElement;
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const nodes = {}, cells = {}, nics = {}, groups = {};
  const start = sc.scrollTop;
  for (let top = 0, guard = 0; guard < 100000; guard++) {
    sc.scrollTop = top;
    await frame();
    for (const g of map.querySelectorAll('.group-row[data-group]')) groups[g.dataset.group] = true;
    for (const row of map.querySelectorAll('.node-row[data-node]')) {
      const n = row.dataset.node;
      nodes[n] = {
        filter: row.dataset.filter || null,
        feasible: row.dataset.feasible || null,
        cordoned: !!row.querySelector('.flag.cordoned'),
        taints: [...row.querySelectorAll('.flag.taint')].map(e => e.textContent.trim()),
        badge: (row.querySelector('.filter-badge') || {}).textContent || null,
      };
    }
    for (const c of map.querySelectorAll('.cell[data-device]')) {
      cells[c.dataset.device] = {
        holder: c.getAttribute('data-holder'),
        holders: c.getAttribute('data-holders'),
        kind: c.dataset.kind || null,
        slots: [...c.querySelectorAll('.slot')].map(s => s.getAttribute('data-holder') || ''),
      };
    }
    for (const c of map.querySelectorAll('.cell.nic[data-nic]')) {
      nics[c.dataset.nic] = {holders: c.getAttribute('data-holders') || c.getAttribute('data-holder') || ''};
    }
    if (top + sc.clientHeight >= sc.scrollHeight - 1) break;
    top += Math.max(40, Math.floor(sc.clientHeight * 0.7));
  }
  sc.scrollTop = start;
  await frame();
  return {nodes, cells, nics, groups: Object.keys(groups)};
}
"""


def collect_map(page: Any) -> dict[str, Any]:
    """Every node row and device cell the map draws, top to bottom: {"nodes": {name: {...}}, "cells": {"NODE/ID":
    {"holder", "holders", "kind", "slots"}}, "nics": {"NODE/ID": {"holders"}}, "groups": [...]}."""
    out = page.evaluate(_COLLECT)
    assert "error" not in out, out
    return out


def holders(cell: dict[str, Any]) -> set[str]:
    """The pods a collected cell shows: ``data-holders`` (a shared device: every holder, space-separated) when
    present, else ``data-holder`` (one pod key, "" when free)."""
    return {h for h in re.split(r"\s+", cell.get("holders") or cell.get("holder") or "") if h}


def physical(device_id: str) -> str:
    """The physical device of an allocation id: ``gpu-0:3g.20gb@4``, ``gpu-0::3``, ``gpu-2:milli=250`` and
    ``gpu-1:slices=2-4`` all live on ``gpu-0``/``gpu-2``/``gpu-1`` (devices/partition.py's id forms)."""
    return device_id.split(":", 1)[0]


def small_png(png: bytes, dest: Path, max_bytes: int = 150_000) -> int:
    """Write ``png`` to ``dest`` as a palette PNG no larger than ``max_bytes`` (fewer colours, then a smaller
    scale, until it fits); returns the size written. Pillow ships with matplotlib, a dependency already."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    data = b""
    for scale in (1.0, 0.85, 0.7, 0.55):
        sized = image if scale == 1.0 else image.resize((int(image.width * scale), int(image.height * scale)))
        for colours in (128, 64, 32):
            buf = io.BytesIO()
            sized.quantize(colors=colours, method=Image.Quantize.MEDIANCUT).save(buf, "PNG", optimize=True)
            data = buf.getvalue()
            if len(data) <= max_bytes:
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
                return len(data)
    raise AssertionError(f"{dest}: cannot shrink the screenshot under {max_bytes} bytes (last {len(data)})")


def text_of(page: Any, selector: str) -> str:
    return (page.text_content(selector) or "").strip()


def texts(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")]


def attrs(page: Any, selector: str, name: str) -> list[str]:
    return page.eval_on_selector_all(selector, f"els => els.map(e => e.getAttribute({name!r}))")


def assert_same(dom: Iterable[str], expected: Iterable[str], what: str) -> None:
    a, b = sorted(dom), sorted(expected)
    assert a == b, f"{what}: page {a} != expected {b}"
