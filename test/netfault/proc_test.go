package netfault

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const helperEnv = "NETFAULT_HELPER_ADDR"

// runHelper is the child process of the process tests: an echo server on
// the address in helperEnv that runs until killed.
func runHelper() {
	ln, err := net.Listen("tcp", os.Getenv(helperEnv))
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Println("helper ready on", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			buf := make([]byte, 1024)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				_, _ = c.Write(buf[:n])
			}
		}()
	}
}

func startHelper(t *testing.T) (*Process, string) {
	t.Helper()
	addr := FreeAddr(t)
	p, err := Start(t, ProcConfig{Name: "helper", Binary: os.Args[0], Env: []string{helperEnv + "=" + addr}})
	require.NoError(t, err)
	waitFor(t, 5*time.Second, "helper listening", func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	return p, addr
}

func TestProcessPauseResumeStop(t *testing.T) {
	p, addr := startHelper(t)
	require.Greater(t, p.PID(), 0)
	c := dial(t, addr)
	got, err := roundTrip(c, "ping", time.Second)
	require.NoError(t, err)
	require.Equal(t, "ping", got)

	require.NoError(t, p.Pause())
	_, err = roundTrip(c, "zzz", 200*time.Millisecond)
	require.True(t, isTimeout(err), "a stopped process answers nothing, got %v", err)

	require.NoError(t, p.Resume())
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 3)
	_, err = c.Read(buf)
	require.NoError(t, err, "the resumed process answers what it was sent while stopped")
	require.Equal(t, "zzz", string(buf))

	require.NoError(t, p.Stop(2*time.Second))
	require.False(t, p.Running())
	require.Contains(t, p.Logs(), "helper ready")
	require.Error(t, p.Pause(), "signalling an exited process fails")
}

func TestProcessKillWhilePaused(t *testing.T) {
	p, _ := startHelper(t)
	require.NoError(t, p.Pause())
	require.NoError(t, p.Kill())
	require.False(t, p.Running())
	require.Error(t, p.ExitErr())
}

func TestBinaryBuildsAndRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the fencepost binary; skipped with -short")
	}
	p, err := Start(t, ProcConfig{Name: "fencepost-version", Args: []string{"version"}})
	require.NoError(t, err)
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("fencepost version did not exit")
	}
	require.NoError(t, p.ExitErr(), "output: %s", p.Logs())
	require.True(t, strings.HasPrefix(p.Logs(), "fencepost "), "output: %q", p.Logs())
}

// TestFreeAddrNeverRepeats: a system asks for two dozen ports before its
// children bind any, so FreeAddr must not name a port twice. Two thousand
// random draws from its range would repeat about a hundred times.
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]int{}
	for i := range 2000 {
		a := FreeAddr(t)
		if j, dup := seen[a]; dup {
			t.Fatalf("draw %d returned %s, already returned by draw %d", i, a, j)
		}
		seen[a] = i
	}
}
