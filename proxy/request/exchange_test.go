package request

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/reply"
)

func TestLeaseRecheckedBeforeSendAfterSlowBody(t *testing.T) {
	// The deadline passes while the request is in the sidecar: the write
	// is blocked even though the lease was current when it arrived.
	tp, x, _ := leasedWrite(t)
	defer x.finish()
	e := x.decide()
	require.Nil(t, e)
	require.True(t, x.leased)
	tp.clk.Advance(2 * time.Second)
	x.req = fasthttp.AcquireRequest()
	e = x.stamp()
	require.NotNil(t, e)
	require.Equal(t, reply.CodeLeaseExpired, e.Code)
}

func TestNoByteLeavesAfterDeadline(t *testing.T) {
	// The deadline passes between the last lease check and the send (a
	// descheduled goroutine): the write connection refuses the bytes.
	tp, x, accepted := leasedWrite(t)
	ctx := x.ctx
	defer x.finish()
	require.Nil(t, x.decide())
	x.req = fasthttp.AcquireRequest()
	require.Nil(t, x.stamp())
	tp.clk.Advance(2 * time.Second)
	x.forward()
	require.Equal(t, 409, ctx.Response.StatusCode(), string(ctx.Response.Body()))
	require.Equal(t, api.ProblemTypeBase+reply.CodeLeaseExpired, problemType(t, ctx.Response.Body()))
	require.Zero(t, accepted(), "nothing reached the upstream")
}

// A write whose lease is revoked between its last check and the send is
// refused with the revocation's problem, as a write blocked at the door
// is, not as an expiry.
func TestWriteCutByRevocationSaysRevoked(t *testing.T) {
	tp, x, accepted := leasedWrite(t)
	ctx := x.ctx
	defer x.finish()
	require.Nil(t, x.decide())
	x.req = fasthttp.AcquireRequest()
	require.Nil(t, x.stamp())
	tp.k.Drop("t", x.lease.Epoch, leases.ReasonRevoked, leases.EventRevoked, "test")
	x.forward()
	require.Equal(t, 409, ctx.Response.StatusCode(), string(ctx.Response.Body()))
	require.Equal(t, api.ProblemTypeBase+reply.CodeLeaseRevoked, problemType(t, ctx.Response.Body()))
	require.Zero(t, accepted(), "nothing reached the upstream")
}

// leasedWrite is an exchange of a POST under the lease of task "t",
// valid for 2s, to an upstream that counts what reaches it.
func leasedWrite(t *testing.T) (*testPath, *exchange, func() int) {
	tp := newTestPath(t, 2*time.Second)
	up, accepted := refusingListener(t)
	tp.acquire(t, "t")
	return tp, newExchange(tp.p, newTestCtx("POST", "http://"+up+"/w", "body")), accepted
}
