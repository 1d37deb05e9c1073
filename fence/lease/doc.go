// Package lease owns fencepost's lease model: tasks, sessions, leases,
// checkpoints and the effect journal, and every transition between their
// states. It is pure and deterministic: Model.Apply is a function of the
// current state, a Command and the raft index it was committed at. It never
// reads the clock (the leader stamps the time into each command) and never
// does I/O, so every replica that applies the same log reaches the same state,
// and the property tests can drive it with random command sequences.
//
// The raft FSM in raftstore is a thin shell over Model; the leader's
// in-memory heartbeat bookkeeping decides *when* to propose OpSuspect,
// OpExpire and OpReclaim, but whether such a proposal still applies is
// decided here, by comparing the epoch it carries with the current one.
package lease
