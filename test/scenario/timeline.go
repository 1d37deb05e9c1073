package scenario

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Timeline prints one line per event, prefixed with the time elapsed
// since it started and the actor, and keeps every line so a failing test
// can show the whole story:
//
//	+1.20s  A        claimed run_456 epoch=17
type Timeline struct {
	mu    sync.Mutex
	start time.Time
	out   io.Writer
	lines []string
}

// NewTimeline starts a timeline that writes to out (nil: keep lines only).
func NewTimeline(out io.Writer) *Timeline {
	return &Timeline{start: time.Now(), out: out}
}

// Elapsed is the time since the timeline started.
func (t *Timeline) Elapsed() time.Duration { return time.Since(t.start) }

// Logf records one event of actor.
func (t *Timeline) Logf(actor, format string, args ...any) {
	line := fmt.Sprintf("%+7.2fs  %-8s %s", t.Elapsed().Seconds(), actor, fmt.Sprintf(format, args...))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if t.out != nil {
		fmt.Fprintln(t.out, line)
	}
}

// Raw records a line as it is (no time, no actor).
func (t *Timeline) Raw(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if t.out != nil {
		fmt.Fprintln(t.out, line)
	}
}

// String returns every line recorded so far.
func (t *Timeline) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
