#!/usr/bin/env bash
# The worker SDKs (proxy/worker): Go, Python (fencepost_worker, with the
# Celery adapter) and TypeScript (@fencepost/worker, with the LangGraph.js
# checkpointer, type-checked with tsc and run through the upstream
# @langchain/langgraph-checkpoint-validation suite), then the shared
# conformance scenario in all three languages, against the fake control API
# and against a real `fencepost dev` (which skips, naming the route, while the
# sidecar has no GET /v1/attach). Called by test/run.sh. As root it installs
# what it needs: Debian's python3-pytest and python3-celery, Node 24 via
# test/install-node24.sh, and the npm dev dependencies into proxy/worker/js.
# Without root, a missing tool skips that language with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
pydeps=(python3-pytest python3-celery)
if [ "$(id -u)" = 0 ]; then
  missing=()
  for p in "${pydeps[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

echo "==> worker SDK: the generated error table matches fence/lease and the sidecar's codes"
go test -count=1 ./proxy/worker/internal/gen/

echo "==> worker SDK: Python (proxy/worker/python)"
if "$py" -c 'import pytest' 2>/dev/null; then
  (cd proxy/worker/python && "$py" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning tests)
  "$py" proxy/worker/python/bench_stop.py 200
else
  echo "SKIP Python worker SDK: $py lacks pytest and not root to apt-get install ${pydeps[*]}"
fi

echo "==> worker SDK: TypeScript (proxy/worker/js)"
node=""
if [ "$(id -u)" = 0 ] || command -v node >/dev/null 2>&1; then
  node=$(bash test/install-node24.sh) || node=""
fi
if [ -n "$node" ]; then
  export PATH="$(dirname "$node"):$PATH" FENCEPOST_NODE="$node"
  (
    cd proxy/worker/js
    [ -x node_modules/.bin/tsc ] || npm ci --no-audit --no-fund --silent
    node_modules/.bin/tsc -p .
    "$node" --test 'dist/js/test/*.test.js'
    echo "==> LangGraph.js checkpointer: the upstream checkpoint-validation suite"
    node_modules/.bin/vitest run --globals --dir dist/js/test langgraph_validate.spec
    "$node" dist/js/test/bench.js 200
  )
else
  echo "SKIP TypeScript worker SDK: no Node 24 (test/install-node24.sh needs npm, or root)"
fi

echo "==> worker SDK: the Temporal activity interceptor (its own module, proxy/worker/temporal)"
(
  # -mod=mod: the module follows the main module (replace ../../..), whose
  # requirements change under it; go.mod here is then brought up to date.
  cd proxy/worker/temporal && export GOFLAGS=-mod=mod &&
    go vet ./... && { ! command -v staticcheck >/dev/null || staticcheck ./...; } && go test -race -count=1 ./...
)

echo "==> worker SDK: Go, and the conformance scenario in all three languages"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
code=0
FENCEPOST_CONFORMANCE_DEV=1 go test -race -count=1 -v -run 'Test' ./proxy/worker/... >"$log" 2>&1 || code=$?
grep -E '^\s*--- |^ok|^FAIL|SKIP|_test.go:[0-9]+: ' "$log" || true
[ "$code" = 0 ] || { cat "$log"; exit "$code"; }
go test -run '^$' -bench 'StopToCancel$' -benchtime 200x ./proxy/worker/ | grep -E 'Benchmark|^ok'
FENCEPOST_CONFORMANCE_DEV=1 go test -v -run '^$' -bench StopToCancelFencepostDev -benchtime 50x ./proxy/worker/ | grep -E 'Benchmark|SKIP|^ok'
