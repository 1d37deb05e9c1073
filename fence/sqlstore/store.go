// Package sqlstore is the database/sql implementation of fence.Store: the
// epoch check and the idempotency record join the caller's own
// transaction, so a write, the raise of max_seen and the recorded response
// commit or roll back together.
//
// Two ways to use it:
//
//   - As a fence.Store behind the fence (or fasthttpfence) middleware: Do
//     begins the transaction and hands it to the handler through the
//     context; the handler writes with TxFromContext(ctx) and must not
//     commit.
//   - Directly, in a transaction the service manages: Check (stale check,
//     raise, idempotency lookup), the service's own statements, Record,
//     commit.
//
// Writes to one task are serialised by the row lock the epoch UPDATE takes,
// so a concurrent duplicate of an Idempotency-Key waits for the first and
// then replays instead of seeing "in progress". Errors wrap the sentinels
// of package fence (fence.ErrStale via *fence.StaleError,
// fence.ErrPayloadMismatch, fence.ErrStore, ...); this package defines
// none of its own.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/fencepost/fencepost/fence"
)

// DefaultTablePrefix names the tables fence_tasks and fence_idempotency.
const DefaultTablePrefix = "fence_"

// Config configures a Store.
type Config struct {
	// DB is the database; required.
	DB *sql.DB
	// Dialect is SQLite or Postgres; required.
	Dialect Dialect
	// TablePrefix prefixes the two table names (default
	// DefaultTablePrefix); lowercase letters, digits and underscores.
	TablePrefix string
	// TxOptions are used by Do when it begins a transaction (nil: the
	// driver's default, READ COMMITTED on Postgres).
	TxOptions *sql.TxOptions
	// Now stamps rows (default time.Now).
	Now func() time.Time
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,40}$`)

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.DB == nil {
		return fmt.Errorf("%w: sqlstore.Config.DB is required", fence.ErrInvalidConfig)
	}
	if !c.Dialect.valid() {
		return fmt.Errorf("%w: sqlstore.Config.Dialect must be SQLite or Postgres", fence.ErrInvalidConfig)
	}
	if c.TablePrefix != "" && !identRE.MatchString(c.TablePrefix) {
		return fmt.Errorf("%w: sqlstore.Config.TablePrefix %q must match %s", fence.ErrInvalidConfig, c.TablePrefix, identRE)
	}
	return nil
}

// Store implements fence.Store on a SQL database.
type Store struct {
	cfg                      Config
	tasks, idem              string
	qUpdate, qInsert, qEpoch string
	qIdemGet, qIdemPut       string
	qPurge                   string
}

// New validates cfg and prepares the queries. Call Migrate once to create
// the tables.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TablePrefix == "" {
		cfg.TablePrefix = DefaultTablePrefix
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Store{cfg: cfg, tasks: cfg.TablePrefix + "tasks", idem: cfg.TablePrefix + "idempotency"}
	d := cfg.Dialect
	fenceCond := `lease_epoch <= ?`
	if fence.FencingDisabled {
		fenceCond = `(lease_epoch <= ? OR 1 = 1)` // the deliberately broken build
	}
	s.qUpdate = d.rebind(`UPDATE ` + s.tasks + ` SET lease_epoch = ?, updated_at = ? WHERE tenant = ? AND task_id = ? AND ` + fenceCond)
	s.qInsert = d.rebind(`INSERT INTO ` + s.tasks + ` (tenant, task_id, lease_epoch, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (tenant, task_id) DO NOTHING`)
	s.qEpoch = d.rebind(`SELECT lease_epoch FROM ` + s.tasks + ` WHERE tenant = ? AND task_id = ?`)
	s.qIdemGet = d.rebind(`SELECT fingerprint, status, header, body FROM ` + s.idem + ` WHERE tenant = ? AND task_id = ? AND idem_key = ?`)
	s.qIdemPut = d.rebind(`INSERT INTO ` + s.idem + ` (tenant, task_id, idem_key, fingerprint, lease_epoch, status, header, body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	s.qPurge = d.rebind(`DELETE FROM ` + s.idem + ` WHERE created_at < ?`)
	return s, nil
}

// Schema returns the CREATE statements Migrate runs, for services that
// manage their schema with their own migration tool.
func (s *Store) Schema() []string {
	d := s.cfg.Dialect
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + s.tasks + ` (
	tenant      TEXT NOT NULL,
	task_id     TEXT NOT NULL,
	lease_epoch ` + d.epochType() + ` NOT NULL,
	updated_at  BIGINT NOT NULL,
	PRIMARY KEY (tenant, task_id))`,
		`CREATE TABLE IF NOT EXISTS ` + s.idem + ` (
	tenant      TEXT NOT NULL,
	task_id     TEXT NOT NULL,
	idem_key    TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	lease_epoch ` + d.epochType() + ` NOT NULL,
	status      INTEGER NOT NULL,
	header      TEXT NOT NULL,
	body        ` + d.blobType() + ` NOT NULL,
	created_at  BIGINT NOT NULL,
	PRIMARY KEY (tenant, task_id, idem_key))`,
		`CREATE INDEX IF NOT EXISTS ` + s.idem + `_created ON ` + s.idem + ` (created_at)`,
	}
}

// Migrate creates the tables if they do not exist.
func (s *Store) Migrate(ctx context.Context) error {
	for _, q := range s.Schema() {
		if _, err := s.cfg.DB.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%w: migrate: %v", fence.ErrStore, err)
		}
	}
	return nil
}

type txCtxKey struct{}

// TxFromContext returns the transaction Do runs the write in. The handler
// must run its statements in it and must not commit or roll it back.
func TxFromContext(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := ctx.Value(txCtxKey{}).(*sql.Tx)
	return tx, ok
}

// Do implements fence.Store: one transaction holds the epoch check, the
// idempotency lookup, fn's statements and the recorded response. A stale
// epoch, an error, a panic or a 5xx from fn rolls everything back.
func (s *Store) Do(ctx context.Context, w fence.Write, fn fence.WriteFunc) (resp *fence.Response, outcome fence.Outcome, err error) {
	tx, err := s.cfg.DB.BeginTx(ctx, s.cfg.TxOptions)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: begin: %w", fence.ErrStore, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	replay, err := s.Check(ctx, tx, w)
	if err != nil {
		return nil, 0, err
	}
	if replay != nil {
		// Commit the raise of max_seen the replay implies.
		if err := tx.Commit(); err != nil {
			return nil, 0, fmt.Errorf("%w: commit: %w", fence.ErrStore, err)
		}
		committed = true
		return replay, fence.Replayed, nil
	}
	resp, err = fn(context.WithValue(ctx, txCtxKey{}, tx))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", fence.ErrWriteFailed, err)
	}
	if resp == nil {
		return nil, 0, fmt.Errorf("%w: handler returned no response", fence.ErrWriteFailed)
	}
	if !resp.Recordable() {
		return resp, fence.Executed, nil
	}
	if err := s.Record(ctx, tx, w, resp); err != nil {
		return nil, 0, err
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, fmt.Errorf("%w: commit: %w", fence.ErrStore, err)
	}
	committed = true
	return resp, fence.Executed, nil
}

// maxFenceAttempts bounds the UPDATE / INSERT / SELECT loop; a retry is
// needed only when a row appears or vanishes between statements.
const maxFenceAttempts = 4

// Check runs the fencing check in tx: a *fence.StaleError if w.Epoch is
// below the task's lease_epoch, else the epoch is raised (the row stays
// locked until tx ends). Then, with an Idempotency-Key, the recorded
// response for a replay (non-nil), or fence.ErrPayloadMismatch. A nil
// response and nil error mean: perform the write in tx, then Record.
func (s *Store) Check(ctx context.Context, tx *sql.Tx, w fence.Write) (*fence.Response, error) {
	if err := s.fence(ctx, tx, w); err != nil {
		return nil, err
	}
	if w.IdempotencyKey == "" {
		return nil, nil
	}
	var (
		fp, header string
		status     int
		body       []byte
	)
	err := tx.QueryRowContext(ctx, s.qIdemGet, w.Key.Tenant, w.Key.Task, w.IdempotencyKey).Scan(&fp, &status, &header, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: idempotency lookup: %w", fence.ErrStore, err)
	}
	if fp != hex.EncodeToString(w.Fingerprint[:]) {
		return nil, fmt.Errorf("%w: key %q", fence.ErrPayloadMismatch, w.IdempotencyKey)
	}
	resp := &fence.Response{Status: status, Body: body}
	if err := json.Unmarshal([]byte(header), &resp.Header); err != nil {
		return nil, fmt.Errorf("%w: stored header of key %q: %v", fence.ErrStore, w.IdempotencyKey, err)
	}
	if resp.Body == nil {
		resp.Body = []byte{}
	}
	return resp, nil
}

func (s *Store) fence(ctx context.Context, tx *sql.Tx, w fence.Write) error {
	e := encodeEpoch(w.Epoch)
	now := s.cfg.Now().UnixMilli()
	for range maxFenceAttempts {
		res, err := tx.ExecContext(ctx, s.qUpdate, e, now, w.Key.Tenant, w.Key.Task, e)
		if n, err := affected(res, err); err != nil || n == 1 {
			return err
		}
		res, err = tx.ExecContext(ctx, s.qInsert, w.Key.Tenant, w.Key.Task, e, now)
		if n, err := affected(res, err); err != nil || n == 1 {
			return err
		}
		var cur string
		err = tx.QueryRowContext(ctx, s.qEpoch, w.Key.Tenant, w.Key.Task).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: read epoch: %w", fence.ErrStore, err)
		}
		seen, err := decodeEpoch(cur)
		if err != nil {
			return err
		}
		if w.Epoch < seen {
			return &fence.StaleError{Epoch: w.Epoch, MaxSeen: seen}
		}
		// The row was committed by someone else between our UPDATE and
		// INSERT with an epoch we may raise: take the row lock now.
	}
	return fmt.Errorf("%w: task %q did not settle after %d attempts", fence.ErrStore, w.Key.Task, maxFenceAttempts)
}

func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, fmt.Errorf("%w: fence: %w", fence.ErrStore, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%w: rows affected: %w", fence.ErrStore, err)
	}
	return n, nil
}

// Record stores resp under w's Idempotency-Key in tx (no-op without a
// key). Call it after the write's own statements, before commit; it only
// records responses with resp.Recordable().
func (s *Store) Record(ctx context.Context, tx *sql.Tx, w fence.Write, resp *fence.Response) error {
	if w.IdempotencyKey == "" || !resp.Recordable() {
		return nil
	}
	h := resp.Header
	if h == nil {
		h = http.Header{}
	}
	header, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("%w: encode header: %v", fence.ErrStore, err)
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	_, err = tx.ExecContext(ctx, s.qIdemPut, w.Key.Tenant, w.Key.Task, w.IdempotencyKey,
		hex.EncodeToString(w.Fingerprint[:]), encodeEpoch(w.Epoch), resp.Status, string(header), body, s.cfg.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("%w: record key %q: %w", fence.ErrStore, w.IdempotencyKey, err)
	}
	return nil
}

// MaxSeen returns the stored epoch of a task.
func (s *Store) MaxSeen(ctx context.Context, k fence.TaskKey) (uint64, bool, error) {
	var cur string
	err := s.cfg.DB.QueryRowContext(ctx, s.qEpoch, k.Tenant, k.Task).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: read epoch: %w", fence.ErrStore, err)
	}
	e, err := decodeEpoch(cur)
	return e, err == nil, err
}

// PurgeIdempotency deletes idempotency records created before cutoff and
// returns how many. Task rows (max_seen) are never purged: forgetting one
// would let a lower epoch through.
func (s *Store) PurgeIdempotency(ctx context.Context, cutoff time.Time) (int64, error) {
	res, err := s.cfg.DB.ExecContext(ctx, s.qPurge, cutoff.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("%w: purge: %w", fence.ErrStore, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%w: purge: %w", fence.ErrStore, err)
	}
	return n, nil
}
