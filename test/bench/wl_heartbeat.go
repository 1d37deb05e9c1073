package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/fencepost/fencepost/fence/api"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// sysFPUnary is fencepost's unary heartbeat (one POST per beat); sysFP
// in this workload is the heartbeat stream, the sidecar's default.
const sysFPUnary = "fencepost unary"

// sysFPStream1 is the heartbeat stream with one beat in flight per stream,
// as a sidecar sends them: as many beats in flight as the unary path, so
// their latencies compare without the deeper queue of the full window.
const sysFPStream1 = "fencepost stream, 1 in flight"

// heartbeats runs workload 2. Fencepost: S sessions each holding L leases;
// one heartbeat renews a session and all its leases. etcd: S·L leases (a
// task lease is an etcd lease there); one keepalive renews one lease, sent
// either as KeepAliveOnce (a short-lived stream per call, the client's
// unary form) or on long-lived keepalive streams. Fencepost's heartbeats go
// on heartbeat streams (the "fencepost" row, shaped as etcd's stream: C
// streams, each with up to streamWindow beats in flight) and as unary
// POSTs ("fencepost unary").
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
			// The stream (the sidecar's default) and unary heartbeats,
			// alternating within the rep so their ratio is same-run.
			for _, fp := range []struct {
				system string
				run    func(int, []string, [][]fpHeld) Measure
			}{{sysFP, lb.fpHeartbeatStream(streamWindow)}, {sysFPStream1, lb.fpHeartbeatStream(1)}, {sysFPUnary, lb.fpHeartbeat}} {
				rounds := lb.verifyRounds()
				m := fp.run(c, sids, held)
				extra := map[string]float64{"renewals/s": m.Rate * float64(L), "cpu µs/renewal": m.ServerUsPerOp / float64(L)}
				lb.addRounds(extra, rounds, m)
				lb.res.add(Run{Workload: wlHeartbeat, Case: cs, System: fp.system, Rep: rep, Measure: m, Extra: extra})
				logf("%s %s %s rep %d: %.0f hb/s (%.0f renewals/s) p50 %.2fms p99 %.2fms cpu %.1fµs/hb, %.1f beats per verify round of %.2fms, errs %d %s",
					wlHeartbeat, cs, fp.system, rep, m.Rate, m.Rate*float64(L), ms(m.P50), ms(m.P99), m.ServerUsPerOp,
					extra[extraBeatsPerRound], extra[extraRoundMs], m.Errors, m.FirstEr)
			}

			var next atomic.Int64
			m := metered(lb.etcdPids(), func() Measure {
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
		// The unary API stays for other clients: its own row against
		// etcd's unary form.
		lb.res.row(wlHeartbeat, cs, "heartbeats/s", true, sysFPUnary, sysEtcdUnary, rate)
		lb.res.row(wlHeartbeat, cs, "p99 ms", false, sysFPUnary, sysEtcdUnary, p99ms)
		lb.res.row(wlHeartbeat, cs, "heartbeats/s", true, sysFPStream1, sysFPUnary, rate)
		lb.res.row(wlHeartbeat, cs, "p50 ms", false, sysFPStream1, sysFPUnary, p50ms)
		lb.res.row(wlHeartbeat, cs, "p99 ms", false, sysFPStream1, sysFPUnary, p99ms)
		lb.res.row(wlHeartbeat, cs, "server CPU µs/renewal", false, sysFPUnary, sysEtcdUnary, extra("cpu µs/renewal"))
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

// streamWindow is the beats in flight per stream, as keepAliveStream's
// window for etcd.
const streamWindow = 8

// fpHeartbeatStream returns a run that sends heartbeats on c streams to
// the leader, each with up to window in flight, round-robin over the
// sessions; only a reply renewing every lease named counts.
func (lb *leaseBench) fpHeartbeatStream(window int) func(int, []string, [][]fpHeld) Measure {
	return func(c int, sids []string, held [][]fpHeld) Measure { return lb.fpStreamRun(c, window, sids, held) }
}

// fpStreamRun is fpHeartbeatStream's run: c streams, window beats in
// flight on each.
func (lb *leaseBench) fpStreamRun(c, window int, sids []string, held [][]fpHeld) Measure {
	if len(sids) == 0 {
		return errNoFP
	}
	addr := lb.fpTarget()
	frames := make([][]byte, len(sids)) // the beat frames, id left 0
	for s := range sids {
		b, err := json.Marshal(fpHeartbeatReq{Leases: held[s]})
		if err != nil {
			panic(err) // a struct of strings and integers always encodes
		}
		frames[s] = binary.BigEndian.AppendUint32(nil, uint32(8+2+len(sids[s])+len(b)))
		frames[s] = binary.BigEndian.AppendUint64(frames[s], 0)
		frames[s] = binary.BigEndian.AppendUint16(frames[s], uint16(len(sids[s])))
		frames[s] = append(append(frames[s], sids[s]...), b...)
	}
	conns := make([]net.Conn, c)
	for w := range conns {
		conn, err := dialStream(addr)
		if err != nil {
			for _, o := range conns[:w] {
				_ = o.Close()
			}
			return Measure{Errors: 1, FirstEr: err.Error()}
		}
		conns[w] = conn
	}
	return metered(lb.fpPids(), func() Measure {
		ctx, cancel := context.WithTimeout(context.Background(), lb.plan.Dur)
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
				streamWorker(ctx, conns[w], window, frames, held, lats[w], &sent, &errs, &next, &firstErr, lb.plan.MaxOps)
			}()
		}
		wg.Wait()
		return finish(lats, errs.Load(), time.Since(t0), &firstErr)
	})
}

// dialStream opens one heartbeat stream to addr (TLS in the TLS pass).
func dialStream(addr string) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, opTimeout)
	if err != nil {
		return nil, err
	}
	if sec != nil {
		tc := sec.fpSidecar.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		conn = tls.Client(conn, tc)
	}
	_ = conn.SetDeadline(time.Now().Add(opTimeout))
	if _, err := io.WriteString(conn, "POST "+api.PathHeartbeatStream+" HTTP/1.1\r\nHost: "+addr+
		"\r\nConnection: Upgrade\r\nUpgrade: "+api.HeartbeatStreamProtocol+"\r\nContent-Length: 0\r\n\r\n"); err != nil {
		_ = conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		_ = conn.Close()
		return nil, fmt.Errorf("heartbeat stream upgrade: HTTP %d", resp.StatusCode)
	}
	_ = conn.SetDeadline(time.Time{})
	return &bufConn{Conn: conn, r: br}, nil
}

// bufConn reads through the reader that parsed the upgrade's answer.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// streamWorker drives one stream: a sender keeps up to window beats
// in flight, the receiver times and checks each reply.
func streamWorker(ctx context.Context, conn net.Conn, window int, frames [][]byte, held [][]fpHeld, lat *latencies,
	sent, errs, next *atomic.Int64, firstErr *atomic.Value, maxOps int64) {
	defer conn.Close()
	type inflight struct {
		at time.Time
		n  int
	}
	var mu sync.Mutex
	pending := map[uint64]inflight{}
	slots := make(chan struct{}, window)
	stop := make(chan struct{})
	senderDone := make(chan struct{})
	go func() {
		<-ctx.Done()
		close(stop)
		_ = conn.SetReadDeadline(time.Now().Add(opTimeout)) // replies still due may come
		<-senderDone
		// The receiver looks for the sender's end only after a reply: when
		// the last reply came before the sender ended, no reply is due
		// and the receiver is woken here, or it would wait out the
		// deadline and the run would count those seconds as its own.
		mu.Lock()
		idle := len(pending) == 0
		mu.Unlock()
		if idle {
			_ = conn.SetReadDeadline(time.Now())
		}
	}()
	go func() {
		defer close(senderDone)
		bw := bufio.NewWriter(conn)
		defer func() { _ = bw.Flush() }() // the beats still buffered
		var id uint64
		for sent.Add(1) <= maxOps {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return
			}
			s := int(next.Add(1)) % len(frames)
			f := frames[s]
			id++
			mu.Lock()
			pending[id] = inflight{at: time.Now(), n: len(held[s])}
			mu.Unlock()
			_, _ = bw.Write(f[:4])
			var idb [8]byte
			binary.BigEndian.PutUint64(idb[:], id)
			_, _ = bw.Write(idb[:])
			if _, err := bw.Write(f[12:]); err != nil {
				return
			}
			// Flush when the window is full (the sender is about to
			// wait for a reply) or this is the only beat in flight:
			// beats leave in batches, none waits behind a reply.
			if len(slots) == cap(slots) || len(slots) == 1 {
				if err := bw.Flush(); err != nil {
					return
				}
			}
		}
	}()
	br := bufio.NewReader(conn)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			break
		}
		p := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(br, p); err != nil || len(p) < 12 {
			break
		}
		id, status := binary.BigEndian.Uint64(p), binary.BigEndian.Uint16(p[8:])
		body := p[12+int(binary.BigEndian.Uint16(p[10:])):]
		mu.Lock()
		in, ok := pending[id]
		delete(pending, id)
		left := len(pending)
		mu.Unlock()
		<-slots
		if !ok {
			continue
		}
		if err := checkBeatReply(status, body, in.n); err != nil {
			errs.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
		} else {
			lat.add(time.Since(in.at))
		}
		select {
		case <-senderDone:
			if left == 0 {
				return
			}
		default:
		}
	}
	if ctx.Err() == nil {
		errs.Add(1)
		firstErr.CompareAndSwap(nil, "heartbeat stream closed")
	}
}

// checkBeatReply requires a 200 renewing all n leases named.
func checkBeatReply(status uint16, body []byte, n int) error {
	if status != http.StatusOK {
		return &statusError{code: int(status), body: string(body)}
	}
	var r beatReply
	if err := r.decodeBody(body); err != nil {
		return err
	}
	if r.renewed < n {
		return fmt.Errorf("heartbeat renewed %d of %d leases", r.renewed, n)
	}
	return nil
}

// The Extra keys of a fencepost heartbeat run's verify rounds.
const (
	extraBeatsPerRound = "beats/verify round"
	extraRoundMs       = "ms/verify round"
)

// verifyRounds is the leader's count of VerifyLeader rounds
// (fencepost_cluster_verify_leader_rounds_total); -1 when unreadable.
func (lb *leaseBench) verifyRounds() float64 {
	hc := &http.Client{Timeout: 10 * time.Second}
	if sec != nil {
		hc.Transport = &http.Transport{TLSClientConfig: sec.fpOperator}
	}
	v, err := scrapeMetric(hc, scheme()+lb.fpTarget(), "fencepost_cluster_verify_leader_rounds_total")
	if err != nil {
		logf("%s: verify rounds: %v", wlHeartbeat, err)
		return -1
	}
	return v
}

// addRounds records how many beats one VerifyLeader round answered and
// how long a round lasted on average in m's run, which began when the
// leader had run before rounds: the rounds run back to back while beats
// wait, so the run's length over its rounds is the round's length, and a
// beat waits for up to two of them (the one running when it arrives and
// its own).
func (lb *leaseBench) addRounds(extra map[string]float64, before float64, m Measure) {
	after := lb.verifyRounds()
	if before < 0 || after <= before || m.Ops == 0 {
		return
	}
	n := after - before
	extra[extraBeatsPerRound] = float64(m.Ops) / n
	extra[extraRoundMs] = m.Elapsed.Seconds() * 1000 / n
}
