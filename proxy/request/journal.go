package request

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
	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/reply"
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
// needs. New uses it only when Settings.JournalRules has rules.
type Journal interface {
	Intent(ctx context.Context, taskID string, req api.IntentRequest) (api.IntentResponse, error)
	Outcome(ctx context.Context, taskID, key string, req api.OutcomeRequest) (lease.Effect, error)
}

// HeaderJournalTruncated is set in a recorded outcome whose body exceeded
// MaxJournalBody and was not recorded.
const HeaderJournalTruncated = "Fencepost-Journal-Truncated"

// journaled reports whether a write matches a journal rule.
func (p *Pipeline) journaled(method string, t target) bool {
	for _, r := range p.journalRules {
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
func (x *exchange) forwardJournaled() {
	p, ctx, req := x.p, x.ctx, x.req
	key := string(req.Header.Peek(fence.HeaderIdempotencyKey))
	sum := sha256.Sum256(req.Body())
	url := string(req.URI().Scheme()) + "://" + x.tgt.hostPort + string(req.URI().RequestURI())
	cctx, cancel := context.WithTimeout(context.Background(), p.cfg.ClusterTimeout)
	res, err := p.journal.Intent(cctx, x.lease.TaskID, api.IntentRequest{
		SessionID: p.keeper.SessionFor(x.lease.TaskID), Epoch: x.lease.Epoch, Key: key, Method: string(ctx.Method()), URL: url,
		BodyDigest: hex.EncodeToString(sum[:]), DeadlineMs: p.cfg.UpstreamTimeout.Milliseconds(),
	})
	cancel()
	if err != nil {
		x.intentFailed(err)
		return
	}
	if res.Replay {
		x.span.Decision(fenceotel.DecisionReplayed)
		p.metrics.requests.WithLabelValues(DecisionReplayed).Inc()
		replayEffect(ctx, &res.Effect)
		return
	}
	// The intent committed under the epoch; the local deadline may still
	// have passed meanwhile. Not sending now leaves the intent in doubt for
	// the next owner, which is the honest record.
	if l, why := p.keeper.Recheck(x.lease); why != "" {
		x.refuse(p.Blocked(why, l, x.task, true))
		return
	}
	client, err := p.up.client(true, x.lease.Ticket)
	if err != nil {
		x.upstreamFailed(err, stageRequest)
		return
	}
	x.resp = fasthttp.AcquireResponse()
	resp := x.resp
	start := time.Now()
	if err := client.Do(req, resp); err != nil {
		x.upstreamFailed(err, stageRequest)
		return
	}
	body, truncated, err := readBounded(resp, p.cfg.MaxJournalBody)
	if err != nil {
		x.upstreamFailed(err, stageRequest)
		return
	}
	p.metrics.upstreamWrite.Observe(time.Since(start).Seconds())
	p.metrics.forwarded.Inc()
	x.span.Decision(fenceotel.DecisionForwarded)
	x.logForwarded(resp.StatusCode())
	x.markProgress()
	out := api.OutcomeRequest{Epoch: x.lease.Epoch, Status: resp.StatusCode(), Header: map[string][]string{}}
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
	cctx, cancel = context.WithTimeout(context.Background(), p.cfg.ClusterTimeout)
	if _, err := p.journal.Outcome(cctx, x.lease.TaskID, key, out); err != nil {
		// The call happened; the worker gets its response. The missing
		// outcome leaves the intent in doubt, which the next owner sees.
		p.log.Warn("journal outcome not recorded", x.span.LogFields(zap.String("task", x.lease.TaskID), zap.Error(err))...)
	}
	cancel()
	writeUpstream(ctx, resp)
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

// intentFailed answers a write whose intent could not be recorded; it is
// never sent (fail closed).
func (x *exchange) intentFailed(err error) {
	p := x.p
	switch {
	case p.keeper.LostByCluster(x.lease.TaskID, x.lease.Epoch, err):
		x.refuse(p.Blocked(leases.ReasonLost, x.lease, x.task, true))
	case errors.Is(err, lease.ErrPayloadMismatch):
		p.metrics.requests.WithLabelValues(DecisionRejected).Inc()
		reply.Problem(x.ctx, fasthttp.StatusUnprocessableEntity, reply.CodeWriteAlreadyPerformed, titleAlreadyPerformed,
			"the effect journal holds this Idempotency-Key with a different body: "+alreadyPerformed(x), x.lease.Epoch)
	case errors.Is(err, lease.ErrInDoubt):
		x.refuse(&reply.Reply{Status: fasthttp.StatusConflict, Code: reply.CodeEffectInDoubt, Title: "effect in doubt",
			Detail: "an earlier attempt with this Idempotency-Key has no recorded outcome; check the downstream before retrying", Epoch: x.lease.Epoch})
	default:
		x.refuse(&reply.Reply{Status: fasthttp.StatusServiceUnavailable, Code: reply.CodeJournalUnavailable, Title: "journal unavailable",
			Detail: fmt.Sprintf("the intent could not be recorded, so the write was not sent: %v", err), Epoch: x.lease.Epoch})
	}
}
