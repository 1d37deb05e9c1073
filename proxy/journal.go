package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// JournalRule marks writes whose effect is journaled in the cluster
// (DESIGN.md 5). An empty field matches anything; a path matches when
// either its raw or its normalised form has the prefix.
type JournalRule struct {
	Host       string
	PathPrefix string
	Methods    []string
}

// Journal is the optional part of the cluster client the effect journal
// needs. New requires it only when Config.Journal has rules.
type Journal interface {
	Intent(ctx context.Context, taskID string, req api.IntentRequest) (api.IntentResponse, error)
	Outcome(ctx context.Context, taskID, key string, req api.OutcomeRequest) (lease.Effect, error)
}

// HeaderJournalTruncated is set in a recorded outcome whose body exceeded
// MaxJournalBody and was not recorded.
const HeaderJournalTruncated = "Fencepost-Journal-Truncated"

// journaled reports whether a write matches a journal rule.
func (s *Sidecar) journaled(method string, t target) bool {
	for _, r := range s.journalRules {
		if r.matches(method, t) {
			return true
		}
	}
	return false
}

// forwardJournaled sends a journaled write: the intent is recorded first
// (which is also a linearizable "is my lease still current?" check), a
// key already done is answered from the journal without calling
// upstream, and the outcome is recorded after the call. The response is
// buffered (bounded by MaxJournalBody for the record) so it can be
// recorded whole.
func (s *Sidecar) forwardJournaled(ctx *fasthttp.RequestCtx, req *fasthttp.Request, d *decision) {
	defer fasthttp.ReleaseRequest(req)
	key := string(req.Header.Peek(fence.HeaderIdempotencyKey))
	sum := sha256.Sum256(req.Body())
	url := string(req.URI().Scheme()) + "://" + d.tgt.hostPort + string(req.URI().RequestURI())
	cctx, cancel := context.WithTimeout(context.Background(), s.cfg.ClusterTimeout)
	res, err := s.journal.Intent(cctx, d.lease.TaskID, api.IntentRequest{
		SessionID: s.sessionID(), Epoch: d.lease.Epoch, Key: key, Method: string(ctx.Method()), URL: url,
		BodyDigest: hex.EncodeToString(sum[:]), DeadlineMs: s.cfg.UpstreamTimeout.Milliseconds(),
	})
	cancel()
	if err != nil {
		s.intentFailed(ctx, d, err)
		return
	}
	if res.Replay {
		s.metrics.requests.WithLabelValues(decisionReplayed).Inc()
		replayEffect(ctx, &res.Effect)
		return
	}
	// The intent committed under the epoch; the local deadline may still
	// have passed meanwhile. Not sending now leaves the intent in doubt for
	// the next owner, which is the honest record.
	if l, why := s.leases.current(d.lease.TaskID, s.clock.Now()); why != "" || l.Epoch != d.lease.Epoch {
		if why == "" {
			why = reasonLost
		}
		s.refuse(ctx, blockedReply(why, l, d.task, true))
		return
	}
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	start := time.Now()
	if err := s.up.writeClient(d.lease.gen).Do(req, resp); err != nil {
		s.upstreamFailed(ctx, d, err)
		return
	}
	body, truncated, err := readBounded(resp, s.cfg.MaxJournalBody)
	if err != nil {
		s.upstreamFailed(ctx, d, err)
		return
	}
	s.metrics.upstreamWrite.Observe(time.Since(start).Seconds())
	s.metrics.forwarded.Inc()
	out := api.OutcomeRequest{Epoch: d.lease.Epoch, Status: resp.StatusCode(), Header: map[string][]string{}}
	for k, v := range resp.Header.All() {
		if !isHopByHop(k) && !strings.EqualFold(string(k), "Content-Length") {
			out.Header[string(k)] = append(out.Header[string(k)], string(v))
		}
	}
	if truncated {
		out.Header[HeaderJournalTruncated] = []string{"true"}
	} else {
		out.Body = body
	}
	cctx, cancel = context.WithTimeout(context.Background(), s.cfg.ClusterTimeout)
	if _, err := s.journal.Outcome(cctx, d.lease.TaskID, key, out); err != nil {
		// The call happened; the worker gets its response. The missing
		// outcome leaves the intent in doubt, which the next owner sees.
		s.log.Warn("journal outcome not recorded", zap.String("task", d.lease.TaskID), zap.Error(err))
	}
	cancel()
	ctx.Response.Header.DisableNormalizing()
	ctx.Response.Header.SetNoDefaultContentType(true)
	ctx.SetStatusCode(resp.StatusCode())
	copyResponseHeaders(&ctx.Response.Header, &resp.Header)
	ctx.SetBody(body)
}

// readBounded reads a response body whole, up to limit bytes kept; the
// rest is read and dropped so the connection stays usable.
func readBounded(resp *fasthttp.Response, limit int64) ([]byte, bool, error) {
	bs := resp.BodyStream()
	if bs == nil {
		b := resp.Body()
		return append([]byte(nil), b...), int64(len(b)) > limit, nil
	}
	defer resp.CloseBodyStream() //nolint:errcheck // closing after a full read cannot lose data
	b, err := io.ReadAll(io.LimitReader(bs, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > limit {
		// Too large to record: relay it anyway, record without the body.
		rest, err := io.ReadAll(bs)
		return append(b, rest...), true, err
	}
	return b, false, nil
}

// replayEffect answers from a recorded outcome.
func replayEffect(ctx *fasthttp.RequestCtx, e *lease.Effect) {
	ctx.Response.Header.DisableNormalizing()
	ctx.Response.Header.SetNoDefaultContentType(true)
	ctx.SetStatusCode(e.Status)
	for k, vs := range e.Header {
		for _, v := range vs {
			ctx.Response.Header.Add(k, v)
		}
	}
	ctx.Response.Header.Set(fence.HeaderReplayed, "true")
	ctx.SetBody(e.Body)
}

// intentFailed answers a write whose intent could not be recorded; it is
// never sent (fail closed).
func (s *Sidecar) intentFailed(ctx *fasthttp.RequestCtx, d *decision, err error) {
	switch {
	case errors.Is(err, lease.ErrStaleEpoch), errors.Is(err, lease.ErrNotHolder), errors.Is(err, lease.ErrLeaseNotActive):
		s.dropLease(d.lease.TaskID, d.lease.Epoch, reasonLost, EventLost, err.Error())
		s.refuse(ctx, blockedReply(reasonLost, d.lease, d.task, true))
	case errors.Is(err, lease.ErrPayloadMismatch):
		s.metrics.requests.WithLabelValues(decisionRejected).Inc()
		writeProblem(ctx, fasthttp.StatusUnprocessableEntity, CodeWriteAlreadyPerformed, titleAlreadyPerformed,
			"the effect journal holds this Idempotency-Key with a different body: "+alreadyPerformed(d), d.lease.Epoch)
	case errors.Is(err, lease.ErrInDoubt):
		s.metrics.requests.WithLabelValues(decisionRejected).Inc()
		writeProblem(ctx, fasthttp.StatusConflict, CodeEffectInDoubt, "effect in doubt",
			"an earlier attempt with this Idempotency-Key has no recorded outcome; check the downstream before retrying", d.lease.Epoch)
	default:
		s.metrics.requests.WithLabelValues(decisionRejected).Inc()
		writeProblem(ctx, fasthttp.StatusServiceUnavailable, CodeJournalUnavailable, "journal unavailable",
			fmt.Sprintf("the intent could not be recorded, so the write was not sent: %v", err), d.lease.Epoch)
	}
}
