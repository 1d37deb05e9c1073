package refsvc

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/fasthttpfence"
	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/fence/fenceotel/fasthttptrace"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// MaxRefused is how many refused writes the service remembers, newest
// kept: unlike accepted writes they were never acknowledged, so
// forgetting the oldest loses nothing a caller relies on.
const MaxRefused = 1000

// Refusal is one write the fence refused: what an operator needs to find
// the call (its task, epoch, key and the caller's trace) and why.
type Refusal struct {
	// Task is X-Fencing-Task ("" when the write was refused before it was read).
	Task string `json:"task,omitempty"`
	// Epoch is the write's fencing token (0 when missing or unparsable).
	Epoch uint64 `json:"epoch,omitempty"`
	// MaxSeenEpoch is the task's highest epoch on a stale-token refusal.
	MaxSeenEpoch uint64 `json:"max_seen_epoch,omitempty"`
	// Holder is X-Fencing-Holder, if sent.
	Holder string `json:"holder,omitempty"`
	// IdempotencyKey is the write's Idempotency-Key, if sent.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Type is the problem type (fence.Problem*), Status its HTTP status.
	Type   string `json:"type"`
	Status int    `json:"status"`
	// TraceID is the W3C trace id of the call (from its traceparent, or
	// the service's own span when tracing is on); "" when untraced.
	TraceID string `json:"trace_id,omitempty"`
	// At is when the write was refused.
	At time.Time `json:"at"`
}

// refusals is a ring of the newest MaxRefused refusals.
type refusals struct {
	mu      sync.Mutex
	ring    []Refusal
	next    int // where the next one goes once the ring is full
	dropped uint64
}

func (r *refusals) add(e Refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ring) < MaxRefused {
		r.ring = append(r.ring, e)
		return
	}
	r.ring[r.next] = e
	r.next = (r.next + 1) % MaxRefused
	r.dropped++
}

// list returns the kept refusals, oldest first, and how many were forgotten.
func (r *refusals) list() ([]Refusal, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Refusal, 0, len(r.ring))
	out = append(out, r.ring[r.next:]...)
	return append(out, r.ring[:r.next]...), r.dropped
}

// Refused returns the writes the fence refused, oldest first (at most
// MaxRefused), and how many older ones were forgotten.
func (s *Server) Refused() ([]Refusal, uint64) { return s.refused.list() }

// fencedRoute runs a write under the caller's trace: a server span when
// tracing is on, else just the incoming traceparent, so a refusal can
// name the trace either way.
func (s *Server) fencedRoute(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(rc *fasthttp.RequestCtx) {
		if s.tracer == nil {
			if tp := rc.Request.Header.Peek("traceparent"); len(tp) > 0 {
				carrier := propagation.MapCarrier{"traceparent": string(tp)}
				fasthttpfence.SetContext(rc, propagation.TraceContext{}.Extract(context.Background(), carrier))
			}
			next(rc)
			return
		}
		ctx, span := fasthttptrace.StartServer(context.Background(), s.tracer, rc, writeRoute)
		fasthttpfence.SetContext(rc, ctx)
		next(rc)
		fasthttptrace.EndServer(span, rc)
	}
}

// annotate is the validator's Annotate hook: it records the verdict on
// the span (when tracing) and remembers every refusal.
func (s *Server) annotate(ctx context.Context, d fence.Decision) {
	if s.tracer != nil {
		fenceotel.Annotate(ctx, d)
	}
	if d.Problem == nil {
		return
	}
	e := Refusal{Task: d.Write.Key.Task, Epoch: d.Write.Epoch, Holder: d.Write.Holder, IdempotencyKey: d.Write.IdempotencyKey,
		Type: d.Problem.Type, Status: d.Problem.Status, At: time.Now().UTC()}
	if d.Problem.MaxSeenEpoch != "" {
		e.MaxSeenEpoch, _ = strconv.ParseUint(d.Problem.MaxSeenEpoch, 10, 64)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		e.TraceID = sc.TraceID().String()
	}
	s.refused.add(e)
}
