#!/usr/bin/env bash
# The nemesis fault suite (test/nemesis): 3 `fencepost server` members, 5
# sidecar processes with workers contending for tasks, `fencepost fenced`
# and a raw recorder, under a seeded schedule of faults with heals (leader
# kill, pauses, partitions, sidecar faults), then the end checks. Network
# partitions need root and iptables (test/run.sh installs it); without root
# they are skipped and the run says so.
#
#   test/nemesis.sh              the CI schedule: 25 faults, >= 20,000 operations
#   test/nemesis.sh --long       the release check: 150 faults, >= 200,000 operations
#   NEMESIS_SEED=123 test/nemesis.sh   repeat a run (the seed is printed)
#
# NEMESIS_FAULTS, NEMESIS_OPS, NEMESIS_WORKERS and NEMESIS_KINDS (comma-
# separated) size a run; NEMESIS_REPORT=file writes the recovery table,
# NEMESIS_HISTORY=file the whole history.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --long ]; then
  export NEMESIS_FAULTS="${NEMESIS_FAULTS:-150}" NEMESIS_OPS="${NEMESIS_OPS:-200000}"
fi
export NEMESIS=1 NEMESIS_FAULTS="${NEMESIS_FAULTS:-25}" NEMESIS_OPS="${NEMESIS_OPS:-20000}"
# A failed run's problems are printed again at the very end: CI keeps only
# the tail of its output, and the history before them is long.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
go test -count=1 -timeout 60m -v -run 'TestNemesis$|KeepsEveryLease$' ./test/nemesis/ 2>&1 |
  grep -v '^=== \(RUN\|PAUSE\|CONT\)' | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  echo "nemesis failed; its problems again:"
  awk '/problems:$/ {p = 1} p && /^(---|===|FAIL|ok) / {p = 0} p' "$log" | head -60
fi
exit "$rc"
