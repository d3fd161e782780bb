"""Regenerate the DRA driver's Python stubs from ``proto/*.proto``: ``python -m accelsched.dra.driver.gen [--check]``.

Two wire formats, both copied unchanged from k8s.io/kubelet@v0.36.3: ``api.proto`` (the DRAPlugin service the kubelet
calls, package ``k8s.io.kubelet.pkg.apis.dra.v1``) and ``pluginregistration.proto`` (the Registration service the
kubelet's plugin watcher calls on ``plugins_registry/<driver>-reg.sock``). As for the device plugin
(accelsched/deviceplugin/gen.py), the .proto files are the source and the stubs are committed, so installing
accelsched needs no protoc; ``--check`` (and a test) holds the stubs equal to what grpcio-tools makes of them today
(accelsched/protogen.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

from accelsched import protogen

PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the folder holding the accelsched package
PROTO_DIR = Path("accelsched", "dra", "driver", "proto")
PROTOS = ("api.proto", "pluginregistration.proto")


def generate(out_root: Path) -> list[Path]:
    """Run protoc (grpcio-tools) on every .proto, writing the stubs under ``out_root`` at the package's path."""
    return protogen.generate(PACKAGE_ROOT, PROTO_DIR, PROTOS, out_root)


def stale() -> list[str]:
    """Names of the committed stubs that differ from freshly generated ones (empty: up to date)."""
    return protogen.stale(PACKAGE_ROOT, PROTO_DIR, PROTOS)


def main(argv: list[str]) -> int:
    return protogen.main(argv, "accelsched.dra.driver.gen", PACKAGE_ROOT, PROTO_DIR, PROTOS)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
