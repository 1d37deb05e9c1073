// Package e2e holds the sidecar's end-to-end test: a real single-node
// lease cluster (raftstore + its HTTP API, on loopback), a sidecar built
// from package proxy, and a recording upstream. It checks the one claim
// everything else rests on: a write under a current lease arrives
// stamped, and once the lease is revoked the next write is refused by the
// sidecar and never reaches the upstream, while a new owner's sidecar
// writes with a higher epoch.
package e2e
