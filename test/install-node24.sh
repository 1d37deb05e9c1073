#!/usr/bin/env bash
# Prints the path of a Node.js 24 binary, installing it from the npm registry
# (the `node@24` package) when the machine has none. Debian's Node is 18/20;
# the validator and real-client tests need 24 (built-in fetch with
# NODE_USE_ENV_PROXY). Exit 1 with a message on stderr when it cannot.
set -euo pipefail
if command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)" = 24 ]; then
  command -v node; exit 0
fi
dir=${FENCEPOST_NODE24_DIR:-/opt/fencepost-node24}
bin="$dir/node_modules/node/bin/node"
if [ ! -x "$bin" ]; then
  command -v npm >/dev/null 2>&1 || { echo "install-node24: npm not found (apt-get install npm)" >&2; exit 1; }
  mkdir -p "$dir"
  npm install --silent --no-save --no-audit --no-fund --prefix "$dir" node@24 >&2 || {
    echo "install-node24: npm install node@24 failed" >&2; exit 1; }
fi
"$bin" --version >/dev/null
echo "$bin"
