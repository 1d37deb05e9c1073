package leases

import (
	"sync"
	"time"
)

// EventKind names a change of the sidecar's view of a lease.
type EventKind string

// Lease event kinds.
const (
	// EventAcquired: a lease was granted (acquire or claim).
	EventAcquired EventKind = "acquired"
	// EventReleased: the worker completed, failed, gave back or parked
	// the task; Reason says which.
	EventReleased EventKind = "released"
	// EventLost: the lease stopped being current (local deadline passed,
	// the cluster reported it expired or superseded, the session died).
	// Writes are blocked from this instant.
	EventLost EventKind = "lost"
	// EventRevived: a lease that was lost locally was renewed again with
	// the same epoch (nobody else was let in meanwhile).
	EventRevived EventKind = "revived"
	// EventRevoked: an operator or a conflict took the lease away.
	EventRevoked EventKind = "revoked"
)

// Event is one lease event, as published to subscribers and on
// GET /v1/events.
type Event struct {
	Kind   EventKind `json:"kind"`
	TaskID string    `json:"taskId"`
	Epoch  uint64    `json:"epoch"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// eventBufferSize bounds how far a subscriber may fall behind before it
// is dropped; a dropped subscriber sees its channel closed and
// re-subscribes (the SSE client reconnects), which is better than
// blocking the heartbeat loop.
const eventBufferSize = 64

// broker fans lease events out to subscribers without ever blocking the
// publisher.
type broker struct {
	mu     sync.Mutex
	subs   map[chan Event]struct{}
	closed bool
}

func newBroker() *broker { return &broker{subs: make(map[chan Event]struct{})} }

// subscribe returns a channel of events and a cancel function. The
// channel is closed by cancel, by close, or when the subscriber is too
// slow.
func (b *broker) subscribe() (<-chan Event, func()) {
	ch := make(chan Event, eventBufferSize)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(ch)
		return ch, func() {}
	}
	b.subs[ch] = struct{}{}
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
	}
}

func (b *broker) publish(ev Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
			delete(b.subs, ch)
			close(ch)
		}
	}
}

// close ends every subscription; later subscribers get a closed channel.
func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for ch := range b.subs {
		delete(b.subs, ch)
		close(ch)
	}
}
