// Package fault holds black-box fault tests of fencepost: the real lease
// cluster (in process, on loopback TCP), real sidecars (in process, or as
// child processes where a fault needs a process to freeze), and a real
// fenced downstream, under leader kills and restarts, SIGSTOP of a
// sidecar past its TTL, held and delayed old-epoch writes, and loss and
// delay on the sidecar → cluster link (test/netfault). Histories are
// checked against the invariants of DESIGN.md section 10; the lease
// history across a leader kill is checked for linearizability with
// porcupine.
//
// A network partition of the leader is not played with relays: raft's TCP
// transport dials the addresses in the replicated configuration from an
// unbound source, so a relay in front of one node's raft port cannot
// separate it from one peer and not the other. The nearest fault played
// here is a SIGSTOPped leader process (cut off from everyone, then back
// with a stale view); raftstore's own TestPartitionedLeaderCannotRenew
// covers the true partition with a wrapped transport.
//
// Tests that start `fencepost` processes build the binary once per run
// (go build) and are skipped with -short.
//
// The package has no API; everything is in its tests.
package fault
