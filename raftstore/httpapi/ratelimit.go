package httpapi

import (
	"fmt"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/pki"
)

// DefaultRatePerIdentity and DefaultRateBurst bound the requests one
// identity (client certificate) may make per second: far above what a
// sidecar needs (a heartbeat per interval, a few calls per task step), low
// enough that one credential cannot monopolise the leader. The dev
// identity and members (relaying others' requests) are not limited.
const (
	DefaultRatePerIdentity = 1000
	DefaultRateBurst       = 2000
)

// ErrRateLimited reports an identity over its request rate; 429 with
// Retry-After.
var ErrRateLimited = fmt.Errorf("rate limited")

// limiter is a token bucket per identity.
type limiter struct {
	rate, burst float64
	now         func() time.Time
	mu          sync.Mutex
	buckets     map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate, burst int, now func() time.Time) *limiter {
	return &limiter{rate: float64(rate), burst: float64(burst), now: now, buckets: map[string]*bucket{}}
}

// allow takes one token of who's bucket, or refuses.
func (l *limiter) allow(who string) error {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[who]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[who] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens < 1 {
		return fmt.Errorf("%w: %s is over %g requests per second", ErrRateLimited, who, l.rate)
	}
	b.tokens--
	return nil
}

// limit applies the rate limit to p (not to the dev identity, anonymous
// callers of the public routes, or members, whose requests are other
// identities' relayed).
func (s *Server) limit(p principal) error {
	if s.limiter.rate < 0 || p.dev || p.anon || p.id.Role == pki.RoleMember {
		return nil
	}
	return s.limiter.allow(p.id.String())
}
