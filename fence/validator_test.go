package fence

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tv bundles a validator over a fresh MemStore with a counting handler.
type tv struct {
	v     *Validator
	store *MemStore
	runs  atomic.Int64
	seen  []Decision
	mu    sync.Mutex
}

func newTV(t *testing.T, mod func(*Config)) *tv {
	t.Helper()
	store, err := NewMemStore(MemStoreConfig{})
	require.NoError(t, err)
	x := &tv{store: store}
	cfg := Config{Store: store, Observer: func(d Decision) {
		x.mu.Lock()
		x.seen = append(x.seen, d)
		x.mu.Unlock()
	}}
	if mod != nil {
		mod(&cfg)
	}
	x.v, err = NewValidator(cfg)
	require.NoError(t, err)
	return x
}

// in builds an Input with one value per non-empty header.
func in(token, task, key, body string) Input {
	one := func(s string) []string {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	return Input{
		Token: one(token), Task: one(task), IdempotencyKey: one(key),
		Method: http.MethodPost, RequestURI: "/v1/things",
		Body: func() ([]byte, error) { return []byte(body), nil },
	}
}

// ok is a handler that counts its runs and echoes the epoch.
func (x *tv) ok(ctx context.Context) (*Response, error) {
	n := x.runs.Add(1)
	w, _ := WriteFromContext(ctx)
	return &Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"text/plain"}},
		Body: []byte("run " + FormatEpoch(uint64(n)) + " epoch " + FormatEpoch(w.Epoch))}, nil
}

func (x *tv) check(i Input) Result { return x.v.Check(context.Background(), i, x.ok) }

func requireProblem(t *testing.T, res Result, typ string, status int) {
	t.Helper()
	require.NotNil(t, res.Problem, "want problem %s, got outcome %v", typ, res.Outcome)
	require.Equal(t, typ, res.Problem.Type, res.Problem.Detail)
	require.Equal(t, status, res.Problem.Status)
	require.Zero(t, res.Outcome)
}

func TestValidatorRejectsBadInput(t *testing.T) {
	priv := testKey(t, 0)
	good := Sign(priv, "task-1", 5, "w1")
	cases := []struct {
		name   string
		mod    func(*Input)
		typ    string
		status int
	}{
		{"missing token", func(i *Input) { i.Token = nil }, ProblemMissingToken, 400},
		{"zero token", func(i *Input) { i.Token = []string{"0"} }, ProblemMalformedToken, 400},
		{"leading zero", func(i *Input) { i.Token = []string{"05"} }, ProblemMalformedToken, 400},
		{"spaces", func(i *Input) { i.Token = []string{" 5"} }, ProblemMalformedToken, 400},
		{"list", func(i *Input) { i.Token = []string{"5,6"} }, ProblemMalformedToken, 400},
		{"negative", func(i *Input) { i.Token = []string{"-1"} }, ProblemMalformedToken, 400},
		{"overflow", func(i *Input) { i.Token = []string{"18446744073709551616"} }, ProblemMalformedToken, 400},
		{"repeated token", func(i *Input) { i.Token = []string{"5", "5"} }, ProblemMalformedToken, 400},
		{"missing task", func(i *Input) { i.Task = nil }, ProblemMissingTask, 400},
		{"task with newline", func(i *Input) { i.Task = []string{"a\nb"} }, ProblemMalformedTask, 400},
		{"task too long", func(i *Input) { i.Task = []string{strings.Repeat("t", 257)} }, ProblemMalformedTask, 400},
		{"repeated task", func(i *Input) { i.Task = []string{"task-1", "task-2"} }, ProblemMalformedTask, 400},
		{"bad holder", func(i *Input) { i.Holder = []string{"w\x00"} }, ProblemMalformedHolder, 400},
		{"repeated holder", func(i *Input) { i.Holder = []string{"w1", "w2"} }, ProblemMalformedHolder, 400},
		{"missing signature", func(i *Input) { i.Signature = nil }, ProblemMissingSignature, 403},
		{"malformed signature", func(i *Input) { i.Signature = []string{"ed25519=zz"} }, ProblemBadSignature, 403},
		{"forged higher token", func(i *Input) { i.Token = []string{"6"} }, ProblemBadSignature, 403},
		{"signature for another task", func(i *Input) { i.Task = []string{"task-2"} }, ProblemBadSignature, 403},
		{"signature for another holder", func(i *Input) { i.Holder = []string{"w2"} }, ProblemBadSignature, 403},
		{"unknown key", func(i *Input) { i.Signature = []string{Sign(testKey(t, 9), "task-1", 5, "w1")} }, ProblemUnknownKey, 403},
		{"repeated signature", func(i *Input) { i.Signature = []string{good, good} }, ProblemBadSignature, 403},
		{"idempotency key with space", func(i *Input) { i.IdempotencyKey = []string{"a b"} }, ProblemInvalidIdempotency, 400},
		{"idempotency key too long", func(i *Input) { i.IdempotencyKey = []string{strings.Repeat("k", 256)} }, ProblemInvalidIdempotency, 400},
		{"repeated idempotency key", func(i *Input) { i.IdempotencyKey = []string{"k", "k"} }, ProblemInvalidIdempotency, 400},
		{"body too large", func(i *Input) {
			i.Body = func() ([]byte, error) { return nil, ErrBodyTooLarge }
		}, ProblemBodyTooLarge, 413},
		{"scope refused", func(i *Input) {
			i.Scope = func(string) (string, error) { return "", errors.New("tenant x may not write task-1") }
		}, ProblemScope, 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := newTV(t, func(cfg *Config) { cfg.Keys = NewStaticKeys(pubOf(priv)) })
			i := in("5", "task-1", "k1", "body")
			i.Holder = []string{"w1"}
			i.Signature = []string{good}
			c.mod(&i)
			requireProblem(t, x.check(i), c.typ, c.status)
			require.Zero(t, x.runs.Load(), "handler must not run")
			_, known := x.store.MaxSeen(TaskKey{Task: "task-1"})
			require.False(t, known, "a rejected request must not touch max_seen")
			require.Len(t, x.seen, 1)
			require.Equal(t, c.typ, x.seen[0].Problem.Type)
		})
	}
	t.Run("valid baseline", func(t *testing.T) {
		x := newTV(t, func(cfg *Config) { cfg.Keys = NewStaticKeys(pubOf(priv)) })
		i := in("5", "task-1", "k1", "body")
		i.Holder = []string{"w1"}
		i.Signature = []string{good}
		res := x.check(i)
		require.Nil(t, res.Problem)
		require.Equal(t, Executed, res.Outcome)
	})
}

func TestValidatorSignaturePolicy(t *testing.T) {
	priv := testKey(t, 0)
	// Without keys the signature header is not looked at.
	x := newTV(t, nil)
	i := in("5", "task-1", "", "")
	i.Signature = []string{"garbage"}
	require.Equal(t, Executed, x.check(i).Outcome)
	// AllowUnsigned: unsigned passes, but a present signature is verified.
	x = newTV(t, func(cfg *Config) { cfg.Keys = NewStaticKeys(pubOf(priv)); cfg.AllowUnsigned = true })
	require.Equal(t, Executed, x.check(in("5", "task-1", "", "")).Outcome)
	i = in("6", "task-1", "", "")
	i.Signature = []string{Sign(priv, "task-1", 5, "")}
	requireProblem(t, x.check(i), ProblemBadSignature, 403)
	i.Signature = []string{Sign(priv, "task-1", 6, "")}
	require.Equal(t, Executed, x.check(i).Outcome)
}

func TestValidatorStale(t *testing.T) {
	x := newTV(t, nil)
	require.Equal(t, Executed, x.check(in("5", "task-1", "", "")).Outcome)
	require.Equal(t, Executed, x.check(in("5", "task-1", "", "")).Outcome, "equal epoch: same owner, still current")
	res := x.check(in("4", "task-1", "", ""))
	requireProblem(t, res, ProblemStaleToken, 409)
	require.Equal(t, "5", res.Problem.MaxSeenEpoch)
	var se *StaleError
	require.ErrorAs(t, res.Err, &se)
	require.Equal(t, uint64(4), se.Epoch)
	require.Equal(t, Executed, x.check(in("9", "task-1", "", "")).Outcome)
	requireProblem(t, x.check(in("5", "task-1", "", "")), ProblemStaleToken, 409)
	require.EqualValues(t, 3, x.runs.Load())
}

func TestValidatorEpochIsPerTask(t *testing.T) {
	x := newTV(t, nil)
	require.Equal(t, Executed, x.check(in("10", "task-a", "", "")).Outcome)
	// The right epoch for another task does not let a stale write through,
	// and a high epoch on one task does not fence another.
	require.Equal(t, Executed, x.check(in("3", "task-b", "", "")).Outcome)
	requireProblem(t, x.check(in("2", "task-b", "", "")), ProblemStaleToken, 409)
	requireProblem(t, x.check(in("9", "task-a", "", "")), ProblemStaleToken, 409)

	// Tenants scope tasks of the same name.
	i := in("1", "task-a", "", "")
	i.Scope = func(string) (string, error) { return "tenant-2", nil }
	require.Equal(t, Executed, x.check(i).Outcome)
	seen, _ := x.store.MaxSeen(TaskKey{Tenant: "tenant-2", Task: "task-a"})
	require.EqualValues(t, 1, seen)
}

func TestValidatorIdempotency(t *testing.T) {
	x := newTV(t, nil)
	first := x.check(in("5", "task-1", "k1", "pay"))
	require.Equal(t, Executed, first.Outcome)
	again := x.check(in("5", "task-1", "k1", "pay"))
	require.Equal(t, Replayed, again.Outcome)
	require.Equal(t, first.Response, again.Response)
	requireProblem(t, x.check(in("5", "task-1", "k1", "other")), ProblemPayloadMismatch, 422)
	// Same key, different path: a different payload too.
	i := in("5", "task-1", "k1", "pay")
	i.RequestURI = "/v1/other"
	requireProblem(t, x.check(i), ProblemPayloadMismatch, 422)
	// Keys are per task.
	require.Equal(t, Executed, x.check(in("5", "task-2", "k1", "other")).Outcome)
	require.EqualValues(t, 2, x.runs.Load())
}

// TestValidatorReplayAcrossReclaim is the reclaim case: the old owner
// finished a step under key K; the task was reclaimed and the new owner,
// with a higher epoch, repeats the step with the same key. It gets the
// recorded response and the handler does not run twice; the old owner is
// fenced from then on, even with the key it already completed.
func TestValidatorReplayAcrossReclaim(t *testing.T) {
	x := newTV(t, nil)
	old := x.check(in("5", "task-1", "step-3", "charge 10"))
	require.Equal(t, Executed, old.Outcome)
	require.Equal(t, "run 1 epoch 5", string(old.Response.Body))

	reclaimed := x.check(in("9", "task-1", "step-3", "charge 10"))
	require.Equal(t, Replayed, reclaimed.Outcome)
	require.Equal(t, old.Response, reclaimed.Response)
	require.EqualValues(t, 1, x.runs.Load(), "the handler ran once")
	seen, _ := x.store.MaxSeen(TaskKey{Task: "task-1"})
	require.EqualValues(t, 9, seen, "the replay raised max_seen")

	requireProblem(t, x.check(in("5", "task-1", "step-3", "charge 10")), ProblemStaleToken, 409)
	requireProblem(t, x.check(in("5", "task-1", "step-4", "charge 20")), ProblemStaleToken, 409)
	require.Equal(t, Executed, x.check(in("9", "task-1", "step-4", "charge 20")).Outcome)
}

func TestValidatorInProgress(t *testing.T) {
	x := newTV(t, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan Result)
	go func() {
		done <- x.v.Check(context.Background(), in("5", "task-1", "k1", "p"), func(ctx context.Context) (*Response, error) {
			close(entered)
			<-release
			return x.ok(ctx)
		})
	}()
	<-entered
	requireProblem(t, x.check(in("5", "task-1", "k1", "p")), ProblemInProgress, 409)
	// Stale still wins over in-progress.
	requireProblem(t, x.check(in("4", "task-1", "k1", "p")), ProblemStaleToken, 409)
	close(release)
	require.Equal(t, Executed, (<-done).Outcome)
	require.Equal(t, Replayed, x.check(in("5", "task-1", "k1", "p")).Outcome)
}

func TestValidatorReleasesFailedClaims(t *testing.T) {
	x := newTV(t, nil)
	boom := func(context.Context) (*Response, error) { panic("handler crashed") }
	require.Panics(t, func() { x.v.Check(context.Background(), in("5", "task-1", "k1", "p"), boom) })
	fail := func(context.Context) (*Response, error) { return nil, errors.New("disk full") }
	res := x.v.Check(context.Background(), in("5", "task-1", "k1", "p"), fail)
	requireProblem(t, res, ProblemWriteFailed, 500)
	unavailable := func(context.Context) (*Response, error) { return &Response{Status: 503}, nil }
	res = x.v.Check(context.Background(), in("5", "task-1", "k1", "p"), unavailable)
	require.Equal(t, Executed, res.Outcome)
	require.Equal(t, 503, res.Response.Status)
	_, records := x.store.Len()
	require.Zero(t, records, "no claim may survive a failed write")
	// The key is free again and the write runs.
	require.Equal(t, Executed, x.check(in("5", "task-1", "k1", "p")).Outcome)
	require.Equal(t, Replayed, x.check(in("5", "task-1", "k1", "p")).Outcome)
}

func TestValidatorCancelledWhileWaiting(t *testing.T) {
	x := newTV(t, nil)
	entered, release, first := make(chan struct{}), make(chan struct{}), make(chan Result)
	go func() {
		first <- x.v.Check(context.Background(), in("5", "task-1", "", ""), func(ctx context.Context) (*Response, error) {
			close(entered)
			<-release
			return x.ok(ctx)
		})
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res := x.v.Check(ctx, in("5", "task-1", "k2", "p"), x.ok)
	requireProblem(t, res, ProblemStoreFailure, 503)
	require.ErrorIs(t, res.Err, context.DeadlineExceeded)
	close(release)
	require.Equal(t, Executed, (<-first).Outcome)
	_, records := x.store.Len()
	require.Zero(t, records, "the cancelled write's claim is released")
}

func TestConfigValidate(t *testing.T) {
	_, err := NewValidator(Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	store, err := NewMemStore(MemStoreConfig{})
	require.NoError(t, err)
	_, err = NewValidator(Config{Store: store, MaxBodyBytes: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewMemStore(MemStoreConfig{MaxTasks: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
