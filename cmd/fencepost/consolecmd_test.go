package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// An exposed console without its login token or TLS does not start: exit
// 2 and one line naming the flag to add.
func TestConsoleBeyondLoopbackNeedsTokenAndTLS(t *testing.T) {
	t.Setenv(consoleTokenEnv, "")
	code, _, errOut := runCLI(t, "console", "--listen", "0.0.0.0:0", "--cluster", "127.0.0.1:1")
	require.Equal(t, exitUsage, code, errOut)
	require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	require.Contains(t, errOut, "--listen: an address beyond loopback needs --token-file")

	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("a-token-long-enough-to-use\n"), 0o600))
	code, _, errOut = runCLI(t, "console", "--listen", "0.0.0.0:0", "--cluster", "127.0.0.1:1", "--token-file", token)
	require.Equal(t, exitUsage, code, errOut)
	require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	require.Contains(t, errOut, "needs --tls-cert and --tls-key")

	code, _, errOut = runCLI(t, "console", "--listen", "0.0.0.0:0", "--cluster", "127.0.0.1:1", "--tls-cert", token)
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "--tls-cert and --tls-key go together")

	code, _, errOut = runCLI(t, "console", "--cluster", "127.0.0.1:1", "--ca", token)
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "--ca, --cert and --key go together")
}

// A trace URL template without {trace_id}, or not an absolute http(s)
// URL, is refused by flag and by environment: exit 2, one line naming
// --trace-url and the rule.
func TestConsoleTraceURLIsChecked(t *testing.T) {
	t.Setenv(consoleTokenEnv, "")
	for _, bad := range []string{"http://127.0.0.1:16686/trace/", "/trace/{trace_id}", "ftp://h/{trace_id}"} {
		code, _, errOut := runCLI(t, "console", "--cluster", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--trace-url", bad)
		require.Equal(t, exitUsage, code, errOut)
		require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
		require.Contains(t, errOut, "--trace-url: ", errOut)
	}
	t.Setenv(consoleTraceURLEnv, "no-placeholder")
	code, _, errOut := runCLI(t, "console", "--cluster", "127.0.0.1:1", "--listen", "127.0.0.1:0")
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "--trace-url: must contain {trace_id}")
}
