package raftstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/lease"
)

// massExpiry holds n leases of one session that then goes silent, in an
// FSM driven by the leader's lessor and plan, each batch applied as the
// raft entry it would be.
type massExpiry struct {
	t     testing.TB
	f     *fsm
	l     *lessor
	clock *fakeClock
	index uint64
}

func newMassExpiry(t testing.TB, n int) *massExpiry {
	clock := newFakeClock()
	me := &massExpiry{t: t, f: newFSM(zap.NewNop()), l: newLessor(clock, lGrace, time.Hour, nil), clock: clock}
	me.l.promote(nil, nil)
	me.apply(&lease.Command{Op: lease.OpOpenSession, SessionID: "dead", WorkerID: "w", Time: clock.Now()})
	for i := range n {
		task := fmt.Sprintf("t%06d", i)
		res := me.apply(&lease.Command{Op: lease.OpAcquire, TaskID: task, SessionID: "dead", Create: true, TTL: lTTL,
			Heartbeat: lTTL / 3, Time: clock.Now()})
		require.NoError(t, res.Err)
	}
	return me
}

func (me *massExpiry) apply(c *lease.Command) lease.Result {
	me.index++
	data, err := encodeEntry(entryCommand, c)
	require.NoError(me.t, err)
	return me.f.Apply(&raft.Log{Index: me.index, Data: data}).(lease.Result)
}

// tick plans as the leader does at the current time and applies every
// batch as one entry; it returns the entries and the transitions.
func (me *massExpiry) tick() (entries, transitions int) {
	cmds := planFrom(me.f, me.l, me.clock.Now(), DefaultProposalsPerTick*expiryBatchSize)
	for i := range cmds {
		cmds[i].Time = me.clock.Now()
	}
	for _, run := range batches(cmds, expiryBatchSize) {
		me.index++
		data, err := encodeEntry(entryBatch, run)
		require.NoError(me.t, err)
		res := me.f.Apply(&raft.Log{Index: me.index, Data: data}).([]lease.Result)
		require.Len(me.t, res, len(run))
		for i := range res {
			require.NoError(me.t, res[i].Err, "%s %s", run[i].Op, run[i].TaskID)
		}
		entries++
		transitions += len(run)
	}
	return entries, transitions
}

func (me *massExpiry) count(st lease.Status) int {
	n := 0
	me.f.read(func(m *lease.Model) {
		for ls := range m.LiveScan() {
			if ls.Status == st {
				n++
			}
		}
	})
	return n
}

// TestDeadSessionsLeasesExpireInOneTickEach: 100,000 leases of a dead
// session are all suspected by the first tick past their TTL, all expired
// by the first tick past the grace and all reclaimed by the next, each
// tick proposing ceil(100,000 / expiryBatchSize) raft entries; a tick is a
// twentieth of the TTL, well within one heartbeat interval (TTL/3).
func TestDeadSessionsLeasesExpireInOneTickEach(t *testing.T) {
	const n = 100_000
	if testing.Short() {
		t.Skip("100,000 leases")
	}
	me := newMassExpiry(t, n)
	wantEntries := (n + expiryBatchSize - 1) / expiryBatchSize

	me.clock.Advance(lTTL + time.Millisecond)
	entries, transitions := me.tick()
	require.Equal(t, [2]int{wantEntries, n}, [2]int{entries, transitions})
	require.Equal(t, n, me.count(lease.StatusSuspectDead), "every lease suspected in one tick")

	me.clock.Advance(lGrace)
	entries, transitions = me.tick()
	require.Equal(t, [2]int{wantEntries, n}, [2]int{entries, transitions})
	require.Equal(t, n, me.count(lease.StatusExpired), "every lease expired in one tick past the grace")

	entries, _ = me.tick()
	require.Equal(t, wantEntries, entries)
	require.Equal(t, 0, me.count(lease.StatusExpired), "and reclaimed by the next")
	entries, _ = me.tick()
	require.Zero(t, entries, "nothing is proposed twice")
}

// TestBatchRefusesAGrant: a batch entry may not carry a command that takes
// the entry's index as an epoch; the others in it apply.
func TestBatchRefusesAGrant(t *testing.T) {
	me := newMassExpiry(t, 1)
	me.clock.Advance(lTTL + time.Millisecond)
	me.index++
	data, err := encodeEntry(entryBatch, []lease.Command{
		{Op: lease.OpSuspect, TaskID: "t000000", Epoch: 2, Time: me.clock.Now()},
		{Op: lease.OpAcquire, TaskID: "other", SessionID: "dead", Create: true, TTL: lTTL, Time: me.clock.Now()},
	})
	require.NoError(t, err)
	res := me.f.Apply(&raft.Log{Index: me.index, Data: data}).([]lease.Result)
	require.NoError(t, res[0].Err)
	require.ErrorIs(t, res[1].Err, lease.ErrInvalid)
	require.Equal(t, 1, me.count(lease.StatusSuspectDead))
}

// BenchmarkMassExpiry100k measures one suspect tick over 100,000 leases
// of a dead session (plan, encode, apply), reporting raft entries per tick.
func BenchmarkMassExpiry100k(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		me := newMassExpiry(b, 100_000)
		me.clock.Advance(lTTL + time.Millisecond)
		b.StartTimer()
		entries, _ := me.tick()
		b.ReportMetric(float64(entries), "entries/tick")
	}
}
