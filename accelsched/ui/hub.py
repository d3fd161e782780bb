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

from accelsched.api import reader
from accelsched.explain import Explainer, explain_pod
from accelsched.framework.profile import SchedulerConfig
from accelsched.ui import incremental, whatif
from accelsched.ui import view as views
from accelsched.ui.history import History
from accelsched.ui.state import RawState, Run, checked, execute

ENGINE_SLOTS = 2  # what-ifs and explanations computed at once: each is a whole engine run over the state
ENGINE_WAIT_SECONDS = 0.1  # how long a request waits for a slot before it is told to retry
SUPERSEDED_WAIT_SECONDS = 30.0  # how long the newest request waits for superseded ones to give their slots back
_UNKNOWN = object()  # cached: the current version has no pod under that key


class Busy(Exception):
    """Every engine slot is taken: the request is refused (HTTP 429) rather than queued behind the others, so a
    page, or a script, asking for many what-ifs cannot pile up engine runs and starve the live updates."""


class Superseded(Exception):
    """A newer request of the same client (a page picked another pod) or its disconnect ended this one: its
    answer would be thrown away, so its work stops at the next checkpoint and gives its engine slot back."""


class Ticket:
    """One engine request of one client (the page's ``X-Accelsched-Client`` id): ``cancel()`` when it is superseded or
    its client went away; ``check()`` at each checkpoint of the work (before a pod's attempt) raises Superseded."""

    def __init__(self, client: str = "") -> None:
        self.client = client
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Superseded("superseded by a newer request")


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
        self._newest: dict[str, Ticket] = {}  # client -> its newest engine request
        self._holding: set[Ticket] = set()  # the requests that hold an engine slot now
        self._final_lock = threading.Lock()  # explains on the current run's scheduler, one at a time
        self.history = History()  # a point per published version (allocation, Pending by reason, fragmentation)
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
            run = incremental.execute(state, self.config, self.seed)  # keeps the Base a what-if starts from
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
                self.history.record(body, time.time())
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

    def ticket(self, client: str) -> Ticket:
        """A new engine request of ``client``; the client's older one (if still running or waiting) is cancelled:
        a page that picked another pod no longer wants the first one's answer."""
        ticket = Ticket(client)
        if client:
            with self._cond:
                older = self._newest.get(client)
                self._newest[client] = ticket
            if older is not None:
                older.cancel()
        return ticket

    def explain(self, key: str, ticket: Ticket | None = None) -> dict[str, Any]:
        """``accelsched explain KEY -o json``'s body for the current state, cached until the next version, as is a
        key with no pod (KeyError), so asking again costs no run. Busy when every engine slot is taken.

        A pod the current run left without a node is explained against the run's final state, the cluster the map
        shows and the one its next attempt would meet (one attempt over every node: some 0.1 s at 5,000 nodes). The
        CLI explains the pod's last attempt during the run instead; the two differ only on nodes that pods placed
        after that attempt filled further. Any other pod (bound, placed, unknown) gets the CLI's replay."""
        with self._cond:
            version, state, run, cached = self.version, self._state, self._run, self._explained.get(key)
        if cached is _UNKNOWN:
            raise KeyError(key)
        if cached is not None:
            return cached
        assert run is not None
        with self._engine_slot(ticket):
            result = run.result(key)
            if result is not None and result.node is None:
                body: Any = self._explain_final(run, result)
            else:
                body = self._explain_replay(state, key, ticket)
        with self._cond:
            if self.version == version:
                self._explained[key] = body
        if body is _UNKNOWN:
            raise KeyError(key)
        return body

    def _explain_final(self, run: Run, result: Any) -> dict[str, Any]:
        """Explainer.observe for the pod on the run's own scheduler (read only: a fresh CycleState, filters and
        scores), and none for a pod a gate kept from its attempt, as in the replay."""
        scheduler = run.session.scheduler
        with self._final_lock:
            observer = scheduler.observer
            try:
                explainer = Explainer(scheduler, {result.pod.key})
                if result.gated is None:
                    explainer.observe(result.pod)
            finally:
                scheduler.observer = observer
        return explainer.explanation(result.pod, result).to_json()

    def _explain_replay(self, state: RawState, key: str, ticket: Ticket | None) -> Any:
        """A fresh run with an Explainer watching the pod (``accelsched explain``): _UNKNOWN for no such pod."""
        session, _ = state.start(self.config, self.seed)
        prepare = None if ticket is None else (lambda s: checked(s, ticket.check))
        explanation = explain_pod(session, key, prepare)
        return _UNKNOWN if explanation is None else explanation.to_json()

    def whatif(self, body: Any, ticket: Ticket | None = None, delta: bool = False) -> dict[str, Any]:
        """Apply the body's actions to a copy of the current state, run it, and compare with the current run.
        Computation only: the version, the view and the state stay as they were. Busy when every engine slot is
        taken (a bad body is an InputError first: it costs nothing to check); Superseded when ``ticket`` is.

        ``delta`` (the page's request): ``nodes`` holds only the what-if's node views that differ from the view of
        version ``baseVersion`` (the page has the others; ``order`` says where each goes): at 5,000 nodes the whole
        map was most of the answer's bytes and of its encoding."""
        with self._cond:
            state, run, shown = self._state, self._run, self._view
        assert run is not None
        actions = whatif.parse(body)
        # No cyclic collection during the run (reader.paused_gc, as a read does): at 5,000 nodes each full one
        # walked the state's millions of objects again, and two of them made a what-if take half as long again.
        with self._engine_slot(ticket), reader.paused_gc():
            applied = whatif.apply(state, actions)  # copy on write: the current state stays as it is
            check = ticket.check if ticket is not None else None
            # Today's cluster as its run began, copied and edited where the actions touched it; the full run where
            # that cannot follow the state (incremental.py says when). Both give the same answer.
            after = incremental.rerun(run, applied.state, self.config, self.seed, check)
            if after is None:
                after = execute(applied.state, self.config, self.seed, check)
            if ticket is not None:
                ticket.check()
            out = whatif.compare(
                run, after, applied.actions, applied.notes, applied.evicted, self.group_by, before_view=shown
            )
        if delta:
            today = {n["name"]: n["etag"] for n in shown["nodes"]}
            out["nodes"] = [n for n in out["nodes"] if today.get(n["name"]) != n["etag"]]
            out["nodesDelta"] = True
            out["baseVersion"] = shown["version"]
        return out

    @contextlib.contextmanager
    def _engine_slot(self, ticket: Ticket | None = None) -> Iterator[None]:
        """An engine slot, or Busy after ENGINE_WAIT_SECONDS. While a slot is held by a superseded request (which
        stops at its next checkpoint), the newest one waits for it instead: a page that picks three pods in a row
        gets the last one's answer, never a 429 for it."""
        began = time.monotonic()
        while not self.engine_slots.acquire(timeout=0.02):
            if ticket is not None:
                ticket.check()
            waited = time.monotonic() - began
            with self._cond:
                ending = any(t.cancelled.is_set() for t in self._holding)
            if waited >= ENGINE_WAIT_SECONDS and (not ending or waited >= SUPERSEDED_WAIT_SECONDS):
                raise Busy(f"busy: {ENGINE_SLOTS} what-ifs or explanations are being computed; try again in a moment")
        held = ticket or Ticket()
        with self._cond:
            self._holding.add(held)
        try:
            if ticket is not None:
                ticket.check()
            yield
        finally:
            with self._cond:
                self._holding.discard(held)
            self.engine_slots.release()

    def wait(self, version: int, timeout: float) -> int:
        """Block until the version is past ``version`` or ``timeout`` seconds passed; the current version."""
        with self._cond:
            self._cond.wait_for(lambda: self.version > version, timeout)
            return self.version
