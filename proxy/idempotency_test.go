package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/request"
)

func TestIdempotencyKeysSurviveANewOwner(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	url := "http://" + up.addr() + "/charge"

	// The first owner checkpoints at seq 1, then makes two writes and a
	// third with an action id, then dies.
	a := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, a, "job")
	ca := proxyClient(t, a, "")
	resp, body := doReq(t, ca, "POST", "http://127.0.0.1:1/unused", "", nil) // connection refused: 502, not a forward with a key
	require.Equal(t, 502, resp.StatusCode, body)
	_, err := fc.Checkpoint(t.Context(), "job", checkpointReq(a, "job", 1))
	require.NoError(t, err)
	a.keeper.Checkpointed("job", 101, 1, "")
	for i := 0; i < 2; i++ {
		resp, _ := doReq(t, ca, "POST", url, "x", nil)
		require.Equal(t, 200, resp.StatusCode)
	}
	resp, _ = doReq(t, ca, "POST", url, "x", map[string][]string{HeaderActionID: {"email-7"}})
	require.Equal(t, 200, resp.StatusCode)
	resp, _ = doReq(t, ca, "POST", url, "x", map[string][]string{"Idempotency-Key": {"mine-1"}})
	require.Equal(t, 200, resp.StatusCode)
	first := up.requests()
	require.Len(t, first, 4)

	// The lease is reclaimed; a new owner resumes from checkpoint 1 and
	// replays the same steps.
	fc.Mu.Lock()
	delete(fc.Leases, "job")
	fc.Mu.Unlock()
	a.keeper.Drop("job", 0, leases.ReasonLost, EventLost, "test")
	b := startSidecar(t, fc, baseConfig(t))
	g := mustAcquire(t, b, "job")
	require.Greater(t, g.Lease.Epoch, uint64(101))
	cb := proxyClient(t, b, "")
	for i := 0; i < 2; i++ {
		resp, _ := doReq(t, cb, "POST", url, "x", nil)
		require.Equal(t, 200, resp.StatusCode)
	}
	resp, _ = doReq(t, cb, "POST", url, "x", map[string][]string{HeaderActionID: {"email-7"}})
	require.Equal(t, 200, resp.StatusCode)
	resp, _ = doReq(t, cb, "POST", url, "x", map[string][]string{"Idempotency-Key": {"mine-1"}})
	require.Equal(t, 200, resp.StatusCode)
	second := up.requests()[4:]
	for i := range first {
		require.Equal(t, first[i].values("Idempotency-Key"), second[i].values("Idempotency-Key"), "write %d", i)
		require.NotEqual(t, first[i].values("X-Fencing-Token"), second[i].values("X-Fencing-Token"))
	}
	require.Equal(t, []string{request.OrdinalKey("job", 1, 1)}, first[0].values("Idempotency-Key"))
	require.Equal(t, []string{request.OrdinalKey("job", 1, 2)}, first[1].values("Idempotency-Key"))
	require.Equal(t, []string{request.ActionKey("job", "email-7")}, first[2].values("Idempotency-Key"))
	require.Equal(t, []string{"mine-1"}, first[3].values("Idempotency-Key"))
	require.Empty(t, first[2].values(HeaderActionID), "the action id header is consumed")
}

func TestBadIdempotencyInput(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "t")
	c := proxyClient(t, s, "")
	url := "http://" + up.addr() + "/w"
	for _, h := range []map[string][]string{
		{"Idempotency-Key": {"a", "b"}},
		{"Idempotency-Key": {"has space"}},
		{HeaderActionID: {"x", "y"}},
	} {
		resp, _ := doReq(t, c, "POST", url, "x", h)
		require.Equal(t, 400, resp.StatusCode, h)
	}
	require.Empty(t, up.requests())
}

// TestKeyDerivationWire pins the derivation to its wire definition
// (package doc): "fp1-" + the first 32 hex digits of sha256 of the
// NUL-separated inputs. A faster implementation must not change a key.
func TestKeyDerivationWire(t *testing.T) {
	want := func(in string) string {
		sum := sha256.Sum256([]byte(in))
		return "fp1-" + hex.EncodeToString(sum[:])[:32]
	}
	long := strings.Repeat("t", fence.MaxTaskLen)
	act := strings.Repeat("a", request.MaxActionIDLen)
	require.Equal(t, want("task-1\x00send-email-42"), request.ActionKey("task-1", "send-email-42"))
	require.Equal(t, want(long+"\x00"+act), request.ActionKey(long, act))
	require.Equal(t, want("job\x00\x0012\x003"), request.OrdinalKey("job", 12, 3))
	require.Equal(t, want(long+"\x00\x0018446744073709551615\x0018446744073709551615"), request.OrdinalKey(long, math.MaxUint64, math.MaxUint64))
}
