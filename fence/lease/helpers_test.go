package lease

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// t0 is the fake time base of every test: the model never reads the clock,
// so tests stamp commands with t0 plus an offset they control.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const ttl = 10 * time.Second

// harness drives one Model with increasing raft indexes and a fake clock,
// and keeps the applied history so a failing test prints it.
type harness struct {
	t   *testing.T
	m   *Model
	idx uint64
	now time.Time
	log []string
	// last is the last applied command, as stamped.
	last string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, m: New(), now: t0}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("history (%d commands):\n%s", len(h.log), strings.Join(h.log, "\n"))
		}
	})
	return h
}

// advance moves the fake clock.
func (h *harness) advance(d time.Duration) { h.now = h.now.Add(d) }

// apply stamps c with the next index and the fake time (unless set) and
// applies it.
func (h *harness) apply(c Command) Result {
	h.t.Helper()
	h.idx++
	if c.Time.IsZero() {
		c.Time = h.now
	}
	res := h.m.Apply(h.idx, &c)
	h.last = fmt.Sprintf("#%d %s -> %s", h.idx, fmtCmd(&c), fmtRes(res))
	h.log = append(h.log, h.last)
	return res
}

// ok applies c and requires it to succeed.
func (h *harness) ok(c Command) Result {
	h.t.Helper()
	res := h.apply(c)
	require.NoError(h.t, res.Err, "command %s", h.last)
	return res
}

// fail applies c and requires it to fail with want.
func (h *harness) fail(c Command, want error) Result {
	h.t.Helper()
	res := h.apply(c)
	require.ErrorIs(h.t, res.Err, want, "command %s", h.last)
	return res
}

// noop applies c, requires it to fail with want, and requires the state
// (everything but the last applied index) to be unchanged.
func (h *harness) noop(c Command, want error) Result {
	h.t.Helper()
	before := stateHash(h.t, h.m)
	res := h.fail(c, want)
	require.Equal(h.t, before, stateHash(h.t, h.m), "command %s changed the state", h.last)
	return res
}

func (h *harness) task(id string) *Task {
	h.t.Helper()
	tk, ok := h.m.Task(id)
	require.True(h.t, ok, "task %q not found", id)
	return tk
}

// tHelper is what both *testing.T and *rapid.T provide.
type tHelper interface {
	require.TestingT
	Helper()
}

// Command builders.

func openS(sid string) Command {
	return Command{Op: OpOpenSession, SessionID: sid, WorkerID: "w-" + sid}
}
func closeS(sid string) Command {
	return Command{Op: OpCloseSession, SessionID: sid}
}
func createT(tid string, prio int) Command {
	return Command{Op: OpCreateTask, TaskID: tid, TTL: ttl, Heartbeat: ttl / 3, Priority: prio, Profile: "default"}
}
func acquireT(sid, tid string) Command { return Command{Op: OpAcquire, SessionID: sid, TaskID: tid} }
func claimS(sid string) Command        { return Command{Op: OpClaim, SessionID: sid} }
func checkpointT(sid, tid string, epoch, seq uint64, step string) Command {
	return Command{Op: OpCheckpoint, SessionID: sid, TaskID: tid, Epoch: epoch, Seq: seq, Step: step, Data: []byte("data-" + step)}
}
func waitT(sid, tid string, epoch uint64, deadline time.Time) Command {
	return Command{Op: OpWait, SessionID: sid, TaskID: tid, Epoch: epoch, Deadline: StampOf(deadline), Reason: "approval"}
}
func signalT(tid string, epoch uint64) Command {
	return Command{Op: OpSignal, TaskID: tid, Epoch: epoch, Payload: []byte("approved")}
}
func releaseT(sid, tid string, epoch uint64, o Outcome) Command {
	return Command{Op: OpRelease, SessionID: sid, TaskID: tid, Epoch: epoch, Outcome: o, Result: []byte("r"), Reason: "why"}
}
func revokeT(tid string, epoch uint64) Command {
	return Command{Op: OpRevoke, TaskID: tid, Epoch: epoch, Reason: "operator"}
}
func cancelT(tid string) Command { return Command{Op: OpCancel, TaskID: tid, Reason: "cancelled"} }
func leaderOp(op Op, tid string, epoch uint64) Command {
	return Command{Op: op, TaskID: tid, Epoch: epoch}
}
func intentT(sid, tid string, epoch uint64, key string, deadline time.Time) Command {
	return Command{Op: OpIntent, SessionID: sid, TaskID: tid, Epoch: epoch, Effect: &Effect{
		Key: key, Method: "POST", URL: "http://downstream/" + key, BodyDigest: "d-" + key, Deadline: StampOf(deadline),
	}}
}
func outcomeT(tid string, epoch uint64, key string, status int) Command {
	return Command{Op: OpOutcome, TaskID: tid, Epoch: epoch, Effect: &Effect{
		Key: key, Status: status, Header: map[string][]string{"X-K": {key}}, Body: []byte("body-" + key),
	}}
}
func deleteT(tid string) Command { return Command{Op: OpDeleteTask, TaskID: tid} }

// stateHash is Hash without the last applied index, so a no-op command can
// be shown to leave the state unchanged.
func stateHash(t tHelper, m *Model) [32]byte {
	t.Helper()
	return hashWithout(t, m, false)
}

// coreHash is stateHash without the remembered request ids either: the
// tasks and sessions only.
func coreHash(t tHelper, m *Model) [32]byte {
	t.Helper()
	return hashWithout(t, m, true)
}

func hashWithout(t tHelper, m *Model, dedup bool) [32]byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, m.WriteSnapshot(&buf))
	var s snapshot
	require.NoError(t, json.Unmarshal(buf.Bytes(), &s))
	s.LastIndex = 0
	if dedup {
		s.Dedup, s.DedupOrder = nil, nil
	}
	b, err := json.Marshal(&s)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

// roundTrip writes m's snapshot and reads it into a fresh model.
func roundTrip(t tHelper, m *Model) *Model {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, m.WriteSnapshot(&buf))
	n := New()
	require.NoError(t, n.ReadSnapshot(&buf))
	return n
}

func fmtCmd(c *Command) string {
	var b strings.Builder
	b.WriteString(c.Op.String() + "(")
	if !c.Time.IsZero() {
		fmt.Fprintf(&b, "t=+%s ", c.Time.Sub(t0))
	}
	if c.RequestID != "" {
		fmt.Fprintf(&b, "rid=%s ", c.RequestID)
	}
	if c.SessionID != "" {
		fmt.Fprintf(&b, "s=%s ", c.SessionID)
	}
	if c.TaskID != "" {
		fmt.Fprintf(&b, "task=%s ", c.TaskID)
	}
	if c.Epoch != 0 {
		fmt.Fprintf(&b, "epoch=%d ", c.Epoch)
	}
	if c.Create {
		b.WriteString("create ")
	}
	if c.Priority != 0 {
		fmt.Fprintf(&b, "prio=%d ", c.Priority)
	}
	if c.Seq != 0 {
		fmt.Fprintf(&b, "seq=%d ", c.Seq)
	}
	if c.Outcome != "" {
		fmt.Fprintf(&b, "outcome=%s ", c.Outcome)
	}
	if !c.Deadline.IsZero() {
		fmt.Fprintf(&b, " deadline=+%s", c.Deadline.Sub(StampOf(t0)))
	}
	if c.Effect != nil {
		fmt.Fprintf(&b, "key=%s ", c.Effect.Key)
		if !c.Effect.Deadline.IsZero() {
			fmt.Fprintf(&b, " edeadline=+%s", c.Effect.Deadline.Sub(StampOf(t0)))
		}
	}
	return strings.TrimSpace(b.String()) + ")"
}

func fmtRes(r Result) string {
	var b strings.Builder
	if r.Err != nil {
		fmt.Fprintf(&b, "err=%v", r.Err)
	} else {
		b.WriteString("ok")
	}
	if r.Duplicate {
		b.WriteString(" dup")
	}
	if r.Task != nil {
		fmt.Fprintf(&b, " task=%s/%s", r.Task.ID, r.Task.State)
	}
	if r.Lease != nil {
		fmt.Fprintf(&b, " lease=%s/%d/%s", r.Lease.SessionID, r.Lease.Epoch, r.Lease.Status)
	}
	if r.Effect != nil {
		fmt.Fprintf(&b, " effect=%s/%d/%s", r.Effect.Key, r.Effect.Epoch, r.Effect.State)
	}
	return b.String()
}
