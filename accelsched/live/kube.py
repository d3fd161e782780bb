"""A thin JSON client for the Kubernetes API on top of the official client's ApiClient (auth, TLS, kubeconfig).

Why not the generated ``CoreV1Api`` methods: they validate every argument with pydantic and deserialize every
response into model classes, then the scheduler would turn those back into the camelCase dicts its parsers
read (``kubectl get -o json``). Going through ``ApiClient.param_serialize``/``call_api`` keeps the official
client's authentication and connection handling and gives the API server's JSON as it is, which is both what
the offline parsers expect and several times cheaper for thousands of pods. Watches stream line by line.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.watch.watch import iter_resp_lines

from accelsched.errors import InputError
from accelsched.live.listjson import decode_list

JSON = dict[str, Any]

KUEUE_GROUP = "kueue.x-k8s.io"

# client-go's rest client retries an answer of 429 carrying Retry-After up to 10 times, waiting what it asks
# (rest.Request.maxRetries, with_retry.go checkWait). The API server answers so while a resource's watch cache
# (re)initializes (a CRD just installed or updated, or the cache fell behind etcd's compaction) and when priority
# and fairness rejects. A 429 was not acted on, so retrying it is safe for every verb.
MAX_RETRIES = 10


class ApiError(Exception):
    """A non-2xx answer (``status`` is the HTTP code), or the server not reachable (``status`` 0)."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Resource:
    """Where a kind lives: ``/api/v1`` or ``/apis/<group>/<version>``, its plural, and whether it is namespaced."""

    prefix: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        p = self.prefix
        if self.namespaced and namespace:
            p += f"/namespaces/{namespace}"
        p += f"/{self.plural}"
        if name:
            p += f"/{name}"
        if sub:
            p += f"/{sub}"
        return p


NODES = Resource("/api/v1", "nodes", namespaced=False)
PODS = Resource("/api/v1", "pods")
NAMESPACES = Resource("/api/v1", "namespaces", namespaced=False)
EVENTS = Resource("/apis/events.k8s.io/v1", "events")
LEASES = Resource("/apis/coordination.k8s.io/v1", "leases")
POD_GROUPS = Resource("/apis/scheduling.x-k8s.io/v1alpha1", "podgroups")
WORKLOAD_POD_GROUPS = Resource("/apis/scheduling.k8s.io/v1alpha2", "podgroups")  # the upstream gang API (1.36)
NODE_RESOURCE_TOPOLOGIES = Resource("/apis/topology.node.k8s.io/v1alpha2", "noderesourcetopologies", namespaced=False)


def api_client(kubeconfig: str | None = None, pool_size: int = 32, context: str | None = None) -> k8s.ApiClient:
    """An ApiClient from ``kubeconfig``, else $KUBECONFIG / ~/.kube/config, else the in-cluster service account;
    ``context`` picks a kubeconfig context other than the current one (kubectl's --context)."""
    configuration = k8s.Configuration()
    try:
        if kubeconfig:
            k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
        elif context:  # a named context needs a kubeconfig: no in-cluster fallback
            k8s_config.load_kube_config(context=context, client_configuration=configuration)
        else:
            try:
                k8s_config.load_kube_config(client_configuration=configuration)
            except k8s_config.ConfigException:
                k8s_config.load_incluster_config(client_configuration=configuration)
    except (
        k8s_config.ConfigException,
        yaml.YAMLError,
        OSError,
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
    ) as exc:
        # The kubernetes client reads the file with yaml and walks it as dicts: a malformed file surfaces as any of
        # these, never as its own ConfigException. Each is bad input, named by the kubeconfig, not a traceback.
        where = kubeconfig or "kubeconfig ($KUBECONFIG, ~/.kube/config) or in-cluster service account"
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(f"cannot load cluster credentials: {reason}", source=where) from None
    configuration.connection_pool_maxsize = pool_size  # binds go out from a pool of threads
    configuration.retries = False  # Kube.request retries a 429 as client-go does; the rest is the caller's
    return k8s.ApiClient(configuration)


class Throttle:
    """client-go's client-side rate limiter (flowcontrol.NewTokenBucketRateLimiter over x/time/rate): ``qps``
    tokens a second into a bucket of ``burst``, full at first; every request, each retry and each watch takes one,
    waiting for it. kube-scheduler's clients are built with clientConnection's qps and burst (50 and 100 by
    default), which accelsched run had validated and not applied: its writes went out as fast as the API server
    took them, whatever the operator had set to spare it."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, max(1, burst)
        self._tokens = float(self.burst)
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def _refill(self) -> float:
        """The tokens now: those left, plus ``qps`` a second since the last call, at most ``burst``. Under _lock."""
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
        self._at = now
        return self._tokens

    def spare(self) -> float:
        """Take a token only if one is free now, with nobody waiting for it: 0.0; else the seconds until one will
        be, taking none. For a write that may give its turn to everyone else's (a Pending condition)."""
        with self._lock:
            tokens = self._refill()
            if tokens >= 1 - 1e-9:  # a whole token, but for the float sum of the refills
                self._tokens = tokens - 1
                return 0.0
            return (1 - tokens) / self.qps

    def wait(self) -> None:
        with self._lock:
            self._tokens = self._refill() - 1
            delay = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if delay > 0:
            time.sleep(delay)


class Busy(Exception):
    """A request asked to go out on a spare token found none (``Kube.request(spare=True)``): nothing was sent; a
    token is free again after ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"client throttle busy for {seconds:.3f} s")
        self.seconds = seconds


def _retry_after(status: int, headers: Any) -> int | None:
    """The seconds a 429 asks to wait before the same request again (its Retry-After, whole seconds as client-go
    reads it), or None: not to be retried."""
    if status != 429:
        return None
    try:
        return max(0, int((headers or {}).get("Retry-After", "")))
    except ValueError:
        return None


class Kube:
    """JSON in, JSON out. Every method raises ApiError; a dead server is ApiError(0). A 429 with Retry-After is
    asked again first, as client-go does (``MAX_RETRIES``)."""

    def __init__(self, api: k8s.ApiClient, timeout: float = 30.0, qps: float = 0.0, burst: int = 0) -> None:
        self.api = api
        self.timeout = timeout
        self.qps, self.burst = qps, burst
        self._throttles: dict[str, Throttle] = {}
        self._throttles_lock = threading.Lock()

    def throttled(self, qps: float, burst: int) -> Kube:
        """A client on the same connections with throttles of its own (none for a qps not above 0, as client-go),
        as kube-scheduler builds its clients from one kubeconfig: one for its informers and API writes, one for its
        events, one for leader election. Each API group version has its own (a clientset's typed clients are one
        REST client each: core/v1's pods, bindings and nodes share one), and each of Kueue's kinds (``throttle``)."""
        return type(self)(self.api, self.timeout, qps, burst)

    def throttle(self, path: str) -> Throttle | None:
        """The throttle of ``path``'s API group version (/api/v1, /apis/GROUP/VERSION), and of its kind within
        Kueue's group: where the queue door writes in Kueue's place, as Kueue's controllers do, through
        controller-runtime, which makes a REST client (and so a throttle) per kind. None when unthrottled."""
        if self.qps <= 0:
            return None
        parts = path.split("/")
        if len(parts) > 2 and parts[1] == "api":
            key = "/".join(parts[:3])
        elif len(parts) > 4 and parts[2] == KUEUE_GROUP:
            kind = parts[6] if parts[4] == "namespaces" and len(parts) > 6 else parts[4]
            key = "/".join((*parts[:4], kind))
        else:
            key = "/".join(parts[:4])
        with self._throttles_lock:
            found = self._throttles.get(key)
            if found is None:
                found = self._throttles[key] = Throttle(self.qps, self.burst)
            return found

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
        stream: bool = False,
        parse: Callable[[str], Any] | None = None,
        spare: bool = False,
    ) -> Any:
        """The answer's JSON decoded (``parse``: decodes the body's text instead of ``json.loads``). ``spare``: sent
        only on a token free now (Throttle.spare), else Busy is raised and nothing is sent."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        throttle = self.throttle(path)
        for attempt in range(MAX_RETRIES + 1):
            if throttle is not None and spare and not attempt:
                busy = throttle.spare()
                if busy:
                    raise Busy(busy)
            elif throttle is not None:
                throttle.wait()
            try:
                request = self.api.param_serialize(
                    method, path, query_params=params, header_params=headers, body=body, auth_settings=["BearerToken"]
                )
                response = self.api.call_api(*request, _request_timeout=timeout or self.timeout)
            except k8s.ApiException as exc:
                raise ApiError(exc.status or 0, str(exc.body or exc.reason), exc.reason or "") from None
            except Exception as exc:  # urllib3: connection refused, reset, timed out
                raise ApiError(0, f"{type(exc).__name__}: {exc}") from None
            raw = response.response
            if 200 <= response.status <= 299:
                break
            data = raw.data
            wait = _retry_after(response.status, raw.headers)
            if wait is not None and attempt < MAX_RETRIES:
                time.sleep(wait)
                continue
            message = data.decode(errors="replace") if data else ""
            with contextlib.suppress(ValueError, AttributeError):
                message = json.loads(message).get("message", message)
            raise ApiError(response.status, message, response.reason or "")
        if stream:
            return raw
        try:
            data = raw.data
        except Exception as exc:
            raise ApiError(0, f"{type(exc).__name__}: {exc}") from None
        if not data:
            return None
        return parse(data.decode()) if parse is not None else json.loads(data)

    # ------------------------------------------------------------------------------------ reads

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        return self.request("GET", resource.path(namespace, name))

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        page_size: int = 0,
        transform: Callable[[JSON], JSON] | None = None,
        **query: Any,
    ) -> JSON:
        """The list (``items``, ``metadata.resourceVersion``), each item with its kind filled in.

        ``page_size``: fetched in pages of that many (``limit`` and ``continue``, one consistent snapshot), as
        client-go's reflector lists, so that the decoded JSON of one page, not of the whole list, is held at once
        beside what ``transform`` keeps of each item. When a continue token has expired (410 Gone: etcd compacted
        its version between two pages), the list starts over in one request, as client-go's pager does
        (FullListIfExpired).
        """
        items: list[JSON] = []
        token = None

        def each(item: Any) -> Any:
            # Trimmed as it is decoded: a page's (or a whole list's) decoded items are never all held at once.
            return transform(item) if transform is not None and isinstance(item, dict) else item

        while True:
            params = {"limit": page_size or None, "continue": token, **_camel(query)}
            try:
                out = self.request("GET", resource.path(namespace), params, parse=lambda text: decode_list(text, each))
            except ApiError as exc:
                if exc.status != 410 or not token:
                    raise
                # Start over in one request; the pages listed so far go first, not beside the whole list.
                items.clear()
                page_size, token = 0, None
                continue
            kind = str(out.get("kind", "")).removesuffix("List")
            api_version = out.get("apiVersion")
            page = out.get("items") or []
            for item in page:
                item.setdefault("kind", kind)
                item.setdefault("apiVersion", api_version)
            items += page
            token = (out.get("metadata") or {}).get("continue") if page_size else None
            if not token:
                out["items"] = items
                return out

    def watch(
        self,
        resource: Resource,
        resource_version: str,
        timeout_seconds: int = 300,
        namespace: str | None = None,
        opened: Callable[[Any], None] | None = None,
        **query: Any,
    ) -> Iterator[JSON]:
        """Watch events (``{"type": ..., "object": ...}``) from ``resource_version`` until the server ends it.

        An ERROR event (410 Gone when the version is too old) is yielded like the others; the caller relists.
        ``opened`` is handed the streaming response, whose ``shutdown()`` ends a read blocked on a quiet watch
        from another thread (an informer being stopped).
        """
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
            **_camel(query),
        }
        response = self.request(
            "GET", resource.path(namespace), params, timeout=(10.0, timeout_seconds + 30.0), stream=True
        )
        if opened is not None:
            opened(response)
        try:
            for line in iter_resp_lines(response):
                if line:
                    yield json.loads(line)
        except Exception as exc:  # the connection dropped mid-stream
            raise ApiError(0, f"watch ended: {type(exc).__name__}: {exc}") from None
        finally:
            response.release_conn()

    # ------------------------------------------------------------------------------------ writes

    def create(self, resource: Resource, body: JSON, namespace: str | None = None) -> JSON:
        return self.request("POST", resource.path(namespace), body=body)

    def replace(self, resource: Resource, name: str, body: JSON, namespace: str | None = None) -> JSON:
        return self.request("PUT", resource.path(namespace, name), body=body)

    def patch(
        self,
        resource: Resource,
        name: str,
        body: JSON,
        namespace: str | None = None,
        sub: str | None = None,
        content_type: str = "application/strategic-merge-patch+json",
    ) -> JSON:
        return self.request("PATCH", resource.path(namespace, name, sub), body=body, content_type=content_type)

    def delete(self, resource: Resource, name: str, namespace: str | None = None) -> JSON:
        return self.request("DELETE", resource.path(namespace, name))

    def bind(
        self, namespace: str, name: str, node: str, uid: str = "", annotations: dict[str, str] | None = None
    ) -> None:
        """POST pods/<name>/binding, what kube-scheduler's DefaultBinder does. 409 when already bound.

        The API server copies the Binding's annotations onto the pod in the same write, so the devices chosen at
        Reserve land with the binding: one request, and never a bound pod without its devices (or the reverse).
        """
        meta: JSON = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        if annotations:
            meta["annotations"] = annotations
        body: JSON = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.request("POST", PODS.path(namespace, name, "binding"), body=body)


def _camel(query: dict[str, Any]) -> dict[str, Any]:
    """``field_selector=...`` -> ``fieldSelector=...`` (the API's query parameter names)."""

    def camel(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(part.title() for part in rest)

    return {camel(k): v for k, v in query.items()}
