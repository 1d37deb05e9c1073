package raftstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/migrate"
	"go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// The raft log and stable store live in a segmented write-ahead log
// (hashicorp/raft-wal, Consul's log store) in DataDir/raft-wal. Why not
// bolt (raft.db, what earlier releases wrote): a bolt commit fsyncs twice (the
// data pages, then the meta page), and hashicorp/raft appends on the leader
// before it replicates, so a lone write waited for four fsyncs in series
// (two on the leader, two on a follower). The WAL appends each batch to a
// preallocated segment file and fsyncs it once, so a lone write waits for
// two; a batch of any size still costs one fsync per member (group commit).
// Nothing is acknowledged earlier than before: StoreLogs returns only after
// the fsync, and raft counts a member's copy only after StoreLogs returns,
// so an acknowledged entry is on the disk of a majority. The WAL's files are
// read with pread, not mapped, so the log no longer shows in the member's
// RSS the way bolt's mmap did.
const (
	walDirName     = "raft-wal"
	boltFileName   = "raft.db"
	lockFileName   = "LOCK"
	walSegmentSize = 16 << 20
	// migrateBatchBytes bounds the entries copied in one WAL append while a
	// bolt log is migrated.
	migrateBatchBytes = 4 << 20
)

// dirLock is an exclusive flock on DataDir/LOCK, held while the node runs:
// a second process on the same data dir fails within boltOpenTimeout
// instead of sharing (and corrupting) the log.
type dirLock struct{ f *os.File }

func lockDataDir(dir string, limit time.Duration) (*dirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(limit)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &dirLock{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("timeout: another process holds %s", f.Name())
			}
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (l *dirLock) release() {
	if l != nil && l.f != nil {
		_ = l.f.Close() // closing the file drops the flock
		l.f = nil
	}
}

// openLogStore opens the node's WAL, first migrating a bolt log left by a
// earlier release (migrateBolt's doc says how that stays crash safe).
func openLogStore(dataDir string, log hclog.Logger) (*walStore, error) {
	walDir := filepath.Join(dataDir, walDirName)
	boltPath := filepath.Join(dataDir, boltFileName)
	_, werr := os.Stat(walDir)
	_, berr := os.Stat(boltPath)
	switch {
	case werr == nil && berr == nil:
		// A migration finished but crashed before removing the old file.
		if err := os.Remove(boltPath); err != nil {
			return nil, fmt.Errorf("remove migrated %s: %w", boltPath, err)
		}
	case errors.Is(werr, os.ErrNotExist) && berr == nil:
		if err := migrateBolt(dataDir, boltPath, walDir, log); err != nil {
			return nil, err
		}
	}
	return openWAL(walDir, log)
}

// walStore is the node's log and stable store. v0.4.1 is the floor:
// v0.4.0 left a sealed segment without its index block when raft
// truncated the log's tail inside it (a follower overwriting an uncommitted
// suffix), so the next open failed with "sealed segment has no index
// block" (hashicorp/raft-wal#31, fixed by #33); its Close also left the
// meta store's bolt file locked. TestTailTruncationSurvivesReopen holds
// the first, TestReopenInOneProcess the second.
type walStore = wal.WAL

func openWAL(dir string, log hclog.Logger) (*walStore, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir, wal.WithSegmentSize(walSegmentSize), wal.WithLogger(log.Named("wal")), wal.WithMetaStore(meta))
	if err != nil {
		_ = meta.Close()
		return nil, err
	}
	return w, nil
}

// migrateBolt copies a bolt log and its stable keys (term, vote) into a
// new WAL. It builds the WAL in a temporary directory and renames it into
// place only once complete (then removes raft.db), so a crash at any point
// leaves either the bolt log alone, which is migrated again, or a complete
// WAL.
func migrateBolt(dataDir, boltPath, walDir string, log hclog.Logger) error {
	tmp := walDir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("clear %s: %w", tmp, err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: boltPath, NoSync: true,
		BoltOptions: &bbolt.Options{Timeout: boltOpenTimeout, ReadOnly: true}})
	if err != nil {
		return fmt.Errorf("open %s to migrate: %w", boltPath, err)
	}
	err = copyBolt(tmp, bolt, log)
	if cerr := bolt.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("migrate %s to %s: %w", boltPath, walDir, err)
	}
	if err := os.Rename(tmp, walDir); err != nil {
		return err
	}
	if err := syncDir(dataDir); err != nil {
		return err
	}
	log.Info("migrated the raft log from bolt to the write-ahead log", "from", boltPath, "to", walDir)
	if err := os.Remove(boltPath); err != nil {
		return err
	}
	return syncDir(dataDir)
}

// copyBolt writes bolt's stable keys and entries into a new WAL in dir.
func copyBolt(dir string, bolt *raftboltdb.BoltStore, log hclog.Logger) error {
	dst, err := openWAL(dir, log)
	if err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	ctx := context.Background()
	err = copyStable(dst, bolt)
	var last uint64
	if err == nil {
		last, err = bolt.LastIndex()
	}
	if err == nil && last > 0 { // an empty log has nothing to copy
		err = migrate.CopyLogs(ctx, dst, bolt, migrateBatchBytes, nil)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}

// raftStableUints and raftStableKeys are the stable-store keys
// hashicorp/raft v1.7 writes (its raft.go), the only ones a migration must
// carry: the current term and the last vote.
var (
	raftStableUints = []string{"CurrentTerm", "LastVoteTerm"}
	raftStableKeys  = []string{"LastVoteCand"}
)

// copyStable copies the keys raft has written; a member that never voted
// has no vote keys, which is not an error (raft-wal's migrate.CopyStable
// would refuse it).
func copyStable(dst *walStore, src *raftboltdb.BoltStore) error {
	for _, k := range raftStableUints {
		v, err := src.GetUint64([]byte(k))
		if errors.Is(err, raftboltdb.ErrKeyNotFound) {
			continue
		}
		if err == nil {
			err = dst.SetUint64([]byte(k), v)
		}
		if err != nil {
			return fmt.Errorf("stable key %s: %w", k, err)
		}
	}
	for _, k := range raftStableKeys {
		v, err := src.Get([]byte(k))
		if errors.Is(err, raftboltdb.ErrKeyNotFound) {
			continue
		}
		if err == nil {
			err = dst.Set([]byte(k), v)
		}
		if err != nil {
			return fmt.Errorf("stable key %s: %w", k, err)
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
