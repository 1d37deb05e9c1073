package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Workload names, as they appear in the table and the raw JSON.
const (
	wlAcquire    = "1 acquire+release"
	wlHeartbeat  = "2 heartbeats"
	wlCheckpoint = "3 fenced checkpoint writes"
)

// System labels.
const (
	sysFP         = "fencepost"
	sysEtcd       = "etcd"
	sysEtcdUnary  = "etcd KeepAliveOnce"
	sysEtcdStream = "etcd keepalive stream"
)

// opTimeout bounds one request of a lease workload.
const opTimeout = 5 * time.Second

// checkpointData is the payload of every checkpoint write, on both sides.
var checkpointData = make([]byte, 256)

// leaseBench holds both systems' clients for the lease workloads.
type leaseBench struct {
	plan   Plan
	fpAddr string // the fencepost leader's HTTP address
	etcd   string // the etcd leader's client URL
	res    *Results
	fpSess *sessionPool
	// fpPids and etcdPids list each cluster's node PIDs, for CPU metering.
	fpPids, etcdPids func() []int
	// fpLeader finds the fencepost leader's HTTP address again: on two
	// shared cores leadership can move during a workload, and a run sent
	// to a follower would measure forwarding, not the cluster.
	fpLeader func() (string, error)
	run      atomic.Int64 // distinguishes keys and task ids between runs
}

// fpTarget returns the address a fencepost measurement should use: the
// current leader, noting in the log when leadership moved.
func (lb *leaseBench) fpTarget() string {
	if lb.fpLeader == nil || lb.fpAddr == "" {
		return lb.fpAddr
	}
	if addr, err := lb.fpLeader(); err == nil && addr != lb.fpAddr {
		logf("fencepost leadership moved: %s -> %s", lb.fpAddr, addr)
		lb.fpAddr = addr
	}
	return lb.fpAddr
}

// sessionPool is a set of fencepost sessions the harness keeps alive with
// a slow background heartbeat (every 2 s), so they never lapse between
// workloads. Its traffic is a few dozen requests per second at most.
type sessionPool struct {
	ids  []string
	stop chan struct{}
	wg   sync.WaitGroup
}

// newSessionPool opens n sessions through the first of cls; the keeper
// heartbeats through any of cls, moving on when one fails (its node may
// have been killed by the failover workload).
func newSessionPool(cls []*fpClient, n int, tag string) (*sessionPool, error) {
	p := &sessionPool{stop: make(chan struct{})}
	for i := 0; i < n; i++ {
		sid, err := cls[0].openSession(fmt.Sprintf("%s-%d", tag, i))
		if err != nil {
			return nil, fmt.Errorf("open session: %w", err)
		}
		p.ids = append(p.ids, sid)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		k := 0
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				for _, sid := range p.ids {
					if _, err := cls[k%len(cls)].heartbeat(sid, nil); err != nil {
						k++
					}
				}
			}
		}
	}()
	return p, nil
}

// close stops the background heartbeats.
func (p *sessionPool) close() {
	close(p.stop)
	p.wg.Wait()
}

// etcdClients returns n clients to the etcd leader; workers share them
// round-robin (one gRPC connection per 16 workers).
func (lb *leaseBench) etcdClients(c int) ([]*clientv3.Client, func(), error) {
	n := (c + 15) / 16
	var cls []*clientv3.Client
	closeAll := func() {
		for _, cl := range cls {
			cl.Close()
		}
	}
	for i := 0; i < n; i++ {
		cl, err := newEtcdClient(lb.etcd)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		cls = append(cls, cl)
	}
	return cls, closeAll, nil
}

// acquireRelease runs workload 1 for both systems at every concurrency,
// alternating fencepost and etcd rep by rep.
func (lb *leaseBench) acquireRelease() {
	for _, c := range lb.plan.Conc {
		cs := fmt.Sprintf("C=%d", c)
		for rep := 1; rep <= lb.plan.Reps; rep++ {
			m := lb.fpAcquireRelease(c)
			lb.res.add(Run{Workload: wlAcquire, Case: cs, System: sysFP, Rep: rep, Measure: m})
			logf("%s %s fencepost rep %d: %.0f/s p50 %.2fms errs %d %s", wlAcquire, cs, rep, m.Rate, ms(m.P50), m.Errors, m.FirstEr)
			m = lb.etcdAcquireRelease(c)
			lb.res.add(Run{Workload: wlAcquire, Case: cs, System: sysEtcd, Rep: rep, Measure: m})
			logf("%s %s etcd rep %d: %.0f/s p50 %.2fms errs %d %s", wlAcquire, cs, rep, m.Rate, ms(m.P50), m.Errors, m.FirstEr)
		}
		lb.res.row(wlAcquire, cs, "cycles/s", true, sysFP, sysEtcd, rate)
		lb.res.row(wlAcquire, cs, "p50 ms", false, sysFP, sysEtcd, p50ms)
		lb.res.row(wlAcquire, cs, "p99 ms", false, sysFP, sysEtcd, p99ms)
		lb.res.row(wlAcquire, cs, "server CPU µs/cycle", false, sysFP, sysEtcd, cpuPerOp)
	}
}

// errNoFP is the measure of a fencepost run when the cluster is missing.
var errNoFP = Measure{Errors: 1, FirstEr: "fencepost cluster not available"}

// fpAcquireRelease: each worker acquires its own task (created on first
// use) and gives it back, over and over. A failed cycle moves the worker to
// a fresh task so a half-done cycle cannot wedge it.
func (lb *leaseBench) fpAcquireRelease(c int) Measure {
	if lb.fpAddr == "" {
		return errNoFP
	}
	cl := newFPClient(lb.fpTarget(), c, opTimeout)
	run := lb.run.Add(1)
	gen := make([]int, c)
	return metered(lb.fpPids(), func() Measure {
		return closedLoop(c, lb.plan.Dur, lb.plan.MaxOps, func(ctx context.Context, w int) error {
			task := fmt.Sprintf("ar-%d-%d-%d", run, w, gen[w])
			sid := lb.fpSess.ids[w%len(lb.fpSess.ids)]
			epoch, err := cl.acquire(task, sid, benchProfile)
			if err == nil {
				err = cl.release(task, sid, epoch)
			}
			if err != nil {
				gen[w]++
			}
			return err
		})
	})
}

// etcdAcquireRelease: lease grant, compare-and-create of the task key
// under that lease, then revoke (which deletes the key) — the usual etcd
// lock recipe, three round trips.
func (lb *leaseBench) etcdAcquireRelease(c int) Measure {
	cls, closeAll, err := lb.etcdClients(c)
	if err != nil {
		return Measure{Errors: 1, FirstEr: err.Error()}
	}
	defer closeAll()
	run := lb.run.Add(1)
	gen := make([]int, c)
	return metered(lb.etcdPids(), func() Measure {
		return closedLoop(c, lb.plan.Dur, lb.plan.MaxOps, func(ctx context.Context, w int) error {
			cli := cls[w%len(cls)]
			key := fmt.Sprintf("/ar/%d/%d/%d", run, w, gen[w])
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			defer cancel()
			err := etcdAcquire(octx, cli, key, func(id clientv3.LeaseID) error {
				_, err := cli.Revoke(octx, id)
				return err
			})
			if err != nil {
				gen[w]++
			}
			return err
		})
	})
}

// etcdAcquire grants a lease, creates key under it if absent, runs then
// with the lease id, and reports a lost compare as an error.
func etcdAcquire(ctx context.Context, cli *clientv3.Client, key string, then func(clientv3.LeaseID) error) error {
	g, err := cli.Grant(ctx, benchTTL)
	if err != nil {
		return err
	}
	r, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "holder", clientv3.WithLease(g.ID))).
		Commit()
	if err != nil {
		return err
	}
	if !r.Succeeded {
		return fmt.Errorf("key %s already held", key)
	}
	return then(g.ID)
}

// checkpoints runs workload 3: each worker holds one lease and writes
// checkpoints under its fencing token.
func (lb *leaseBench) checkpoints() {
	for _, c := range lb.plan.Conc {
		cs := fmt.Sprintf("C=%d", c)
		for rep := 1; rep <= lb.plan.Reps; rep++ {
			m := lb.fpCheckpoints(c)
			lb.res.add(Run{Workload: wlCheckpoint, Case: cs, System: sysFP, Rep: rep, Measure: m})
			logf("%s %s fencepost rep %d: %.0f/s p50 %.2fms errs %d %s", wlCheckpoint, cs, rep, m.Rate, ms(m.P50), m.Errors, m.FirstEr)
			m = lb.etcdCheckpoints(c)
			lb.res.add(Run{Workload: wlCheckpoint, Case: cs, System: sysEtcd, Rep: rep, Measure: m})
			logf("%s %s etcd rep %d: %.0f/s p50 %.2fms errs %d %s", wlCheckpoint, cs, rep, m.Rate, ms(m.P50), m.Errors, m.FirstEr)
		}
		lb.res.row(wlCheckpoint, cs, "writes/s", true, sysFP, sysEtcd, rate)
		lb.res.row(wlCheckpoint, cs, "p50 ms", false, sysFP, sysEtcd, p50ms)
		lb.res.row(wlCheckpoint, cs, "p99 ms", false, sysFP, sysEtcd, p99ms)
		lb.res.row(wlCheckpoint, cs, "server CPU µs/write", false, sysFP, sysEtcd, cpuPerOp)
	}
}

// fpCheckpoints: acquire one task per worker (not timed), then write
// checkpoints carrying the epoch; the cluster rejects a stale epoch.
func (lb *leaseBench) fpCheckpoints(c int) Measure {
	if lb.fpAddr == "" {
		return errNoFP
	}
	cl := newFPClient(lb.fpTarget(), c, opTimeout)
	run := lb.run.Add(1)
	tasks, epochs := make([]string, c), make([]uint64, c)
	for w := 0; w < c; w++ {
		tasks[w] = fmt.Sprintf("ck-%d-%d", run, w)
		e, err := cl.acquire(tasks[w], lb.fpSess.ids[w%len(lb.fpSess.ids)], benchProfile)
		if err != nil {
			return Measure{Errors: 1, FirstEr: "setup: " + err.Error()}
		}
		epochs[w] = e
	}
	defer func() {
		for w := 0; w < c; w++ {
			_ = cl.release(tasks[w], lb.fpSess.ids[w%len(lb.fpSess.ids)], epochs[w])
		}
	}()
	return metered(lb.fpPids(), func() Measure {
		return closedLoop(c, lb.plan.Dur, lb.plan.MaxOps, func(ctx context.Context, w int) error {
			return cl.checkpoint(tasks[w], lb.fpSess.ids[w%len(lb.fpSess.ids)], epochs[w], "step", checkpointData)
		})
	})
}

// etcdCheckpoints: acquire one lock key per worker (not timed), then a txn
// that compares the lock key's create revision (the holder's fencing
// token) and only then puts the checkpoint.
func (lb *leaseBench) etcdCheckpoints(c int) Measure {
	cls, closeAll, err := lb.etcdClients(c)
	if err != nil {
		return Measure{Errors: 1, FirstEr: err.Error()}
	}
	defer closeAll()
	run := lb.run.Add(1)
	revs, leases := make([]int64, c), make([]clientv3.LeaseID, c)
	for w := 0; w < c; w++ {
		cli := cls[w%len(cls)]
		key := fmt.Sprintf("/ck/%d/%d/lock", run, w)
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		err := etcdAcquire(ctx, cli, key, func(id clientv3.LeaseID) error {
			leases[w] = id
			g, err := cli.Get(ctx, key)
			if err == nil && len(g.Kvs) == 1 {
				revs[w] = g.Kvs[0].CreateRevision
			}
			return err
		})
		cancel()
		if err != nil {
			return Measure{Errors: 1, FirstEr: "setup: " + err.Error()}
		}
	}
	defer func() {
		for w := 0; w < c; w++ {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			_, _ = cls[w%len(cls)].Revoke(ctx, leases[w])
			cancel()
		}
	}()
	return metered(lb.etcdPids(), func() Measure {
		return closedLoop(c, lb.plan.Dur, lb.plan.MaxOps, func(ctx context.Context, w int) error {
			cli := cls[w%len(cls)]
			lock, ckpt := fmt.Sprintf("/ck/%d/%d/lock", run, w), fmt.Sprintf("/ck/%d/%d/checkpoint", run, w)
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			defer cancel()
			r, err := cli.Txn(octx).
				If(clientv3.Compare(clientv3.CreateRevision(lock), "=", revs[w])).
				Then(clientv3.OpPut(ckpt, string(checkpointData))).
				Commit()
			if err == nil && !r.Succeeded {
				err = fmt.Errorf("fencing compare failed for %s", lock)
			}
			return err
		})
	})
}

// keepAliveStream measures etcd's keepalive stream: each worker opens one
// LeaseKeepAlive stream and keeps up to window requests in flight on it,
// cycling over the granted leases. The server answers a stream in order,
// so latency is taken from a FIFO of send times.
func keepAliveStream(cls []*clientv3.Client, ids []clientv3.LeaseID, c int, d time.Duration, maxOps int64) Measure {
	const window = 8
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var sent, errs, next atomic.Int64
	var firstErr atomic.Value
	lats := make([]*latencies, c)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < c; w++ {
		lats[w] = &latencies{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lc := pb.NewLeaseClient(cls[w%len(cls)].ActiveConnection())
			st, err := lc.LeaseKeepAlive(ctx)
			if err != nil {
				firstErr.CompareAndSwap(nil, err.Error())
				errs.Add(1)
				return
			}
			times := make(chan time.Time, window)
			go func() {
				defer st.CloseSend()
				for ctx.Err() == nil && sent.Add(1) <= maxOps {
					select {
					case times <- time.Now():
					case <-ctx.Done():
						return
					}
					id := ids[int(next.Add(1))%len(ids)]
					if err := st.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
						return
					}
				}
			}()
			for {
				r, err := st.Recv()
				if err != nil {
					if ctx.Err() == nil {
						firstErr.CompareAndSwap(nil, err.Error())
						errs.Add(1)
					}
					return
				}
				t := <-times
				if r.TTL <= 0 {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("lease %x not renewed", r.ID))
					continue
				}
				lats[w].add(time.Since(t))
				if sent.Load() > maxOps && len(times) == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	return finish(lats, errs.Load(), time.Since(t0), &firstErr)
}
