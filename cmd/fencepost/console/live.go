package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// liveMsg tells open pages what changed: the task ids of new events, or
// Reset when the console cannot say (it just started watching, fell behind
// the feed, or lost the cluster), so every page reads itself again.
type liveMsg struct {
	Tasks []string `json:"tasks,omitempty"`
	Reset bool     `json:"reset,omitempty"`
}

// watchWait is how long one long-poll of the event feed waits on the
// cluster; a change ends it at once.
const watchWait = 4 * time.Second

// retryAfter is the pause after a failed watch.
const retryAfter = 500 * time.Millisecond

// hub runs ONE watch of the cluster's event feed for every open page of
// this console, and only while a page is open: the console's load on the
// cluster does not grow with its viewers.
type hub struct {
	cl  Cluster
	log *zap.Logger
	ctx context.Context // ends with the server

	mu      sync.Mutex
	subs    map[chan liveMsg]struct{}
	running bool
	watches int // watch loops started (tests)
}

func newHub(ctx context.Context, cl Cluster, log *zap.Logger) *hub {
	return &hub{cl: cl, log: log, ctx: ctx, subs: map[chan liveMsg]struct{}{}}
}

// subscribe adds a page; its first message is a reset, which covers what
// changed between the page's render and this subscription.
func (h *hub) subscribe() (<-chan liveMsg, func()) {
	ch := make(chan liveMsg, 16)
	ch <- liveMsg{Reset: true}
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	if !h.running {
		h.running = true
		h.watches++
		go h.loop()
	}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

// broadcast sends m to every page; a page too slow to take it gets a
// reset instead (its buffer is drained first), never a silent gap.
func (h *hub) broadcast(m liveMsg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- m:
		default:
			for len(ch) > 0 {
				<-ch
			}
			ch <- liveMsg{Reset: true}
		}
	}
}

// loop long-polls the feed until no page is open or the server stops.
func (h *hub) loop() {
	var since uint64
	var feedID string   // the feed since belongs to
	positioned := false // since is a position the feed gave
	for {
		h.mu.Lock()
		if len(h.subs) == 0 || h.ctx.Err() != nil {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		feed, err := h.cl.WatchEvents(h.ctx, since, watchWait)
		if err != nil {
			if h.ctx.Err() == nil {
				h.log.Debug("console: event watch failed; retrying", zap.Error(err))
			}
			if positioned {
				h.broadcast(liveMsg{Reset: true})
			}
			since, positioned = 0, false
			select {
			case <-h.ctx.Done():
			case <-time.After(retryAfter):
			}
			continue
		}
		switch {
		case positioned && feed.Feed != feedID:
			// Another member's (or a restarted member's) numbers: what
			// happened in between is unknown.
			h.broadcast(liveMsg{Reset: true})
		case feed.Reset, positioned && since == 0 && len(feed.Events) == 0 && feed.Next > 0:
			// Events were missed: the feed moved past us, or a node that
			// had none when we started answered with a position.
			h.broadcast(liveMsg{Reset: true})
		case len(feed.Events) > 0:
			seen := map[string]bool{}
			var ids []string
			for _, e := range feed.Events {
				if !seen[e.TaskID] {
					seen[e.TaskID] = true
					ids = append(ids, e.TaskID)
				}
			}
			h.broadcast(liveMsg{Tasks: ids})
		}
		since, feedID, positioned = feed.Next, feed.Feed, true
	}
}

// ssePing keeps idle event streams open through proxies.
const ssePing = 15 * time.Second

// serveLive streams the hub's messages to one page as server-sent events.
func (s *Server) serveLive(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "console: streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch, done := s.hub.subscribe()
	defer done()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n\n")
	fl.Flush()
	ping := time.NewTicker(ssePing)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
		case m := <-ch:
			b, _ := json.Marshal(m) // a struct of strings and a bool always encodes
			fmt.Fprintf(w, "event: change\ndata: %s\n\n", b)
		}
		fl.Flush()
	}
}
