package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testDB is one database under test with a store on fresh tables.
type testDB struct {
	db      *sql.DB
	dialect Dialect
	prefix  string
	store   *Store
}

func openSQLite(t testing.TB) *sql.DB {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "fence.db") +
		"?_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func openPostgres(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	db.SetMaxOpenConns(40)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newTestDB creates tables under a random prefix, so tests can share one
// external PostgreSQL, and an app table the handlers write to.
func newTestDB(t testing.TB, db *sql.DB, d Dialect) *testDB {
	t.Helper()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	prefix := "t" + hex.EncodeToString(rnd[:]) + "_"
	store, err := New(Config{DB: db, Dialect: d, TablePrefix: prefix})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, store.Migrate(ctx))
	require.NoError(t, store.Migrate(ctx), "Migrate is idempotent")
	seq := "INTEGER PRIMARY KEY AUTOINCREMENT"
	if d == Postgres {
		seq = "BIGSERIAL PRIMARY KEY"
	}
	_, err = db.ExecContext(ctx, `CREATE TABLE `+prefix+`app (seq `+seq+`, task TEXT NOT NULL, epoch BIGINT NOT NULL, note TEXT NOT NULL)`)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, tbl := range []string{"app", "idempotency", "tasks"} {
			_, _ = db.ExecContext(context.Background(), `DROP TABLE IF EXISTS `+prefix+tbl)
		}
	})
	return &testDB{db: db, dialect: d, prefix: prefix, store: store}
}

// appWrite is the handler's own statement, in the store's transaction.
func (x *testDB) appWrite(note string, status int) fence.WriteFunc {
	return func(ctx context.Context) (*fence.Response, error) {
		tx, ok := TxFromContext(ctx)
		if !ok {
			return nil, errors.New("no transaction in context")
		}
		w, _ := fence.WriteFromContext(ctx)
		_, err := tx.ExecContext(ctx, x.store.cfg.Dialect.rebind(`INSERT INTO `+x.prefix+`app (task, epoch, note) VALUES (?, ?, ?)`),
			w.Key.Task, int64(w.Epoch), note)
		if err != nil {
			return nil, err
		}
		return &fence.Response{Status: status, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte(note)}, nil
	}
}

func (x *testDB) appRows(t testing.TB) []fence.AppliedWrite {
	t.Helper()
	rows, err := x.db.Query(`SELECT task, epoch FROM ` + x.prefix + `app ORDER BY seq`)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	var out []fence.AppliedWrite
	for rows.Next() {
		var w fence.AppliedWrite
		var e int64
		require.NoError(t, rows.Scan(&w.Key.Task, &e))
		w.Epoch = uint64(e)
		out = append(out, w)
	}
	require.NoError(t, rows.Err())
	return out
}

func wr(task string, epoch uint64, key, payload string) fence.Write {
	return fence.Write{Key: fence.TaskKey{Task: task}, Epoch: epoch, IdempotencyKey: key,
		Fingerprint: fence.PayloadFingerprint("POST", "/w", []byte(payload))}
}

// TestSQLStore holds every database test so one PostgreSQL server (started
// here, stopped when the test ends) serves them all.
func TestSQLStore(t *testing.T) {
	dsn, skip := postgresDSN(t)
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *testDB)
	}{
		{"Decisions", testDecisions},
		{"EpochRange", testEpochRange},
		{"RollbackOnFailure", testRollbackOnFailure},
		{"CallerTransaction", testCallerTransaction},
		{"DuplicateWaits", testDuplicateWaitsThenReplays},
		{"ReplayAcrossReclaim", testReplayAcrossReclaim},
		{"Purge", testPurge},
		{"I3RacingEpochs", testI3RacingEpochs},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Run("sqlite", func(t *testing.T) { c.fn(t, newTestDB(t, openSQLite(t), SQLite)) })
			t.Run("postgres", func(t *testing.T) {
				if dsn == "" {
					t.Skip(skip)
				}
				c.fn(t, newTestDB(t, openPostgres(t, dsn), Postgres))
			})
		})
	}
}

func testDecisions(t *testing.T, x *testDB) {
	ctx := context.Background()
	do := func(w fence.Write, note string) (*fence.Response, fence.Outcome, error) {
		return x.store.Do(fence.WithWrite(ctx, w), w, x.appWrite(note, 201))
	}
	_, o, err := do(wr("a", 5, "", ""), "a5")
	require.NoError(t, err)
	require.Equal(t, fence.Executed, o)
	_, _, err = do(wr("a", 5, "", ""), "a5 again")
	require.NoError(t, err, "equal epoch is current")
	_, _, err = do(wr("a", 4, "", ""), "a4")
	var se *fence.StaleError
	require.ErrorAs(t, err, &se)
	require.EqualValues(t, 5, se.MaxSeen)
	_, _, err = do(wr("b", 1, "", ""), "b1")
	require.NoError(t, err, "epochs are per task")

	resp, o, err := do(wr("a", 6, "k", "p"), "a6k")
	require.NoError(t, err)
	require.Equal(t, fence.Executed, o)
	again, o, err := do(wr("a", 6, "k", "p"), "never")
	require.NoError(t, err)
	require.Equal(t, fence.Replayed, o)
	require.Equal(t, resp, again)
	_, _, err = do(wr("a", 6, "k", "other"), "never")
	require.ErrorIs(t, err, fence.ErrPayloadMismatch)

	tenant := wr("a", 1, "", "")
	tenant.Key.Tenant = "other"
	_, _, err = do(tenant, "other tenant")
	require.NoError(t, err, "another tenant's task a is another task")

	require.Equal(t, []string{"a5", "a5 again", "b1", "a6k", "other tenant"}, notes(t, x))
	seen, ok, err := x.store.MaxSeen(ctx, fence.TaskKey{Task: "a"})
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 6, seen)
}

func notes(t *testing.T, x *testDB) []string {
	rows, err := x.db.Query(`SELECT note FROM ` + x.prefix + `app ORDER BY seq`)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	return out
}

// testEpochRange checks the text encoding orders epochs numerically over
// the whole uint64 range (9 < 10, 2^64-2 < 2^64-1).
func testEpochRange(t *testing.T, x *testDB) {
	ctx := context.Background()
	ok := func(context.Context) (*fence.Response, error) { return &fence.Response{Status: 200}, nil }
	for _, step := range []struct {
		epoch uint64
		stale bool
	}{{9, false}, {10, false}, {9, true}, {99, false}, {100, false}, {1<<63 - 1, false}, {1 << 63, false}, {1<<63 - 1, true}, {1<<64 - 1, false}, {1<<64 - 2, true}} {
		_, _, err := x.store.Do(ctx, wr("t", step.epoch, "", ""), ok)
		if step.stale {
			require.ErrorIs(t, err, fence.ErrStale, "epoch %d", step.epoch)
		} else {
			require.NoError(t, err, "epoch %d", step.epoch)
		}
	}
	seen, _, err := x.store.MaxSeen(ctx, fence.TaskKey{Task: "t"})
	require.NoError(t, err)
	require.Equal(t, uint64(1<<64-1), seen)
}

func testRollbackOnFailure(t *testing.T, x *testDB) {
	ctx := context.Background()
	_, _, err := x.store.Do(ctx, wr("t", 3, "", ""), x.appWrite("first", 200))
	require.NoError(t, err)

	// A 5xx: the handler's row, the raise to 7 and the key all roll back.
	resp, o, err := x.store.Do(fence.WithWrite(ctx, wr("t", 7, "k", "p")), wr("t", 7, "k", "p"), x.appWrite("5xx", 503))
	require.NoError(t, err)
	require.Equal(t, fence.Executed, o)
	require.Equal(t, 503, resp.Status)
	// An error.
	fail := func(ctx context.Context) (*fence.Response, error) {
		if _, err := x.appWrite("err", 200)(ctx); err != nil {
			return nil, err
		}
		return nil, errors.New("downstream of the downstream failed")
	}
	_, _, err = x.store.Do(fence.WithWrite(ctx, wr("t", 7, "k", "p")), wr("t", 7, "k", "p"), fail)
	require.ErrorIs(t, err, fence.ErrWriteFailed)
	// A panic.
	boom := func(ctx context.Context) (*fence.Response, error) {
		_, _ = x.appWrite("panic", 200)(ctx)
		panic("handler crashed")
	}
	require.Panics(t, func() { _, _, _ = x.store.Do(fence.WithWrite(ctx, wr("t", 7, "k", "p")), wr("t", 7, "k", "p"), boom) })

	require.Equal(t, []string{"first"}, notes(t, x))
	seen, _, err := x.store.MaxSeen(ctx, fence.TaskKey{Task: "t"})
	require.NoError(t, err)
	require.EqualValues(t, 3, seen, "a rolled-back write does not raise max_seen")
	// The key is free: the retry runs.
	_, o, err = x.store.Do(fence.WithWrite(ctx, wr("t", 7, "k", "p")), wr("t", 7, "k", "p"), x.appWrite("retry", 200))
	require.NoError(t, err)
	require.Equal(t, fence.Executed, o)
	require.Equal(t, []string{"first", "retry"}, notes(t, x))
}

// testCallerTransaction uses Check and Record in a transaction the service
// owns.
func testCallerTransaction(t *testing.T, x *testDB) {
	ctx := context.Background()
	run := func(w fence.Write, note string, commit bool) (*fence.Response, error) {
		tx, err := x.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		replay, err := x.store.Check(ctx, tx, w)
		if err != nil || replay != nil {
			if err == nil {
				require.NoError(t, tx.Commit())
			}
			return replay, err
		}
		_, err = tx.ExecContext(ctx, x.store.cfg.Dialect.rebind(`INSERT INTO `+x.prefix+`app (task, epoch, note) VALUES (?, ?, ?)`), w.Key.Task, int64(w.Epoch), note)
		require.NoError(t, err)
		resp := &fence.Response{Status: 200, Body: []byte(note)}
		require.NoError(t, x.store.Record(ctx, tx, w, resp))
		if commit {
			require.NoError(t, tx.Commit())
		}
		return nil, nil
	}
	_, err := run(wr("t", 2, "k", "p"), "rolled back", false)
	require.NoError(t, err)
	_, err = run(wr("t", 1, "k", "p"), "epoch 1", true)
	require.NoError(t, err, "the rollback undid the raise to 2")
	replay, err := run(wr("t", 1, "k", "p"), "never", true)
	require.NoError(t, err)
	require.Equal(t, "epoch 1", string(replay.Body))
	_, err = run(wr("t", 2, "k2", "p"), "epoch 2", true)
	require.NoError(t, err)
	_, err = run(wr("t", 1, "k3", "p"), "never", true)
	require.ErrorIs(t, err, fence.ErrStale)
	require.Equal(t, []string{"epoch 1", "epoch 2"}, notes(t, x))
}

// testDuplicateWaitsThenReplays: with the task row locked by the first
// write, a concurrent duplicate waits and then replays; the handler runs
// once.
func testDuplicateWaitsThenReplays(t *testing.T, x *testDB) {
	ctx := context.Background()
	var runs atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	fn := func(ctx context.Context) (*fence.Response, error) {
		if runs.Add(1) == 1 {
			close(entered)
			<-release
		}
		return x.appWrite("once", 201)(ctx)
	}
	w := wr("t", 4, "k", "p")
	results := make(chan fence.Outcome, 2)
	errs := make(chan error, 2)
	start := func() {
		_, o, err := x.store.Do(fence.WithWrite(ctx, w), w, fn)
		results <- o
		errs <- err
	}
	go start()
	<-entered
	go start()
	close(release)
	got := map[fence.Outcome]int{}
	for range 2 {
		got[<-results]++
		require.NoError(t, <-errs)
	}
	require.Equal(t, map[fence.Outcome]int{fence.Executed: 1, fence.Replayed: 1}, got)
	require.EqualValues(t, 1, runs.Load())
}

// testReplayAcrossReclaim: the old owner's completed key replays for the
// new owner's higher epoch without running the handler again, and the old
// owner is fenced afterwards.
func testReplayAcrossReclaim(t *testing.T, x *testDB) {
	store := x.store
	v, err := fence.NewValidator(fence.Config{Store: store})
	require.NoError(t, err)
	var runs atomic.Int32
	fn := func(ctx context.Context) (*fence.Response, error) {
		runs.Add(1)
		return x.appWrite("charged", 201)(ctx)
	}
	input := func(epoch string) fence.Input {
		return fence.Input{Token: []string{epoch}, Task: []string{"order-9"}, IdempotencyKey: []string{"step-3"},
			Method: "POST", RequestURI: "/charge", Body: func() ([]byte, error) { return []byte("10 EUR"), nil }}
	}
	old := v.Check(context.Background(), input("5"), fn)
	require.Nil(t, old.Problem)
	require.Equal(t, fence.Executed, old.Outcome)
	reclaimed := v.Check(context.Background(), input("9"), fn)
	require.Nil(t, reclaimed.Problem)
	require.Equal(t, fence.Replayed, reclaimed.Outcome)
	require.Equal(t, old.Response, reclaimed.Response)
	require.EqualValues(t, 1, runs.Load())
	stale := v.Check(context.Background(), input("5"), fn)
	require.NotNil(t, stale.Problem)
	require.Equal(t, fence.ProblemStaleToken, stale.Problem.Type)
	require.Equal(t, "9", stale.Problem.MaxSeenEpoch)
	require.Equal(t, []string{"charged"}, notes(t, x))
}

func testPurge(t *testing.T, x *testDB) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	store, err := New(Config{DB: x.db, Dialect: x.dialect, TablePrefix: x.prefix, Now: func() time.Time { return now }})
	require.NoError(t, err)
	_, _, err = store.Do(ctx, wr("t", 1, "old", "p"), x.appWrite("old", 200))
	require.NoError(t, err)
	now = now.Add(time.Hour)
	_, _, err = store.Do(ctx, wr("t", 1, "new", "p"), x.appWrite("new", 200))
	require.NoError(t, err)
	n, err := store.PurgeIdempotency(ctx, now.Add(-time.Minute))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	_, o, err := store.Do(ctx, wr("t", 1, "new", "p"), x.appWrite("never", 200))
	require.NoError(t, err)
	require.Equal(t, fence.Replayed, o)
	_, o, err = store.Do(ctx, wr("t", 1, "old", "p"), x.appWrite("old again", 200))
	require.NoError(t, err)
	require.Equal(t, fence.Executed, o, "a purged key runs again")
	seen, _, err := store.MaxSeen(ctx, fence.TaskKey{Task: "t"})
	require.NoError(t, err)
	require.EqualValues(t, 1, seen, "purging never touches max_seen")
}

func TestConfigValidate(t *testing.T) {
	_, err := New(Config{})
	require.ErrorIs(t, err, fence.ErrInvalidConfig)
	db := openSQLite(t)
	_, err = New(Config{DB: db})
	require.ErrorIs(t, err, fence.ErrInvalidConfig)
	_, err = New(Config{DB: db, Dialect: SQLite, TablePrefix: "x; DROP TABLE y"})
	require.ErrorIs(t, err, fence.ErrInvalidConfig)
	require.Equal(t, "UPDATE t SET a = $1 WHERE b = $2", Postgres.rebind("UPDATE t SET a = ? WHERE b = ?"))
	require.Equal(t, "UPDATE t SET a = ?", SQLite.rebind("UPDATE t SET a = ?"))
}
