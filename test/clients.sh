#!/usr/bin/env bash
# Installs the real clients of the HTTPS client matrix (package
# test/clients) when run as root: curl, Debian's python3-requests and
# python3-httpx, and Node 24 from the npm registry (test/install-node24.sh).
# `go test ./...` in test/run.sh then runs the matrix; without root a
# missing client is skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "clients.sh: not root, not installing; missing clients are skipped"
  exit 0
fi
need=()
command -v curl >/dev/null 2>&1 || need+=(curl)
/usr/bin/python3 -c 'import requests' 2>/dev/null || need+=(python3-requests)
/usr/bin/python3 -c 'import httpx' 2>/dev/null || need+=(python3-httpx)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  echo "clients.sh: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "clients.sh: node $(bash test/install-node24.sh)"
