package control

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/proxytest"
)

func TestControlModelErrorsFollowTheModelTable(t *testing.T) {
	fc := proxytest.NewCluster()
	k, err := leases.NewRouter([]leases.Member{{Cluster: fc, Settings: leases.Settings{
		WorkerID: "worker-1", SessionHeartbeat: time.Second, ClusterTimeout: time.Second,
		Logger: zap.NewNop(), Registerer: prometheus.NewRegistry(), Clock: proxytest.NewClock(),
	}}}, nil)
	require.NoError(t, err)
	c := New(Settings{ClusterTimeout: time.Second, Logger: zap.NewNop()}, k, nil, func() (bool, string) { return true, "ok" })
	problemOf := func(ctx *fasthttp.RequestCtx) api.Problem {
		var p api.Problem
		require.NoError(t, json.Unmarshal(ctx.Response.Body(), &p))
		return p
	}
	for _, e := range lease.Errors() {
		var ctx fasthttp.RequestCtx
		c.controlError(&ctx, "", 0, fmt.Errorf("cluster: %w", e.Err))
		require.Equal(t, e.Status, ctx.Response.StatusCode(), "%v", e.Err)
		require.Equal(t, e.Code, problemOf(&ctx).Code)
	}
	// The disagreement this table ended: not holding a lease is a 409 on
	// both APIs.
	var ctx fasthttp.RequestCtx
	c.controlError(&ctx, "", 0, lease.ErrNotHolder)
	require.Equal(t, 409, ctx.Response.StatusCode())
}
