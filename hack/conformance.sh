#!/usr/bin/env bash
# `make conformance`: both differential oracles, each run whatever the others' results, then one line per run with
# its verdict line and exit status. CI keeps only the tail of its log, and the kube-scheduler oracle prints last and
# at length, so without this summary a failing Kueue run above it could not be told from the others.
#
#   hack/conformance.sh PYTHON
set -uo pipefail
export PYTHONUNBUFFERED=1  # each run's progress in the log as it goes, not at its end
py=${1:?usage: hack/conformance.sh PYTHON}
log=$(mktemp -d "${TMPDIR:-/tmp}/accelsched-conformance.XXXXXX")
summary=()
rc=0
run() {  # run NAME ARGS...: one oracle run, its output shown as it goes and kept for the summary
  local name=$1 status
  shift
  "$py" "$@" 2>&1 | tee "$log/$name.log"
  status=${PIPESTATUS[0]}
  [ "$status" = 0 ] || rc=1
  summary+=("$(printf '%-16s rc=%d  %s' "$name" "$status" \
    "$(grep -E '^(kueue-)?conformance: ' "$log/$name.log" | tail -n 1 || true)")")
}
run kueue            -m conformance.kueue --scenarios 1000 --seed 3
run kueue-fair       -m conformance.kueue --scenarios 100 --seed 7 --classes fairsharing --target 0.97
run kueue-gates      -m conformance.kueue --scenarios 60 --seed 1 --classes preemptiongates
run kube-scheduler   -m conformance --scenarios 2000 --dra 1000 --seed 12 --live-sample 20
printf 'conformance runs (logs in %s):\n' "$log"
printf '  %s\n' "${summary[@]}"
exit "$rc"
