// Package fence is the downstream half of fencepost: it lets any Go service
// reject a write from a lease holder that has already been replaced, and
// de-duplicate retried writes by their Idempotency-Key.
//
// The package owns the wire format (header names, the strict decimal epoch,
// the optional Ed25519 token signature and the cluster's key document, all
// specified in SPEC.md beside this file so non-Go services can implement
// it), the [Validator] that applies the decision table, the [Store]
// interface with a bounded in-memory implementation ([MemStore]), and
// [Middleware] for net/http. The fasthttp middleware lives in the
// fasthttpfence sub-package and the database/sql store in sqlstore, so a
// net/http service does not pull either in.
//
// The guarantee a service gets (invariant I3 of the design): once a write
// carrying epoch E for a task has been accepted, no write carrying an epoch
// lower than E for the same (tenant, task) is ever accepted again. The
// check and the raise of max_seen happen atomically with the write itself:
// the store serialises writes per task while the handler runs.
//
// The package is pure: no logging, no global state, no clock reads outside
// the injectable clocks.
package fence
