package lease

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// A random command generator shared by the snapshot test (math/rand with a
// printed seed) and the property test (rapid draws, shrinkable).

type chooser interface {
	intn(n int) int
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.IntN(n) }

var (
	genSessions = []string{"s1", "s2", "s3"}
	genTasks    = []string{"t1", "t2", "t3", "t4"}
	genKeys     = []string{"k1", "k2", "k3"}
	genSteps    = []time.Duration{0, 0, time.Second, 3 * time.Second, 20 * time.Second, DedupWindow + time.Minute}
	genOps      = weighted(map[Op]int{
		OpOpenSession: 2, OpCloseSession: 1, OpCreateTask: 3, OpAcquire: 3, OpClaim: 3,
		OpCheckpoint: 3, OpWait: 2, OpSignal: 2, OpRelease: 2, OpRevoke: 1, OpCancel: 1,
		OpSuspect: 3, OpRevive: 2, OpExpire: 3, OpReclaim: 3, OpIntent: 3, OpOutcome: 2,
		OpDeleteTask: 1,
	})
)

// weighted lists each op as many times as its weight, in op order.
func weighted(w map[Op]int) []Op {
	var out []Op
	for op := OpOpenSession; op <= OpDeleteTask; op++ {
		for range w[op] {
			out = append(out, op)
		}
	}
	return out
}

// step is one generated input: a clock advance, then a command (or a retry
// of an earlier request id, or a snapshot round-trip, in the property test).
type step struct {
	Advance  time.Duration
	Cmd      Command
	Retry    int  // > 0: re-send the Retry-th earlier command with a request id
	Snapshot bool // replace the model by a snapshot round-trip of itself
}

func (s step) String() string {
	switch {
	case s.Snapshot:
		return fmt.Sprintf("+%s snapshot/restore", s.Advance)
	case s.Retry > 0:
		return fmt.Sprintf("+%s retry #%d", s.Advance, s.Retry)
	}
	return fmt.Sprintf("+%s %s", s.Advance, fmtCmd(&s.Cmd))
}

// GoString makes rapid's "[rapid] draw step: ..." log readable.
func (s step) GoString() string { return s.String() }

func pick[T any](ch chooser, xs []T) T { return xs[ch.intn(len(xs))] }

// genEpoch returns the epoch of tid's current lease most of the time, and
// otherwise a stale one (an earlier lease), 0, or one never granted.
func genEpoch(ch chooser, m *Model, tid string) uint64 {
	t, ok := m.tasks[tid]
	if !ok {
		return uint64(ch.intn(3))
	}
	switch ch.intn(8) {
	case 0:
		if len(t.History()) > 0 {
			return pick(ch, t.History()).Epoch
		}
	case 1:
		return 0
	case 2:
		return t.MaxEpoch + 1
	}
	if t.Lease != nil {
		return t.Lease.Epoch
	}
	return t.MaxEpoch
}

// genTask returns, most of the time, a task for which ok holds (so that the
// command has a chance to apply), and otherwise any task id.
func genTask(ch chooser, m *Model, ok func(*Task) bool) string {
	var fit []string
	for _, id := range genTasks {
		if t, found := m.tasks[id]; found && ok(t) {
			fit = append(fit, id)
		}
	}
	if len(fit) > 0 && ch.intn(4) != 0 {
		return pick(ch, fit)
	}
	return genAnyTask(ch, m)
}

// genAnyTask returns an existing task id most of the time.
func genAnyTask(ch chooser, m *Model) string {
	var ids []string
	for _, id := range genTasks {
		if _, ok := m.tasks[id]; ok {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 && ch.intn(4) != 0 {
		return pick(ch, ids)
	}
	return pick(ch, genTasks)
}

// genAnySession returns an open session id most of the time.
func genAnySession(ch chooser, m *Model) string {
	var ids []string
	for _, id := range genSessions {
		if _, ok := m.sessions[id]; ok {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 && ch.intn(5) != 0 {
		return pick(ch, ids)
	}
	return pick(ch, genSessions)
}

func withLease(st ...Status) func(*Task) bool {
	return func(t *Task) bool {
		for _, s := range st {
			if t.Lease != nil && t.Lease.Status == s {
				return true
			}
		}
		return false
	}
}

// genSession returns the holder of tid's lease most of the time.
func genSession(ch chooser, m *Model, tid string) string {
	if t, ok := m.tasks[tid]; ok && t.Lease != nil && ch.intn(4) != 0 {
		return t.Lease.SessionID
	}
	return genAnySession(ch, m)
}

// genCommand returns a random command, biased by m's state so that most
// holder and leader commands name a real lease (and so succeed) while the
// rest are stale, foreign or malformed. Deadlines are relative to now; the
// command's own time and request id are left unset.
func genCommand(ch chooser, m *Model, now time.Time) Command {
	op := pick(ch, genOps)
	var tid string
	switch op {
	case OpCheckpoint, OpWait, OpIntent, OpSuspect:
		tid = genTask(ch, m, withLease(StatusActive))
	case OpRelease, OpRevive:
		tid = genTask(ch, m, withLease(StatusActive, StatusSuspectDead))
	case OpExpire:
		tid = genTask(ch, m, withLease(StatusSuspectDead))
	case OpReclaim:
		tid = genTask(ch, m, withLease(StatusExpired))
	case OpRevoke:
		tid = genTask(ch, m, withLease(StatusActive, StatusSuspectDead, StatusExpired))
	case OpSignal:
		tid = genTask(ch, m, func(t *Task) bool { return t.State == TaskWaiting })
	case OpOutcome:
		tid = genTask(ch, m, func(t *Task) bool { return len(t.Journal()) > 0 })
	case OpDeleteTask:
		tid = genTask(ch, m, func(t *Task) bool { return t.State.Final() })
	case OpCreateTask:
		tid = pick(ch, genTasks)
	default:
		tid = genAnyTask(ch, m)
	}
	c := Command{Op: op}
	switch op {
	case OpOpenSession:
		c.SessionID = pick(ch, genSessions)
		c.WorkerID = "w-" + c.SessionID
		if ch.intn(10) == 0 {
			c.WorkerID = "intruder"
		}
	case OpCloseSession, OpClaim:
		c.SessionID = genAnySession(ch, m)
	case OpCreateTask:
		c.TaskID, c.TTL, c.Priority = tid, ttl, ch.intn(3)
		if ch.intn(10) == 0 {
			c.TTL = 0
		}
	case OpAcquire:
		c.TaskID, c.SessionID = tid, genAnySession(ch, m)
		if ch.intn(2) == 0 {
			c.Create, c.TTL, c.Priority = true, ttl, ch.intn(3)
		}
	case OpCheckpoint:
		c.TaskID, c.SessionID, c.Epoch = tid, genSession(ch, m, tid), genEpoch(ch, m, tid)
		c.Step = fmt.Sprintf("step-%d", ch.intn(100))
		c.Data = []byte(c.Step)
		if ch.intn(2) == 0 {
			var cur uint64
			if t, ok := m.tasks[tid]; ok && t.Checkpoint != nil {
				cur = t.Checkpoint.Seq
			}
			c.Seq = cur + uint64(ch.intn(3))
			if c.Seq > 0 && ch.intn(2) == 0 {
				c.Seq--
			}
		}
	case OpWait:
		c.TaskID, c.SessionID, c.Epoch = tid, genSession(ch, m, tid), genEpoch(ch, m, tid)
		if ch.intn(2) == 0 {
			c.Deadline = StampOf(now.Add(time.Duration(ch.intn(60)) * time.Second))
		}
	case OpSignal:
		c.TaskID, c.Payload = tid, []byte("sig")
		if ch.intn(2) == 0 {
			c.Epoch = genEpoch(ch, m, tid)
		}
	case OpRelease:
		c.TaskID, c.SessionID, c.Epoch = tid, genSession(ch, m, tid), genEpoch(ch, m, tid)
		c.Outcome = pick(ch, []Outcome{OutcomeCompleted, OutcomeFailed, OutcomeGivenBack, OutcomeGivenBack, OutcomeGivenBack, OutcomeGivenBack})
	case OpRevoke:
		c.TaskID = tid
		if ch.intn(2) == 0 {
			c.Epoch = genEpoch(ch, m, tid)
		}
	case OpCancel, OpDeleteTask:
		c.TaskID = tid
	case OpSuspect, OpExpire, OpReclaim:
		c.TaskID, c.Epoch = tid, genEpoch(ch, m, tid)
	case OpRevive:
		c.TaskID, c.Epoch = tid, genEpoch(ch, m, tid)
		if ch.intn(2) == 0 {
			c.SessionID = genSession(ch, m, tid)
		}
	case OpIntent:
		c.TaskID, c.SessionID, c.Epoch = tid, genSession(ch, m, tid), genEpoch(ch, m, tid)
		c.Effect = &Effect{Key: pick(ch, genKeys), Method: "POST", URL: "http://d/x",
			Deadline: StampOf(now.Add(time.Duration(ch.intn(60)) * time.Second))}
	case OpOutcome:
		c.TaskID, c.Epoch = tid, genEpoch(ch, m, tid)
		key := pick(ch, genKeys)
		if t, ok := m.tasks[tid]; ok && len(t.Journal()) > 0 && ch.intn(3) != 0 {
			e := pick(ch, t.Journal())
			key, c.Epoch = e.Key, e.Epoch
		}
		c.Effect = &Effect{Key: key, Status: 200 + ch.intn(3),
			Header: map[string][]string{"X": {"y"}}, Body: []byte("out")}
	}
	return c
}
