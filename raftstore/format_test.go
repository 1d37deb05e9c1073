package raftstore

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// An entry of an unknown type (127, the one issue #30's probe injected)
// stops the member with one error naming index, type and writer; the
// process does not panic, /readyz's Ready reports it, and restarting on
// the same data dir stops at the same entry again instead of crash-looping.
// Entries before it stay applied.
func TestUnknownEntryHaltsWithoutCrashLoop(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.Registerer = reg; cfg.Version = "v0.0.1-test" })
	s := c.waitForLeader()
	sid := c.openSession("w1")
	g := c.acquire("a1", "t1", sid, "test")

	f := s.raft.ApplyLog(raft.Log{Data: []byte{127, '{', '}'}, Extensions: []byte("9/v9.0.0")}, time.Second)
	require.NoError(t, f.Error(), "raft commits the entry; the fsm refuses it")
	he, ok := f.Response().(*HaltError)
	require.True(t, ok, "the proposer gets the halt, got %T", f.Response())
	bad := he.Index
	check := func(s *Store) {
		t.Helper()
		waitFor(t, waitTimeout, "the member halts", func() bool { return s.Halted() != nil })
		err := s.Halted()
		require.ErrorIs(t, err, ErrHalted)
		var e *HaltError
		require.ErrorAs(t, err, &e)
		require.Equal(t, bad, e.Index)
		require.EqualValues(t, 127, e.Type)
		require.Contains(t, err.Error(), "fencepost v9.0.0 (entry format 9)")
		require.Contains(t, err.Error(), "fencepost v0.0.1-test")
		require.ErrorIs(t, s.Ready(), ErrHalted, "readiness reports the halt")
		waitFor(t, waitTimeout, "raft shuts down", func() bool { return s.raft.State() == raft.Shutdown })
		tk, err := s.Task(ctxT(t), "t1", true)
		require.NoError(t, err, "stale reads still serve the state before the halt")
		require.Equal(t, g.Lease.Epoch, tk.Lease.Epoch)
	}
	check(s)
	require.Equal(t, 1.0, testutil.ToFloat64(gaugeNamed(t, reg, "fencepost_raft_apply_halted")))

	// Restart on the same data dir: the same halt, no panic.
	c.stop(0)
	c.cfgs[0].Registerer = nil
	c.start(0)
	check(c.node(0))
}

// gaugeNamed returns the registered collector of one metric name.
func gaugeNamed(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "copy"})
			g.Set(mf.GetMetric()[0].GetGauge().GetValue())
			return g
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}

func TestEntryStampNamesWriter(t *testing.T) {
	require.Equal(t, "fencepost v1.2.3 (entry format 1)", writerOf(entryStamp("v1.2.3")))
	require.Equal(t, "fencepost unknown (entry format 1)", writerOf(entryStamp("")))
	require.Contains(t, writerOf(nil), "stamps no version")
	require.Contains(t, writerOf([]byte("junk")), "unrecognised")
}
