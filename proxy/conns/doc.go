// Package conns holds the connection plumbing the request path and the
// tunnels share: the set that closes a group of connections at once
// (set.go), lingering closes so a refused request's reply is read before
// the connection goes (linger.go), and the dial target of a localhost name
// (localhost.go). It is a leaf: it decides nothing about leases or
// requests.
package conns
