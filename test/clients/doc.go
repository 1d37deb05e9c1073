// Package clients is the real-client matrix of the sidecar's reach: curl,
// Python requests and httpx (Debian's packages), Node 24 fetch and
// node:http, and Go net/http, each configured as a user would, with
// environment variables only (HTTPS_PROXY, NODE_USE_ENV_PROXY and the
// CA-bundle variables the sidecar prints), call a loopback HTTPS upstream
// whose certificate comes from a test CA. The sidecar intercepts that TLS
// with its own CA and fences every request inside the tunnel.
//
// For each client: with a lease the write arrives stamped with exactly one
// token and one Idempotency-Key; a Server-Sent Events response streams
// through the interception; after a revoke the client gets a 409
// problem+json with x-should-retry: false that it can parse, and nothing
// arrives upstream; a write whose response is still streaming is cut when
// the lease is lost. test/install-clients.sh installs the clients as root
// (test/devclients.sh runs it in CI, before the test suite); elsewhere a
// missing client is skipped with a message.
package clients
