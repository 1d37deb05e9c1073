package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/fencepost/fencepost/proxy/tunnel"
)

// Capture configures the transparent listener: where connections that
// fencepost capture's rules redirect arrive (DESIGN.md, "Closing the
// bypass"). Empty Listen: off.
type Capture struct {
	// Listen is the IPv4 loopback address of the listener, normally
	// DefaultCaptureAddr. The sidecar also listens on [::1] at the same
	// port when the host has IPv6: REDIRECT sends an IPv6 connection to
	// ::1.
	Listen string
	// OtherTCP is the policy for captured connections that are neither
	// TLS nor HTTP/1.x. Default DefaultOtherTCP.
	OtherTCP OtherTCP
}

// OtherTCP is the policy for captured non-HTTP TCP (tunnel.OtherTCP).
type OtherTCP = tunnel.OtherTCP

// The other_tcp policies (tunnel.OtherAllow, ...).
const (
	OtherAllow             = tunnel.OtherAllow
	OtherBlockWithoutLease = tunnel.OtherBlockWithoutLease
	OtherBlock             = tunnel.OtherBlock
)

// Capture defaults. 7483 follows the sidecar's port plan: 7480 proxy,
// 7481 control, 7482 metrics.
const (
	DefaultCaptureAddr = "127.0.0.1:7483"
	DefaultOtherTCP    = OtherBlockWithoutLease
)

func (c Capture) validate() error {
	if c.Listen != "" {
		if err := checkLoopback(c.Listen); err != nil {
			return fmt.Errorf("%w: capture.listen: %v", ErrInvalidConfig, err)
		}
		if ip := net.ParseIP(hostOf(c.Listen)); ip == nil || ip.To4() == nil {
			return fmt.Errorf("%w: capture.listen: must be an IPv4 loopback address (the [::1] twin is added), got %q", ErrInvalidConfig, c.Listen)
		}
	}
	if !c.OtherTCP.Valid() {
		return fmt.Errorf("%w: capture.other_tcp: must be %q, %q or %q, got %q", ErrInvalidConfig,
			OtherAllow, OtherBlockWithoutLease, OtherBlock, c.OtherTCP)
	}
	return nil
}

func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}

// listenCapture opens the transparent listeners: addr, and [::1] at the
// port it got unless the host has no IPv6.
func listenCapture(ctx context.Context, lc *net.ListenConfig, addr string) ([]net.Listener, error) {
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("proxy: listen capture.listen: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln6, err := lc.Listen(ctx, "tcp", net.JoinHostPort("::1", strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT) {
			return []net.Listener{ln}, nil
		}
		_ = ln.Close()
		return nil, fmt.Errorf("proxy: listen capture.listen on [::1]:%d: %w", port, err)
	}
	return []net.Listener{ln, ln6}, nil
}
