package nemesis

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
)

// Run is one nemesis run: the system, its workers, the firewall and the
// history.
type Run struct {
	tb      testing.TB
	Sys     *System
	Workers []*Worker
	H       *History
	Faults  []*Fault
	fw      *Firewall // nil when partitions cannot run
	c       *cluster.Client
	workCtx context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	// LastHeal is when the last fault was healed.
	LastHeal time.Time
	// stoppedAt is when Stop ended the workers: their attach streams
	// close then, which is a worker's exit like any other.
	stoppedAt time.Time
	// late lists writes a sidecar forwarded past its deadline when probed
	// (probeLateWrite).
	late []string

	leaderMu sync.Mutex
	changes  []time.Time // when a new leader (or term) was seen
}

// NewRun starts the system with members members and workers pairs of
// sidecar and worker, the task feeder and the workers. With firewall,
// every process runs under its own group id and partitions are possible.
func NewRun(ctx context.Context, tb testing.TB, members, workers int, seed uint64, firewall bool) *Run {
	tb.Helper()
	r := &Run{tb: tb, H: newHistory()}
	if firewall {
		r.fw = NewFirewall(fmt.Sprintf("fencepost-nemesis-%d", gidBase()))
		tb.Cleanup(func() {
			if err := r.fw.Close(); err != nil {
				tb.Errorf("removing the firewall rules: %v", err)
			}
		})
	}
	r.Sys = StartSystem(ctx, tb, members, workers, firewall)
	r.c = r.Sys.Client()
	r.workCtx, r.stop = context.WithCancel(ctx)
	r.wg.Add(2)
	go func() { defer r.wg.Done(); r.feed(r.workCtx) }()
	go func() { defer r.wg.Done(); r.watchLeaders(r.workCtx) }()
	for i, sc := range r.Sys.Sidecars {
		w := newWorker(r.Sys, sc, r.H, seed+uint64(i))
		r.Workers = append(r.Workers, w)
		r.wg.Add(1)
		go func() { defer r.wg.Done(); w.Run(r.workCtx) }()
	}
	tb.Cleanup(r.Stop)
	return r
}

// pendingTarget is how many claimable tasks the feeder keeps: few, so a
// reclaimed task is taken soon after it becomes claimable.
const pendingTarget = 2

// feed keeps pendingTarget tasks pending.
func (r *Run) feed(ctx context.Context) {
	n := 0
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		list, err := r.c.Tasks(cctx, lease.TaskFilter{State: lease.TaskPending, Limit: pendingTarget}, true)
		if err == nil && len(list.Tasks) < pendingTarget {
			n++
			_, err = r.c.CreateTask(cctx, api.CreateTaskRequest{TaskID: fmt.Sprintf("t%05d", n)})
		}
		cancel()
		if err == nil {
			pause(ctx, 20*time.Millisecond)
		} else {
			pause(ctx, 100*time.Millisecond)
		}
	}
}

// watchLeaders records every change of leader or term the members report:
// a new leader restarts every lease's TTL (DESIGN.md 4), so I7's bounds
// count from the last one.
func (r *Run) watchLeaders(ctx context.Context) {
	var last string
	for ctx.Err() == nil {
		for _, m := range r.Sys.Members {
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			st, err := r.c.MemberStatus(cctx, m.HTTP)
			cancel()
			if err != nil || st.State != "Leader" {
				continue
			}
			if now := fmt.Sprintf("%s term %d", st.NodeID, st.Term); now != last {
				last = now
				r.leaderMu.Lock()
				r.changes = append(r.changes, time.Now())
				r.leaderMu.Unlock()
				r.H.Logf("leader", "%s", now)
			}
			break
		}
		pause(ctx, 100*time.Millisecond)
	}
}

// lastLeaderChange returns the last leader change seen at or before t.
func (r *Run) lastLeaderChange(t time.Time) time.Time {
	r.leaderMu.Lock()
	defer r.leaderMu.Unlock()
	var out time.Time
	for _, c := range r.changes {
		if !c.After(t) {
			out = c
		}
	}
	return out
}

// Stop stops the workers and the feeder and waits for them.
func (r *Run) Stop() {
	if r.stoppedAt.IsZero() {
		r.stoppedAt = time.Now()
	}
	r.stop()
	for _, w := range r.Workers {
		w.Resume()
	}
	r.wg.Wait()
}

// Inject runs one fault to its heal and waits out its gap.
func (r *Run) Inject(ctx context.Context, st Step) *Fault {
	f := &Fault{Step: st}
	r.Faults = append(r.Faults, f)
	for _, e := range r.exited() {
		r.tb.Errorf("before %s: %s", st.Kind, e)
	}
	switch {
	case st.Kind.onSidecar():
		r.sidecarFault(ctx, f)
	case st.Kind.onWorker():
		r.workerFault(ctx, f)
	default:
		r.memberFault(ctx, f)
	}
	r.LastHeal = f.Heal
	r.H.Logf("nemesis", "healed %s", f)
	pause(ctx, st.Gap)
	f.Stall = r.H.checkpointStall(f.Start, f.Heal.Add(2*time.Second))
	return f
}

func (r *Run) must(err error) {
	if err != nil {
		r.tb.Errorf("nemesis: %v", err)
	}
}

// exited reports every member or sidecar process that exited without the
// nemesis killing it, with the end of its log: a crash is a finding.
func (r *Run) exited() []string {
	var bad []string
	for _, m := range r.Sys.Members {
		if !m.proc.Running() {
			bad = append(bad, fmt.Sprintf("member %s exited on its own (%v):\n%s", m.ID, m.proc.ExitErr(), m.proc.Tail(40)))
		}
	}
	for _, sc := range r.Sys.Sidecars {
		if !sc.proc.Running() {
			bad = append(bad, fmt.Sprintf("sidecar %s exited on its own (%v):\n%s", sc.Name, sc.proc.ExitErr(), sc.proc.Tail(40)))
		}
	}
	return bad
}

func (r *Run) memberFault(ctx context.Context, f *Fault) {
	leader := r.Sys.Leader(ctx, r.c)
	for leader == nil && ctx.Err() == nil {
		pause(ctx, 50*time.Millisecond)
		leader = r.Sys.Leader(ctx, r.c)
	}
	target := leader
	if f.Kind == FollowerKill || (f.Kind == MemberPartition && f.Pick%2 == 0) {
		var followers []*Member
		for _, m := range r.Sys.Members {
			if m != leader {
				followers = append(followers, m)
			}
		}
		target = followers[f.Pick%len(followers)]
	}
	f.Target = target.ID
	r.H.Logf("nemesis", "inject %s (leader %s)", f, leader.ID)
	f.Start = time.Now()
	ectx, cancel := context.WithCancel(ctx)
	var elected <-chan time.Duration
	if target == leader {
		elected = watchElection(ectx, r.Sys, r.c, leader, f.Start)
	}
	name := string(f.Kind)
	switch f.Kind {
	case LeaderKill, FollowerKill:
		r.must(target.Proc().Kill())
		pause(ctx, f.For)
		target.Restart()
	case LeaderPause, LeaderPauseLong:
		r.must(target.Proc().Pause())
		pause(ctx, f.For)
		r.must(target.Proc().Resume())
	case LeaderIsolate, MemberPartition:
		var others []Endpoint
		for _, m := range r.Sys.Members {
			if m != target {
				others = append(others, Endpoint{Gid: m.Gid, Ports: m.Ports()})
			}
		}
		if f.Kind == MemberPartition {
			for _, sc := range r.Sys.Sidecars {
				others = append(others, Endpoint{Gid: sc.Gid})
			}
		}
		r.must(r.fw.Cut(name, []Endpoint{{Gid: target.Gid, Ports: target.Ports()}}, others))
		pause(ctx, f.For)
		r.must(r.fw.Heal(name))
	}
	f.Heal = time.Now()
	if elected != nil {
		select {
		case d, ok := <-elected:
			if ok {
				f.Election = d
			}
		case <-time.After(3 * time.Second):
		}
	}
	cancel()
}

func (r *Run) sidecarFault(ctx context.Context, f *Fault) {
	w := r.Workers[f.Pick%len(r.Workers)]
	sc := w.sc
	f.Target = w.Name
	// Strike while the worker holds a lease (it is between tasks only for
	// moments), so the fault has a lease to take.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		if f.Task, f.Epoch = w.Holding(); f.Task != "" {
			break
		}
		pause(ctx, 2*time.Millisecond)
	}
	r.H.Logf("nemesis", "inject %s (holding %s epoch=%d)", f, f.Task, f.Epoch)
	f.Start = time.Now()
	switch f.Kind {
	case SidecarPause:
		r.must(sc.Proc().Pause())
		pause(ctx, f.For)
		r.must(sc.Proc().Resume())
	case SidecarWorkerPause:
		w.Pause()
		r.must(sc.Proc().Pause())
		pause(ctx, f.For)
		// Both wake; the worker's next write reaches the sidecar's socket
		// before the sidecar runs again, as a write a resumed worker sends
		// at once would: the sidecar must block it on its own deadline,
		// before any heartbeat could tell it the lease is gone.
		w.Resume()
		pause(ctx, 100*time.Millisecond)
		r.must(sc.Proc().Resume())
	case SidecarKill:
		r.must(sc.Proc().Kill())
		pause(ctx, f.For)
		sc.Restart(r.Sys.bin)
	case SidecarPartition:
		var members []Endpoint
		for _, m := range r.Sys.Members {
			members = append(members, Endpoint{Gid: m.Gid, Ports: []int{port(m.HTTP)}})
		}
		r.must(r.fw.Cut(string(f.Kind), []Endpoint{{Gid: sc.Gid}}, members))
		probeAt := f.Start.Add(probeDelay)
		pause(ctx, time.Until(probeAt))
		r.probeLateWrite(ctx, w, f)
		pause(ctx, time.Until(f.Start.Add(f.For)))
		r.must(r.fw.Heal(string(f.Kind)))
	}
	f.Heal = time.Now()
	// The worker's lease may be lost to this fault until it is reclaimed
	// and the worker has moved on.
	r.H.touch(w.Name, f.Start, f.Heal.Add(ReclaimBound+time.Second))
}
