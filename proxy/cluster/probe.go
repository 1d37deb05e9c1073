package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// ErrSchemeMismatch reports a member that speaks TLS to a client
// configured for plain HTTP, or plain HTTP to a client configured for TLS.
// Neither can ever work, and neither says so by itself: a TLS server closes
// a plain request's connection without a byte ("the server closed
// connection before returning the first response byte"), and a plain
// server answers a TLS hello with an HTTP error page.
var ErrSchemeMismatch = errors.New("cluster: TLS and plain HTTP mismatch")

// MismatchError is the member ProbeScheme found speaking the other
// protocol. It matches ErrSchemeMismatch.
type MismatchError struct {
	// Endpoint is the member, as configured.
	Endpoint string
	// ServerTLS is true when the member speaks TLS and the client does not.
	ServerTLS bool
}

// Error says which side speaks what.
func (e *MismatchError) Error() string {
	if e.ServerTLS {
		return fmt.Sprintf("cluster member %s speaks TLS, but this client has no TLS configuration", e.Endpoint)
	}
	return fmt.Sprintf("cluster member %s speaks plain HTTP, but this client is configured for TLS", e.Endpoint)
}

// Is matches ErrSchemeMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrSchemeMismatch }

// ProbeScheme asks each endpoint, concurrently and within ctx (bound it to
// a second or two), whether it speaks the protocol the client is configured
// for (TLS when tlsCfg is set). It returns a *MismatchError for the first
// member, in configured order, that certainly speaks the other one, and nil
// otherwise — also when a member cannot be reached or does not answer in
// time: that is the retry loop's business, not a configuration mistake.
//
// With tlsCfg nil a member is asked a plain GET /healthz first, and only
// one that drops the connection without answering gets a TLS hello, whose
// server certificate is not verified: the probe only learns which protocol
// the member speaks, and nothing is sent over that connection.
func ProbeScheme(ctx context.Context, endpoints []string, tlsCfg *tls.Config) error {
	verdicts := make([]*MismatchError, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		hostport, ok := probeAddr(ep)
		if !ok {
			continue
		}
		wg.Go(func() {
			if tlsCfg == nil && speaksTLS(ctx, hostport) {
				verdicts[i] = &MismatchError{Endpoint: ep, ServerTLS: true}
			} else if tlsCfg != nil && speaksPlain(ctx, hostport, tlsCfg) {
				verdicts[i] = &MismatchError{Endpoint: ep}
			}
		})
	}
	wg.Wait()
	for _, v := range verdicts {
		if v != nil {
			return v
		}
	}
	return nil
}

// probeAddr strips a scheme from an endpoint.
func probeAddr(ep string) (string, bool) {
	ep = strings.TrimSpace(ep)
	if _, rest, ok := strings.Cut(ep, "://"); ok {
		ep = rest
	}
	ep = strings.TrimSuffix(ep, "/")
	_, _, err := net.SplitHostPort(ep)
	return ep, err == nil
}

// probeDial connects to addr within ctx, with a one-second cap.
func probeDial(ctx context.Context, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	return conn, nil
}

// speaksTLS reports whether a member that a plain client dials drops its
// plain request unanswered and completes (or alerts in) a TLS handshake.
func speaksTLS(ctx context.Context, addr string) bool {
	conn, err := probeDial(ctx, addr)
	if err != nil {
		return false
	}
	_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n")
	var first [1]byte
	n, _ := conn.Read(first[:])
	_ = conn.Close()
	if n > 0 {
		return false // it answered in plain HTTP (whatever the status)
	}
	conn, err = probeDial(ctx, addr)
	if err != nil {
		return false
	}
	defer func() { _ = conn.Close() }()
	// Not verified on purpose: only the protocol is learnt, and nothing is
	// sent over this connection.
	tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // see above
	err = tc.HandshakeContext(ctx)
	var alert tls.AlertError
	return err == nil || errors.As(err, &alert)
}

// speaksPlain reports whether a member answers the client's TLS hello with
// something that is not TLS (a plain HTTP server's error page).
func speaksPlain(ctx context.Context, addr string, cfg *tls.Config) bool {
	conn, err := probeDial(ctx, addr)
	if err != nil {
		return false
	}
	defer func() { _ = conn.Close() }()
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		host, _, _ := net.SplitHostPort(addr)
		cfg.ServerName = host
	}
	err = tls.Client(conn, cfg).HandshakeContext(ctx)
	var rh tls.RecordHeaderError
	return errors.As(err, &rh)
}
