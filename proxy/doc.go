// Package proxy is the fencepost sidecar (DESIGN.md sections 4 and 6): it
// runs beside one worker on loopback, holds a session with the lease
// cluster and heartbeats on the worker's behalf, and is the worker's
// HTTP_PROXY. Every outbound call passes through it: writes are stamped
// with exactly one fencing token (the lease epoch), the task id, the
// holder and an Idempotency-Key, and a write is blocked with a 409
// problem as soon as the sidecar's local view of the lease is no longer
// current, so it never leaves the pod.
//
// The local view is deliberately pessimistic (DESIGN.md 4.2). A lease's
// local deadline is the send time of the last successful renewal (or of
// the acquire) on Go's monotonic clock plus the validity the cluster
// granted, minus a safety margin for clock-rate drift. One function,
// leaseState.mayWrite, decides whether a write may leave: it is asked on
// every request, again right before the send, and by the write's
// upstream connection before every socket write, so a stuck heartbeat
// loop (or a descheduled goroutine) cannot let a byte of a write out at
// or after the deadline; the watchdog additionally cuts in-flight writes
// and CONNECT tunnels at that instant.
//
// Where things are (each part its own package; imports run one way, down
// this list):
//
//   - proxy (this package): the user-facing Config and its defaults and
//     checks (config.go), each part's own settings cut from it (parts.go),
//     the interception CA's creation and route (intercept.go), and
//     Sidecar (sidecar.go), which only wires the parts and owns Start and
//     Shutdown. names.go lets users name the parts' public types here.
//   - proxy/control: the control API, a route table over the keeper and
//     the cluster client, including the event and attach streams.
//   - proxy/tunnel: CONNECT — blind tunnels, sniffing, interception — and
//     the transparent-capture listener; hands each request read inside a
//     fenced tunnel or a captured connection to the request path.
//   - proxy/request: the request pipeline — target, classification,
//     stamping, keys, journal, upstream clients, TLS origination, relay,
//     problem replies.
//   - proxy/leases: the lease keeper — session, heartbeat loop, watch,
//     watchdog, the lease table and each lease's state (mayWrite, the one
//     write decision), progress marks.
//   - leaves: proxy/workertie (the worker's ties: fencepost run's child,
//     attach streams, the health probe), proxy/eventstream (the event
//     contract: ids, state first, the replay ring), proxy/proxytrace
//     (spans), proxy/origdst (a captured connection's destination),
//     proxy/reply (problem codes and replies), proxy/conns (connection
//     plumbing), proxy/clock, proxy/mitm (the interception CA),
//     proxy/cluster (the cluster client).
//   - beside the sidecar, not imported by it: proxy/capture (the nat rules
//     fencepost capture installs) and proxy/worker (the worker SDKs).
//
// A newcomer's map: a proxied request enters at Sidecar.handleProxy
// (sidecar.go) and runs request.Pipeline.Serve; a CONNECT enters at
// tunnel.Tunnels.Connect; a control call enters at control.API.Handler;
// whether a write may leave is decided in leases (leasestate.go,
// mayWrite); a lease ends in leases.Keeper.Drop (or by the watchdog in
// keeper_loops.go), which cuts its connections and tunnels.
//
// Idempotency-Key: a worker-supplied key passes unchanged; else, with an
// X-Fencing-Action-Id header, "fp1-" + the first 32 hex digits of
// sha256(taskID + NUL + actionID); else the same hash over the task id,
// the latest checkpoint's seq and the ordinal of the write since that
// checkpoint. The epoch never enters a key, so a new owner that resumes
// from the same checkpoint and repeats the same writes sends the same
// keys, and a downstream using package fence replays instead of
// repeating the effect. Writes on routes listed in Config.Journal are
// also journaled in the cluster (intent before, outcome after), and a key
// already done is answered from the journal without calling upstream.
//
// HTTPS: a CONNECT to a host in Config.Intercept is answered 200 and the
// worker's TLS is completed with a leaf from the sidecar's own CA
// (package proxy/mitm; name-constrained to the intercepted hosts where the
// list allows); a CONNECT whose first bytes are an HTTP request (Node's
// fetch tunnels even http:// URLs) is read as it is. Either way every
// request inside the tunnel enters the same pipeline as a proxied one
// (package proxy/tunnel hands it to the request path's Serve with an
// Entry naming the CONNECT authority): classified, checked, stamped, journaled or blocked,
// with the Host bound to the CONNECT authority, and upstream TLS verified.
// Other CONNECTs are blind tunnels to allow-listed targets, cut when the
// lease is lost, or refused with the reason in the status line.
//
// A second loopback server offers the worker a JSON control API
// (acquire, claim, checkpoint, wait, complete, fail, give back, lease
// view, a Server-Sent Events stream of lease events), health, readiness
// and Prometheus metrics.
//
// The sidecar reaches the cluster only through the Cluster interface,
// which *cluster.Client (package proxy/cluster) satisfies. When the client
// can also long-poll the session (WatchSession), a change to the session's
// leases makes the heartbeat loop send a heartbeat at once, so a
// revocation blocks writes within a round trip rather than an interval;
// safety never depends on it.
package proxy
