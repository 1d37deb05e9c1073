// Package control is the worker's control API (DESIGN.md 6): a route
// table (control.go) over the lease keeper and the cluster client —
// acquire, claim, checkpoint, wait, complete, fail, give back, the lease
// view, the event stream (control_calls.go), health, readiness and
// metrics — behind a guard against cross-site and rebinding callers
// (control_guard.go). It owns the routes' paths and bodies
// (control_types.go), which the CLI and SDKs use through package proxy.
//
// It changes a lease only through the keeper's methods (Hold, Drop,
// Checkpointed) and never decides whether one is current. It may not
// touch the request path, the tunnels or the user-facing Config.
package control
