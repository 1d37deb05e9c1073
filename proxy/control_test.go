package proxy

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/leases"
)

func ctl(t *testing.T, s *Sidecar, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.ControlAddr()+path, strings.NewReader(body))
	require.NoError(t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestControlLifecycle(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	code, _ := ctl(t, s, "GET", PathHealth, "")
	require.Equal(t, 200, code)
	code, _ = ctl(t, s, "GET", PathReady, "")
	require.Equal(t, 200, code, "ready once the session is open")

	code, body := ctl(t, s, "POST", PathAcquire, `{"taskId":"job-1","create":true,"profile":"short"}`)
	require.Equal(t, 200, code, body)
	var g GrantReply
	require.NoError(t, json.Unmarshal([]byte(body), &g))
	require.Equal(t, "job-1", g.Lease.TaskID)
	require.Equal(t, uint64(101), g.Lease.Epoch)
	require.True(t, g.Lease.Current)
	require.Greater(t, g.Lease.RemainingMs, int64(9000))

	code, body = ctl(t, s, "POST", PathCheckpoint, `{"step":"fetched","data":"AQI="}`)
	require.Equal(t, 200, code, body)
	code, body = ctl(t, s, "GET", PathLease, "")
	require.Equal(t, 200, code)
	var lr LeaseReply
	require.NoError(t, json.Unmarshal([]byte(body), &lr))
	require.Len(t, lr.Leases, 1)
	require.Equal(t, uint64(1), lr.Leases[0].CheckpointSeq)
	require.Equal(t, "fetched", lr.Leases[0].CheckpointStep)

	code, body = ctl(t, s, "POST", PathComplete, `{"result":"ZG9uZQ=="}`)
	require.Equal(t, 200, code, body)
	require.Len(t, fc.Releases, 1)
	require.Equal(t, lease.OutcomeCompleted, fc.Releases[0].Outcome)
	require.Equal(t, uint64(101), fc.Releases[0].Epoch)
	code, body = ctl(t, s, "POST", PathComplete, `{}`)
	require.Equal(t, 409, code)
	require.Equal(t, api.ProblemTypeBase+CodeNoLease, problemOf(t, body).Type)

	// Bad input.
	code, _ = ctl(t, s, "POST", PathAcquire, `{"taskId":"x","bogus":1}`)
	require.Equal(t, 400, code)
	code, _ = ctl(t, s, "POST", PathAcquire, `{}`)
	require.Equal(t, 400, code)
	code, _ = ctl(t, s, "GET", PathAcquire, ``)
	require.Equal(t, 405, code)
	code, _ = ctl(t, s, "GET", "/nope", ``)
	require.Equal(t, 404, code)

	// Claim, then a wait parks it.
	code, body = ctl(t, s, "POST", PathClaim, ``)
	require.Equal(t, 200, code, body)
	code, body = ctl(t, s, "POST", PathWait, `{"timeoutMs":1000}`)
	require.Equal(t, 200, code, body)
	require.Empty(t, s.Leases())

	code, body = ctl(t, s, "GET", PathMetrics, "")
	require.Equal(t, 200, code)
	require.Contains(t, body, "fencepost_sidecar_lease_remaining_seconds")
	require.Contains(t, body, `fencepost_sidecar_lease_events_total{kind="acquired"} 2`)
}

func TestControlStaleEpochDropsLease(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "t")
	fc.Mu.Lock()
	fc.Leases["t"].Epoch = 500 // someone else got a newer grant
	fc.Mu.Unlock()
	code, body := ctl(t, s, "POST", PathCheckpoint, `{"taskId":"t"}`)
	require.Equal(t, 409, code, body)
	_, why := s.keeper.Check("t")
	require.Equal(t, leases.ReasonLost, why, "the cluster's word beats the local deadline")
}

func TestEventsStream(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + s.ControlAddr() + PathEvents)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n') // the opening comment: subscribed
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, ":"))

	mustAcquire(t, s, "t")
	fc.Signal("t", api.SignalRevoked, lease.StatusRevoked)
	s.keeper.HeartbeatOnce(t.Context())
	var kinds []string
	for len(kinds) < 2 {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if k, ok := strings.CutPrefix(strings.TrimSpace(line), "event: "); ok {
			kinds = append(kinds, k)
		}
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			var ev Event
			require.NoError(t, json.Unmarshal([]byte(d), &ev))
			require.Equal(t, "t", ev.TaskID)
		}
	}
	require.Equal(t, []string{"acquired", "revoked"}, kinds)
}

func TestFailedReleaseKeepsLeaseCurrent(t *testing.T) {
	fc := newFakeCluster()
	up := startUpstream(t, nil)
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "t")
	fc.Mu.Lock()
	fc.RelErr = errors.New("cluster unavailable")
	fc.Mu.Unlock()
	code, body := ctl(t, s, "POST", PathComplete, `{}`)
	require.Equal(t, 502, code, body)
	c := proxyClient(t, s, "")
	resp, _ := doReq(t, c, "POST", "http://"+up.addr()+"/w", "x", nil)
	require.Equal(t, 200, resp.StatusCode, "the lease is current again after the failed release")
	fc.Mu.Lock()
	fc.RelErr = nil
	fc.Mu.Unlock()
	code, body = ctl(t, s, "POST", PathComplete, `{}`)
	require.Equal(t, 200, code, body)
	resp, _ = doReq(t, c, "POST", "http://"+up.addr()+"/w", "x", nil)
	require.Equal(t, 409, resp.StatusCode)
	require.Len(t, up.requests(), 1)
}

func TestControlDecodeErrorsNameTheField(t *testing.T) {
	s := startSidecar(t, newFakeCluster(), baseConfig(t))
	mustAcquire(t, s, "t")
	for _, c := range []struct{ body, want string }{
		{`{"seq":"3"}`, `field "seq": must be a JSON number`},
		{`{"step":7}`, `field "step": must be a JSON string`},
		{`{"bogus":1}`, `unknown field "bogus"`},
		{`[1]`, "must be a JSON object"},
		{`{"seq":`, "ends early"},
		{`{"seq":1}x`, "trailing data"},
	} {
		code, body := ctl(t, s, "POST", PathCheckpoint, c.body)
		require.Equal(t, 400, code, c.body)
		require.Contains(t, problemOf(t, body).Detail, c.want, c.body)
	}
}

func TestCheckpointDataIsAnyJSONValue(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "t")
	for _, data := range []string{`{"page":3}`, `"page 3"`, `[1,2]`, `42`, `"AQI="`} {
		code, body := ctl(t, s, "POST", PathCheckpoint, `{"data":`+data+`}`)
		require.Equal(t, 200, code, body)
		fc.Mu.Lock()
		stored := string(fc.Ckpt["t"].Data)
		fc.Mu.Unlock()
		require.Equal(t, data, stored, "stored as its JSON text, unchanged")
		var reply struct {
			CheckpointData json.RawMessage `json:"checkpointData"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &reply), body)
		require.JSONEq(t, data, string(reply.CheckpointData), "the checkpoint reply hands it back in the shape acquire does")
	}
	// The next owner gets it back as the same JSON value.
	s.keeper.Drop("t", 0, leases.ReasonReleased, EventReleased, "test")
	fc.Mu.Lock()
	delete(fc.Leases, "t")
	fc.Mu.Unlock()
	code, body := ctl(t, s, "POST", PathAcquire, `{"taskId":"t"}`)
	require.Equal(t, 200, code, body)
	var g GrantReply
	require.NoError(t, json.Unmarshal([]byte(body), &g))
	require.JSONEq(t, `"AQI="`, string(g.CheckpointData))
	require.Equal(t, uint64(5), g.Task.Checkpoint.Seq, "seq 0 means the next one")
}

func TestControlAmbiguousNamesTheTasks(t *testing.T) {
	s := startSidecar(t, newFakeCluster(), baseConfig(t))
	mustAcquire(t, s, "alpha")
	mustAcquire(t, s, "beta")
	code, body := ctl(t, s, "POST", PathCheckpoint, `{}`)
	require.Equal(t, 409, code)
	var p problem
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	require.Equal(t, CodeAmbiguousTask, p.Code)
	require.Equal(t, []string{"alpha", "beta"}, p.Tasks)
	require.Contains(t, p.Detail, "taskId")
}
