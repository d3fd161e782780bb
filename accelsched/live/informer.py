"""List+watch caches (client-go's reflector and informer, in small): one thread per resource.

A reflector lists, then watches from the list's resourceVersion. When the watch ends it resumes from the last
version seen; when the server says that version is gone (410 Gone, a compacted etcd) or the connection fails, it
relists, after a backoff while the server is unreachable. A relist replaces the store and reports what
disappeared meanwhile as deletions, so nothing that was deleted while the server was away is kept.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from accelsched.live.backoff import Backoff
from accelsched.live.kube import JSON, ApiError, Kube, Resource

log = logging.getLogger("accelsched.live.informer")

# Objects per list request: client-go's pager asks for 500 at a time; a bigger page costs fewer round trips to a
# busy server and still bounds what is decoded at once.
LIST_PAGE = 1000

# (event type ADDED/MODIFIED/DELETED, the object, the previous version of the object or None)
Handler = Callable[[str, JSON, "JSON | None"], None]


def object_key(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Informer:
    """A store of one resource's objects by ``namespace/name``, kept current by a list+watch thread.

    ``optional``: the resource may not exist (a CRD not installed): a 404 leaves the store empty and synced, and
    the list is retried every ``absent_retry`` seconds in case the CRD appears.
    """

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        handler: Handler,
        lock: threading.RLock,
        optional: bool = False,
        watch_timeout: int = 300,
        absent_retry: float = 30.0,
        backoff: Backoff | None = None,
        on_relist: Callable[[], None] | None = None,
        transform: Callable[[JSON], JSON] | None = None,
        **query: Any,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.handler = handler
        self.lock = lock  # shared with the consumer: a handler and a snapshot never interleave
        self.optional = optional
        self.watch_timeout = watch_timeout
        self.absent_retry = absent_retry
        self.backoff = backoff or Backoff(0.2, 5.0)
        self.query = query
        self.store: dict[str, JSON] = {}
        self.synced = threading.Event()  # listed once: the cache has been complete at least once
        # Listed and watching: the cache is current. Cleared when a list or watch fails, set again by the relist;
        # the scheduler decides and binds only while every informer's is set (its cache may be stale otherwise).
        self.watching = threading.Event()
        self.absent = False
        self.resource_version = ""
        self.relists = 0  # how many times the store was rebuilt from a list (410 Gone, errors)
        self.on_relist = on_relist  # called on each list after the first (a resync)
        # client-go's SetTransform: what is kept of each object, applied before it is stored or handled.
        self.transform = transform
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: Any = None  # the open watch's streaming response (stop() shuts it)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.resource.plural}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread: at once, even while its watch waits on a quiet resource (the watch's socket is shut)."""
        self._stop.set()
        response = self._response
        if response is not None and hasattr(response, "shutdown"):
            # ValueError: urllib3's answer when that watch's socket is gone already (the watch ended, and the next
            # one is not open yet: a list retried on a 429 or waiting for the client's throttle, the server down)
            with contextlib.suppress(OSError, ValueError):
                response.shutdown()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _opened(self, response: Any) -> None:
        self._response = response
        if self._stop.is_set():  # stopped between the check and the request
            self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._list()
                if self.absent:
                    self._stop.wait(self.absent_retry)
                    continue
                while not self._stop.is_set() and self._watch():
                    self.backoff.reset()  # the watch timed out normally: resume from the last version seen
            except ApiError as exc:
                self.watching.clear()
                if self._stop.is_set():
                    return
                if exc.status == 410:  # the version we asked for is compacted away: relist at once
                    continue
                delay = self.backoff.next()
                log.warning(
                    "list/watch failed",
                    extra={
                        "resource": self.resource.plural,
                        "status": exc.status,
                        "error": exc.message,
                        "retry_in_s": round(delay, 2),
                    },
                )
                self._stop.wait(delay)

    def _list(self) -> None:
        try:
            out = self.kube.list(self.resource, page_size=LIST_PAGE, transform=self.transform, **self.query)
        except ApiError as exc:
            if self.optional and exc.status == 404:
                if not self.absent:
                    log.info("resource not served; continuing without it", extra={"resource": self.resource.plural})
                self.absent = True
                self._replace([])
                self.synced.set()
                self.watching.set()
                return
            raise
        self.absent = False
        self._replace(out.get("items") or [])
        self.resource_version = str((out.get("metadata") or {}).get("resourceVersion", ""))
        self.relists += 1
        if self.synced.is_set() and self.on_relist is not None:
            self.on_relist()
        self.synced.set()
        self.watching.set()

    def _replace(self, items: list[JSON]) -> None:
        """The list is the truth: add/modify what it has, delete what it lacks (deleted while we were away)."""
        fresh = {object_key(o): o for o in items}
        with self.lock:
            for key in [k for k in self.store if k not in fresh]:
                old = self.store.pop(key)
                self.handler("DELETED", old, old)
            for key, obj in fresh.items():
                old = self.store.get(key)
                if old is not None and _rv(old) == _rv(obj):
                    continue
                if old is not None and _uid(old) != _uid(obj):
                    # Deleted and recreated under the same name while we were away: two objects, not one
                    # modified (client-go's DeletedFinalStateUnknown + Add); the old one's state must go.
                    self.handler("DELETED", old, old)
                    old = None
                self.store[key] = obj
                self.handler("MODIFIED" if old is not None else "ADDED", obj, old)

    def _watch(self) -> bool:
        """Apply watch events; True when the watch ended normally (resume). An ERROR event raises ApiError with
        its code: 410 Gone relists at once, anything else after the backoff (never a tight relist loop)."""
        events = self.kube.watch(
            self.resource, self.resource_version, self.watch_timeout, opened=self._opened, **self.query
        )
        for event in events:
            if self._stop.is_set():
                return False
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                code = obj.get("code")
                log.info(
                    "watch error; relisting",
                    extra={"resource": self.resource.plural, "code": code, "error": obj.get("message")},
                )
                raise ApiError(int(code or 0), str(obj.get("message") or "watch error"), str(obj.get("reason") or ""))
            rv = _rv(obj)
            if rv:
                self.resource_version = rv
            if kind == "BOOKMARK":
                continue
            obj.setdefault("kind", self._kind())
            if self.transform is not None:
                obj = self.transform(obj)
            key = object_key(obj)
            with self.lock:
                old = self.store.get(key)
                if kind == "DELETED":
                    self.store.pop(key, None)
                else:
                    self.store[key] = obj
                self.handler(kind, obj, old)
        return True

    def _kind(self) -> str:
        return {
            "nodes": "Node",
            "pods": "Pod",
            "namespaces": "Namespace",
            "podgroups": "PodGroup",
            "noderesourcetopologies": "NodeResourceTopology",
        }.get(self.resource.plural, "")


def _rv(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _uid(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))
