#!/usr/bin/env bash
# The whole test suite: the README's second set-up command, and exactly what
# CI runs (.ci/run calls this script). As root it installs the system
# packages the tests need (PostgreSQL for the SQL fence store, iproute2 and
# iptables for the fault tests); without root those tests skip and say why.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:$(go env GOPATH)/bin"

step() { printf '\n==> %s\n' "$*"; }

if [ "$(id -u)" = 0 ]; then
  need=()
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
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
  (cd test/bench && go vet ./...)
fi

step "tests (-race)"
go test -race -count=1 -timeout 12m ./...

if ./bin/fencepost help 2>/dev/null | grep -q '^  demo'; then
  step "demo smoke test"
  ./bin/fencepost demo
fi
echo
echo "all checks passed"
