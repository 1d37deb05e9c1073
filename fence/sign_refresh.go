package fence

import (
	"context"
	"crypto/ed25519"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultKeyRefetchInterval is the least time between two fetches that an
// unknown key id triggers (RefreshingKeys): often enough to pick up a
// rotated key at once, rarely enough that writes signed with made-up key
// ids cannot turn the service into a load generator against the cluster.
const DefaultKeyRefetchInterval = 5 * time.Second

// keyFetchTimeout bounds one fetch made on behalf of a write.
const keyFetchTimeout = 5 * time.Second

// RefreshingKeys is a KeySet that fetches the key document again when it
// is asked for a key id it does not know (the cluster rotated its key),
// at most once per interval. Keys once known are kept: the cluster lists
// every key it has signed with, and a fetch that fails or lists fewer
// keys must not make valid tokens unverifiable. Safe for concurrent use;
// lookups of known ids take no lock.
type RefreshingKeys struct {
	fetch    func(context.Context) (StaticKeys, error)
	interval time.Duration
	now      func() time.Time

	keys atomic.Pointer[StaticKeys]
	mu   sync.Mutex // serialises fetches; guards last and fetches
	last time.Time
	// fetches counts the fetches made after the first; for tests and logs.
	fetches int
}

// NewRefreshingKeys starts from initial and refetches with fetch (for
// example a closure over FetchKeys). interval <= 0 means
// DefaultKeyRefetchInterval; now == nil means time.Now.
func NewRefreshingKeys(initial StaticKeys, fetch func(context.Context) (StaticKeys, error), interval time.Duration, now func() time.Time) *RefreshingKeys {
	if interval <= 0 {
		interval = DefaultKeyRefetchInterval
	}
	if now == nil {
		now = time.Now
	}
	r := &RefreshingKeys{fetch: fetch, interval: interval, now: now}
	k := maps.Clone(initial)
	if k == nil {
		k = StaticKeys{}
	}
	r.keys.Store(&k)
	return r
}

// PublicKey implements KeySet. An unknown id triggers a fetch unless one
// happened less than the interval ago.
func (r *RefreshingKeys) PublicKey(id string) (ed25519.PublicKey, bool) {
	if k, ok := (*r.keys.Load())[id]; ok {
		return k, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := (*r.keys.Load())[id]; ok { // fetched while we waited
		return k, true
	}
	now := r.now()
	if !r.last.IsZero() && now.Sub(r.last) < r.interval {
		return nil, false
	}
	r.last = now
	r.fetches++
	ctx, cancel := context.WithTimeout(context.Background(), keyFetchTimeout)
	defer cancel()
	fresh, err := r.fetch(ctx)
	if err != nil {
		return nil, false
	}
	merged := maps.Clone(*r.keys.Load())
	maps.Copy(merged, fresh)
	r.keys.Store(&merged)
	k, ok := merged[id]
	return k, ok
}

// Refetches reports how many fetches unknown key ids have triggered.
func (r *RefreshingKeys) Refetches() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fetches
}
