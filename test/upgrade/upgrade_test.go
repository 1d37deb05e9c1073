package upgrade

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/test/nemesis"
	"github.com/fencepost/fencepost/test/netfault"
)

// PreviousCommit is the build the upgrade starts from: the last commit of
// main before entries carried a format stamp (the "previous release" until
// v0.1.0 is tagged; then this becomes that tag's commit).
const PreviousCommit = "927f237"

func TestMain(m *testing.M) {
	code := m.Run()
	netfault.RemoveBinary()
	os.Exit(code)
}

// buildPrevious builds PreviousCommit's fencepost from the repository's
// history: `git archive` of the commit into a temporary directory (not
// `git worktree add`, which would register a worktree in the shared
// repository for the length of the build), then `go build`.
func buildPrevious(t *testing.T) string {
	t.Helper()
	root, err := netfault.ModuleRoot()
	require.NoError(t, err)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("rolling upgrade: git is not installed, so the previous build cannot be made")
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", PreviousCommit+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("rolling upgrade: commit %s is not in this checkout's history (a shallow clone?): %v %s", PreviousCommit, err, out)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, os.Mkdir(src, 0o750))
	tarball := filepath.Join(dir, "src.tar")
	run := func(dir string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
	}
	run(root, "git", "archive", "--format=tar", "-o", tarball, PreviousCommit)
	run(src, "tar", "-xf", tarball)
	bin := filepath.Join(dir, "fencepost-"+PreviousCommit)
	run(src, "go", "build", "-o", bin, "-ldflags", "-X main.version=prev-"+PreviousCommit, "./cmd/fencepost")
	return bin
}

// member is one cluster member whose binary changes across restarts.
type member struct {
	id, http, raft, dir string
	join                []string
	proc                *netfault.Process
	bin                 string
	starts              int
}

func (m *member) start(t *testing.T, bin string) {
	t.Helper()
	m.bin = bin
	m.starts++
	args := []string{"server", "--node-id", m.id, "--data-dir", m.dir, "--http-addr", m.http, "--raft-addr", m.raft,
		"--raft-election-timeout", "600ms", "--raft-heartbeat-timeout", "200ms", "--raft-leader-lease-timeout", "200ms",
		// Snapshots often, so old and new members install each other's.
		"--raft-snapshot-threshold", "64", "--raft-trailing-logs", "32", "--raft-snapshot-interval", "1s",
		"--log-format", "console", "--log-level", "warn"}
	if len(m.join) > 0 {
		args = append(args, "--join", strings.Join(m.join, ","))
	}
	if !strings.HasSuffix(bin, PreviousCommit) {
		// The upgrade procedure (deploy/RELEASES.md): while previous
		// members remain, the new ones write only what those apply alike.
		args = append(args, "--raft-mixed-versions")
	}
	p, err := netfault.Start(t, netfault.ProcConfig{Name: fmt.Sprintf("%s-%d", m.id, m.starts), Binary: bin, Args: args})
	require.NoError(t, err)
	m.proc = p
}

// ready polls the member's /readyz until it answers 200.
func (m *member) waitReady(t *testing.T, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Get("http://" + m.http + api.PathReady)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) || !m.proc.Running() {
			t.Fatalf("%s (%s) not ready after %v: %v; log %s:\n%s", m.id, m.bin, limit, err, m.proc.LogPath(), m.proc.Tail(30))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// history is what the load saw acknowledged.
type history struct {
	mu     sync.Mutex
	grants []nemesis.Grant
	acks   []nemesis.Ack
	ops    map[string]int
}

func (h *history) count(what string) {
	h.mu.Lock()
	h.ops[what]++
	h.mu.Unlock()
}

// load runs one worker until stop: open a session, acquire one of a few
// shared tasks, checkpoint it three times, heartbeat, give it back; one
// round every 20 ms at most, so the load is bounded whatever the machine.
func load(ctx context.Context, c *cluster.Client, worker string, seed uint64, h *history) {
	rng := rand.New(rand.NewPCG(seed, 7))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	sid := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if sid == "" {
			s, err := c.OpenSession(ctx, api.OpenSessionRequest{WorkerID: worker})
			if err != nil {
				h.count("open failed")
				continue
			}
			sid = s.SessionID
		}
		task := fmt.Sprintf("job-%d", rng.IntN(6))
		g, err := c.Acquire(ctx, task, api.AcquireRequest{SessionID: sid, Create: true})
		if errors.Is(err, lease.ErrSessionNotFound) {
			sid = ""
		}
		if err != nil {
			h.count("acquire refused or failed")
			continue
		}
		now := time.Now()
		h.mu.Lock()
		h.grants = append(h.grants, nemesis.Grant{At: now, Worker: worker, Task: task, Epoch: g.Lease.Epoch})
		h.ops["acquire"]++
		h.mu.Unlock()
		for k := range 3 {
			tk, err := c.Checkpoint(ctx, task, api.CheckpointRequest{SessionID: sid, Epoch: g.Lease.Epoch, Step: fmt.Sprintf("%s-%d", worker, k)})
			if err != nil {
				h.count("checkpoint failed")
				break
			}
			h.mu.Lock()
			h.acks = append(h.acks, nemesis.Ack{At: time.Now(), Worker: worker, Task: task, Epoch: g.Lease.Epoch, Seq: tk.Checkpoint.Seq})
			h.ops["checkpoint"]++
			h.mu.Unlock()
		}
		if _, err := c.HeartbeatOnce(ctx, sid, api.HeartbeatRequest{}); err != nil {
			h.count("heartbeat failed")
		} else {
			h.count("heartbeat")
		}
		if _, err := c.Release(ctx, task, api.ReleaseRequest{SessionID: sid, Epoch: g.Lease.Epoch, Outcome: lease.OutcomeGivenBack}); err != nil {
			h.count("release failed")
		} else {
			h.count("release")
		}
	}
}

// TestRollingUpgrade starts three members of the previous build, puts a
// bounded load on them, and replaces one member at a time with the
// current build (followers first, the leader last, each restarted on its
// own data dir and waited for until ready), then checks safety.
func TestRollingUpgrade(t *testing.T) {
	if os.Getenv("UPGRADE") != "1" {
		t.Skip("rolling upgrade: set UPGRADE=1 to run (test/run.sh does); it builds the previous release from git")
	}
	prev := buildPrevious(t)
	cur := netfault.Binary(t)
	dir := t.TempDir()
	var ms []*member
	for i := range 3 {
		m := &member{id: fmt.Sprintf("n%d", i+1), http: netfault.FreeAddr(t), raft: netfault.FreeAddr(t)}
		m.dir = filepath.Join(dir, m.id)
		if i > 0 {
			m.join = []string{ms[0].http}
		}
		ms = append(ms, m)
		m.start(t, prev)
		m.waitReady(t, 30*time.Second)
	}
	var endpoints []string
	for _, m := range ms {
		endpoints = append(endpoints, m.http)
	}
	client := func(eps ...string) *cluster.Client {
		c, err := cluster.New(cluster.Config{Endpoints: eps, Timeout: 2 * time.Second, CallTimeout: 5 * time.Second})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	all := client(endpoints...)
	waitMembers(t, all, 3)

	h := &history{ops: map[string]int{}}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { load(ctx, client(endpoints...), fmt.Sprintf("w%d", i+1), uint64(i+1), h) })
	}
	settle := func(what string) {
		// Let the load run against this mix for a while, measured in
		// acknowledged work rather than time.
		t.Helper()
		h.mu.Lock()
		base := len(h.acks)
		h.mu.Unlock()
		deadline := time.Now().Add(30 * time.Second)
		for {
			h.mu.Lock()
			n := len(h.acks)
			h.mu.Unlock()
			if n >= base+30 {
				return
			}
			require.True(t, time.Now().Before(deadline), "%s: the load made no progress (%d checkpoints in 30s); ops %v", what, n-base, h.ops)
			time.Sleep(25 * time.Millisecond)
		}
	}
	settle("all previous")
	restart := func(m *member, bin string) {
		t.Helper()
		require.NoError(t, m.proc.Stop(10*time.Second), "stop %s", m.id)
		m.start(t, bin)
		m.waitReady(t, 30*time.Second)
		waitMembers(t, all, 3)
		settle(fmt.Sprintf("after restarting %s as %s", m.id, filepath.Base(bin)))
	}
	// One follower first: an old leader replicates to a new member.
	first := upgradeOrder(t, all, ms)[0]
	restart(first, cur)
	// Then the new member must lead while old members follow, so old
	// members apply entries (and install snapshots) the new build wrote:
	// the old leader is stopped until the two members left have elected
	// one of them, then started again on its own build, until the
	// election lands on the new member. Restarting it at once would let
	// it race the election it caused, which it won far more often than
	// the coin toss this loop counts on (seen in CI: ten in a row). Each
	// try is a toss between two members, so twenty tries all miss about
	// once in a million.
	for try := 0; leaderOf(t, all, ms).bin != cur; try++ {
		require.Less(t, try, 20, "the upgraded member never became leader")
		l := leaderOf(t, all, ms)
		require.NoError(t, l.proc.Stop(10*time.Second), "stop %s", l.id)
		next := waitLeaderOtherThan(t, all, l.id)
		t.Logf("try %d: %s (%s) stopped; %s leads now", try, l.id, filepath.Base(l.bin), next)
		l.start(t, l.bin)
		l.waitReady(t, 30*time.Second)
		waitMembers(t, all, 3)
		settle(fmt.Sprintf("after restarting %s as %s", l.id, filepath.Base(l.bin)))
	}
	settle("new leader, old followers")
	for _, m := range upgradeOrder(t, all, ms) {
		if m.bin != cur {
			restart(m, cur)
		}
	}
	stop()
	wg.Wait()

	// Safety, from the cluster's records and the load's acknowledgements.
	leaderTasks := converged(t, all, ms, client)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(t, nemesis.CheckEpochs(leaderTasks, h.grants), "epochs strictly increase per task, one holder each")
	memberTasks := map[string][]lease.Task{}
	for _, m := range ms {
		tasks, err := nemesis.Tasks(t.Context(), client(m.http), true)
		require.NoError(t, err)
		memberTasks[m.id] = tasks
		require.Equal(t, summary(leaderTasks), summary(tasks), "member %s holds the same tasks as the leader", m.id)
	}
	require.Empty(t, nemesis.CheckCheckpoints(memberTasks, h.acks), "every acknowledged checkpoint is on every member")
	require.Empty(t, activeTwice(leaderTasks), "no task has two active leases")
	require.NotEmpty(t, h.grants)
	t.Logf("rolling upgrade %s -> current: %d grants, %d acknowledged checkpoints; ops %v", PreviousCommit, len(h.grants), len(h.acks), h.ops)
}

// upgradeOrder is the followers first, then the leader.
func upgradeOrder(t *testing.T, c *cluster.Client, ms []*member) []*member {
	t.Helper()
	st, err := c.Status(t.Context())
	require.NoError(t, err)
	var out []*member
	var leader *member
	for _, m := range ms {
		if m.id == st.Leader {
			leader = m
			continue
		}
		out = append(out, m)
	}
	require.NotNil(t, leader, "a leader among %v (status %+v)", ms, st)
	return append(out, leader)
}

// leaderOf returns the member the cluster names as leader.
func leaderOf(t *testing.T, c *cluster.Client, ms []*member) *member {
	t.Helper()
	order := upgradeOrder(t, c, ms)
	return order[len(order)-1]
}

// waitLeaderOtherThan waits until the cluster names a leader other than
// the member gone, and returns its id.
func waitLeaderOtherThan(t *testing.T, c *cluster.Client, gone string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Status(t.Context())
		if err == nil && st.Leader != "" && st.Leader != gone {
			return st.Leader
		}
		require.True(t, time.Now().Before(deadline), "no leader other than %s: %+v %v", gone, st, err)
		time.Sleep(25 * time.Millisecond)
	}
}

// waitMembers waits until the cluster reports n members.
func waitMembers(t *testing.T, c *cluster.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Status(t.Context())
		if err == nil && len(st.Members) == n && st.Leader != "" {
			return
		}
		require.True(t, time.Now().Before(deadline), "cluster never had %d members: %+v %v", n, st, err)
		time.Sleep(25 * time.Millisecond)
	}
}

// converged waits until every member has applied the leader's commit
// index, then returns the leader's tasks (a linearizable read).
func converged(t *testing.T, all *cluster.Client, ms []*member, client func(...string) *cluster.Client) []lease.Task {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := all.Status(t.Context())
		ok := err == nil
		for _, m := range ms {
			if !ok {
				break
			}
			own, err := client(m.http).MemberStatus(t.Context(), m.http)
			ok = err == nil && own.AppliedIndex >= st.CommitIndex
		}
		if ok {
			break
		}
		require.True(t, time.Now().Before(deadline), "members never converged: %+v %v", st, err)
		time.Sleep(25 * time.Millisecond)
	}
	tasks, err := nemesis.Tasks(t.Context(), all, false)
	require.NoError(t, err)
	return tasks
}

// summary is a task list reduced to what every replica must agree on.
func summary(tasks []lease.Task) []string {
	out := make([]string, 0, len(tasks))
	for _, tk := range tasks {
		s := fmt.Sprintf("%s state=%s maxEpoch=%d", tk.ID, tk.State, tk.MaxEpoch)
		if tk.Checkpoint != nil {
			s += fmt.Sprintf(" cp=%d@%d", tk.Checkpoint.Seq, tk.Checkpoint.Epoch)
		}
		if tk.Lease != nil {
			s += fmt.Sprintf(" lease=%d/%s", tk.Lease.Epoch, tk.Lease.Status)
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// activeTwice reports a task whose lease history holds more than one
// active lease: two holders at once.
func activeTwice(tasks []lease.Task) []string {
	byTask := map[string]lease.Task{}
	for _, tk := range tasks {
		byTask[tk.ID] = tk
	}
	var bad []string
	for _, tk := range byTask {
		active := 0
		for _, l := range append(append([]lease.Lease(nil), tk.History()...), derefLease(tk.Lease)...) {
			if l.Status == lease.StatusActive {
				active++
			}
		}
		if active > 1 {
			bad = append(bad, fmt.Sprintf("task %s has %d active leases", tk.ID, active))
		}
	}
	return bad
}

func derefLease(l *lease.Lease) []lease.Lease {
	if l == nil {
		return nil
	}
	return []lease.Lease{*l}
}
