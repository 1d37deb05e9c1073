package lease

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckpointSeqNeverWraps: a checkpoint at the ceiling is the last one;
// neither an explicit seq past it nor an omitted seq wraps the stored seq.
func TestCheckpointSeqNeverWraps(t *testing.T) {
	h := newHarness(t)
	h.ok(Command{Op: OpOpenSession, SessionID: "s", WorkerID: "w"})
	h.ok(Command{Op: OpCreateTask, TaskID: "t", TTL: ttl})
	ep := h.ok(Command{Op: OpAcquire, TaskID: "t", SessionID: "s"}).Lease.Epoch
	hold := Command{Op: OpCheckpoint, TaskID: "t", SessionID: "s", Epoch: ep}
	c := hold
	c.Seq = 1<<64 - 1
	h.noop(c, ErrCheckpointSeq)
	c.Seq = MaxCheckpointSeq
	h.ok(c)
	h.noop(hold, ErrCheckpointSeq) // seq omitted: would be MaxCheckpointSeq+1
	task, _ := h.m.Task("t")
	require.Equal(t, uint64(MaxCheckpointSeq), task.Checkpoint.Seq)
}

// TestRequestIDReusedForAnotherCommand: a retry (same command, same id) is
// replayed; the same id on a different command is refused, not answered
// with the first command's result.
func TestRequestIDReusedForAnotherCommand(t *testing.T) {
	h := newHarness(t)
	h.ok(Command{Op: OpOpenSession, SessionID: "s", WorkerID: "w"})
	h.ok(Command{Op: OpCreateTask, TaskID: "t", TTL: ttl})
	ep := h.ok(Command{Op: OpAcquire, TaskID: "t", SessionID: "s"}).Lease.Epoch
	first := Command{Op: OpCheckpoint, RequestID: "r1", TaskID: "t", SessionID: "s", Epoch: ep, Step: "a"}
	h.ok(first)
	h.advance(ttl / 10) // a retry is stamped with a later time
	require.True(t, h.ok(first).Duplicate)
	other := first
	other.Step = "b"
	h.noop(other, ErrRequestReused)
	task, _ := h.m.Task("t")
	require.Equal(t, uint64(1), task.Checkpoint.Seq)

	// The fingerprint survives a snapshot.
	var buf bytes.Buffer
	require.NoError(t, h.m.WriteSnapshot(&buf))
	n := New()
	require.NoError(t, n.ReadSnapshot(&buf))
	h.m = n
	h.noop(other, ErrRequestReused)
	require.True(t, h.ok(first).Duplicate)
}

// TestSessionBelongsToItsOwner: once opened by one identity, a session
// cannot be used, re-opened or closed by another; its owner still can.
func TestSessionBelongsToItsOwner(t *testing.T) {
	h := newHarness(t)
	const a, b = "sidecar/a", "sidecar/b"
	h.ok(Command{Op: OpOpenSession, SessionID: "s", WorkerID: "w", Owner: a})
	h.noop(Command{Op: OpOpenSession, SessionID: "s", WorkerID: "w", Owner: b}, ErrNotOwner)
	h.ok(Command{Op: OpCreateTask, TaskID: "t", TTL: ttl, Owner: a})
	h.noop(Command{Op: OpAcquire, TaskID: "t", SessionID: "s", Owner: b}, ErrNotOwner)
	h.noop(Command{Op: OpClaim, SessionID: "s", Owner: b}, ErrNotOwner)
	ep := h.ok(Command{Op: OpAcquire, TaskID: "t", SessionID: "s", Owner: a}).Lease.Epoch
	for _, op := range []Op{OpCheckpoint, OpWait, OpRelease} {
		h.noop(Command{Op: op, TaskID: "t", SessionID: "s", Epoch: ep, Outcome: OutcomeCompleted, Seq: 99, Owner: b}, ErrNotOwner)
	}
	eff := &Effect{Key: "k", Method: "POST", URL: "http://x/", Deadline: StampOf(h.now.Add(ttl))}
	h.noop(Command{Op: OpIntent, TaskID: "t", SessionID: "s", Epoch: ep, Effect: eff, Owner: b}, ErrNotOwner)
	h.ok(Command{Op: OpIntent, TaskID: "t", SessionID: "s", Epoch: ep, Effect: eff, Owner: a})
	h.noop(Command{Op: OpOutcome, TaskID: "t", Epoch: ep, Effect: &Effect{Key: "k", Status: 200}, Owner: b}, ErrNotOwner)
	h.ok(Command{Op: OpOutcome, TaskID: "t", Epoch: ep, Effect: &Effect{Key: "k", Status: 200}, Owner: a})
	h.noop(Command{Op: OpCloseSession, SessionID: "s", Owner: b}, ErrNotOwner)
	h.ok(Command{Op: OpCheckpoint, TaskID: "t", SessionID: "s", Epoch: ep, Seq: 1, Owner: a})
	h.ok(Command{Op: OpCloseSession, SessionID: "s", Owner: a})
}

// TestQuotas: sessions, tasks and payload bytes are bounded per identity;
// another identity is not affected, and deleting a task frees its share.
func TestQuotas(t *testing.T) {
	h := newHarness(t)
	q := &Quota{Sessions: 2, Tasks: 2, Bytes: 10}
	const a, b = "sidecar/a", "sidecar/b"
	h.ok(Command{Op: OpOpenSession, SessionID: "s1", WorkerID: "w", Owner: a, Quota: q})
	h.ok(Command{Op: OpOpenSession, SessionID: "s2", WorkerID: "w", Owner: a, Quota: q})
	h.noop(Command{Op: OpOpenSession, SessionID: "s3", WorkerID: "w", Owner: a, Quota: q}, ErrQuota)
	h.ok(Command{Op: OpOpenSession, SessionID: "s3", WorkerID: "w", Owner: b, Quota: q})
	h.ok(Command{Op: OpCloseSession, SessionID: "s2", Owner: a})
	h.ok(Command{Op: OpOpenSession, SessionID: "s4", WorkerID: "w", Owner: a, Quota: q})

	h.noop(Command{Op: OpCreateTask, TaskID: "big", TTL: ttl, Payload: make([]byte, 11), Owner: a, Quota: q}, ErrQuota)
	h.ok(Command{Op: OpCreateTask, TaskID: "t1", TTL: ttl, Payload: make([]byte, 6), Owner: a, Quota: q})
	h.noop(Command{Op: OpCreateTask, TaskID: "t2", TTL: ttl, Payload: make([]byte, 5), Owner: a, Quota: q}, ErrQuota)
	h.ok(Command{Op: OpAcquire, TaskID: "t2", SessionID: "s1", Create: true, TTL: ttl, Owner: a, Quota: q})
	h.noop(Command{Op: OpAcquire, TaskID: "t3", SessionID: "s1", Create: true, TTL: ttl, Owner: a, Quota: q}, ErrQuota)
	h.ok(Command{Op: OpCreateTask, TaskID: "t3", TTL: ttl, Owner: b, Quota: q})
	sessions, tasks, n := h.m.Usage(a)
	require.Equal(t, []any{2, 2, int64(6)}, []any{sessions, tasks, n})

	h.ok(Command{Op: OpCancel, TaskID: "t1"})
	h.ok(Command{Op: OpDeleteTask, TaskID: "t1"})
	h.ok(Command{Op: OpCreateTask, TaskID: "t4", TTL: ttl, Payload: make([]byte, 10), Owner: a, Quota: q})

	// Usage is derived: a restored replica counts the same.
	var buf bytes.Buffer
	require.NoError(t, h.m.WriteSnapshot(&buf))
	n2 := New()
	require.NoError(t, n2.ReadSnapshot(&buf))
	for _, who := range []string{a, b} {
		s1, t1, b1 := h.m.Usage(who)
		s2, t2, b2 := n2.Usage(who)
		require.Equal(t, []any{s1, t1, b1}, []any{s2, t2, b2}, who)
	}
}

func TestCheckTaskID(t *testing.T) {
	for _, ok := range []string{"a", "task-1", "T_2.x:y@z", "0"} {
		require.NoError(t, CheckTaskID(ok, 64), ok)
	}
	for _, bad := range []string{"", "..", ".", "a/b", "a b", "-a", "a\u202eb", "é", "a%2Fb", string(make([]byte, 65))} {
		require.ErrorIs(t, CheckTaskID(bad, 64), ErrInvalid, "%q", bad)
	}
	require.NoError(t, CheckPriority(MaxPriority))
	require.ErrorIs(t, CheckPriority(-1<<63), ErrInvalid)
}

// TestCheckpointSeqJumpIsBounded replays the jam: one request setting seq
// to the ceiling is refused; a jump within the window is accepted; a new
// owner then checkpoints above its predecessor; an entry without a window
// (written before the rule) applies as it did.
func TestCheckpointSeqJumpIsBounded(t *testing.T) {
	h := newHarness(t)
	h.ok(Command{Op: OpOpenSession, SessionID: "s", WorkerID: "w"})
	h.ok(Command{Op: OpOpenSession, SessionID: "s2", WorkerID: "w2"})
	h.ok(Command{Op: OpCreateTask, TaskID: "t", TTL: ttl})
	ep := h.ok(Command{Op: OpAcquire, TaskID: "t", SessionID: "s"}).Lease.Epoch
	c := Command{Op: OpCheckpoint, TaskID: "t", SessionID: "s", Epoch: ep, SeqWindow: MaxCheckpointSeqJump}
	c.Seq = MaxCheckpointSeq
	h.noop(c, ErrCheckpointSeqJump)
	c.Seq = MaxCheckpointSeqJump + 1
	h.noop(c, ErrCheckpointSeqJump)
	c.Seq = MaxCheckpointSeqJump
	h.ok(c)
	c.Seq = 2*MaxCheckpointSeqJump + 1
	h.noop(c, ErrCheckpointSeqJump)
	require.Equal(t, "checkpoint_seq_jump", ErrorCode(ErrCheckpointSeqJump))

	h.ok(Command{Op: OpRevoke, TaskID: "t"})
	h.advance(ttl)
	ep2 := h.ok(Command{Op: OpAcquire, TaskID: "t", SessionID: "s2"}).Lease.Epoch
	next := h.ok(Command{Op: OpCheckpoint, TaskID: "t", SessionID: "s2", Epoch: ep2, SeqWindow: MaxCheckpointSeqJump})
	require.Equal(t, uint64(MaxCheckpointSeqJump+1), next.Task.Checkpoint.Seq, "the new owner goes on above the old seq")

	legacy := Command{Op: OpCheckpoint, TaskID: "t", SessionID: "s2", Epoch: ep2, Seq: MaxCheckpointSeq}
	h.ok(legacy)
}

// TestPayloadBudgetIsClusterWide: identities each within their share
// cannot together hold more than the budget; deleting frees it; a task
// without payload is not refused by it.
func TestPayloadBudgetIsClusterWide(t *testing.T) {
	h := newHarness(t)
	q := &Quota{Bytes: 10, TotalBytes: 25}
	for i, owner := range []string{"sidecar/a", "sidecar/b"} {
		for j := range 2 {
			h.ok(Command{Op: OpCreateTask, TaskID: fmt.Sprintf("t%d%d", i, j), TTL: ttl, Owner: owner, Quota: q, Payload: make([]byte, 5)})
		}
	}
	res := h.noop(Command{Op: OpCreateTask, TaskID: "c1", TTL: ttl, Owner: "sidecar/c", Quota: q, Payload: make([]byte, 6)}, ErrQuota)
	require.ErrorContains(t, res.Err, "payload budget")
	h.ok(Command{Op: OpCreateTask, TaskID: "c2", TTL: ttl, Owner: "sidecar/c", Quota: q})
	h.ok(Command{Op: OpCreateTask, TaskID: "c3", TTL: ttl, Owner: "sidecar/c", Quota: q, Payload: make([]byte, 5)})
	h.ok(Command{Op: OpCancel, TaskID: "t00"})
	h.ok(Command{Op: OpDeleteTask, TaskID: "t00"})
	h.ok(Command{Op: OpCreateTask, TaskID: "c4", TTL: ttl, Owner: "sidecar/c", Quota: q, Payload: make([]byte, 5)})

	// The budget is derived state: a restored model enforces it alike.
	var buf bytes.Buffer
	err := h.m.WriteSnapshot(&buf)
	require.NoError(t, err)
	m := New()
	require.NoError(t, m.ReadSnapshot(&buf))
	require.Equal(t, h.m.ownedBytes, m.ownedBytes)
	require.Equal(t, int64(25), m.ownedBytes)
}
