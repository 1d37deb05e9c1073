package reply

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence/lease"
)

// The one status of each code is what Send answers, the two "too large"
// meanings have two codes, and a model code keeps the model's status.
func TestSendAnswersTheCodesStatus(t *testing.T) {
	for code, want := range Codes() {
		var ctx fasthttp.RequestCtx
		Send(&ctx, &Reply{Code: code, Title: "t"})
		require.Equal(t, want, ctx.Response.StatusCode(), code)
	}
	require.Equal(t, http.StatusRequestEntityTooLarge, StatusOf(CodeTooLarge))
	require.Equal(t, http.StatusBadGateway, StatusOf(CodeUpstreamTooLarge))
	for _, e := range lease.Errors() {
		require.Equal(t, e.Status, StatusOf(e.Code), e.Code)
	}
	require.Equal(t, http.StatusInternalServerError, StatusOf("no-such-code"))
}
