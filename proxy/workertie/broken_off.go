//go:build !fencepost_broken_workerdeath

package workertie

// DeathIgnored is true only in the deliberately broken build
// (-tags fencepost_broken_workerdeath): the sidecar ignores its worker's
// death — a child's exit, an attach stream's close, a failed probe — and
// keeps its leases. The tie's tests and the nemesis's worker faults must
// fail.
const DeathIgnored = false
