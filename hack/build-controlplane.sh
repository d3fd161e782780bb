#!/usr/bin/env bash
# Builds the real control-plane binaries the integration tests run against (tests/live/) from the Go module in
# hack/controlplane, into a cache keyed by the content that decides them, and prints the bin dir.
#
# Usage: hack/build-controlplane.sh [--check]
#          [kube-controller-manager | dra-allocator-oracle | helm | kubectl | kube-proxy | prometheus | kueue | kueue-perf]
#   (default)                etcd, kube-apiserver and kube-scheduler, from go.mod;
#   kube-controller-manager  only that (the DRA tests run its resourceclaim controller), from kubelet.mod: it imports
#                            the volume plugins and the kubelet's modules that go.mod leaves out (cadvisor, the CRI
#                            and CSI clients), which kubelet.mod is go.mod plus (hack/build-node.sh checks the two
#                            agree). Its own key and cache dir, so it never rebuilds the others nor they it.
#   dra-allocator-oracle     upstream's DRA allocator (hack/dra-allocator-oracle, tests/test_dra_allocator_oracle.py),
#                            own module, key and cache dir likewise.
#   helm                     Helm v4.3.2's own cmd/helm (hack/helm/go.mod's tool line), for the chart's tests; its own
#                            module with Helm's own k8s.io client versions (nothing of it is linked with the cluster).
#   kubectl                  kubectl v1.36.3 (cmd/kubectl here, upstream's main) for the kubectl plugin's tests, from
#                            kubectl.mod: kubelet.mod plus kubectl's own modules (kustomize, ...), the shared ones
#                            pinned as go.mod pins them (checked), under its own key.
#   kube-proxy               kube-proxy v1.36.3 (cmd/kube-proxy here, upstream's main) for the chart's real-node test
#                            (tests/node/test_chart_node.py: iptables mode on the host, so pods reach the API server
#                            through the `kubernetes` Service), from kube-proxy.mod: kubelet.mod plus kube-proxy's own
#                            modules (ipvs, netlink, knftables), the shared ones pinned as go.mod pins them (checked).
#   prometheus               Prometheus v0.316.0's prometheus and promtool (hack/prometheus/go.mod's tool lines), without
#                            the cloud service discoveries (-tags remove_all_sd: static and file configs are enough to
#                            scrape a process on loopback), for the rules' and the dashboard's tests.
#   kueue                    Kueue v0.19.2's controller manager (hack/kueue/go.mod's tool line), the reference the queue
#                            oracle (conformance/kueue.py) runs against the test API server; own module and versions.
#   kueue-perf               Kueue v0.19.2's performance harness (test/performance/scheduler: the runner and
#                            minimalkueue) for benchmarks/kueueperf.py, from hack/kueue/perf.mod: go.mod plus the
#                            modules only the harness imports (envtest's), go.mod's pins unchanged (checked).
# The components built from k8s.io/kubernetes are stamped with its version (a module build has no git tree to take
# it from), so the API server's /version, `kubectl version` and Helm's kubeVersion check see v1.36.3.
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
# The lines that stamp the version into a k8s.io/kubernetes binary: part of those components' keys.
stamp() { grep -- 'component-base/version\|stamped=' "$here/build-controlplane.sh"; }
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
    key="$( (cd "$src" && cat go.mod go.sum $(find cmd -name '*.go' -not -path 'cmd/kubelet/*' \
      -not -path 'cmd/kube-controller-manager/*' -not -path 'cmd/kubectl/*' -not -path 'cmd/kube-proxy/*' \
      | LC_ALL=C sort); stamp) | sha256sum | cut -c1-16)"
    root="${ACCELSCHED_CONTROLPLANE_DIR:-$cache/controlplane}"
    ;;
  kube-controller-manager)
    cmds=(kube-controller-manager)
    modfile=kubelet.mod
    key="$( (cd "$src" && cat kubelet.mod kubelet.sum cmd/kube-controller-manager/*.go; stamp) | sha256sum | cut -c1-16)"
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
  helm)
    cmds=(helm)
    modfile=go.mod
    moddir="$here/helm"
    pkg=helm.sh/helm/v4/cmd/helm
    own_versions=1
    key="$(cd "$moddir" && cat go.mod go.sum | sha256sum | cut -c1-16)"
    root="${ACCELSCHED_HELM_DIR:-$cache/helm}"
    ;;
  prometheus)
    cmds=(prometheus promtool)
    modfile=go.mod
    moddir="$here/prometheus"
    pkgprefix=github.com/prometheus/prometheus/cmd/
    tags=remove_all_sd
    own_versions=1
    key="$( (cd "$moddir" && cat go.mod go.sum; echo "$tags") | sha256sum | cut -c1-16)"
    root="${ACCELSCHED_PROMETHEUS_DIR:-$cache/prometheus}"
    ;;
  kueue)
    cmds=(kueue)
    modfile=go.mod
    moddir="$here/kueue"
    pkg=sigs.k8s.io/kueue/cmd/kueue
    own_versions=1
    key="$(cd "$moddir" && cat go.mod go.sum | sha256sum | cut -c1-16)"
    root="${ACCELSCHED_KUEUE_DIR:-$cache/kueue}"
    ;;
  kueue-perf)
    cmds=(runner minimalkueue)
    modfile=perf.mod
    moddir="$here/kueue"
    pkgprefix=sigs.k8s.io/kueue/test/performance/scheduler/
    own_versions=1
    key="$(cd "$moddir" && cat perf.mod perf.sum | sha256sum | cut -c1-16)"
    root="${ACCELSCHED_KUEUE_PERF_DIR:-$cache/kueue-perf}"
    ;;
  kubectl)
    cmds=(kubectl)
    modfile=kubectl.mod
    key="$( (cd "$src" && cat kubectl.mod kubectl.sum cmd/kubectl/*.go; stamp) | sha256sum | cut -c1-16)"
    root="${ACCELSCHED_KUBECTL_DIR:-$cache/kubectl}"
    ;;
  kube-proxy)
    cmds=(kube-proxy)
    modfile=kube-proxy.mod
    key="$( (cd "$src" && cat kube-proxy.mod kube-proxy.sum cmd/kube-proxy/*.go; stamp) | sha256sum | cut -c1-16)"
    root="${ACCELSCHED_KUBE_PROXY_DIR:-$cache/kube-proxy}"
    ;;
  *)
    echo "build-controlplane: unknown component '$1' (known: kube-controller-manager, dra-allocator-oracle, helm, kubectl, kube-proxy, prometheus, kueue, kueue-perf)" >&2
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

# A second module file must pin what its go.mod pins (hack/check-modfile.py).
if [ "$modfile" != go.mod ]; then python3 "$here/check-modfile.py" "$moddir" "$modfile"; fi
# So must a module of its own, for every module it requires.
if [ "$moddir" != "$src" ] && [ -z "${own_versions:-}" ]; then python3 "$here/check-modfile.py" --subset "$src" "$moddir/go.mod"; fi

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
    ldflags="-s -w"
    if [ "$moddir" = "$src" ]; then  # built from k8s.io/kubernetes: stamped=its version
      version="$(cd "$src" && go list -modfile="$modfile" -m -f '{{.Version}}' k8s.io/kubernetes)"
      minor="${version#v*.}"; minor="${minor%%.*}"; major="${version#v}"; major="${major%%.*}"
      v=k8s.io/component-base/version
      ldflags="$ldflags -X $v.gitVersion=$version -X $v.gitMajor=$major -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
    fi
    (cd "$moddir" && CGO_ENABLED=0 go build -modfile="$modfile" -p "$jobs" -buildvcs=false -trimpath -ldflags "$ldflags" \
      -tags "${tags:-}" -o "$tmp/$cmd" "${pkg:-${pkgprefix:-./cmd/}$cmd}") >&2
    # Move into place only when complete, so an interrupted build never leaves a half-written binary "cached".
    mv "$tmp/$cmd" "$bin/$cmd"
    echo "build-controlplane: $cmd built in $((SECONDS - start))s" >&2
  fi
done
echo "$bin"
