package fault

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/test/netfault"
	"github.com/fencepost/fencepost/test/scenario"
)

// lossPhase is one stretch of the link's behaviour.
type lossPhase struct {
	name  string
	delay time.Duration
	loss  float64
	dur   time.Duration
}

// TestLossAndDelayOnSidecarClusterLink degrades the link between a
// worker's sidecar and the cluster — delay, then partial loss, then total
// loss past TTL + grace — while the worker writes every 40ms. I4: no
// write sent while the sidecar considered the lease lost (between a
// "lost" event and the next "revived"/"acquired") reaches the downstream,
// and the sidecar blocked writes once the lease could not be renewed; the
// cluster's expiry of the epoch is never followed by an accepted write of
// it. I7: once the link heals, the worker gets the task again within
// TTL + election + 1s.
func TestLossAndDelayOnSidecarClusterLink(t *testing.T) {
	const ttl, grace, election = 2 * time.Second, time.Second, 300 * time.Millisecond
	e := newEnv(t, scenario.ClusterConfig{TTL: ttl, Grace: grace, ElectionTimeout: election}, 60*time.Second)
	seed := time.Now().UnixNano()
	e.logf("test", "seed %d", seed)
	const task = "lossy"

	var links []*netfault.Link
	var endpoints []string
	for _, ep := range e.cluster.Endpoints() {
		l, err := netfault.Listen(ep, netfault.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		links = append(links, l)
		endpoints = append(endpoints, l.Addr())
	}
	_, w := e.sidecar("A", endpoints)

	var mu sync.Mutex
	var events []proxy.Event
	evCtx, evCancel := context.WithCancel(e.ctx)
	evDone, err := w.Events(evCtx, func(ev proxy.Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
		e.logf("A-side", "event %s epoch=%d %s", ev.Kind, ev.Epoch, ev.Reason)
	})
	require.NoError(t, err)
	defer func() { evCancel(); <-evDone }()

	e.acquire(w, task, false)

	type sent struct {
		key string
		r   scenario.WriteResult
	}
	var writes []sent
	stop, writerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(writerDone)
		tk := time.NewTicker(40 * time.Millisecond)
		defer tk.Stop()
		for i := 0; i < 1000; i++ {
			select {
			case <-stop:
				return
			case <-e.ctx.Done():
				return
			case <-tk.C:
			}
			key := fmt.Sprintf("lossy-w-%d", i)
			r := w.WriteKey(e.ctx, e.down.WriteURL(task), task, key, []byte(`{}`))
			mu.Lock()
			writes = append(writes, sent{key: key, r: r})
			mu.Unlock()
		}
	}()
	count := func() (acc, blocked, other int) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range writes {
			switch s.r.Outcome {
			case scenario.Accepted:
				acc++
			case scenario.BlockedBySidecar:
				blocked++
			default:
				other++
			}
		}
		return
	}

	phases := []lossPhase{
		{name: "delay 100ms", delay: 100 * time.Millisecond, dur: 1500 * time.Millisecond},
		{name: "delay 50ms + loss 30%", delay: 50 * time.Millisecond, loss: 0.3, dur: 1500 * time.Millisecond},
		{name: "total loss", loss: 1, dur: ttl + grace + time.Second},
	}
	for i, ph := range phases {
		for _, l := range links {
			l.SetDelay(ph.delay)
			l.SetLoss(ph.loss, seed+int64(i))
		}
		a0, b0, o0 := count()
		time.Sleep(ph.dur) // the fault lasts this long; the writer runs meanwhile
		a1, b1, o1 := count()
		e.logf("net", "%s for %v: %d writes accepted, %d blocked by the sidecar, %d other", ph.name, ph.dur, a1-a0, b1-b0, o1-o0)
	}
	_, blocked, _ := count()
	require.Positive(t, blocked, "I4: the sidecar blocked writes once the lease could not be renewed")

	for _, l := range links {
		l.SetLoss(0, seed)
		l.SetDelay(0)
	}
	healed := time.Now()
	e.logf("net", "link healed")
	c := e.client(true)
	var g2 proxy.GrantReply
	eventually(t, ttl+grace+5*time.Second, 20*time.Millisecond, "A holding the task again", func() bool {
		if v, err := w.Lease(e.ctx, task); err == nil && v.Current {
			return true // revived: it never lost it for good
		}
		var err error
		g2, err = w.Acquire(e.ctx, task)
		return err == nil
	})
	back := time.Since(healed)
	e.logf("A", "holds %s again %v after the heal (epoch %d)", task, back.Round(time.Millisecond), g2.Lease.Epoch)
	require.LessOrEqual(t, back, ttl+election+time.Second, "I7")
	close(stop)
	<-writerDone

	// I4 against the sidecar's own events: nothing sent and answered
	// entirely inside a lost stretch was accepted.
	mu.Lock()
	evs := append([]proxy.Event(nil), events...)
	ws := append([]sent(nil), writes...)
	mu.Unlock()
	type stretch struct{ from, to time.Time }
	lost := map[uint64][]stretch{}
	for _, ev := range evs {
		switch ev.Kind {
		case proxy.EventLost, proxy.EventRevoked:
			lost[ev.Epoch] = append(lost[ev.Epoch], stretch{from: ev.At})
		case proxy.EventRevived, proxy.EventAcquired:
			if s := lost[ev.Epoch]; len(s) > 0 && s[len(s)-1].to.IsZero() {
				s[len(s)-1].to = ev.At
			}
		}
	}
	// The epoch each accepted write carried, from the downstream's log.
	epochOf := map[string]uint64{}
	for _, a := range e.down.Accepted(task) {
		epochOf[a.IdempotencyKey] = a.Epoch
	}
	for _, s := range ws {
		if s.r.Outcome != scenario.Accepted {
			continue
		}
		epoch, ok := epochOf[s.key]
		require.True(t, ok, "accepted write %s is in the downstream's log", s.key)
		for _, st := range lost[epoch] {
			inside := !s.r.Sent.Before(st.from) && (st.to.IsZero() || s.r.Done.Before(st.to))
			require.False(t, inside, "I4: a write sent at %v after the lease was lost at %v was accepted", s.r.Sent, st.from)
		}
	}
	// And against the cluster: no write of an epoch accepted after the
	// cluster moved that epoch past active for good.
	tk, err := c.Task(e.ctx, task, false)
	require.NoError(t, err)
	for _, h := range tk.History() {
		if h.Status.Live() {
			continue
		}
		for _, a := range e.down.Accepted(task) {
			if a.Epoch == h.Epoch {
				require.True(t, a.At.Before(h.StatusAt.Time()), "a write of epoch %d was accepted after the cluster ended it (%s at %v)", h.Epoch, h.Status, h.StatusAt)
			}
		}
	}
	require.NoError(t, checkI3(task, e.down.Accepted(task)))
}
