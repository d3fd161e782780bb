"""Regenerate the DRA driver's Python stubs from ``proto/*.proto``: ``python -m accelsched.dra.driver.gen [--check]``.

Two wire formats, both copied unchanged from k8s.io/kubelet@v0.36.3: ``api.proto`` (the DRAPlugin service the kubelet
calls, package ``k8s.io.kubelet.pkg.apis.dra.v1``) and ``pluginregistration.proto`` (the Registration service the
kubelet's plugin watcher calls on ``plugins_registry/<driver>-reg.sock``). As for the device plugin
(accelsched/deviceplugin/gen.py), the .proto files are the source and the stubs are committed, so installing
accelsched needs no protoc; ``--check`` (and a test) holds the stubs equal to what grpcio-tools makes of them today.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the folder holding the accelsched package
PROTO_DIR = Path("accelsched", "dra", "driver", "proto")
PROTOS = ("api.proto", "pluginregistration.proto")


def outputs(proto: str) -> tuple[str, str]:
    stem = proto.removesuffix(".proto")
    return f"{stem}_pb2.py", f"{stem}_pb2_grpc.py"


def generate(out_root: Path) -> list[Path]:
    """Run protoc (grpcio-tools) on every .proto, writing the stubs under ``out_root`` at the package's path."""
    from grpc_tools import protoc  # dev dependency: only generating needs it

    written = []
    for proto in PROTOS:
        # -I at the package root makes the stubs' imports absolute (accelsched.dra.driver.proto.api_pb2).
        source = PACKAGE_ROOT / PROTO_DIR / proto
        args = ["protoc", f"-I{PACKAGE_ROOT}", f"--python_out={out_root}", f"--grpc_python_out={out_root}", str(source)]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {source}")
        written += [out_root / PROTO_DIR / name for name in outputs(proto)]
    return written


def stale() -> list[str]:
    """Names of the committed stubs that differ from freshly generated ones (empty: up to date)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        committed = PACKAGE_ROOT / PROTO_DIR
        return [
            f.name
            for f in fresh
            if not (committed / f.name).exists() or (committed / f.name).read_bytes() != f.read_bytes()
        ]


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        changed = stale()
        for name in changed:
            print(f"{PROTO_DIR / name} is not what its .proto generates; run make proto", file=sys.stderr)
        return 1 if changed else 0
    if argv[1:]:
        print("usage: python -m accelsched.dra.driver.gen [--check]", file=sys.stderr)
        return 2
    for path in generate(PACKAGE_ROOT):
        print(f"wrote {path.relative_to(PACKAGE_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
