package raftstore

// The recent history keeps up to HistoryEventsPerTask events for every
// task the node knows, so it lives as long as the leases do (issue 27,
// "memory per lease"). Kept as api.HistoryEvent, an event cost about 320
// bytes of live heap, most of it string headers of fields its kind leaves
// empty or sets to one of a few constants. storedEvent is the form the
// history keeps instead: numbers and the ids of every event inline, the
// constant strings as small codes, and the rarely set fields packed into
// one string. An event converts back to api.HistoryEvent only when read,
// field for field equal to the one recorded (pack says what of a time is
// kept).

import (
	"encoding/binary"
	"fmt"
	"time"
	"unique"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// storedEvent is an api.HistoryEvent as the history keeps it: 64 bytes
// where the api form takes 312.
//
// The task id is not kept: a task's log knows it, and the feed keeps it
// beside the event (feedEvent). Session, worker and identity repeat
// together across a session's events, so the three are interned as one
// (unique.Handle is one word, and its value is shared by every event
// naming the same three). Fields that come
// from a fixed set are codes into the tables below; one outside its table
// has codeOther and its value in extra. Time is unix nanoseconds when that
// gives back the same time.Time (zone says how), in extra otherwise.
type storedEvent struct {
	seq, index uint64
	nanos      int64
	epoch      uint64
	who        unique.Handle[actors]
	// extra holds the fields that are set on few events (tagged, see
	// tagCheckpointSeq): a checkpoint's seq and step, a journal record's
	// key and call, a blocked report's count and trace, values outside the
	// code tables, and a time nanos cannot hold. Empty when there are none.
	extra                                        string
	kind, status, state, effect, errCode, reason uint8
	zone                                         uint8
}

// feedEvent is one entry of the feed ring: the feed serves every task's
// events, so the task id is kept with each.
type feedEvent struct {
	storedEvent
	taskID string
}

// codeOther marks a field whose value no table holds: it is in extra.
// Code 0 is the empty string, codes 1 to len(names) the table's names.
const codeOther = 255

// codeTable maps the strings a field takes from a fixed set to codes.
type codeTable struct {
	names []string
	codes map[string]uint8
}

func newCodeTable(names ...string) *codeTable {
	t := &codeTable{codes: map[string]uint8{}}
	for _, n := range names {
		if _, dup := t.codes[n]; dup || n == "" {
			continue
		}
		if len(t.names) == codeOther-1 {
			panic("raftstore: history code table too large")
		}
		t.names = append(t.names, n)
		t.codes[n] = uint8(len(t.names))
	}
	return t
}

// code returns s's code, codeOther when the table does not hold it.
func (t *codeTable) code(s string) uint8 {
	if s == "" {
		return 0
	}
	if c, ok := t.codes[s]; ok {
		return c
	}
	return codeOther
}

// name is the string of a code; for codeOther it is "", as extra has the
// value.
func (t *codeTable) name(c uint8) string {
	if c == 0 || c == codeOther {
		return ""
	}
	return t.names[c-1]
}

// The code tables. A value missing from one costs bytes, never
// correctness, so they list what the cluster and its sidecars produce
// today and need not follow every new string.
var (
	eventKinds = newCodeTable(append(opNames(), api.EventInDoubt, api.EventSessionRelease, api.EventBlocked)...)
	statuses   = newCodeTable(string(lease.StatusActive), string(lease.StatusPausedWaiting), string(lease.StatusSuspectDead),
		string(lease.StatusExpired), string(lease.StatusReclaimed), string(lease.StatusRevoked), string(lease.StatusReleased))
	taskStates = newCodeTable(string(lease.TaskPending), string(lease.TaskLeased), string(lease.TaskWaiting),
		string(lease.TaskCompleted), string(lease.TaskFailed), string(lease.TaskCancelled))
	effectStates = newCodeTable(string(lease.EffectIntent), string(lease.EffectDone), string(lease.EffectInDoubt))
	errorCodes   = newCodeTable(errorCodeNames()...)
	// reasons: release outcomes, the lease-end reasons, the leader's own
	// proposals' reasons (lessor.go), the model's, and a sidecar's block
	// reasons (api.BlockedReport).
	reasons = newCodeTable(append(lease.EndReasons(),
		string(lease.OutcomeCompleted), string(lease.OutcomeFailed), string(lease.OutcomeGivenBack),
		"heartbeat overdue", "grace over", "wait deadline passed", "session idle", "late heartbeat",
		"session closed", "session closed while suspect", "cluster restored from a backup",
		"suspect", "lost", "released", "no_lease")...)
)

// opNames are the names lease.Op.String gives, "unknown" included.
func opNames() []string {
	var out []string
	for o := range 256 {
		out = append(out, lease.Op(o).String())
	}
	return out
}

func errorCodeNames() []string {
	var out []string
	for _, e := range lease.Errors() {
		out = append(out, e.Code)
	}
	return out
}

// Tags of the fields in storedEvent.extra: a tag byte, then a uvarint
// (a varint for tagHTTPStatus), or a uvarint length and the bytes of a
// string, or for tagTime a varint of unix seconds, a uvarint of
// nanoseconds, and a zone form (zoneForm*).
const (
	tagCheckpointSeq byte = iota + 1
	tagCount
	tagHTTPStatus
	tagStep
	tagKey
	tagMethod
	tagURL
	tagTraceID
	tagKind
	tagStatus
	tagState
	tagEffect
	tagError
	tagReason
	tagTime
)

// How storedEvent.nanos holds the time.
const (
	zoneZero  = iota // time.Time{}
	zoneUTC          // time.Unix(0, nanos).UTC()
	zoneLocal        // time.Unix(0, nanos)
	zoneExtra        // in extra (tagTime)
)

// Zone forms of a tagTime.
const (
	zoneFormUTC   = iota
	zoneFormLocal // time.Local
	zoneFormFixed // a varint offset and the zone's name
)

// pack returns e's stored form, using buf for the packing; the task id is
// left to the caller.
//
// Times come from decoded raft entries, which carry no monotonic reading
// and whose zone is UTC, Local or a fixed offset: those round-trip
// exactly. A monotonic reading is dropped, and a zone loaded by name
// comes back as a fixed zone of the same name and offset at that instant.
func pack(e *api.HistoryEvent, buf *[]byte) storedEvent {
	s := storedEvent{seq: e.Seq, index: e.Index, epoch: e.Epoch,
		who: intern(actors{e.SessionID, e.WorkerID, e.By})}
	b := (*buf)[:0]
	b = putUint(b, tagCheckpointSeq, e.CheckpointSeq)
	b = putUint(b, tagCount, e.Count)
	if e.HTTPStatus != 0 {
		b = binary.AppendVarint(append(b, tagHTTPStatus), int64(e.HTTPStatus))
	}
	b = putString(b, tagStep, e.Step)
	b = putString(b, tagKey, e.Key)
	b = putString(b, tagMethod, e.Method)
	b = putString(b, tagURL, e.URL)
	b = putString(b, tagTraceID, e.TraceID)
	s.kind, b = putCode(b, tagKind, eventKinds, e.Kind)
	s.status, b = putCode(b, tagStatus, statuses, string(e.Status))
	s.state, b = putCode(b, tagState, taskStates, string(e.State))
	s.effect, b = putCode(b, tagEffect, effectStates, string(e.EffectState))
	s.errCode, b = putCode(b, tagError, errorCodes, e.Error)
	s.reason, b = putCode(b, tagReason, reasons, e.Reason)
	s.zone, s.nanos, b = putTime(b, e.Time)
	if len(b) > 0 {
		s.extra = string(b)
	}
	*buf = b
	return s
}

// unpack returns the api form of s, an event of task taskID. Its strings
// share the stored ones: reading allocates nothing but the event.
func unpack(s *storedEvent, taskID string) api.HistoryEvent {
	who := value(s.who)
	e := api.HistoryEvent{Seq: s.seq, Index: s.index, TaskID: taskID, Epoch: s.epoch,
		SessionID: who.session, WorkerID: who.worker, By: who.by,
		Kind: eventKinds.name(s.kind), Status: lease.Status(statuses.name(s.status)),
		State: lease.TaskState(taskStates.name(s.state)), EffectState: lease.EffectState(effectStates.name(s.effect)),
		Error: errorCodes.name(s.errCode), Reason: reasons.name(s.reason)}
	switch s.zone {
	case zoneUTC:
		e.Time = time.Unix(0, s.nanos).UTC()
	case zoneLocal:
		e.Time = time.Unix(0, s.nanos)
	}
	for r := (reader{s: s.extra}); r.more(); {
		switch tag := r.byte(); tag {
		case tagCheckpointSeq:
			e.CheckpointSeq = r.uvarint()
		case tagCount:
			e.Count = r.uvarint()
		case tagHTTPStatus:
			e.HTTPStatus = int(r.varint())
		case tagStep:
			e.Step = r.string()
		case tagKey:
			e.Key = r.string()
		case tagMethod:
			e.Method = r.string()
		case tagURL:
			e.URL = r.string()
		case tagTraceID:
			e.TraceID = r.string()
		case tagKind:
			e.Kind = r.string()
		case tagStatus:
			e.Status = lease.Status(r.string())
		case tagState:
			e.State = lease.TaskState(r.string())
		case tagEffect:
			e.EffectState = lease.EffectState(r.string())
		case tagError:
			e.Error = r.string()
		case tagReason:
			e.Reason = r.string()
		case tagTime:
			e.Time = r.time()
		default:
			panic(fmt.Sprintf("raftstore: stored history event has unknown tag %d", tag))
		}
	}
	return e
}

// actors are the session, worker and identity an event names.
type actors struct{ session, worker, by string }

// intern returns v's handle; the zero handle stands for v's zero value,
// which is then never put in the unique map.
func intern[T comparable](v T) unique.Handle[T] {
	var zero T
	if v == zero {
		return unique.Handle[T]{}
	}
	return unique.Make(v)
}

// value is intern's inverse (the zero handle's Value would panic).
func value[T comparable](h unique.Handle[T]) T {
	if h == (unique.Handle[T]{}) {
		var zero T
		return zero
	}
	return h.Value()
}

func putUint(b []byte, tag byte, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(append(b, tag), v)
}

func putString(b []byte, tag byte, v string) []byte {
	if v == "" {
		return b
	}
	return append(binary.AppendUvarint(append(b, tag), uint64(len(v))), v...)
}

// putCode returns v's code in t, putting v in b when t does not hold it.
func putCode(b []byte, tag byte, t *codeTable, v string) (uint8, []byte) {
	c := t.code(v)
	if c == codeOther {
		b = putString(b, tag, v)
	}
	return c, b
}

// putTime returns how t is held: in nanos when that gives t back, in b
// otherwise (before 1678 or after 2262, or in a zone neither UTC nor Local).
func putTime(b []byte, t time.Time) (zone uint8, nanos int64, _ []byte) {
	t = t.Round(0) // a decoded time has no monotonic reading; see pack
	if t == (time.Time{}) {
		return zoneZero, 0, b
	}
	n := t.UnixNano()
	if time.Unix(0, n).UTC() == t {
		return zoneUTC, n, b
	}
	if time.Unix(0, n) == t {
		return zoneLocal, n, b
	}
	b = binary.AppendVarint(append(b, tagTime), t.Unix())
	b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	switch t.Location() {
	case time.UTC:
		b = append(b, zoneFormUTC)
	case time.Local:
		b = append(b, zoneFormLocal)
	default:
		name, offset := t.Zone()
		b = binary.AppendVarint(append(b, zoneFormFixed), int64(offset))
		b = append(binary.AppendUvarint(b, uint64(len(name))), name...)
	}
	return zoneExtra, 0, b
}

// reader reads storedEvent.extra. Its strings are substrings of it, so
// reading copies nothing; extra is only ever written by pack, so a short
// or unknown field is a bug and panics.
type reader struct {
	s string
	i int
}

func (r *reader) more() bool { return r.i < len(r.s) }

func (r *reader) byte() byte {
	c := r.s[r.i]
	r.i++
	return c
}

func (r *reader) uvarint() uint64 {
	var v uint64
	for shift := 0; ; shift += 7 {
		c := r.byte()
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
}

// varint undoes binary.AppendVarint's zig-zag.
func (r *reader) varint() int64 {
	u := r.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (r *reader) string() string {
	n := int(r.uvarint())
	s := r.s[r.i : r.i+n]
	r.i += n
	return s
}

func (r *reader) time() time.Time {
	t := time.Unix(r.varint(), int64(r.uvarint()))
	switch r.byte() {
	case zoneFormUTC:
		return t.UTC()
	case zoneFormLocal:
		return t
	default:
		offset := int(r.varint())
		return t.In(time.FixedZone(r.string(), offset))
	}
}
