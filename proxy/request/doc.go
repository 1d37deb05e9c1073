// Package request is the one path every proxied request takes, whatever
// way it came in (DESIGN.md 6 and 11): parse the target (target.go),
// select the task, classify (classify.go, presets.go), ask the lease
// keeper, stamp the fencing headers and the Idempotency-Key (headers.go,
// idempotency.go, signhosts.go), journal (journal.go), forward over the
// pooled upstream clients and TLS origination (upstream.go, tlsorigin.go),
// relay the response (relay.go) and answer refusals and upstream
// failures as problems (respond.go, takeover.go). Pipeline.Serve runs
// those steps for one request; an Entry says how it came in (absolute
// form on the proxy port, or from inside a tunnel).
//
// It asks the keeper only through Leases, declared here: whether a task
// may write now and under which lease. It never decides that itself, and
// never compares a deadline: its write connections and relays ask the
// lease's Ticket.
//
// It may not touch: the keeper's table or loops (package leases), CONNECT
// and tunnels (package tunnel, which hands it requests), the control API
// (package control) or the user-facing Config (package proxy, which hands
// it Settings).
package request
