package capture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"time"
)

// Probe destinations: documentation addresses (RFC 5737, RFC 3849) that
// no network routes, so a probe that connects was redirected to this host.
var (
	ProbeIPv4 = netip.MustParseAddrPort("192.0.2.1:80")
	ProbeIPv6 = netip.MustParseAddrPort("[2001:db8::1]:80")
)

// Verdict is what a probe connection found.
type Verdict string

// The verdicts.
const (
	// Redirected: the probe reached a listener on this host — the capture
	// listener, since nothing else answers for a documentation address.
	Redirected Verdict = "redirected"
	// RedirectedRefused: the probe was redirected but nothing listens on
	// the capture port: captured connections are refused (fail closed),
	// and the sidecar is down or its capture listener is off.
	RedirectedRefused Verdict = "redirected-refused"
	// NotRedirected: the probe left the host (or found no route): a
	// worker's direct connection would bypass the sidecar.
	NotRedirected Verdict = "not-redirected"
)

// ProbeResult is one probe's outcome.
type ProbeResult struct {
	Target  netip.AddrPort
	Verdict Verdict
	// Detail is the dial error, when there was one.
	Detail string
}

// String is one line for fencepost capture --check.
func (r ProbeResult) String() string {
	switch r.Verdict {
	case Redirected:
		return fmt.Sprintf("%s: redirected to the capture listener", r.Target)
	case RedirectedRefused:
		return fmt.Sprintf("%s: redirected, but refused: nothing listens on the capture port (the sidecar is down or capture.listen is off); captured connections fail closed", r.Target)
	}
	return fmt.Sprintf("%s: NOT redirected (%s): a direct connection bypasses the sidecar", r.Target, r.Detail)
}

// Probe dials target as uid (when uid >= 0 and this process is root; -1
// dials as this process), from inside t.Netns when set, and classifies the
// outcome.
func (t Tables) Probe(ctx context.Context, target netip.AddrPort, uid int, timeout time.Duration) ProbeResult {
	c, err := DialAs(ctx, t.Netns, uid, "tcp", target.String(), timeout)
	res := ProbeResult{Target: target, Verdict: NotRedirected}
	switch {
	case err == nil:
		_ = c.Close()
		res.Verdict = Redirected
	case errors.Is(err, syscall.ECONNREFUSED):
		res.Verdict = RedirectedRefused
	default:
		res.Detail = err.Error()
	}
	return res
}

// DialAs dials addr as uid (when uid >= 0; the process must be root) from
// inside the named network namespace (when netns is set). The owner match
// of the rules sees the credentials of the thread that created the
// socket, so the dial runs on a locked OS thread whose credentials alone
// are changed; that thread is never handed back to the Go scheduler and
// ends with the dial. The connection itself may be used from anywhere.
func DialAs(ctx context.Context, netns string, uid int, network, addr string, timeout time.Duration) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread's creds may differ
		if netns != "" {
			if err := threadSetns(netns); err != nil {
				ch <- result{err: err}
				return
			}
		}
		if uid >= 0 {
			if err := threadSetUID(uid); err != nil {
				ch <- result{err: err}
				return
			}
		}
		d := net.Dialer{Timeout: timeout}
		c, err := d.DialContext(ctx, network, addr)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.conn, r.err
}
