// Package cluster is the Go client of the lease cluster's HTTP API, used by
// the sidecar and by `fencepost ctl`.
//
// A Client knows every member's address and talks to one at a time: the
// last one that answered, or the leader an answer named. Any member will
// do, because followers forward to the leader; when a member is down, has
// no leader, or times out, the client moves on to the next, with jittered
// backoff, until the call's budget ends — and gives up at once, naming
// every member's failure, when a whole round of members left it without
// any answer (retry.go). Every logical call carries one random request id,
// reused on every attempt, which the cluster de-duplicates; that is what
// makes retrying a mutation whose outcome is unknown safe. Heartbeats have
// their own rules (hedge.go): attempts bounded by a share of the
// heartbeat's budget, hedged to a second member when slow, moved on at
// once after any failure, so a sick leader never costs a lease.
//
// Problems the cluster answers come back as *Error, which matches the lease
// sentinels with errors.Is.
package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// Defaults applied to zero Config fields.
const (
	DefaultTimeout     = 2 * time.Second
	DefaultCallTimeout = 10 * time.Second
	DefaultBackoff     = 25 * time.Millisecond
	DefaultMaxBackoff  = 500 * time.Millisecond
	DefaultDialTimeout = time.Second
	DefaultMaxConns    = 512
	// DefaultAttemptTimeout bounds one attempt of a call other than a
	// heartbeat or a watch: a member that has not answered by then is
	// passed over, so a call that no member answers fails within
	// members × DefaultAttemptTimeout instead of hanging for Timeout.
	DefaultAttemptTimeout = time.Second
	// DefaultHeartbeatAttemptShare and DefaultHeartbeatHedgeShare are the
	// shares of a heartbeat's budget (hedge.go) after which an attempt is
	// given up and after which a second member is asked beside it.
	DefaultHeartbeatAttemptShare = 0.5
	DefaultHeartbeatHedgeShare   = 0.25
)

// maxResponseBytes bounds a response body (task lists can be large).
const maxResponseBytes = 64 << 20

// Config configures a Client. Endpoints is required; every other field has
// a usable zero value.
type Config struct {
	// Endpoints are the members' HTTP addresses, "host:port" or
	// "http://host:port".
	Endpoints []string
	// Timeout bounds one attempt (default 2s), further bounded by the
	// call's context deadline and by AttemptTimeout.
	Timeout time.Duration
	// AttemptTimeout bounds one attempt of a call other than a heartbeat
	// or a watch (default 1s, at most Timeout). A watch's attempt gets
	// Timeout plus its server-side wait; a heartbeat's, a share of its
	// budget (HeartbeatAttemptShare).
	AttemptTimeout time.Duration
	// HeartbeatAttemptShare is the share of a heartbeat's budget (its
	// context's deadline, which the sidecar sets to one heartbeat
	// interval; Timeout without one) that one attempt may take before the
	// next member is tried (default 0.5). HeartbeatHedgeShare is the share
	// after which an unanswered attempt is hedged to a second member
	// (default 0.25). Both in (0, 1].
	HeartbeatAttemptShare float64
	HeartbeatHedgeShare   float64
	// CallTimeout bounds a whole call, retries included, when its context
	// has no deadline (default 10s), so a call never retries forever.
	CallTimeout time.Duration
	// Retries caps the attempts after the first; 0 means "until the
	// context (or CallTimeout) ends", negative means no retry at all.
	Retries int
	// Backoff is the pause after the first round of endpoints failed; it
	// doubles each round up to MaxBackoff, with full jitter in [½, 1].
	Backoff    time.Duration
	MaxBackoff time.Duration
	// DialTimeout bounds a TCP connect (default 1s, at most Timeout); a dead
	// member is skipped after this long.
	DialTimeout time.Duration
	// TLS, when set, makes every call HTTPS with this configuration: it
	// must verify the cluster's certificate against the cluster CA and
	// present the caller's certificate (pki.Source.ClientConfig does
	// both). Nil is plain HTTP, for a cluster on loopback only.
	TLS *tls.Config
	// MaxConnsPerEndpoint bounds the pooled connections per member.
	MaxConnsPerEndpoint int
	// HeartbeatTransport is how HeartbeatOnce reaches a member:
	// TransportStream (the default) or TransportUnary (stream.go).
	HeartbeatTransport string
	// Logger receives debug logs of retries; nil discards them.
	Logger *zap.Logger
	// Trace, when set, sees each attempt's request as it is built, with
	// the call's context: it may add headers (the sidecar's opens a client
	// span and names it in the traceparent, proxytrace.ClusterHook) and
	// returns what to call with the attempt's HTTP status (0 when none came
	// back) and transport error, or nil. Nil adds nothing.
	Trace func(ctx context.Context, req *fasthttp.Request) func(status int, err error)
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.Backoff == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = min(DefaultDialTimeout, c.Timeout)
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	c.AttemptTimeout = min(c.AttemptTimeout, c.Timeout)
	if c.HeartbeatAttemptShare == 0 {
		c.HeartbeatAttemptShare = DefaultHeartbeatAttemptShare
	}
	if c.HeartbeatHedgeShare == 0 {
		c.HeartbeatHedgeShare = DefaultHeartbeatHedgeShare
	}
	if c.MaxConnsPerEndpoint == 0 {
		c.MaxConnsPerEndpoint = DefaultMaxConns
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.HeartbeatTransport == "" {
		c.HeartbeatTransport = DefaultHeartbeatTransport
	}
	return c
}

// Validate reports the first invalid field, naming it.
func (c Config) Validate() error {
	if len(c.Endpoints) == 0 {
		return fmt.Errorf("%w: Endpoints is empty", ErrConfig)
	}
	for _, ep := range c.Endpoints {
		if _, err := normalizeEndpoint(ep, c.TLS != nil); err != nil {
			return err
		}
	}
	switch {
	case c.Timeout < 0, c.CallTimeout < 0, c.DialTimeout < 0, c.AttemptTimeout < 0:
		return fmt.Errorf("%w: Timeout, CallTimeout, DialTimeout and AttemptTimeout must not be negative", ErrConfig)
	case c.HeartbeatAttemptShare < 0, c.HeartbeatAttemptShare > 1, c.HeartbeatHedgeShare < 0, c.HeartbeatHedgeShare > 1:
		return fmt.Errorf("%w: HeartbeatAttemptShare and HeartbeatHedgeShare must be in (0, 1]", ErrConfig)
	case c.Backoff < 0, c.MaxBackoff < 0:
		return fmt.Errorf("%w: Backoff and MaxBackoff must not be negative", ErrConfig)
	case c.MaxConnsPerEndpoint < 0:
		return fmt.Errorf("%w: MaxConnsPerEndpoint must not be negative", ErrConfig)
	case c.HeartbeatTransport != "" && c.HeartbeatTransport != TransportStream && c.HeartbeatTransport != TransportUnary:
		return fmt.Errorf("%w: HeartbeatTransport must be %q or %q (got %q)", ErrConfig, TransportStream, TransportUnary, c.HeartbeatTransport)
	}
	return nil
}

// Client calls the cluster API. It is safe for concurrent use.
type Client struct {
	cfg       Config
	endpoints []string // base URLs, "http(s)://host:port"
	hc        *fasthttp.Client
	log       *zap.Logger
	// current is the index of the endpoint that answered last; calls start
	// there, so a healthy client sticks to one member.
	current atomic.Int32
	// streams are the heartbeat streams, one per endpoint (stream.go);
	// streamWG counts their readers.
	streams  []*memberStream
	streamWG sync.WaitGroup
}

// New builds a Client; it does not connect until the first call.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Client{cfg: cfg, log: cfg.Logger}
	for _, ep := range cfg.Endpoints {
		base, _ := normalizeEndpoint(ep, cfg.TLS != nil) // validated above
		c.endpoints = append(c.endpoints, base)
		c.streams = append(c.streams, &memberStream{})
	}
	dialTimeout := cfg.DialTimeout
	c.hc = &fasthttp.Client{
		Name: "fencepost-cluster-client",
		// This package decides every retry itself (retry.go): fasthttp
		// would otherwise silently repeat idempotent requests.
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		// Task ids are path-escaped; an escaped '/' must reach the server
		// as sent.
		DisablePathNormalizing: true,
		MaxConnsPerHost:        cfg.MaxConnsPerEndpoint,
		// Wait for a pooled connection rather than failing a burst.
		MaxConnWaitTimeout: cfg.Timeout,
		// Below the server's idle timeout, so the client drops a pooled
		// connection before the server does (a POST on a connection the
		// server just closed is an unknown outcome).
		MaxIdleConnDuration: 10 * time.Second,
		MaxResponseBodySize: maxResponseBytes,
		ReadTimeout:         cfg.Timeout,
		WriteTimeout:        cfg.Timeout,
		TLSConfig:           cfg.TLS,
		// A connect is bounded by the attempt's deadline too: a member
		// behind a silent partition must not hold a heartbeat attempt for
		// a whole DialTimeout.
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			if timeout <= 0 { // a zero Dialer timeout would mean none
				return nil, fasthttp.ErrDialTimeout
			}
			d := net.Dialer{Timeout: min(timeout, dialTimeout)}
			return d.Dial("tcp", addr)
		},
	}
	return c, nil
}

// Endpoints returns the normalized endpoint URLs, in configured order.
func (c *Client) Endpoints() []string { return append([]string(nil), c.endpoints...) }

// Close releases idle pooled connections and closes the heartbeat
// streams. The Client stays usable.
func (c *Client) Close() {
	c.hc.CloseIdleConnections()
	c.closeStreams()
}

type ridKey struct{}

// WithRequestID makes the calls made with ctx use rid as their request id
// instead of a fresh random one. A caller that gave up on a mutation (its
// context ended with ErrTimeout) can repeat it later with the same id and
// have its effect once.
func WithRequestID(ctx context.Context, rid string) context.Context {
	return context.WithValue(ctx, ridKey{}, rid)
}

func requestID(ctx context.Context) string {
	if rid, ok := ctx.Value(ridKey{}).(string); ok && rid != "" {
		return rid
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// mode says how a call may be retried.
type mode int

const (
	// modeRetry: a read, or a mutation the cluster de-duplicates by request
	// id (or one idempotent by nature, join and remove). Retried after any
	// failure that is not a final answer.
	modeRetry mode = iota
	// modeOnce: one attempt; another endpoint only if this one could not
	// be dialled (the request was certainly not sent).
	modeOnce
	// modeFixed: one attempt against one given endpoint (health probes).
	modeFixed
)

// request is one logical call.
type request struct {
	method   string
	path     string // escaped path plus query
	sid      string // a heartbeat's session id (the stream's beat names it)
	body     any    // JSON-encoded when not nil
	out      any    // decoded from a 2xx JSON answer when not nil
	mode     mode
	endpoint string // for modeFixed
	// wait lengthens the attempt timeout by a long-poll's server-side wait.
	wait time.Duration
}

// headerLeader is httpapi.HeaderLeader: a follower that relayed the answer
// names the leader in it.
const headerLeader = "X-Fencepost-Leader"

// attemptResult is one attempt's outcome.
type attemptResult struct {
	// leader is the leader's base URL when a follower relayed the answer.
	leader string
	err    error
	// dialFailed: the request was never sent.
	dialFailed bool
	// retry: the failure allows another attempt.
	retry bool
	// unknown: the request may have been applied (timeout, lost connection).
	unknown bool
	// skipped: the context ended before the attempt could start; nothing
	// was sent.
	skipped bool
}

// do runs one logical call with the retry rules of retry.go.
func (c *Client) do(ctx context.Context, r request) error {
	var body []byte
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return fmt.Errorf("cluster: encode %s %s: %w", r.method, r.path, err)
		}
		body = b
	}
	rid := requestID(ctx)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.CallTimeout)
		defer cancel()
	}
	if r.mode == modeFixed {
		base, err := normalizeEndpoint(r.endpoint, c.cfg.TLS != nil)
		if err != nil {
			return err
		}
		return c.attempt(ctx, base, r, rid, body).err
	}
	return c.retryLoop(ctx, r, rid, body)
}

// attempt sends the request once to the endpoint with base URL base,
// bounded by AttemptTimeout (Timeout plus the server-side wait for a
// long-poll) and the call's context.
func (c *Client) attempt(ctx context.Context, base string, r request, rid string, body []byte) attemptResult {
	limit := c.cfg.AttemptTimeout
	if r.wait > 0 {
		limit = c.cfg.Timeout + r.wait
	}
	return c.attemptUntil(ctx, base, r, rid, body, time.Now().Add(limit))
}

// attemptUntil sends the request once to base, giving up at deadline (or
// when the context's deadline comes first).
func (c *Client) attemptUntil(ctx context.Context, base string, r request, rid string, body []byte, deadline time.Time) attemptResult {
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// fasthttp answers a past deadline with ErrTimeout without sending;
	// say so here rather than report an unknown outcome.
	if err := ctx.Err(); err != nil || !time.Now().Before(deadline) {
		if err == nil {
			err = context.DeadlineExceeded
		}
		return attemptResult{err: fmt.Errorf("cluster: %s %s not sent: %w", r.method, r.path, err), skipped: true}
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(r.method)
	req.SetRequestURI(base + r.path)
	req.URI().DisablePathNormalizing = true
	req.Header.Set(api.HeaderRequestID, rid)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body) // body outlives the request: it is ours
	}
	var traced func(int, error)
	if c.cfg.Trace != nil {
		traced = c.cfg.Trace(ctx, req)
	}
	err := c.hc.DoDeadline(req, resp, deadline)
	if traced != nil {
		traced(statusOf(resp, err), err)
	}
	if err != nil {
		return transportResult(base, r, err)
	}
	var leader string
	if v := resp.Header.Peek(headerLeader); len(v) > 0 {
		leader, _ = normalizeEndpoint(string(v), c.cfg.TLS != nil)
	}
	status := resp.StatusCode()
	if status >= 200 && status < 300 {
		if r.out == nil || len(resp.Body()) == 0 {
			return attemptResult{leader: leader}
		}
		if err := decodeOut(resp.Body(), r.out); err != nil {
			return attemptResult{err: fmt.Errorf("%w: %s %s from %s: %v", ErrBadResponse, r.method, r.path, base, err)}
		}
		return attemptResult{leader: leader}
	}
	e := &Error{Status: status, Endpoint: base, Problem: decodeProblem(status, resp)}
	return attemptResult{err: e, retry: e.retryable(), unknown: e.Is(ErrTimeout), leader: leader}
}

// statusOf is the status an attempt got back, 0 when it got none.
func statusOf(resp *fasthttp.Response, err error) int {
	if err != nil {
		return 0
	}
	return resp.StatusCode()
}

// decodeProblem reads a problem body, or synthesizes one when the answer
// is not a problem (a proxy's error page, say); a bare 502/503/504 then
// still reads as unavailable or timeout.
func decodeProblem(status int, resp *fasthttp.Response) api.Problem {
	return decodeProblemParts(status, resp.Header.ContentType(), resp.Body())
}

// decodeProblemParts is decodeProblem on an answer's parts (a unary
// response's, or a heartbeat stream reply's).
func decodeProblemParts(status int, contentType, body []byte) api.Problem {
	var p api.Problem
	if bytes.HasPrefix(contentType, []byte(api.ProblemContentType)) &&
		json.Unmarshal(body, &p) == nil && p.Code != "" {
		if p.Status == 0 {
			p.Status = status
		}
		return p
	}
	p = api.Problem{Status: status, Title: http.StatusText(status), Code: fmt.Sprintf("http_%d", status)}
	switch status {
	case http.StatusServiceUnavailable:
		p.Code = api.CodeUnavailable
	case http.StatusGatewayTimeout:
		p.Code = api.CodeTimeout
	case http.StatusBadGateway:
		p.Code = api.CodeUnknownOutcome
	}
	p.Type = api.ProblemTypeBase + p.Code
	detail := body
	if len(detail) > 200 {
		detail = detail[:200]
	}
	p.Detail = string(detail)
	return p
}
