package nemesis

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// History is everything a run did and saw, in order: faults and heals,
// grants, blocked writes, checkpoint acknowledgements. It is what a
// failing run prints, with the seed.
type History struct {
	mu      sync.Mutex
	lines   []string
	grants  []Grant
	acks    []Ack
	cps     []cpAttempt
	losses  []Loss
	touched map[string][]window // worker -> windows a fault touched it
	ops     int
}

// Grant is one lease a worker obtained.
type Grant struct {
	At     time.Time
	Worker string
	Task   string
	Epoch  uint64
}

// Ack is one acknowledged checkpoint.
type Ack struct {
	At     time.Time
	Worker string
	Task   string
	Epoch  uint64
	Seq    uint64
}

// Loss is a worker seeing its lease gone: a write the sidecar refused, or
// a control call refused for the lease's state.
type Loss struct {
	At     time.Time
	Worker string
	Task   string
	Epoch  uint64
	Why    string
}

type cpAttempt struct {
	at, done time.Time
	ok       bool
}

type window struct{ from, to time.Time }

func newHistory() *History { return &History{touched: map[string][]window{}} }

// Logf appends a line to the history.
func (h *History) Logf(who, format string, args ...any) {
	line := fmt.Sprintf("%s %-9s %s", stamp(time.Now()), who, fmt.Sprintf(format, args...))
	h.mu.Lock()
	h.lines = append(h.lines, line)
	h.mu.Unlock()
}

func (h *History) grant(g Grant) {
	h.mu.Lock()
	h.grants = append(h.grants, g)
	h.mu.Unlock()
	h.Logf(g.Worker, "granted %s epoch=%d", g.Task, g.Epoch)
}

// ack records an acknowledged checkpoint sent at sent.
func (h *History) ack(a Ack, sent time.Time) {
	h.mu.Lock()
	h.acks = append(h.acks, a)
	h.cps = append(h.cps, cpAttempt{at: sent, done: a.At, ok: true})
	h.mu.Unlock()
}

func (h *History) cpFailed(at time.Time) {
	h.mu.Lock()
	h.cps = append(h.cps, cpAttempt{at: at, done: time.Now()})
	h.mu.Unlock()
}

func (h *History) loss(l Loss) {
	h.mu.Lock()
	h.losses = append(h.losses, l)
	h.mu.Unlock()
	h.Logf(l.Worker, "lost %s epoch=%d: %s", l.Task, l.Epoch, l.Why)
}

func (h *History) op() {
	h.mu.Lock()
	h.ops++
	h.mu.Unlock()
}

// Ops is the number of operations the workers made.
func (h *History) Ops() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ops
}

// touch records that a fault touched worker from..to.
func (h *History) touch(worker string, from, to time.Time) {
	h.mu.Lock()
	h.touched[worker] = append(h.touched[worker], window{from, to})
	h.mu.Unlock()
}

// wasTouched reports whether a fault touched worker at any time in
// [from, to].
func (h *History) wasTouched(worker string, from, to time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.touched[worker] {
		if !w.to.Before(from) && !to.Before(w.from) {
			return true
		}
	}
	return false
}

// checkpointStall is the longest time in [from, to] a worker waited for a
// checkpoint to be acknowledged: from the first of a run of failed
// attempts (or the send of a slow one) to the next acknowledgement.
func (h *History) checkpointStall(from, to time.Time) time.Duration {
	h.mu.Lock()
	cps := append([]cpAttempt(nil), h.cps...)
	h.mu.Unlock()
	sort.Slice(cps, func(i, j int) bool { return cps[i].at.Before(cps[j].at) })
	var worst time.Duration
	var failing time.Time
	for _, c := range cps {
		if c.at.Before(from) || c.at.After(to) {
			continue
		}
		switch {
		case !c.ok && failing.IsZero():
			failing = c.at
		case c.ok && !failing.IsZero():
			worst = max(worst, c.done.Sub(failing))
			failing = time.Time{}
		case c.ok:
			worst = max(worst, c.done.Sub(c.at))
		}
	}
	if !failing.IsZero() {
		worst = max(worst, to.Sub(failing))
	}
	return worst
}

// String is the whole history, one line per event.
func (h *History) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.lines, "\n")
}
