//go:build !fencepost_broken_nodeadline

package leases

// DeadlineCheckDisabled is false in every real build. The deliberately
// broken build (-tags fencepost_broken_nodeadline) sets it, so the suite
// and `fencepost demo` can show they fail when the sidecar stops honouring
// its local deadline.
const DeadlineCheckDisabled = false
