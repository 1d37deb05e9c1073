package scenario

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
)

// FencedService is a fenced downstream built on the fence package's
// net/http middleware (in-memory store): it accepts
// POST /v1/tasks/{task}/writes and logs every accepted write inside the
// fenced section, so the log order is the order the writes took effect,
// and it counts the writes it refused as stale.
type FencedService struct {
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup

	mu       sync.Mutex
	accepted map[string][]AcceptedWrite
	stale    map[string][]AcceptedWrite
}

// AcceptedWrite is one write the downstream decided on.
type AcceptedWrite struct {
	// Epoch is the write's fencing token.
	Epoch uint64
	// Key is its Idempotency-Key.
	Key string
	// At is when the downstream decided.
	At time.Time
}

// StartFencedService starts a FencedService on 127.0.0.1:0.
func StartFencedService() (*FencedService, error) {
	store, err := fence.NewMemStore(fence.MemStoreConfig{})
	if err != nil {
		return nil, err
	}
	d := &FencedService{accepted: map[string][]AcceptedWrite{}, stale: map[string][]AcceptedWrite{}}
	mw, err := fence.NewMiddleware(fence.MiddlewareConfig{Config: fence.Config{
		Store: store,
		Observer: func(dec fence.Decision) {
			if dec.Problem != nil && dec.Problem.Type == fence.ProblemStaleToken {
				d.mu.Lock()
				t := dec.Write.Key.Task
				d.stale[t] = append(d.stale[t], AcceptedWrite{Epoch: dec.Write.Epoch, Key: dec.Write.IdempotencyKey, At: time.Now()})
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

func (d *FencedService) write(w http.ResponseWriter, r *http.Request) {
	fw, ok := fence.WriteFromContext(r.Context())
	if !ok {
		fence.WriteProblemHTTP(w, &fence.Problem{Type: api.ProblemTypeBase + "unfenced", Title: "unfenced write", Status: http.StatusInternalServerError})
		return
	}
	d.mu.Lock()
	d.accepted[fw.Key.Task] = append(d.accepted[fw.Key.Task], AcceptedWrite{Epoch: fw.Epoch, Key: fw.IdempotencyKey, At: time.Now()})
	d.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// Addr is the service's host:port.
func (d *FencedService) Addr() string { return d.ln.Addr().String() }

// WriteURL is the URL of task's writes.
func (d *FencedService) WriteURL(task string) string { return writeURL(d.Addr(), task) }

// Accepted returns the accepted writes of task, in the order they took
// effect.
func (d *FencedService) Accepted(task string) []AcceptedWrite {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]AcceptedWrite(nil), d.accepted[task]...)
}

// Stale returns the writes of task refused for a stale fencing token.
func (d *FencedService) Stale(task string) []AcceptedWrite {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]AcceptedWrite(nil), d.stale[task]...)
}

// RejectedStale is how many writes of task were refused as stale.
func (d *FencedService) RejectedStale(task string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.stale[task])
}

// Close stops the service.
func (d *FencedService) Close() error {
	err := d.srv.Close()
	d.wg.Wait()
	return err
}
