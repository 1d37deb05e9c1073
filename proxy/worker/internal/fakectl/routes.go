package fakectl

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
	"time"
)

func problem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	if status < 500 {
		w.Header().Set("X-Should-Retry", "false")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "https://fencepost.dev/problems/" + code,
		"title": http.StatusText(status), "status": status, "code": code, "detail": detail})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// body is a control request's JSON body.
type body struct {
	TaskID    string          `json:"taskId"`
	Create    bool            `json:"create"`
	Step      string          `json:"step"`
	Seq       uint64          `json:"seq"`
	Data      json.RawMessage `json:"data"`
	Result    json.RawMessage `json:"result"`
	Reason    string          `json:"reason"`
	TimeoutMs int64           `json:"timeoutMs"`
}

// ServeHTTP routes the control API and the test's /_fake/* routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_fake/") {
		s.admin(w, r)
		return
	}
	switch r.URL.Path {
	case "/v1/attach", "/v1/events":
		if r.Method != http.MethodGet {
			problem(w, 405, "method-not-allowed", r.Method)
			return
		}
		s.serveStream(w, r, r.URL.Path == "/v1/attach")
		return
	case "/v1/lease":
		s.mu.Lock()
		defer s.mu.Unlock()
		views := []map[string]any{}
		for _, id := range s.sorted() {
			t := s.tasks[id]
			if t.Held && (r.URL.Query().Get("taskId") == "" || r.URL.Query().Get("taskId") == id) {
				views = append(views, s.view(t))
			}
		}
		reply(w, map[string]any{"leases": views})
		return
	}
	if r.Method != http.MethodPost {
		problem(w, 404, "not-found", "no such control route "+r.URL.Path)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		problem(w, 415, "control-not-json", "control requests must be sent with Content-Type: application/json")
		return
	}
	var b body
	raw, _ := io.ReadAll(r.Body)
	if len(strings.TrimSpace(string(raw))) > 0 && json.Unmarshal(raw, &b) != nil {
		problem(w, 400, "bad-request", "bad JSON body")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.URL.Path {
	case "/v1/acquire":
		s.acquire(w, b)
	case "/v1/claim":
		for _, id := range s.sorted() {
			if s.tasks[id].State == "pending" {
				s.grant(w, s.tasks[id])
				return
			}
		}
		problem(w, 404, "no_task", "no claimable task")
	case "/v1/checkpoint", "/v1/progress", "/v1/wait", "/v1/complete", "/v1/fail", "/v1/giveback":
		t, ok := s.resolve(w, b.TaskID)
		if ok {
			s.holderCall(w, r.URL.Path, t, b)
		}
	default:
		problem(w, 404, "not-found", "no such control route "+r.URL.Path)
	}
}

func (s *Server) sorted() []string {
	ids := make([]string, 0, len(s.tasks))
	for id := range s.tasks {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return s.tasks[ids[i]].order < s.tasks[ids[j]].order })
	return ids
}

func (s *Server) view(t *task) map[string]any {
	v := map[string]any{"taskId": t.ID, "epoch": t.Epoch, "status": "current", "current": true, "remainingMs": 10000}
	if t.Ckpt != nil {
		v["checkpointSeq"], v["checkpointStep"] = t.Ckpt.Seq, t.Ckpt.Step
	}
	return v
}

func (s *Server) acquire(w http.ResponseWriter, b body) {
	if b.TaskID == "" {
		problem(w, 400, "bad-request", `field "taskId": required`)
		return
	}
	t, ok := s.tasks[b.TaskID]
	switch {
	case !ok && !b.Create:
		problem(w, 404, "task_not_found", "task not found")
		return
	case !ok:
		t = s.create(b.TaskID)
	}
	switch {
	case t.State == "completed" || t.State == "failed":
		problem(w, 409, "task_final", "task is completed, failed or cancelled")
	case t.State == "waiting":
		problem(w, 409, "task_waiting", "task is waiting for an external signal")
	case t.Held:
		problem(w, 409, "lease_held", "task is leased by another holder")
	default:
		s.grant(w, t)
	}
}

func (s *Server) create(id string) *task {
	s.n++
	t := &task{ID: id, State: "pending", order: s.n}
	s.tasks[id] = t
	return t
}

// grant leases t under a new epoch; w may be nil (the sidecar's own
// acquire in one-task mode).
func (s *Server) grant(w http.ResponseWriter, t *task) {
	t.Epoch++
	t.Held, t.State = true, "leased"
	s.publish("acquired", t.ID, t.Epoch, "", false)
	if w == nil {
		return
	}
	task := map[string]any{"taskId": t.ID, "state": t.State, "maxEpoch": t.Epoch}
	out := map[string]any{"lease": s.view(t), "task": task}
	if t.Ckpt != nil {
		task["checkpoint"] = map[string]any{"seq": t.Ckpt.Seq, "step": t.Ckpt.Step, "data": []byte(t.Ckpt.Data), "epoch": t.Epoch - 1}
		out["checkpointData"] = t.Ckpt.Data
	}
	if t.Signal != nil {
		task["signal"] = t.Signal
	}
	reply(w, out)
}

// resolve finds the held task a call names (or the only one).
func (s *Server) resolve(w http.ResponseWriter, id string) (*task, bool) {
	if id != "" {
		if t, ok := s.tasks[id]; ok && t.Held {
			return t, true
		}
		problem(w, 409, "no-lease", "the sidecar holds no lease for task "+id)
		return nil, false
	}
	var held []*task
	for _, t := range s.tasks {
		if t.Held {
			held = append(held, t)
		}
	}
	switch len(held) {
	case 1:
		return held[0], true
	case 0:
		problem(w, 409, "no-lease", "the sidecar holds no lease")
	default:
		problem(w, 409, "task-ambiguous", "several leases held")
	}
	return nil, false
}

func (s *Server) holderCall(w http.ResponseWriter, path string, t *task, b body) {
	switch path {
	case "/v1/checkpoint":
		seq := b.Seq
		if seq == 0 {
			seq = 1
			if t.Ckpt != nil {
				seq = t.Ckpt.Seq + 1
			}
		} else if t.Ckpt != nil && seq <= t.Ckpt.Seq {
			problem(w, 409, "checkpoint_seq", "checkpoint seq must increase")
			return
		}
		t.Ckpt = &checkpoint{Seq: seq, Step: b.Step, Data: b.Data}
		t.Progress++
		reply(w, map[string]any{"taskId": t.ID, "state": t.State, "checkpoint": map[string]any{"seq": seq, "step": b.Step}})
		return
	case "/v1/progress":
		t.Progress++
		w.WriteHeader(http.StatusNoContent)
		return
	case "/v1/wait":
		t.Held, t.State = false, "waiting"
		if s.waitLost {
			s.publish("lost", t.ID, t.Epoch, "waiting", true)
		} else {
			s.publish("released", t.ID, t.Epoch, "waiting", false)
		}
		if t.armed != nil {
			t.Signal, t.armed, t.State = t.armed, nil, "pending"
		} else if b.TimeoutMs > 0 {
			id := t.ID
			t.waitTmr = time.AfterFunc(time.Duration(b.TimeoutMs)*time.Millisecond, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if t := s.tasks[id]; t.State == "waiting" {
					t.State, t.Signal = "pending", nil
				}
			})
		}
	case "/v1/complete":
		t.Held, t.State, t.Result = false, "completed", b.Result
		s.publish("released", t.ID, t.Epoch, "completed", false)
	case "/v1/fail":
		t.Held, t.State, t.Reason = false, "failed", b.Reason
		s.publish("released", t.ID, t.Epoch, "failed", false)
	case "/v1/giveback":
		t.Held, t.State = false, "pending"
		s.publish("released", t.ID, t.Epoch, "given_back", false)
	}
	reply(w, map[string]any{"taskId": t.ID, "state": t.State})
}
