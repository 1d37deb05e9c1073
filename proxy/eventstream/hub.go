package eventstream

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind names an event.
type Kind string

// Event kinds (the contract's).
const (
	KindState    Kind = "state"
	KindAcquired Kind = "acquired"
	KindLost     Kind = "lost"
	KindRevived  Kind = "revived"
	KindRevoked  Kind = "revoked"
	KindReleased Kind = "released"
)

// Event is one message of the stream.
type Event struct {
	Kind   Kind      `json:"kind"`
	TaskID string    `json:"taskId"`
	Epoch  uint64    `json:"epoch"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
	// Stop: stop the work for this task at once; the lease (this epoch)
	// is over for this worker.
	Stop bool   `json:"stop"`
	Seq  uint64 `json:"seq"`
	// ID is the SSE id, "<boot>-<seq>".
	ID string `json:"-"`
}

// RingSize is how many published events a reconnect can catch up on.
const RingSize = 256

// subBuffer bounds how far a subscriber may fall behind before it is
// dropped (its channel closed); it reconnects with Last-Event-ID and
// catches up from the ring, which is better than blocking the publisher.
const subBuffer = 64

// finalMemory bounds how many ended epochs the hub remembers to drop
// late events about.
const finalMemory = 1024

type leaseKey struct {
	task  string
	epoch uint64
}

// Hub publishes events to subscribers without ever blocking the
// publisher. Publish must not be called while holding a lock the state
// function given to Subscribe takes.
type Hub struct {
	boot string

	mu     sync.Mutex
	seq    uint64
	ring   [RingSize]Event
	subs   map[*Subscription]struct{}
	last   map[leaseKey]Kind
	ended  []leaseKey // FIFO of final epochs in last, oldest first
	closed bool
}

// NewHub returns a hub with a fresh boot id.
func NewHub() *Hub {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Hub{boot: hex.EncodeToString(b[:]), subs: map[*Subscription]struct{}{}, last: map[leaseKey]Kind{}}
}

// Boot returns this process's boot id.
func (h *Hub) Boot() string { return h.boot }

func (h *Hub) id(seq uint64) string { return h.boot + "-" + strconv.FormatUint(seq, 10) }

// Publish numbers ev and sends it to every subscriber in scope. It
// reports false (and sends nothing) for an event that is not a new
// transition. Lost and revoked always carry Stop; the publisher sets it
// on released.
func (h *Hub) Publish(ev Event) (Event, bool) {
	if ev.Kind == KindLost || ev.Kind == KindRevoked {
		ev.Stop = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || !h.transitionLocked(ev) {
		return ev, false
	}
	h.seq++
	ev.Seq, ev.ID = h.seq, h.id(h.seq)
	h.ring[h.seq%RingSize] = ev
	for s := range h.subs {
		if !s.inScope(ev) {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			h.dropLocked(s)
		}
	}
	return ev, true
}

// transitionLocked reports whether ev changes its lease's state, and
// records it.
func (h *Hub) transitionLocked(ev Event) bool {
	if ev.TaskID == "" {
		return true
	}
	k := leaseKey{ev.TaskID, ev.Epoch}
	prev, seen := h.last[k]
	if seen && (prev == ev.Kind || prev == KindReleased || prev == KindRevoked) {
		return false
	}
	h.last[k] = ev.Kind
	if ev.Kind == KindReleased || ev.Kind == KindRevoked {
		h.ended = append(h.ended, k)
		if len(h.ended) > finalMemory {
			delete(h.last, h.ended[0])
			h.ended = h.ended[1:]
		}
	}
	return true
}

// Subscription is one stream's view of the hub: Backlog first, then C.
// C is closed when the subscriber fell too far behind, or the hub closed.
type Subscription struct {
	Backlog []Event
	C       <-chan Event

	hub  *Hub
	ch   chan Event
	task string
}

func (s *Subscription) inScope(ev Event) bool {
	return s.task == "" || ev.TaskID == s.task
}

// Subscribe opens a stream scoped to task ("" for every lease). lastID is
// the client's Last-Event-ID: when it names this boot and every event
// after it is still in the ring, Backlog holds those events; otherwise
// Backlog is the current state, from state (the leases held now; taken
// under the hub's lock, so no event falls between it and C).
func (h *Hub) Subscribe(lastID, task string, state func() []Event) *Subscription {
	s := &Subscription{hub: h, task: task}
	s.ch = make(chan Event, subBuffer)
	s.C = s.ch
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(s.ch)
		return s
	}
	if seq, ok := h.resumable(lastID); ok {
		for n := seq + 1; n <= h.seq; n++ {
			if ev := h.ring[n%RingSize]; s.inScope(ev) {
				s.Backlog = append(s.Backlog, ev)
			}
		}
	} else {
		s.Backlog = h.stateLocked(task, state)
	}
	h.subs[s] = struct{}{}
	return s
}

// resumable parses a Last-Event-ID and reports whether the events after
// it can all be replayed.
func (h *Hub) resumable(lastID string) (uint64, bool) {
	boot, n, ok := strings.Cut(lastID, "-")
	if !ok || boot != h.boot {
		return 0, false
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	if err != nil || seq > h.seq || h.seq-seq > RingSize {
		return 0, false
	}
	return seq, true
}

// stateLocked builds the state events that open a stream.
func (h *Hub) stateLocked(task string, state func() []Event) []Event {
	var out []Event
	if state != nil {
		for _, ev := range state() {
			if task != "" && ev.TaskID != task {
				continue
			}
			ev.Kind, ev.Stop, ev.Seq, ev.ID = KindState, false, h.seq, h.id(h.seq)
			out = append(out, ev)
		}
	}
	if len(out) == 0 {
		out = append(out, Event{Kind: KindState, TaskID: "", Seq: h.seq, ID: h.id(h.seq), At: time.Now()})
	}
	return out
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.dropLocked(s)
}

func (h *Hub) dropLocked(s *Subscription) {
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.ch)
	}
}

// Close ends every subscription; later ones get a closed channel.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		h.dropLocked(s)
	}
}
