package refsvc

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/fasthttpfence"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// Entry is one accepted write.
type Entry struct {
	// Seq is the 1-based position in the log.
	Seq uint64 `json:"seq"`
	// Task is the task the write was fenced on.
	Task string `json:"task"`
	// Epoch is the write's fencing token.
	Epoch uint64 `json:"epoch"`
	// Holder is X-Fencing-Holder, if sent.
	Holder string `json:"holder,omitempty"`
	// IdempotencyKey is the write's Idempotency-Key, if sent.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// BodySHA256 is the hex SHA-256 of the body.
	BodySHA256 string `json:"body_sha256"`
	// BodyLen is the body's length in bytes.
	BodyLen int `json:"body_len"`
	// At is when the write was appended.
	At time.Time `json:"at"`
}

// LogPage is what GET /v1/log returns.
type LogPage struct {
	// Entries are the accepted writes in append order.
	Entries []Entry `json:"entries"`
	// Refused are the newest refused writes (at most MaxRefused), oldest first.
	Refused []Refusal `json:"refused"`
	// RefusedDropped counts older refusals no longer kept.
	RefusedDropped uint64 `json:"refused_dropped"`
}

// TaskState is what GET /v1/tasks/{task} returns.
type TaskState struct {
	// Task is the task id.
	Task string `json:"task"`
	// MaxSeenEpoch is the fence's max_seen (raised by replays too).
	MaxSeenEpoch uint64 `json:"max_seen_epoch"`
	// MaxAcceptedEpoch is the highest epoch in the task's writes.
	MaxAcceptedEpoch uint64 `json:"max_accepted_epoch"`
	// Writes are the task's entries in append order.
	Writes []Entry `json:"writes"`
}

// state is the append-only log and its per-task index.
type state struct {
	mu     sync.Mutex
	max    int
	all    []Entry
	byTask map[string][]int // indexes into all
}

func newState(maxEntries int) *state {
	return &state{max: maxEntries, byTask: make(map[string][]int)}
}

// appendEntry adds e with the next seq; false when the log is full.
func (st *state) appendEntry(e Entry) (Entry, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.all) >= st.max {
		return Entry{}, false
	}
	e.Seq = uint64(len(st.all)) + 1
	st.all = append(st.all, e)
	st.byTask[e.Task] = append(st.byTask[e.Task], len(st.all)-1)
	return e, true
}

func (st *state) log() []Entry {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]Entry(nil), st.all...)
}

func (st *state) task(task string) (TaskState, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	idx, ok := st.byTask[task]
	if !ok {
		return TaskState{}, false
	}
	ts := TaskState{Task: task, Writes: make([]Entry, 0, len(idx))}
	for _, i := range idx {
		e := st.all[i]
		ts.Writes = append(ts.Writes, e)
		ts.MaxAcceptedEpoch = max(ts.MaxAcceptedEpoch, e.Epoch)
	}
	return ts, true
}

const (
	tasksPrefix  = "/v1/tasks/"
	writesSuffix = "/writes"
)

// writesTask extracts {task} from /v1/tasks/{task}/writes.
func writesTask(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, tasksPrefix)
	if !ok {
		return "", false
	}
	task, ok := strings.CutSuffix(rest, writesSuffix)
	return task, ok && task != ""
}

// isWrite fences every unsafe method on the writes route; other routes
// are reads (or 405) and pass unfenced.
func isWrite(method, path string) bool {
	_, ok := writesTask(path)
	return ok && fence.DefaultIsWrite(method, path)
}

// pathScope refuses a token for a task other than the one in the path.
func pathScope(rc *fasthttp.RequestCtx, task string) (string, error) {
	if pathTask, _ := writesTask(string(rc.Path())); pathTask != task {
		return "", fmt.Errorf("%w: path names task %q but %s is %q", fence.ErrScope, pathTask, fence.HeaderTask, task)
	}
	return "", nil
}

func (s *Server) routes(mw *fasthttpfence.Middleware) fasthttp.RequestHandler {
	fenced := mw.Wrap(s.appendWrite)
	metricsHandler := fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	fenced = s.fencedRoute(fenced)
	return func(rc *fasthttp.RequestCtx) {
		path := string(rc.Path())
		get := rc.IsGet() || rc.IsHead()
		switch {
		case isWrite(string(rc.Method()), path):
			fenced(rc)
		case path == "/healthz" && get:
			writeJSON(rc, fasthttp.StatusOK, map[string]string{"status": "ok"})
		case path == "/metrics" && get:
			metricsHandler(rc)
		case path == "/v1/log" && get && s.cfg.ServeLog:
			refused, dropped := s.Refused()
			writeJSON(rc, fasthttp.StatusOK, LogPage{Entries: nonNil(s.Log()), Refused: refused, RefusedDropped: dropped})
		case strings.HasPrefix(path, tasksPrefix) && !strings.HasSuffix(path, writesSuffix) && get:
			task := strings.TrimPrefix(path, tasksPrefix)
			ts, ok := s.Task(task)
			if !ok {
				writeJSON(rc, fasthttp.StatusNotFound, map[string]string{"error": "no writes for this task"})
				return
			}
			writeJSON(rc, fasthttp.StatusOK, ts)
		case path == "/healthz" || path == "/metrics" || path == "/v1/log" && s.cfg.ServeLog || strings.HasPrefix(path, tasksPrefix):
			rc.Response.Header.Set("Allow", "GET, HEAD")
			writeJSON(rc, fasthttp.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
		default:
			writeJSON(rc, fasthttp.StatusNotFound, map[string]string{"error": "not found"})
		}
	}
}

// writeRoute is the route template of the fenced writes, the span name's.
const writeRoute = tasksPrefix + "{task}" + writesSuffix

// appendWrite runs behind the fence: the epoch is current and no other
// write for the task runs concurrently, so the log's per-task order is
// the order the fence accepted the writes in.
func (s *Server) appendWrite(rc *fasthttp.RequestCtx) {
	w, ok := fasthttpfence.WriteFromRequest(rc)
	if !ok {
		writeJSON(rc, fasthttp.StatusInternalServerError, map[string]string{"error": "write outside the fence"})
		return
	}
	body := rc.PostBody()
	sum := sha256.Sum256(body)
	e, ok := s.state.appendEntry(Entry{
		Task: w.Key.Task, Epoch: w.Epoch, Holder: w.Holder, IdempotencyKey: w.IdempotencyKey,
		BodySHA256: hex.EncodeToString(sum[:]), BodyLen: len(body), At: time.Now().UTC(),
	})
	if !ok {
		// 5xx: the fence records nothing, the caller may retry elsewhere.
		writeJSON(rc, http.StatusInsufficientStorage, map[string]string{"error": "log full"})
		return
	}
	writeJSON(rc, fasthttp.StatusCreated, e)
}

func nonNil(e []Entry) []Entry {
	if e == nil {
		return []Entry{}
	}
	return e
}

func writeJSON(rc *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = fasthttp.StatusInternalServerError, []byte(`{"error":"encoding failed"}`)
	}
	rc.SetStatusCode(status)
	rc.SetContentType("application/json")
	rc.SetBody(append(b, '\n'))
}
