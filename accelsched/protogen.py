"""Committed gRPC stubs, regenerated from their .proto files: the one implementation behind ``make proto``.

The device plugin (accelsched/deviceplugin/gen.py) and the DRA driver (accelsched/dra/driver/gen.py) keep the
kubelet's .proto files as the source of their wire formats and commit the stubs grpcio-tools makes of them, so that
installing accelsched needs no protoc. Each ``gen`` module names its files and calls these; ``--check`` (and a test
each) holds the committed stubs equal to what grpcio-tools makes of the .proto today.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def outputs(proto: str) -> tuple[str, str]:
    stem = proto.removesuffix(".proto")
    return f"{stem}_pb2.py", f"{stem}_pb2_grpc.py"


def generate(package_root: Path, proto_dir: Path, protos: tuple[str, ...], out_root: Path) -> list[Path]:
    """Run protoc (grpcio-tools) on each .proto of ``proto_dir``, writing the stubs under ``out_root`` at the
    package's path; ``-I`` at the package root makes the stubs' imports absolute (accelsched.<...>.proto.api_pb2)."""
    from grpc_tools import protoc  # dev dependency: only generating needs it

    written = []
    for proto in protos:
        source = package_root / proto_dir / proto
        args = ["protoc", f"-I{package_root}", f"--python_out={out_root}", f"--grpc_python_out={out_root}", str(source)]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {source}")
        written += [out_root / proto_dir / name for name in outputs(proto)]
    return written


def stale(package_root: Path, proto_dir: Path, protos: tuple[str, ...]) -> list[str]:
    """Names of the committed stubs that differ from freshly generated ones (empty: up to date)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(package_root, proto_dir, protos, Path(tmp))
        committed = package_root / proto_dir
        return [
            f.name
            for f in fresh
            if not (committed / f.name).exists() or (committed / f.name).read_bytes() != f.read_bytes()
        ]


def main(argv: list[str], module: str, package_root: Path, proto_dir: Path, protos: tuple[str, ...]) -> int:
    """``python -m <module> [--check]``: write the stubs, or (``--check``) exit 1 naming those that are stale."""
    if argv[1:] == ["--check"]:
        changed = stale(package_root, proto_dir, protos)
        for name in changed:
            print(f"{proto_dir / name} is not what its .proto generates; run make proto", file=sys.stderr)
        return 1 if changed else 0
    if argv[1:]:
        print(f"usage: python -m {module} [--check]", file=sys.stderr)
        return 2
    for path in generate(package_root, proto_dir, protos, package_root):
        print(f"wrote {path.relative_to(package_root)}")
    return 0
