#!/usr/bin/env python3
"""The krew release of the kubectl plugin: a reproducible archive of deploy/krew/kubectl-accelsched and the manifest
deploy/krew/accelsched.yaml that names its sha256 and the package's version.

    python3 hack/krew.py [--out DIR]   write DIR/kubectl-accelsched_vVERSION.tar.gz (default dist/) and the manifest
    python3 hack/krew.py --check       exit 1 naming what differs when the manifest does not match a fresh archive

The archive is byte-for-byte reproducible (sorted members, fixed mtime and owner, gzip without a timestamp), so the
manifest's sha256 can be checked in a test without keeping the archive in git.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import sys
import tarfile
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
SHIM = REPO / "deploy" / "krew" / "kubectl-accelsched"
MANIFEST = REPO / "deploy" / "krew" / "accelsched.yaml"
RELEASES = "https://github.com/accelsched/accelsched/releases/download"


def version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def archive() -> bytes:
    """The .tar.gz krew unpacks: the shim alone, as an executable owned by root, dated 1970."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        data = SHIM.read_bytes()
        info = tarfile.TarInfo("kubectl-accelsched")
        info.size, info.mode, info.mtime, info.uname, info.gname = len(data), 0o755, 0, "root", "root"
        tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def manifest(sha256: str, ver: str) -> dict:
    uri = f"{RELEASES}/v{ver}/kubectl-accelsched_v{ver}.tar.gz"
    platform = {
        "uri": uri,
        "sha256": sha256,
        "bin": "kubectl-accelsched",
        "files": [{"from": "kubectl-accelsched", "to": "."}],
    }
    return {
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": "accelsched"},
        "spec": {
            "version": f"v{ver}",
            "homepage": "https://github.com/accelsched/accelsched",
            "shortDescription": "Why accelerator pods are Pending, who holds which device",
            "description": (
                "accelsched from kubectl, read-only: `kubectl accelsched explain POD` says node by node why a pod is\n"
                "Pending and what would make it fit, as kube-scheduler decides; `kubectl accelsched map` prints each\n"
                "node's accelerators and the pods holding them; `kubectl accelsched whatif drain NODE` shows which\n"
                "pods would lose their place. Needs Python 3.11+ and the accelsched package (pip install accelsched)\n"
            ),
            "caveats": "Needs the accelsched Python package: pip install accelsched\n",
            "platforms": [
                {"selector": {"matchLabels": {"os": os_name}}, **platform} for os_name in ("linux", "darwin")
            ],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Readable YAML: no anchors for the repeated platform parts, multi-line text as literal blocks."""

    def ignore_aliases(self, data: object) -> bool:
        return True


_Dumper.add_representer(
    str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    data, ver = archive(), version()
    want = manifest(hashlib.sha256(data).hexdigest(), ver)
    if args.check:
        have = yaml.safe_load(MANIFEST.read_text())
        if have != want:
            print(f"{MANIFEST.relative_to(REPO)} is out of date: run python3 hack/krew.py", file=sys.stderr)
            return 1
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"kubectl-accelsched_v{ver}.tar.gz").write_bytes(data)
    header = "# The krew manifest of the kubectl plugin, written by hack/krew.py (tests/test_chart.py checks it).\n"
    MANIFEST.write_text(header + yaml.dump(want, Dumper=_Dumper, sort_keys=False, width=120))
    return 0


if __name__ == "__main__":
    sys.exit(main())
