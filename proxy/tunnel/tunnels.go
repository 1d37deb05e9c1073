package tunnel

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/proxy/conns"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/mitm"
	"github.com/fencepost/fencepost/proxy/reply"
	"github.com/fencepost/fencepost/proxy/request"
)

// Settings is what the tunnels need of the sidecar's configuration,
// defaults already applied.
type Settings struct {
	// Allow lists the targets of blind tunnels, host:port, lower-case
	// (connect.allow).
	Allow            []string
	CA               *mitm.CA // the interception CA; nil when interception is off
	DialTimeout      time.Duration
	HandshakeTimeout time.Duration // a fenced tunnel's first bytes and TLS handshake
	// NewServer returns the server that serves the inside of fenced
	// tunnels, with the proxy port's limits; its handlers are set here.
	NewServer func() *fasthttp.Server
	// OtherTCP is the policy for captured connections that are neither TLS
	// nor HTTP/1.x (capture.other_tcp).
	OtherTCP   OtherTCP
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

// Requests is what the tunnels need of the request path
// (*request.Pipeline): every request read inside a fenced tunnel is
// served by it, and a refusal is its reply.
type Requests interface {
	// Serve runs one request that came in by in through the whole path.
	Serve(ctx *fasthttp.RequestCtx, in request.Entry)
	// Expect answers an "Expect: 100-continue" of a request that came in by in.
	Expect(ctx *fasthttp.RequestCtx, in request.Entry) int
	// Refuse answers a refused request and counts it.
	Refuse(ctx *fasthttp.RequestCtx, e *reply.Reply)
	// Blocked is the refusal of a write for want of a current lease.
	Blocked(why leases.Reason, l leases.Ref, task string, write bool) *reply.Reply
	// RefuseSelfTarget refuses the cluster's API and the sidecar's ports.
	RefuseSelfTarget(host, port string) *reply.Reply
	// Originates says whether host:port is spoken to over TLS upstream.
	Originates(host, port string) bool
	// Count counts a CONNECT with its decision.
	Count(decision string)
}

// Leases is what a blind tunnel asks of the lease keeper: whether the
// task may write now, and under which lease (whose ticket the tunnel
// registers with, so the lease's end cuts it).
type Leases interface {
	Check(taskID string) (leases.Ref, leases.Reason)
}

// The kinds of CONNECT tunnel (and captured connection)
// fencepost_sidecar_tunnels_total counts.
const (
	tunnelIntercepted = "intercepted"
	tunnelHTTP        = "http"
	tunnelBlind       = "blind"
	tunnelClosed      = "closed"
)

// Tunnels serves CONNECT: blind tunnels to allow-listed targets, and
// fenced tunnels whose requests it hands to the request path.
type Tunnels struct {
	cfg      Settings
	req      Requests
	leases   Leases
	ca       *mitm.CA
	allow    map[string]bool  // blind tunnel targets, lower-case host:port
	inner    *fasthttp.Server // serves the inside of fenced tunnels
	fenced   conns.Set        // fenced tunnels' worker sides, closed by Close
	running  sync.WaitGroup   // hijacked tunnels, waited for by Wait
	inflight atomic.Int64     // CONNECT requests being answered
	tunnels  *prometheus.CounterVec
	log      *zap.Logger
}

// New builds the tunnels over the request path and the lease keeper and
// registers their metric with s.Registerer.
func New(s Settings, req Requests, l Leases) (*Tunnels, error) {
	tn := &Tunnels{cfg: s, req: req, leases: l, ca: s.CA, allow: make(map[string]bool), log: s.Logger.Named("sidecar"),
		tunnels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencepost_sidecar_tunnels_total",
			Help: "CONNECT tunnels and captured connections opened, by what they carry: intercepted (TLS the sidecar completed), http (plain HTTP), blind (connect.allow or capture.other_tcp, unfenced), closed (nothing it can fence: TLS to a host not intercepted, HTTP/2, garbage, silence, a connection to the capture listener that was not redirected).",
		}, []string{"kind"}),
	}
	for _, k := range []string{tunnelIntercepted, tunnelHTTP, tunnelBlind, tunnelClosed} {
		tn.tunnels.WithLabelValues(k)
	}
	if err := s.Registerer.Register(tn.tunnels); err != nil {
		return nil, fmt.Errorf("proxy: register metrics: %w", err)
	}
	for _, a := range s.Allow {
		tn.allow[a] = true
	}
	tn.inner = s.NewServer()
	tn.inner.Handler = tn.handleTunneled
	tn.inner.ExpectHandler = tn.expectTunneled
	tn.inner.Name = "fencepost-sidecar-tunnel"
	return tn, nil
}

// Connect serves one CONNECT request of the proxy port.
func (tn *Tunnels) Connect(ctx *fasthttp.RequestCtx) {
	tn.inflight.Add(1)
	defer tn.inflight.Add(-1)
	tn.connect(ctx)
}

// InFlight is the number of CONNECT requests being answered (not the
// tunnels they opened).
func (tn *Tunnels) InFlight() int64 { return tn.inflight.Load() }

// Close closes every fenced tunnel's worker side and refuses new ones;
// blind tunnels end with their lease or when either side closes.
func (tn *Tunnels) Close() { tn.fenced.CloseAll() }

// Wait returns when every tunnel's goroutine has returned.
func (tn *Tunnels) Wait() { tn.running.Wait() }

// ServeFenced serves c, the worker side of an accepted CONNECT to
// host:port (host lower-case, as request.SplitAuthority returns it) for
// task, as a fenced tunnel: it answers 200, and every request read inside
// goes through the request path. It returns when the tunnel ends.
func (tn *Tunnels) ServeFenced(c net.Conn, host, port, task string) {
	tn.serveFencedTunnel(c, &tunnelInfo{host: host, port: port, task: task})
}
