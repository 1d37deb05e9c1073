package raftstore

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// memFill applies what test/bench's memory workload (6) sends through the
// FSM of one node: one session per 100 leases, and per lease one acquire
// with create under a fresh task id and a fresh request id, JSON-encoded
// as raft carries it. It returns the next raft index.
func memFill(tb testing.TB, f *fsm, index uint64, from, n int, now time.Time) uint64 {
	tb.Helper()
	apply := func(c *lease.Command) {
		data, err := encodeEntry(entryCommand, c)
		if err != nil {
			tb.Fatal(err)
		}
		index++
		res := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}).(lease.Result)
		if res.Err != nil {
			tb.Fatal(res.Err)
		}
	}
	for i := from; i < from+n; i++ {
		sid := fmt.Sprintf("s-%024d", i/100)
		t := now.Add(time.Duration(i) * time.Millisecond)
		if i%100 == 0 {
			apply(&lease.Command{Op: lease.OpOpenSession, RequestID: "bench-open-" + strconv.Itoa(i), Time: t,
				SessionID: sid, WorkerID: fmt.Sprintf("mem-1764700000000000000-%d", i/100)})
		}
		apply(&lease.Command{Op: lease.OpAcquire, RequestID: "bench-" + strconv.FormatUint(uint64(i), 36), Time: t,
			TaskID: fmt.Sprintf("mem-1764700000000000000-%d-0", i), SessionID: sid,
			Create: true, Profile: "short", TTL: 21 * time.Second, Heartbeat: 7 * time.Second})
	}
	return index
}

// fsmHeapProfile names a file BenchmarkFSMHeapPerLease writes an in-use
// heap profile to while the 100k leases are still live (-memprofile is
// written after the benchmark, when they are garbage).
var fsmHeapProfile = flag.String("fsmheap", "", "write the heap profile of BenchmarkFSMHeapPerLease's full FSM to this file")

// liveHeap returns the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkFSMHeapPerLease reports the live heap one node's FSM keeps per
// lease taken the way workload 6 takes them: the slope between 10k and
// 100k leases, so fixed costs drop out. Run with -benchtime 1x and
// -fsmheap to see where it goes:
//
//	go test -run '^$' -bench FSMHeapPerLease -benchtime 1x ./raftstore/ -args -fsmheap /tmp/fsm.mem
//	go tool pprof -sample_index=inuse_space -top /tmp/fsm.mem
func BenchmarkFSMHeapPerLease(b *testing.B) {
	const first, total = 10_000, 100_000
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for b.Loop() {
		f := newFSM(zap.NewNop())
		idx := memFill(b, f, 0, 0, first, now)
		before := liveHeap()
		memFill(b, f, idx, first, total-first, now)
		after := liveHeap()
		if *fsmHeapProfile != "" {
			out, err := os.Create(*fsmHeapProfile)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.Lookup("heap").WriteTo(out, 0); err != nil {
				b.Fatal(err)
			}
			if err := out.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(after-before)/float64(total-first), "B/lease")
		runtime.KeepAlive(f)
	}
}

// TestFSMPersistAfterLaterApplies: raft persists a snapshot while the FSM
// goes on applying. What Persist writes must be the state at Snapshot
// time, however many of its leases changed since, and restoring it must
// give that state's hash and applied index.
func TestFSMPersistAfterLaterApplies(t *testing.T) {
	h := newFSMHarness(t)
	h.populate()
	h.index = memFill(t, h.f, h.index, 0, 300, h.now)
	wantHash, wantApplied := h.f.StateHash(), h.f.applied.get()

	snap, err := h.f.Snapshot()
	require.NoError(t, err)
	persisted := make(chan []byte)
	go func() {
		var sink memSink
		if err := snap.Persist(&sink); err != nil {
			sink.Reset()
		}
		persisted <- sink.Bytes()
	}()
	// Change every lease the snapshot holds, and add more.
	for i := range 300 {
		task := fmt.Sprintf("mem-1764700000000000000-%d-0", i)
		res := h.cmd(lease.Command{Op: lease.OpRevoke, TaskID: task, Reason: "after the snapshot"})
		require.NoError(t, res.Err)
	}
	h.index = memFill(t, h.f, h.index, 300, 200, h.now)
	h.entry(entryNode, nodeMeta{ID: "n9", RaftAddr: "127.0.0.1:9", HTTPAddr: "h9"})
	data := <-persisted
	snap.Release()
	require.NotEqual(t, wantHash, h.f.StateHash())

	other := newFSM(zap.NewNop())
	require.NoError(t, other.Restore(io.NopCloser(bytes.NewReader(data))))
	require.Equal(t, wantHash, other.StateHash())
	require.Equal(t, wantApplied, other.applied.get())
}
