package sqlstore

import (
	"context"
	"strconv"
	"testing"

	"github.com/fencepost/fencepost/fence"
)

func benchStore(b *testing.B, x *testDB, withKey bool) {
	ctx := context.Background()
	ok := func(context.Context) (*fence.Response, error) {
		return &fence.Response{Status: 200, Body: []byte("ok")}, nil
	}
	i := 0
	for b.Loop() {
		i++
		w := fence.Write{Key: fence.TaskKey{Task: "task-" + strconv.Itoa(i%64)}, Epoch: uint64(i)}
		if withKey {
			w.IdempotencyKey = "key-" + strconv.Itoa(i)
		}
		if _, _, err := x.store.Do(ctx, w, ok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSQLite is one fenced write transaction (BEGIN IMMEDIATE,
// UPDATE, COMMIT) on a WAL file database.
func BenchmarkSQLite(b *testing.B) {
	for _, withKey := range []bool{false, true} {
		b.Run("idempotency="+strconv.FormatBool(withKey), func(b *testing.B) {
			benchStore(b, newTestDB(b, openSQLite(b), SQLite), withKey)
		})
	}
}

// BenchmarkPostgres is the same against PostgreSQL (a throwaway local
// server with fsync off, or FENCEPOST_TEST_POSTGRES_DSN).
func BenchmarkPostgres(b *testing.B) {
	dsn, skip := postgresDSN(b)
	if dsn == "" {
		b.Skip(skip)
	}
	for _, withKey := range []bool{false, true} {
		b.Run("idempotency="+strconv.FormatBool(withKey), func(b *testing.B) {
			benchStore(b, newTestDB(b, openPostgres(b, dsn), Postgres), withKey)
		})
	}
}
