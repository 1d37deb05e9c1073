package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy"
)

// play runs the story; setup has built the cast.
func (p *play) play(ctx context.Context) error {
	task := p.cfg.Task
	downURL := writeURL(p.down.Addr(), task)

	// 1. A takes the task, does step 1, and checkpoints.
	if err := p.aStarts(ctx, downURL); err != nil {
		return err
	}
	epochA := p.a.epochA

	// 2. One of A's writes leaves A's sidecar (lease current) and gets
	// stuck on the wire.
	p.stuck.Hold()
	stuckDone := make(chan struct{})
	go func() {
		defer close(stuckDone)
		r := p.wA.Write(ctx, writeURL(p.stuck.Addr(), task), task, "step-2", body("A", "step-2", epochA))
		p.record(sentWrite{Worker: "A", Epoch: epochA, Action: "step-2", Result: r})
		if r.Outcome == CutInFlight {
			p.logf("A-side", "cut A's held step-2 call at the lease deadline (%d %s); its bytes are still on the wire", r.Status, r.Code)
		} else {
			p.logf("A", "its held step-2 call returned: %s", describe(r))
		}
	}()
	// Headers and body may be written separately: wait until the held
	// bytes stop growing.
	var held int64
	if err := waitUntil(ctx, 5*time.Second, 30*time.Millisecond, func() bool {
		n := p.stuck.Stats().BytesHeld
		settled := n > 0 && n == held
		held = n
		return settled
	}); err != nil {
		return errStep("A's step-2 write reaching the wire", err)
	}
	p.logf("net", "A's step-2 write left its sidecar stamped epoch=%d and is stuck on the wire", epochA)

	// 3. A's link to the cluster drops; A keeps working.
	p.mu.Lock()
	p.a.latestDeadline = time.Now().Add(p.cfg.TTL)
	p.mu.Unlock()
	for _, l := range p.aLinks {
		l.Blackhole()
	}
	p.logf("net", "A's link to the cluster drops: its heartbeats go nowhere (blackhole)")
	stopA, aDone := make(chan struct{}), make(chan struct{})
	go p.keepWriting(ctx, downURL, stopA, aDone)
	stopWriting := func() {
		select {
		case <-stopA:
		default:
			close(stopA)
		}
		<-aDone
	}
	defer stopWriting()

	// 4. The cluster reclaims the task.
	if err := p.watchReclaim(ctx); err != nil {
		return err
	}

	// 5. B claims it with a higher epoch from A's checkpoint and writes.
	if err := p.bTakesOver(ctx, downURL); err != nil {
		return err
	}

	// 6. A's link returns; A's sidecar hears it lost the lease.
	if err := p.aReturns(ctx, downURL, stopWriting); err != nil {
		return err
	}

	// 7. The held write reaches the downstream and is rejected as stale.
	before, rejectedBefore, acceptedBefore := p.down.RejectedStale(), p.down.Rejected(), len(p.down.Accepted(task))
	p.stuck.Release()
	p.logf("net", "the network finally delivers A's held step-2 write (epoch=%d)", epochA)
	if err := waitUntil(ctx, 5*time.Second, 5*time.Millisecond, func() bool {
		return p.down.Rejected() > rejectedBefore || len(p.down.Accepted(task)) > acceptedBefore
	}); err != nil {
		return errStep("the held write reaching the downstream", err)
	}
	switch {
	case p.down.RejectedStale() > before:
		p.logf("down", "rejected A's held write: stale fencing token epoch=%d, already accepted epoch=%d (409)", epochA, p.a.epochB)
	case len(p.down.Accepted(task)) > acceptedBefore:
		p.logf("down", "ACCEPTED A's held write with epoch=%d after epoch=%d: the downstream's fence did not hold", epochA, p.a.epochB)
	default:
		p.logf("down", "refused A's held write, but NOT as stale: the fence missed epoch=%d < %d (only another check stopped it)", epochA, p.a.epochB)
	}
	select {
	case <-stuckDone:
	case <-ctx.Done():
		return errStep("A's held call returning", ctx.Err())
	}

	// 8. B finishes.
	if err := p.wB.Complete(ctx, task); err != nil {
		return errStep("B completing the task", err)
	}
	p.logf("B", "completed %s", task)
	p.a.accepted = p.down.Accepted(task)
	p.a.rejectedStale = p.down.RejectedStale()
	p.logf("down", "log for %s: %d writes accepted, %d rejected as stale", task, len(p.a.accepted), p.a.rejectedStale)
	return nil
}

func (p *play) aStarts(ctx context.Context, downURL string) error {
	task := p.cfg.Task
	var g proxy.GrantReply
	err := retry(ctx, 10*time.Second, func() (bool, error) {
		var err error
		g, err = p.wA.Acquire(ctx, task)
		return err == nil, retryable(err)
	})
	if err != nil {
		return errStep("A acquiring "+task, err)
	}
	p.a.epochA = g.Lease.Epoch
	p.logf("A", "claimed %s epoch=%d (lease valid for %dms on A's sidecar clock)", task, g.Lease.Epoch, g.Lease.RemainingMs)

	r := p.wA.Write(ctx, downURL, task, "step-1", body("A", "step-1", p.a.epochA))
	p.record(sentWrite{Worker: "A", Epoch: p.a.epochA, Action: "step-1", Result: r})
	if r.Outcome != Accepted {
		return errStep("A's step-1 write", fmt.Errorf("%s", describe(r)))
	}
	p.logf("A", "step-1 → the downstream accepted it (epoch=%d)", p.a.epochA)

	if err := p.wA.Checkpoint(ctx, task, "step-1", []byte(`{"done":["step-1"],"next":"step-2"}`)); err != nil {
		return errStep("A's checkpoint", err)
	}
	p.logf("A", "checkpoint seq=1 step=step-1 (next: step-2), acknowledged by the cluster")
	return nil
}

// keepWriting is A carrying on while cut off: a write every WriteEvery,
// the next step after each accepted one, the same step again after a
// refusal. It stops on stop, ctx, or after a bounded number of tries.
func (p *play) keepWriting(ctx context.Context, downURL string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(p.cfg.WriteEvery)
	defer t.Stop()
	step, blocked, accepted := 3, 0, 0
	maxTries := int((20*p.cfg.TTL + 30*time.Second) / p.cfg.WriteEvery)
	for try := 0; try < maxTries; try++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		action := fmt.Sprintf("step-%d", step)
		r := p.wA.Write(ctx, downURL, p.cfg.Task, action, body("A", action, p.a.epochA))
		p.record(sentWrite{Worker: "A", Epoch: p.a.epochA, Action: action, Result: r})
		switch r.Outcome {
		case Accepted:
			accepted++
			p.mu.Lock()
			cutoff := p.a.cutoff()
			p.mu.Unlock()
			switch {
			case !cutoff.IsZero() && !r.Sent.Before(cutoff):
				p.logf("A-side", "LET A's %s THROUGH after A's lease deadline and the downstream accepted it (epoch=%d): DOUBLE EXECUTION", action, p.a.epochA)
			case accepted == 1:
				p.logf("A", "%s → accepted (epoch=%d): A's sidecar still holds a current lease; A keeps writing every %v", action, p.a.epochA, p.cfg.WriteEvery)
			}
			step++
		case BlockedBySidecar:
			blocked++
			switch {
			case blocked == 1:
				p.logf("A", "wrote %d steps while cut off, each accepted while its lease was current", accepted)
				p.logf("A-side", "BLOCKED A's %s (409 %s): the local lease deadline has passed; the write never left", action, r.Code)
			case blocked%10 == 0:
				p.logf("A-side", "... %d of A's writes blocked so far", blocked)
			}
		default:
			p.logf("A", "%s → %s", action, describe(r))
		}
	}
}

// watchReclaim polls the cluster until A's lease is reclaimed, printing
// each status it sees.
func (p *play) watchReclaim(ctx context.Context) error {
	epochA := p.a.epochA
	last := lease.StatusActive
	p.transitions = []string{string(last)}
	limit := p.cfg.TTL + p.cfg.TTL/2 + 10*time.Second
	err := waitUntil(ctx, limit, 10*time.Millisecond, func() bool {
		st, _ := p.leaseStatus(ctx, epochA)
		if st == "" || st == last {
			return false
		}
		note := map[lease.Status]string{
			lease.StatusSuspectDead: "heartbeat overdue; A could still revive it within the grace",
			lease.StatusExpired:     "grace over; epoch " + fmt.Sprint(epochA) + " can never write again",
			lease.StatusReclaimed:   "resume guard passed; the task is claimable with its checkpoint",
		}[st]
		p.logf("cluster", "lease epoch=%d %s → %s: %s", epochA, last, st, note)
		p.transitions = append(p.transitions, string(st))
		if (st == lease.StatusExpired || st == lease.StatusReclaimed) && p.a.expiredAt.IsZero() {
			p.mu.Lock()
			p.a.expiredAt = time.Now()
			p.mu.Unlock()
		}
		last = st
		return st == lease.StatusReclaimed || !st.Live()
	})
	if err != nil {
		return errStep("the cluster reclaiming A's lease", err)
	}
	if last != lease.StatusReclaimed {
		return fmt.Errorf("the lease of A ended %s, not reclaimed", last)
	}
	return nil
}

func (p *play) bTakesOver(ctx context.Context, downURL string) error {
	task := p.cfg.Task
	var g proxy.GrantReply
	err := retry(ctx, 10*time.Second, func() (bool, error) {
		var err error
		g, err = p.wB.Claim(ctx)
		return err == nil, retryable(err)
	})
	if err != nil {
		return errStep("B claiming the task", err)
	}
	if g.Task.ID != task {
		return fmt.Errorf("the claim of B returned %q, not %q", g.Task.ID, task)
	}
	p.a.epochB = g.Lease.Epoch
	cp := g.Task.Checkpoint
	if cp == nil {
		p.logf("B", "claimed %s epoch=%d with NO checkpoint", task, g.Lease.Epoch)
	} else {
		p.a.resumed = cp.Seq == 1 && cp.Step == "step-1" && cp.Epoch == p.a.epochA
		p.logf("B", "claimed %s epoch=%d, resumes from checkpoint seq=%d step=%s (written by epoch=%d)",
			task, g.Lease.Epoch, cp.Seq, cp.Step, cp.Epoch)
	}
	r := p.wB.Write(ctx, downURL, task, "step-2", body("B", "step-2", p.a.epochB))
	p.record(sentWrite{Worker: "B", Epoch: p.a.epochB, Action: "step-2", Result: r})
	if r.Outcome != Accepted {
		return errStep("B's step-2 write", fmt.Errorf("%s", describe(r)))
	}
	p.logf("B", "step-2 → the downstream accepted it (epoch=%d)", p.a.epochB)
	// B retries step-2 (a lost reply, say): the same action id gives the
	// same Idempotency-Key, so the downstream must replay its first answer
	// instead of appending again.
	before := len(p.down.Accepted(task))
	r = p.wB.Write(ctx, downURL, task, "step-2", body("B", "step-2", p.a.epochB))
	p.a.retryReplayed = r.Outcome == Accepted && r.Replayed && len(p.down.Accepted(task)) == before
	p.logf("B", "retried step-2 → %s (replayed: %v, log still %d writes)", describe(r), r.Replayed, len(p.down.Accepted(task)))
	return nil
}

func (p *play) aReturns(ctx context.Context, downURL string, stopWriting func()) error {
	task := p.cfg.Task
	var down int64
	for _, l := range p.aLinks {
		down += l.Stats().BytesDown
	}
	for _, l := range p.aLinks {
		l.Restore()
	}
	p.logf("net", "A's link to the cluster is back")
	// The next heartbeat reply that reaches A's sidecar tells it the truth.
	limit := p.cfg.TTL + 10*time.Second
	if err := waitUntil(ctx, limit, 10*time.Millisecond, func() bool {
		var n int64
		for _, l := range p.aLinks {
			n += l.Stats().BytesDown
		}
		return n > down
	}); err != nil {
		return errStep("A's sidecar hearing from the cluster again", err)
	}
	// Give the sidecar a moment to act on the reply before A looks.
	if err := waitUntil(ctx, 2*time.Second, 20*time.Millisecond, func() bool {
		v, err := p.wA.Lease(ctx, task)
		return err == nil && !v.Current
	}); err != nil {
		return errStep("A's lease view turning not current", err)
	}
	stopWriting()
	v, err := p.wA.Lease(ctx, task)
	if err != nil {
		return errStep("A reading its lease view", err)
	}
	if v.TaskID == "" {
		p.logf("A", "asks its sidecar about %s: no lease held any more — A learns it lost the task", task)
	} else {
		p.logf("A", "asks its sidecar about %s: epoch=%d current=%v status=%q — A learns it lost the task", task, v.Epoch, v.Current, v.Status)
	}
	action := "step-after-return"
	r := p.wA.Write(ctx, downURL, task, action, body("A", action, p.a.epochA))
	p.record(sentWrite{Worker: "A", Epoch: p.a.epochA, Action: action, Result: r})
	if r.Outcome == BlockedBySidecar {
		p.logf("A-side", "REFUSED A's write after the link returned (409 %s); A stops", r.Code)
	} else {
		p.logf("A", "write after the link returned → %s", describe(r))
	}
	return nil
}

// retry calls f until it reports done, a non-retryable error, or limit.
func retry(ctx context.Context, limit time.Duration, f func() (bool, error)) error {
	var last error
	err := waitUntil(ctx, limit, 20*time.Millisecond, func() bool {
		done, err := f()
		if err != nil {
			last = err
			return true
		}
		return done
	})
	if last != nil {
		return last
	}
	return err
}

// retryable returns nil for errors worth retrying (no session yet,
// nothing claimable yet, a cluster hiccup) and err otherwise.
func retryable(err error) error {
	var pe *ProblemError
	if err == nil || !errors.As(err, &pe) {
		return nil
	}
	switch {
	case pe.Status == http.StatusServiceUnavailable, pe.Status == http.StatusBadGateway, pe.Status == http.StatusGatewayTimeout:
		return nil
	case pe.Status == http.StatusNotFound, pe.Status == http.StatusConflict:
		return nil // nothing claimable yet, or not yet reclaimed
	}
	return err
}

// waitUntil polls cond every interval until it holds, limit passes, or
// ctx ends.
func waitUntil(ctx context.Context, limit, interval time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return poll(ctx, interval, func() (bool, error) { return cond(), nil })
}

func body(worker, action string, epoch uint64) []byte {
	return fmt.Appendf(nil, `{"worker":%q,"action":%q,"epoch":%d}`, worker, action, epoch)
}

func describe(r WriteResult) string {
	switch r.Outcome {
	case Accepted:
		return fmt.Sprintf("accepted (%d)", r.Status)
	case Failed:
		if r.Err != nil {
			return fmt.Sprintf("failed: %v", r.Err)
		}
	}
	return fmt.Sprintf("%s (%d %s)", r.Outcome, r.Status, r.Code)
}
