// Package devclients checks, with real clients, that the commands and
// variables `fencepost dev` prints work as printed: the dev stack is started
// the way the README says (`go run ./cmd/fencepost dev`), each client the
// README's table lists sends a write to the fenced service with only the
// printed environment, and the write arrives stamped; after the printed
// revoke line — run from another directory, without fencepost on PATH — the
// same write gets the sidecar's 409 and nothing arrives.
//
// Clients: Go net/http (this test binary, re-executed), curl, Python
// requests and httpx (Debian's python3-requests and python3-httpx under
// /usr/bin/python3), Node.js 24 node:http and fetch (test/install-node24.sh),
// and an older Node (Debian's /usr/bin/node), which ignores the variables.
// A client that is not installed is skipped with the reason;
// test/devclients.sh installs them when run as root.
//
// Each write goes to the banner's http:// URL and to its https:// URL, which
// the sidecar intercepts with its own CA (the banner's CA-bundle exports);
// the HTTPS client matrix with streaming and cuts is package test/clients.
package devclients
