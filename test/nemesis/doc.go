// Package nemesis is the fault suite: real `fencepost server`, `fencepost
// sidecar` and `fencepost fenced` processes, workers contending for tasks
// behind their sidecars, a raw recorder that validates nothing, and a
// seeded schedule of faults with heals (a Plan of Steps, run by Run.Inject):
// leader kill, leader pauses shorter and longer than the TTL, the leader
// cut off from its peers, a member or a sidecar partitioned with iptables
// owner rules (Firewall), sidecar pause, kill and partition, a worker and
// its sidecar stopped together, and the worker alone killed, hung or
// stalled while its sidecar runs on (liveness.go: every worker attaches
// and is probed). Run.Finish checks, from the History and
// the cluster's own records, that fencing held (fenced and the raw
// recorder never saw an older epoch after a newer one, nor a write after
// the cluster expired its lease; a sidecar cut from the cluster refused
// the write the nemesis probes it with past its deadline; epochs strictly
// increase with one holder each; every acknowledged checkpoint is on every
// member) and that liveness held (every task owned or claimable within the
// reclaim bound after the last heal; a dead, hung or stalled worker's
// lease ended within its I8 bound with its reason; no lease lost, and none
// ended for a worker's death, by a worker no fault touched), and Run.Table is the recovery time by fault that the README
// reports.
//
// The tests run only when NEMESIS=1 (test/nemesis.sh sets it): they take
// minutes. Partitions need root; without it they are skipped and say so.
package nemesis
