// Package fakectl is a fake of the sidecar's control API that implements
// the agreed event and attach contract (the shared brief
// attach-contract.md: state first, `id: <boot>-<seq>`, `stop`, replay by
// Last-Event-ID from a 256-event ring, attach close gives back with
// worker_exited, POST /v1/progress) over an in-memory task table, so the
// worker SDKs' logic is tested before and apart from the real sidecar.
// Tests drive the operator's side through /_fake/* routes (revoke, lose,
// signal, drop or restart the streams). It is test support only: the
// product's control API is the sidecar's.
package fakectl

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// ringSize is how many events a stream can replay (the contract's 256).
const ringSize = 256

type checkpoint struct {
	Seq  uint64          `json:"seq"`
	Step string          `json:"step,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

type task struct {
	ID       string          `json:"taskId"`
	State    string          `json:"state"`
	Epoch    uint64          `json:"maxEpoch"`
	Held     bool            `json:"held"`
	Ckpt     *checkpoint     `json:"checkpoint,omitempty"`
	Signal   []byte          `json:"signal,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Progress int             `json:"progressMarks"`
	armed    []byte          // a signal sent before the task was waiting
	order    int
	waitTmr  *time.Timer
}

// Event is one published event, as the stream carries it.
type Event struct {
	ID     string    `json:"-"`
	Kind   string    `json:"kind"`
	TaskID string    `json:"taskId"`
	Epoch  uint64    `json:"epoch"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
	Stop   bool      `json:"stop"`
	Seq    uint64    `json:"seq"`
}

type sub struct {
	task    string
	attach  bool
	ch      chan Event
	kicked  chan struct{}     // closed when the server ends the stream itself
	tied    map[string]uint64 // the epochs this attach stream ties, by task (guarded by Server.mu)
	stopped map[string]bool   // tasks this stream delivered a stop for (guarded by Server.mu)
}

// Server is the fake control API.
type Server struct {
	mu       sync.Mutex
	boot     string
	seq      uint64
	ring     []Event
	tasks    map[string]*task
	n        int
	subs     map[*sub]struct{}
	paused   bool
	waitLost bool     // /v1/wait reports lost (stop) instead of released, as a racing heartbeat can
	lastIDs  []string // Last-Event-ID of every stream request, in order
	replayed int      // events served from the ring on reconnects
}

// New returns an empty fake.
func New() *Server {
	return &Server{boot: newBoot(), tasks: map[string]*task{}, subs: map[*sub]struct{}{}}
}

func newBoot() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Listen serves the fake on a fresh port of 127.0.0.1 and returns its
// base URL and a stop function.
func (s *Server) Listen() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() {
		s.kickAll(false)
		_ = srv.Close()
	}, nil
}

// publish records an event and hands it to every stream in scope; the
// caller holds s.mu. It returns the time just before the event was
// handed over (the sidecar "learning" of the change).
func (s *Server) publish(kind, taskID string, epoch uint64, reason string, stop bool) time.Time {
	at := time.Now()
	s.seq++
	ev := Event{ID: fmt.Sprintf("%s-%d", s.boot, s.seq), Kind: kind, TaskID: taskID, Epoch: epoch, Reason: reason,
		At: time.Now().UTC(), Stop: stop, Seq: s.seq}
	s.ring = append(s.ring, ev)
	if len(s.ring) > ringSize {
		s.ring = s.ring[len(s.ring)-ringSize:]
	}
	for c := range s.subs {
		if c.task != "" && c.task != taskID {
			continue
		}
		select {
		case c.ch <- ev:
		default: // too slow: end its stream; it reconnects and replays
			s.dropLocked(c)
		}
	}
	return at
}

func (s *Server) dropLocked(c *sub) {
	if _, ok := s.subs[c]; ok {
		delete(s.subs, c)
		close(c.kicked)
	}
}

// kickAll ends every stream from the server's side (no give-back);
// pause makes new streams wait for Resume.
func (s *Server) kickAll(pause bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused = pause
	for c := range s.subs {
		s.dropLocked(c)
	}
}

// stateEvents are the first events of a fresh stream; caller holds s.mu.
func (s *Server) stateEvents(scope string) []Event {
	var out []Event
	ids := make([]string, 0, len(s.tasks))
	for id, t := range s.tasks {
		if t.Held && (scope == "" || scope == id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		out = append(out, s.stateEvent(id, s.tasks[id].Epoch))
	}
	if len(out) == 0 {
		out = append(out, s.stateEvent("", 0))
	}
	return out
}

// stateEvent carries the latest id, so a reconnect after it replays
// from there.
func (s *Server) stateEvent(id string, epoch uint64) Event {
	return Event{ID: fmt.Sprintf("%s-%d", s.boot, s.seq), Kind: "state", TaskID: id, Epoch: epoch, At: time.Now().UTC(), Seq: s.seq}
}

// replay returns the ring's events after lastID in scope, or false when
// lastID is not of this boot or is older than the ring.
func (s *Server) replay(lastID, scope string) ([]Event, bool) {
	boot, n, ok := strings.Cut(lastID, "-")
	var seq uint64
	if _, err := fmt.Sscan(n, &seq); !ok || err != nil || boot != s.boot || seq > s.seq {
		return nil, false
	}
	if seq < s.seq && (len(s.ring) == 0 || s.ring[0].Seq > seq+1) {
		return nil, false
	}
	var out []Event
	for _, ev := range s.ring {
		if ev.Seq > seq && (scope == "" || ev.TaskID == scope) {
			out = append(out, ev)
		}
	}
	return out, true
}

func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, attach bool) {
	scope := r.URL.Query().Get("task")
	s.mu.Lock()
	if s.paused {
		s.mu.Unlock()
		problem(w, 503, "no-session", "paused by the test")
		return
	}
	lastID := r.Header.Get("Last-Event-ID")
	s.lastIDs = append(s.lastIDs, lastID)
	first, ok := s.replay(lastID, scope)
	if ok {
		s.replayed += len(first)
	} else {
		first = s.stateEvents(scope)
	}
	c := &sub{task: scope, attach: attach, ch: make(chan Event, ringSize), kicked: make(chan struct{}), tied: map[string]uint64{}, stopped: map[string]bool{}}
	s.subs[c] = struct{}{}
	s.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	write := func(ev Event) bool {
		if attach && ev.TaskID != "" {
			// An attach stream ties the leases it told its worker of, but
			// not a grant after a stop it delivered: a stopped worker is not
			// the next owner.
			s.mu.Lock()
			switch {
			case ev.Stop:
				c.stopped[ev.TaskID] = true
			case ev.Kind == "state" || (ev.Kind == "acquired" && !c.stopped[ev.TaskID]):
				c.tied[ev.TaskID] = ev.Epoch
			}
			s.mu.Unlock()
		}
		b, _ := json.Marshal(ev)
		_, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", ev.ID, ev.Kind, b)
		fl.Flush()
		return err == nil
	}
	gone := false
	for _, ev := range first {
		if !write(ev) {
			gone = true
		}
	}
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for !gone {
		select {
		case ev := <-c.ch:
			gone = !write(ev)
		case <-keep.C:
			_, err := fmt.Fprint(w, ": keepalive\n\n")
			fl.Flush()
			gone = err != nil
		case <-c.kicked:
			return // the server ended it: no give-back
		case <-r.Context().Done():
			gone = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ours := s.subs[c]; !ours {
		return
	}
	delete(s.subs, c)
	if attach {
		s.workerExited(c)
	}
}

// workerExited gives back the epochs an attach stream tied (the leases
// it told its worker of), unless another open attach stream tied them
// too; caller holds s.mu. Only the tied epochs: a later grant of the
// task is never touched by an older stream's close.
func (s *Server) workerExited(gone *sub) {
	for id, epoch := range gone.tied {
		t := s.tasks[id]
		if t == nil || !t.Held || t.Epoch != epoch {
			continue
		}
		still := false
		for c := range s.subs {
			if c.attach && c.tied[id] == epoch {
				still = true
			}
		}
		if !still {
			t.Held, t.State = false, "pending"
			s.publish("released", id, t.Epoch, "worker_exited", true)
		}
	}
}
