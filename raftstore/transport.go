package raftstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/pki"
)

// DialFunc dials a raft peer. Addresses may be DNS names: the default
// dialer resolves them at every dial, so a member recreated under a new IP
// with the same name is reached at its new address.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// handshakeTimeout bounds a TLS handshake on the raft port, so a stranger
// that connects and says nothing holds a goroutine this long at most.
const handshakeTimeout = 10 * time.Second

// Reasons a raft connection or RPC is refused (the label of
// fencepost_raft_refused_total).
const (
	refusedHandshake = "handshake"   // no, bad, expired or foreign-CA certificate; plaintext to TLS
	refusedRole      = "role"        // a certificate of another role than member
	refusedClaim     = "claim"       // an RPC claiming another member id than the certificate
	refusedTLSClient = "tls_client"  // a TLS client on a plaintext raft port
	refusedMalformed = "malformed"   // an RPC that does not decode
	refusedUnknown   = "unknown_rpc" // an RPC type raft does not have
	refusedRevoked   = "revoked"     // a certificate on the revocation list (tls.crl_file)
	refusedNotMember = "not_member"  // a member certificate for a server not in the configuration
	refusedRemoved   = "removed"     // a member certificate for a removed member (the deny list)
)

// allowFunc is the membership rule a member certificate's name must pass
// on every RPC (Store.peerAllowed): "" and nil, or the refusal's reason
// label and error.
type allowFunc func(name string) (reason string, err error)

// streamLayer is raft's network: a TCP listener plus a dialer, with mutual
// TLS when a certificate Source is configured. Connections are accepted
// and handshaken in the background, so a slow or hostile peer never stalls
// raft's accept loop (which backs off after an error); only connections
// from a member certificate reach raft, each guarded so every RPC's claimed
// sender must be the member its certificate names (guard.go).
type streamLayer struct {
	ln     net.Listener
	adv    net.Addr
	dial   DialFunc
	src    *pki.Source
	server *tls.Config
	client func(addr string) *tls.Config
	allow  allowFunc
	log    *zap.Logger

	refused *prometheus.CounterVec
	conns   chan net.Conn
	closed  chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// advAddr is an advertised address, which may be a DNS name.
type advAddr string

func (a advAddr) Network() string { return "tcp" }
func (a advAddr) String() string  { return string(a) }

// newStreamLayer listens on bind and advertises adv (the bound address
// when empty). With src nil the layer is plain TCP.
// With TLS, allow is asked about the sender of every RPC (nil allows any
// member certificate).
func newStreamLayer(bind, adv string, src *pki.Source, expect func(addr string) string, allow allowFunc, dial DialFunc, log *zap.Logger) (*streamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	l := &streamLayer{ln: ln, dial: dial, allow: allow, log: log, conns: make(chan net.Conn), closed: make(chan struct{}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "raft", Name: "refused_total",
			Help: "Raft connections and RPCs refused, by reason (handshake, role, claim, tls_client, malformed, unknown_rpc, revoked, not_member, removed)."},
			[]string{"reason"}),
	}
	if l.allow == nil {
		l.allow = func(string) (string, error) { return "", nil }
	}
	for _, r := range []string{refusedHandshake, refusedRole, refusedClaim, refusedTLSClient, refusedMalformed, refusedUnknown,
		refusedRevoked, refusedNotMember, refusedRemoved} {
		l.refused.WithLabelValues(r)
	}
	if l.dial == nil {
		d := &net.Dialer{}
		l.dial = d.DialContext
	}
	l.adv = ln.Addr()
	if adv != "" {
		l.adv = advAddr(adv)
	}
	if src != nil {
		l.src = src
		l.server, l.client = src.MemberConfigs(expect)
	}
	l.wg.Add(1)
	go func() { defer l.wg.Done(); l.acceptLoop() }()
	return l, nil
}

func (l *streamLayer) acceptLoop() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			l.log.Warn("raft accept failed", zap.Error(err))
			select {
			case <-l.closed:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		l.wg.Add(1)
		go func() { defer l.wg.Done(); l.admit(c) }()
	}
}

// admit handshakes c and hands it to raft, or refuses it.
func (l *streamLayer) admit(c net.Conn) {
	var conn net.Conn
	if l.server == nil {
		conn = &plainGuard{Conn: c, refuse: l.refuse}
	} else {
		tc := tls.Server(c, l.server)
		_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
		err := tc.Handshake()
		if err != nil {
			reason := refusedHandshake
			switch {
			case errors.Is(err, pki.ErrWrongRole):
				reason = refusedRole
			case errors.Is(err, pki.ErrRevoked):
				reason = refusedRevoked
			}
			l.refuse(c.RemoteAddr(), reason, err)
			_ = c.Close()
			return
		}
		_ = tc.SetDeadline(time.Time{})
		cs := tc.ConnectionState()
		id, _ := pki.IdentityFromState(&cs) // the handshake verified it
		conn = newGuard(tc, id.Name, l.allow, l.refuse)
	}
	select {
	case l.conns <- conn:
	case <-l.closed:
		_ = c.Close()
	}
}

// refuse logs and counts a refused connection or RPC.
func (l *streamLayer) refuse(from net.Addr, reason string, err error) {
	l.refused.WithLabelValues(reason).Inc()
	l.log.Warn("raft peer refused", zap.String("from", from.String()), zap.String("reason", reason), zap.Error(err))
}

// Accept implements net.Listener for raft: the next admitted connection.
func (l *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections already handed to raft are raft's.
func (l *streamLayer) Close() error {
	var err error
	l.once.Do(func() {
		close(l.closed)
		err = l.ln.Close()
	})
	return err
}

// wait returns once every accept goroutine has ended (after Close).
func (l *streamLayer) wait() { l.wg.Wait() }

// Addr is the advertised address (raft's LocalAddr).
func (l *streamLayer) Addr() net.Addr { return l.adv }

// Dial implements raft.StreamLayer: the address is resolved now (names
// are not cached), and with TLS the peer must present a member certificate
// naming the member configured at that address.
func (l *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := l.dial(ctx, "tcp", string(address))
	if err != nil {
		return nil, err
	}
	if l.client == nil {
		return c, nil
	}
	tc := tls.Client(c, l.client(string(address)))
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		reason := refusedHandshake
		switch {
		case errors.Is(err, pki.ErrWrongRole):
			reason = refusedRole
		case errors.Is(err, pki.ErrWrongName):
			reason = refusedClaim
		case errors.Is(err, pki.ErrRevoked):
			reason = refusedRevoked
		}
		l.refuse(c.RemoteAddr(), reason, fmt.Errorf("dialing %s: %w", address, err))
		return nil, err
	}
	return tc, nil
}

// prove checks that addr answers as member id: with TLS, a handshake whose
// peer presents a member certificate naming id; in plaintext, only that
// something accepts a connection there (all plaintext can show).
func (l *streamLayer) prove(ctx context.Context, addr, id string) error {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	c, err := l.dial(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("nothing answers at its raft address: %w", err)
	}
	defer c.Close()
	if l.src == nil {
		return nil
	}
	_, client := l.src.MemberConfigs(func(string) string { return id })
	if err := tls.Client(c, client(addr)).HandshakeContext(ctx); err != nil {
		return fmt.Errorf("its raft address does not prove member %q: %w", id, err)
	}
	return nil
}
