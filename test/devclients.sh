#!/usr/bin/env bash
# The dev flow with real clients (test/devclients): `go run ./cmd/fencepost
# dev`, then a write from Go net/http, curl, Python requests and httpx, and
# Node.js 24 node:http and fetch, each with only the environment the banner
# prints. As root it installs the clients first (Debian packages; Node 24 from
# npm through test/install-node24.sh); without root a missing client is
# skipped and the test says why.
set -euo pipefail
cd "$(dirname "$0")/.."
test/install-clients.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
code=0
go test -count=1 -v -run TestDevBannerWorksForEveryClient ./test/devclients/ >"$log" 2>&1 || code=$?
if [ "$code" = 0 ]; then grep -E '^\s*--- |^ok' "$log"; else cat "$log"; fi
exit "$code"
