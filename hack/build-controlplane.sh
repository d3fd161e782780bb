#!/usr/bin/env bash
# Builds the real control-plane binaries the integration tests run against (tests/live/) from the Go module in
# hack/controlplane, into a cache keyed by the content that decides them, and prints the bin dir.
#
# Usage: hack/build-controlplane.sh [--check] [kube-controller-manager | dra-allocator-oracle]
#   (default)                etcd, kube-apiserver and kube-scheduler, from go.mod;
#   kube-controller-manager  only that (the DRA tests run its resourceclaim controller), from kubelet.mod: it imports
#                            the volume plugins and the kubelet's modules that go.mod leaves out (cadvisor, the CRI
#                            and CSI clients), which kubelet.mod is go.mod plus (hack/build-node.sh checks the two
#                            agree). Its own key and cache dir, so it never rebuilds the others nor they it.
#   dra-allocator-oracle     upstream's DRA allocator (hack/dra-allocator-oracle, tests/test_dra_allocator_oracle.py),
#                            own module, key and cache dir likewise.
# Idempotent: when the binaries for the current module files and mains are already in the cache, it builds nothing.
# The Go module and build caches stay in their default places, so a rebuild after a version bump is incremental.
# The first build on a 2-core machine takes several minutes (see docs/live-testing.md); the log goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/controlplane"
command -v go >/dev/null 2>&1 || { echo "build-controlplane: 'go' not found on PATH (Go >= 1.26 is needed)" >&2; exit 1; }
check=""
if [ "${1:-}" = "--check" ]; then check=1; shift; fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/accelsched"
# The module a component builds from, and its package (default: hack/controlplane's ./cmd/<component>).
moddir="$src"
pkg=""
case "${1:-}" in
  "")
    cmds=(etcd kube-apiserver kube-scheduler)
    modfile=go.mod
    # The key covers everything that decides the binaries' content: the module files and the mains. cmd/kubelet is
    # hack/build-node.sh's and cmd/kube-controller-manager the component below (own keys, kubelet.mod), so adding or
    # changing them never rebuilds these.
    key="$(cd "$src" && cat go.mod go.sum $(find cmd -name '*.go' -not -path 'cmd/kubelet/*' \
      -not -path 'cmd/kube-controller-manager/*' | LC_ALL=C sort) | sha256sum | cut -c1-16)"
    root="${ACCELSCHED_CONTROLPLANE_DIR:-$cache/controlplane}"
    ;;
  kube-controller-manager)
    cmds=(kube-controller-manager)
    modfile=kubelet.mod
    key="$(cd "$src" && cat kubelet.mod kubelet.sum cmd/kube-controller-manager/*.go | sha256sum | cut -c1-16)"
    root="${ACCELSCHED_CONTROLLER_MANAGER_DIR:-$cache/controller-manager}"
    ;;
  dra-allocator-oracle)
    # Upstream's structured DRA allocator as a JSON filter, the reference tests/test_dra_allocator_oracle.py compares
    # accelsched's with: a small module of its own whose requirements must be the versions go.mod pins (checked below).
    # Seconds to build once the control plane's modules are in the Go caches, about a minute from an empty cache.
    cmds=(dra-allocator-oracle)
    modfile=go.mod
    moddir="$here/dra-allocator-oracle"
    pkg=.
    key="$(cd "$moddir" && cat go.mod go.sum main.go | sha256sum | cut -c1-16)"
    root="${ACCELSCHED_DRA_ORACLE_DIR:-$cache/dra-allocator-oracle}"
    ;;
  *)
    echo "build-controlplane: unknown component '$1' (known: kube-controller-manager, dra-allocator-oracle)" >&2
    exit 2
    ;;
esac
bin="$root/$key/bin"

cached() {
  for cmd in "${cmds[@]}"; do [ -x "$bin/$cmd" ] || return 1; done
}
if cached; then
  echo "$bin"
  exit 0
fi
# --check: only say whether the binaries for this source are cached (exit 1 if not); never build.
if [ -n "$check" ]; then
  exit 1
fi

# A second module file must pin what go.mod pins (hack/check-modfile.py).
if [ "$modfile" != go.mod ]; then python3 "$here/check-modfile.py" "$src" "$modfile"; fi
# So must a module of its own, for every module it requires.
if [ "$moddir" != "$src" ]; then python3 "$here/check-modfile.py" --subset "$src" "$moddir/go.mod"; fi

mkdir -p "$bin"
# One build at a time per key (two test sessions starting together): the second waits, then finds it cached.
exec 9>"$root/$key/build.lock"
flock 9
if cached; then
  echo "$bin"
  exit 0
fi
tmp="$(mktemp -d "$root/$key/tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# -p bounds concurrent compiles to the cores there are; GOFLAGS from the caller (e.g. -mod=mod) are kept.
jobs="${ACCELSCHED_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
for cmd in "${cmds[@]}"; do
  if [ ! -x "$bin/$cmd" ]; then
    echo "build-controlplane: building $cmd (cache $bin)" >&2
    start=$SECONDS
    (cd "$moddir" && CGO_ENABLED=0 go build -modfile="$modfile" -p "$jobs" -buildvcs=false -trimpath -ldflags "-s -w" \
      -o "$tmp/$cmd" "${pkg:-./cmd/$cmd}") >&2
    # Move into place only when complete, so an interrupted build never leaves a half-written binary "cached".
    mv "$tmp/$cmd" "$bin/$cmd"
    echo "build-controlplane: $cmd built in $((SECONDS - start))s" >&2
  fi
done
echo "$bin"
