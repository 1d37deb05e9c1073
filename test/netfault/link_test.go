package netfault

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		runHelper()
		return
	}
	code := m.Run()
	RemoveBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// echoServer echoes every connection and counts what it received.
type echoServer struct {
	ln       net.Listener
	accepted atomic.Int64
	received atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func newEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						e.received.Add(int64(n))
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			_ = c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func newLink(t *testing.T, target string, opts Options) *Link {
	t.Helper()
	opts.Logf = t.Logf
	l, err := Listen(target, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads len(msg) bytes back within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// waitFor polls cond every 10ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLinkPassThrough(t *testing.T) {
	e := newEcho(t)
	l := newLink(t, e.ln.Addr().String(), Options{})
	c := dial(t, l.Addr())
	got, err := roundTrip(c, "hello", time.Second)
	require.NoError(t, err)
	require.Equal(t, "hello", got)
	// Counters are updated just after the bytes are handed on.
	waitFor(t, time.Second, "bytes counted", func() bool {
		s := l.Stats()
		return s.BytesUp == 5 && s.BytesDown == 5
	})
	s := l.Stats()
	require.Equal(t, 1, s.Accepted)
	require.Equal(t, 1, s.Active)
}

func TestLinkCutResetsLiveAndNewConnections(t *testing.T) {
	e := newEcho(t)
	l := newLink(t, e.ln.Addr().String(), Options{})
	live := dial(t, l.Addr())
	_, err := roundTrip(live, "a", time.Second)
	require.NoError(t, err)

	l.Cut()
	_, err = roundTrip(live, "b", time.Second)
	require.Error(t, err)
	require.False(t, isTimeout(err), "a cut connection fails fast, got %v", err)

	// The reset may already hit the connect, or the first exchange.
	fresh, err := net.DialTimeout("tcp", l.Addr(), time.Second)
	if err == nil {
		_, err = roundTrip(fresh, "c", time.Second)
		_ = fresh.Close()
	}
	require.Error(t, err)
	require.False(t, isTimeout(err), "a new connection is reset, got %v", err)
	require.EqualValues(t, 1, e.accepted.Load(), "the target never saw the refused connection")

	l.Restore()
	again := dial(t, l.Addr())
	got, err := roundTrip(again, "d", time.Second)
	require.NoError(t, err)
	require.Equal(t, "d", got)
	s := l.Stats()
	require.Equal(t, 1, s.Refused)
	require.GreaterOrEqual(t, s.Reset, 1)
}

func TestLinkBlackholeSwallowsSilently(t *testing.T) {
	e := newEcho(t)
	l := newLink(t, e.ln.Addr().String(), Options{})
	live := dial(t, l.Addr())
	_, err := roundTrip(live, "a", time.Second)
	require.NoError(t, err)

	l.Blackhole()
	_, err = roundTrip(live, "bb", 200*time.Millisecond)
	require.True(t, isTimeout(err), "a blackholed connection stays silent, got %v", err)

	fresh := dial(t, l.Addr())
	_, err = roundTrip(fresh, "ccc", 200*time.Millisecond)
	require.True(t, isTimeout(err), "a new connection is accepted and silent, got %v", err)
	require.EqualValues(t, 1, e.received.Load(), "nothing after the blackhole reached the target")
	require.EqualValues(t, 1, e.accepted.Load())
	waitFor(t, time.Second, "swallowed bytes counted", func() bool { return l.Stats().BytesSwallowed == 5 })

	l.Restore()
	// Blackholed connections lost bytes, so Restore resets them.
	_ = live.SetReadDeadline(time.Now().Add(time.Second))
	_, err = live.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, isTimeout(err), "restore resets a blackholed connection, got %v", err)

	again := dial(t, l.Addr())
	got, err := roundTrip(again, "d", time.Second)
	require.NoError(t, err)
	require.Equal(t, "d", got)
}

func TestLinkHoldDeliversOnRelease(t *testing.T) {
	e := newEcho(t)
	l := newLink(t, e.ln.Addr().String(), Options{})
	c := dial(t, l.Addr())
	_, err := roundTrip(c, "warm", time.Second)
	require.NoError(t, err)

	l.Hold()
	_, err = roundTrip(c, "held", 200*time.Millisecond)
	require.True(t, isTimeout(err), "held bytes are not delivered, got %v", err)
	require.EqualValues(t, 4, e.received.Load(), "the target saw nothing while held")
	require.EqualValues(t, 4, l.Stats().BytesHeld)

	l.Release()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	require.Equal(t, "held", string(buf))
	require.EqualValues(t, 0, l.Stats().BytesHeld)
}

func TestLinkHeldWriteArrivesAfterSenderLeft(t *testing.T) {
	e := newEcho(t)
	l := newLink(t, e.ln.Addr().String(), Options{})
	l.Hold()
	c := dial(t, l.Addr())
	_, err := c.Write([]byte("stale-write"))
	require.NoError(t, err)
	waitFor(t, time.Second, "bytes held", func() bool { return l.Stats().BytesHeld == 11 })
	require.NoError(t, c.Close()) // the sender gives up; the bytes are on the wire

	time.Sleep(50 * time.Millisecond) // let a wrong implementation deliver early
	require.EqualValues(t, 0, e.received.Load())
	l.Release()
	waitFor(t, time.Second, "held write delivered", func() bool { return e.received.Load() == 11 })
	waitFor(t, time.Second, "relay finished", func() bool { return l.Stats().Active == 0 })
}

func TestLinkDelay(t *testing.T) {
	e := newEcho(t)
	l := newLink(t, e.ln.Addr().String(), Options{})
	c := dial(t, l.Addr())
	l.SetDelay(150 * time.Millisecond)
	start := time.Now()
	got, err := roundTrip(c, "slow", 2*time.Second)
	require.NoError(t, err)
	require.Equal(t, "slow", got)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "delayed both ways")

	l.SetDelay(0)
	start = time.Now()
	_, err = roundTrip(c, "fast", 2*time.Second)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 150*time.Millisecond)
}

func TestLinkLossResets(t *testing.T) {
	e := newEcho(t)
	l := newLink(t, e.ln.Addr().String(), Options{})
	c := dial(t, l.Addr())
	l.SetLoss(1, 7)
	_, err := roundTrip(c, "lost", time.Second)
	require.Error(t, err)
	require.False(t, isTimeout(err), "a loss resets the connection, got %v", err)
	require.Equal(t, 1, l.Stats().LostChunks)
	require.EqualValues(t, 0, e.received.Load())

	l.SetLoss(0, 7)
	c2 := dial(t, l.Addr())
	got, err := roundTrip(c2, "ok", time.Second)
	require.NoError(t, err)
	require.Equal(t, "ok", got)
}

func TestLinkLossStalls(t *testing.T) {
	e := newEcho(t)
	l := newLink(t, e.ln.Addr().String(), Options{LossEffect: LossStall})
	c := dial(t, l.Addr())
	l.SetLoss(1, 7)
	_, err := roundTrip(c, "lost", 200*time.Millisecond)
	require.True(t, isTimeout(err), "a stalled connection stays silent, got %v", err)
	require.Equal(t, 1, l.Stats().Blackholed)
	l.SetLoss(0, 7)
	_, err = roundTrip(c, "still-lost", 200*time.Millisecond)
	require.True(t, isTimeout(err), "a stalled connection stays stalled, got %v", err)
	require.EqualValues(t, 0, e.received.Load())
}

func TestLinkLossIsRepeatableForASeed(t *testing.T) {
	e := newEcho(t)
	outcomes := func(seed int64) []bool {
		l := newLink(t, e.ln.Addr().String(), Options{})
		l.SetLoss(0.5, seed)
		var out []bool
		for i := 0; i < 12; i++ {
			c := dial(t, l.Addr())
			_, err := roundTrip(c, "x", time.Second)
			out = append(out, err == nil)
			_ = c.Close()
		}
		return out
	}
	a, b := outcomes(42), outcomes(42)
	require.Equal(t, a, b)
	require.Contains(t, a, true)
	require.Contains(t, a, false)
}

func TestLinkCloseEndsEverything(t *testing.T) {
	e := newEcho(t)
	l, err := Listen(e.ln.Addr().String(), Options{})
	require.NoError(t, err)
	c := dial(t, l.Addr())
	_, err = roundTrip(c, "a", time.Second)
	require.NoError(t, err)
	l.Hold()
	_, _ = c.Write([]byte("pending"))
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "Close is idempotent")
	_, err = net.DialTimeout("tcp", l.Addr(), 200*time.Millisecond)
	require.Error(t, err)
	// goleak in TestMain checks that no relay goroutine survived.
}
