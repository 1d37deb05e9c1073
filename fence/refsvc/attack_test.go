package refsvc

import (
	"crypto/ed25519"
	"fmt"
	"testing"

	"github.com/fencepost/fencepost/fence"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
)

// TestUnsignedFloodCannotFillTheStore: with keys configured, unsigned (or
// badly signed) writes for many distinct tasks are refused before the
// store is touched, so they neither raise a floor (a forged epoch
// 2^64-1) nor take a slot of a bounded store; the real owner's signed
// write still goes through afterwards.
func TestUnsignedFloodCannotFillTheStore(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	keys := fence.NewStaticKeys(priv.Public().(ed25519.PublicKey))
	mem, err := fence.NewMemStore(fence.MemStoreConfig{MaxTasks: 100})
	require.NoError(t, err)
	srv, err := New(Config{Addr: "127.0.0.1:0", VerifyKeys: keys, Store: mem})
	require.NoError(t, err)
	h := srv.Handler()
	write := func(task, epoch string, hdr ...string) int {
		var req fasthttp.Request
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI("/v1/tasks/" + task + "/writes")
		req.Header.Set(fence.HeaderToken, epoch)
		req.Header.Set(fence.HeaderTask, task)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		req.SetBodyString("x")
		var rc fasthttp.RequestCtx
		rc.Init(&req, nil, nil)
		h(&rc)
		return rc.Response.StatusCode()
	}
	other := ed25519.NewKeyFromSeed(append(make([]byte, ed25519.SeedSize-1), 1))
	for i := range 10_000 {
		task := fmt.Sprint("t", i)
		require.Equal(t, 403, write(task, "18446744073709551615"))
		require.Equal(t, 403, write(task, "18446744073709551615", fence.HeaderHolder, "w",
			fence.HeaderSignature, fence.Sign(other, task, 1<<64-1, "w")))
	}
	tasks, _ := mem.Len()
	require.Zero(t, tasks, "refused writes take no store slot")
	require.Equal(t, 201, write("t7", "5", fence.HeaderHolder, "w", fence.HeaderSignature, fence.Sign(priv, "t7", 5, "w")))
}

// TestLogNotServedByDefault: GET /v1/log is behind Config.ServeLog.
func TestLogNotServedByDefault(t *testing.T) {
	fx := start(t, Config{})
	resp, _ := fx.get(t, "/v1/log")
	require.Equal(t, 404, resp.StatusCode)
}
