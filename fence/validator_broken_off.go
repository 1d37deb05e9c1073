//go:build !fencepost_broken_fencing

package fence

// FencingDisabled is false in every real build. The deliberately broken
// build (go test -tags fencepost_broken_fencing) sets it to true, which
// makes the stores accept stale epochs; the test suite must then fail,
// proving it would catch a missing fence (DESIGN.md section 10).
const FencingDisabled = false
