#!/usr/bin/env python3
"""Exit 1 naming each difference when a second module file of hack/controlplane (kubelet.mod: the kubelet's and
kube-controller-manager's, go.mod plus the modules only they import) pins a module go.mod also requires at another
version, or has another replace block: go.mod stays the one source of truth for the versions. With --subset, the
other file is a module of its own (hack/dra-allocator-oracle/go.mod) that requires fewer modules: each one it requires
must be one go.mod pins, at the same version.

Usage: check-modfile.py [--subset] <hack/controlplane> <modfile>   (hack/build-node.sh, hack/build-controlplane.sh)
"""

import json
import subprocess
import sys


def reqs(path):
    out = subprocess.run(["go", "mod", "edit", "-json", path], cwd=sys.argv[1], capture_output=True, check=True)
    doc = json.loads(out.stdout)
    return {r["Path"]: r["Version"] for r in doc.get("Require") or []}, doc.get("Replace") or []


subset = sys.argv[1] == "--subset"
if subset:
    del sys.argv[1]
modfile = sys.argv[2]
base, base_repl = reqs("go.mod")
other, other_repl = reqs(modfile)
bad = [] if subset else [f"{p}: go.mod {v}, {modfile} {other.get(p)}" for p, v in base.items() if other.get(p) != v]
if subset:  # what go.mod's build uses: a replace's version over the required one
    pinned = base | {r["Old"]["Path"]: r["New"].get("Version") for r in base_repl if "Old" in r}
    bad += [f"{p}: go.mod {pinned.get(p)}, {modfile} {v}" for p, v in other.items() if pinned.get(p) != v]
elif base_repl != other_repl:
    bad.append("the replace blocks differ")
if bad:
    sys.exit(f"{modfile} disagrees with hack/controlplane/go.mod:\n  " + "\n  ".join(bad))
