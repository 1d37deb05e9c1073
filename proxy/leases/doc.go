// Package leases is the sidecar's lease keeper (DESIGN.md 4.2 and 6): the
// session with the cluster, the heartbeat loop, the session watch, the
// watchdog, one-task mode, and the lease table with each lease's state.
// It is the only code that decides whether a lease is current: a write
// may leave only when leaseState.mayWrite says so, and pastDeadline is the
// one comparison of the clock with a local deadline (the deliberately
// broken build, tag fencepost_broken_nodeadline, switches it off in
// broken_on.go). Every change of a lease goes through the Keeper, so it is
// the one place that cuts a lease's connections and tunnels and publishes
// lease events.
//
// Others hold a lease only as a Ref and its Ticket, the right to write
// under one generation of the lease: they ask the ticket (MayWrite), and
// register what carries the lease's writes with it (Track), so that the
// lease's end closes them; none of them compares a deadline.
//
// It may not touch: HTTP requests and replies (package request), CONNECT
// (package tunnel), the control API's routes (package control) or the
// user-facing Config (package proxy, which hands it Settings). Of the
// sidecar it imports only package clock.
package leases
