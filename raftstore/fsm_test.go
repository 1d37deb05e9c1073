package raftstore

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

type fsmHarness struct {
	t     *testing.T
	f     *fsm
	index uint64
	now   time.Time
}

func newFSMHarness(t *testing.T) *fsmHarness {
	return &fsmHarness{t: t, f: newFSM(zap.NewNop()), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (h *fsmHarness) raw(data []byte) any {
	h.index++
	return h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: data})
}

func (h *fsmHarness) entry(t entryType, body any) any {
	data, err := encodeEntry(t, body)
	require.NoError(h.t, err)
	return h.raw(data)
}

func (h *fsmHarness) cmd(c lease.Command) lease.Result {
	h.now = h.now.Add(time.Second)
	c.Time = h.now
	res, ok := h.entry(entryCommand, &c).(lease.Result)
	require.True(h.t, ok, "a command's apply response is the lease.Result")
	return res
}

// populate writes a little of everything: sessions, tasks, a lease with a
// checkpoint, node metadata and a signing key.
func (h *fsmHarness) populate() {
	h.cmd(lease.Command{Op: lease.OpOpenSession, SessionID: "s1", WorkerID: "w1"})
	res := h.cmd(lease.Command{Op: lease.OpAcquire, TaskID: "t1", SessionID: "s1", Create: true, TTL: time.Minute, Heartbeat: time.Second})
	require.NoError(h.t, res.Err)
	require.Equal(h.t, h.index, res.Lease.Epoch, "the epoch is the raft index of the granting entry")
	res = h.cmd(lease.Command{Op: lease.OpCheckpoint, TaskID: "t1", SessionID: "s1", Epoch: res.Lease.Epoch, Step: "s", Data: []byte("cp")})
	require.NoError(h.t, res.Err)
	h.cmd(lease.Command{Op: lease.OpCreateTask, TaskID: "t2", TTL: time.Minute, RequestID: "r1"})
	h.entry(entryNode, nodeMeta{ID: "n1", RaftAddr: "127.0.0.1:1", HTTPAddr: "h1"})
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(h.t, err)
	h.entry(entryKey, signingKey{ID: "k1", Pub: pub, Priv: priv})
}

func TestEntryEncodeDecode(t *testing.T) {
	c := lease.Command{Op: lease.OpCheckpoint, RequestID: "r", TaskID: "t", Epoch: 7, Data: []byte{0, 1, 2}, Time: time.Unix(5, 6).UTC()}
	data, err := encodeEntry(entryCommand, &c)
	require.NoError(t, err)
	require.Equal(t, byte(entryCommand), data[0])
	var back lease.Command
	mustDecode(1, data[1:], &back)
	require.Equal(t, c, back)
}

func TestFSMAppliesCommandsAndMetadata(t *testing.T) {
	h := newFSMHarness(t)
	h.populate()
	n, ok := h.f.node("n1")
	require.True(t, ok)
	require.Equal(t, "h1", n.HTTPAddr)
	k, ok := h.f.currentKey()
	require.True(t, ok)
	require.Equal(t, "k1", k.ID)
	require.Equal(t, h.index, h.f.applied.get())

	// A duplicate request id replays the first result, it does not apply twice.
	res := h.cmd(lease.Command{Op: lease.OpCreateTask, TaskID: "t2", TTL: time.Minute, RequestID: "r1"})
	require.NoError(t, res.Err)
	require.True(t, res.Duplicate)

	h.entry(entryNode, nodeMeta{ID: "n1", Remove: true})
	_, ok = h.f.node("n1")
	require.False(t, ok)
}

func TestFSMSkipsUnknownIgnorableEntry(t *testing.T) {
	h := newFSMHarness(t)
	h.populate()
	before := h.f.StateHash()
	require.Nil(t, h.raw(append([]byte{byte(ignorableFlag | 0x3f)}, `{"future":true}`...)))
	require.Equal(t, before, h.f.StateHash(), "an ignorable unknown entry changes nothing")
}

func TestFSMPanicsOnUnknownOrUndecodableEntry(t *testing.T) {
	h := newFSMHarness(t)
	require.Panics(t, func() { h.raw([]byte{0x3f, '{', '}'}) }, "unknown non-ignorable type")
	require.Panics(t, func() { h.raw([]byte{byte(entryCommand), 'n', 'o', 't'}) }, "undecodable known type")
	require.Panics(t, func() { h.raw(nil) }, "empty entry")
}

// memSink is a raft.SnapshotSink over a buffer.
type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func snapshotBytes(t *testing.T, f *fsm) []byte {
	snap, err := f.Snapshot()
	require.NoError(t, err)
	defer snap.Release()
	var sink memSink
	require.NoError(t, snap.Persist(&sink))
	require.False(t, sink.cancelled)
	return sink.Bytes()
}

func TestFSMSnapshotRestoreSameHash(t *testing.T) {
	h := newFSMHarness(t)
	h.populate()
	data := snapshotBytes(t, h.f)

	other := newFSM(zap.NewNop())
	require.NoError(t, other.Restore(io.NopCloser(bytes.NewReader(data))))
	require.Equal(t, h.f.StateHash(), other.StateHash())
	tk, ok := func() (*lease.Task, bool) {
		var t *lease.Task
		var ok bool
		other.read(func(m *lease.Model) { t, ok = m.Task("t1") })
		return t, ok
	}()
	require.True(t, ok)
	require.Equal(t, []byte("cp"), tk.Checkpoint.Data, "checkpoints survive snapshot + restore (I5)")
	require.Equal(t, h.f.applied.get(), other.applied.get())

	// Both replicas keep agreeing after more commands.
	h2 := &fsmHarness{t: t, f: other, index: h.index, now: h.now}
	for _, hh := range []*fsmHarness{h, h2} {
		hh.cmd(lease.Command{Op: lease.OpCreateTask, TaskID: "t3", TTL: time.Minute})
	}
	require.Equal(t, h.f.StateHash(), other.StateHash())
}

func TestFSMRestoreReplacesState(t *testing.T) {
	src := newFSMHarness(t)
	src.cmd(lease.Command{Op: lease.OpCreateTask, TaskID: "only", TTL: time.Minute})
	data := snapshotBytes(t, src.f)

	dst := newFSMHarness(t)
	dst.populate()
	require.NoError(t, dst.f.Restore(io.NopCloser(bytes.NewReader(data))))
	require.Equal(t, src.f.StateHash(), dst.f.StateHash())
	dst.f.read(func(m *lease.Model) {
		_, ok := m.Task("t1")
		require.False(t, ok, "nothing of the previous state survives a restore")
		_, ok = m.Session("s1")
		require.False(t, ok)
	})
	_, ok := dst.f.node("n1")
	require.False(t, ok)
	_, ok = dst.f.currentKey()
	require.False(t, ok)

	err := dst.f.Restore(io.NopCloser(bytes.NewReader([]byte(`{"format":99}` + "\n"))))
	require.Error(t, err)
	require.False(t, errors.Is(err, io.EOF))
}
