"""``accelsched ui --from-cluster``: the page follows a live cluster, read-only.

The same informers as ``accelsched run`` (live/informer.py) keep caches of everything the scheduler reads; any event
marks the view dirty, and one rebuild thread, debounced, turns the caches into a LiveState (a RawState over a
live/convert Snapshot) and publishes it to the Hub, which runs the offline engine on it as every other mode does.
Debouncing matters: a Deployment scaled up is hundreds of events in a burst, and one rebuild after the burst shows
the same as hundreds would.

Read-only, twice over: the process talks to the API server through ReadOnlyKube, which refuses every request but a
GET (get, list, watch) before it leaves the process, and deploy/ui/rbac.yaml grants its ServiceAccount nothing else,
so the API server refuses a write even from a modified copy.
"""

from __future__ import annotations

import dataclasses
import datetime
import gc
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from accelsched.api import reader
from accelsched.engine import Session
from accelsched.errors import InputError
from accelsched.live import convert as live_convert
from accelsched.live import kube as k
from accelsched.live import snapshot as live_snapshot
from accelsched.live.informer import Informer
from accelsched.live.kube import JSON, ApiError, Kube
from accelsched.ui.state import WHATIF_COPY_ANNOTATION, PodCache, RawState, clone

log = logging.getLogger("accelsched.ui")

DEBOUNCE_SECONDS = 0.05  # events closer than this are one rebuild
SETTLE_MAX_SECONDS = 0.5  # a rebuild waits at most this long for a burst to end (steady churn still shows)
COLLECT_AFTER_SECONDS = 0.5  # the page's time to fetch a new version before the deferred garbage collection
READ_METHODS = ("GET",)  # get, list and watch are all GETs; every write verb is another method
STATUS_EVERY_SECONDS = 1.0  # how often the rebuild thread asks whether every informer is watching


class ReadOnlyError(ApiError):
    """A write this process refused to send (it never reaches the API server)."""

    def __init__(self, what: str) -> None:
        super().__init__(405, f"accelsched ui is read-only: {what} is refused", "ReadOnly")


class ReadOnlyKube(Kube):
    """A Kube that sends only get, list and watch: create, replace, patch, delete and bind raise ReadOnlyError."""

    last_error = ""  # the last failed read's message: the page says why it is disconnected (informers keep none)

    @classmethod
    def of(cls, kube: Kube) -> ReadOnlyKube:
        return cls(kube.api, kube.timeout, kube.qps, kube.burst)

    def request(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        if method.upper() not in READ_METHODS:
            raise ReadOnlyError(f"{method.upper()} {path}")
        try:
            return super().request(method, path, *args, **kwargs)
        except ApiError as exc:
            self.last_error = _describe_error(exc)
            raise

    def watch(self, *args: Any, **kwargs: Any) -> Iterator[JSON]:
        """Kube.watch, noting a dropped stream or an ERROR event (other than 410 Gone, a routine relist)."""
        try:
            for event in super().watch(*args, **kwargs):
                if event.get("type") == "ERROR" and (event.get("object") or {}).get("code") != 410:
                    obj = event.get("object") or {}
                    self.last_error = _describe_error(ApiError(int(obj.get("code") or 0), str(obj.get("message"))))
                yield event
        except ApiError as exc:
            self.last_error = _describe_error(exc)
            raise

    def create(self, resource: k.Resource, body: JSON, namespace: str | None = None) -> JSON:
        raise ReadOnlyError(f"create {resource.plural}")

    def replace(self, resource: k.Resource, name: str, body: JSON, namespace: str | None = None) -> JSON:
        raise ReadOnlyError(f"update {resource.plural}/{name}")

    def patch(self, resource: k.Resource, name: str, body: JSON, *args: Any, **kwargs: Any) -> JSON:
        raise ReadOnlyError(f"patch {resource.plural}/{name}")

    def delete(self, resource: k.Resource, name: str, namespace: str | None = None) -> JSON:
        raise ReadOnlyError(f"delete {resource.plural}/{name}")

    def bind(self, namespace: str, name: str, node: str, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError(f"bind pods/{name}")


def _describe_error(exc: ApiError) -> str:
    return f"{exc.status} {exc.message}" if exc.status else exc.message


def connection_status(
    watching: Iterable[bool], previous: dict | None, error: str, now: float | None = None
) -> dict | None:
    """The page's connection status given whether each informer is watching: ``previous`` while nothing changed
    (the caller publishes only on a change), ``{"connected": False, "since": ISO UTC, "error": ...}`` on the first
    check that finds one not watching, ``{"connected": True}`` once all watch again after a failure. None before
    any failure (nothing to say). ``since`` is when this check saw it: within STATUS_EVERY_SECONDS of the failure."""
    connected = all(watching)
    if previous is None and connected:
        return None
    if previous is not None and bool(previous.get("connected")) == connected:
        return previous
    if connected:
        return {"connected": True}
    moment = datetime.datetime.fromtimestamp(time.time() if now is None else now, datetime.UTC)
    since = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"connected": False, "since": since, "error": error or "a list or watch of the API server failed"}


class LiveState(RawState):
    """The cluster as the informers held it at one moment. Its nodes and pods are the API server's objects (what
    ``kubectl get -o json`` prints); a what-if replaces them on a copy, never in the caches."""

    mode = "live"

    def __init__(
        self, snapshot: live_convert.Snapshot, description: str = "cluster", status: dict | None = None
    ) -> None:
        self.snapshot = snapshot
        self.description = description
        self.status = status  # connection_status when this state was taken (the Hub shows it as the view's "status")
        self.pod_cache = PodCache(live_convert.parse_pod)  # shared with the what-ifs made from it (replace)

    def nodes(self) -> list[dict]:
        return self.snapshot.nodes

    def pods(self) -> list[dict]:
        return self.snapshot.pods

    def replace(self, nodes: list[dict], pods: list[dict]) -> LiveState:
        """These nodes and pods, the rest shared; a what-if copy of a node (annotated by whatif's add) gets a copy
        of its original's NodeResourceTopology and ResourceSlices, so it has the same devices and topology."""
        snapshot = dataclasses.replace(self.snapshot, nodes=nodes, pods=pods)
        copies = {
            name: original
            for n in nodes
            if (original := ((n.get("metadata") or {}).get("annotations") or {}).get(WHATIF_COPY_ANNOTATION))
            and (name := (n.get("metadata") or {}).get("name"))
        }
        if copies:
            snapshot.topologies = [*snapshot.topologies, *_renamed_topologies(snapshot.topologies, copies)]
            slices = snapshot.dra.get("ResourceSlice") or []
            snapshot.dra = {**snapshot.dra, "ResourceSlice": [*slices, *_renamed_slices(slices, copies)]}
        out = LiveState(snapshot, self.description, self.status)
        out.pod_cache = self.pod_cache
        return out

    new_source = live_convert.SOURCE

    def parse_new_pod(self, doc: dict, inputs: Any, was: Any) -> Any:
        return self.pod_cache.parse(doc, self.new_source)  # the API server's admission set spec.priority

    def run_order(self, pods: list) -> list:
        """convert's order: the bound pods, then the pending ones; finished pods are left out."""
        live = [p for p in pods if not p.terminal]
        return [p for p in live if p.node_name] + [p for p in live if not p.node_name]

    def copy(self) -> LiveState:
        """A deep copy (what-if edits its nodes and pods), by ``clone``: several times faster than deepcopy."""
        snapshot = dataclasses.replace(self.snapshot, **clone(vars(self.snapshot)))
        return LiveState(snapshot, self.description, self.status)

    def start(self, config: Any = None, seed: int = 0) -> tuple[Session, list[str]]:
        """A Session over this state's objects, every pending pod of any schedulerName tried (what-if, as
        ``schedule --from-cluster``); warnings: the objects left out.

        No copy first, as ``accelsched run`` (live/scheduler.py) converts its informers' objects: the engine writes
        only to its own copies (a Pod's raw is api/objects.writable_copy's, copied where the scheduler writes;
        claims and volumes are copied before they change), and convert only reads the snapshot's lists. A deep copy
        of 5,000 nodes and their pods was more than half of each live publish, and the informers' objects are
        never edited in place (an event replaces them), so sharing them is safe."""
        with reader.paused_gc():  # as ``schedule --from-cluster`` (cli.py): only new objects, no garbage yet
            converted = live_convert.convert(self.snapshot, parse=self.pod_cache.parse)
            self.pod_cache.filling = False
            session = live_convert.start_session(converted, config, seed)
        warnings = [f"left out {obj}: {error}" for obj, error in converted.errors.items()]
        warnings += [f"{key} not tried yet: {why}" for key, why in converted.waiting.items()]
        warnings += [f"left out Pod {key}: bound to a node that does not exist" for key in converted.orphans]
        return session, warnings


def _renamed_topologies(topologies: list[JSON], copies: dict[str, str]) -> list[JSON]:
    by_name = {(t.get("metadata") or {}).get("name"): t for t in topologies}
    out = []
    for name, original in copies.items():
        if (topology := by_name.get(original)) is not None:
            doc = clone(topology)
            doc["metadata"] = {"name": name, **{k: v for k, v in (doc.get("metadata") or {}).items() if k == "labels"}}
            out.append(doc)
    return out


def _renamed_slices(slices: list[JSON], copies: dict[str, str]) -> list[JSON]:
    out = []
    for name, original in copies.items():
        for s in slices:
            spec = s.get("spec") or {}
            if spec.get("nodeName") != original:
                continue
            doc = clone(s)
            doc["metadata"] = {"name": f"{(s.get('metadata') or {}).get('name')}-{name}"}
            doc["spec"]["nodeName"] = name
            if isinstance(doc["spec"].get("pool"), dict):
                doc["spec"]["pool"]["name"] = name
            out.append(doc)
    return out


def describe(kube: Kube) -> str:
    host = getattr(getattr(kube.api, "configuration", None), "host", "") or ""
    return f"cluster {host}".strip()


class LiveSource:
    """Informers over the cluster and a debounced rebuild thread that publishes each new state to a Hub.

    ``start()`` lists everything once (bad credentials or a forbidden resource: InputError, before serving) and
    returns the first state; ``follow(hub)`` then publishes a new state after each burst of events.
    """

    def __init__(self, kube: Kube, debounce: float = DEBOUNCE_SECONDS, watch_timeout: int = 300) -> None:
        self.kube = kube if isinstance(kube, ReadOnlyKube) else ReadOnlyKube.of(kube)
        self.debounce = debounce
        self.description = describe(self.kube)
        self.lock = threading.RLock()
        self.dirty = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.hub: Any = None
        self.rebuilds = 0
        self.status: dict | None = None  # connection_status as last published
        self.informers: dict[str, Informer] = {
            name: Informer(
                self.kube, resource, self._on_event, self.lock, optional=optional, watch_timeout=watch_timeout,
                on_relist=self.dirty.set, **query,
            )
            for name, resource, optional, query in live_snapshot.resources()
        }  # fmt: skip

    def _on_event(self, kind: str, obj: JSON, old: JSON | None) -> None:
        self.dirty.set()

    def probe(self) -> None:
        """One small list of each resource, so that missing rights or a dead server are one clear error at startup
        (an informer would retry them forever)."""
        for _, resource, optional, _query in live_snapshot.resources():
            try:
                self.kube.list(resource, limit="1")
            except ApiError as exc:
                if optional and exc.status == 404:
                    continue
                raise InputError(f"cannot list {resource.plural}: {exc}", source=self.description) from None

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    def start(self, timeout: float = 60.0) -> LiveState:
        """Probe, start the informers, wait until each has listed once; the first state."""
        self.probe()
        for informer in self.informers.values():
            informer.start()
        deadline = time.monotonic() + timeout
        while not self.synced:
            if time.monotonic() > deadline:
                missing = [n for n, i in self.informers.items() if not i.synced.is_set()]
                self.stop()
                raise InputError(f"the cluster's caches did not fill in {timeout:.0f}s: {', '.join(missing)}")
            time.sleep(0.02)
        self.dirty.clear()
        return self.state()

    def snapshot(self) -> live_convert.Snapshot:
        """The caches now (lists of the cached objects: an informer replaces an object, never edits it)."""
        with self.lock:
            stores = {name: list(i.store.values()) for name, i in self.informers.items()}
        return live_snapshot.snapshot_of(stores)

    def state(self) -> LiveState:
        return LiveState(self.snapshot(), self.description, self.status)

    def check_status(self) -> bool:
        """Update ``status`` from the informers' ``watching``; True when it changed (the page must be told: an
        informer that lost the API server backs off and retries, and without this the page would keep showing
        the last cluster it saw as live)."""
        watching = [i.watching.is_set() for i in self.informers.values()]
        status = connection_status(watching, self.status, self.kube.last_error)
        changed = status is not self.status
        self.status = status
        return changed

    def follow(self, hub: Any) -> None:
        """Publish to ``hub`` after every burst of events, from a thread of its own."""
        self.hub = hub
        self._thread = threading.Thread(target=self._run, name="accelsched-ui-rebuild", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        collect = gc.isenabled()
        checked = 0.0
        while not self._stop.is_set():
            changed = False
            if time.monotonic() - checked >= STATUS_EVERY_SECONDS:
                checked = time.monotonic()
                changed = self.check_status()
            if not changed and not self.dirty.wait(STATUS_EVERY_SECONDS / 2):
                continue
            self._settle()
            if self._stop.is_set():
                return
            gc.disable()
            try:
                self.hub.publish(self.state())
                self.rebuilds += 1
            except Exception:  # one bad rebuild must not end live updates; the next event tries again
                log.exception("rebuilding the view failed")
            finally:
                self._collect(collect)

    def _settle(self) -> None:
        """Wait for the end of a burst of events (none for ``debounce`` seconds), at most SETTLE_MAX_SECONDS after
        its first: a Deployment scaled up is hundreds of events, one rebuild after them shows what hundreds would.
        An event after this returns marks the state dirty again: the next rebuild includes it."""
        deadline = time.monotonic() + SETTLE_MAX_SECONDS
        while True:
            self.dirty.clear()
            if self._stop.wait(self.debounce) or not self.dirty.is_set() or time.monotonic() >= deadline:
                self.dirty.clear()
                return

    def _collect(self, enable: bool) -> None:
        """The garbage collection a publish defers (it ran with the collector paused), once the page had time to
        fetch the new version or before the next rebuild. A publish at 5,000 nodes makes about a million objects
        and drops the previous run's (with cycles); a full collection of them and the caches takes about half a
        second, and inside the publish, or on the server's thread as it sends the new version, it delayed each
        update by that much."""
        try:
            self.dirty.wait(COLLECT_AFTER_SECONDS)
            reader.freeze_heap()  # the new run's objects frozen: an explain or what-if meets no full collection
        finally:
            if enable:
                gc.enable()

    def stop(self) -> None:
        """Stop the rebuild thread and every informer, and wait (5 s at most) for their threads to end: a stopped
        watch's socket is shut, so none lingers until its watch would have timed out."""
        self._stop.set()
        for informer in self.informers.values():
            informer.stop()
        if self._thread is not None:
            self._thread.join(5)
        for informer in self.informers.values():
            informer.join(5)


def list_state(kube: Kube) -> LiveState:
    """Everything the informers would watch, listed once: the state of a one-shot reader (the kubectl plugin)."""
    return LiveState(live_snapshot.list_snapshot(kube), describe(kube))
