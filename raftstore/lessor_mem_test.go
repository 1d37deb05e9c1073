package raftstore

import (
	"fmt"
	"iter"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/lease"
)

// TestTrackedIsSmall: the lessor keeps one tracked per live lease on the
// leader; growing it is a memory regression on every leader (issue 27).
func TestTrackedIsSmall(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(tracked{}), uintptr(64))
}

// TestLimitsShared: leases of one profile share one copy of its limits.
func TestLimitsShared(t *testing.T) {
	l := newLessor(realClock{}, time.Second, time.Minute, func(p string) stallLimits {
		return stallLimits{timeout: time.Minute, report: time.Second}
	})
	prof := func(string) (string, bool) { return "p", true }
	var a, b tracked
	require.Equal(t, stallLimits{time.Minute, time.Second}, l.limitsLocked(&a, prof, "t1"))
	l.limitsLocked(&b, prof, "t2")
	require.Same(t, a.limits, b.limits)
	var c tracked
	require.Equal(t, stallLimits{}, l.limitsLocked(&c, nil, "t3"), "no profile: no limits")
	require.NotNil(t, c.limits, "resolved once, even when none")
	require.Equal(t, stallLimits{}, limitsOf(tracked{}))
}

// BenchmarkLessorHeapPerLease reports the live heap the leader's lessor
// keeps per live lease once its expiry scan has seen them: the slope
// between 10k and 100k leases. Run with -benchtime 1x.
func BenchmarkLessorHeapPerLease(b *testing.B) {
	const first, total = 10_000, 100_000
	leases := make([]lease.Lease, total)
	start := time.Now()
	for i := range leases {
		leases[i] = lease.Lease{TaskID: fmt.Sprintf("task-%d", i), Epoch: 1, SessionID: fmt.Sprintf("s-%d", i/100),
			TTL: 10 * time.Second, Status: lease.StatusActive, AcquiredAt: lease.StampOf(start),
			ExpiresAt: lease.StampOf(start.Add(time.Hour))}
	}
	scan := func(ls []lease.Lease) iter.Seq[*lease.Lease] {
		return func(yield func(*lease.Lease) bool) {
			for i := range ls {
				if !yield(&ls[i]) {
					return
				}
			}
		}
	}
	prof := func(string) (string, bool) { return "default", true }
	for b.Loop() {
		l := newLessor(realClock{}, time.Second, time.Minute, func(string) stallLimits {
			return stallLimits{timeout: time.Hour, report: time.Second}
		})
		l.promote(nil, nil)
		require.Empty(b, l.plan(expiryInput{Leases: scan(leases[:first]), Profile: prof}, 100))
		before := liveHeap()
		require.Empty(b, l.plan(expiryInput{Leases: scan(leases), Profile: prof}, 100))
		after := liveHeap()
		b.ReportMetric(float64(after-before)/float64(total-first), "B/lease")
		runtime.KeepAlive(l)
	}
}
