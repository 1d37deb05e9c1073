package fence

import (
	"container/list"
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of MemStoreConfig.
const (
	DefaultMaxTasks = 100_000
	// DefaultMaxTasksPerHolder is a fifth of DefaultMaxTasks: one holder
	// identity cannot take the table, at least five are needed (and the
	// cluster's per-identity task quota, raftstore.DefaultQuotaTasks, is
	// below it, so a sidecar stays within its share).
	DefaultMaxTasksPerHolder     = DefaultMaxTasks / 5
	DefaultMaxIdempotencyRecords = 100_000
	DefaultIdempotencyTTL        = 24 * time.Hour
)

// memShards spreads the task table over independent locks; writes for
// different tasks rarely contend.
const memShards = 64

// MemStoreConfig configures a MemStore. The zero value is usable.
type MemStoreConfig struct {
	// MaxTasks bounds how many tasks the store remembers (default
	// DefaultMaxTasks). A task's max_seen is never evicted, because
	// forgetting it would let a lower epoch through; when the table is full
	// a write for a new task fails with ErrStoreFull (503) instead.
	MaxTasks int
	// MaxTasksPerHolder bounds the tasks whose first accepted write came
	// from one holder (Write.Holder, X-Fencing-Holder; "" is one holder
	// too), default DefaultMaxTasksPerHolder and never above MaxTasks. A
	// holder past it gets ErrHolderFull (which is an ErrStoreFull) naming
	// the holder and the limit, while others still write. With signed
	// tokens the holder is the worker id the cluster bound to the
	// sidecar's certificate; without signatures it is whatever the caller
	// sends, and the bound is only against mistakes.
	MaxTasksPerHolder int
	// MaxIdempotencyRecords bounds the completed idempotency records
	// (default DefaultMaxIdempotencyRecords). When full, the least recently
	// used completed record is evicted; a retry of an evicted key runs
	// again. Running (in-progress) records are never evicted; when every
	// slot is held by a running write, a new key fails with ErrStoreFull.
	MaxIdempotencyRecords int
	// IdempotencyTTL is how long a completed record is kept after its last
	// use (default DefaultIdempotencyTTL).
	IdempotencyTTL time.Duration
	// Now is the clock used for record ages (default time.Now); tests
	// inject a fake clock.
	Now func() time.Time
}

// Validate checks the configuration; negative sizes are errors, zeros mean
// the defaults.
func (c MemStoreConfig) Validate() error {
	if c.MaxTasks < 0 || c.MaxTasksPerHolder < 0 || c.MaxIdempotencyRecords < 0 || c.IdempotencyTTL < 0 {
		return fmt.Errorf("%w: MemStoreConfig sizes and TTL must not be negative", ErrInvalidConfig)
	}
	return nil
}

func (c MemStoreConfig) withDefaults() MemStoreConfig {
	if c.MaxTasks == 0 {
		c.MaxTasks = DefaultMaxTasks
	}
	if c.MaxTasksPerHolder == 0 {
		c.MaxTasksPerHolder = DefaultMaxTasksPerHolder
	}
	c.MaxTasksPerHolder = min(c.MaxTasksPerHolder, c.MaxTasks)
	if c.MaxIdempotencyRecords == 0 {
		c.MaxIdempotencyRecords = DefaultMaxIdempotencyRecords
	}
	if c.IdempotencyTTL == 0 {
		c.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// MemStore is a bounded in-memory Store for single-process services and
// tests. It is safe for concurrent use. Writes for one task are
// serialised (one runs at a time) while idempotency claims stay visible to
// concurrent duplicates, which get ErrInProgress.
type MemStore struct {
	cfg    MemStoreConfig
	seed   maphash.Seed
	ntasks atomic.Int64
	shards [memShards]memShard

	// holdersMu guards holders: tasks per holder (MaxTasksPerHolder).
	// Taken inside a shard's mu, and only there.
	holdersMu sync.Mutex
	holders   map[string]int

	// idemMu guards idem, lru and done; lock order: shard.mu, then idemMu.
	idemMu sync.Mutex
	idem   map[idemKey]*memRecord
	lru    list.List // completed records only, least recently used first
}

type memShard struct {
	mu    sync.Mutex
	tasks map[TaskKey]*memTask
}

// memTask is one task's state, guarded by its shard's mu.
type memTask struct {
	maxSeen uint64
	busy    bool          // a write for the task is running
	waiters int           // writes waiting for busy to clear
	wake    chan struct{} // capacity 1, made on first contention
}

type idemKey struct {
	task TaskKey
	key  string
}

type memRecord struct {
	k    idemKey
	fp   Fingerprint
	done bool
	resp *Response
	used time.Time
	elem *list.Element // in lru once done
}

// NewMemStore returns an empty MemStore.
func NewMemStore(cfg MemStoreConfig) (*MemStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &MemStore{cfg: cfg.withDefaults(), seed: maphash.MakeSeed(), idem: make(map[idemKey]*memRecord),
		holders: make(map[string]int)}
	for i := range s.shards {
		s.shards[i].tasks = make(map[TaskKey]*memTask)
	}
	return s, nil
}

func (s *MemStore) shard(k TaskKey) *memShard {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(k.Tenant)
	h.WriteByte(0)
	h.WriteString(k.Task)
	return &s.shards[h.Sum64()%memShards]
}

// taskLocked returns the task entry, creating it within the MaxTasks
// bound and the holder's MaxTasksPerHolder share.
func (s *MemStore) taskLocked(sh *memShard, k TaskKey, holder string) (*memTask, error) {
	if t := sh.tasks[k]; t != nil {
		return t, nil
	}
	s.holdersMu.Lock()
	defer s.holdersMu.Unlock()
	if n := s.holders[holder]; n >= s.cfg.MaxTasksPerHolder {
		return nil, fmt.Errorf("%w: holder %q has %d tasks, its limit (MaxTasksPerHolder %d of the table's %d); max_seen is never evicted",
			ErrHolderFull, holder, n, s.cfg.MaxTasksPerHolder, s.cfg.MaxTasks)
	}
	for {
		n := s.ntasks.Load()
		if n >= int64(s.cfg.MaxTasks) {
			return nil, fmt.Errorf("%w: task table holds %d tasks (MaxTasks); max_seen is never evicted", ErrStoreFull, n)
		}
		if s.ntasks.CompareAndSwap(n, n+1) {
			break
		}
	}
	s.holders[holder]++
	t := &memTask{}
	sh.tasks[k] = t
	return t, nil
}

// MaxSeen returns the highest epoch seen for a task.
func (s *MemStore) MaxSeen(k TaskKey) (uint64, bool) {
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.tasks[k]
	if t == nil {
		return 0, false
	}
	return t.maxSeen, true
}

// Len returns how many tasks and idempotency records (running and done)
// the store holds.
func (s *MemStore) Len() (tasks, records int) {
	s.idemMu.Lock()
	defer s.idemMu.Unlock()
	return int(s.ntasks.Load()), len(s.idem)
}

// Do implements Store.
func (s *MemStore) Do(ctx context.Context, w Write, fn WriteFunc) (*Response, Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	sh := s.shard(w.Key)
	sh.mu.Lock()
	t, err := s.taskLocked(sh, w.Key, w.Holder)
	if err != nil {
		sh.mu.Unlock()
		return nil, 0, err
	}
	var claim *memRecord
	for first := true; ; first = false {
		// Checked again after every wait: a higher epoch may have been
		// accepted meanwhile, and this write must not take effect after it.
		if w.Epoch < t.maxSeen && !FencingDisabled {
			seen := t.maxSeen
			// This write may have consumed the wake-up meant for the
			// next waiter; pass it on.
			s.handOn(t)
			sh.mu.Unlock()
			s.release(claim)
			return nil, 0, &StaleError{Epoch: w.Epoch, MaxSeen: seen}
		}
		if first && w.IdempotencyKey != "" {
			var replay *Response
			claim, replay, err = s.claim(w)
			if err != nil {
				sh.mu.Unlock()
				return nil, 0, err
			}
			if replay != nil {
				// A replay is accepted without taking the task: nothing
				// new takes effect, but the newer epoch becomes the floor.
				t.maxSeen = w.Epoch
				sh.mu.Unlock()
				return replay, Replayed, nil
			}
		}
		if !t.busy {
			// The check, the raise of max_seen and taking the task happen
			// in one critical section; the write runs before anyone else's
			// for this task can be accepted.
			t.busy = true
			t.maxSeen = w.Epoch
			sh.mu.Unlock()
			break
		}
		if t.wake == nil {
			t.wake = make(chan struct{}, 1)
		}
		t.waiters++
		wake := t.wake
		sh.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		sh.mu.Lock()
		t.waiters--
		if err := ctx.Err(); err != nil {
			s.handOn(t)
			sh.mu.Unlock()
			s.release(claim)
			return nil, 0, err
		}
	}

	committed := false
	defer func() {
		// Runs on error paths and when fn panics: a claim must never stay
		// in progress after its write is gone, nor the task stay taken.
		if !committed {
			s.release(claim)
		}
		sh.mu.Lock()
		t.busy = false
		s.handOn(t)
		sh.mu.Unlock()
	}()
	resp, err := fn(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrWriteFailed, err)
	}
	if resp == nil {
		return nil, 0, fmt.Errorf("%w: handler returned no response", ErrWriteFailed)
	}
	if !resp.Recordable() {
		return resp, Executed, nil
	}
	if claim != nil {
		s.complete(claim, resp)
	}
	committed = true
	return resp, Executed, nil
}

// handOn wakes one waiter of t if the task is free; a wake-up already
// pending in the buffer serves the same purpose. Called with the shard
// lock held.
func (s *MemStore) handOn(t *memTask) {
	if !t.busy && t.waiters > 0 {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// claim looks the idempotency key up and, when absent, inserts a running
// record. It returns the stored response for a replay.
func (s *MemStore) claim(w Write) (*memRecord, *Response, error) {
	k := idemKey{task: w.Key, key: w.IdempotencyKey}
	now := s.cfg.Now()
	s.idemMu.Lock()
	defer s.idemMu.Unlock()
	s.expireLocked(now)
	if rec := s.idem[k]; rec != nil {
		switch {
		case !rec.done:
			return nil, nil, fmt.Errorf("%w: key %q", ErrInProgress, w.IdempotencyKey)
		case rec.fp != w.Fingerprint:
			return nil, nil, fmt.Errorf("%w: key %q", ErrPayloadMismatch, w.IdempotencyKey)
		}
		rec.used = now
		s.lru.MoveToBack(rec.elem)
		return nil, copyResponse(rec.resp), nil
	}
	if len(s.idem) >= s.cfg.MaxIdempotencyRecords {
		oldest := s.lru.Front()
		if oldest == nil {
			return nil, nil, fmt.Errorf("%w: %d idempotency records, all in progress", ErrStoreFull, len(s.idem))
		}
		s.removeLocked(oldest.Value.(*memRecord))
	}
	rec := &memRecord{k: k, fp: w.Fingerprint, used: now}
	s.idem[k] = rec
	return rec, nil, nil
}

func (s *MemStore) complete(rec *memRecord, resp *Response) {
	s.idemMu.Lock()
	defer s.idemMu.Unlock()
	rec.done = true
	rec.resp = copyResponse(resp)
	rec.used = s.cfg.Now()
	rec.elem = s.lru.PushBack(rec)
}

func (s *MemStore) release(rec *memRecord) {
	if rec == nil {
		return
	}
	s.idemMu.Lock()
	defer s.idemMu.Unlock()
	if s.idem[rec.k] == rec {
		delete(s.idem, rec.k)
	}
}

func (s *MemStore) expireLocked(now time.Time) {
	for e := s.lru.Front(); e != nil; e = s.lru.Front() {
		rec := e.Value.(*memRecord)
		if now.Sub(rec.used) < s.cfg.IdempotencyTTL {
			return
		}
		s.removeLocked(rec)
	}
}

func (s *MemStore) removeLocked(rec *memRecord) {
	s.lru.Remove(rec.elem)
	delete(s.idem, rec.k)
}

func copyResponse(r *Response) *Response {
	c := &Response{Status: r.Status, Body: append([]byte(nil), r.Body...)}
	if r.Header != nil {
		c.Header = make(map[string][]string, len(r.Header))
		for k, v := range maps.All(r.Header) {
			c.Header[k] = append([]string(nil), v...)
		}
	}
	return c
}
