"""Regenerate the Python stubs from ``proto/api.proto``: ``python -m accelsched.deviceplugin.gen [--check]``.

The .proto is the single source of the wire format. The stubs are committed so that installing accelsched needs no
protoc, and ``--check`` (and a test) holds them equal to what grpcio-tools produces from the .proto today
(accelsched/protogen.py, shared with the DRA driver's stubs).
"""

from __future__ import annotations

import sys
from pathlib import Path

from accelsched import protogen

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the accelsched package
PROTO = Path("accelsched", "deviceplugin", "proto", "api.proto")


def generate(out_root: Path) -> list[Path]:
    """Run protoc (grpcio-tools) on the .proto, writing the stubs under ``out_root`` at the package's path."""
    return protogen.generate(PACKAGE_ROOT, PROTO.parent, (PROTO.name,), out_root)


def stale() -> list[str]:
    """Names of the committed stubs that differ from freshly generated ones (empty: up to date)."""
    return protogen.stale(PACKAGE_ROOT, PROTO.parent, (PROTO.name,))


def main(argv: list[str]) -> int:
    return protogen.main(argv, "accelsched.deviceplugin.gen", PACKAGE_ROOT, PROTO.parent, (PROTO.name,))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
