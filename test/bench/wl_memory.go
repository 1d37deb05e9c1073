package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// wlMemory names workload 6.
const wlMemory = "6 memory"

// memCluster is a cluster whose nodes' RSS the harness can read.
type memCluster interface {
	name() string
	waitLeader(d time.Duration) (int, error)
	pid(i int) int
	endpoints() []string
}

// nodeRSS reads every node's VmRSS in KiB.
func nodeRSS(c memCluster) []int64 {
	var out []int64
	for i := range c.endpoints() {
		r, _ := rssKiB(c.pid(i))
		out = append(out, r)
	}
	return out
}

// rssSplit is a process's resident memory in KiB: anonymous (the Go
// heap, stacks) and file-backed (the binary and the raft log's bolt mmap).
type rssSplit struct{ anon, file int64 }

// nodeRSSSplit reads every node's RssAnon and RssFile. The workload's
// figure stays VmRSS; the split says which part grew: a heap that grows
// with the leases, or log pages that grow with the entries written since
// the last snapshot.
func nodeRSSSplit(c memCluster) []rssSplit {
	var out []rssSplit
	for i := range c.endpoints() {
		var r rssSplit
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.pid(i))); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				k, v, ok := strings.Cut(line, ":")
				if !ok {
					continue
				}
				f := strings.Fields(v)
				if len(f) == 0 {
					continue
				}
				n, _ := strconv.ParseInt(f[0], 10, 64)
				switch k {
				case "RssAnon":
					r.anon = n
				case "RssFile":
					r.file = n
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// nodeLiveHeap forces a garbage collection on every node (pprof's
// /debug/pprof/heap?gc=1, served by both systems in this harness) and then
// reads go_memstats_heap_alloc_bytes from its /metrics: the heap that is
// live, without the garbage a Go process carries until its next
// collection, which RSS includes (with GOGC=100 the heap may grow to twice
// the live size before a collection). Bytes; -1 where unreadable.
func nodeLiveHeap(c memCluster) []int64 {
	hc := &http.Client{Timeout: 60 * time.Second}
	if sec != nil {
		// The TLS pass: each system's pprof answers only its own client
		// certificates (an operator's for fencepost).
		tc := sec.etcdClient
		if c.name() == sysFP {
			tc = sec.fpOperator
		}
		hc.Transport = &http.Transport{TLSClientConfig: tc}
	}
	var out []int64
	for _, ep := range c.endpoints() {
		if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
			ep = scheme() + ep
		}
		v, err := liveHeapOf(hc, ep, c.name())
		if err != nil {
			logf("%s %s: live heap of %s: %v", wlMemory, c.name(), ep, err)
			v = -1
		}
		out = append(out, v)
	}
	return out
}

// liveHeapOf is nodeLiveHeap for one node at base URL. With --profile the
// heap profile it asks for is kept (DIR/heap-<system>-<seq>.pprof).
func liveHeapOf(hc *http.Client, base, system string) (int64, error) {
	resp, err := hc.Get(base + "/debug/pprof/heap?gc=1")
	if err != nil {
		return 0, err
	}
	var sink io.Writer = io.Discard
	if prof != nil {
		prof.mu.Lock()
		prof.seq++
		path := filepath.Join(prof.dir, fmt.Sprintf("heap-%s-%03d.pprof", strings.ReplaceAll(system, " ", "_"), prof.seq))
		prof.mu.Unlock()
		if f, err := os.Create(path); err == nil {
			defer f.Close()
			sink = f
			logf("heap profile %s", path)
		}
	}
	_, _ = io.Copy(sink, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("heap profile: HTTP %d", resp.StatusCode)
	}
	v, err := scrapeMetric(hc, base, "go_memstats_heap_alloc_bytes")
	return int64(v), err
}

// scrapeMetric reads the value of the unlabelled sample name from the
// /metrics page at base.
func scrapeMetric(hc *http.Client, base, name string) (float64, error) {
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in /metrics", name)
}

// memoryLoad measures workload 6 on one cluster. It takes a tenth of the
// n leases first (so one-time growth — buffers, the first heap arenas, the
// bolt mmap — is paid), reads every node's RSS, takes the other nine
// tenths and, after a short settle, reads RSS again. Bytes per lease is
// the slope between the two readings: RSS growth / leases added, for the
// leader and for the largest follower. Filling is bounded by limit.
func memoryLoad(res *Results, c memCluster, n int, limit time.Duration, fill func(n int, deadline time.Time) (int, error)) {
	leader, err := c.waitLeader(10 * time.Second)
	if err != nil {
		logf("%s %s: %v", wlMemory, c.name(), err)
		return
	}
	t0 := time.Now()
	deadline := t0.Add(limit)
	first, err := fill(n/10, deadline)
	time.Sleep(time.Second)
	before, beforeSplit := nodeRSS(c), nodeRSSSplit(c)
	heapBefore := nodeLiveHeap(c)
	var added int
	if err == nil {
		added, err = fill(n-n/10, deadline)
	}
	el := time.Since(t0)
	time.Sleep(2 * time.Second)
	after, afterSplit := nodeRSS(c), nodeRSSSplit(c)
	heapAfter := nodeLiveHeap(c)
	held := first + added
	m := Measure{Ops: int64(held), Elapsed: el, Rate: float64(held) / el.Seconds()}
	if err != nil {
		m.Errors, m.FirstEr = 1, err.Error()
	}
	if now, lerr := c.waitLeader(10 * time.Second); lerr == nil && now != leader {
		m.FirstEr = strings.TrimSpace(m.FirstEr + " (leadership moved during the fill)")
	}
	x := map[string]float64{"leases": float64(held), "leader MiB": float64(after[leader]) / 1024}
	if added > 0 {
		x["leader bytes/lease"] = float64(after[leader]-before[leader]) * 1024 / float64(added)
		fol := 0.0
		for i := range after {
			if i != leader {
				fol = max(fol, float64(after[i]-before[i])*1024/float64(added))
			}
		}
		x["follower bytes/lease"] = fol
		liveFol := -1.0
		for i := range heapAfter {
			if heapBefore[i] < 0 || heapAfter[i] < 0 {
				continue
			}
			v := float64(heapAfter[i]-heapBefore[i]) / float64(added)
			if i == leader {
				x["leader live heap bytes/lease"] = v
			} else {
				liveFol = max(liveFol, v)
			}
		}
		if liveFol >= 0 {
			x["follower live heap bytes/lease"] = liveFol
		}
		for i := range after {
			who := "follower"
			if i == leader {
				who = "leader"
			}
			// The largest follower's split is logged, not the sum of both.
			anon := float64(afterSplit[i].anon-beforeSplit[i].anon) * 1024 / float64(added)
			file := float64(afterSplit[i].file-beforeSplit[i].file) * 1024 / float64(added)
			if i == leader || anon+file > x["follower anon bytes/lease"]+x["follower file bytes/lease"] {
				x[who+" anon bytes/lease"], x[who+" file bytes/lease"] = anon, file
			}
		}
	}
	res.add(Run{Workload: wlMemory, Case: fmt.Sprintf("%d leases", n), System: c.name(), Rep: 1, Measure: m, Extra: x})
	logf("%s %s: %d leases in %.1fs; leader RSS %d→%d KiB over the last %d (%.0f B/lease: anon %.0f, file %.0f; live heap %.0f), followers max %.0f B/lease (anon %.0f, file %.0f; live heap %.0f) %s",
		wlMemory, c.name(), held, el.Seconds(), before[leader], after[leader], added,
		x["leader bytes/lease"], x["leader anon bytes/lease"], x["leader file bytes/lease"], x["leader live heap bytes/lease"],
		x["follower bytes/lease"], x["follower anon bytes/lease"], x["follower file bytes/lease"], x["follower live heap bytes/lease"], m.FirstEr)
}

// fpFill opens one session per 100 leases and acquires n tasks through
// them with 64 workers.
func fpFill(addr string) func(n int, deadline time.Time) (int, error) {
	return func(n int, deadline time.Time) (int, error) {
		cl := newFPClient(addr, 64, opTimeout)
		tag := time.Now().UnixNano()
		sessions := make([]string, (n+99)/100)
		if err := parallel(len(sessions), 32, func(i int) error {
			sid, err := cl.openSession(fmt.Sprintf("mem-%d-%d", tag, i))
			sessions[i] = sid
			return err
		}); err != nil {
			return 0, err
		}
		done := make([]bool, n)
		err := parallel(n, 64, func(i int) error {
			return retried(deadline, func(attempt int) error {
				_, err := cl.acquire(fmt.Sprintf("mem-%d-%d-%d", tag, i, attempt), sessions[i/100], benchProfile)
				done[i] = err == nil
				return err
			})
		})
		return count(done), err
	}
}

// etcdFill grants n leases, each with its task key attached (the same
// record the acquire workload makes), with 64 workers.
func etcdFill(url string) func(n int, deadline time.Time) (int, error) {
	return func(n int, deadline time.Time) (int, error) {
		var cls []*clientv3.Client
		for i := 0; i < 4; i++ {
			cli, err := newEtcdClient(url)
			if err != nil {
				return 0, err
			}
			defer cli.Close()
			cls = append(cls, cli)
		}
		tag := time.Now().UnixNano()
		done := make([]bool, n)
		err := parallel(n, 64, func(i int) error {
			return retried(deadline, func(attempt int) error {
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				defer cancel()
				err := etcdAcquire(ctx, cls[i%len(cls)], fmt.Sprintf("/mem/%d/%d/%d", tag, i, attempt),
					func(clientv3.LeaseID) error { return nil })
				done[i] = err == nil
				return err
			})
		})
		runtime.GC()
		return count(done), err
	}
}

// retried runs f (attempt 0, 1, ...) until it succeeds, 20 attempts have
// failed, or deadline has passed; it pauses 100 ms after a failure, so a
// leader election during a fill costs a pause, not the run. Each attempt
// uses a fresh task id, so an acquire whose reply was lost is not retried
// into a conflict.
func retried(deadline time.Time, f func(attempt int) error) error {
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if time.Now().After(deadline) {
			return fmt.Errorf("time limit reached")
		}
		if err = f(attempt); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// count returns how many of bs are true.
func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
