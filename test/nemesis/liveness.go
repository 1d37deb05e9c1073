package nemesis

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
)

// Worker-liveness faults (DESIGN.md 17, I8): the worker is hit, its
// sidecar stays up. Each nemesis worker is tied to its sidecar both ways a
// worker in another process can be: it holds an attach stream open
// (GET /v1/attach) and serves the health URL the sidecar probes.
const (
	WorkerKill  Kind = "worker-kill"  // the worker dies: its attach stream closes, its health URL fails
	WorkerHang  Kind = "worker-hang"  // the worker is stopped (SIGSTOP): the stream stays open, the probe hangs
	WorkerStall Kind = "worker-stall" // the worker lives and answers, but shows no progress
)

// The probe and progress settings of the system under test, and the I8
// bounds they give.
const (
	ProbeInterval   = 500 * time.Millisecond
	ProbeTimeout    = 300 * time.Millisecond
	ProbeThreshold  = 2
	ProgressTimeout = 6 * time.Second
	// ExitBound: a worker's exit makes its task claimable within 1 s.
	ExitBound = time.Second
	// HangBound: a hung, probed worker's task is claimable within
	// interval × threshold + 1 s (the last probe's timeout inside the 1 s).
	HangBound = ProbeInterval*ProbeThreshold + time.Second
	// StallBound: a stalled task is claimable within progress_timeout +
	// heartbeat + grace + election + 1 s of its last progress.
	StallBound = ProgressTimeout + Heartbeat + Grace + Election + time.Second
)

// onWorker reports whether a kind hits a worker and not its sidecar.
func (k Kind) onWorker() bool { return k == WorkerKill || k == WorkerHang || k == WorkerStall }

// workerBound is the I8 bound of a worker fault and the lease-end reason
// it must produce.
func (k Kind) workerBound() (time.Duration, string) {
	switch k {
	case WorkerKill:
		return ExitBound, lease.ReasonWorkerExited
	case WorkerHang:
		return HangBound, lease.ReasonWorkerUnhealthy
	}
	return StallBound, lease.ReasonStalled
}

// workerState is what a fault did to a worker.
type workerState int

const (
	alive workerState = iota
	dead
	hung
	stalled
)

// tie is a worker's attach stream and health endpoint.
type tie struct {
	control string
	srv     *http.Server
	addr    string

	mu     sync.Mutex
	state  workerState
	conn   net.Conn      // the attach stream's connection, nil while none
	resume chan struct{} // closed when a hang ends
}

// newTie listens for the sidecar's probes on addr.
func newTie(control, addr string) (*tie, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	t := &tie{control: control, addr: addr, resume: make(chan struct{})}
	t.srv = &http.Server{Handler: http.HandlerFunc(t.health), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

// health answers the sidecar's probe as the worker in its state would: a
// dead worker fails, a stopped one never answers.
func (t *tie) health(w http.ResponseWriter, r *http.Request) {
	t.mu.Lock()
	st, resume := t.state, t.resume
	t.mu.Unlock()
	switch st {
	case dead:
		w.WriteHeader(http.StatusServiceUnavailable)
	case hung:
		select {
		case <-resume:
		case <-r.Context().Done():
		}
	}
}

// run keeps an attach stream open while the worker lives, reconnecting
// when the sidecar ends it (a sidecar restart is not the worker's death).
func (t *tie) run(ctx context.Context) {
	for ctx.Err() == nil {
		t.mu.Lock()
		st := t.state
		t.mu.Unlock()
		if st == dead {
			pause(ctx, 50*time.Millisecond)
			continue
		}
		if err := t.attach(ctx); err != nil && ctx.Err() == nil {
			pause(ctx, 100*time.Millisecond)
		}
	}
	_ = t.srv.Close()
}

// attach holds one GET /v1/attach until the stream ends.
func (t *tie) attach(ctx context.Context) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", t.control)
	if err != nil {
		return err
	}
	defer c.Close()
	t.mu.Lock()
	if t.state == dead {
		t.mu.Unlock()
		return nil
	}
	t.conn = c
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.conn == c {
			t.conn = nil
		}
		t.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	if _, err := fmt.Fprintf(c, "GET /v1/attach HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", t.control); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.Contains(status, " 200 ") {
		return fmt.Errorf("attach: %s", strings.TrimSpace(status))
	}
	for {
		if _, err := r.ReadString('\n'); err != nil {
			return err
		}
	}
}

// set moves the worker to st: dying closes its attach stream (the kernel
// closes a dead process's sockets), a hang keeps it open.
func (t *tie) set(st workerState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state == hung && st != hung {
		close(t.resume)
		t.resume = make(chan struct{})
	}
	t.state = st
	if st == dead && t.conn != nil {
		_ = t.conn.Close()
		t.conn = nil
	}
}

// workerFault hits one worker that holds a lease and leaves its sidecar
// alone.
func (r *Run) workerFault(ctx context.Context, f *Fault) {
	w := r.Workers[f.Pick%len(r.Workers)]
	f.Target = w.Name
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		if f.Task, f.Epoch = w.Holding(); f.Task != "" {
			break
		}
		pause(ctx, 2*time.Millisecond)
	}
	r.H.Logf("nemesis", "inject %s (holding %s epoch=%d)", f, f.Task, f.Epoch)
	f.Start = time.Now()
	w.Pause()
	switch f.Kind {
	case WorkerKill:
		w.tie.set(dead)
	case WorkerHang:
		w.tie.set(hung)
	case WorkerStall:
		w.tie.set(stalled)
	}
	pause(ctx, f.For)
	// The worker comes back (a restarted process, or one resumed): its
	// next write under the old epoch must be refused.
	w.tie.set(alive)
	w.Resume()
	f.Heal = time.Now()
	r.H.touch(w.Name, f.Start, f.Heal.Add(ReclaimBound+time.Second))
}

// checkWorkerFault reports a worker fault whose lease did not end within
// its bound with its reason, or at all; it records the time it took.
func (r *Run) checkWorkerFault(f *Fault, byID map[string]lease.Task) []string {
	bound, reason := f.Kind.workerBound()
	var l *lease.Lease
	for _, x := range leasesOf(byID[f.Task]) {
		if x.Epoch == f.Epoch {
			l = &x
		}
	}
	if l == nil {
		return []string{fmt.Sprintf("%s: no record of %s epoch %d", f, f.Task, f.Epoch)}
	}
	if l.Status.Live() || l.Status == lease.StatusActive {
		return []string{fmt.Sprintf("I8: %s: %s epoch %d still %s: the sidecar did not give up its dead worker's lease", f, f.Task, f.Epoch, l.Status)}
	}
	from := f.Start
	if f.Kind == WorkerStall {
		if lc := r.lastLeaderChange(l.StatusAt.Time()); lc.After(from) {
			from = lc // a new leader restarts the progress clock
		}
	}
	took := l.StatusAt.Sub(lease.StampOf(from))
	if took <= 0 {
		return nil // it ended before the fault struck (completed in flight)
	}
	f.Reclaim = took
	if took > bound {
		return []string{fmt.Sprintf("I8: %s: %s epoch %d ended %s (%s) %v after the fault (bound %v)",
			f, f.Task, f.Epoch, l.Status, l.Reason, took.Round(time.Millisecond), bound)}
	}
	if l.Reason != reason && l.Status != lease.StatusReleased {
		return []string{fmt.Sprintf("%s: %s epoch %d ended %s with reason %q, want %q", f, f.Task, f.Epoch, l.Status, l.Reason, reason)}
	}
	return nil
}

// CheckWorkerReasons reports a lease given back or reclaimed for its
// worker's death or stall while no fault touched that worker: a tie that
// fires on a live, busy worker. Leases that ended once the run stopped its
// workers (stopped) are not counted: that is every worker's exit.
func (h *History) CheckWorkerReasons(tasks []lease.Task, stopped time.Time) []string {
	var bad []string
	for _, t := range tasks {
		for _, l := range leasesOf(t) {
			switch l.Reason {
			case lease.ReasonWorkerExited, lease.ReasonWorkerUnhealthy, lease.ReasonStalled:
			default:
				continue
			}
			if !stopped.IsZero() && !l.StatusAt.Before(lease.StampOf(stopped)) {
				continue
			}
			if !h.wasTouched(l.WorkerID, l.AcquiredAt.Time(), l.StatusAt.Time()) {
				bad = append(bad, fmt.Sprintf("task %s epoch %d of %s, untouched by any fault, ended %s with reason %s at %s",
					t.ID, l.Epoch, l.WorkerID, l.Status, l.Reason, stamp(l.StatusAt.Time())))
			}
		}
	}
	return bad
}
