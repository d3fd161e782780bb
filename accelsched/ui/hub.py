"""The Hub: the current state, its run and the page's view of it, one version per published state.

A live source publishes new states from its watch thread while the server's threads read views, hence one lock (a
Condition, so ``wait`` can block until the next version). What-if and explain run on copies and never change it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from accelsched.explain import explain_pod
from accelsched.framework.profile import SchedulerConfig
from accelsched.ui import view as views
from accelsched.ui import whatif
from accelsched.ui.state import RawState, Run, execute

ENGINE_SLOTS = 2  # what-ifs and explanations computed at once: each is a whole engine run over the state
ENGINE_WAIT_SECONDS = 0.1  # how long a request waits for a slot before it is told to retry
_UNKNOWN = object()  # cached: the current version has no pod under that key


class Busy(Exception):
    """Every engine slot is taken: the request is refused (HTTP 429) rather than queued behind the others, so a
    page, or a script, asking for many what-ifs cannot pile up engine runs and starve the live updates."""


class Hub:
    """What the server talks to: the current state, its run and view, a version per published state.

    Thread-safe: ``publish`` may come from a live-watch thread while server threads read. The run and the view
    are computed outside the lock (readers keep the previous version meanwhile); publishes are serialized.
    ``last_run_seconds`` is the cost of the last publish (execute + build_view), for the benchmark."""

    def __init__(
        self, state: RawState, config: SchedulerConfig | None = None, seed: int = 0, group_by: str | None = None
    ) -> None:
        self.config = config
        self.seed = seed
        self.group_by = group_by
        self.version = 0
        self.last_run_seconds = 0.0
        self._cond = threading.Condition()
        self._publishing = threading.Lock()
        self._state: RawState = state
        self._run: Run | None = None
        self._view: dict[str, Any] = {}
        self._previous: dict[str, str] | None = None  # the previous version's node etags, for deltas
        self._explained: dict[str, Any] = {}  # key -> explain's body, or _UNKNOWN
        self.engine_slots = threading.BoundedSemaphore(ENGINE_SLOTS)
        self.publish(state)

    @property
    def state(self) -> RawState:
        with self._cond:
            return self._state

    @property
    def run(self) -> Run:
        with self._cond:
            assert self._run is not None
            return self._run

    def publish(self, state: RawState) -> None:
        """Run the engine over ``state`` and make it the current version (waking every ``wait``)."""
        with self._publishing:
            began = time.perf_counter()
            run = execute(state, self.config, self.seed)
            body = views.build_view(run, self.group_by)
            body = {"version": 0, "mode": state.mode, **body}  # build_view says readOnly, and source from run.state
            status = getattr(state, "status", None)  # live: whether the watches are current (LiveState.status)
            if status:
                body["status"] = status
            seconds = time.perf_counter() - began
            with self._cond:
                self.version += 1
                body["version"] = self.version
                self._previous = {n["name"]: n["etag"] for n in self._view["nodes"]} if self._view else None
                self._state, self._run, self._view = state, run, body
                self._explained = {}
                self.last_run_seconds = seconds
                self._cond.notify_all()

    def view(self, since: int | None = None) -> dict[str, Any]:
        """The full view; or, when ``since`` is the version before this one, the delta from it: the nodes whose
        etag changed, the names ``removed``, and the small parts whole (order, pending, capacity, counts, ...)."""
        with self._cond:
            current, previous = self._view, self._previous
        if since is None or previous is None or since != current["version"] - 1:
            return current
        names = {n["name"] for n in current["nodes"]}
        delta = {k: v for k, v in current.items() if k != "nodes"}
        delta["delta"] = True
        delta["since"] = since
        delta["nodes"] = [n for n in current["nodes"] if previous.get(n["name"]) != n["etag"]]
        delta["removed"] = [name for name in previous if name not in names]
        return delta

    def pod(self, key: str) -> dict[str, Any] | None:
        return views.pod_detail(self.run, key)

    def explain(self, key: str) -> dict[str, Any]:
        """``accelsched explain KEY -o json`` on the current state (a fresh run with an Explainer watching the pod),
        cached until the next version, as is a key with no pod (KeyError), so asking again costs no run. Busy
        when every engine slot is taken."""
        with self._cond:
            version, state, cached = self.version, self._state, self._explained.get(key)
        if cached is _UNKNOWN:
            raise KeyError(key)
        if cached is not None:
            return cached
        with self._engine_slot():
            session, _ = state.start(self.config, self.seed)
            explanation = explain_pod(session, key)
            body: Any = _UNKNOWN if explanation is None else explanation.to_json()
        with self._cond:
            if self.version == version:
                self._explained[key] = body
        if body is _UNKNOWN:
            raise KeyError(key)
        return body

    def whatif(self, body: Any) -> dict[str, Any]:
        """Apply the body's actions to a copy of the current state, run it, and compare with the current run.
        Computation only: the version, the view and the state stay as they were. Busy when every engine slot is
        taken (a bad body is an InputError first: it costs nothing to check)."""
        with self._cond:
            state, run, shown = self._state, self._run, self._view
        assert run is not None
        actions = whatif.parse(body)
        with self._engine_slot():
            applied = whatif.apply(state.copy(), actions)
            after = execute(applied.state, self.config, self.seed)
            return whatif.compare(
                run, after, applied.actions, applied.notes, applied.evicted, self.group_by, before_view=shown
            )

    @contextlib.contextmanager
    def _engine_slot(self) -> Iterator[None]:
        if not self.engine_slots.acquire(timeout=ENGINE_WAIT_SECONDS):
            raise Busy(f"busy: {ENGINE_SLOTS} what-ifs or explanations are being computed; try again in a moment")
        try:
            yield
        finally:
            self.engine_slots.release()

    def wait(self, version: int, timeout: float) -> int:
        """Block until the version is past ``version`` or ``timeout`` seconds passed; the current version."""
        with self._cond:
            self._cond.wait_for(lambda: self.version > version, timeout)
            return self.version
