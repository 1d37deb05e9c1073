package fault

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/test/netfault"
	"github.com/fencepost/fencepost/test/scenario"
)

// startSidecarProcess runs `fencepost sidecar` for worker as a child
// process and returns it with a worker behind it.
func (e *env) startSidecarProcess(worker string) (*netfault.Process, *scenario.Worker) {
	e.t.Helper()
	proxyAddr, control := netfault.FreeAddr(e.t), netfault.FreeAddr(e.t)
	p, err := netfault.Start(e.t, netfault.ProcConfig{
		Name: "sidecar-" + worker,
		Args: []string{"sidecar", "--cluster", strings.Join(e.cluster.Endpoints(), ","), "--worker-id", worker,
			"--proxy-addr", proxyAddr, "--control-addr", control, "--timeouts-upstream", "20s",
			"--log-format", "console", "--log-level", "info"},
	})
	require.NoError(e.t, err)
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("%s log:\n%s", p.Name(), p.Tail(40))
		}
		_ = p.Stop(5 * time.Second)
	})
	eventually(e.t, 10*time.Second, 20*time.Millisecond, "sidecar process serving", func() bool {
		resp, err := http.Get("http://" + control + proxy.PathHealth)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	e.logf(worker, "sidecar process pid %d up", p.PID())
	w := scenario.NewWorker(worker, proxyAddr, control)
	e.t.Cleanup(w.Close)
	return p, w
}

// acquire acquires task through w's sidecar, retrying while the sidecar
// has no session yet or the task is not yet claimable.
func (e *env) acquire(w *scenario.Worker, task string, claim bool) proxy.GrantReply {
	e.t.Helper()
	var g proxy.GrantReply
	eventually(e.t, 10*time.Second, 20*time.Millisecond, w.Name+" acquiring "+task, func() bool {
		var err error
		if claim {
			g, err = w.Claim(e.ctx)
		} else {
			g, err = w.Acquire(e.ctx, task)
		}
		var pe *scenario.ProblemError
		if err != nil && !errors.As(err, &pe) {
			e.logf(w.Name, "acquire: %v", err)
		}
		return err == nil
	})
	e.logf(w.Name, "holds %s epoch=%d", g.Task.ID, g.Lease.Epoch)
	return g
}

// waitStatus polls the cluster until task's lease with epoch is in want.
func (e *env) waitStatus(c *cluster.Client, task string, epoch uint64, want lease.Status, limit time.Duration) {
	e.t.Helper()
	d := eventually(e.t, limit, 20*time.Millisecond, fmt.Sprintf("lease epoch=%d %s", epoch, want), func() bool {
		t, err := c.Task(e.ctx, task, false)
		if err != nil {
			return false
		}
		if t.Lease != nil && t.Lease.Epoch == epoch {
			return t.Lease.Status == want
		}
		for _, h := range t.History() {
			if h.Epoch == epoch {
				return h.Status == want
			}
		}
		return false
	})
	e.logf("cluster", "lease epoch=%d is %s (after %v)", epoch, want, d.Round(time.Millisecond))
}

// TestSIGSTOPSidecarPastTTL freezes a worker's sidecar (a `fencepost
// sidecar` process) past its
// TTL, as a GC pause or a stopped VM would, with one of its writes held
// on the wire. The cluster reclaims the task; a new owner gets a higher
// epoch (I2); when the sidecar thaws, its very next write is blocked
// without reaching the downstream (I4); the held write, delivered late,
// is rejected as stale (I3).
func TestSIGSTOPSidecarPastTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the fencepost binary; skipped with -short")
	}
	netfault.Binary(t) // build before anything is timed
	e := newEnv(t, scenario.ClusterConfig{TTL: 2 * time.Second, Grace: 500 * time.Millisecond}, 60*time.Second)
	c := e.client(true)
	const task = "frozen"
	procA, wA := e.startSidecarProcess("A")
	_, wB := e.sidecar("B", e.cluster.Endpoints())

	gA := e.acquire(wA, task, false)
	epochA := gA.Lease.Epoch
	r := wA.Write(e.ctx, e.down.WriteURL(task), task, "step-1", []byte(`{"step":1}`))
	require.Equal(t, scenario.Accepted, r.Outcome, "A's first write: %+v", r)
	e.logf("A", "step-1 accepted (epoch=%d)", epochA)

	held, err := netfault.Listen(e.down.Addr(), netfault.Options{Logf: t.Logf})
	require.NoError(t, err)
	defer held.Close()
	held.Hold()
	heldDone := make(chan scenario.WriteResult, 1)
	go func() {
		heldDone <- wA.Write(e.ctx, "http://"+held.Addr()+"/v1/tasks/"+task+"/writes", task, "step-2", []byte(`{"step":2}`))
	}()
	waitHeld(t, held)
	e.logf("net", "A's step-2 (epoch=%d) held on the wire", epochA)

	require.NoError(t, procA.Pause())
	e.logf("A", "sidecar process SIGSTOPped")
	e.waitStatus(c, task, epochA, lease.StatusReclaimed, e.ccfg.TTL+e.ccfg.Grace+5*time.Second)

	gB := e.acquire(wB, task, true)
	require.Equal(t, task, gB.Task.ID)
	require.Greater(t, gB.Lease.Epoch, epochA, "I2: the new owner's epoch is higher")
	r = wB.Write(e.ctx, e.down.WriteURL(task), task, "step-2", []byte(`{"step":2,"by":"B"}`))
	require.Equal(t, scenario.Accepted, r.Outcome, "B's write: %+v", r)
	e.logf("B", "step-2 accepted (epoch=%d)", gB.Lease.Epoch)

	acceptedBefore := len(e.down.Accepted(task))
	require.NoError(t, procA.Resume())
	e.logf("A", "sidecar process SIGCONTinued")
	r = wA.Write(e.ctx, e.down.WriteURL(task), task, "step-3", []byte(`{"step":3}`))
	e.logf("A", "step-3 after thaw → %s %d %s", r.Outcome, r.Status, r.Code)
	require.Equal(t, scenario.BlockedBySidecar, r.Outcome, "I4: the thawed sidecar must block the write: %+v", r)
	require.Len(t, e.down.Accepted(task), acceptedBefore, "I4: nothing from A reached the downstream after the thaw")

	held.Release()
	e.logf("net", "released A's held step-2")
	eventually(t, 5*time.Second, 5*time.Millisecond, "held write rejected as stale", func() bool { return e.down.RejectedStale() == 1 })
	e.logf("down", "rejected the held step-2 as stale")
	select {
	case hr := <-heldDone:
		e.logf("A", "its held call ended: %s %d %s", hr.Outcome, hr.Status, hr.Code)
		require.NotEqual(t, scenario.Accepted, hr.Outcome)
	case <-e.ctx.Done():
		t.Fatal("A's held call never returned")
	}

	acc := e.down.Accepted(task)
	require.NoError(t, checkI3(task, acc), "accepted log: %+v", acc)
	sawB := false
	for _, w := range acc {
		sawB = sawB || w.Epoch == gB.Lease.Epoch
		if sawB {
			require.NotEqual(t, epochA, w.Epoch, "no epoch-%d write is accepted after B's first write", epochA)
		}
	}
}

// checkI3 runs fence's epoch-order check over a downstream log.
func checkI3(task string, acc []scenario.AcceptedWrite) error {
	var ws []fence.AppliedWrite
	for _, w := range acc {
		ws = append(ws, fence.AppliedWrite{Key: fence.TaskKey{Task: task}, Epoch: w.Epoch})
	}
	return fence.CheckEpochOrder(ws)
}

// waitHeld waits until a whole request sits in l: bytes are held and no
// more arrived for a while (headers and body may be written separately).
func waitHeld(t *testing.T, l *netfault.Link) {
	t.Helper()
	var last int64
	eventually(t, 5*time.Second, 50*time.Millisecond, "a write held on the wire", func() bool {
		n := l.Stats().BytesHeld
		settled := n > 0 && n == last
		last = n
		return settled
	})
}
