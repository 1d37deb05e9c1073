package httpapi

import (
	"errors"
	"fmt"
	"sync"
)

// ErrBodyBudget reports a request whose body would take the bodies in
// processing past Config.BodyBudget, or its identity past its share; 503,
// retry later.
var ErrBodyBudget = errors.New("request body budget used up")

// bodyBudget counts the request body bytes in processing, in total and
// per identity (a quarter of the total each).
type bodyBudget struct {
	total, share int64
	mu           sync.Mutex
	used         int64
	by           map[string]int64
}

func newBodyBudget(total int64) *bodyBudget {
	return &bodyBudget{total: total, share: total / 4, by: map[string]int64{}}
}

// take reserves n bytes for who until release is called; shared says
// whether who is held to its share (not the dev identity, which is every
// caller of a plaintext API). An empty body, or an unbounded budget,
// takes nothing.
func (b *bodyBudget) take(who string, shared bool, n int) (release func(), err error) {
	if n == 0 || b.total < 0 {
		return func() {}, nil
	}
	size := int64(n)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.used+size > b.total:
		return nil, fmt.Errorf("%w: %d of %d bytes of request bodies are in processing", ErrBodyBudget, b.used, b.total)
	case shared && b.by[who]+size > b.share:
		return nil, fmt.Errorf("%w: %s has %d bytes of request bodies in processing, its share is %d", ErrBodyBudget, who, b.by[who], b.share)
	}
	b.used += size
	b.by[who] += size
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.used -= size
		if b.by[who] -= size; b.by[who] == 0 {
			delete(b.by, who)
		}
	}, nil
}
