package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// HeaderForwardedBy marks a request a follower forwarded to the leader; its
// value is the forwarding node's address. A node that receives a marked
// request and is not the leader answers 503 instead of forwarding again,
// so stale leader views cannot bounce a request around the cluster.
const HeaderForwardedBy = "X-Fencepost-Forwarded-By"

// HeaderLeader, on a response a follower relayed, names the leader's HTTP
// address, so a client that knows the leader as one of its endpoints can go
// there directly next time and save the hop. proxy/cluster declares the
// same name (it may not import this package); a test keeps them equal.
const HeaderLeader = "X-Fencepost-Leader"

// relayedHeaders are the response headers a forward copies back, besides
// the body: everything a client of this API looks at.
var relayedHeaders = []string{"Content-Type", "Retry-After", "Allow", api.HeaderRequestID}

func isNotLeader(err error) bool { return errors.Is(err, raftstore.ErrNotLeader) }

// newForwardClient builds the client that talks to the leader. fasthttp's
// own retries are off: forward decides, and re-sends only with the client's
// request id, which the leader de-duplicates.
func newForwardClient(cfg Config) *fasthttp.Client {
	var tc *tls.Config
	if cfg.TLS != nil {
		tc = cfg.TLS.ClientConfig("")
	}
	return &fasthttp.Client{
		TLSConfig:                 tc,
		Name:                      "fencepost-forward",
		NoDefaultUserAgentHeader:  true,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		ReadTimeout:               cfg.ForwardTimeout,
		WriteTimeout:              cfg.ForwardTimeout,
		MaxIdleConnDuration:       cfg.IdleTimeout / 2,
		// Task lists can be large; bound them anyway.
		MaxResponseBodySize: 64 << 20,
		// The path is relayed exactly as received: an escaped '/' in a task
		// id must stay escaped.
		DisablePathNormalizing: true,
		// A plain dialer bounded by the forward timeout: leader addresses
		// are host:port on a private network, so fasthttp's DNS-caching
		// dialer (and its background goroutine) buys nothing.
		Dial: func(addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: cfg.ForwardTimeout}
			return d.Dial("tcp", addr)
		},
	}
}

// maxForwardAttempts bounds the sends of one forward; after a failure the
// idle pool is dropped, so the next attempt dials a fresh connection.
const maxForwardAttempts = 3

// forward sends the request to the leader and relays its answer into rc.
// It returns an error (to become a problem) only when it could not relay an
// answer: no leader known, a loop, the leader unreachable, or the forward
// broken mid-request.
func (s *Server) forward(tc context.Context, rc *fasthttp.RequestCtx, rid string, who principal) error {
	if by := rc.Request.Header.Peek(HeaderForwardedBy); len(by) > 0 {
		s.metrics.forwards.WithLabelValues("loop").Inc()
		return fmt.Errorf("%w (forwarded by %s)", ErrForwardLoop, by)
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)

	// Copy what the leader needs; rc's buffers are not ours to keep.
	req.Header.SetMethodBytes(rc.Method())
	if ct := rc.Request.Header.ContentType(); len(ct) > 0 {
		req.Header.SetContentTypeBytes(ct)
	}
	req.SetBody(rc.PostBody())
	forwardTrace(tc, rc, req)
	leader, err := s.toLeader(req, resp, string(rc.Request.Header.RequestURI()), rid, who)
	if err != nil {
		return err
	}
	rc.SetStatusCode(resp.StatusCode())
	for _, h := range relayedHeaders {
		if v := resp.Header.Peek(h); len(v) > 0 {
			rc.Response.Header.SetBytesV(h, v)
		}
	}
	rc.SetBody(resp.Body()) // copies: resp goes back to the pool
	rc.Response.Header.Set(HeaderLeader, leader)
	return nil
}

// toLeader sends req (its method, body and content type set) to uri (a
// path and query) on the leader as a relay for who, under request id rid, and fills resp with the
// leader's answer; it returns the leader's address. An error means no
// answer could be relayed: no leader known, the leader unreachable, or the
// forward broken mid-request. Unary requests (forward) and streamed beats
// (stream.go) both go through it.
func (s *Server) toLeader(req *fasthttp.Request, resp *fasthttp.Response, uri, rid string, who principal) (string, error) {
	leader := s.store.LeaderHTTP()
	if leader == "" {
		s.metrics.forwards.WithLabelValues("no_leader").Inc()
		return "", fmt.Errorf("%w: no leader known", raftstore.ErrNoLeader)
	}
	req.SetRequestURI(leaderBase(leader, s.cfg.TLS != nil) + uri)
	req.URI().DisablePathNormalizing = true
	req.Header.Set(api.HeaderRequestID, rid)
	req.Header.Set(HeaderForwardedBy, s.Addr())
	if !who.dev {
		// The leader believes this only because our own certificate is a
		// member's (PermForward).
		req.Header.Set(HeaderCaller, who.id.String())
	}
	start := time.Now()
	deadline := start.Add(s.cfg.ForwardTimeout)
	var err error
	for attempt := 1; ; attempt++ {
		err = s.fwd.DoDeadline(req, resp, deadline)
		// A pooled connection to a leader process that restarted (or
		// closed it while idle) fails after the request was written. Try
		// a fresh one: re-sending is safe because the leader applies a
		// request id once, and the client's answer stays the leader's.
		if err == nil || sentBefore(err) || errors.Is(err, fasthttp.ErrTimeout) ||
			attempt >= maxForwardAttempts || !time.Now().Before(deadline) {
			break
		}
		if ce := s.log.Check(zap.DebugLevel, "forward failed on a pooled connection; retrying"); ce != nil {
			ce.Write(zap.String("rid", rid), zap.Int("attempt", attempt), zap.Error(err))
		}
		// The other idle connections to that process are dead too.
		s.fwd.CloseIdleConnections()
		resp.Reset()
	}
	if err != nil {
		if sentBefore(err) {
			s.metrics.forwards.WithLabelValues("unreachable").Inc()
			return "", fmt.Errorf("%w: %s: %v", ErrForwardFailed, leader, err)
		}
		s.metrics.forwards.WithLabelValues("broken").Inc()
		return "", fmt.Errorf("%w: %s: %v", ErrForwardBroken, leader, err)
	}
	s.metrics.forwards.WithLabelValues("ok").Inc()
	if ce := s.log.Check(zap.DebugLevel, "forwarded to leader"); ce != nil {
		ce.Write(zap.String("rid", rid), zap.String("leader", leader),
			zap.Int("status", resp.StatusCode()), zap.Duration("took", time.Since(start)))
	}
	return leader, nil
}

// leaderBase turns a leader HTTP address into a URL prefix; the store
// publishes host:port (https when the members speak TLS), but accept a
// full URL too.
func leaderBase(addr string, secure bool) string {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimSuffix(addr, "/")
	}
	if secure {
		return "https://" + addr
	}
	return "http://" + addr
}

// sentBefore reports whether err happened before the request could have
// reached the leader (it could not be dialled), so the request was
// certainly not applied.
func sentBefore(err error) bool {
	if errors.Is(err, fasthttp.ErrDialTimeout) || errors.Is(err, fasthttp.ErrNoFreeConns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
