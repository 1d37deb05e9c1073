package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence"
)

// newProxyServer builds the forward proxy's server. Names and paths are
// not normalised (DisableHeaderNamesNormalizing), bodies and header
// blocks are bounded, and reading a request is bounded in time.
func (s *Sidecar) newProxyServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                       s.handleProxy,
		ErrorHandler:                  s.handleProxyError,
		ExpectHandler:                 s.expectProxy,
		Name:                          "fencepost-sidecar",
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		NoDefaultDate:                 true,
		DisableHeaderNamesNormalizing: true,
		DisablePreParseMultipartForm:  true,
		ReadBufferSize:                s.cfg.MaxHeaderBytes,
		MaxRequestBodySize:            s.cfg.MaxRequestBody,
		ReadTimeout:                   s.cfg.ReadTimeout,
		IdleTimeout:                   s.cfg.IdleTimeout,
		CloseOnShutdown:               true,
		Logger:                        fastLogger{s.log},
	}
}

// handleProxyError answers requests fasthttp could not parse.
func (s *Sidecar) handleProxyError(ctx *fasthttp.RequestCtx, err error) {
	s.metrics.requests.WithLabelValues(decisionRejected).Inc()
	var sizeErr *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.As(err, &sizeErr):
		writeProblem(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, CodeHeaderTooLarge,
			"request header too large", fmt.Sprintf("the header block exceeds %d bytes", s.cfg.MaxHeaderBytes), 0)
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		writeProblem(ctx, fasthttp.StatusRequestEntityTooLarge, CodeTooLarge,
			"request body too large", fmt.Sprintf("the body exceeds %d bytes", s.cfg.MaxRequestBody), 0)
	case errors.As(err, &netErr) && netErr.Timeout():
		writeProblem(ctx, fasthttp.StatusRequestTimeout, CodeRequestTimeout,
			"request not received in time", fmt.Sprintf("the whole request must arrive within %v", s.cfg.ReadTimeout), 0)
	default:
		writeProblem(ctx, fasthttp.StatusBadRequest, CodeBadRequest, "malformed request", err.Error(), 0)
	}
	ctx.SetConnectionClose()
}

// decision is what the checks before forwarding concluded.
type decision struct {
	scan   reqScan
	tgt    target
	tls    *tls.Config
	write  bool
	task   string
	lease  leaseSnap
	leased bool // lease is current: the request will be stamped
}

// errReply is a refusal with its problem.
type errReply struct {
	status  int
	code    string
	title   string
	detail  string
	epoch   uint64
	blocked bool   // for want of a lease (else rejected as bad input)
	why     reason // when blocked
}

// decide runs every check that needs only the request line and headers:
// form, host, task selection, classification and the lease. It is shared
// by the handler and the 100-continue hook, so a write is refused before
// its body is uploaded.
func (s *Sidecar) decide(ctx *fasthttp.RequestCtx) (decision, *errReply) {
	var d decision
	d.scan = scanRequest(&ctx.Request.Header)
	if d.scan.hasCL > 1 || (d.scan.hasCL > 0 && d.scan.hasTE) {
		return d, &errReply{status: 400, code: CodeBadRequest, title: "ambiguous message framing",
			detail: "a request may carry one Content-Length, or Transfer-Encoding, not both or several"}
	}
	if d.scan.upgrade {
		return d, &errReply{status: fasthttp.StatusNotImplemented, code: CodeUpgrade, title: "protocol upgrade not supported",
			detail: "the sidecar forwards HTTP/1.1 only; Upgrade (WebSocket, h2c) cannot be fenced. Use CONNECT to an allow-listed host"}
	}
	tgt, tlsCfg, err := s.parseTarget(ctx)
	if err != nil {
		return d, err
	}
	if e := s.refuseSelfTarget(splitHostPortOrEmpty(tgt.hostPort)); e != nil {
		return d, e
	}
	d.tgt, d.tls = tgt, tlsCfg
	task, serr := selectedTask(&d.scan)
	if serr != nil {
		return d, &errReply{status: 400, code: CodeBadRequest, title: "bad task selection", detail: serr.Error()}
	}
	d.task = task
	d.write = isWrite(s.rules, string(ctx.Method()), tgt)
	l, why := s.leases.current(task, s.clock.Now())
	if why == "" {
		d.lease, d.leased = l, true
		return d, nil
	}
	if d.write || s.cfg.ReadsWithoutLease == ReadsBlock {
		return d, blockedReply(why, l, task, d.write)
	}
	return d, nil
}

func blockedReply(why reason, l leaseSnap, task string, write bool) *errReply {
	code, title := why.problem()
	what := "write"
	if !write {
		what = "read (reads without a lease are blocked by policy)"
	}
	name := l.TaskID
	if name == "" {
		name = task
	}
	detail := fmt.Sprintf("the sidecar holds no current lease for task %q, so this %s was not sent", name, what)
	if name == "" {
		detail = fmt.Sprintf("the sidecar holds no current lease, so this %s was not sent", what)
	}
	if why == reasonAmbig {
		detail = "name the task with the proxy user name (http://<taskId>@host:port) or the " + HeaderTaskSelect + " header"
	}
	return &errReply{status: fasthttp.StatusConflict, code: code, title: title, detail: detail,
		epoch: l.Epoch, blocked: true, why: why}
}

// parseTarget accepts absolute-form http:// requests only and validates
// the host.
func (s *Sidecar) parseTarget(ctx *fasthttp.RequestCtx) (target, *tls.Config, *errReply) {
	raw := ctx.Request.Header.RequestURI()
	if !hasPrefixFold(raw, "http://") {
		detail := "this port is an HTTP forward proxy: send absolute-form requests (set HTTP_PROXY=http://127.0.0.1:PORT)"
		if hasPrefixFold(raw, "https://") {
			detail = "https:// cannot be fenced in absolute form: call http://host and configure tls.originate for it"
		}
		return target{}, nil, &errReply{status: 400, code: CodeNotProxyRequest, title: "not a proxy request", detail: detail}
	}
	rest := raw[len("http://"):]
	end := bytes.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	// The authority and the raw path are adjacent in the request line:
	// one string holds both, so a request costs one allocation for them.
	pathEnd := end
	if p := rest[end:]; len(p) > 0 && p[0] == '/' {
		pathEnd = len(rest)
		if q := bytes.IndexAny(p, "?#"); q >= 0 {
			pathEnd = end + q
		}
	}
	both := string(rest[:pathEnd])
	authority := both[:end]
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:] // user info goes upstream as Authorization
	}
	host, port, err := splitAuthority(authority)
	if err != nil {
		return target{}, nil, &errReply{status: 400, code: CodeBadRequest, title: "invalid host", detail: err.Error()}
	}
	t := target{host: host, rawPath: "/"}
	if pathEnd > end {
		t.rawPath = both[end:]
	}
	// The normalised path is usually the raw one: share its string.
	if np := ctx.Request.URI().Path(); string(np) == t.rawPath {
		t.normPath = t.rawPath
	} else {
		t.normPath = string(np)
	}
	tlsCfg := s.up.origins.lookup(host, port)
	if port == "" {
		port = "80"
		if tlsCfg != nil {
			port = "443"
		}
	}
	if len(authority) == len(host)+1+len(port) && authority[:len(host)] == host && authority[len(host)] == ':' && authority[len(host)+1:] == port {
		t.hostPort = authority // already host:port, lower-case: no second string
	} else {
		t.hostPort = net.JoinHostPort(host, port)
	}
	return t, tlsCfg, nil
}

// splitAuthority validates host[:port] and lower-cases the host.
func splitAuthority(a string) (host, port string, err error) {
	if a == "" {
		return "", "", errors.New("missing host")
	}
	host = a
	if strings.HasPrefix(a, "[") {
		i := strings.IndexByte(a, ']')
		if i < 0 {
			return "", "", fmt.Errorf("bad IPv6 literal %q", a)
		}
		host = a[:i+1]
		if ip := net.ParseIP(a[1:i]); ip == nil {
			return "", "", fmt.Errorf("bad IPv6 literal %q", a)
		}
		if rest := a[i+1:]; rest != "" {
			if rest[0] != ':' {
				return "", "", fmt.Errorf("bad authority %q", a)
			}
			port = rest[1:]
		}
	} else if i := strings.LastIndexByte(a, ':'); i >= 0 {
		host, port = a[:i], a[i+1:]
	}
	if !strings.HasPrefix(host, "[") {
		if host == "" || len(host) > 253 {
			return "", "", fmt.Errorf("bad host %q", a)
		}
		for i := 0; i < len(host); i++ {
			c := host[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
				return "", "", fmt.Errorf("bad host %q", a)
			}
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '+' {
			return "", "", fmt.Errorf("bad port in %q", a)
		}
	}
	return strings.ToLower(host), port, nil
}

// refuse answers a refused request and counts it.
func (s *Sidecar) refuse(ctx *fasthttp.RequestCtx, e *errReply) {
	if e.blocked {
		s.metrics.requests.WithLabelValues(decisionBlocked).Inc()
		s.metrics.writesBlocked.WithLabelValues(string(e.why)).Inc()
		if ce := s.log.Check(zap.InfoLevel, "request blocked"); ce != nil {
			ce.Write(zap.String("reason", string(e.why)), zap.ByteString("method", ctx.Method()), zap.Uint64("epoch", e.epoch))
		}
	} else {
		s.metrics.requests.WithLabelValues(decisionRejected).Inc()
	}
	writeProblem(ctx, e.status, e.code, e.title, e.detail, e.epoch)
}

// expectProxy refuses an "Expect: 100-continue" request before its body
// is uploaded when it would be refused anyway.
func (s *Sidecar) expectProxy(ctx *fasthttp.RequestCtx) int {
	if ctx.IsConnect() {
		return fasthttp.StatusContinue
	}
	if _, e := s.decide(ctx); e != nil {
		s.refuse(ctx, e)
		return e.status
	}
	return fasthttp.StatusContinue
}

// handleProxy serves one request on the proxy port.
func (s *Sidecar) handleProxy(ctx *fasthttp.RequestCtx) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	if ctx.IsConnect() {
		s.handleConnect(ctx)
		return
	}
	d, e := s.decide(ctx)
	if e != nil {
		s.refuse(ctx, e)
		return
	}
	req := fasthttp.AcquireRequest()
	if e := s.buildRequest(ctx, req, &d); e != nil {
		fasthttp.ReleaseRequest(req)
		s.refuse(ctx, e)
		return
	}
	if d.write && d.leased && s.journal != nil && s.journaled(string(ctx.Method()), d.tgt) {
		s.forwardJournaled(ctx, req, &d)
		return
	}
	s.forward(ctx, req, &d)
}

// buildRequest writes the upstream request: target URL, forwardable
// headers, body, and for a current lease one set of fencing headers and
// (for writes) the Idempotency-Key. The lease is checked again here,
// immediately before the send.
func (s *Sidecar) buildRequest(ctx *fasthttp.RequestCtx, req *fasthttp.Request, d *decision) *errReply {
	req.Header.DisableNormalizing()
	req.Header.SetNoDefaultContentType(true)
	req.Header.SetMethodBytes(ctx.Method())
	copyRequestHeaders(&req.Header, &ctx.Request.Header, &d.scan)
	scheme := "http://"
	if d.tls != nil {
		scheme = "https://"
	}
	raw := ctx.Request.Header.RequestURI()
	rest := raw[len("http://"):]
	if i := bytes.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	req.SetRequestURI(scheme + string(rest))
	req.UseHostHeader = true
	req.Header.SetHostBytes(ctx.Request.URI().Host())
	req.SetBodyRaw(ctx.Request.Body())
	if len(d.scan.idemKey) > 1 {
		return &errReply{status: 400, code: CodeBadRequest, title: "bad idempotency key", detail: "repeated Idempotency-Key"}
	}
	if len(d.scan.idemKey) == 1 {
		// The worker's own key always passes unchanged (validated below
		// for writes, which depend on it).
		req.Header.Set(fence.HeaderIdempotencyKey, d.scan.idemKey[0])
	}
	if !d.leased {
		return nil
	}
	// Re-check: the lease may have ended while the body was read.
	l, why := s.leases.current(d.lease.TaskID, s.clock.Now())
	if why != "" || l.Epoch != d.lease.Epoch {
		if d.write || s.cfg.ReadsWithoutLease == ReadsBlock {
			if why == "" {
				why = reasonLost
			}
			return blockedReply(why, l, d.task, d.write)
		}
		d.leased = false
		return nil
	}
	d.lease = l
	stamp(&req.Header, l, s.cfg.WorkerID)
	s.limitSignature(&req.Header, d.tgt.hostPort)
	if d.write {
		key, ok, err := s.idempotencyKey(&d.scan, l)
		if err != nil {
			return &errReply{status: 400, code: CodeBadRequest, title: "bad idempotency key", detail: err.Error()}
		}
		if !ok {
			return blockedReply(reasonLost, l, d.task, true)
		}
		req.Header.Set(fence.HeaderIdempotencyKey, key)
	}
	return nil
}

// smallBody is the largest response body (with a Content-Length) the
// handler reads itself instead of handing fasthttp a relay to stream
// after the handler returns. Most tool-call answers are this small; for
// them the relay's allocation, the server's stream copy and holding the
// upstream connection until the worker has the reply cost more than
// the copy through a stack buffer.
const smallBody = 4 << 10

// smallBufs holds the read buffers of forwardSmall (a stack array would
// escape through the io.Reader call).
var smallBufs = sync.Pool{New: func() any { return new([smallBody]byte) }}

// forward sends req and relays the response, streaming its body unless
// it is small.
func (s *Sidecar) forward(ctx *fasthttp.RequestCtx, req *fasthttp.Request, d *decision) {
	client, latency := s.up.shared, s.metrics.upstreamRead
	var gen *generation // a write's generation: its relay stops when it is cut
	if d.write {
		client, latency, gen = s.up.writeClient(d.lease.gen), s.metrics.upstreamWrite, d.lease.gen
	}
	resp := fasthttp.AcquireResponse()
	if ctx.IsHead() {
		resp.SkipBody = true
	}
	start := time.Now()
	err := client.Do(req, resp)
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		fasthttp.ReleaseRequest(req)
		s.upstreamFailed(ctx, d, err)
		return
	}
	latency.Observe(time.Since(start).Seconds())
	s.metrics.forwarded.Inc()
	status := resp.StatusCode()
	size := resp.Header.ContentLength()
	bs := resp.BodyStream()
	if bs != nil && size >= 0 && size <= smallBody && (s.cfg.MaxResponseBody <= 0 || int64(size) <= s.cfg.MaxResponseBody) &&
		!ctx.IsHead() && status >= 200 && status != 204 && status != 304 {
		s.forwardSmall(ctx, req, resp, d, gen, bs, size)
		return
	}
	ctx.Response.Header.DisableNormalizing()
	ctx.Response.Header.SetNoDefaultContentType(true)
	ctx.SetStatusCode(status)
	copyResponseHeaders(&ctx.Response.Header, &resp.Header)
	if ctx.IsHead() || status < 200 || status == 204 || status == 304 {
		if ctx.IsHead() && size >= 0 {
			ctx.Response.Header.SetContentLength(size)
		}
		ctx.Response.SkipBody = true
		_ = resp.CloseBodyStream()
		fasthttp.ReleaseResponse(resp)
		fasthttp.ReleaseRequest(req)
		return
	}
	if bs != nil {
		if size < 0 {
			size = -1 // chunked or until close: relay chunked, flushing each piece
		}
		// The relay outlives the handler; drop the request's reference to
		// the worker's body buffer, which fasthttp reuses.
		req.ResetBody()
		s.inflight.Add(1)
		r := &relay{s: s, r: bs, resp: resp, req: req, max: s.cfg.MaxResponseBody, gen: gen}
		ctx.SetBodyStream(r, size)
		return
	}
	ctx.SetBody(resp.Body())
	fasthttp.ReleaseResponse(resp)
	fasthttp.ReleaseRequest(req)
}

// forwardSmall reads a small body with a known length in the handler,
// with the relay's checks (a write's cut generation stops it), returns
// the upstream connection to the pool and answers from a buffer. A body
// that cannot be read in full is a 502 problem rather than a reply cut
// off after its header, since nothing has been sent to the worker yet.
func (s *Sidecar) forwardSmall(ctx *fasthttp.RequestCtx, req *fasthttp.Request, resp *fasthttp.Response, d *decision, gen *generation, bs io.Reader, size int) {
	bp := smallBufs.Get().(*[smallBody]byte)
	defer smallBufs.Put(bp)
	r := relay{r: bs, gen: gen}
	n, err := readFull(&r, bp[:size])
	if err != nil {
		_ = resp.CloseBodyStream()
		fasthttp.ReleaseResponse(resp)
		fasthttp.ReleaseRequest(req)
		s.bodyFailed(ctx, d, err)
		return
	}
	_ = resp.CloseBodyStream()
	ctx.Response.Header.DisableNormalizing()
	ctx.Response.Header.SetNoDefaultContentType(true)
	ctx.SetStatusCode(resp.StatusCode())
	copyResponseHeaders(&ctx.Response.Header, &resp.Header)
	ctx.SetBody(bp[:n])
	fasthttp.ReleaseResponse(resp)
	fasthttp.ReleaseRequest(req)
}

// readFull is io.ReadFull without the interface call that would move
// the relay to the heap.
func readFull(r *relay, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			if n == len(p) {
				return n, nil
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}

// bodyFailed answers a response body that could not be read before
// anything was sent to the worker. The request did go upstream, so a cut
// lease is "lost mid-flight", never "not sent".
func (s *Sidecar) bodyFailed(ctx *fasthttp.RequestCtx, d *decision, err error) {
	if ce := s.log.Check(zap.InfoLevel, "upstream body failed"); ce != nil {
		ce.Write(zap.String("host", d.tgt.hostPort), zap.Bool("write", d.write), zap.Error(err))
	}
	var netErr net.Error
	switch {
	case d.write && d.lease.gen != nil && d.lease.gen.isCut():
		writeProblem(ctx, fasthttp.StatusBadGateway, CodeLeaseLostMid, "lease lost while the write was in flight",
			"the upstream connection was closed when the lease stopped being current; the outcome is unknown, retry with the same Idempotency-Key under a new lease", d.lease.Epoch)
	case errors.As(err, &netErr) && netErr.Timeout():
		writeProblem(ctx, fasthttp.StatusGatewayTimeout, CodeUpstreamTimeout, "upstream timed out",
			fmt.Sprintf("%s made no progress for %v", d.tgt.hostPort, s.cfg.UpstreamTimeout), 0)
	default:
		writeProblem(ctx, fasthttp.StatusBadGateway, CodeUpstreamError, "upstream response cut short",
			fmt.Sprintf("%s: %v", d.tgt.hostPort, err), 0)
	}
}

func (s *Sidecar) upstreamFailed(ctx *fasthttp.RequestCtx, d *decision, err error) {
	if errors.Is(err, errLeaseCut) {
		s.metrics.requests.WithLabelValues(decisionBlocked).Inc()
		s.metrics.writesBlocked.WithLabelValues(string(reasonExpired)).Inc()
	} else {
		s.metrics.forwarded.Inc()
	}
	if ce := s.log.Check(zap.InfoLevel, "upstream failed"); ce != nil {
		ce.Write(zap.String("host", d.tgt.hostPort), zap.Bool("write", d.write), zap.Error(err))
	}
	var netErr net.Error
	switch {
	case errors.Is(err, errLeaseCut):
		writeProblem(ctx, fasthttp.StatusConflict, CodeLeaseExpired, "lease expired: write blocked",
			"the lease stopped being current before the write was sent; the upstream received no complete request", d.lease.Epoch)
	case d.write && d.lease.gen != nil && d.lease.gen.isCut():
		writeProblem(ctx, fasthttp.StatusBadGateway, CodeLeaseLostMid, "lease lost while the write was in flight",
			"the upstream connection was closed when the lease stopped being current; the outcome is unknown, retry with the same Idempotency-Key under a new lease", d.lease.Epoch)
	case errors.Is(err, fasthttp.ErrTimeout), errors.As(err, &netErr) && netErr.Timeout():
		writeProblem(ctx, fasthttp.StatusGatewayTimeout, CodeUpstreamTimeout, "upstream timed out",
			fmt.Sprintf("%s made no progress for %v", d.tgt.hostPort, s.cfg.UpstreamTimeout), 0)
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		writeProblem(ctx, fasthttp.StatusBadGateway, CodeTooLarge, "upstream response too large",
			fmt.Sprintf("the response exceeds %d bytes", s.cfg.MaxResponseBody), 0)
	default:
		writeProblem(ctx, fasthttp.StatusBadGateway, CodeUpstreamError, "upstream request failed",
			fmt.Sprintf("%s: %v", d.tgt.hostPort, err), 0)
	}
}

// relay streams an upstream response body to the worker. fasthttp reads
// it after the handler returns, so it owns the upstream request and
// response until Close. It stops at MaxResponseBody, and a write's relay
// stops when its lease generation is cut.
type relay struct {
	s    *Sidecar
	r    io.Reader
	resp *fasthttp.Response
	req  *fasthttp.Request
	gen  *generation
	max  int64
	n    int64
	once sync.Once
}

var errResponseTooLarge = errors.New("upstream response exceeds MaxResponseBody")

func (r *relay) Read(p []byte) (int, error) {
	if r.gen != nil && r.gen.isCut() {
		return 0, errLeaseCut
	}
	if r.max > 0 && r.n >= r.max {
		return 0, errResponseTooLarge
	}
	if r.max > 0 && int64(len(p)) > r.max-r.n+1 {
		p = p[:r.max-r.n+1]
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	if r.max > 0 && r.n > r.max {
		return n - int(r.n-r.max), errResponseTooLarge
	}
	return n, err
}

// Close releases the upstream response (closing or returning its
// connection) and the request.
func (r *relay) Close() error {
	r.once.Do(func() {
		_ = r.resp.CloseBodyStream()
		fasthttp.ReleaseResponse(r.resp)
		fasthttp.ReleaseRequest(r.req)
		r.s.inflight.Add(-1)
	})
	return nil
}
