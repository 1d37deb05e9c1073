package fakectl

import (
	"io"
	"net/http"
	"time"
)

// Revoke takes the lease on task away as an operator would (kind
// revoked, stop true) and returns when the event was handed to the
// streams; false when the task is not held.
func (s *Server) Revoke(task string) (time.Time, bool) { return s.end(task, "revoked", "operator") }

// Lose makes the lease on task not current (kind lost, stop true).
func (s *Server) Lose(task string) (time.Time, bool) { return s.end(task, "lost", "expired") }

func (s *Server) end(task, kind, reason string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[task]
	if !ok || !t.Held {
		return time.Time{}, false
	}
	t.Held, t.State = false, "pending"
	return s.publish(kind, task, t.Epoch, reason, true), true
}

// Signal resumes a waiting task with data (at once, or as soon as it
// waits).
func (s *Server) Signal(task string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[task]
	if !ok {
		t = s.create(task)
	}
	if t.State == "waiting" {
		t.State, t.Signal = "pending", data
		if t.waitTmr != nil {
			t.waitTmr.Stop()
		}
		return
	}
	t.armed = data
}

// Hold makes the fake hold task as a sidecar in one-task mode does.
func (s *Server) Hold(task string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[task]
	if !ok {
		t = s.create(task)
	}
	s.grant(nil, t)
	return t.Epoch
}

// WaitReportsLost makes /v1/wait publish a stop (lost, reason waiting)
// instead of released: what a sidecar whose heartbeat reply saw the wait
// before the worker's call returned reported before the attach contract.
func (s *Server) WaitReportsLost() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waitLost = true
}

// Create adds a pending task.
func (s *Server) Create(task string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[task]; !ok {
		s.create(task)
	}
}

// Restart plays a sidecar restart: a new boot, every stream ended; keep
// says whether the leases survived it.
func (s *Server) Restart(keep bool) {
	s.mu.Lock()
	s.boot = newBoot()
	s.seq, s.ring = 0, nil
	if !keep {
		for _, t := range s.tasks {
			if t.Held {
				t.Held, t.State = false, "pending"
			}
		}
	}
	s.mu.Unlock()
	s.kickAll(false)
}

// Drop ends every stream from the server's side; pause refuses new ones
// (503) until Resume, so events published meanwhile must be replayed.
func (s *Server) Drop(pause bool) { s.kickAll(pause) }

// Resume lets streams connect again after Drop(true).
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused = false
}

// TaskInfo is what the fake knows of one task, for assertions.
type TaskInfo struct {
	State    string `json:"state"`
	Epoch    uint64 `json:"epoch"`
	Held     bool   `json:"held"`
	Step     string `json:"step"`
	Data     string `json:"data"`
	Result   string `json:"result"`
	Reason   string `json:"reason"`
	Progress int    `json:"progress"`
	Attached int    `json:"attached"` // open attach streams in its scope
}

// Task reports on task.
func (s *Server) Task(task string) TaskInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[task]
	if !ok {
		return TaskInfo{}
	}
	in := TaskInfo{State: t.State, Epoch: t.Epoch, Held: t.Held, Result: string(t.Result), Reason: t.Reason, Progress: t.Progress}
	if t.Ckpt != nil {
		in.Step, in.Data = t.Ckpt.Step, string(t.Ckpt.Data)
	}
	for c := range s.subs {
		if c.attach && (c.task == "" || c.task == task) {
			in.Attached++
		}
	}
	return in
}

// Streams reports the Last-Event-ID of every stream request so far and
// how many events were served by replay.
func (s *Server) Streams() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lastIDs...), s.replayed
}

// admin serves /_fake/* for tests in other languages: revoke, lose,
// signal, hold, create, drop, resume, restart (?task=, ?pause=1, ?keep=1)
// and task (GET, JSON TaskInfo).
func (s *Server) admin(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	task := q.Get("task")
	switch r.URL.Path {
	case "/_fake/revoke", "/_fake/lose":
		end := s.Revoke
		if r.URL.Path == "/_fake/lose" {
			end = s.Lose
		}
		if _, ok := end(task); !ok {
			problem(w, 409, "no-lease", "not held")
			return
		}
	case "/_fake/signal":
		b, _ := io.ReadAll(r.Body)
		s.Signal(task, b)
	case "/_fake/hold":
		reply(w, map[string]any{"epoch": s.Hold(task)})
		return
	case "/_fake/waitlost":
		s.WaitReportsLost()
	case "/_fake/create":
		s.Create(task)
	case "/_fake/drop":
		s.Drop(q.Get("pause") == "1")
	case "/_fake/resume":
		s.Resume()
	case "/_fake/restart":
		s.Restart(q.Get("keep") == "1")
	case "/_fake/task":
		reply(w, s.Task(task))
		return
	case "/_fake/streams":
		ids, n := s.Streams()
		reply(w, map[string]any{"lastEventIds": ids, "replayed": n})
		return
	default:
		problem(w, 404, "not-found", r.URL.Path)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
