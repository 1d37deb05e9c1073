package proxy

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/request"
)

// journalCluster adds an in-memory effect journal to the fake cluster.
type journalCluster struct {
	*fakeCluster
	jmu     sync.Mutex
	effects map[string]*lease.Effect
	intents []api.IntentRequest
}

func (j *journalCluster) Intent(_ context.Context, taskID string, req api.IntentRequest) (api.IntentResponse, error) {
	j.fakeCluster.Mu.Lock()
	err := j.fakeCluster.Current(taskID, req.SessionID, req.Epoch)
	j.fakeCluster.Mu.Unlock()
	if err != nil {
		return api.IntentResponse{}, err
	}
	j.jmu.Lock()
	defer j.jmu.Unlock()
	j.intents = append(j.intents, req)
	if e := j.effects[req.Key]; e != nil {
		if e.BodyDigest != "" && req.BodyDigest != e.BodyDigest { // as lease.Model does
			return api.IntentResponse{}, lease.ErrPayloadMismatch
		}
		if e.State == lease.EffectDone {
			return api.IntentResponse{Effect: *e, Replay: true}, nil
		}
		return api.IntentResponse{}, lease.ErrInDoubt
	}
	j.effects[req.Key] = &lease.Effect{Key: req.Key, Epoch: req.Epoch, Method: req.Method, URL: req.URL, BodyDigest: req.BodyDigest, State: lease.EffectIntent}
	return api.IntentResponse{Effect: *j.effects[req.Key]}, nil
}

func (j *journalCluster) Outcome(_ context.Context, _ string, key string, req api.OutcomeRequest) (lease.Effect, error) {
	j.jmu.Lock()
	defer j.jmu.Unlock()
	e := j.effects[key]
	e.State, e.Status, e.Header, e.Body = lease.EffectDone, req.Status, req.Header, req.Body
	return *e, nil
}

func TestJournaledWriteReplayedForNewOwner(t *testing.T) {
	calls := 0
	var mu sync.Mutex
	up := startUpstream(t, func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		calls++
		mu.Unlock()
		ctx.SetStatusCode(201)
		ctx.Response.Header.Set("X-Charge-Id", "ch_1")
		ctx.SetBodyString(`{"charged":true}`)
	})
	jc := &journalCluster{fakeCluster: newFakeCluster(), effects: map[string]*lease.Effect{}}
	cfg := baseConfig(t)
	cfg.Journal = []JournalRule{{PathPrefix: "/charge"}}
	a := startSidecar(t, jc, cfg)
	mustAcquire(t, a, "pay")
	url := "http://" + up.addr() + "/charge"
	hdr := map[string][]string{HeaderActionID: {"charge-order-9"}}
	resp, body := doReq(t, proxyClient(t, a, ""), "POST", url, `{"amount":5}`, hdr)
	require.Equal(t, 201, resp.StatusCode, body)
	require.Equal(t, `{"charged":true}`, body)
	require.Len(t, jc.intents, 1)
	require.Equal(t, uint64(101), jc.intents[0].Epoch)
	require.Equal(t, "POST", jc.intents[0].Method)
	require.NotEmpty(t, jc.intents[0].BodyDigest)

	// A non-journaled route is not journaled.
	resp, _ = doReq(t, proxyClient(t, a, ""), "POST", "http://"+up.addr()+"/other", "x", nil)
	require.Equal(t, 201, resp.StatusCode)
	require.Len(t, jc.intents, 1)

	// The lease moves to a new owner, who repeats the action: the
	// recorded response comes back and the upstream is not called again.
	jc.fakeCluster.Mu.Lock()
	delete(jc.fakeCluster.Leases, "pay")
	jc.fakeCluster.Mu.Unlock()
	a.keeper.Drop("pay", 0, leases.ReasonLost, EventLost, "test")
	cfg.Registerer = prometheus.NewRegistry()
	b := startSidecar(t, jc, cfg)
	mustAcquire(t, b, "pay")
	resp, body = doReq(t, proxyClient(t, b, ""), "POST", url, `{"amount":5}`, hdr)
	require.Equal(t, 201, resp.StatusCode, body)
	require.Equal(t, `{"charged":true}`, body)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	require.Equal(t, "ch_1", resp.Header.Get("X-Charge-Id"))
	mu.Lock()
	require.Equal(t, 2, calls, "the charge ran once; the other call was /other")
	mu.Unlock()

	// The same key with another body (amount=7): not a replay of the
	// recorded 201, but the 422 a fence downstream gives, and no call.
	resp, body = doReq(t, proxyClient(t, b, ""), "POST", url, `{"amount":7}`, hdr)
	require.Equal(t, 422, resp.StatusCode, body)
	require.Equal(t, "false", resp.Header.Get(HeaderShouldRetry))
	p := problemOf(t, body)
	require.Equal(t, api.ProblemTypeBase+CodeWriteAlreadyPerformed, p.Type)
	require.Contains(t, p.Detail, HeaderActionID)
	mu.Lock()
	require.Equal(t, 2, calls)
	mu.Unlock()

	// An intent without outcome is in doubt: refused, not re-sent.
	jc.jmu.Lock()
	jc.effects[request.ActionKey("pay", "refund-1")] = &lease.Effect{State: lease.EffectIntent}
	jc.jmu.Unlock()
	resp, body = doReq(t, proxyClient(t, b, ""), "POST", url, `{}`, map[string][]string{HeaderActionID: {"refund-1"}})
	require.Equal(t, 409, resp.StatusCode)
	require.Equal(t, api.ProblemTypeBase+CodeEffectInDoubt, problemOf(t, body).Type)
}

func TestJournalNeedsJournalClient(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Journal = []JournalRule{{PathPrefix: "/x"}}
	_, err := New(cfg, newFakeCluster())
	require.ErrorIs(t, err, ErrInvalidConfig)
}
