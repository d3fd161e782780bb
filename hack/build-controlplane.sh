#!/usr/bin/env bash
# Builds the real kube-apiserver and etcd the integration tests run against (tests/live/) from the Go module in
# hack/controlplane, into a cache keyed by that module's content, and prints the bin dir.
#
# Usage: hack/build-controlplane.sh [--check]
# Idempotent: when both binaries for the current go.mod/go.sum/*.go are already in the cache, it builds nothing.
# The Go module and build caches stay in their default places, so a rebuild after a version bump is incremental.
# The first build on a 2-core machine takes several minutes (see docs/live-testing.md); the log goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/controlplane"
command -v go >/dev/null 2>&1 || { echo "build-controlplane: 'go' not found on PATH (Go >= 1.26 is needed)" >&2; exit 1; }

# The key covers everything that decides the binaries' content: the module files and the mains. cmd/kubelet is
# hack/build-node.sh's (its own key, its own kubelet.mod), so adding or changing it never rebuilds these.
key="$(cd "$src" && cat go.mod go.sum $(find cmd -name '*.go' -not -path 'cmd/kubelet/*' | LC_ALL=C sort) \
  | sha256sum | cut -c1-16)"
root="${ACCELSCHED_CONTROLPLANE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/accelsched/controlplane}"
bin="$root/$key/bin"

cached() { [ -x "$bin/kube-apiserver" ] && [ -x "$bin/etcd" ] && [ -x "$bin/kube-scheduler" ]; }
if cached; then
  echo "$bin"
  exit 0
fi
# --check: only say whether the binaries for this source are cached (exit 1 if not); never build.
if [ "${1:-}" = "--check" ]; then
  exit 1
fi

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
for cmd in etcd kube-apiserver kube-scheduler; do
  if [ ! -x "$bin/$cmd" ]; then
    echo "build-controlplane: building $cmd (cache $bin)" >&2
    start=$SECONDS
    (cd "$src" && CGO_ENABLED=0 go build -p "$jobs" -buildvcs=false -trimpath -ldflags "-s -w" -o "$tmp/$cmd" "./cmd/$cmd") >&2
    # Move into place only when complete, so an interrupted build never leaves a half-written binary "cached".
    mv "$tmp/$cmd" "$bin/$cmd"
    echo "build-controlplane: $cmd built in $((SECONDS - start))s" >&2
  fi
done
echo "$bin"
