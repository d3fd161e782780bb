"""Regenerate the Python stubs from ``proto/api.proto``: ``python -m accelsched.deviceplugin.gen [--check]``.

The .proto is the single source of the wire format. The stubs are committed so that installing accelsched needs no
protoc, and ``--check`` (and a test) holds them equal to what grpcio-tools produces from the .proto today.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the accelsched package
PROTO = Path("accelsched", "deviceplugin", "proto", "api.proto")
OUTPUTS = ("api_pb2.py", "api_pb2_grpc.py")


def generate(out_root: Path) -> list[Path]:
    """Run protoc (grpcio-tools) on the .proto, writing the stubs under ``out_root`` at the package's path."""
    from grpc_tools import protoc  # dev dependency: only generating needs it

    # -I at the package root makes the import in api_pb2_grpc.py absolute (accelsched.deviceplugin.proto.api_pb2).
    args = [
        "protoc",
        f"-I{PACKAGE_ROOT}",
        f"--python_out={out_root}",
        f"--grpc_python_out={out_root}",
        str(PACKAGE_ROOT / PROTO),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PACKAGE_ROOT / PROTO}")
    return [out_root / PROTO.parent / name for name in OUTPUTS]


def stale() -> list[str]:
    """Names of the committed stubs that differ from freshly generated ones (empty: up to date)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        return [
            f.name
            for f in fresh
            if not (PACKAGE_ROOT / PROTO.parent / f.name).exists()
            or (PACKAGE_ROOT / PROTO.parent / f.name).read_bytes() != f.read_bytes()
        ]


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        changed = stale()
        for name in changed:
            print(f"{PROTO.parent / name} is not what {PROTO} generates; run make proto", file=sys.stderr)
        return 1 if changed else 0
    if argv[1:]:
        print("usage: python -m accelsched.deviceplugin.gen [--check]", file=sys.stderr)
        return 2
    for path in generate(PACKAGE_ROOT):
        print(f"wrote {path.relative_to(PACKAGE_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
