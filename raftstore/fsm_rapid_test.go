package raftstore

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"pgregory.net/rapid"
)

// genCommand draws a lease command over a small id space, so commands hit
// each other's tasks and sessions often.
func genCommand(t *rapid.T) lease.Command {
	op := rapid.SampledFrom([]lease.Op{
		lease.OpOpenSession, lease.OpCloseSession, lease.OpCreateTask, lease.OpAcquire, lease.OpClaim,
		lease.OpCheckpoint, lease.OpWait, lease.OpSignal, lease.OpRelease, lease.OpRevoke, lease.OpCancel,
		lease.OpSuspect, lease.OpRevive, lease.OpExpire, lease.OpReclaim, lease.OpDeleteTask,
	}).Draw(t, "op")
	return lease.Command{
		Op:        op,
		RequestID: rapid.SampledFrom([]string{"", "", "r1", "r2", "r3"}).Draw(t, "rid"),
		TaskID:    rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "task"),
		SessionID: rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "session"),
		WorkerID:  "w",
		Epoch:     rapid.Uint64Range(0, 40).Draw(t, "epoch"),
		Create:    rapid.Bool().Draw(t, "create"),
		TTL:       time.Minute,
		Outcome:   rapid.SampledFrom([]lease.Outcome{lease.OutcomeCompleted, lease.OutcomeFailed, lease.OutcomeGivenBack}).Draw(t, "outcome"),
		Data:      []byte(rapid.StringN(0, 4, 8).Draw(t, "data")),
	}
}

// TestFSMReplicasAgreeProperty: any command sequence, applied through the
// log encoding to two replicas — one of which is rebuilt from a snapshot
// at a random point — leaves both with the same state hash, and a snapshot
// of the result restores to the same hash again.
func TestFSMReplicasAgreeProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := newFSM(zap.NewNop()), newFSM(zap.NewNop())
		cmds := rapid.SliceOfN(rapid.Custom(genCommand), 1, 60).Draw(t, "cmds")
		cut := rapid.IntRange(0, len(cmds)).Draw(t, "snapshotAt")
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i, c := range cmds {
			if i == cut {
				restored := newFSM(zap.NewNop())
				if err := restored.Restore(io.NopCloser(bytes.NewReader(snapshotOf(t, b)))); err != nil {
					t.Fatal(err)
				}
				b = restored
			}
			now = now.Add(time.Second)
			c.Time = now
			data, err := encodeEntry(entryCommand, &c)
			if err != nil {
				t.Fatal(err)
			}
			l := &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data}
			ra, rb := a.Apply(l).(lease.Result), b.Apply(l).(lease.Result)
			if lease.ErrorCode(ra.Err) != lease.ErrorCode(rb.Err) {
				t.Fatalf("replicas answered %d differently: %v vs %v", i, ra.Err, rb.Err)
			}
		}
		if a.StateHash() != b.StateHash() {
			t.Fatal("replicas diverged")
		}
		c := newFSM(zap.NewNop())
		if err := c.Restore(io.NopCloser(bytes.NewReader(snapshotOf(t, a)))); err != nil {
			t.Fatal(err)
		}
		if c.StateHash() != a.StateHash() {
			t.Fatal("snapshot + restore changed the state")
		}
	})
}

func snapshotOf(t *rapid.T, f *fsm) []byte {
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}
