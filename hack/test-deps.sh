#!/usr/bin/env bash
# Everything the test suite needs beyond .venv, installed or built where this machine allows, so that `make test`
# on a fresh clone needs no manual step (and .ci/run does the same through it). Idempotent: what is already there is
# kept, and the Go builds come from their caches (hack/build-controlplane.sh).
#   - hwloc: the reference the topology discovery is compared against (tests/test_topology_hwloc.py);
#   - Debian's Chromium: the browser tests of `accelsched ui` (tests/ui, tests/live/test_ui_live_browser.py);
#   - the control plane (etcd, kube-apiserver, kube-scheduler), kube-controller-manager and upstream's DRA allocator,
#     built from the pinned Go modules, with helm, kubectl and Kueue: the live tests, the oracles, the chart, the kubectl
#     plugin and the queue oracle (15-25 min the first time on 2 cores), and Kueue's performance harness (its runner and
#     minimalkueue, for benchmarks/kueueperf.py: about 30 s once Kueue is built, the packages are the same).
# Where something cannot be had (not root, no apt, no Go), it says so in one line and goes on: the tests that need it
# then skip naming it (tests/prereqs.py), except under CI, where they fail.
set -uo pipefail
cd "$(dirname "$0")/.."

apt_ready=""
apt_install() {  # apt_install PACKAGE...: as root with apt, after one `apt-get update`
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "test-deps: not root with apt-get; install $* by hand (the tests that need it will skip)"
    return 1
  fi
  if [ -z "$apt_ready" ]; then apt-get update -qq >/dev/null && apt_ready=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || {
    echo "test-deps: apt-get install $* failed (the tests that need it will fail under CI, skip elsewhere)"
    return 1
  }
}

command -v hwloc-ls >/dev/null 2>&1 || apt_install hwloc
# Playwright never downloads a browser here: it drives Debian's.
[ -x /usr/bin/chromium ] || apt_install chromium fonts-dejavu-core

if command -v go >/dev/null 2>&1; then
  for component in "" kube-controller-manager dra-allocator-oracle helm kubectl prometheus kueue kueue-perf; do
    hack/build-controlplane.sh $component >/dev/null ||
      echo "test-deps: building ${component:-the control plane} failed; the tests that need it will fail with its log"
  done
else
  echo "test-deps: no Go toolchain on PATH; the live tests and the oracles will skip (Go >= 1.26 builds them)"
fi
exit 0
