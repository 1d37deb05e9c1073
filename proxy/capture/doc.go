// Package capture owns the capture rules: the nat OUTPUT rules that send a
// worker's outbound TCP to the sidecar's transparent listener, so that a
// client ignoring every proxy setting is fenced all the same (DESIGN.md,
// "Closing the bypass"). fencepost capture installs, removes and checks
// them; the listener that receives the connections is in proxy/tunnel.
//
// The rules live in one dedicated chain per family (Chain, in the nat
// table) jumped to from OUTPUT, and every rule, the jump included, carries
// a comment starting with the tag, so Remove takes out exactly what Install
// put in, whoever installed it and however often. In the chain, in order:
//
//  1. RETURN for the sidecar's uid: its own upstream dials and cluster
//     heartbeats must leave unredirected, or they would loop into itself
//     (Istio excludes its proxy's uid 1337 the same way).
//  2. RETURN for loopback destinations: the worker's explicit calls to
//     the sidecar (HTTP_PROXY, the control API) and other local services.
//     A local worker's plan (RunPlan, fencepost run --capture) captures
//     loopback instead and returns only the sidecar's own listeners, the
//     cluster's endpoints and DNS on TCP 53 (ExcludeDests).
//  3. RETURN for the excluded CIDRs (the cluster's endpoints and the
//     configured ones) and the excluded destination ports.
//  4. REDIRECT of TCP (all ports, or the listed ones) to the listener
//     port.
//
// REDIRECT of a locally generated connection rewrites its destination to
// the loopback address (127.0.0.1, ::1) at the listener's port; with
// nothing listening there the kernel answers RST, so with the sidecar down
// a captured connection is refused, never passed through (fail closed).
//
// Hosts run iptables with one of two backends, nf_tables (iptables-nft) or
// the legacy x_tables (iptables-legacy), and rules given to one are
// invisible to the other; the backend in use is detected (Detect) the way
// kube-proxy does: whichever already holds rules, else nf_tables.
package capture
