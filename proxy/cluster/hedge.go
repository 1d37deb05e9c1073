package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"go.uber.org/zap"
)

// Heartbeat rules, in one place. A heartbeat has a budget: its context's
// deadline, which the sidecar sets to one heartbeat interval (Timeout when
// the context has none). The lease of a healthy worker depends on one
// heartbeat getting through to the leader well before the sidecar's local
// deadline, whatever is wrong with the member it happens to talk to, so
// within the budget:
//
//   - the first attempt goes to the member that answered last (or the
//     leader an answer named);
//   - an attempt may take at most HeartbeatAttemptShare of the budget
//     (default ½): a paused or cut-off member costs that much, not the
//     cluster timeout;
//   - an attempt not answered after HeartbeatHedgeShare of the budget
//     (default ¼) is hedged: the next member is asked too, and the first
//     answer wins — and so on every such share while members remain;
//   - any failure that is not a final answer — refused connection,
//     timeout, 503 "no leader", a deposed leader's not-leader, 502/504 —
//     makes the next member be tried at once (after a full round of
//     failures, with the client's backoff);
//   - a final answer (session not found — which the cluster gives only
//     from a verified leader — or a bad request) ends the heartbeat;
//     attempts still in flight are abandoned and their replies dropped;
//   - at most one attempt per member is in flight.
//
// Repeating a heartbeat is safe: it renews from its arrival, so a second
// arrival only extends the cluster's view, never the sidecar's. The sidecar
// counts validity from the send time it took before calling, which is no
// later than the send of whichever attempt answered — I4's deadline (send
// + validFor − margin) stays conservative. The member that answered (or
// the leader it named) is where the next call starts.

// hbResult is one heartbeat attempt's outcome.
type hbResult struct {
	idx int
	res attemptResult
	out *api.HeartbeatResponse
}

// heartbeat runs one logical heartbeat under the rules above.
func (c *Client) heartbeat(ctx context.Context, r request, rid string, body []byte) (api.HeartbeatResponse, error) {
	start := time.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = start.Add(c.cfg.Timeout)
	}
	budget := deadline.Sub(start)
	if err := ctx.Err(); err != nil || budget <= 0 {
		return api.HeartbeatResponse{}, fmt.Errorf("cluster: %s %s not sent: %w", r.method, r.path,
			errors.Join(ctx.Err(), context.DeadlineExceeded))
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	perAttempt := time.Duration(float64(budget) * c.cfg.HeartbeatAttemptShare)
	hedgeAfter := time.Duration(float64(budget) * c.cfg.HeartbeatHedgeShare)

	n := len(c.endpoints)
	first := int(c.current.Load())
	results := make(chan hbResult)
	done := make(chan struct{})
	defer close(done)
	inflight := make([]bool, n)
	inflightN, launched := 0, 0
	launch := func() {
		for range n {
			idx := (first + launched) % n
			launched++
			if inflight[idx] {
				continue
			}
			inflight[idx] = true
			inflightN++
			go func() {
				out := new(api.HeartbeatResponse)
				rr := r
				rr.out = out
				res := c.heartbeatAttempt(ctx, idx, rr, rid, body, time.Now().Add(perAttempt))
				select {
				case results <- hbResult{idx: idx, res: res, out: out}:
				case <-done:
				}
			}()
			return
		}
	}

	var (
		failures []string
		unknown  bool
		fails    int
	)
	next := time.NewTimer(0) // fires when the next attempt is due
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return api.HeartbeatResponse{}, c.heartbeatGaveUp(r, failures, unknown, ctx.Err())
		case <-next.C:
			launch()
			next.Reset(hedgeAfter)
		case hr := <-results:
			inflight[hr.idx] = false
			inflightN--
			res := hr.res
			// Only the cluster's success or final problem ends the
			// heartbeat; every transport failure moves on (transportResult
			// does not retry a modeOnce call on its own).
			var e *Error
			if res.err == nil || (errors.As(res.err, &e) && !e.retryable()) {
				c.current.Store(int32(c.endpointIndex(res.leader, hr.idx)))
				if res.err != nil {
					return api.HeartbeatResponse{}, res.err
				}
				return *hr.out, nil
			}
			fails++
			unknown = unknown || res.unknown
			failures = append(failures, res.err.Error())
			if ce := c.log.Check(zap.DebugLevel, "heartbeat attempt failed, trying the next member"); ce != nil {
				ce.Write(zap.String("rid", rid), zap.Int("attempt", fails), zap.Error(res.err))
			}
			// The next member at once; after a whole round of failures,
			// back off so an electing cluster is not hammered.
			wait := time.Duration(0)
			if fails%n == 0 {
				wait = c.backoff(fails/n - 1)
			}
			if inflightN > 0 && wait == 0 {
				launch()
				continue
			}
			if !next.Stop() {
				select {
				case <-next.C:
				default:
				}
			}
			next.Reset(wait)
		}
	}
}

// heartbeatGaveUp builds the error of a heartbeat whose budget ended: it
// names every failed attempt, and matches ErrTimeout when one may have
// been applied (else ErrUnavailable, or only the context's error when no
// attempt had ended yet).
func (c *Client) heartbeatGaveUp(r request, failures []string, unknown bool, ctxErr error) error {
	if len(failures) == 0 {
		return fmt.Errorf("%w: %w: %s %s: no member answered within the heartbeat's budget", ctxErr, ErrTimeout, r.method, r.path)
	}
	sentinel := ErrUnavailable
	if unknown {
		sentinel = ErrTimeout
	}
	return fmt.Errorf("%w: %w: %s %s: %d attempts failed: %s", ctxErr, sentinel, r.method, r.path,
		len(failures), strings.Join(failures, "; "))
}
