package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// The verbs in this file hold leases from a shell script, the way a sidecar
// does for a worker. They keep no state between invocations: the session id
// and epoch printed by acquire are passed back explicitly.

// ctlCloseTimeout bounds the clean-up close of a session ctl opened for an
// acquire that then failed.
const ctlCloseTimeout = 2 * time.Second

// ctlGrant is acquire's and claim's output: the API's grant, with the two
// values a script needs next lifted to the top level.
type ctlGrant struct {
	SessionID string `json:"sessionId"`
	Epoch     uint64 `json:"epoch"`
	api.Grant
}

// sessionFlags are the flags of the verbs that may open a session.
type sessionFlags struct {
	worker, session *string
}

func bindSessionFlags(fs *flag.FlagSet) sessionFlags {
	return sessionFlags{
		worker:  fs.String("worker", "", "worker id of a new session (required unless --session is given)"),
		session: fs.String("session", "", "use this open session instead of opening one"),
	}
}

// open returns the session to grant through: the one named by --session,
// or a new one for --worker. opened tells the caller to close it if the
// grant fails, so a failed acquire leaves nothing behind.
func (f sessionFlags) open(x *ctlCall) (sid string, opened bool, err error) {
	if *f.session != "" {
		return *f.session, false, nil
	}
	if *f.worker == "" {
		return "", false, usagef("--worker or --session is required")
	}
	s, err := x.client.OpenSession(x.ridCtx("open"), api.OpenSessionRequest{WorkerID: *f.worker})
	if err != nil {
		return "", false, err
	}
	return s.SessionID, true, nil
}

// closeOpened closes a session ctl opened for a grant that failed. It runs
// on its own short deadline, since the call's may be what ran out.
func closeOpened(x *ctlCall, sid string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), ctlCloseTimeout)
	defer cancel()
	_ = x.client.CloseSession(ctx, sid)
}

// grantOut renders a grant and, for people, how to keep and end it.
func grantOut(x *ctlCall, g api.Grant) *ctlOut {
	v := ctlGrant{SessionID: g.Lease.SessionID, Epoch: g.Lease.Epoch, Grant: g}
	return &ctlOut{v: v, table: func(w io.Writer) {
		tw := newTable(w)
		row(tw, "task", g.Task.ID)
		row(tw, "session", fmt.Sprintf("%s (worker %s)", g.Lease.SessionID, g.Lease.WorkerID))
		row(tw, "epoch", strconv.FormatUint(g.Lease.Epoch, 10))
		row(tw, "token signature", dash(g.TokenSignature))
		row(tw, "valid for", fmt.Sprintf("%s (heartbeat every %s)", msDur(g.ValidForMs), msDur(g.HeartbeatMs)))
		row(tw, "checkpoint", checkpointCell(g.Task.Checkpoint))
		if len(g.InDoubt) > 0 {
			row(tw, "in doubt", fmt.Sprintf("%d journaled write(s) of an earlier owner; -o json shows them", len(g.InDoubt)))
		}
		_ = tw.Flush()
		pre := "fencepost ctl"
		if x.g.cluster != ctlDefaultCluster {
			pre += " --cluster " + x.g.cluster
		}
		fmt.Fprintf(w, "\nThe session stays open; the lease lasts %s unless renewed. Next:\n", msDur(g.ValidForMs))
		fmt.Fprintf(w, "  %s heartbeat --session %s --lease %s:%d   # more often than every %s\n", pre, g.Lease.SessionID, g.Task.ID, g.Lease.Epoch, msDur(g.HeartbeatMs))
		fmt.Fprintf(w, "  %s release %s --session %s --epoch %d --outcome completed\n", pre, g.Task.ID, g.Lease.SessionID, g.Lease.Epoch)
		fmt.Fprintf(w, "  %s sessions close %s\n", pre, g.Lease.SessionID)
	}}
}

var ctlAcquire = &ctlCmd{
	name:     "acquire",
	args:     []string{"ID"},
	synopsis: "--worker W|--session S [--create] [--profile P] [--priority N]",
	summary:  "open a session and take the task's lease; prints session, epoch and token",
	bind: func(fs *flag.FlagSet) ctlAction {
		sf := bindSessionFlags(fs)
		create := fs.Bool("create", false, "create the task first if it does not exist")
		profile := fs.String("profile", "", "profile of a task created by --create")
		priority := fs.Int("priority", 0, "priority of a task created by --create")
		return func(x *ctlCall) (*ctlOut, error) {
			sid, opened, err := sf.open(x)
			if err != nil {
				return nil, err
			}
			g, err := x.client.Acquire(x.ridCtx("acquire"), x.args[0], api.AcquireRequest{
				SessionID: sid, Create: *create, Profile: *profile, Priority: *priority,
			})
			if err != nil {
				if opened {
					closeOpened(x, sid)
				}
				return nil, err
			}
			return grantOut(x, g), nil
		}
	},
}

var ctlClaim = &ctlCmd{
	name:     "claim",
	synopsis: "--worker W|--session S",
	summary:  "take the most urgent claimable task (exit 3 when there is none)",
	bind: func(fs *flag.FlagSet) ctlAction {
		sf := bindSessionFlags(fs)
		return func(x *ctlCall) (*ctlOut, error) {
			sid, opened, err := sf.open(x)
			if err != nil {
				return nil, err
			}
			g, err := x.client.Claim(x.ridCtx("claim"), api.ClaimRequest{SessionID: sid})
			if err != nil {
				if opened {
					closeOpened(x, sid)
				}
				return nil, err
			}
			return grantOut(x, g), nil
		}
	},
}

// heldFlag collects repeated --lease TASK:EPOCH values.
type heldFlag []api.HeldLease

func (h *heldFlag) String() string { return "" }

func (h *heldFlag) Set(s string) error {
	task, epoch, ok := strings.Cut(s, ":")
	n, err := strconv.ParseUint(epoch, 10, 64)
	if !ok || task == "" || err != nil {
		return fmt.Errorf("want TASK:EPOCH, got %q", s)
	}
	*h = append(*h, api.HeldLease{TaskID: task, Epoch: n})
	return nil
}

var ctlHeartbeat = &ctlCmd{
	name:     "heartbeat",
	synopsis: "--session S [--lease TASK:EPOCH]...",
	summary:  "renew a session and every lease held through it (exit 4 if a --lease given was lost)",
	bind: func(fs *flag.FlagSet) ctlAction {
		sid := fs.String("session", "", "the session to renew (required)")
		var held heldFlag
		fs.Var(&held, "lease", "a lease you believe you hold, as TASK:EPOCH (repeatable); the reply then reports it even once lost, and ctl exits 4")
		return func(x *ctlCall) (*ctlOut, error) {
			if *sid == "" {
				return nil, usagef("--session is required")
			}
			resp, err := x.client.HeartbeatOnce(x.ctx, *sid, api.HeartbeatRequest{Leases: held})
			if err != nil {
				return nil, err
			}
			if resp.Leases == nil {
				resp.Leases = []api.LeaseState{}
			}
			out := &ctlOut{v: resp, table: func(w io.Writer) {
				fmt.Fprintf(w, "session %s renewed for %s\n", *sid, msDur(resp.ValidForMs))
				if len(resp.Leases) == 0 {
					return
				}
				tw := newTable(w)
				row(tw, "TASK", "EPOCH", "STATUS", "VALID FOR", "SIGNAL", "REASON")
				for _, l := range resp.Leases {
					row(tw, l.TaskID, strconv.FormatUint(l.Epoch, 10), string(l.Status), msDur(l.ValidForMs), dash(l.Signal), dash(l.Reason))
				}
				_ = tw.Flush()
			}}
			return out, lostLeases(resp.Leases)
		}
	},
}

// lostLeases reports the leases a heartbeat reply says the caller no
// longer holds, as one conflict error, so a script's loop can stop work on
// exit 4.
func lostLeases(ls []api.LeaseState) error {
	var lost []string
	for _, l := range ls {
		if slices.Contains([]string{api.SignalLost, api.SignalRevoked, api.SignalWaiting}, l.Signal) {
			s := fmt.Sprintf("%s epoch %d %s", l.TaskID, l.Epoch, l.Signal)
			if l.Reason != "" {
				s += " (" + l.Reason + ")"
			}
			lost = append(lost, s)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("%w: lease no longer held: %s", errCtlConflict, strings.Join(lost, "; "))
}

// holderFlags are the flags of the verbs a lease holder calls.
type holderFlags struct {
	session *string
	epoch   *uint64
}

func bindHolderFlags(fs *flag.FlagSet) holderFlags {
	return holderFlags{
		session: fs.String("session", "", "the holder's session (required)"),
		epoch:   fs.Uint64("epoch", 0, "the lease's epoch, as printed by acquire (required)"),
	}
}

func (h holderFlags) check() error {
	if *h.session == "" || *h.epoch == 0 {
		return usagef("--session and --epoch are required")
	}
	return nil
}

var ctlCheckpoint = &ctlCmd{
	name:     "checkpoint",
	args:     []string{"ID"},
	synopsis: "--session S --epoch N [--step STEP] [--data STR] [--seq N]",
	summary:  "record progress under the lease (exit 4 if the epoch is stale)",
	bind: func(fs *flag.FlagSet) ctlAction {
		h := bindHolderFlags(fs)
		step := fs.String("step", "", "name of the step reached")
		data := fs.String("data", "", "state the next owner resumes from")
		seq := fs.Uint64("seq", 0, "checkpoint sequence number (0: the next one)")
		return func(x *ctlCall) (*ctlOut, error) {
			if err := h.check(); err != nil {
				return nil, err
			}
			t, err := x.client.Checkpoint(x.ridCtx(""), x.args[0], api.CheckpointRequest{
				SessionID: *h.session, Epoch: *h.epoch, Seq: *seq, Step: *step, Data: optBytes(*data),
			})
			if err != nil {
				return nil, err
			}
			return &ctlOut{v: t, table: func(w io.Writer) {
				fmt.Fprintf(w, "checkpoint %s of task %s recorded at epoch %d\n", checkpointCell(t.Checkpoint), t.ID, *h.epoch)
			}}, nil
		}
	},
}

var ctlWait = &ctlCmd{
	name:     "wait",
	args:     []string{"ID"},
	synopsis: "--session S --epoch N [--for D] [--reason R]",
	summary:  "close the lease and park the task until 'tasks signal' (or --for passes)",
	bind: func(fs *flag.FlagSet) ctlAction {
		h := bindHolderFlags(fs)
		wait := fs.Duration("for", 0, "make the task claimable again after this long without a signal (0: wait for a signal)")
		reason := fs.String("reason", "", "what the task waits for")
		return func(x *ctlCall) (*ctlOut, error) {
			if err := h.check(); err != nil {
				return nil, err
			}
			if *wait < 0 {
				return nil, usagef("--for must not be negative")
			}
			t, err := x.client.Wait(x.ridCtx(""), x.args[0], api.WaitRequest{
				SessionID: *h.session, Epoch: *h.epoch, TimeoutMs: wait.Milliseconds(), Reason: *reason,
			})
			if err != nil {
				return nil, err
			}
			return taskOut(t), nil
		}
	},
}

var ctlRelease = &ctlCmd{
	name:     "release",
	args:     []string{"ID"},
	synopsis: "--session S --epoch N [--outcome completed|failed|given_back] [--result STR] [--reason R]",
	summary:  "end the lease: task completed, failed, or given back for another worker",
	bind: func(fs *flag.FlagSet) ctlAction {
		h := bindHolderFlags(fs)
		outcome := fs.String("outcome", string(lease.OutcomeCompleted), "completed, failed or given_back")
		result := fs.String("result", "", "the task's result, kept with it")
		reason := fs.String("reason", "", "why, for the task's record")
		return func(x *ctlCall) (*ctlOut, error) {
			if err := h.check(); err != nil {
				return nil, err
			}
			o := lease.Outcome(*outcome)
			if !slices.Contains([]lease.Outcome{lease.OutcomeCompleted, lease.OutcomeFailed, lease.OutcomeGivenBack}, o) {
				return nil, usagef("--outcome %q: want completed, failed or given_back", *outcome)
			}
			t, err := x.client.Release(x.ridCtx(""), x.args[0], api.ReleaseRequest{
				SessionID: *h.session, Epoch: *h.epoch, Outcome: o, Result: optBytes(*result), Reason: *reason,
			})
			if err != nil {
				return nil, err
			}
			return taskOut(t), nil
		}
	},
}

var ctlSessionsOpen = &ctlCmd{
	name:     "sessions open",
	synopsis: "--worker W [--id S]",
	summary:  "open a session for a worker (what acquire does first)",
	bind: func(fs *flag.FlagSet) ctlAction {
		worker := fs.String("worker", "", "worker id (required)")
		id := fs.String("id", "", "session id to use; re-opening it is idempotent")
		return func(x *ctlCall) (*ctlOut, error) {
			if *worker == "" {
				return nil, usagef("--worker is required")
			}
			s, err := x.client.OpenSession(x.ridCtx(""), api.OpenSessionRequest{SessionID: *id, WorkerID: *worker})
			if err != nil {
				return nil, err
			}
			return doneOut(s, fmt.Sprintf("session %s opened for worker %s", s.SessionID, s.WorkerID)), nil
		}
	},
}

var ctlSessionsClose = &ctlCmd{
	name:    "sessions close",
	args:    []string{"SESSION"},
	summary: "close a session; its active leases are given back",
	bind: func(*flag.FlagSet) ctlAction {
		return func(x *ctlCall) (*ctlOut, error) {
			if err := x.client.CloseSession(x.ridCtx(""), x.args[0]); err != nil {
				return nil, err
			}
			v := struct {
				SessionID string `json:"sessionId"`
				Closed    bool   `json:"closed"`
			}{x.args[0], true}
			return doneOut(v, fmt.Sprintf("session %s closed", x.args[0])), nil
		}
	},
}
