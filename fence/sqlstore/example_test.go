package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/sqlstore"
	_ "modernc.org/sqlite"
)

// A service that manages its own transaction: Check joins it (stale
// check, raise of lease_epoch, idempotency lookup), the service writes,
// Record stores the response, and one COMMIT makes all of it durable.
func ExampleStore_Check() {
	dir, _ := os.MkdirTemp("", "sqlstore-example")
	defer func() { _ = os.RemoveAll(dir) }()
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "svc.db")+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	store, _ := sqlstore.New(sqlstore.Config{DB: db, Dialect: sqlstore.SQLite})
	_ = store.Migrate(ctx)
	_, _ = db.Exec(`CREATE TABLE payments (task TEXT, amount INTEGER)`)

	pay := func(epoch uint64, key string, amount int) {
		w := fence.Write{Key: fence.TaskKey{Task: "order-9"}, Epoch: epoch, IdempotencyKey: key,
			Fingerprint: fence.PayloadFingerprint("POST", "/pay", fmt.Appendf(nil, "%d", amount))}
		tx, _ := db.BeginTx(ctx, nil)
		defer func() { _ = tx.Rollback() }()
		replay, err := store.Check(ctx, tx, w)
		var stale *fence.StaleError
		switch {
		case errors.As(err, &stale):
			fmt.Printf("epoch %d rejected: max seen %d\n", epoch, stale.MaxSeen)
			return
		case err != nil:
			fmt.Println(err)
			return
		case replay != nil:
			_ = tx.Commit()
			fmt.Printf("epoch %d replayed: %s\n", epoch, replay.Body)
			return
		}
		_, _ = tx.ExecContext(ctx, `INSERT INTO payments VALUES (?, ?)`, "order-9", amount)
		_ = store.Record(ctx, tx, w, &fence.Response{Status: 201, Body: fmt.Appendf(nil, "paid %d", amount)})
		_ = tx.Commit()
		fmt.Printf("epoch %d paid %d\n", epoch, amount)
	}
	pay(5, "step-1", 10) // the first owner pays
	pay(8, "step-1", 10) // after a reclaim, the new owner repeats the step
	pay(5, "step-2", 20) // the old owner's late write
	var n int
	_ = db.QueryRow(`SELECT count(*) FROM payments`).Scan(&n)
	fmt.Println("payments:", n)
	// Output:
	// epoch 5 paid 10
	// epoch 8 replayed: paid 10
	// epoch 5 rejected: max seen 8
	// payments: 1
}
