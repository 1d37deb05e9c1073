package lease

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// View is a consistent, read-only picture of the model at one index that
// can be written out while the model goes on applying commands. Taking it
// costs a pointer per task: Apply copies a task before changing it while a
// view is open (Model.writable), instead of the snapshot encoding the
// whole state up front. A snapshot of 100k leases encoded up front was a
// 100 MB buffer (twice over, as the JSON encoder's buffer was copied into
// the snapshot's), which stayed in the process's RSS after every snapshot.
type View struct {
	m         *Model
	lastIndex uint64
	tasks     []*Task
	sessions  []*Session
	dedup     []dedupRec
	release   sync.Once
}

// View returns a view of the model as it is now. The caller must Release
// it; until then every task changed is copied first.
func (m *Model) View() *View {
	m.gen++
	m.views.Add(1)
	v := &View{m: m, lastIndex: m.lastIndex, dedup: m.dedup.recs[:len(m.dedup.recs):len(m.dedup.recs)]}
	v.tasks = make([]*Task, 0, len(m.tasks))
	for _, t := range m.tasks {
		v.tasks = append(v.tasks, t)
	}
	v.sessions = make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		v.sessions = append(v.sessions, s)
	}
	return v
}

// LastIndex returns the raft index of the last command the view includes.
func (v *View) LastIndex() uint64 { return v.lastIndex }

// Release ends the view; the model stops copying tasks for it. Safe to
// call more than once.
func (v *View) Release() {
	v.release.Do(func() { v.m.views.Add(-1) })
}

// WriteTo writes the view as a snapshot (the layout of type snapshot) to
// w: tasks and sessions in id order and remembered request ids sorted, so
// equal models produce equal bytes. It may run concurrently with the
// model's Apply, not after Release.
func (v *View) WriteTo(w io.Writer) (int64, error) {
	slices.SortFunc(v.tasks, func(a, b *Task) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(v.sessions, func(a, b *Session) int { return strings.Compare(a.ID, b.ID) })
	sw := &streamWriter{w: bufio.NewWriterSize(w, 64<<10)}
	sw.raw(`{"version":` + strconv.Itoa(snapshotVersion) + `,"lastIndex":` + strconv.FormatUint(v.lastIndex, 10) + `,"tasks":[`)
	for i, t := range v.tasks {
		sw.sep(i)
		sw.value(t)
	}
	sw.raw(`],"sessions":[`)
	for i, s := range v.sessions {
		sw.sep(i)
		sw.value(s)
	}
	sw.raw(`],"dedup":{`)
	byID := make([]int32, len(v.dedup))
	for i := range byID {
		byID[i] = int32(i)
	}
	slices.SortFunc(byID, func(a, b int32) int { return strings.Compare(v.dedup[a].id, v.dedup[b].id) })
	for i, j := range byID {
		sw.sep(i)
		r := &v.dedup[j]
		sw.value(r.id)
		sw.raw(":")
		sw.value(r.entry())
	}
	sw.raw(`},"dedupOrder":[`)
	for i := range v.dedup {
		sw.sep(i)
		r := &v.dedup[i]
		sw.value(dedupRef{ID: r.id, At: r.at})
	}
	sw.raw("]}\n")
	if sw.err == nil {
		sw.err = sw.w.Flush()
	}
	return sw.n, sw.err
}

// streamWriter writes JSON piece by piece and keeps the first error.
type streamWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (s *streamWriter) raw(str string) {
	if s.err != nil {
		return
	}
	n, err := s.w.WriteString(str)
	s.n += int64(n)
	s.err = err
}

func (s *streamWriter) sep(i int) {
	if i > 0 {
		s.raw(",")
	}
}

// value writes v as json.Marshal encodes it: the same bytes the encoder
// of a whole snapshot value wrote for the element.
func (s *streamWriter) value(v any) {
	if s.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.err = err
		return
	}
	n, err := s.w.Write(b)
	s.n += int64(n)
	s.err = err
}

// ReadSnapshot replaces the model's state with a snapshot written by
// WriteSnapshot (or View.WriteTo, or any earlier version of either: the
// layout has not changed), rebuilding the derived indexes. It decodes one
// task at a time, so restoring does not hold the whole encoding in memory.
func (m *Model) ReadSnapshot(r io.Reader) error {
	n, err := readSnapshot(json.NewDecoder(r))
	if err != nil {
		return fmt.Errorf("lease: decode snapshot: %w", err)
	}
	// A view of the old state may still be writing: it keeps its own
	// pointers, and nothing of the old state is changed in place.
	m.tasks, m.sessions, m.held, m.queue, m.owned, m.ownedBytes = n.tasks, n.sessions, n.held, n.queue, n.owned, n.ownedBytes
	m.dedup, m.lastIndex = n.dedup, n.lastIndex
	m.gen++
	return nil
}

func readSnapshot(dec *json.Decoder) (*Model, error) {
	n := New()
	version := -1
	var entries map[string]dedupEntry
	var order []dedupRef
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		switch key {
		case "version":
			err = dec.Decode(&version)
		case "lastIndex":
			err = dec.Decode(&n.lastIndex)
		case "tasks":
			err = decodeArray(dec, func() error {
				t := new(Task)
				if err := dec.Decode(t); err != nil {
					return err
				}
				n.restoreTask(t)
				return nil
			})
		case "sessions":
			err = decodeArray(dec, func() error {
				s := new(Session)
				if err := dec.Decode(s); err != nil {
					return err
				}
				n.sessions[s.ID] = s
				n.countSession(s, 1)
				return nil
			})
		case "dedup":
			err = dec.Decode(&entries)
		case "dedupOrder":
			err = decodeArray(dec, func() error {
				var r dedupRef
				if err := dec.Decode(&r); err != nil {
					return err
				}
				order = append(order, r)
				return nil
			})
		default:
			// A key this version does not know: skip its value.
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, err
	}
	if version != snapshotVersion {
		return nil, fmt.Errorf("snapshot version %d, want %d", version, snapshotVersion)
	}
	n.shareStrings()
	// The order list names every remembered id once, oldest first; the
	// map holds what each one answered.
	for _, ref := range order {
		e, ok := entries[ref.ID]
		if !ok {
			continue
		}
		if _, dup := n.dedup.get(ref.ID); dup {
			continue
		}
		n.dedup.add(dedupRec{id: ref.ID, taskID: e.TaskID, key: e.Key, index: e.Index, epoch: e.Epoch, at: ref.At, code: codeNamed(e.Code), fp: e.FP})
		if t, ok := n.tasks[e.TaskID]; ok {
			// Share the task's copy of its id.
			n.dedup.recs[len(n.dedup.recs)-1].taskID = t.ID
		}
	}
	return n, nil
}

// restoreTask adds a decoded task and its derived indexes.
func (m *Model) restoreTask(t *Task) {
	t.q, t.gen = nil, m.gen
	m.tasks[t.ID] = t
	m.countTask(t, 1)
	if t.State == TaskPending {
		m.queue.push(t)
	}
	t.held = 0
	if l := t.Lease; l != nil && l.Status.Live() {
		m.hold(t)
	}
}

// shareStrings points the ids a decoded lease repeats at the copies its
// task and session hold, and the statuses at the constants, as applying
// the log leaves them: decoding gives every lease its own copy of each,
// about 120 bytes a lease on a node restored from a snapshot.
func (m *Model) shareStrings() {
	share := func(l *Lease, t *Task) {
		l.TaskID = t.ID
		l.Status = internStatus(l.Status)
		if s, ok := m.sessions[l.SessionID]; ok {
			l.SessionID = s.ID
			if l.WorkerID == s.WorkerID {
				l.WorkerID = s.WorkerID
			}
		}
	}
	for _, t := range m.tasks {
		t.State = internState(t.State)
		if t.Lease != nil && t.Lease.TaskID == t.ID {
			share(t.Lease, t)
		}
		history := t.History()
		for i := range history {
			if history[i].TaskID == t.ID {
				share(&history[i], t)
			}
		}
	}
}

var (
	knownStatuses = []Status{StatusActive, StatusPausedWaiting, StatusSuspectDead, StatusExpired, StatusReclaimed, StatusRevoked, StatusReleased}
	knownStates   = []TaskState{TaskPending, TaskLeased, TaskWaiting, TaskCompleted, TaskFailed, TaskCancelled}
)

func internStatus(s Status) Status {
	if i := slices.Index(knownStatuses, s); i >= 0 {
		return knownStatuses[i]
	}
	return s
}

func internState(s TaskState) TaskState {
	if i := slices.Index(knownStates, s); i >= 0 {
		return knownStates[i]
	}
	return s
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, got %v", want, tok)
	}
	return nil
}

// decodeArray reads a JSON array (or null), calling each for every element.
func decodeArray(dec *json.Decoder, each func() error) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return errors.New("want an array")
	}
	for dec.More() {
		if err := each(); err != nil {
			return err
		}
	}
	return expectDelim(dec, ']')
}
