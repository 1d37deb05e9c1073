package proxy

import (
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencepost/fencepost/fence/fenceotel"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/request"
)

// requestSpans returns the sidecar's request spans, in the order they
// ended, as attribute maps.
func requestSpans(exp *tracetest.InMemoryExporter) []map[string]string {
	var out []map[string]string
	for _, s := range exp.GetSpans() {
		if s.SpanKind != trace.SpanKindClient {
			continue
		}
		a := map[string]string{}
		for _, kv := range s.Attributes {
			a[string(kv.Key)] = kv.Value.String()
		}
		out = append(out, a)
	}
	return out
}

// A journaled write's span says what the journal decided: forwarded the
// first time, replayed for the same key, in_doubt for an intent without
// outcome — and the last two made no upstream call.
func TestJournalDecisionsOnTheRequestSpan(t *testing.T) {
	up := startUpstream(t, nil)
	jc := &journalCluster{fakeCluster: newFakeCluster(), effects: map[string]*lease.Effect{}}
	exp := tracetest.NewInMemoryExporter()
	cfg := baseConfig(t)
	cfg.Journal = []JournalRule{{PathPrefix: "/charge"}}
	cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	s := startSidecar(t, jc, cfg)
	mustAcquire(t, s, "pay")
	url := "http://" + up.addr() + "/charge"
	hdr := map[string][]string{HeaderActionID: {"charge-1"}}
	for range 2 {
		resp, body := doReq(t, proxyClient(t, s, ""), "POST", url, `{"amount":5}`, hdr)
		require.Equal(t, 200, resp.StatusCode, body)
	}
	jc.jmu.Lock()
	jc.effects[request.ActionKey("pay", "refund-1")] = &lease.Effect{State: lease.EffectIntent}
	jc.jmu.Unlock()
	resp, _ := doReq(t, proxyClient(t, s, ""), "POST", url, `{}`, map[string][]string{HeaderActionID: {"refund-1"}})
	require.Equal(t, 409, resp.StatusCode)
	require.Len(t, up.requests(), 1, "the replay and the in-doubt write made no upstream call")

	spans := requestSpans(exp)
	require.Len(t, spans, 3)
	for i, want := range []string{fenceotel.DecisionForwarded, fenceotel.DecisionReplayed, fenceotel.DecisionInDoubt} {
		require.Equal(t, want, spans[i][string(fenceotel.Decision)], "request %d: %v", i, spans[i])
		require.Equal(t, "pay", spans[i][string(fenceotel.TaskID)])
		require.Equal(t, "101", spans[i][string(fenceotel.Epoch)])
		require.Equal(t, "proxy", spans[i]["fencepost.proxy.entry"])
	}
	require.Equal(t, request.ActionKey("pay", "charge-1"), spans[0][string(fenceotel.IdempotencyKey)])
	require.Equal(t, spans[0][string(fenceotel.IdempotencyKey)], spans[1][string(fenceotel.IdempotencyKey)])
}
