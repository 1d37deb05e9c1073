package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// heartbeats runs workload 2. Fencepost: S sessions each holding L leases;
// one heartbeat renews a session and all its leases. etcd: S·L leases (a
// task lease is an etcd lease there); one keepalive renews one lease, sent
// either as KeepAliveOnce (a short-lived stream per call, the client's
// unary form) or on long-lived keepalive streams.
func (lb *leaseBench) heartbeats() error {
	S, L := lb.plan.Sessions, lb.plan.LeasesPer
	held, sids, err := lb.fpHeartbeatSetup(S, L)
	if err != nil {
		logf("%s: fencepost setup: %v", wlHeartbeat, err)
		sids = nil
	}
	cls, closeAll, err := lb.etcdClients(64)
	if err != nil {
		return err
	}
	defer closeAll()
	ids, err := etcdGrantMany(cls, S*L, 32, nil)
	if err != nil {
		return fmt.Errorf("etcd heartbeat setup: %w", err)
	}
	logf("%s: %d sessions x %d leases ready on both", wlHeartbeat, S, L)
	for _, c := range lb.plan.Conc {
		cs := fmt.Sprintf("C=%d", c)
		for rep := 1; rep <= lb.plan.Reps; rep++ {
			m := lb.fpHeartbeat(c, sids, held)
			lb.res.add(Run{Workload: wlHeartbeat, Case: cs, System: sysFP, Rep: rep, Measure: m,
				Extra: map[string]float64{"renewals/s": m.Rate * float64(L), "cpu µs/renewal": m.ServerUsPerOp / float64(L)}})
			logf("%s %s fencepost rep %d: %.0f hb/s (%.0f renewals/s) p50 %.2fms errs %d %s", wlHeartbeat, cs, rep, m.Rate, m.Rate*float64(L), ms(m.P50), m.Errors, m.FirstEr)

			var next atomic.Int64
			m = metered(lb.etcdPids(), func() Measure {
				return closedLoop(c, lb.plan.Dur, lb.plan.MaxOps, func(ctx context.Context, w int) error {
					id := ids[int(next.Add(1))%len(ids)]
					octx, cancel := context.WithTimeout(ctx, opTimeout)
					defer cancel()
					r, err := cls[w%len(cls)].KeepAliveOnce(octx, id)
					if err == nil && r.TTL <= 0 {
						err = fmt.Errorf("lease %x not renewed", id)
					}
					return err
				})
			})
			lb.res.add(Run{Workload: wlHeartbeat, Case: cs, System: sysEtcdUnary, Rep: rep, Measure: m,
				Extra: map[string]float64{"renewals/s": m.Rate, "cpu µs/renewal": m.ServerUsPerOp}})
			logf("%s %s etcd unary rep %d: %.0f/s p50 %.2fms errs %d %s", wlHeartbeat, cs, rep, m.Rate, ms(m.P50), m.Errors, m.FirstEr)

			m = metered(lb.etcdPids(), func() Measure { return keepAliveStream(cls, ids, c, lb.plan.Dur, lb.plan.MaxOps) })
			lb.res.add(Run{Workload: wlHeartbeat, Case: cs, System: sysEtcdStream, Rep: rep, Measure: m,
				Extra: map[string]float64{"renewals/s": m.Rate, "cpu µs/renewal": m.ServerUsPerOp}})
			logf("%s %s etcd stream rep %d: %.0f/s p50 %.2fms errs %d %s", wlHeartbeat, cs, rep, m.Rate, ms(m.P50), m.Errors, m.FirstEr)
		}
		for _, peer := range []string{sysEtcdUnary, sysEtcdStream} {
			lb.res.row(wlHeartbeat, cs, "heartbeats/s", true, sysFP, peer, rate)
			lb.res.row(wlHeartbeat, cs, "renewals/s", true, sysFP, peer, extra("renewals/s"))
			lb.res.row(wlHeartbeat, cs, "p50 ms", false, sysFP, peer, p50ms)
			lb.res.row(wlHeartbeat, cs, "p99 ms", false, sysFP, peer, p99ms)
			lb.res.row(wlHeartbeat, cs, "server CPU µs/renewal", false, sysFP, peer, extra("cpu µs/renewal"))
		}
	}
	return nil
}

// fpHeartbeatSetup opens S sessions and acquires L tasks through each,
// with 32 workers; it returns each session's held leases.
func (lb *leaseBench) fpHeartbeatSetup(S, L int) ([][]fpHeld, []string, error) {
	if lb.fpAddr == "" {
		return nil, nil, fmt.Errorf("cluster not available")
	}
	cl := newFPClient(lb.fpAddr, 32, opTimeout)
	run := lb.run.Add(1)
	held, sids := make([][]fpHeld, S), make([]string, S)
	err := parallel(S, 32, func(s int) error {
		sid, err := cl.openSession(fmt.Sprintf("hb-%d-%d", run, s))
		if err != nil {
			return err
		}
		sids[s] = sid
		for l := 0; l < L; l++ {
			task := fmt.Sprintf("hb-%d-%d-%d", run, s, l)
			e, err := cl.acquire(task, sid, benchProfile)
			if err != nil {
				return err
			}
			held[s] = append(held[s], fpHeld{TaskID: task, Epoch: e})
		}
		return nil
	})
	return held, sids, err
}

// fpHeartbeat sends heartbeats round-robin over the sessions; each names
// the session's leases, and only a reply renewing all of them counts.
func (lb *leaseBench) fpHeartbeat(c int, sids []string, held [][]fpHeld) Measure {
	if len(sids) == 0 {
		return errNoFP
	}
	cl := newFPClient(lb.fpTarget(), c, opTimeout)
	beats := make([]fpBeat, len(sids))
	for s := range sids {
		beats[s] = newBeat(sids[s], held[s])
	}
	var next atomic.Int64
	return metered(lb.fpPids(), func() Measure {
		return closedLoop(c, lb.plan.Dur, lb.plan.MaxOps, func(ctx context.Context, w int) error {
			_, err := cl.beat(beats[int(next.Add(1))%len(beats)])
			return err
		})
	})
}

// etcdGrantMany grants n leases of benchTTL with the given parallelism;
// with keys set, lease i also gets key keys(i) attached (the task record).
func etcdGrantMany(cls []*clientv3.Client, n, par int, keys func(i int) string) ([]clientv3.LeaseID, error) {
	ids := make([]clientv3.LeaseID, n)
	err := parallel(n, par, func(i int) error {
		cli := cls[i%len(cls)]
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if keys != nil {
			return etcdAcquire(ctx, cli, keys(i), func(id clientv3.LeaseID) error { ids[i] = id; return nil })
		}
		g, err := cli.Grant(ctx, benchTTL)
		if err == nil {
			ids[i] = g.ID
		}
		return err
	})
	return ids, err
}

// parallel runs f(0..n-1) on par goroutines and returns the first error;
// after an error no new items start.
func parallel(n, par int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var failed atomic.Bool
	var wg sync.WaitGroup
	for g := 0; g < par; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	return first
}
