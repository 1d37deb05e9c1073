// Package upgrade is the rolling-upgrade test: a 3-member cluster of the
// previous release's `fencepost server` (built from PreviousCommit out of
// the repository's history) is upgraded to the current build one member at
// a time, under a bounded load of acquires, heartbeats and checkpoints, so
// for a while old and new members replicate each other's entries and
// snapshots. It then checks the nemesis suite's safety properties: epochs
// strictly increase per task with one holder each, every acknowledged
// checkpoint is on every member, and every member holds the same tasks.
//
// It runs only when UPGRADE=1 (test/run.sh sets it; building the previous
// release takes a minute or two) and skips, saying why, when git or the
// commit is not available.
package upgrade
