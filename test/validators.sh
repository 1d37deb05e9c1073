#!/usr/bin/env bash
# The Python and TypeScript downstream validators (fence/python, fence/js)
# against the conformance vectors the Go package generates
# (fence/testdata/vectors.json; `go test ./fence/ -run TestConformanceVectors`
# fails when the file drifts from the Go implementation). Called by
# test/run.sh. As root it installs what it needs: Debian's python3-*
# packages (never PyPI; /usr/bin/python3, not a pyenv shim), Node 24 via
# test/install-node24.sh, and the npm dev dependencies into fence/js. Without
# root, a missing tool skips that language with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
pydeps=(python3-cryptography python3-pytest python3-starlette python3-fastapi python3-flask python3-psycopg python3-httpx python3-uvicorn)

echo "==> validators: Python (fence/python)"
if [ "$(id -u)" = 0 ]; then
  missing=()
  for p in "${pydeps[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  command -v npm >/dev/null 2>&1 || missing+=(npm) # for Node 24 and fence/js's dev dependencies
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
if "$py" -c 'import cryptography, pytest' 2>/dev/null; then
  (cd fence/python && "$py" -m pytest -q -p no:cacheprovider)
  if "$py" -c 'import fastapi, uvicorn' 2>/dev/null; then
    echo "==> demo: the seed's failure case against the FastAPI service"
    go run ./cmd/fencepost demo --downstream python | tail -3
  fi
else
  echo "SKIP Python validator: $py lacks cryptography/pytest and not root to apt-get install ${pydeps[*]}"
fi

echo "==> validators: TypeScript (fence/js)"
node=""
if [ "$(id -u)" = 0 ] || command -v node >/dev/null 2>&1; then
  node=$(bash test/install-node24.sh) || node=""
fi
if [ -z "$node" ]; then
  echo "SKIP TypeScript validator: no Node 24 (test/install-node24.sh needs npm, or root)"
  exit 0
fi
export PATH="$(dirname "$node"):$PATH"
(
  cd fence/js
  if [ ! -x node_modules/.bin/tsc ]; then
    npm ci --no-audit --no-fund --silent
  fi
  node_modules/.bin/tsc -p .
  "$node" --test 'dist/test/*.test.js'
)
echo "==> demo: the seed's failure case against the Express service"
FENCEPOST_NODE="$node" go run ./cmd/fencepost demo --downstream node | tail -3
