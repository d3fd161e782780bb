"""The web server of ``accelsched ui``: a small Starlette app over a Hub, run by uvicorn.

Why these guards: the page shows a cluster's layout and the server may front a live cluster, so it must be useless
to any other web page the user has open. It binds loopback by default; when it does, a request whose Host is not
a loopback name is refused (a DNS-rebinding page reaches 127.0.0.1 under a name of its own). Bound elsewhere
(``--address``), the Host must still be a loopback name, an IP address or this machine's own name: rebinding needs
a hostname of the attacker's. A cross-site Origin on the one POST is refused, and so is any /api read the browser
marks as coming from another site (``Sec-Fetch-Site``). It serves no write verb: POST /api/whatif only computes,
on a copy, and every other method on every path is a 405. Responses carry a strict Content-Security-Policy (no
inline script, no other origin) and nosniff, so a name like ``<img src=x onerror=...>`` in the data can never run
as code.

Engine work (a what-if, an explanation, a 5,000-node view) runs in a worker thread, never on the event loop, so the
event stream and the static files stay responsive while it computes.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import json
import logging
import mimetypes
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from accelsched.errors import InputError
from accelsched.ui.hub import Busy, Superseded

log = logging.getLogger("accelsched.ui")

STATIC = Path(__file__).resolve().parent / "static"
MAX_BODY = 1 << 20  # 1 MiB: a what-if is a few actions; anything larger is not one
KEEPALIVE_SECONDS = 15.0  # a comment line on the event stream, so proxies and browsers keep it open
POLL_SECONDS = 0.05  # how often an event stream looks at the Hub's version (a cheap int read, no thread held)
CLIENT_HEADER = "x-accelsched-client"  # the page's id per load: its newer engine request supersedes its older one
DISCONNECT_POLL_SECONDS = 0.1  # how often a running engine request looks whether its client is still there
CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
# Sec-Fetch-Site values of a fetch another page made (same-site: another port or subdomain of the same site, which is
# another origin all the same); the page's own fetches are same-origin, a typed URL or curl none or no header.
OTHER_SITES = ("cross-site", "same-site")
# The types the page's assets need, fixed here rather than taken from the host's /etc/mime.types: with nosniff a
# module script served as text/plain is refused by the browser.
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
    ".woff2": "font/woff2",
}


# ------------------------------------------------------------------------------------------------ responses


def json_response(body: Any, status: int = 200) -> Response:
    """Compact JSON (a 5,000-node view is megabytes; GZip shrinks it further), UTF-8 as it is.

    A lone surrogate (``"\\ud800"`` in a JSON manifest's annotation survives parsing) has no UTF-8 form: such a
    body is sent with \\u escapes instead, still valid JSON the page parses to the same string."""
    try:
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except UnicodeEncodeError:
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()
    return Response(data, status, media_type="application/json")


def error(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


# ------------------------------------------------------------------------------------------------ guards


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def _split_host(host: str) -> tuple[str, int | None]:
    """``name[:port]`` or ``[v6][:port]`` -> (name, port); the name keeps an IPv6 address's brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        name, rest = host[: end + 1], host[end + 1 :]
    else:
        name, _, rest = host.partition(":")
        rest = f":{rest}" if rest else ""
    if not rest:
        return name, None
    if not rest.startswith(":") or not rest[1:].isdigit():
        return name, -1
    return name, int(rest[1:])


def _is_ip_literal(name: str) -> bool:
    """``10.0.0.5`` or ``[fd00::1]`` (a v6 address only in brackets, as a Host header carries it)."""
    if name.startswith("["):
        name = name[1:-1] if name.endswith("]") else ""
    elif ":" in name:
        return False
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class Guard:
    """The outermost ASGI layer: Host, method and Sec-Fetch-Site checks first, then the security headers on every
    response, a 500 included; an exception becomes a JSON 500 (logged here, never a traceback to the client).

    ``hosts``: the Host names accepted; ``ip_literals``: whether any IP-address Host is accepted too (bound to a
    non-loopback address: a DNS-rebinding page arrives under a hostname, never an address). The port in a Host
    header, when present, must be the port the request came in on.
    """

    def __init__(self, app: ASGIApp, hosts: tuple[str, ...], ip_literals: bool = False) -> None:
        self.app = app
        self.hosts = hosts
        self.ip_literals = ip_literals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        refusal = self._refusal(scope)
        if refusal is not None:
            await self._send_with_headers(refusal, path, scope, receive, send)
            return
        started = None  # the status sent, once the response has begun

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = message.get("status", 200)
                headers = list(message.get("headers") or [])
                headers += _security_headers(path)
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            # Starlette's ServerErrorMiddleware has sent the 500 handler's JSON and re-raises for the server to log;
            # the log is here, and the exception ends here (a response that broke off mid-way is closed by uvicorn).
            log.exception("request failed: %s %s", scope.get("method"), path)
            if started is None:
                await self._send_with_headers(
                    error(500, "internal error; see the server's log"), path, scope, receive, send
                )

    def _host_allowed(self, name: str) -> bool:
        return name in self.hosts or (self.ip_literals and _is_ip_literal(name))

    def _refusal(self, scope: Scope) -> Response | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        name, port = _split_host(headers.get("host", ""))
        server = scope.get("server")
        if not self._host_allowed(name) or (port is not None and server is not None and port != server[1]):
            if not self.ip_literals:
                return error(421, f"accelsched ui answers only to a loopback Host ({', '.join(self.hosts)})")
            names = ", ".join(self.hosts)
            return error(421, f"accelsched ui answers only to a Host that is {names} or an IP address")
        method: str = scope["method"]
        path: str = scope["path"]
        if path.startswith("/api/") and headers.get("sec-fetch-site", "").strip().lower() in OTHER_SITES:
            return error(403, "accelsched ui's API answers only its own page (cross-site request refused)")
        if method in ("GET", "HEAD"):
            return None
        if method == "POST" and path == "/api/whatif":
            origin = headers.get("origin")
            if origin is not None and origin.split("://", 1)[-1].lower() != headers.get("host", "").lower():
                return error(403, "a what-if must come from this page (cross-origin request refused)")
            return None
        return error(405, f"accelsched ui is read-only: {method} is refused")

    @staticmethod
    async def _send_with_headers(response: Response, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        response.raw_headers += _security_headers(path)
        await response(scope, receive, send)


def _security_headers(path: str) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"content-security-policy", CSP.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"no-referrer"),
    ]
    # The API is always fresh (live state changes under it); assets are revalidated so an upgrade shows at once.
    headers.append((b"cache-control", b"no-store" if path.startswith("/api") else b"no-cache"))
    return headers


# ------------------------------------------------------------------------------------------------ the app


def create_app(
    hub: Any,
    sim_dir: str | Path | None = None,
    *,
    sim: dict | None = None,
    hosts: tuple[str, ...] = LOOPBACK_NAMES,
    ip_literals: bool = False,
    static_dir: Path = STATIC,
) -> Starlette:
    """The Starlette app over ``hub`` (a hub.Hub; None when serving only a ``--sim`` folder).

    ``sim``: the folder already read (simview.load), so the command's check at startup is not repeated.
    """
    sim_cache: dict[str, Any] = {"data": sim}
    sim_lock = threading.Lock()
    closing = threading.Event()
    has_sim = sim_dir is not None or sim is not None

    def static_file(name: str) -> Response:
        root = static_dir.resolve()
        try:
            path = (root / name).resolve()
        except (OSError, ValueError):
            return error(404, f"no file {name}")
        inside = path.is_relative_to(root) and not any(p.startswith(".") for p in path.relative_to(root).parts)
        if not inside or not path.is_file():
            return error(404, f"no file {name}")
        media = (
            CONTENT_TYPES.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        )
        return FileResponse(path, media_type=media)

    async def index(request: Request) -> Response:
        if hub is None:  # --sim alone: the results page is the only page
            return RedirectResponse("/sim", 307)
        return static_file("index.html")

    def no_sim() -> Response:
        return error(404, "no simulation results: start accelsched ui with --sim DIR")

    async def sim_page(request: Request) -> Response:
        return static_file("sim.html") if has_sim else no_sim()

    async def static(request: Request) -> Response:
        return static_file(request.path_params["path"])

    def no_state() -> Response:
        return error(404, "no cluster state: accelsched ui was started with --sim only")

    async def engine(request: Request, call: Callable[[Any], Any]) -> Response:
        """An engine request (a what-if, an explanation), computed and encoded in a worker thread: bad input is a
        400, every engine slot taken a 429 (hub.Busy). ``call`` gets the request's hub.Ticket: a newer request of
        the same page (``X-Accelsched-Client``) or the page going away (an aborted fetch closes the connection)
        cancels it, and its work stops at its next checkpoint (409, which no page is waiting for)."""
        ticket = hub.ticket(request.headers.get(CLIENT_HEADER, "")[:64])

        async def watch() -> None:
            while not await request.is_disconnected():
                await asyncio.sleep(DISCONNECT_POLL_SECONDS)
            ticket.cancel()

        watcher = asyncio.create_task(watch())
        try:
            return await run_in_threadpool(lambda: json_response(call(ticket)))
        except InputError as exc:
            return error(400, str(exc))
        except Busy as exc:
            return error(429, str(exc))
        except Superseded as exc:
            return error(409, str(exc))
        finally:
            watcher.cancel()

    async def state(request: Request) -> Response:
        if hub is None:
            return no_state()
        raw = request.query_params.get("since")
        since = None
        if raw is not None:
            try:
                since = int(raw)
            except ValueError:
                return error(400, f"since: must be an integer version, got {raw[:40]!r}")
        return await run_in_threadpool(lambda: json_response(hub.view(since)))

    async def history(request: Request) -> Response:
        if hub is None:
            return no_state()
        return json_response({"points": hub.history.points()})

    async def metrics(request: Request) -> Response:
        """The latest history point as Prometheus gauges (history.py), for a scrape to keep over time."""
        if hub is None:
            return no_state()
        return Response(hub.history.metrics(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def pod(request: Request) -> Response:
        if hub is None:
            return no_state()
        key = request.query_params.get("key")
        if not key:
            return error(400, "key: required (namespace/name)")
        detail = await run_in_threadpool(hub.pod, key)
        if detail is None:
            return error(404, f"no pod {key}")
        return json_response(detail)

    async def explain(request: Request) -> Response:
        if hub is None:
            return no_state()
        key = request.query_params.get("pod")
        if not key:
            return error(400, "pod: required (namespace/name)")
        try:
            return await engine(request, lambda ticket: hub.explain(key, ticket))
        except KeyError:
            return error(404, f"no pod {key}")

    async def whatif(request: Request) -> Response:
        if hub is None:
            return no_state()
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            return error(415, "a what-if body must be JSON (Content-Type: application/json)")
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            return error(413, f"a what-if body is at most {MAX_BODY} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                return error(413, f"a what-if body is at most {MAX_BODY} bytes")
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError) as exc:
            return error(400, f"body: not JSON: {str(exc)[:200]}")
        if not isinstance(parsed, dict):
            return error(400, 'body: must be a JSON object {"actions": [...]}')
        return await engine(request, lambda ticket: hub.whatif(parsed, ticket, delta=True))

    async def events(request: Request) -> Response:
        if hub is None:
            return no_state()

        async def stream() -> Any:
            # The current version first, so a page that connects late (or reconnects) knows whether to refetch.
            seen = hub.version
            yield f"retry: 2000\nevent: version\ndata: {json.dumps({'version': seen})}\n\n"
            quiet = 0.0
            while not closing.is_set():
                await asyncio.sleep(POLL_SECONDS)
                version = hub.version
                if version != seen:
                    seen, quiet = version, 0.0
                    yield f"event: version\ndata: {json.dumps({'version': version})}\n\n"
                    continue
                quiet += POLL_SECONDS
                if quiet >= KEEPALIVE_SECONDS:
                    quiet = 0.0
                    yield ": keepalive\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})

    async def sim_data(request: Request) -> Response:
        if not has_sim:
            return no_sim()

        def load() -> dict:
            with sim_lock:
                if sim_cache["data"] is None:
                    from accelsched.ui import simview

                    sim_cache["data"] = simview.load(sim_dir)
                return sim_cache["data"]

        try:
            return json_response(await run_in_threadpool(load))
        except InputError as exc:
            return error(400, str(exc))

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, f"no such page: {request.url.path}")

    async def wrong_method(request: Request, exc: Exception) -> Response:
        return error(405, f"{request.url.path} does not take {request.method}")

    async def internal(request: Request, exc: Exception) -> Response:
        # Logged by the Guard, which this exception reaches next (ServerErrorMiddleware re-raises it).
        return error(500, f"internal error ({type(exc).__name__}); see the server's log")

    get = ["GET", "HEAD"]
    routes = [
        Route("/", index, methods=get),
        Route("/sim", sim_page, methods=get),
        Route("/static/{path:path}", static, methods=get),
        Route("/api/state", state, methods=get),
        Route("/api/pod", pod, methods=get),
        Route("/api/explain", explain, methods=get),
        Route("/api/whatif", whatif, methods=["POST"]),
        Route("/api/events", events, methods=get),
        Route("/api/history", history, methods=get),
        Route("/metrics", metrics, methods=get),
        Route("/api/sim", sim_data, methods=get),
    ]
    middleware = [Middleware(GZipMiddleware, minimum_size=1024, compresslevel=6)]
    app = _GuardedStarlette(
        routes=routes, middleware=middleware, exception_handlers={404: not_found, 405: wrong_method, 500: internal}
    )
    app.guard = {"hosts": hosts, "ip_literals": ip_literals}
    app.state.closing = closing
    return app


class _GuardedStarlette(Starlette):
    """Starlette with the Guard outside its whole stack: ServerErrorMiddleware is Starlette's outermost layer, so a
    Guard among the user middleware would leave a 500 without the security headers."""

    guard: dict[str, Any]

    def build_middleware_stack(self) -> ASGIApp:
        return Guard(super().build_middleware_stack(), **self.guard)


# ------------------------------------------------------------------------------------------------ running it


def url_of(address: str, port: int) -> str:
    host = f"[{address}]" if ":" in address and not address.startswith("[") else address
    return f"http://{host}:{port}/"


def bind(address: str, port: int) -> socket.socket:
    """A listening socket on ``address:port`` (port 0: a free one): the real port is known before serving."""
    try:
        infos = socket.getaddrinfo(address.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise InputError(f"cannot resolve {address!r}: {exc}", field="--address") from None
    family, kind, proto, _, where = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        # EADDRNOTAVAIL: the machine has no such address (8.8.8.8); anything else (in use, privileged) is the port's.
        field = "--address" if exc.errno == errno.EADDRNOTAVAIL else "--port"
        raise InputError(f"cannot listen on {address}:{port}: {exc.strerror or exc}", field=field) from None
    sock.set_inheritable(True)
    return sock


def _server(app: Starlette, sock: socket.socket, ready: Callable[[], None] | None) -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if ready is not None and not self.should_exit:
                ready()

        def handle_exit(self, sig: int, frame: Any) -> None:
            # Ctrl-C: end the event streams first, or the graceful shutdown waits its timeout on them and then
            # cancels them (a CancelledError traceback on the way out).
            app.state.closing.set()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        access_log=False,
        ws="none",
        server_header=False,
        timeout_graceful_shutdown=2,
    )
    return Server(config)


def _hosts_for(address: str) -> tuple[tuple[str, ...], bool]:
    """The Host names the server answers to, and whether any IP-address Host too (bound off loopback)."""
    name = f"[{address.strip('[]')}]" if ":" in address else address
    names = [*LOOPBACK_NAMES, name.lower()]
    if is_loopback(address):
        return tuple(dict.fromkeys(names)), False
    # Bound elsewhere on purpose (--address): reached by an address, or by this machine's own names.
    names += [n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n]
    return tuple(dict.fromkeys(names)), True


def exposure_warning(address: str) -> str | None:
    """The line printed when the page is served off loopback: it has no login, and shows the cluster to anyone."""
    if is_loopback(address):
        return None
    return (
        f"accelsched ui: warning: listening on {address} without authentication: anyone who can reach this port "
        "can read the cluster's pods and labels"
    )


def serve(
    hub: Any,
    address: str = "127.0.0.1",
    port: int = 8080,
    sim_dir: str | Path | None = None,
    ready_callback: Callable[[str], None] | None = None,
    *,
    sim: dict | None = None,
) -> None:
    """Serve until Ctrl-C (uvicorn's signal handling). ``ready_callback(url)`` is called once it accepts requests,
    with the real bound port (``port=0`` picks a free one). A port that cannot be bound raises InputError."""
    sock = bind(address, port)
    url = url_of(address, sock.getsockname()[1])
    hosts, ip_literals = _hosts_for(address)
    app = create_app(hub, sim_dir, sim=sim, hosts=hosts, ip_literals=ip_literals)
    warning = exposure_warning(address)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    server = _server(app, sock, (lambda: ready_callback(url)) if ready_callback else None)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it shut down for: stopping is the normal end
        pass
    finally:
        app.state.closing.set()
        sock.close()


def start_in_thread(
    hub: Any,
    address: str = "127.0.0.1",
    port: int = 0,
    sim_dir: str | Path | None = None,
    *,
    sim: dict | None = None,
    static_dir: Path = STATIC,
    timeout: float = 10.0,
) -> tuple[str, Callable[[], None]]:
    """The server in a daemon thread, for tests and the benchmark: returns (url, stop) once it accepts requests."""
    sock = bind(address, port)
    url = url_of(address, sock.getsockname()[1])
    hosts, ip_literals = _hosts_for(address)
    app = create_app(hub, sim_dir, sim=sim, hosts=hosts, ip_literals=ip_literals, static_dir=static_dir)
    started = threading.Event()
    server = _server(app, sock, started.set)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="accelsched-ui", daemon=True)
    thread.start()
    while not started.wait(0.05):
        if not thread.is_alive() or timeout <= 0:
            server.should_exit = True
            sock.close()
            raise RuntimeError("accelsched ui: the server did not start")
        timeout -= 0.05

    def stop() -> None:
        app.state.closing.set()  # event streams end, so the graceful shutdown does not wait on them
        server.should_exit = True
        thread.join(10)
        sock.close()

    return url, stop
