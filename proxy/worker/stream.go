package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// EventKind names a lease event of the control API's stream.
type EventKind string

// Event kinds (the contract's "Kinds").
const (
	EventState    EventKind = "state"
	EventAcquired EventKind = "acquired"
	EventLost     EventKind = "lost"
	EventRevived  EventKind = "revived"
	EventRevoked  EventKind = "revoked"
	EventReleased EventKind = "released"
)

// Event is one message of GET /v1/attach (or /v1/events).
type Event struct {
	// ID is the SSE id, "<boot>-<seq>".
	ID     string    `json:"-"`
	Kind   EventKind `json:"kind"`
	TaskID string    `json:"taskId"`
	Epoch  uint64    `json:"epoch"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
	// Stop says: stop the work for TaskID at once, the lease is over.
	Stop bool   `json:"stop"`
	Seq  uint64 `json:"seq,omitempty"`
}

// stopOf decides the one rule for "stop now": the event's stop field;
// a sidecar older than the contract sends none, and then lost and revoked
// mean stop.
func stopOf(data []byte, ev Event) bool {
	var probe struct {
		Stop *bool `json:"stop"`
	}
	if json.Unmarshal(data, &probe) == nil && probe.Stop != nil {
		return *probe.Stop
	}
	return ev.Kind == EventLost || ev.Kind == EventRevoked
}

// Reconnect backoff of the attach stream: first retry soon (a sidecar
// restart takes about a second), then no faster than reconnectMax.
const (
	reconnectMin = 20 * time.Millisecond
	reconnectMax = time.Second
)

// streamIdle is how long a stream may be silent before it is taken for
// dead and reconnected: three of the sidecar's 15 s keepalives.
const streamIdle = 45 * time.Second

// attach keeps GET /v1/attach?task=T open for the block's lifetime (one
// stream across the epochs a WaitExternal moves through, so no close of
// an old stream can race the next grant) and tells the lease when the
// sidecar says stop for the current epoch. It reconnects with
// Last-Event-ID until closed.
type attach struct {
	c      *Client
	task   string
	mu     sync.Mutex
	epoch  uint64
	future map[uint64]Event // stops for an epoch newer than the one known yet
	onEv   func(Event)      // every event for the task, in order
	onStop func(Event)      // the first stop for this epoch
	path   string           // "/v1/attach", or "/v1/events" on a sidecar without attach

	ready     chan struct{} // closed once the first connection answered
	readyOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	lastID    string
	connErr   error // why the first connection failed, when it did
}

// openAttach connects and returns once the stream answered (its first
// event is the lease's state), or the first connection failed.
func (c *Client) openAttach(ctx context.Context, task string, epoch uint64, onEv, onStop func(Event)) (*attach, error) {
	a := &attach{c: c, task: task, epoch: epoch, onEv: onEv, onStop: onStop, path: "/v1/attach",
		ready: make(chan struct{}), done: make(chan struct{}), future: map[uint64]Event{}}
	a.ctx, a.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go a.loop()
	select {
	case <-a.ready:
	case <-ctx.Done():
		a.close()
		return nil, ctx.Err()
	}
	if a.connErr != nil {
		a.close()
		return nil, a.connErr
	}
	return a, nil
}

// setEpoch moves the stream to the lease's new epoch (after a resume),
// firing a stop for it that arrived before the grant's reply did.
func (a *attach) setEpoch(e uint64) {
	a.mu.Lock()
	a.epoch = e
	ev, ok := a.future[e]
	clear(a.future)
	a.mu.Unlock()
	if ok && a.onStop != nil {
		a.onStop(ev)
	}
}

// close ends the stream (a clean close: call it after the lease ended).
func (a *attach) close() {
	a.cancel()
	<-a.done
}

func (a *attach) loop() {
	defer close(a.done)
	wait := reconnectMin
	for connected := false; ; {
		err := a.once()
		select {
		case <-a.ready:
			connected = true
		default:
		}
		if !connected && err != nil {
			a.connErr = err
			a.readyOnce.Do(func() { close(a.ready) })
			return
		}
		if a.ctx.Err() != nil {
			return
		}
		select {
		case <-time.After(wait):
		case <-a.ctx.Done():
			return
		}
		wait = min(wait*2, reconnectMax)
		if err == nil || errors.Is(err, io.EOF) {
			wait = reconnectMin // it was up: the next try may well work
		}
	}
}

// once runs one connection until it breaks.
func (a *attach) once() error {
	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	idle := time.AfterFunc(streamIdle, cancel)
	defer idle.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.c.base+a.path+"?task="+url.QueryEscape(a.task), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if a.lastID != "" {
		req.Header.Set("Last-Event-ID", a.lastID)
	}
	resp, err := a.c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("fencepost: attach: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && a.path == "/v1/attach" {
		// A sidecar from before the attach route: the events stream still
		// says stop, without tying the worker's lifetime to the lease.
		a.path = "/v1/events"
		return a.once()
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return problemError(resp.StatusCode, b)
	}
	a.readyOnce.Do(func() { close(a.ready) })
	return readSSE(resp.Body, func() { idle.Reset(streamIdle) }, a.handle)
}

// handle applies one event to the lease.
func (a *attach) handle(id, kind string, data []byte) {
	if id != "" {
		a.lastID = id
	}
	var ev Event
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	ev.ID = id
	if ev.Kind == "" {
		ev.Kind = EventKind(kind)
	}
	if ev.TaskID != "" && ev.TaskID != a.task {
		return
	}
	stop := stopOf(data, ev)
	a.mu.Lock()
	cur := a.epoch
	if ev.Kind == EventState {
		// A state that does not show this epoch held (the sidecar
		// restarted without it, or it ended while we were away) is a stop.
		stop = ev.TaskID == "" || ev.Epoch != cur || stop
		if ev.TaskID == "" {
			ev.TaskID = a.task
		}
	} else if stop && ev.Epoch > cur {
		a.future[ev.Epoch] = ev // the grant's reply has not told us this epoch yet
		stop = false
	}
	a.mu.Unlock()
	ev.Stop = ev.Stop || stop
	if a.onEv != nil {
		a.onEv(ev)
	}
	if stop && (ev.Epoch == 0 || ev.Epoch == cur || ev.Kind == EventState) && a.onStop != nil {
		a.onStop(ev)
	}
}

// readSSE reads Server-Sent Events from r and calls fn for each message
// (alive on every line, keepalive comments included).
func readSSE(r io.Reader, alive func(), fn func(id, kind string, data []byte)) error {
	br := bufio.NewReaderSize(r, 16<<10)
	var id, kind string
	var data []byte
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		alive()
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data != nil {
				fn(id, kind, data)
			}
			kind, data = "", nil
		case strings.HasPrefix(line, ":"):
		default:
			field, val, _ := strings.Cut(line, ":")
			val = strings.TrimPrefix(val, " ")
			switch field {
			case "id":
				id = val
			case "event":
				kind = val
			case "data":
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, val...)
			}
		}
	}
}
