#!/usr/bin/env bash
# The whole test suite: the README's second set-up command, and exactly what
# CI runs (.ci/run calls this script). As root it installs the system
# packages the tests need (PostgreSQL for the SQL fence store, iproute2 and
# iptables for the fault and capture tests, curl and Python for the capture
# test's workers, chromium for the console's browser tests); without root
# those tests skip and say why.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:$(go env GOPATH)/bin"

step() { printf '\n==> %s\n' "$*"; }

if [ "$(id -u)" = 0 ]; then
  need=()
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
  # The capture test's workers that ignore HTTP_PROXY (test/capture).
  command -v curl >/dev/null 2>&1 || need+=(curl)
  command -v python3 >/dev/null 2>&1 || need+=(python3 python3-requests)
  command -v chromium >/dev/null 2>&1 || need+=(chromium fonts-dejavu-core)
  if [ ${#need[@]} -gt 0 ]; then
    step "installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi
if ! command -v staticcheck >/dev/null 2>&1; then
  step "installing staticcheck"
  go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

step "build"
go build ./...
mkdir -p bin
go build -o bin/fencepost ./cmd/fencepost

step "vet"
go vet ./...

step "staticcheck"
staticcheck ./...

if [ -d test/bench ]; then
  step "bench harness compiles (own module)"
  (cd test/bench && go vet ./... && go test -count=1 ./...)
fi

step "dev flow with real clients"; test/devclients.sh

step "image: built without a Docker engine, its entrypoint started from the unpacked filesystem"; test/image.sh

step "tests (-race)"
go test -race -count=1 -timeout 12m ./...

step "operator console in headless chromium (screenshots kept in bin/console-screenshots)"; test/console.sh

step "nemesis fault suite"; test/nemesis.sh
# A 3-member cluster of the previous release upgraded one member at a time
# under load (the previous build comes from git history; skips without it).
step "rolling upgrade from the previous release"; UPGRADE=1 go test -count=1 -timeout 10m ./test/upgrade/
step "downstream validators (Python, TypeScript) on the Go conformance vectors"; bash test/validators.sh
step "worker SDKs (Go, Python, TypeScript), their adapters (Celery, LangGraph.js) and the shared conformance scenario"; bash test/workersdk.sh

step "demo smoke test"
./bin/fencepost demo

# The suite must be able to fail: builds with a safety check deliberately
# switched off must make it (and the demo) fail.
step "broken builds must fail"
expect_fail() {
  local what=$1; shift
  if "$@" >/tmp/fencepost-broken.log 2>&1; then
    echo "FAIL: passed with $what disabled:"; tail -20 /tmp/fencepost-broken.log; exit 1
  fi
  echo "ok: fails with $what disabled"
}
expect_fail "the sidecar's deadline check" go test -count=1 -tags fencepost_broken_nodeadline ./test/scenario/
go build -tags fencepost_broken_nodeadline -o bin/fencepost-broken ./cmd/fencepost
expect_fail "the sidecar's deadline check (demo)" ./bin/fencepost-broken demo
expect_fail "authorization" go test -count=1 -tags fencepost_broken_authz -run 'TestAuthz' ./raftstore/httpapi/
# The nemesis probes every sidecar it cuts from the cluster with a write
# sent after the sidecar's deadline, so it catches a missing deadline on
# every partition; partitions need root, so without it this check skips.
if [ "$(id -u)" = 0 ] && command -v iptables >/dev/null 2>&1; then
  expect_fail "the sidecar's deadline check (nemesis)" env NEMESIS=1 NEMESIS_FAULTS=3 NEMESIS_OPS=1000 NEMESIS_KINDS=sidecar-partition go test -count=1 -tags fencepost_broken_nodeadline -run 'TestNemesis$' ./test/nemesis/
  grep -q 'forwarded a write on .* after it was cut from the cluster' /tmp/fencepost-broken.log ||
    { echo "FAIL: the nemesis failed, but not on the late write it probes for:"; tail -40 /tmp/fencepost-broken.log; exit 1; }
else
  echo "skipped: the sidecar's deadline check (nemesis) needs partitions, which need root and iptables"
fi
# The worker tie: a sidecar that ignores its worker's death (child exit,
# attach close, failed probe) must fail the tie's tests and the nemesis's
# worker faults (no partitions: these run without root too).
expect_fail "the worker tie" go test -count=1 -tags fencepost_broken_workerdeath ./proxy/workertie/
expect_fail "the worker tie (nemesis)" env NEMESIS=1 NEMESIS_FAULTS=2 NEMESIS_OPS=500 NEMESIS_KINDS=worker-kill go test -count=1 -tags fencepost_broken_workerdeath -run 'TestNemesis$' ./test/nemesis/
grep -q 'I8: worker-kill' /tmp/fencepost-broken.log ||
  { echo "FAIL: the nemesis failed, but not on the dead worker's lease:"; tail -40 /tmp/fencepost-broken.log; exit 1; }
expect_fail "downstream fencing" go test -count=1 -tags fencepost_broken_fencing ./fence/ ./fence/sqlstore/ ./fence/refsvc/
rm -f bin/fencepost-broken
echo
echo "all checks passed"
