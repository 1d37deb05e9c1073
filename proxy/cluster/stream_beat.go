package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fencepost/fencepost/fence/api"
)

// heartbeatAttempt is one attempt of a heartbeat (hedge.go) to member idx,
// on its stream or, for TransportUnary and members without the route, as
// a unary request; deadline bounds it either way.
func (c *Client) heartbeatAttempt(ctx context.Context, idx int, r request, rid string, body []byte, deadline time.Time) attemptResult {
	if c.cfg.HeartbeatTransport == TransportUnary {
		return c.attemptUntil(ctx, c.endpoints[idx], r, rid, body, deadline)
	}
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := ctx.Err(); err != nil || !time.Now().Before(deadline) {
		if err == nil {
			err = context.DeadlineExceeded
		}
		return attemptResult{err: fmt.Errorf("cluster: %s %s not sent: %w", r.method, r.path, err), skipped: true}
	}
	sc, unary, res := c.streamFor(ctx, idx, deadline)
	if unary {
		return c.attemptUntil(ctx, c.endpoints[idx], r, rid, body, deadline)
	}
	if sc == nil {
		return res
	}
	return c.streamBeat(ctx, idx, sc, r, body, deadline)
}

// streamBeat sends one beat on sc and waits for its reply until deadline.
// A beat without a reply by then breaks the stream, as a timed-out request
// closes its connection: the next attempt to the member dials afresh.
func (c *Client) streamBeat(ctx context.Context, idx int, sc *streamConn, r request, body []byte, deadline time.Time) attemptResult {
	base := c.endpoints[idx]
	ch := make(chan api.Reply, 1)
	sc.mu.Lock()
	if sc.err != nil {
		err := sc.err
		sc.mu.Unlock()
		return attemptResult{err: fmt.Errorf("%w: %s: heartbeat stream broken: %v", ErrUnavailable, base, err), dialFailed: true, retry: true}
	}
	sc.nextID++
	id := sc.nextID
	sc.pending[id] = ch
	sc.mu.Unlock()
	forget := func() {
		sc.mu.Lock()
		delete(sc.pending, id)
		sc.mu.Unlock()
	}
	lost := func(why error) attemptResult {
		// The beat may have arrived: a heartbeat is safe to repeat.
		return attemptResult{err: fmt.Errorf("%w: %s %s on the stream to %s: %v", ErrTimeout, r.method, r.path, base, why),
			retry: true, unknown: true}
	}

	frame := api.AppendBeat(make([]byte, 0, api.StreamFrameHeader+10+len(r.sid)+len(body)), id, r.sid, body)
	sc.wmu.Lock()
	_ = sc.conn.SetWriteDeadline(deadline)
	_, err := sc.bw.Write(frame)
	if err == nil {
		err = sc.bw.Flush()
	}
	sc.wmu.Unlock()
	if err != nil {
		forget()
		c.breakStream(idx, sc, err)
		return lost(err)
	}

	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case rep := <-ch:
		return c.streamResult(base, r, rep)
	case <-sc.done:
		forget()
		sc.mu.Lock()
		err := sc.err
		sc.mu.Unlock()
		return lost(fmt.Errorf("stream broke: %w", err))
	case <-ctx.Done():
		// The heartbeat ended (answered elsewhere, or out of budget);
		// the stream stays for the next one.
		forget()
		return lost(ctx.Err())
	case <-t.C:
		forget()
		c.breakStream(idx, sc, fmt.Errorf("no reply to beat %d by the attempt's deadline", id))
		return lost(context.DeadlineExceeded)
	}
}

// streamResult turns a reply frame into the attempt's result, as
// attemptUntil does for a unary answer.
func (c *Client) streamResult(base string, r request, rep api.Reply) attemptResult {
	var leader string
	if len(rep.Leader) > 0 {
		leader, _ = normalizeEndpoint(string(rep.Leader), c.cfg.TLS != nil)
	}
	if rep.Status >= 200 && rep.Status < 300 {
		if r.out != nil {
			if err := decodeOut(rep.Body, r.out); err != nil {
				return attemptResult{err: fmt.Errorf("%w: %s %s from %s: %v", ErrBadResponse, r.method, r.path, base, err)}
			}
		}
		return attemptResult{leader: leader}
	}
	e := &Error{Status: rep.Status, Endpoint: base, Problem: decodeProblemParts(rep.Status, []byte(api.ProblemContentType), rep.Body)}
	return attemptResult{err: e, retry: e.retryable(), unknown: e.Is(ErrTimeout), leader: leader}
}

// decodeOut decodes a 2xx answer into out. A heartbeat's reply, the
// answer a sidecar reads most often, takes the hand parser when it is
// the plain shape the cluster sends (api.ParseHeartbeatResponse, which
// reads nothing differently from encoding/json); everything else, and
// any other shape, goes through encoding/json.
func decodeOut(body []byte, out any) error {
	if hb, ok := out.(*api.HeartbeatResponse); ok {
		if r, ok := api.ParseHeartbeatResponse(body); ok {
			*hb = r
			return nil
		}
	}
	return json.Unmarshal(body, out)
}
