package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunCaptureUIDNeedsCapture(t *testing.T) {
	code, _, errOut := runCLI(t, "run", "--cluster", "127.0.0.1:1", "--capture-uid", "5000", "--", "true")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--capture-uid applies only with --capture")
	require.Equal(t, 1, strings.Count(errOut, "\n"))
}

// Without root --capture is refused first; as root a uid the rules could
// not tell from the sidecar's is. Either way: one line, exit 2, before
// anything is installed or started (the end-to-end test in test/capture
// covers a real captured run).
func TestRunCaptureRefusedBeforeItStarts(t *testing.T) {
	args := []string{"run", "--cluster", "127.0.0.1:1", "--proxy-addr", freeAddrTB(t), "--control-addr", freeAddrTB(t), "--capture"}
	if os.Geteuid() != 0 {
		code, _, errOut := runCLI(t, append(args, "--", "true")...)
		require.Equal(t, exitUsage, code, errOut)
		require.Contains(t, errOut, "--capture: capture: not privileged: needs root")
		require.Equal(t, 1, strings.Count(errOut, "\n"))
		return
	}
	for _, uid := range []string{"0", "1337"} {
		code, _, errOut := runCLI(t, append(args, "--capture-uid", uid, "--", "true")...)
		require.Equal(t, exitUsage, code, errOut)
		require.Contains(t, errOut, "--capture-uid", errOut)
		require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	}
}
