package workertie

import (
	"context"
	"sync"

	"github.com/fencepost/fencepost/fence/lease"
)

// Attachments tracks the worker's attach streams (DESIGN.md 17
// "attached"). The control API opens an Attachment per GET /v1/attach,
// tells it every lease it streams the state of or the acquisition of
// (Saw), and closes it when the stream ends. Closing gives back, with
// reason worker_exited, every lease the attachment saw that the sidecar
// still holds under that epoch and no other open attachment saw: a
// worker that completed, failed or gave its lease back first leaves
// nothing to give back, and a later grant of the same task (a new epoch)
// is never touched by an older stream's close.
type Attachments struct {
	rel  Releaser
	mu   sync.Mutex
	open map[*Attachment]struct{}
}

// NewAttachments returns a tracker over rel.
func NewAttachments(rel Releaser) *Attachments {
	return &Attachments{rel: rel, open: map[*Attachment]struct{}{}}
}

// Attachment is one open attach stream. Task is its scope: one task, or
// every lease when empty.
type Attachment struct {
	set     *Attachments
	Task    string
	saw     map[Lease]bool
	stopped map[string]bool // tasks this stream has told to stop
	done    bool
}

// Open registers a stream scoped to task ("" for every lease).
func (a *Attachments) Open(task string) *Attachment {
	a.mu.Lock()
	defer a.mu.Unlock()
	x := &Attachment{set: a, Task: task, saw: map[Lease]bool{}, stopped: map[string]bool{}}
	a.open[x] = struct{}{}
	return x
}

// Count returns the number of open attachments.
func (a *Attachments) Count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.open)
}

// Saw records that the stream told its worker about lease l (a state or
// an acquisition). A lease outside the stream's scope is ignored.
func (x *Attachment) Saw(l Lease) {
	if l.Task == "" || (x.Task != "" && l.Task != x.Task) {
		return
	}
	x.set.mu.Lock()
	defer x.set.mu.Unlock()
	if !x.done && !x.stopped[l.Task] {
		x.saw[l] = true
	}
}

// Stopped records that the stream told its worker to stop task: that
// worker is done with the task, so a later grant of it (the next owner,
// through this sidecar) is never tied to this stream, whose late close
// would otherwise give the new owner's lease back.
func (x *Attachment) Stopped(task string) {
	x.set.mu.Lock()
	defer x.set.mu.Unlock()
	x.stopped[task] = true
}

// Forget ends the attachment without giving anything back: the sidecar
// itself ended the stream (shutdown, or a client too slow that will
// reconnect), which says nothing about the worker.
func (x *Attachment) Forget() {
	a := x.set
	a.mu.Lock()
	defer a.mu.Unlock()
	x.done = true
	delete(a.open, x)
}

// Close ends the attachment and gives back what it alone tied (above).
// It returns the leases given back; a second Close does nothing.
func (x *Attachment) Close(ctx context.Context) ([]Lease, error) {
	a := x.set
	a.mu.Lock()
	if x.done {
		a.mu.Unlock()
		return nil, nil
	}
	x.done = true
	delete(a.open, x)
	orphans := map[Lease]bool{}
	for l := range x.saw {
		orphans[l] = true
	}
	for o := range a.open {
		for l := range o.saw {
			delete(orphans, l)
		}
	}
	a.mu.Unlock()
	if len(orphans) == 0 || DeathIgnored {
		return nil, nil
	}
	var (
		out   []Lease
		first error
	)
	for _, l := range a.rel.Held() {
		if !orphans[l] {
			continue
		}
		if err := a.rel.GiveBack(ctx, l, lease.ReasonWorkerExited); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		out = append(out, l)
	}
	return out, first
}
