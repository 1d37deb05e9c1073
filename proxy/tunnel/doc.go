// Package tunnel serves CONNECT (DESIGN.md 6): blind tunnels to
// allow-listed targets (connect.go), cut the moment their lease stops
// being current, and fenced tunnels (tunnel.go): the first bytes decide
// what a tunnel carries (sniff.go); TLS to an intercepted host is
// completed with a leaf of the sidecar's CA (package proxy/mitm); every
// request read inside is checked against the CONNECT authority and handed
// to the request path with an Entry naming it. A new way in that carries
// requests (transparent capture) belongs here too, handing its requests
// on the same way.
//
// It reaches the request path only through Requests and the keeper only
// through Leases, both declared here. It may not touch the request path's
// steps (it never classifies, stamps or forwards a request itself), the
// keeper's state, the control API, or the user-facing Config.
package tunnel
