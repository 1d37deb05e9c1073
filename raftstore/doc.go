// Package raftstore is the lease cluster's node: a hashicorp/raft member
// (raft-wal segmented log and stable store, logstore.go; file snapshots;
// TCP transport)
// whose FSM is a thin shell over the pure lease model of fence/lease.
//
// Store is the whole API the HTTP layer (raftstore/httpapi) calls:
// sessions and heartbeats, tasks and leases, checkpoints, waits, the effect
// journal, linearizable reads, membership and readiness. Mutations go
// through raft and are de-duplicated by request id; a follower answers
// ErrNotLeader and the HTTP layer forwards to LeaderHTTP().
//
// Heartbeats are the exception to "everything through raft": renewals live
// in the leader's memory (the lessor), are acknowledged only after a
// batched VerifyLeader round begun after they arrived, and a new leader
// extends every live lease to now + TTL when it takes office. DESIGN.md
// beside this file explains why that is safe.
package raftstore
