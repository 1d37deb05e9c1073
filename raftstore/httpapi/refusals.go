package httpapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// DefaultRefusalsPerSecond and DefaultRefusalBurst bound how many refused
// requests (401, 403) one caller, a source address and identity together,
// may make: past them its requests are answered 429 before any route, the
// store or the audit log sees them. A client that is refused that often
// is probing or broken; an honest one is refused a few times at most.
const (
	DefaultRefusalsPerSecond = 10
	DefaultRefusalBurst      = 50
)

// maxRefusalBuckets bounds the refusal limiter's table; past it, buckets
// that refilled (callers that stopped being refused) are dropped first.
const maxRefusalBuckets = 10_000

// refusalLimiter is a token bucket per (source, identity) charged only by
// refusals.
type refusalLimiter struct {
	rate, burst float64
	now         func() time.Time
	mu          sync.Mutex
	buckets     map[string]*bucket
}

func newRefusalLimiter(now func() time.Time) *refusalLimiter {
	return &refusalLimiter{rate: DefaultRefusalsPerSecond, burst: DefaultRefusalBurst, now: now, buckets: map[string]*bucket{}}
}

// refusalKey is the caller a refusal is charged to: the source IP (not
// the port, which a client changes freely) and the identity.
func refusalKey(rc *fasthttp.RequestCtx, p principal) string {
	host := sourceIP(rc)
	who := p.id.String()
	if p.id == (principal{}).id {
		who = "unauthenticated"
	}
	return host + " " + who
}

// sourceIP is the caller's address without the port.
func sourceIP(rc *fasthttp.RequestCtx) string { return addrHost(rc.RemoteAddr()) }

// addrHost is an address without the port.
func addrHost(a net.Addr) string {
	host := a.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return host
}

// refill brings b up to now; the caller holds l.mu.
func (l *refusalLimiter) refill(b *bucket, now time.Time) {
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
}

// check refuses a caller whose refusal budget is used up.
func (l *refusalLimiter) check(key string) error {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		return nil
	}
	l.refill(b, now)
	if b.tokens < 1 {
		return fmt.Errorf("%w: %s was refused more than %d times at over %d per second; slow down",
			errRefusalsLimited, key, DefaultRefusalBurst, DefaultRefusalsPerSecond)
	}
	return nil
}

// charge takes one token for a refusal.
func (l *refusalLimiter) charge(key string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= maxRefusalBuckets {
			l.pruneLocked(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	b.tokens = max(b.tokens-1, 0)
}

// pruneLocked drops buckets that refilled; if none did, the oldest half
// goes (a flood from many sources then costs each source its history, not
// the server its memory).
func (l *refusalLimiter) pruneLocked(now time.Time) {
	for k, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= l.burst {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) < maxRefusalBuckets {
		return
	}
	cut := now.Add(-time.Duration(float64(time.Second) * l.burst / l.rate))
	for k, b := range l.buckets {
		if b.last.Before(cut) || len(l.buckets) > maxRefusalBuckets/2 {
			delete(l.buckets, k)
		}
	}
}

// missingRefusals labels, in the audit log, a request answered 429
// because its caller was refused too often.
const missingRefusals = "refusals.rate_limited"

// errRefusalsLimited is a caller over its refusal budget: 429, as any
// rate limit.
var errRefusalsLimited = fmt.Errorf("%w (refused requests)", ErrRateLimited)

// isRefusal reports whether err refused the caller's identity or
// credentials: what the refusal budget counts.
func isRefusal(err error) bool {
	if err == nil {
		return false
	}
	_, denied := deniedPermission(err)
	return denied || errors.Is(err, ErrUnauthenticated)
}

// overRefusals answers rc 429 when its caller is over its refusal budget,
// before anything else runs; such answers are audited only as part of a
// burst (denials.go).
func (s *Server) overRefusals(rc *fasthttp.RequestCtx, who principal, key, route, rid string) bool {
	err := s.refusals.check(key)
	if err == nil {
		return false
	}
	s.metrics.refusalsLimited.Inc()
	writeProblem(rc, problemFor(err, string(rc.Path())))
	if s.denials.note(denialKey{who: who.id.String(), missing: missingRefusals, route: route, source: sourceIP(rc)},
		http.StatusTooManyRequests) {
		s.auditLog.Info("audit", zap.String("who", who.id.String()), zap.String("route", route),
			zap.String("rid", rid), zap.Int("status", http.StatusTooManyRequests), zap.Bool("denied", true),
			zap.String("missing", missingRefusals), zap.String("remote", rc.RemoteAddr().String()))
	}
	return true
}

// chargeRefusal charges key's budget when err refused the request.
func (s *Server) chargeRefusal(key string, err error) {
	if isRefusal(err) {
		s.refusals.charge(key)
	}
}
