package lease

import (
	"errors"
	"time"
)

// DedupWindow is how long, in leader-stamped time, a request id is
// remembered. A client retrying after ErrLeadershipLost does so within
// seconds; ten minutes leaves a wide margin.
const DedupWindow = 10 * time.Minute

// DedupMax bounds the remembered request ids regardless of age.
const DedupMax = 200_000

// dedupLog remembers applied request ids, oldest first. Every mutation
// carries one, so with a lease per request it holds one record per lease
// granted in the last DedupWindow: the records are kept in one slice in
// arrival order (pruning drops a prefix) and the map only points into it,
// which costs about a third of a map holding whole entries next to a
// separate order list.
type dedupLog struct {
	// byID maps a request id to the sequence number of its record.
	byID map[string]uint64
	// recs[i] is the record with sequence number base+i.
	recs []dedupRec
	base uint64
}

// dedupRec is what replaying a request needs: the error, the task, the
// epoch the request produced and the journal key it touched.
type dedupRec struct {
	id     string
	taskID string
	key    string
	index  uint64
	epoch  uint64
	at     time.Time
	code   errCodeID
	// fp is the command's fingerprint (0 when restored from a snapshot
	// that predates fingerprints: then any command may replay it).
	fp uint64
}

// dedupEntry and dedupRef are a record as the snapshot carries it (the
// "dedup" map and the "dedupOrder" list); the layout predates dedupLog
// and is kept so snapshots stay readable both ways.
type dedupEntry struct {
	Index  uint64    `json:"i"`
	Code   string    `json:"c,omitempty"`
	TaskID string    `json:"t,omitempty"`
	Epoch  uint64    `json:"e,omitempty"`
	Key    string    `json:"k,omitempty"`
	At     time.Time `json:"at"`
	FP     uint64    `json:"f,omitempty"`
}

type dedupRef struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

func newDedupLog() dedupLog { return dedupLog{byID: map[string]uint64{}} }

// get returns the record of request id, if remembered.
func (d *dedupLog) get(id string) (*dedupRec, bool) {
	seq, ok := d.byID[id]
	if !ok {
		return nil, false
	}
	return &d.recs[seq-d.base], true
}

// add remembers r; its id must not be remembered already.
func (d *dedupLog) add(r dedupRec) {
	d.byID[r.id] = d.base + uint64(len(d.recs))
	d.recs = append(d.recs, r)
}

// prune forgets the records older than DedupWindow at now, and the oldest
// beyond DedupMax. shared says a snapshot view may still read the
// records, so the dropped ones are left as they are for it.
func (d *dedupLog) prune(now time.Time, shared bool) {
	n := 0
	for n < len(d.recs) {
		r := &d.recs[n]
		if len(d.recs)-n <= DedupMax && now.Sub(r.at) < DedupWindow {
			break
		}
		delete(d.byID, r.id)
		n++
	}
	if n > 0 {
		// Drop the prefix in place: copying the rest on every prune made
		// each Apply O(remembered ids) once ids expire one per command.
		// append moves the live part to a new array when it grows.
		if !shared {
			clear(d.recs[:n])
		}
		d.recs = d.recs[n:]
		d.base += uint64(n)
	}
}

// len returns the number of remembered ids.
func (d *dedupLog) len() int { return len(d.recs) }

func (r *dedupRec) entry() dedupEntry {
	return dedupEntry{Index: r.index, Code: r.code.String(), TaskID: r.taskID, Epoch: r.epoch, Key: r.key, At: r.at, FP: r.fp}
}

// errCodeID is the index of an error's stable short name in errCodeNames;
// 0 is no error.
type errCodeID uint8

// errCodeNames are the stable short names of the model's errors, the tail
// of the HTTP problem type. Append only: the index is kept in memory, the
// name is what snapshots carry.
var errCodeNames = []string{
	"", "invalid", "task_not_found", "task_exists", "session_not_found", "lease_held", "task_waiting",
	"task_final", "not_claimable", "no_task", "stale_epoch", "not_holder", "lease_not_active",
	"checkpoint_seq", "not_waiting", "intents_in_flight", "in_doubt", "journal_full",
	"request_id_reused", "not_owner", "quota_exceeded",
}

// errCodeErrs are the errors named by errCodeNames, at the same index.
var errCodeErrs = []error{
	nil, ErrInvalid, ErrTaskNotFound, ErrTaskExists, ErrSessionNotFound, ErrLeaseHeld, ErrTaskWaiting,
	ErrTaskFinal, ErrNotClaimable, ErrNoTask, ErrStaleEpoch, ErrNotHolder, ErrLeaseNotActive,
	ErrCheckpointSeq, ErrNotWaiting, ErrIntentsInFlight, ErrInDoubt, ErrJournalFull,
	ErrRequestReused, ErrNotOwner, ErrQuota,
}

const codeInvalid errCodeID = 1

func (c errCodeID) String() string {
	if int(c) < len(errCodeNames) {
		return errCodeNames[c]
	}
	return errCodeNames[codeInvalid]
}

func (c errCodeID) err() error {
	if int(c) < len(errCodeErrs) {
		return errCodeErrs[c]
	}
	return ErrInvalid
}

// codeOf returns the code of err: the first listed error it wraps, or
// invalid.
func codeOf(err error) errCodeID {
	if err == nil {
		return 0
	}
	for i, e := range errCodeErrs[1:] {
		if errors.Is(err, e) {
			return errCodeID(i + 1)
		}
	}
	return codeInvalid
}

// codeNamed returns the code of a short name; an unknown one is invalid.
func codeNamed(name string) errCodeID {
	for i, n := range errCodeNames {
		if n == name {
			return errCodeID(i)
		}
	}
	return codeInvalid
}

// ErrorCode returns the stable short name of a model error ("" for nil).
// The HTTP layer uses it as the tail of a problem type.
func ErrorCode(err error) string { return codeOf(err).String() }
