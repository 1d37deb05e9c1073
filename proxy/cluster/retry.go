package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// Retry rules, in one place:
//
//   - A final answer (any 2xx, and any problem but unavailable, timeout and
//     unknown_outcome) is never retried: a 409 stays a 409.
//   - A dial failure means the request was never sent: every call, even a
//     heartbeat, may move on to the next endpoint.
//   - 503 unavailable means the cluster did not apply the call (no leader,
//     leader unreachable from the follower): retried on the next endpoint.
//   - A timeout, a connection lost mid-request, 504 timeout and 502
//     unknown_outcome leave the outcome unknown. Reads are retried; so are
//     mutations, and only because every mutation carries one request id on
//     all its attempts and the cluster applies a request id once (join and
//     remove are idempotent by nature). If a call gives up after such an
//     attempt, its error matches ErrTimeout, never only ErrUnavailable.
//   - Heartbeats follow hedge.go; a watch is retried only on dial
//     failures; health probes never.
//
// Attempts go round the endpoints starting from the last one that answered
// (or the leader it named, when that is a configured endpoint); each
// attempt has at most AttemptTimeout. After each full round without
// success the client sleeps a jittered, doubling backoff. It stops when the
// context ends (CallTimeout when the context has no deadline), after
// Config.Retries extra attempts, or — failing fast — as soon as a full
// round of members ended without any member answering at all (every
// attempt refused, unreachable or timed out): then the error matches
// ErrUnavailable (or ErrTimeout when an attempt may have been applied) and
// names each member's failure. A round in which some member answered (503
// "no leader" during an election, say) is retried. So a call that no
// member answers fails within members × AttemptTimeout (3 s for three
// members at the default), and one the cluster is electing a leader for
// is retried until its budget ends.

// transportResult classifies a fasthttp error of one attempt.
func transportResult(base string, r request, err error) attemptResult {
	if neverSent(err) {
		return attemptResult{err: fmt.Errorf("%w: %s: %v", ErrUnavailable, base, err), dialFailed: true, retry: true}
	}
	return attemptResult{
		err:     fmt.Errorf("%w: %s %s to %s: %v", ErrTimeout, r.method, r.path, base, err),
		retry:   r.mode == modeRetry,
		unknown: true,
	}
}

// neverSent reports whether err happened before the request could have
// left the client: the connection could not be made, or no pooled
// connection became free.
func neverSent(err error) bool {
	if errors.Is(err, fasthttp.ErrDialTimeout) || errors.Is(err, fasthttp.ErrNoFreeConns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// retryLoop runs attempts until one gives a final answer or the budget ends.
func (c *Client) retryLoop(ctx context.Context, r request, rid string, body []byte) error {
	n := len(c.endpoints)
	start := int(c.current.Load())
	var last attemptResult
	unknown, answered := false, false
	var silent []string // this round's failures when no member answered
	for attempts := 1; ; attempts++ {
		idx := (start + attempts - 1) % n
		res := c.attempt(ctx, c.endpoints[idx], r, rid, body)
		if res.skipped {
			if attempts == 1 {
				return res.err
			}
			// The deadline may have passed a moment before ctx noticed.
			return giveUp(r, attempts-1, last, unknown, cmp.Or(ctx.Err(), context.DeadlineExceeded))
		}
		if res.err == nil || !res.retry {
			var e *Error
			if res.err == nil || errors.As(res.err, &e) {
				// This member answered: start there next time, or at the
				// leader it forwarded to when that is one of ours.
				c.current.Store(int32(c.endpointIndex(res.leader, idx)))
			}
			return res.err
		}
		last = res
		unknown = unknown || res.unknown
		var pe *Error
		if errors.As(res.err, &pe) {
			answered = true
		} else {
			silent = append(silent, res.err.Error())
		}
		if ce := c.log.Check(zap.DebugLevel, "cluster call failed, may retry"); ce != nil {
			ce.Write(zap.String("rid", rid), zap.String("method", r.method), zap.String("path", r.path),
				zap.Int("attempt", attempts), zap.Error(res.err))
		}
		switch {
		case r.mode == modeOnce && (!res.dialFailed || attempts >= n):
			return res.err
		case c.cfg.Retries < 0, c.cfg.Retries > 0 && attempts > c.cfg.Retries:
			return giveUp(r, attempts, last, unknown, nil)
		}
		if attempts%n == 0 {
			if !answered && r.mode == modeRetry {
				return noAnswer(r, silent, unknown)
			}
			answered, silent = false, silent[:0]
			if err := sleep(ctx, c.backoff(attempts/n-1)); err != nil {
				return giveUp(r, attempts, last, unknown, err)
			}
		}
		if err := ctx.Err(); err != nil {
			return giveUp(r, attempts, last, unknown, err)
		}
	}
}

// endpointIndex returns the index of the endpoint with base URL base, or
// fallback when base is empty or not configured: the client only ever
// talks to the members it was given.
func (c *Client) endpointIndex(base string, fallback int) int {
	if base == "" {
		return fallback
	}
	for i, ep := range c.endpoints {
		if ep == base {
			return i
		}
	}
	return fallback
}

// giveUp builds the error of a call that ran out of attempts or time. When
// any attempt's outcome was unknown the error matches ErrTimeout: a later
// 503 does not prove the earlier attempt was not applied.
func giveUp(r request, attempts int, last attemptResult, unknown bool, ctxErr error) error {
	err := fmt.Errorf("cluster: %s %s: gave up after %d attempts: %w", r.method, r.path, attempts, last.err)
	if unknown && !last.unknown {
		err = fmt.Errorf("%w (an earlier attempt's outcome is unknown): %w", ErrTimeout, err)
	}
	if ctxErr != nil {
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	return err
}

// noAnswer is the error of a call that a whole round of members left
// without any answer: it names each member's failure, and matches
// ErrTimeout when an attempt may have been applied, else ErrUnavailable.
func noAnswer(r request, failures []string, unknown bool) error {
	sentinel := ErrUnavailable
	if unknown {
		sentinel = ErrTimeout
	}
	return fmt.Errorf("%w: %s %s: no member answered (%d tried): %s", sentinel, r.method, r.path,
		len(failures), strings.Join(failures, "; "))
}

// backoff returns the pause after round (0-based) failed rounds: Backoff
// doubling up to MaxBackoff, jittered to [½, 1] of that so clients that
// failed together do not come back together.
func (c *Client) backoff(round int) time.Duration {
	d := c.cfg.Backoff
	for i := 0; i < round && d < c.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.cfg.MaxBackoff)
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
