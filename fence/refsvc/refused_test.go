package refsvc

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fencepost/fencepost/fence"
)

// logPage reads GET /v1/log.
func logPage(t *testing.T, fx *fixture) LogPage {
	t.Helper()
	resp, b := fx.get(t, "/v1/log")
	require.Equal(t, 200, resp.StatusCode, string(b))
	var page LogPage
	require.NoError(t, json.Unmarshal(b, &page), string(b))
	return page
}

const refusedTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestRefusedWritesAreLoggedWithTheirTrace: an old owner's write, refused
// as stale, is listed with its epoch, the task's max seen and the trace id
// of its traceparent, with tracing off and on; accepted writes are not.
// A call without traceparent names the service's own trace when tracing.
func TestRefusedWritesAreLoggedWithTheirTrace(t *testing.T) {
	for _, traced := range []bool{false, true} {
		t.Run(fmt.Sprintf("tracing=%v", traced), func(t *testing.T) {
			cfg := Config{ServeLog: true}
			if traced {
				cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
			}
			fx := start(t, cfg)
			resp, b := fx.write(t, "t1", "7", "k1", "new owner")
			require.Equal(t, 201, resp.StatusCode, string(b))
			before := time.Now().UTC()
			resp, _ = fx.write(t, "t1", "5", "k2", "old owner", fence.HeaderHolder, "worker-a", "traceparent", refusedTraceparent)
			require.Equal(t, 409, resp.StatusCode)
			resp, _ = fx.write(t, "t1", "", "", "no token")
			require.Equal(t, 400, resp.StatusCode)

			page := logPage(t, fx)
			require.Len(t, page.Entries, 1)
			require.Len(t, page.Refused, 2, "%+v", page.Refused)
			stale := page.Refused[0]
			require.False(t, stale.At.Before(before.Add(-time.Second)), "%v", stale.At)
			stale.At = time.Time{}
			require.Equal(t, Refusal{Task: "t1", Epoch: 5, MaxSeenEpoch: 7, Holder: "worker-a", IdempotencyKey: "k2",
				Type: fence.ProblemStaleToken, Status: 409, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}, stale)
			require.Equal(t, fence.ProblemMissingToken, page.Refused[1].Type)
			if traced {
				require.Len(t, page.Refused[1].TraceID, 32, "the service's own span starts the trace")
			} else {
				require.Empty(t, page.Refused[1].TraceID, "an untraced call names no trace")
			}
			require.Zero(t, page.RefusedDropped)
		})
	}
}

// TestRefusalsKeepTheNewest: past MaxRefused the oldest are forgotten and
// counted; the order stays oldest first.
func TestRefusalsKeepTheNewest(t *testing.T) {
	var r refusals
	for i := range MaxRefused + 5 {
		r.add(Refusal{Epoch: uint64(i)})
	}
	got, dropped := r.list()
	require.EqualValues(t, 5, dropped)
	require.Len(t, got, MaxRefused)
	for i, e := range got {
		require.EqualValues(t, i+5, e.Epoch)
	}
}
