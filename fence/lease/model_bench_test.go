package lease

import (
	"fmt"
	"testing"
	"time"
)

// benchModel returns a model with one open session and n pending tasks
// besides "bench".
func benchModel(b *testing.B, n int) (*Model, *uint64) {
	b.Helper()
	m := New()
	var idx uint64
	apply := func(c Command) Result {
		idx++
		c.Time = t0
		return m.Apply(idx, &c)
	}
	apply(openS("s1"))
	apply(createT("bench", 0))
	for i := range n {
		apply(createT(fmt.Sprintf("other-%06d", i), 0))
	}
	return m, &idx
}

// BenchmarkApplyAcquireRelease measures one acquire plus one release
// (given back) of the same task: the model's side of a short task.
func BenchmarkApplyAcquireRelease(b *testing.B) {
	for _, pending := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			m, idx := benchModel(b, pending)
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Millisecond)
				*idx++
				acq := Command{Op: OpAcquire, SessionID: "s1", TaskID: "bench", Time: now}
				r := m.Apply(*idx, &acq)
				if r.Err != nil {
					b.Fatal(r.Err)
				}
				*idx++
				rel := Command{Op: OpRelease, SessionID: "s1", TaskID: "bench", Epoch: r.Lease.Epoch, Outcome: OutcomeGivenBack, Time: now}
				if r := m.Apply(*idx, &rel); r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		})
	}
}

// BenchmarkApplyCheckpoint measures one checkpoint (seq 0 = next, 256 bytes
// of data) under a held lease, with and without a request id.
func BenchmarkApplyCheckpoint(b *testing.B) {
	for _, rid := range []bool{false, true} {
		b.Run(fmt.Sprintf("rid=%v", rid), func(b *testing.B) {
			m, idx := benchModel(b, 0)
			*idx++
			r := m.Apply(*idx, &Command{Op: OpAcquire, SessionID: "s1", TaskID: "bench", Time: t0})
			if r.Err != nil {
				b.Fatal(r.Err)
			}
			epoch := r.Lease.Epoch
			data := make([]byte, 256)
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Millisecond)
				*idx++
				c := Command{Op: OpCheckpoint, SessionID: "s1", TaskID: "bench", Epoch: epoch, Step: "step", Data: data, Time: now}
				if rid {
					c.RequestID = fmt.Sprintf("rid-%d", *idx)
				}
				if r := m.Apply(*idx, &c); r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		})
	}
}

// BenchmarkApplyDedupSteadyState applies commands with request ids at a
// steady rate, window remembered ids at a time: each command forgets one
// old id. The cost per command must not grow with the window.
func BenchmarkApplyDedupSteadyState(b *testing.B) {
	for _, window := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			m := New()
			gap := DedupWindow / time.Duration(window)
			var idx uint64
			apply := func() {
				idx++
				c := Command{Op: OpOpenSession, SessionID: "s1", WorkerID: "w-s1",
					RequestID: fmt.Sprintf("rid-%d", idx), Time: t0.Add(time.Duration(idx) * gap)}
				if r := m.Apply(idx, &c); r.Err != nil {
					b.Fatal(r.Err)
				}
			}
			for range window {
				apply()
			}
			b.ReportAllocs()
			for b.Loop() {
				apply()
			}
			if m.dedup.len() > window+1 {
				b.Fatalf("%d ids remembered, window %d", m.dedup.len(), window)
			}
		})
	}
}

// BenchmarkSessionScan walks one session's ten leases, as a heartbeat's
// reply does, in a model of 10,000 sessions (100,000 leases): the walk is
// bound by memory access, so the model is larger than the caches.
func BenchmarkSessionScan(b *testing.B) {
	const sessions, per = 10_000, 10
	m := New()
	var idx uint64
	for s := range sessions {
		sid := fmt.Sprintf("s-%06d", s)
		idx++
		m.Apply(idx, &Command{Op: OpOpenSession, SessionID: sid, WorkerID: "w", Time: t0})
		for l := range per {
			idx++
			c := Command{Op: OpAcquire, SessionID: sid, TaskID: fmt.Sprintf("t-%06d-%d", s, l), Create: true, TTL: time.Minute, Time: t0}
			if r := m.Apply(idx, &c); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	ids := make([]string, 0, sessions)
	for id := range m.SessionIDs() {
		ids = append(ids, id)
	}
	var epochs uint64
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for l := range m.SessionScan(ids[i%len(ids)]) {
			epochs += l.Epoch
			n++
		}
		if n != per {
			b.Fatalf("session %s: %d leases, want %d", ids[i%len(ids)], n, per)
		}
		i += 7919 // a prime: sessions far apart in the order, as heartbeats arrive
	}
	if epochs == 0 {
		b.Fatal("no epochs read")
	}
}
