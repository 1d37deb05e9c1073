// Package eventstream is the control API's lease event stream as a
// contract (GET /v1/events and GET /v1/attach; README "control API"):
//
//   - every event has an id "<boot>-<seq>": boot is random per sidecar
//     process, seq counts the events it published, from 1;
//   - the first events on every connection are "state" events, one per
//     lease held in scope, or one with an empty task when none is held, so
//     a client needs no separate GET /v1/lease (and has no race with it);
//   - one event per transition: a second "lost" for one epoch, or anything
//     after an epoch's final "released"/"revoked", is dropped;
//   - the one rule for "stop now": Stop is true on lost and revoked, and on
//     released when the worker did not ask for it (worker_exited,
//     worker_unhealthy, stalled, a session that died);
//   - a reconnect that sends Last-Event-ID naming this boot gets the missed
//     events still in the ring (the last RingSize), then live ones; any
//     other id starts again with state events;
//   - a ": keepalive" comment line every KeepAlive.
//
// Hub owns ids, the ring, de-duplication and fan-out; Serve writes one
// subscription to a connection the control API took over (hijacked), and
// WatchClose tells at once when the client went away — which for
// /v1/attach is the worker's exit.
package eventstream
