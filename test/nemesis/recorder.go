package nemesis

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence"
)

// Recorder is the raw downstream: it accepts every write and validates
// nothing, recording the task and fencing token of each in arrival order.
// It shows what a service without fencing would have been sent — so the
// sidecar's own guarantee (I4: no write after its local deadline) is
// checked without the downstream's help.
type Recorder struct {
	srv *http.Server
	ln  net.Listener
	mu  sync.Mutex
	log []Arrival
}

// Arrival is one write the recorder received.
type Arrival struct {
	At    time.Time
	Task  string
	Epoch uint64
	Key   string
}

// StartRecorder listens on a free loopback port and serves.
func StartRecorder() (*Recorder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Recorder{ln: ln}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *Recorder) serve(w http.ResponseWriter, req *http.Request) {
	at := time.Now() // on arrival: a body read later must not make a write look late
	_, _ = io.Copy(io.Discard, req.Body)
	epoch, _ := strconv.ParseUint(req.Header.Get(fence.HeaderToken), 10, 64)
	a := Arrival{At: at, Task: req.Header.Get(fence.HeaderTask), Epoch: epoch, Key: req.Header.Get("Idempotency-Key")}
	r.mu.Lock()
	r.log = append(r.log, a)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// URL is the write target for task.
func (r *Recorder) URL(task string) string {
	return "http://" + r.ln.Addr().String() + "/raw/" + task
}

// Log returns every arrival so far.
func (r *Recorder) Log() []Arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Arrival(nil), r.log...)
}

// Close stops the recorder.
func (r *Recorder) Close() error { return r.srv.Close() }

// CheckRecorder reports every write that arrived with an epoch older than
// one whose first write had already arrived for the same task.
func CheckRecorder(log []Arrival) []string {
	var bad []string
	newest := map[string]Arrival{}
	for _, a := range log {
		if a.Task == "" || a.Epoch == 0 {
			bad = append(bad, fmt.Sprintf("unfenced write at %s: %+v", stamp(a.At), a))
			continue
		}
		n, ok := newest[a.Task]
		switch {
		case !ok || a.Epoch > n.Epoch:
			newest[a.Task] = a
		case a.Epoch < n.Epoch:
			bad = append(bad, fmt.Sprintf("task %s: epoch %d's write (key %s) arrived at %s, after epoch %d's first write at %s",
				a.Task, a.Epoch, a.Key, stamp(a.At), n.Epoch, stamp(n.At)))
		}
	}
	return bad
}

// stamp formats a time for the history.
func stamp(t time.Time) string { return t.Format("15:04:05.000") }
