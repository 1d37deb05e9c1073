package refsvc

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fencepost/fencepost/fence"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// fasthttp refreshes its Date header from one process-wide goroutine.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"))
}

type fixture struct {
	srv    *Server
	reg    *prometheus.Registry
	client *http.Client
	base   string
}

func start(t *testing.T, cfg Config) *fixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Addr = "127.0.0.1:0"
	cfg.Registerer = reg
	srv, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	fx := &fixture{srv: srv, reg: reg, client: &http.Client{Transport: &http.Transport{}}, base: "http://" + srv.Addr()}
	t.Cleanup(func() {
		fx.client.CloseIdleConnections()
		require.NoError(t, srv.Close())
	})
	return fx
}

func (fx *fixture) write(t *testing.T, task, epoch, key, body string, extra ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fx.base+"/v1/tasks/"+task+"/writes", strings.NewReader(body))
	require.NoError(t, err)
	if epoch != "" {
		req.Header.Set(fence.HeaderToken, epoch)
	}
	req.Header.Set(fence.HeaderTask, task)
	if key != "" {
		req.Header.Set(fence.HeaderIdempotencyKey, key)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	return fx.send(t, req)
}

func (fx *fixture) get(t *testing.T, path string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fx.base+path, nil)
	require.NoError(t, err)
	return fx.send(t, req)
}

func (fx *fixture) send(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := fx.client.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func problemType(t *testing.T, b []byte) string {
	t.Helper()
	var p fence.Problem
	require.NoError(t, json.Unmarshal(b, &p), string(b))
	return p.Type
}

func TestReferenceService(t *testing.T) {
	fx := start(t, Config{ServeLog: true})
	resp, b := fx.get(t, "/healthz")
	require.Equal(t, 200, resp.StatusCode)
	require.JSONEq(t, `{"status":"ok"}`, string(b))

	resp, b = fx.write(t, "task-1", "5", "step-1", "charge 10")
	require.Equal(t, 201, resp.StatusCode, string(b))
	var e1 Entry
	require.NoError(t, json.Unmarshal(b, &e1))
	require.Equal(t, Entry{Seq: 1, Task: "task-1", Epoch: 5, IdempotencyKey: "step-1", BodySHA256: e1.BodySHA256, BodyLen: 9, At: e1.At}, e1)
	require.Len(t, e1.BodySHA256, 64)

	// Reclaim: the new owner repeats step-1 and gets the recorded entry.
	resp, again := fx.write(t, "task-1", "7", "step-1", "charge 10")
	require.Equal(t, 201, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get(fence.HeaderReplayed))
	require.Equal(t, string(b), string(again))

	resp, b = fx.write(t, "task-1", "7", "step-2", "charge 20", fence.HeaderHolder, "worker-b")
	require.Equal(t, 201, resp.StatusCode, string(b))

	// The old owner's delayed write.
	resp, b = fx.write(t, "task-1", "5", "step-2", "charge 20")
	require.Equal(t, 409, resp.StatusCode)
	require.Equal(t, fence.ProblemStaleToken, problemType(t, b))

	// A token for task-1 cannot append to task-2.
	req, _ := http.NewRequest(http.MethodPost, fx.base+"/v1/tasks/task-2/writes", strings.NewReader("x"))
	req.Header.Set(fence.HeaderToken, "9")
	req.Header.Set(fence.HeaderTask, "task-1")
	resp, b = fx.send(t, req)
	require.Equal(t, 403, resp.StatusCode)
	require.Equal(t, fence.ProblemScope, problemType(t, b))

	resp, b = fx.write(t, "task-1", "", "", "x")
	require.Equal(t, 400, resp.StatusCode)
	require.Equal(t, fence.ProblemMissingToken, problemType(t, b))

	resp, b = fx.get(t, "/v1/tasks/task-1")
	require.Equal(t, 200, resp.StatusCode)
	var ts TaskState
	require.NoError(t, json.Unmarshal(b, &ts))
	require.EqualValues(t, 7, ts.MaxSeenEpoch)
	require.EqualValues(t, 7, ts.MaxAcceptedEpoch)
	require.Len(t, ts.Writes, 2)
	require.Equal(t, "worker-b", ts.Writes[1].Holder)

	resp, _ = fx.get(t, "/v1/tasks/nope")
	require.Equal(t, 404, resp.StatusCode)
	resp, _ = fx.send(t, must(http.NewRequest(http.MethodDelete, fx.base+"/v1/log", nil)))
	require.Equal(t, 405, resp.StatusCode)

	resp, b = fx.get(t, "/v1/log")
	require.Equal(t, 200, resp.StatusCode)
	var log struct{ Entries []Entry }
	require.NoError(t, json.Unmarshal(b, &log))
	require.Equal(t, fx.srv.Log(), log.Entries)
	require.Len(t, log.Entries, 2)
	require.NoError(t, fx.srv.CheckLog())

	require.Equal(t, 2.0, counter(t, fx.reg, "fencepost_refsvc_writes_accepted_total"))
	require.Equal(t, 1.0, counter(t, fx.reg, "fencepost_refsvc_writes_replayed_total"))
	require.Equal(t, 1.0, counter(t, fx.reg, "fencepost_refsvc_writes_stale_rejected_total"))
	resp, b = fx.get(t, "/metrics")
	require.Equal(t, 200, resp.StatusCode)
	text := string(b)
	require.Contains(t, text, "fencepost_refsvc_writes_accepted_total 2")
	require.Contains(t, text, "fencepost_refsvc_writes_replayed_total 1")
	require.Contains(t, text, "fencepost_refsvc_writes_stale_rejected_total 1")
	require.Contains(t, text, `fencepost_refsvc_writes_rejected_total{reason="stale-token"} 1`)
	require.Contains(t, text, `fencepost_refsvc_writes_rejected_total{reason="scope-rejected"} 1`)
	require.Contains(t, text, `fencepost_refsvc_writes_rejected_total{reason="idempotency-in-progress"} 0`)
	require.NotContains(t, text, "task-1", "no task ids in metrics")
}

func must(r *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return r
}

func TestReferenceServiceSigned(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	priv := ed25519.NewKeyFromSeed(seed)
	keys, err := fence.ParseKeys(mustJSON(fence.NewKeysDocument(priv.Public().(ed25519.PublicKey))))
	require.NoError(t, err)
	fx := start(t, Config{VerifyKeys: keys})

	resp, b := fx.write(t, "t", "3", "", "x")
	require.Equal(t, 403, resp.StatusCode)
	require.Equal(t, fence.ProblemMissingSignature, problemType(t, b))

	resp, b = fx.write(t, "t", "3", "", "x", fence.HeaderHolder, "w", fence.HeaderSignature, fence.Sign(priv, "t", 3, "w"))
	require.Equal(t, 201, resp.StatusCode, string(b))

	// A forged higher token: the signature was made for epoch 3.
	resp, b = fx.write(t, "t", "1000", "", "x", fence.HeaderHolder, "w", fence.HeaderSignature, fence.Sign(priv, "t", 3, "w"))
	require.Equal(t, 403, resp.StatusCode)
	require.Equal(t, fence.ProblemBadSignature, problemType(t, b))
	ts, _ := fx.srv.Task("t")
	require.EqualValues(t, 3, ts.MaxSeenEpoch, "the forgery did not raise the floor")
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestReferenceServiceRacingOwners drives concurrent owners with racing
// epochs through real HTTP and checks I3 on the service's log, and that
// every 409 was counted as a stale write.
func TestReferenceServiceRacingOwners(t *testing.T) {
	fx := start(t, Config{})
	seed := rand.Uint64()
	var current [3]atomic.Uint64
	for i := range current {
		current[i].Store(2)
	}
	var stale, accepted atomic.Int64
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for range 25 {
				ti := rng.IntN(len(current))
				epoch := current[ti].Load() - uint64(rng.IntN(2))
				if rng.IntN(4) == 0 {
					epoch = current[ti].Add(1)
				}
				resp, b := fx.write(t, "task-"+strconv.Itoa(ti), fence.FormatEpoch(epoch), "", fmt.Sprintf("c%d", c))
				switch resp.StatusCode {
				case 201:
					accepted.Add(1)
				case 409:
					stale.Add(1)
				default:
					t.Errorf("seed %d: status %d: %s", seed, resp.StatusCode, b)
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, fx.srv.CheckLog(), "seed %d", seed)
	require.Len(t, fx.srv.Log(), int(accepted.Load()))
	require.Equal(t, float64(stale.Load()), counter(t, fx.reg, "fencepost_refsvc_writes_stale_rejected_total"))
}

func TestServerLifecycleAndConfig(t *testing.T) {
	_, err := New(Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = New(Config{Addr: "127.0.0.1:0", MaxLogEntries: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = New(Config{Addr: "127.0.0.1:0", Registerer: prometheus.WrapRegistererWithPrefix("x_", prometheus.NewRegistry())})
	require.ErrorIs(t, err, ErrInvalidConfig, "a Registerer that cannot gather needs a Gatherer")

	// Two services on one registry collide; on their own registries they don't.
	reg := prometheus.NewRegistry()
	_, err = New(Config{Addr: "127.0.0.1:0", Registerer: reg})
	require.NoError(t, err)
	_, err = New(Config{Addr: "127.0.0.1:0", Registerer: reg})
	require.ErrorIs(t, err, ErrInvalidConfig)

	srv, err := New(Config{Addr: "127.0.0.1:0", MaxLogEntries: 1})
	require.NoError(t, err)
	require.Empty(t, srv.Addr())
	require.ErrorIs(t, srv.Close(), ErrState)
	require.NoError(t, srv.Start())
	require.ErrorIs(t, srv.Start(), ErrState)
	fx := &fixture{srv: srv, client: &http.Client{Transport: &http.Transport{}}, base: "http://" + srv.Addr()}
	resp, _ := fx.write(t, "t", "1", "k", "a")
	require.Equal(t, 201, resp.StatusCode)
	resp, _ = fx.write(t, "t", "1", "k2", "b")
	require.Equal(t, http.StatusInsufficientStorage, resp.StatusCode, "log full")
	resp, _ = fx.write(t, "t", "1", "k", "a")
	require.Equal(t, 201, resp.StatusCode, "the recorded write still replays")
	_, b := fx.get(t, "/metrics")
	require.Contains(t, string(b), "fencepost_refsvc_writes_accepted_total 1\n", "the 507 is not an accepted write")
	require.Contains(t, string(b), `fencepost_refsvc_writes_rejected_total{reason="write-failed"} 1`)
	fx.client.CloseIdleConnections()
	require.NoError(t, srv.Close())
	require.Len(t, srv.Log(), 1, "the log outlives the listener")
}

// counter reads an unlabelled counter from the registry.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			require.Len(t, f.GetMetric(), 1)
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
