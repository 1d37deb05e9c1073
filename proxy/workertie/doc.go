// Package workertie ties a worker's lifetime to its leases (DESIGN.md 17):
// the sidecar heartbeats on the worker's behalf, so the heartbeat must
// stop meaning "alive" the moment the worker is gone. A worker is tied in
// one of three ways, each a type here:
//
//   - parented: Supervisor runs the worker as the sidecar's child
//     (`fencepost run -- CMD`). The child's exit ends its leases at once
//     (exit 0: completed or given back, as configured; otherwise given back
//     with reason worker_exited); a lost lease terminates the child
//     (SIGTERM, then SIGKILL after the kill grace); signals sent to the
//     sidecar go to the child, and the child's exit code is the sidecar's.
//     With restart on-failure a crashed child is started again, after a
//     backoff, under a new grant.
//   - attached: Attachments tracks the worker's long-lived control-API
//     streams (GET /v1/attach). When the last stream that saw a lease
//     closes while the lease is still held, the lease is given back with
//     reason worker_exited.
//   - probed: Probe checks the worker over HTTP on loopback or by running a
//     command, every interval with a timeout; threshold failures in a row
//     give its leases back with reason worker_unhealthy.
//
// The package owns the decisions and their defaults (Config), not the
// leases: it reaches them through the small consumer-side interfaces
// Keeper and Releaser, which the sidecar's lease keeper satisfies, so
// every rule here is tested with fakes and real child processes.
package workertie
