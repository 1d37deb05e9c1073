package fault

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/test/scenario"
)

// history collects porcupine operations from many goroutines.
type history struct {
	mu  sync.Mutex
	ops []porcupine.Operation
}

func (h *history) add(client int, in leaseInput, out leaseOutput, call, ret time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call.UnixNano(), Return: ret.UnixNano()})
}

// outcome turns a cluster call's error into a model output.
func outcome(err error) leaseOutput {
	if err == nil {
		return leaseOutput{OK: true}
	}
	if code := lease.ErrorCode(err); code != "invalid" || errors.Is(err, lease.ErrInvalid) {
		return leaseOutput{Code: code}
	}
	return leaseOutput{Unknown: true}
}

// TestLeaderKillDuringAcquires kills the leader while four workers race to
// acquire and give back two tasks, then restarts it. The whole history of
// acquires, releases and reported losses must be linearizable against the
// lease model (I1: one holder at a time; I2: epochs strictly increase).
// Liveness (I7): a fresh task can be acquired within election + 1s of the
// kill; from then on (the fault has healed) a task whose holder died with
// the leader is acquirable within orphanBound: the new leader restarts
// every lease's TTL (spread by up to 10% so expiries do not arrive as a
// storm), then the grace runs, then the resume guard hands it over.
func TestLeaderKillDuringAcquires(t *testing.T) {
	const ttl, grace, election = 2 * time.Second, 500 * time.Millisecond, 300 * time.Millisecond
	const orphanBound = ttl + ttl/10 + grace + election + time.Second
	e := newEnv(t, scenario.ClusterConfig{TTL: ttl, Grace: grace, ElectionTimeout: election}, 60*time.Second)
	seed := time.Now().UnixNano()
	e.logf("test", "seed %d", seed)
	var hist history
	tasks := []string{"race-0", "race-1"}

	// The orphan's holder dies with the leader: its heartbeats stop then.
	oc := e.client(true)
	osess, err := oc.OpenSession(e.ctx, api.OpenSessionRequest{WorkerID: "orphan-holder"})
	require.NoError(t, err)
	ohb := e.heartbeat(oc, osess.SessionID, ttl/4, nil)
	og, err := oc.Acquire(e.ctx, "orphan", api.AcquireRequest{SessionID: osess.SessionID, Create: true, Profile: scenario.ProfileName})
	require.NoError(t, err)
	e.logf("orphan", "holds orphan epoch=%d", og.Lease.Epoch)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var hbs []*heartbeater
	for i := 0; i < 4; i++ {
		c := e.client(true)
		sess, err := c.OpenSession(e.ctx, api.OpenSessionRequest{WorkerID: fmt.Sprintf("racer-%d", i)})
		require.NoError(t, err)
		client := i
		hbs = append(hbs, e.heartbeat(c, sess.SessionID, ttl/4, func(ls api.LeaseState, last time.Time) {
			hist.add(client, leaseInput{Kind: opLost, Task: ls.TaskID, Client: client, Epoch: ls.Epoch}, leaseOutput{OK: true}, last, time.Now())
		}))
		rng := rand.New(rand.NewSource(seed + int64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 2000; n++ {
				select {
				case <-stop:
					return
				case <-e.ctx.Done():
					return
				default:
				}
				task := tasks[rng.Intn(len(tasks))]
				call := time.Now()
				g, err := c.Acquire(e.ctx, task, api.AcquireRequest{SessionID: sess.SessionID, Create: true, Profile: scenario.ProfileName})
				out := outcome(err)
				out.Epoch = g.Lease.Epoch
				hist.add(client, leaseInput{Kind: opAcquire, Task: task, Client: client}, out, call, time.Now())
				if !out.OK {
					time.Sleep(time.Duration(5+rng.Intn(20)) * time.Millisecond) // think time, not synchronisation
					continue
				}
				time.Sleep(time.Duration(10+rng.Intn(40)) * time.Millisecond) // the work
				call = time.Now()
				_, err = c.Release(e.ctx, task, api.ReleaseRequest{SessionID: sess.SessionID, Epoch: out.Epoch, Outcome: lease.OutcomeGivenBack})
				hist.add(client, leaseInput{Kind: opRelease, Task: task, Client: client, Epoch: out.Epoch}, outcome(err), call, time.Now())
			}
		}()
	}

	time.Sleep(time.Second) // let the race run before the fault
	old, err := e.cluster.WaitLeader(e.ctx)
	require.NoError(t, err)
	killed := time.Now()
	ohb.halt()
	require.NoError(t, e.cluster.StopNode(old))
	e.logf("cluster", "leader %s killed", old.ID)

	probe := e.client(false)
	psess := func() string {
		var s api.Session
		eventually(t, 10*time.Second, 20*time.Millisecond, "probe session", func() bool {
			var err error
			s, err = probe.OpenSession(e.ctx, api.OpenSessionRequest{WorkerID: "probe"})
			return err == nil
		})
		return s.SessionID
	}()
	fresh := eventually(t, election+time.Second+2*time.Second, 20*time.Millisecond, "a fresh task acquired after the kill", func() bool {
		_, err := probe.Acquire(e.ctx, "fresh", api.AcquireRequest{SessionID: psess, Create: true, Profile: scenario.ProfileName})
		return err == nil
	})
	freshAfterKill := time.Since(killed)
	healed := time.Now() // the cluster serves again: the fault has healed
	e.logf("probe", "fresh task acquired %v after the kill (poll wait %v)", freshAfterKill.Round(time.Millisecond), fresh.Round(time.Millisecond))
	require.LessOrEqual(t, freshAfterKill, election+time.Second, "I7: a fresh task is acquirable within election + 1s")

	var og2 api.Grant
	eventually(t, ttl+grace+election+5*time.Second, 20*time.Millisecond, "the orphan reclaimed and acquired", func() bool {
		var err error
		og2, err = probe.Acquire(e.ctx, "orphan", api.AcquireRequest{SessionID: psess, Profile: scenario.ProfileName})
		return err == nil
	})
	orphanAfterHeal := time.Since(healed)
	e.logf("probe", "orphan acquired epoch=%d (was %d) %v after the cluster served again", og2.Lease.Epoch, og.Lease.Epoch, orphanAfterHeal.Round(time.Millisecond))
	require.Greater(t, og2.Lease.Epoch, og.Lease.Epoch, "I2")
	require.LessOrEqual(t, orphanAfterHeal, orphanBound, "I7: a dead holder's task is acquirable within 1.1×TTL + grace + election + 1s of the heal")

	require.NoError(t, e.cluster.RestartNode(old))
	e.logf("cluster", "%s restarted", old.ID)

	time.Sleep(500 * time.Millisecond) // more racing with the old leader back
	close(stop)
	wg.Wait()
	// One more acknowledged heartbeat per worker reports any loss.
	stopped := time.Now()
	for _, h := range hbs {
		eventually(t, 5*time.Second, 10*time.Millisecond, "a heartbeat after the race", func() bool { return h.ackedSince(stopped) })
		h.halt()
	}

	hist.mu.Lock()
	ops := append([]porcupine.Operation(nil), hist.ops...)
	hist.mu.Unlock()
	grants := 0
	for _, op := range ops {
		if in := op.Input.(leaseInput); in.Kind == opAcquire && op.Output.(leaseOutput).OK {
			grants++
		}
	}
	e.logf("test", "%d operations, %d grants", len(ops), grants)
	require.Greater(t, grants, 10, "the workers made progress")
	model := leaseModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, ops, 20*time.Second)
	if res != porcupine.Ok {
		f, err := os.CreateTemp("", "fencepost-lease-history-*.html")
		if err == nil {
			_ = porcupine.Visualize(model, info, f)
			_ = f.Close()
			t.Logf("history visualisation: %s", f.Name())
		}
	}
	require.Equal(t, porcupine.Ok, res, "the lease history is not linearizable (seed %d)", seed)
}
