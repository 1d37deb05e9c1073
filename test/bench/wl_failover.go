package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// wlFailover names workload 4.
const wlFailover = "4 failover"

// killable is a 3-node cluster whose leader the harness can SIGKILL and
// bring back.
type killable interface {
	name() string
	waitLeader(d time.Duration) (int, error)
	kill(i int)
	restart(i int) error
	endpoints() []string
}

// probe makes one acquire attempt against endpoint index i with attempt
// number n; it returns nil once an acquire has succeeded.
type probe func(ctx context.Context, i, n int) error

// failoverOnce kills the leader of k, then starts an acquire attempt every
// 20 ms against the surviving nodes in turn (each attempt may take up to
// 2 s, so a request parked during the election still counts when it
// completes) and returns the time from the SIGKILL to the first success.
// It then restarts the killed node and waits until the cluster is whole.
// Bounded: 20 s and 1,000 attempts.
func failoverOnce(k killable, try probe) (time.Duration, string, error) {
	victim, err := k.waitLeader(10 * time.Second)
	if err != nil {
		return 0, "", err
	}
	var survivors []int
	for i := range k.endpoints() {
		if i != victim {
			survivors = append(survivors, i)
		}
	}
	// Warm the connections to the survivors: the first acquire after the
	// kill must not pay a dial the steady state would not. A warm-up that
	// fails is retried (bounded: 50 attempts, 10 s) and reported, since a
	// node that needs retries right after a restart is worth knowing about.
	var warmNote string
	for _, s := range survivors {
		deadline := time.Now().Add(10 * time.Second)
		var err error
		fails := 0
		for a := 0; a < 50 && time.Now().Before(deadline); a++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = try(ctx, s, -1000*(s+1)-a)
			cancel()
			if err == nil {
				break
			}
			if fails++; fails == 1 {
				warmNote = fmt.Sprintf("node %d: %v", s, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return 0, warmNote, fmt.Errorf("warm-up acquire on node %d: %w", s, err)
		}
		if fails > 0 {
			warmNote = fmt.Sprintf("%d failed warm-up attempt(s) before success, first: %s", fails, warmNote)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t0 := time.Now()
	k.kill(victim)
	var done atomic.Int64 // nanoseconds from t0 of the first success
	var wg sync.WaitGroup
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastErr atomic.Value
	for n := 0; n < 1000 && done.Load() == 0 && ctx.Err() == nil; n++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			defer acancel()
			if err := try(actx, survivors[n%len(survivors)], n); err != nil {
				lastErr.Store(err.Error())
				return
			}
			done.CompareAndSwap(0, int64(time.Since(t0)))
		}()
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	cancel()
	wg.Wait()
	d := time.Duration(done.Load())
	rerr := k.restart(victim)
	if d == 0 {
		msg, _ := lastErr.Load().(string)
		return 0, warmNote, fmt.Errorf("no acquire succeeded within 20 s after the kill: %s", msg)
	}
	if rerr != nil {
		return d, warmNote, fmt.Errorf("restart after failover: %w", rerr)
	}
	return d, warmNote, nil
}

// failoverSide is one cluster and how to make its acquire probe. A fresh
// probe (fresh client connections) is made for every rep, so a pooled
// connection to a node killed in an earlier rep is never reused.
type failoverSide struct {
	k        killable
	newProbe func() (probe, func(), error)
}

// failover runs workload 4: rep by rep, each side in turn loses its leader.
// A side that fails a rep is retried no further that rep; its error is
// logged and kept in the raw JSON.
func failover(res *Results, reps int, sides []failoverSide, note string) {
	warned := map[string]bool{}
	for rep := 1; rep <= reps; rep++ {
		for _, s := range sides {
			var d time.Duration
			var warm string
			pr, closeFn, err := s.newProbe()
			if err == nil {
				d, warm, err = failoverOnce(s.k, pr)
				closeFn()
			}
			if warm != "" && !warned[s.k.name()] {
				warned[s.k.name()] = true
				res.Notes = append(res.Notes, fmt.Sprintf("Failover, %s, rep %d: the warm-up acquire on a survivor (before the kill, not timed) %s", s.k.name(), rep, warm))
			}
			m := Measure{Ops: 1, Elapsed: d, P50: d, P99: d}
			if err != nil {
				m.Errors, m.FirstEr = 1, err.Error()
			}
			run := Run{Workload: wlFailover, Case: "SIGKILL leader", System: s.k.name(), Rep: rep, Measure: m}
			if d > 0 {
				run.Extra = map[string]float64{"ms": ms(d)}
			}
			res.add(run)
			logf("%s %s rep %d: %.0f ms %s", wlFailover, s.k.name(), rep, ms(d), m.FirstEr)
			time.Sleep(500 * time.Millisecond) // let the rejoined node settle
		}
	}
	for _, s := range sides[1:] {
		res.row(wlFailover, "SIGKILL leader", "ms to next acquire", false, sides[0].k.name(), s.k.name(), extra("ms"))
	}
	if note != "" {
		res.Notes = append(res.Notes, note)
	}
}

// fpProbe makes probes that acquire (and give back) a fresh task through
// session sid on node i.
func fpProbe(c *fpCluster, sid string) func() (probe, func(), error) {
	return func() (probe, func(), error) {
		clients := make([]*fpClient, len(c.nodes))
		for i, n := range c.nodes {
			clients[i] = newFPClient(n.httpAddr, 64, 2*time.Second)
		}
		tag := time.Now().UnixNano()
		return func(ctx context.Context, i, n int) error {
			task := fmt.Sprintf("fo-%d-%d", tag, n)
			e, err := clients[i].acquire(task, sid, benchProfile)
			if err != nil {
				return err
			}
			return clients[i].release(task, sid, e)
		}, func() {}, nil
	}
}

// etcdProbe makes probes that run the etcd acquire recipe on member i.
func etcdProbe(c *etcdCluster) func() (probe, func(), error) {
	return func() (probe, func(), error) { return etcdProbeOnce(c) }
}

// etcdProbeOnce connects one client per member and returns the probe.
func etcdProbeOnce(c *etcdCluster) (probe, func(), error) {
	var cls []*clientv3.Client
	for _, u := range c.endpoints() {
		cli, err := newEtcdClient(u)
		if err != nil {
			return nil, nil, err
		}
		cls = append(cls, cli)
	}
	closeAll := func() {
		for _, c := range cls {
			c.Close()
		}
	}
	tag := time.Now().UnixNano()
	return func(ctx context.Context, i, n int) error {
		key := fmt.Sprintf("/fo/%d/%d", tag, n)
		return etcdAcquire(ctx, cls[i], key, func(id clientv3.LeaseID) error {
			_, err := cls[i].Revoke(ctx, id)
			return err
		})
	}, closeAll, nil
}
