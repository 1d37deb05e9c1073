#!/usr/bin/env bash
# The dev flow with real clients (test/devclients): `go run ./cmd/fencepost
# dev`, then a write from Go net/http, curl, Python requests and httpx, and
# Node.js 24 node:http and fetch, each with only the environment the banner
# prints. As root it installs the clients first (Debian packages; Node 24 from
# npm through test/install-node24.sh); without root a missing client is
# skipped and the test says why.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then
  need=()
  command -v curl >/dev/null 2>&1 || need+=(curl)
  /usr/bin/python3 -c 'import requests' >/dev/null 2>&1 || need+=(python3-requests)
  /usr/bin/python3 -c 'import httpx' >/dev/null 2>&1 || need+=(python3-httpx)
  command -v npm >/dev/null 2>&1 || need+=(npm)
  if [ ${#need[@]} -gt 0 ]; then
    echo "devclients: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  test/install-node24.sh >/dev/null
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
code=0
go test -count=1 -v -run TestDevBannerWorksForEveryClient ./test/devclients/ >"$log" 2>&1 || code=$?
if [ "$code" = 0 ]; then grep -E '^\s*--- |^ok' "$log"; else cat "$log"; fi
exit "$code"
