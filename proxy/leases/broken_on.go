//go:build fencepost_broken_nodeadline

package leases

// DeadlineCheckDisabled is true only in the deliberately broken build: the
// sidecar's local lease deadline never arrives, so a partitioned sidecar
// keeps forwarding writes. The test suite and the demo must fail.
const DeadlineCheckDisabled = true
