#!/usr/bin/env bash
# Builds the container image without a Docker engine (test/image, its own
# module, with go-containerregistry) and proves it starts: the image's
# filesystem is unpacked and its entrypoint run from there, as the image's
# non-root user when this runs as root (chroot), as this user otherwise.
# A fencepost server started that way must answer /healthz.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(git describe --always --dirty 2>/dev/null || echo dev)" \
  -o "$work/fencepost" ./cmd/fencepost
(cd test/image && go build -o "$work/image" .)
"$work/image" build --binary "$work/fencepost" --out "$work/fencepost.tar"
echo "image: $(du -h "$work/fencepost.tar" | cut -f1) docker-loadable tarball (docker load -i / crane push)"

root="$work/rootfs"
mkdir -p "$root"
{ read -r entrypoint; read -r user; } < <("$work/image" unpack --in "$work/fencepost.tar" --root "$root")
[ "$entrypoint" = /fencepost ] || { echo "image: entrypoint is $entrypoint, want /fencepost"; exit 1; }
[ "$user" = 65532:65532 ] || { echo "image: user is $user, want 65532:65532 (non-root)"; exit 1; }
[ -s "$root/etc/ssl/certs/ca-certificates.crt" ] || { echo "image: no CA roots"; exit 1; }

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
http=$(port); raft=$(port)
run=("$root$entrypoint")
args=(server --node-id image --data-dir /tmp/data --http-addr "127.0.0.1:$http" --raft-addr "127.0.0.1:$raft")
if [ "$(id -u)" = 0 ] && command -v chroot >/dev/null; then
  # As the image would run: its filesystem as /, its user.
  run=(chroot --userspec="$user" "$root" "$entrypoint")
else
  args=(server --node-id image --data-dir "$work/data" --http-addr "127.0.0.1:$http" --raft-addr "127.0.0.1:$raft")
fi
"${run[@]}" version
"${run[@]}" "${args[@]}" >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  if "$root$entrypoint" healthcheck --timeout 1s "http://127.0.0.1:$http/healthz" >/dev/null 2>&1; then
    echo "image: the entrypoint started a server from the unpacked filesystem (${run[0]}): /healthz answers"
    exit 0
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
echo "image: the server from the image did not answer /healthz:"; cat "$work/server.log"; exit 1
