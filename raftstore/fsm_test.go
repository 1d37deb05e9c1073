package raftstore

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
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
	require.NoError(t, decodeBody(data[1:], &back))
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

// An entry the fsm cannot read halts it, naming index, type and writer:
// nothing after it is applied or counted as applied, the state is
// unchanged, and snapshots are refused. Each case starts a fresh fsm.
func TestFSMHaltsOnUnknownOrUndecodableEntry(t *testing.T) {
	cases := []struct {
		name  string
		data  []byte
		ext   []byte
		typ   uint8
		cause string
		by    string
	}{
		{"unknown type", []byte{127, '{', '}'}, []byte("2/v9.9.9"), 127, "unknown entry type", "fencepost v9.9.9 (entry format 2)"},
		{"undecodable body", []byte{byte(entryCommand), 'n', 'o', 't'}, nil, uint8(entryCommand), "undecodable body", "before v0.1.0"},
		{"empty entry", nil, []byte("1/v0.1.0"), 0, "empty entry", "fencepost v0.1.0 (entry format 1)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFSMHarness(t)
			h.f.version = "v0.0.1-test"
			var halts []*HaltError
			h.f.halt.onHalt = func(e *HaltError) { halts = append(halts, e) }
			h.populate()
			before, applied := h.f.StateHash(), h.f.applied.get()
			h.index++
			res := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: tc.data, Extensions: tc.ext})
			he, ok := res.(*HaltError)
			require.True(t, ok, "apply answers the halt, got %T", res)
			require.ErrorIs(t, he, ErrHalted)
			require.Equal(t, h.index, he.Index)
			require.Equal(t, tc.typ, he.Type)
			require.Contains(t, he.Error(), fmt.Sprintf("index %d", h.index))
			require.Contains(t, he.Error(), fmt.Sprintf("entry type %d", tc.typ))
			require.Contains(t, he.Error(), tc.cause)
			require.Contains(t, he.Error(), tc.by)
			require.Contains(t, he.Error(), "v0.0.1-test")

			// A valid entry after it is not applied either.
			res = h.entry(entryCommand, &lease.Command{Op: lease.OpOpenSession, SessionID: "late", WorkerID: "w", Time: h.now})
			require.Same(t, he, res)
			require.Equal(t, before, h.f.StateHash(), "a halted fsm changes nothing")
			require.Equal(t, applied, h.f.applied.get(), "nothing past the halt counts as applied")
			h.f.StoreConfiguration(h.index+1, raft.Configuration{})
			require.Equal(t, applied, h.f.applied.get())
			_, err := h.f.Snapshot()
			require.ErrorIs(t, err, ErrHalted, "a snapshot would claim the skipped entries")
			require.Len(t, halts, 1, "the halt is reported once")
		})
	}
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
