package lease

import "time"

// DedupWindow is how long, in leader-stamped time, a request id is
// remembered. A client retrying after ErrLeadershipLost does so within
// seconds; ten minutes leaves a wide margin.
const DedupWindow = 10 * time.Minute

// DedupMax bounds the remembered request ids regardless of age.
const DedupMax = 200_000

// dedupLog remembers applied request ids, oldest first. Every mutation
// carries one, so with a lease per request it holds one record per lease
// granted in the last DedupWindow: the records are kept in one slice in
// arrival order (pruning drops a prefix) and the index only points into
// it (dedupindex.go), with 4 bytes a slot.
type dedupLog struct {
	// byID finds a request id's record.
	byID idIndex
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
	at     Stamp
	code   errCodeID
	// fp is the command's fingerprint (0 when restored from a snapshot
	// that predates fingerprints: then any command may replay it).
	fp uint64
}

// dedupEntry and dedupRef are a record as the snapshot carries it (the
// "dedup" map and the "dedupOrder" list); the layout predates dedupLog
// and is kept so snapshots stay readable both ways.
type dedupEntry struct {
	Index  uint64 `json:"i"`
	Code   string `json:"c,omitempty"`
	TaskID string `json:"t,omitempty"`
	Epoch  uint64 `json:"e,omitempty"`
	Key    string `json:"k,omitempty"`
	At     Stamp  `json:"at"`
	FP     uint64 `json:"f,omitempty"`
}

type dedupRef struct {
	ID string `json:"id"`
	At Stamp  `json:"at"`
}

func newDedupLog() dedupLog { return dedupLog{byID: newIDIndex()} }

// get returns the record of request id, if remembered.
func (d *dedupLog) get(id string) (*dedupRec, bool) {
	i := d.byID.find(d, id)
	if i < 0 {
		return nil, false
	}
	return &d.recs[seqOf(d.byID.slots[i], d.base)-d.base], true
}

// add remembers r; its id must not be remembered already.
func (d *dedupLog) add(r dedupRec) {
	d.recs = append(d.recs, r)
	d.byID.insert(d, r.id, d.base+uint64(len(d.recs)-1))
}

// prune forgets the records older than DedupWindow at now, and the oldest
// beyond DedupMax. shared says a snapshot view may still read the
// records, so the dropped ones are left as they are for it.
func (d *dedupLog) prune(now Stamp, shared bool) {
	n := 0
	for n < len(d.recs) {
		r := &d.recs[n]
		if len(d.recs)-n <= DedupMax && now.Sub(r.at) < DedupWindow {
			break
		}
		d.byID.remove(d, r.id, d.base+uint64(n))
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
		d.byID.shrink(d)
	}
}

// len returns the number of remembered ids.
func (d *dedupLog) len() int { return len(d.recs) }

func (r *dedupRec) entry() dedupEntry {
	return dedupEntry{Index: r.index, Code: r.code.String(), TaskID: r.taskID, Epoch: r.epoch, Key: r.key, At: r.at, FP: r.fp}
}
