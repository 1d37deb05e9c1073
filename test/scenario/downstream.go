package scenario

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
)

// downstream is the fenced service the workers write to, with the log the
// summary is judged from.
type downstream interface {
	// Addr is the service's host:port.
	Addr() string
	// Accepted returns the accepted writes of task, in the order they took
	// effect.
	Accepted(task string) []acceptedWrite
	// RejectedStale is how many writes of task were refused as stale.
	RejectedStale(task string) int
	// Close stops the service.
	Close() error
}

// fencedLog is a fenced downstream built on the fence package's net/http
// middleware: it accepts POST /v1/tasks/{task}/writes and logs every
// accepted write inside the fenced section, so the log order is the order
// the writes took effect.
type fencedLog struct {
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup

	mu       sync.Mutex
	accepted map[string][]acceptedWrite
	stale    map[string]int
}

func startDownstream(_ *zap.Logger) (downstream, error) {
	store, err := fence.NewMemStore(fence.MemStoreConfig{})
	if err != nil {
		return nil, err
	}
	d := &fencedLog{accepted: map[string][]acceptedWrite{}, stale: map[string]int{}}
	mw, err := fence.NewMiddleware(fence.MiddlewareConfig{Config: fence.Config{
		Store: store,
		Observer: func(dec fence.Decision) {
			if dec.Problem != nil && dec.Problem.Type == fence.ProblemStaleToken {
				d.mu.Lock()
				d.stale[dec.Write.Key.Task]++
				d.mu.Unlock()
			}
		},
	}})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/tasks/{task}/writes", mw.Wrap(http.HandlerFunc(d.write)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d.ln = ln
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener closed under us: Close reports nothing more useful
		}
	}()
	return d, nil
}

func (d *fencedLog) write(w http.ResponseWriter, r *http.Request) {
	fw, ok := fence.WriteFromContext(r.Context())
	if !ok {
		fence.WriteProblemHTTP(w, &fence.Problem{Type: api.ProblemTypeBase + "unfenced", Title: "unfenced write", Status: http.StatusInternalServerError})
		return
	}
	d.mu.Lock()
	d.accepted[fw.Key.Task] = append(d.accepted[fw.Key.Task], acceptedWrite{Epoch: fw.Epoch, Action: strings.TrimSpace(r.Header.Get(fence.HeaderIdempotencyKey))})
	d.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

func (d *fencedLog) Addr() string { return d.ln.Addr().String() }

func (d *fencedLog) Accepted(task string) []acceptedWrite {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]acceptedWrite(nil), d.accepted[task]...)
}

func (d *fencedLog) RejectedStale(task string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stale[task]
}

func (d *fencedLog) Close() error {
	err := d.srv.Close()
	d.wg.Wait()
	return err
}
