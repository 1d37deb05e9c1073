#!/usr/bin/env bash
# Installs the real HTTP clients the client tests drive (test/devclients,
# test/clients) when run as root: curl, Debian's python3-requests and
# python3-httpx, and Node.js 24 from the npm registry
# (test/install-node24.sh). Without root it installs nothing; the tests then
# skip a missing client and say why.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || exit 0
need=()
command -v curl >/dev/null 2>&1 || need+=(curl)
/usr/bin/python3 -c 'import requests' >/dev/null 2>&1 || need+=(python3-requests)
/usr/bin/python3 -c 'import httpx' >/dev/null 2>&1 || need+=(python3-httpx)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  echo "install-clients: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
test/install-node24.sh >/dev/null
