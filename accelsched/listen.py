"""Listen addresses, ports and socket folders from flags and configs, checked by syntax (no DNS) before anything binds.

``256.1.1.1`` or ``bad host!`` would otherwise surface as a ``socket.gaierror`` from deep inside an HTTP server
minutes after start; a relative socket folder as gRPC's ``Failed to bind to address unix://sock/...`` (a gRPC
unix address is ``unix://`` and an absolute path). Each is bad input (InputError: exit 2 naming the flag or field).
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import socket
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from accelsched.errors import InputError

# RFC 1123 host names: dot-separated labels of letters, digits and '-', neither starting nor ending with '-'.
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
HOSTNAME_MAX = 253
PORT_MAX = 65535


def host_problem(host: str) -> str:
    """Why ``host`` is not an address to listen on (an IP literal, IPv6 optionally in brackets, or a host name),
    or "" when it is one. Names that look like IPv4 (all-numeric last label, as no top-level domain is) must be
    one: ``256.1.1.1`` is refused here rather than looked up."""
    if not host:
        return "is empty (0.0.0.0 listens on every IPv4 address, :: on every address)"
    literal = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(literal)
        return ""
    except ValueError:
        pass
    if literal is not host or ":" in host:
        return f"{host[:80]!r} is not a valid IPv6 address"
    labels = host.removesuffix(".").split(".")
    if labels[-1].isdigit() or all(label.isdigit() for label in labels):
        return f"{host[:80]!r} is not a valid IPv4 address (four numbers 0-255)"
    if len(host) > HOSTNAME_MAX or not all(_LABEL.fullmatch(label) for label in labels):
        return (
            f"{host[:80]!r} is neither an IP address nor a host name (labels of letters, digits and '-', "
            f"at most {HOSTNAME_MAX} characters)"
        )
    return ""


def check_host(host: str, field: str, *, source: str = "", obj: str = "") -> str:
    """``host`` if it is an address to listen on, else InputError naming ``field``."""
    problem = host_problem(host)
    if problem:
        raise InputError(problem, source=source, obj=obj, field=field)
    return host


def check_port(port: int, field: str, *, source: str = "", obj: str = "") -> int:
    """``port`` if it is 0 (a free one) to 65535, else InputError naming ``field``."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= PORT_MAX:
        raise InputError(f"must be 0..{PORT_MAX} (0: a free port), got {port!r}", source=source, obj=obj, field=field)
    return port


def socket_folder(path: str) -> str:
    """A folder that will hold unix sockets, as an absolute path: gRPC reads ``unix://`` + a relative path as a
    host name, and the kubelet is handed the path to dial from its own working directory."""
    return os.path.abspath(path) if path else path


@dataclass(frozen=True)
class Where:
    """The flags or config fields an HTTP endpoint's address and port came from, for the error when it cannot
    listen there."""

    address: str
    port: str
    source: str = ""
    obj: str = ""


def http_server(host: str, port: int, handler: type[BaseHTTPRequestHandler], where: Where) -> ThreadingHTTPServer:
    """A ThreadingHTTPServer on ``host:port``, IPv6 literals included (the standard one binds IPv4 only). An address
    the machine does not have, or a port in use or privileged, is InputError naming the field, not an OSError."""
    literal = host[1:-1] if host.startswith("[") and host.endswith("]") else host

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in literal else socket.AF_INET

    try:
        return Server((literal, port), handler)
    except OSError as exc:
        # No such address here (EADDRNOTAVAIL), or a name that does not resolve: the address; otherwise the port.
        at_fault = where.address if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL else where.port
        raise InputError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", source=where.source, obj=where.obj, field=at_fault
        ) from None
