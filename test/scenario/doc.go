// Package scenario plays the seed article's failure case (section 八:
// an old worker comes back after its lease was reclaimed and keeps
// writing, colliding with the new owner) with the real components in one
// process, and reports whether every guarantee held. `fencepost demo`
// runs it; TestSeedFailureCase requires it to pass.
//
// The cast: a 3-node lease cluster (raftstore + its HTTP API on loopback,
// data in a temporary directory), two workers A and B, each behind its own
// sidecar (package proxy), and the reference fenced service (fence/refsvc)
// as the downstream. Network faults are real TCP faults from test/netfault:
// A's sidecar reaches the cluster only through links that are cut, and one
// of A's writes goes through a link that holds it on the wire.
//
// Run prints a timeline, one line per event with the elapsed time, and
// ends with one JSON object (Summary). The package also exports the
// in-process Cluster the fault tests (test/fault) start.
package scenario
