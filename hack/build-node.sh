#!/usr/bin/env bash
# Builds what the real-node tests (tests/node/, `make node-e2e`) need and prints the bin dir holding them:
#   kubelet  the real kubelet v1.36.3, from the k8s.io/kubernetes module pinned in hack/controlplane;
#   probe    tests/node/probe, the static program in the test images (pod sandbox "pause", and the workload that
#            prints its environment and /dev entries).
# and, as root on Debian, installs containerd, runc and the CNI plugins from the archive when they are missing.
#
# Usage: hack/build-node.sh [--check]
# Cached like hack/build-controlplane.sh, under a key of its own, so building the kubelet never changes the control
# plane's key (the cached API server and kube-scheduler stay valid): the kubelet needs modules the API server does
# not (cadvisor, the CRI client...), so it builds with `-modfile=kubelet.mod`, which is go.mod plus those indirect
# requirements. This script refuses to build when the two files pin any shared module at different versions.
# First build on 2 cores: about 3-5 minutes once the control plane's modules are in the Go caches; the log goes to
# stderr. --check: print the bin dir if everything is built and installed (exit 0), else exit 1; never builds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
src="$here/controlplane"
probe_src="$repo/tests/node/probe"
command -v go >/dev/null 2>&1 || { echo "build-node: 'go' not found on PATH (Go >= 1.26 is needed)" >&2; exit 1; }

# The key covers what decides the binaries: the kubelet's module files and main, the probe's source, and this
# script's build lines (the version stamp).
key="$( (cd "$src" && cat kubelet.mod kubelet.sum cmd/kubelet/main.go; cd "$probe_src" && cat go.mod main.go; \
  grep -- '-ldflags\|gitVersion' "$here/build-node.sh") | sha256sum | cut -c1-16)"
root="${ACCELSCHED_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/accelsched/node}"
bin="$root/$key/bin"
# Debian's packages: containerd 1.6 (CRI plugin built in), runc, and bridge/host-local/loopback in /usr/lib/cni.
# iptables and conntrack: kube-proxy's (make chart-e2e: pods reach the API server through the kubernetes Service).
packages=(containerd runc containernetworking-plugins iptables conntrack)

cached() { [ -x "$bin/kubelet" ] && [ -x "$bin/probe" ]; }
installed() {
  command -v containerd >/dev/null && command -v runc >/dev/null && [ -x /usr/lib/cni/bridge ] &&
    PATH="$PATH:/usr/sbin:/sbin" command -v iptables >/dev/null && PATH="$PATH:/usr/sbin:/sbin" command -v conntrack >/dev/null
}

if [ "${1:-}" = "--check" ]; then
  if cached && installed; then echo "$bin"; exit 0; fi
  exit 1
fi

if ! installed; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "build-node: installing ${packages[*]} from the Debian archive" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${packages[@]}") >&2
  else
    echo "build-node: containerd, runc, /usr/lib/cni/bridge, iptables or conntrack missing, and not root with apt-get to install" \
      "${packages[*]}" >&2
    exit 1
  fi
fi

if cached; then
  echo "$bin"
  exit 0
fi

# The kubelet's module file must agree with go.mod on every module both require: same pins, one source of truth.
python3 "$here/check-modfile.py" "$src" kubelet.mod

mkdir -p "$bin"
exec 9>"$root/$key/build.lock"
flock 9
if cached; then
  echo "$bin"
  exit 0
fi
tmp="$(mktemp -d "$root/$key/tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
jobs="${ACCELSCHED_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
if [ ! -x "$bin/probe" ]; then
  (cd "$probe_src" && CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags "-s -w" -o "$tmp/probe" .) >&2
  mv "$tmp/probe" "$bin/probe"
fi
if [ ! -x "$bin/kubelet" ]; then
  echo "build-node: building kubelet (cache $bin)" >&2
  start=$SECONDS
  # A module build has no git tree to stamp the version from: stamp the pinned one, so `kubelet --version` and the
  # Node's status.nodeInfo.kubeletVersion say v1.36.3 rather than v0.0.0-master.
  version="$(cd "$src" && go list -modfile=kubelet.mod -m -f '{{.Version}}' k8s.io/kubernetes)"
  minor="${version#v*.}"; minor="${minor%%.*}"; major="${version#v}"; major="${major%%.*}"
  v=k8s.io/component-base/version
  ldflags="-s -w -X $v.gitVersion=$version -X $v.gitMajor=$major -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
  (cd "$src" && CGO_ENABLED=0 go build -modfile=kubelet.mod -p "$jobs" -buildvcs=false -trimpath -ldflags "$ldflags" \
    -o "$tmp/kubelet" ./cmd/kubelet) >&2
  mv "$tmp/kubelet" "$bin/kubelet"
  echo "build-node: kubelet built in $((SECONDS - start))s" >&2
fi
echo "$bin"
