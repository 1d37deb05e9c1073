//go:build fencepost_broken_fencing

package fence

// FencingDisabled is true only in the deliberately broken build: stores
// accept stale epochs, and the test suite must fail.
const FencingDisabled = true
