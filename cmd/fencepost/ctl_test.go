package main

import (
	"encoding/json"
	"flag"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/fencepost/fencepost/raftstore/node"
)

// ctlPollWait bounds the polling waits of these tests; a one-node cluster on
// loopback needs well under a second for any of them.
const ctlPollWait = 15 * time.Second

// startCtlCluster starts a real one-node cluster (raft store + HTTP API) and
// returns its endpoint; StartCluster waits until it leads and is ready.
func startCtlCluster(t *testing.T) string {
	t.Helper()
	c := httpapitest.StartCluster(t, 1, zap.WarnLevel)
	return c.Endpoints()[0]
}

// ctl runs 'fencepost ctl --cluster ep ARGS...' in-process.
func ctl(t *testing.T, ep string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLI(t, append([]string{"ctl", "--cluster", ep}, args...)...)
}

// ctlOK runs ctl and requires success with nothing on stderr.
func ctlOK(t *testing.T, ep string, args ...string) string {
	t.Helper()
	code, out, errOut := ctl(t, ep, args...)
	require.Equal(t, exitOK, code, "ctl %v: %s", args, errOut)
	require.Empty(t, errOut)
	return out
}

// ctlJSON runs ctl with -o json, requires success, and decodes the output.
func ctlJSON[T any](t *testing.T, ep string, args ...string) T {
	t.Helper()
	var v T
	out := ctlOK(t, ep, append(args, "-o", "json")...)
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	return v
}

// ctlFails runs ctl and requires exit code want with exactly one line on
// stderr containing each of msgs.
func ctlFails(t *testing.T, ep string, want int, args []string, msgs ...string) string {
	t.Helper()
	code, _, errOut := ctl(t, ep, args...)
	require.Equal(t, want, code, "ctl %v: %s", args, errOut)
	require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
	require.True(t, strings.HasPrefix(errOut, "fencepost ctl"), errOut)
	for _, m := range msgs {
		require.Contains(t, errOut, m)
	}
	return errOut
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestCtlStatusMembersKeysLeases(t *testing.T) {
	ep := startCtlCluster(t)

	out := ctlOK(t, ep, "status")
	require.Contains(t, out, "leader")
	require.Contains(t, out, "applied index")
	require.Regexp(t, `n1\s+\S+\s+`+ep+`\s+leader\s+\d+\s+\d+\s+-\s+yes`, out)

	st := ctlJSON[api.ClusterStatus](t, ep, "status")
	require.Equal(t, "n1", st.Leader)
	require.NotZero(t, st.Term)
	require.NotZero(t, st.AppliedIndex)
	require.Len(t, st.Members, 1)

	// Global flags may also come first.
	code, out, _ := runCLI(t, "ctl", "-o", "json", "--cluster", ep, "members", "list")
	require.Equal(t, exitOK, code)
	var ml struct{ Members []api.Member }
	require.NoError(t, json.Unmarshal([]byte(out), &ml))
	require.Equal(t, "n1", ml.Members[0].ID)
	require.Regexp(t, `n1\s+\S+\s+`+ep+`\s+leader`, ctlOK(t, ep, "members", "list"))

	keys := ctlJSON[api.KeyList](t, ep, "keys")
	require.NotEmpty(t, keys.Keys)
	require.Contains(t, ctlOK(t, ep, "keys"), keys.Keys[0].ID)

	leases := ctlJSON[api.LeaseList](t, ep, "leases", "list")
	require.NotNil(t, leases.Leases)
	require.Empty(t, leases.Leases)
	require.Contains(t, ctlOK(t, ep, "leases", "list", "--stale"), "EPOCH")
}

func TestCtlTaskVerbs(t *testing.T) {
	ep := startCtlCluster(t)

	task := ctlJSON[lease.Task](t, ep, "tasks", "create", "run_1", "--priority", "3", "--payload", "hello", "--profile", "short")
	require.Equal(t, lease.TaskPending, task.State)
	require.Equal(t, 3, task.Priority)
	require.Equal(t, []byte("hello"), task.Payload)
	require.Contains(t, ctlOK(t, ep, "tasks", "create", "run_2"), "pending")

	out := ctlOK(t, ep, "tasks", "list")
	require.Regexp(t, `run_1\s+pending\s+short\s+3`, out)
	require.Contains(t, out, "run_2")
	list := ctlJSON[api.TaskList](t, ep, "tasks", "list", "--limit", "1")
	require.Len(t, list.Tasks, 1)
	require.Equal(t, "run_1", list.Tasks[0].ID)
	require.Equal(t, "run_1", list.Next)
	require.Contains(t, ctlOK(t, ep, "tasks", "list", "--limit", "1"), "(more: --after run_1)")
	list = ctlJSON[api.TaskList](t, ep, "tasks", "list", "--after", "run_1", "--stale")
	require.Equal(t, "run_2", list.Tasks[0].ID)
	list = ctlJSON[api.TaskList](t, ep, "tasks", "list", "--state", "leased")
	require.Empty(t, list.Tasks)

	got := ctlJSON[lease.Task](t, ep, "tasks", "get", "run_1")
	require.Equal(t, "run_1", got.ID)
	require.Contains(t, ctlOK(t, ep, "tasks", "get", "run_1", "--stale"), `"hello"`)

	// Revoke a live lease: the task becomes claimable again.
	g := ctlJSON[ctlGrant](t, ep, "acquire", "run_1", "--worker", "w1")
	require.Equal(t, lease.StatusActive, g.Lease.Status)
	list = ctlJSON[api.TaskList](t, ep, "tasks", "list", "--status", "active")
	require.Len(t, list.Tasks, 1)
	require.Regexp(t, `last progress\s+\S`, ctlOK(t, ep, "tasks", "get", "run_1"), "the leader shows what the progress deadline counts from")
	require.False(t, ctlJSON[lease.Task](t, ep, "tasks", "get", "run_1").Lease.ProgressAt.IsZero())
	task = ctlJSON[lease.Task](t, ep, "tasks", "revoke", "run_1", "--epoch", strconv.FormatUint(g.Epoch, 10), "--reason", "ops")
	require.Equal(t, lease.StatusRevoked, task.Lease.Status)
	require.Equal(t, "ops", task.Lease.Reason)
	require.Contains(t, ctlOK(t, ep, "tasks", "get", "run_1"), "revoked")

	// Signal needs a waiting task.
	g = ctlJSON[ctlGrant](t, ep, "acquire", "run_2", "--worker", "w1")
	sid, epoch := g.SessionID, strconv.FormatUint(g.Epoch, 10)
	task = ctlJSON[lease.Task](t, ep, "wait", "run_2", "--session", sid, "--epoch", epoch, "--reason", "human")
	require.Equal(t, lease.TaskWaiting, task.State)
	task = ctlJSON[lease.Task](t, ep, "tasks", "signal", "run_2", "--payload", "approved")
	require.Equal(t, []byte("approved"), task.Signal())
	require.NotEqual(t, lease.TaskWaiting, task.State)

	// Cancel, then delete the final task.
	task = ctlJSON[lease.Task](t, ep, "tasks", "cancel", "run_1", "--reason", "done with it")
	require.Equal(t, lease.TaskCancelled, task.State)
	del := ctlJSON[map[string]any](t, ep, "tasks", "delete", "run_1")
	require.Equal(t, map[string]any{"taskId": "run_1", "deleted": true}, del)
	ctlFails(t, ep, exitNotFound, []string{"tasks", "get", "run_1"}, "task_not_found")
	require.Contains(t, ctlOK(t, ep, "tasks", "cancel", "run_2"), "cancelled")
	require.Equal(t, "deleted task run_2\n", ctlOK(t, ep, "tasks", "delete", "run_2"))
}

func TestCtlScriptedLease(t *testing.T) {
	ep := startCtlCluster(t)

	// The table tells a person how to keep and end the lease.
	out := ctlOK(t, ep, "acquire", "job", "--worker", "w1", "--create", "--profile", "short", "--priority", "2")
	require.Regexp(t, `heartbeat --session s-\S+ --lease job:\d+`, out)
	require.Contains(t, out, "release job --session s-")
	require.Contains(t, out, "sessions close s-")
	sid := ctlJSON[lease.Task](t, ep, "tasks", "get", "job").Lease.SessionID
	require.Contains(t, ctlOK(t, ep, "release", "job", "--session", sid, "--epoch",
		strconv.FormatUint(ctlJSON[lease.Task](t, ep, "tasks", "get", "job").Lease.Epoch, 10), "--outcome", "given_back"), "pending")

	// The script path: everything comes from -o json.
	g := ctlJSON[ctlGrant](t, ep, "acquire", "job", "--session", sid)
	require.Equal(t, sid, g.SessionID)
	require.Equal(t, g.Lease.Epoch, g.Epoch)
	require.NotEmpty(t, g.TokenSignature)
	require.Positive(t, g.ValidForMs)
	require.Positive(t, g.HeartbeatMs)
	epoch := strconv.FormatUint(g.Epoch, 10)

	hb := ctlJSON[api.HeartbeatResponse](t, ep, "heartbeat", "--session", sid)
	require.Positive(t, hb.ValidForMs)
	require.Len(t, hb.Leases, 1)
	require.Equal(t, lease.StatusActive, hb.Leases[0].Status)
	require.Contains(t, ctlOK(t, ep, "heartbeat", "--session", sid), "renewed")

	task := ctlJSON[lease.Task](t, ep, "checkpoint", "job", "--session", sid, "--epoch", epoch, "--step", "fetched", "--data", "state")
	require.Equal(t, "fetched", task.Checkpoint.Step)
	require.Equal(t, []byte("state"), task.Checkpoint.Data)
	require.Contains(t, ctlOK(t, ep, "checkpoint", "job", "--session", sid, "--epoch", epoch, "--seq", "5"), "seq 5")

	task = ctlJSON[lease.Task](t, ep, "release", "job", "--session", sid, "--epoch", epoch, "--result", "ok")
	require.Equal(t, lease.TaskCompleted, task.State)

	// Claim takes the most urgent claimable task.
	ctlOK(t, ep, "tasks", "create", "low", "--priority", "1")
	ctlOK(t, ep, "tasks", "create", "high", "--priority", "9")
	g = ctlJSON[ctlGrant](t, ep, "claim", "--worker", "w2")
	require.Equal(t, "high", g.Task.ID)
	require.Contains(t, ctlOK(t, ep, "claim", "--session", g.SessionID), "low")
	ctlFails(t, ep, exitNotFound, []string{"claim", "--worker", "w3"}, "no_task")

	// Sessions by hand; closing gives the leases back.
	s := ctlJSON[api.Session](t, ep, "sessions", "open", "--worker", "w4", "--id", "s-fixed")
	require.Equal(t, "s-fixed", s.SessionID)
	require.Contains(t, ctlOK(t, ep, "sessions", "open", "--worker", "w4", "--id", "s-fixed"), "s-fixed")
	require.Equal(t, map[string]any{"sessionId": g.SessionID, "closed": true},
		ctlJSON[map[string]any](t, ep, "sessions", "close", g.SessionID))
	require.Equal(t, lease.TaskPending, ctlJSON[lease.Task](t, ep, "tasks", "get", "high").State)
	require.Equal(t, "session s-fixed closed\n", ctlOK(t, ep, "sessions", "close", "s-fixed"))
}

func TestCtlExitCodes(t *testing.T) {
	ep := startCtlCluster(t)
	g := ctlJSON[ctlGrant](t, ep, "acquire", "t1", "--worker", "w1", "--create")
	sid, epoch := g.SessionID, strconv.FormatUint(g.Epoch, 10)

	// 3: not found.
	ctlFails(t, ep, exitNotFound, []string{"tasks", "get", "nope"}, "task_not_found")
	ctlFails(t, ep, exitNotFound, []string{"tasks", "revoke", "nope"}, "task_not_found")
	ctlFails(t, ep, exitNotFound, []string{"heartbeat", "--session", "s-nope"}, "session_not_found")
	ctlFails(t, ep, exitNotFound, []string{"acquire", "nope", "--worker", "w1"}, "task_not_found")

	// 4: conflict.
	ctlFails(t, ep, exitConflict, []string{"tasks", "create", "t1"}, "task_exists")
	ctlFails(t, ep, exitConflict, []string{"acquire", "t1", "--worker", "w2"}, "lease_held")
	ctlFails(t, ep, exitConflict, []string{"checkpoint", "t1", "--session", sid, "--epoch", "1"},
		"stale_epoch", "(current epoch "+epoch+")")
	ctlFails(t, ep, exitConflict, []string{"tasks", "signal", "t1"}, "not_waiting")
	ctlFails(t, ep, exitConflict, []string{"tasks", "delete", "t1"}, "only completed, failed or cancelled")
	// A heartbeat that renewed the session but names a lease it lost
	// prints the reply and exits 4.
	ctlOK(t, ep, "tasks", "revoke", "t1")
	code, out, errOut := ctl(t, ep, "heartbeat", "--session", sid, "--lease", "t1:"+epoch)
	require.Equal(t, exitConflict, code)
	require.Contains(t, out, "revoked")
	require.Equal(t, "fencepost ctl: lease no longer held: t1 epoch "+epoch+" revoked\n", errOut)

	// 2: the cluster refused an argument.
	ctlFails(t, ep, exitUsage, []string{"tasks", "create", "t2", "--profile", "nope"}, "unknown_profile")
}

func TestCtlMembersAddRemove(t *testing.T) {
	ep := startCtlCluster(t)
	// A second member that neither bootstraps nor joins: ctl adds it.
	n2, err := node.Start(node.Config{
		Store: raftstore.Config{
			NodeID: "n2", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0",
			HeartbeatTimeout: 150 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
			LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		},
		HTTP:   httpapi.Config{Addr: "127.0.0.1:0"},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n2.Close() })

	out := ctlOK(t, ep, "members", "add", "n2", n2.Store.RaftAddr(), n2.HTTP.Addr())
	require.Equal(t, "member n2 added (raft "+n2.Store.RaftAddr()+", http "+n2.HTTP.Addr()+")\n", out)
	require.Eventually(t, func() bool {
		st := ctlJSON[api.ClusterStatus](t, n2.HTTP.Addr(), "status")
		return len(st.Members) == 2 && st.Leader == "n1"
	}, ctlPollWait, 20*time.Millisecond, "n2 sees both members and the leader")
	// Both endpoints may be given; either answers.
	st := ctlJSON[api.ClusterStatus](t, n2.HTTP.Addr()+","+ep, "status")
	require.Len(t, st.Members, 2)
	require.Regexp(t, `n2\s+\S+\s+\S+\s+follower`, ctlOK(t, ep, "status"))

	rm := ctlJSON[api.RemoveRequest](t, ep, "members", "remove", "n2")
	require.Equal(t, "n2", rm.ID)
	require.Len(t, ctlJSON[api.ClusterStatus](t, ep, "status").Members, 1)
}

func TestCtlUnreachableCluster(t *testing.T) {
	addr := freeAddr(t)
	// Refused, or — on a machine so loaded that the refusal comes after
	// the attempt's budget — timed out; either way one line naming both.
	want := regexp.MustCompile(`^fencepost ctl: cluster unreachable at ` + regexp.QuoteMeta(addr) + ` \((connection refused|i/o timeout)\)\n$`)
	for _, args := range [][]string{{"status"}, {"tasks", "create", "x"}, {"heartbeat", "--session", "s"}} {
		errOut := ctlFails(t, addr, exitRuntime, args)
		require.Regexp(t, want, errOut, args)
	}

	// FENCEPOST_CLUSTER is the default of --cluster.
	t.Setenv(ctlClusterEnv, addr)
	code, _, errOut := runCLI(t, "ctl", "keys")
	require.Equal(t, exitRuntime, code)
	require.Regexp(t, want, errOut)
}

func TestCtlTimeoutNamesTheRequestID(t *testing.T) {
	// A member that accepts connections and never answers: the outcome of
	// a mutation sent to it is unknown.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	errOut := ctlFails(t, ln.Addr().String(), exitRuntime,
		[]string{"tasks", "create", "x", "--timeout", "300ms", "--request-id", "rid-7"},
		"no answer from the cluster at "+ln.Addr().String()+" within 300ms", "repeat with --request-id rid-7")
	require.NotContains(t, errOut, "unreachable")
	// Without --request-id, ctl names the one it chose.
	ctlFails(t, ln.Addr().String(), exitRuntime, []string{"tasks", "cancel", "x", "--timeout", "300ms"}, "--request-id ctl-")
}

func TestCtlRequestIDAppliesOnce(t *testing.T) {
	ep := startCtlCluster(t)
	// Repeating a mutation with its request id, as after a timeout, has
	// its effect once: the second create answers like the first instead of
	// task_exists.
	ctlOK(t, ep, "tasks", "create", "once", "--request-id", "rid-1")
	ctlOK(t, ep, "tasks", "create", "once", "--request-id", "rid-1")
	ctlFails(t, ep, exitConflict, []string{"tasks", "create", "once"}, "task_exists")
	// acquire makes two calls; each gets its own id derived from the one
	// given, so a repeat returns the same session and epoch.
	g1 := ctlJSON[ctlGrant](t, ep, "acquire", "once", "--worker", "w", "--request-id", "rid-2")
	g2 := ctlJSON[ctlGrant](t, ep, "acquire", "once", "--worker", "w", "--request-id", "rid-2")
	require.Equal(t, g1.SessionID, g2.SessionID)
	require.Equal(t, g1.Epoch, g2.Epoch)
}

func TestCtlUsageErrors(t *testing.T) {
	// None of these reach the cluster: usage is checked first.
	ep := freeAddr(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "missing command"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"tasks"}, "tasks: missing verb (want list, get, create"},
		{[]string{"tasks", "frob"}, `tasks: unknown verb "frob"`},
		{[]string{"--bogus", "status"}, "flag provided but not defined: -bogus"},
		{[]string{"status", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"tasks", "get"}, "want ID, got 0 argument(s)"},
		{[]string{"tasks", "get", "a", "b"}, "want ID, got 2 argument(s)"},
		{[]string{"status", "extra"}, "want no arguments"},
		{[]string{"members", "add", "n2", "x"}, "want ID RAFT_ADDR HTTP_ADDR"},
		{[]string{"status", "-o", "yaml"}, `-o "yaml": want table or json`},
		{[]string{"status", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"status", "--timeout", "soon"}, "invalid value"},
		{[]string{"--cluster", "", "status"}, "--cluster: no endpoint given"},
		{[]string{"--cluster", "https://x:1", "status"}, "https:// needs the cluster CA"},
		{[]string{"tasks", "list", "--state", "running"}, `--state "running": want one of`},
		{[]string{"tasks", "list", "--status", "alive"}, `--status "alive": want one of`},
		{[]string{"tasks", "list", "--limit", "-1"}, "--limit must not be negative"},
		{[]string{"tasks", "create", "x", "--priority", "high"}, "invalid value"},
		{[]string{"acquire", "x"}, "--worker or --session is required"},
		{[]string{"claim"}, "--worker or --session is required"},
		{[]string{"heartbeat"}, "--session is required"},
		{[]string{"heartbeat", "--session", "s", "--lease", "t1"}, "want TASK:EPOCH"},
		{[]string{"checkpoint", "x", "--session", "s"}, "--session and --epoch are required"},
		{[]string{"wait", "x", "--epoch", "3"}, "--session and --epoch are required"},
		{[]string{"wait", "x", "--session", "s", "--epoch", "3", "--for", "-1s"}, "--for must not be negative"},
		{[]string{"release", "x", "--session", "s", "--epoch", "3", "--outcome", "done"}, `--outcome "done"`},
		{[]string{"sessions", "open"}, "--worker is required"},
	} {
		errOut := ctlFails(t, ep, exitUsage, tc.args, tc.msg)
		require.Contains(t, errOut, "run 'fencepost ctl", tc.args)
	}
}

func TestCtlHelp(t *testing.T) {
	code, out, errOut := runCLI(t, "ctl", "--help")
	require.Equal(t, exitOK, code)
	require.Empty(t, errOut)
	for _, c := range ctlCommands {
		require.Contains(t, out, c.line())
	}
	for _, s := range []string{"Exit codes", "3  not found", "4  conflict", "FENCEPOST_CLUSTER", "-timeout"} {
		require.Contains(t, out, s)
	}
	code, out, _ = runCLI(t, "ctl", "tasks", "create", "--help")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "Usage: fencepost ctl tasks create ID")
	require.Contains(t, out, "-profile")
	code, out, _ = runCLI(t, "help", "ctl")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "Exit codes")
}

func TestParseInterspersed(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	a := fs.String("a", "", "")
	b := fs.Bool("b", false, "")
	pos, err := parseInterspersed(fs, []string{"x", "-a", "1", "y", "-b", "--", "-z", "w"})
	require.NoError(t, err)
	require.Equal(t, []string{"x", "y", "-z", "w"}, pos)
	require.Equal(t, "1", *a)
	require.True(t, *b)
}
