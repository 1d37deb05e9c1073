// Package origdst recovers where a connection was going before the kernel
// redirected it: the destination a worker dialled, read from a TCP
// connection that an iptables REDIRECT rule (fencepost capture) delivered
// to the sidecar's transparent listener. It owns only that lookup; what
// the sidecar then does with the connection belongs to package
// proxy/tunnel.
//
// The lookup is Linux netfilter's: SO_ORIGINAL_DST for IPv4 and
// IP6T_SO_ORIGINAL_DST for IPv6, answered from the connection's conntrack
// entry. On other systems, and for a connection that was not redirected,
// Of returns an error wrapping ErrUnsupported or ErrNotRedirected.
package origdst

import "errors"

// Sentinels of Of. Callers refuse the connection on any of them: without
// its original destination a captured connection cannot be fenced.
var (
	// ErrUnsupported: the system has no original-destination lookup
	// (only Linux netfilter has one).
	ErrUnsupported = errors.New("origdst: original destination lookup needs Linux netfilter")
	// ErrNotRedirected: the kernel knows no original destination for the
	// connection, or the one it knows is the listener itself — the
	// connection was dialled to the listener directly, not redirected.
	ErrNotRedirected = errors.New("origdst: connection was not redirected")
	// ErrNotTCP: the connection is not a *net.TCPConn.
	ErrNotTCP = errors.New("origdst: not a TCP connection")
)
